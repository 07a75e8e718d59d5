"""The served training runs' scheduler: one process-wide thread trains every session's runs a
slice at a time, the session that has used the least training time so far first (measured
seconds, not turns), each slice bounded by time, and at most a set number of runs under way
per client address. The page (page.Explorer) hands it a job and shows each slice on the
server's loop; a worker pool would take the jobs from here."""

from __future__ import annotations

import ipaddress
import itertools
import logging
import threading
import time
from typing import Callable, Iterator

log = logging.getLogger(__name__)

#: A slice trains until this long has passed (or its work ends), at least one unit of work: a
#: step of one seed's run, or of a sweep's point. One slice is one update of the page, so a
#: session's page gets at most 1 / TRAINING_SLICE_S updates a second.
TRAINING_SLICE_S = 0.1

#: After each slice the thread rests as long as the slice took: training takes at most half a
#: core, whatever the number of runs, and the class's changes keep the rest (with six runs at
#: the heaviest setting, a bystander's answer stayed under twice its quiet time only with the
#: rest: tests/test_fairness.py).
TRAINING_REST = 1.0

#: The addresses whose refusal the log has told (each once, the first 64).
_SAID_MAX = 64


class Account:
    """One session's training time: the measured seconds its slices took, over every run it
    started (a run started again keeps what the session used)."""

    def __init__(self) -> None:
        self.used_s = 0.0


class Job:
    """One session's work on the training thread: ``units`` (an iterator; each ``next`` a
    unit of work), charged to ``account``. After each slice the scheduler calls
    ``on_slice(job, done)`` on its thread (``done``: the units are exhausted, or one
    raised); the job takes its next slice only after :meth:`resume` (the page has shown the
    slice: the work's objects are not read while they change), of new units once done. It
    is under way (and counts against its address) until :meth:`stop`: no unit after the one
    under way."""

    def __init__(self, scheduler: "Scheduler", account: Account, address: str,
                 units: Iterator, on_slice: Callable[["Job", bool], None]) -> None:
        self.scheduler, self.account, self.address = scheduler, account, address
        self.units, self.on_slice = units, on_slice
        self.ready = True
        self.stopped = False
        #: The slices taken, and the seconds each took.
        self.slices: list[float] = []

    def resume(self, units: Iterator | None = None) -> None:
        """Take the next slice (of ``units`` from now on, when given)."""
        self.scheduler._resume(self, units)

    def stop(self) -> None:
        self.scheduler._stop(self)


class Scheduler:
    """The training thread and its jobs (:class:`Job`). ``runs_per_address``: jobs under way
    from one client address at most (0: no limit; loopback addresses are not limited: a proxy
    on this machine, or the load test, speaks for many)."""

    def __init__(self, runs_per_address: int = 0) -> None:
        self.runs_per_address = runs_per_address
        self._jobs: list[Job] = []
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._said: set[str] = set()
        #: The job whose slice is under way, or None.
        self.running: Job | None = None

    def submit(self, account: Account, address: str, units: Iterator,
               on_slice: Callable[[Job, bool], None]) -> Job | None:
        """A job for ``units``, or None when ``address`` has runs_per_address jobs under way
        (said once per address in the log)."""
        with self._cond:
            if self.runs_per_address and not is_loopback(address) and sum(
                    job.address == address for job in self._jobs) >= self.runs_per_address:
                if address not in self._said and len(self._said) < _SAID_MAX:
                    self._said.add(address)
                    log.warning("Refused a training run from %s: %d under way from that "
                                "address (the limit per address)", address[:60],
                                self.runs_per_address)
                return None
            job = Job(self, account, address, units, on_slice)
            self._jobs.append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, daemon=True,
                                                name="attention-scaling-training")
                self._thread.start()
            self._cond.notify()
            return job

    def _resume(self, job: Job, units: Iterator | None) -> None:
        with self._cond:
            if job.stopped:
                return
            if units is not None:
                job.units = units
            job.ready = True
            self._cond.notify()

    def _stop(self, job: Job) -> None:
        with self._cond:
            job.stopped = True
            if job in self._jobs:
                self._jobs.remove(job)

    def _next(self) -> Job:
        """The ready job whose session has used the least training time (the earlier job on a
        tie), once there is one; taken (not ready) until resumed."""
        with self._cond:
            while True:
                ready = [job for job in self._jobs if job.ready]
                if ready:
                    job = min(ready, key=lambda j: j.account.used_s)
                    job.ready = False
                    self.running = job
                    return job
                self._cond.wait()

    def _work(self) -> None:
        while True:
            job = self._next()
            start = time.perf_counter()
            done, failed = train_slice(job, start + TRAINING_SLICE_S)
            took = time.perf_counter() - start
            with self._cond:
                job.account.used_s += took
                job.slices.append(took)
                self.running = None
            if failed is not None:
                log.error("A training run failed: %r", failed)
                self._stop(job)
            if failed is not None or not job.stopped:
                try:
                    job.on_slice(job, done)
                except Exception:            # the page's show: its failure ends only its job
                    log.exception("Could not hand a training slice to its page")
                    self._stop(job)
            time.sleep(TRAINING_REST * took)


def train_slice(job: Job, end: float) -> tuple[bool, Exception | None]:
    """Units of ``job`` until ``end`` (perf_counter) has passed, at least one, none once it is
    stopped: (whether its work has ended, the exception a unit raised, which ends it)."""
    while not job.stopped:
        try:
            next(job.units)
        except StopIteration:
            return True, None
        except Exception as exc:           # noqa: BLE001 - reported, the thread goes on
            return True, exc
        if time.perf_counter() >= end:
            break
    return False, None


def run_steps(runs: dict) -> Iterator[None]:
    """The units of ``runs`` (rule -> core.SeededTraining): a step of one seed's run at a time,
    every run a step in turn, until every run is done."""
    while not all(run.done for run in runs.values()):
        for seeded in runs.values():
            for run in seeded.runs:
                if not run.done:
                    run.advance(1)
                    yield


def sweep_steps(sweep) -> Iterator[None]:
    """The units of a core.LearningRateSweep: a step of its point under way at a time."""
    while not sweep.done:
        sweep.advance(1)
        yield


def is_loopback(address: str) -> bool:
    """Whether a client address is this machine's (a proxy here, or a test)."""
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


_scheduler: Scheduler | None = None
_scheduler_lock = threading.Lock()


def scheduler() -> Scheduler:
    """The process's one training scheduler (its thread started by its first job)."""
    global _scheduler
    with _scheduler_lock:
        if _scheduler is None:
            _scheduler = Scheduler()
        return _scheduler
