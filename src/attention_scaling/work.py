"""Heavy work in its place. The core computations a view of the served page needs (the one
draw's state, texts and question; the open tab's curves, spreads, texts and question) run in
a pool of worker processes, one per core, and their results join this process's caches
(core's :class:`core.Memo`); the server's event loop then draws from the caches, which takes
milliseconds. Processes, not threads: the curves are many small NumPy operations, and a
thread computing them beside a busy event loop waits for the interpreter's lock at each one
(measured: 0.8 s of curves took 45 s beside a loop running Python)."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from . import blas, core
from .prose import quiz
from .argument import Argument, trains, with_page
from .state import CONTROLS, TABS, ExplorerState, Setting
from .prose.text import fields_of

log = logging.getLogger(__name__)

_shadow: Argument | None = None
_pool: ProcessPoolExecutor | None = None
_pool_pid: int | None = None
_lock = threading.Lock()


def _argument() -> Argument:
    """This process's own argument tabs, in no document: drawn to find what a tab needs."""
    global _shadow
    if _shadow is None:
        _shadow = Argument()
    return _shadow


def defaults() -> dict:
    """Every control at its default (state.CONTROLS)."""
    return {c.name: c.default for c in CONTROLS}


def needs(values: dict) -> None:
    """Call every cached core computation that showing the controls ``values`` (control
    name -> value, every control) needs: the one draw's state, texts and question, and the
    open argument tab's charts, texts and question."""
    state = ExplorerState(**values)
    fields_of(state)
    r = state.result
    quiz.draw_question(r.d_k, r.temperature, r.seed, len(r.raw_logits), r.align)
    key = state.tab
    if with_page(key) or trains(key):
        return
    setting = Setting.of(state)
    argument = _argument()
    argument.draw(key, setting)
    argument.tabs[key].question(setting)


def ready(values: dict) -> bool:
    """Whether everything :func:`needs` calls is in this process's caches (nothing to
    compute)."""
    try:
        with core.cached_only():
            needs(values)
    except core.NotCached:
        return False
    return True


def prepare(values: dict) -> list:
    """In a worker process: compute what :func:`needs` calls; the results, for
    :func:`core.prime`."""
    with core.recording() as records:
        needs(values)
    return list({(name, args): (name, args, value) for name, args, value in records}.values())


#: How often a worker process looks whether the server that started it is still there.
PARENT_CHECK_S = 1.0


def _start_worker(parent: int) -> None:
    """A worker's start: it leaves when ``parent`` (the server process that started it) is
    gone, and draws its own argument tabs, so that its first job does not pay for them. It
    ignores Ctrl-C, which a terminal sends to the server and its workers alike: the server
    stops the pool (a worker interrupted in its queue printed "Process SpawnProcess-1:")."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_leave_with, args=(parent,), name="leave-with-parent",
                     daemon=True).start()
    _argument()


def _leave_with(parent: int) -> None:
    """Exit this process once ``parent`` is no longer its parent. A server killed by a
    signal (a container's supervisor restarts it) cannot stop its pool, and the workers
    would wait on their queue for ever: three processes and their memory per restart."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os._exit(0)


def workers() -> int:
    """The pool's size: the cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:       # not on Linux
        return max(1, os.cpu_count() or 1)


def pool() -> ProcessPoolExecutor:
    """This process's worker pool (started on first use; a forked server process starts its
    own)."""
    global _pool, _pool_pid
    with _lock:
        if _pool is None or _pool_pid != os.getpid():
            blas.one_thread()
            _pool = ProcessPoolExecutor(max_workers=workers(),
                                        mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_start_worker,
                                        initargs=(os.getpid(),))
            _pool_pid = os.getpid()
        return _pool


def submit(values: dict) -> Future:
    """Compute what ``values`` needs in the pool; the future's result is for
    :func:`core.prime`. A pool broken by a worker's death (killed for its memory, say) is
    replaced, once per call."""
    global _pool
    try:
        return pool().submit(prepare, dict(values))
    except BrokenProcessPool:
        log.warning("The worker pool had broken (a worker process died): starting a new one")
        with _lock:
            _pool = None
        return pool().submit(prepare, dict(values))


def shutdown() -> None:
    """Stop this process's worker pool, if it has one: jobs not started are dropped and
    the workers are terminated (a job under way is a cache fill nobody needs any more, and
    waiting for it would hold the server's exit for seconds)."""
    global _pool
    with _lock:
        running, _pool = (_pool if _pool_pid == os.getpid() else None), None
    if running is None:
        return
    running.shutdown(wait=False, cancel_futures=True)
    children = multiprocessing.active_children()
    for child in children:
        child.terminate()
    for child in children:
        child.join(timeout=5)


def warm() -> None:
    """Compute the first views at the defaults (the one draw at every width and every tab)
    in the pool, and this process's own argument tabs (:func:`ready` draws them). Each job's
    result is primed when it is done; if jobs fail (the pool stopped with the server, a
    worker killed), one warning says so. Nothing is returned for the caller to wait on: the
    server's loop calls it, and Tornado would log each failed job of a returned list as an
    error."""
    start = defaults()
    targets = [{**start, "tab": tab.key} for tab in TABS] + [
        {**start, "d_k": d_k} for d_k in core.D_K_VALUES if d_k != start["d_k"]]
    failed = []

    def done(job: Future) -> None:
        if job.cancelled():
            return
        error = job.exception()
        if error is None:
            core.prime(job.result())
        elif not failed:
            failed.append(error)
            log.warning("Warming the first views failed: %r", error)

    for values in targets:
        submit(values).add_done_callback(done)
    _argument()
