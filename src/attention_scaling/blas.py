"""How many threads NumPy's BLAS runs in this package's processes: one. A pool of worker
processes, one per core, already uses every core, and each process's own BLAS threads (one
per core again) only contend with the others and the server's event loop: on 2 cores an
offline export took 34 s with them and 22 s without (docs/benchmarks.md). BLAS reads its
setting once, as NumPy loads, so :func:`one_thread` runs before a process imports NumPy: at
the command line's start (cli.py, which imports nothing heavy first) and before a pool
starts its processes (they inherit the environment). Nothing here imports NumPy."""

from __future__ import annotations

import os

#: The environment variables that set how many threads NumPy's BLAS starts: OpenBLAS's (the
#: wheels'), and OpenMP's and MKL's for other builds.
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def one_thread() -> None:
    """Processes started from here on (and this one, if it has not loaded NumPy yet) run BLAS
    on one thread, where the environment does not already say otherwise."""
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, "1")
