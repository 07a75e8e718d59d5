"""Heavy work in its place (work.py): a served session's new setting is computed in the
worker pool, never in the server's process, and the page applies it once the results have
joined the caches; meanwhile the page says so, and the newest change wins."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
from bokeh.application import Application
from bokeh.application.handlers.function import FunctionHandler
from bokeh.server.server import Server as BokehServer
from conftest import free_port, run_in_thread
from tornado.httpclient import AsyncHTTPClient

from attention_scaling import blas, core, page, work
from attention_scaling.page import Explorer
from attention_scaling.state import ExplorerState

CURVES = core.MEMOS["_saturation_curves"]


def uncached_temperatures(n_keys: int, align: float, count: int) -> list[float]:
    """``count`` temperatures whose saturation curves at (n_keys, align) this process has not
    computed (this test's own precondition: another test may have filled some), from the
    hottest down: none is another's half, which a question looks at, nor T = 1 or its half,
    which the first view computes."""
    found = [t for t in reversed(core.TEMPERATURES[13:])
             if not CURVES.has(t, n_keys, align)]
    if len(found) < count:
        pytest.skip("this process has computed the curves of too many temperatures already")
    return found[:count]


async def served(settings: dict):
    """An in-process Bokeh server whose session holds an Explorer at ``settings``;
    (server, explorer, document) once a request has made the session."""
    made = []

    def build(doc):
        explorer = Explorer(ExplorerState(**settings))
        doc.add_root(explorer.view.root)
        made.append((explorer, doc))

    port = free_port()
    server = BokehServer({"/": Application(FunctionHandler(build))}, port=port,
                         address="127.0.0.1", unused_session_lifetime_milliseconds=600_000,
                         sign_sessions=False, secret_key=None)
    server.start()
    await AsyncHTTPClient().fetch(f"http://127.0.0.1:{port}/", request_timeout=120)
    return server, *made[0]


async def until(condition, timeout: float = 240) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "timed out"
        await asyncio.sleep(0.02)


async def in_tick(doc, action):
    """Run ``action()`` as the session's own callback (as a browser's change runs); its
    result."""
    done = asyncio.get_running_loop().create_future()
    doc.add_next_tick_callback(lambda: done.set_result(action()))
    return await done


def idle(explorer) -> bool:
    return explorer._computing is None and explorer._pending is None


def test_a_new_setting_is_computed_in_the_pool_and_shown_as_core_computes_it(monkeypatch):
    keys, align = 16, 0.3
    (t,) = uncached_temperatures(keys, align, 1)
    monkeypatch.setattr(page, "BUSY_AFTER_MS", 0)   # the note at once, however short the wait
    events = []

    async def scenario():
        server, explorer, doc = await served(dict(tab="saturation", keys=keys, align=align,
                                                  temperature=1.0))
        try:
            await until(lambda: idle(explorer))
            misses = CURVES.cache_info().misses
            explorer.view.busy.on_change("tags", lambda _a, _o, new: events.append(
                ("busy", "busy-on" in new, explorer.state.temperature)))
            explorer.state.param.watch(lambda e: events.append(("applied", e.new)),
                                       "temperature")
            shown_t = await in_tick(doc, lambda: (explorer.change({"temperature": t}),
                                                  explorer.state.temperature)[1])
            await until(lambda: explorer.state.temperature == t and idle(explorer))
            data = dict(explorer.view.argument.model("saturation-curves-source").data)
            return shown_t, misses, CURVES.cache_info().misses, explorer.view.busy_shown(), data
        finally:
            server.stop()

    shown_t, misses_before, misses_after, busy_after, data = run_in_thread(scenario, 300)
    # while the pool computes, the page says so and still shows the setting it had; then it
    # shows the new one and says nothing more
    assert shown_t == 1.0
    assert events[0] == ("busy", True, 1.0) and ("applied", t) in events
    assert events.index(("busy", True, 1.0)) < events.index(("applied", t))
    # the curves were not computed in this (the server's) process, yet they are cached here
    assert misses_after == misses_before and CURVES.has(t, keys, align)
    assert not busy_after
    # and the page shows them as core computes them, bit for bit
    truth = CURVES.fn(t, keys, align)[0]
    for column in ("max_weight_median_none", "eff_keys_q25_sqrt", "max_weight_q75_sqrt"):
        np.testing.assert_array_equal(np.asarray(data[column], float), truth[column])


def test_the_newest_change_replaces_one_not_yet_started(monkeypatch):
    keys, align = 24, 0.7
    first, middle, last = uncached_temperatures(keys, align, 3)
    submitted = []
    submit = work.submit

    def recorded(values):
        submitted.append(values["temperature"])
        return submit(values)

    monkeypatch.setattr(work, "submit", recorded)

    async def scenario():
        server, explorer, doc = await served(dict(tab="saturation", keys=keys, align=align))
        try:
            await until(lambda: idle(explorer))
            submitted.clear()

            def changes():
                for t in (first, middle, last):
                    explorer.change({"temperature": t})

            await in_tick(doc, changes)
            await until(lambda: explorer.state.temperature == last and idle(explorer))
            return explorer.state.temperature
        finally:
            server.stop()

    final = run_in_thread(scenario, 300)
    assert final == last
    # the first went to the pool at once; the middle one was replaced before it started
    assert submitted[0] == first and middle not in submitted and submitted[-1] == last


def test_a_job_that_leaves_the_caches_short_is_computed_once_on_the_loop(monkeypatch, caplog):
    """Should the pool's results for a change ever leave the caches short of what it shows (a
    cache its records do not reach), the page computes the rest on the server's loop and
    says so in the log, once: the change is shown, and the job is not sent again and again."""
    from concurrent.futures import Future
    keys, align = 12, 0.4
    (t,) = uncached_temperatures(keys, align, 1)
    submitted = []

    def records_nothing(values):
        submitted.append(dict(values))
        job = Future()
        job.set_result([])
        return job

    async def scenario():
        server, explorer, doc = await served(dict(tab="saturation", keys=keys, align=align))
        try:
            await until(lambda: idle(explorer))
            monkeypatch.setattr(work, "submit", records_nothing)
            await in_tick(doc, lambda: explorer.change({"temperature": t}))
            await until(lambda: explorer.state.temperature == t and idle(explorer))
            return explorer.state.temperature
        finally:
            server.stop()

    caplog.set_level("WARNING", logger="attention_scaling.page")
    assert run_in_thread(scenario, 300) == t
    assert [v["temperature"] for v in submitted] == [t]
    short = [r for r in caplog.records if "left the caches short" in r.getMessage()]
    assert len(short) == 1 and work.ready({**work.defaults(), "tab": "saturation",
                                           "keys": keys, "align": align, "temperature": t})


def test_a_change_whose_setting_is_cached_applies_at_once():
    async def scenario():
        server, explorer, doc = await served(dict(tab="saturation"))
        try:
            await until(lambda: idle(explorer))
            d_k = 128 if explorer.state.d_k != 128 else 256
            core.prime(work.prepare({**explorer.controls(), "d_k": d_k}))   # computed before

            def change():
                explorer.change({"d_k": d_k})
                return explorer.state.d_k, explorer._computing, explorer._busy_timer

            return d_k, await in_tick(doc, change)
        finally:
            server.stop()

    d_k, (shown, job, busy) = run_in_thread(scenario, 300)
    # the curves do not depend on d_k: nothing to compute, so nothing waits
    assert shown == d_k and job is None and not busy


def test_a_build_that_fails_is_logged_and_the_next_step_asked_for_is_built(monkeypatch, caplog):
    """A tab whose build on the build thread raises leaves the session free: the failure is
    logged, the page stops saying it is busy, and the next step asked for is built."""
    from attention_scaling.layout import View
    new_argument, calls = View.new_argument, []

    def fails_once(view, keys):
        calls.append(list(keys))
        if len(calls) == 1:
            raise RuntimeError("a build that fails")
        return new_argument(view, keys)

    monkeypatch.setattr(View, "new_argument", fails_once)

    async def scenario():
        server, explorer, doc = await served({})
        try:
            await in_tick(doc, lambda: explorer.change({"tab": "variance"}))
            await until(lambda: calls and explorer._building is None)
            unbuilt = explorer.view.unbuilt()
            await in_tick(doc, lambda: explorer.change({"tab": "gradient"}))
            await until(lambda: "gradient" not in explorer.view.unbuilt())
            return unbuilt, explorer.view.busy_shown()
        finally:
            server.stop()

    unbuilt, busy = run_in_thread(scenario, 300)
    assert calls[0] == ["variance"] and "variance" in unbuilt and not busy
    assert calls[1] == ["gradient"]
    assert "Building the argument's tabs ['variance'] failed" in caplog.text


def test_a_slider_change_does_not_walk_the_document_for_its_models(monkeypatch):
    """A control's change (held: one message) sets data, and the document does not look for
    its models again (Bokeh's ``doc.models.recompute``, a walk of every model): that walk, at
    the end of a frozen block, once cost 100 ms of server CPU per change with the tabs
    built (`make loadtest`). Putting a built tab in place walks it once."""
    from bokeh.document.models import DocumentModelManager
    walks = []
    recompute = DocumentModelManager.recompute
    monkeypatch.setattr(DocumentModelManager, "recompute",
                        lambda manager: walks.append(1) or recompute(manager))

    async def scenario():
        server, explorer, doc = await served({})
        try:
            await until(lambda: idle(explorer))
            counts = []
            for step in (1, -1, 1):
                walks.clear()
                await in_tick(doc, lambda: setattr(explorer.d_k_slider, "value",
                                                   explorer.d_k_slider.value + step))
                await until(lambda: idle(explorer))
                counts.append(len(walks))
            walks.clear()
            await in_tick(doc, lambda: explorer.change({"tab": "variance"}))
            await until(lambda: "variance" not in explorer.view.unbuilt())
            return counts, len(walks)
        finally:
            server.stop()

    counts, placing = run_in_thread(scenario, 300)
    assert counts == [0, 0, 0]
    assert placing >= 1


def test_ready_answers_from_the_caches_alone():
    values = {**work.defaults(), "tab": "saturation", "keys": 48, "align": 0.8}
    t = next((t for t in core.TEMPERATURES if not CURVES.has(t, 48, 0.8)), None)
    if t is None:
        pytest.skip("every temperature's curves are cached in this process")
    values["temperature"] = t
    misses, size = CURVES.cache_info().misses, CURVES.cache_info().currsize
    assert not work.ready(values)
    assert CURVES.cache_info().misses == misses     # it computed nothing
    assert CURVES.cache_info().currsize == size
    core.prime(work.prepare(values))
    assert work.ready(values) and CURVES.cache_info().currsize > size


POOL_THEN_WAIT = """
import sys, time
from attention_scaling import work
if __name__ == "__main__":
    # a job for each worker at once: the pool starts a process per job it cannot give to one
    jobs = [work.pool().submit(time.sleep, 2) for _ in range(work.workers())]
    [job.result(timeout=600) for job in jobs]
    print(" ".join(str(p.pid) for p in __import__("multiprocessing").active_children()),
          flush=True)
    time.sleep(600)
"""


def test_a_pool_whose_server_is_killed_leaves_with_it(tmp_path):
    """A server killed by a signal cannot stop its pool (a container's supervisor then starts
    another): its workers see their parent gone and exit, instead of waiting on their queue
    for ever."""
    import os
    import signal
    import subprocess
    import sys
    script = tmp_path / "pool_then_wait.py"
    script.write_text(POOL_THEN_WAIT, encoding="utf-8")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        children = [int(p) for p in proc.stdout.readline().split()]
        workers = [p for p in children if "spawn_main" in _cmdline(p)]
        assert len(workers) == work.workers(), children
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        deadline = time.monotonic() + 120
        while any(_alive(p) for p in workers):
            assert time.monotonic() < deadline, [_cmdline(p) for p in workers if _alive(p)]
            time.sleep(0.2)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)     # the workers too, if this test failed
        except OSError:
            pass


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended and not yet reaped by its new parent, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


#: A pool's worker processes, each saying how many threads it runs (once NumPy is loaded).
POOL_THREADS = """
import os
from attention_scaling import work
if __name__ == "__main__":
    jobs = [work.pool().submit(os.listdir, "/proc/self/task") for _ in range(8)]
    print(max(len(job.result()) for job in jobs))
    work.shutdown()
"""


def _threads(code: list[str], blas_threads: str | None) -> int:
    """The number a Python process running ``code`` prints, with OPENBLAS_NUM_THREADS set to
    ``blas_threads`` (unset if None)."""
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k not in blas.THREAD_VARIABLES}
    if blas_threads is not None:
        env["OPENBLAS_NUM_THREADS"] = blas_threads
    r = subprocess.run([sys.executable, *code], env=env, capture_output=True, text=True,
                       timeout=120, check=True)
    return int(r.stdout.split()[-1])


@pytest.mark.skipif(work.workers() < 2, reason="one core: BLAS runs one thread anyway")
def test_the_command_line_and_the_pools_workers_run_blas_on_one_thread(tmp_path):
    """A pool of one process per core, each with BLAS threads of its own per core, would only
    contend (blas.py): the command line's process and every worker run one BLAS thread,
    unless the environment says otherwise, which each honours (one thread more with two)."""
    cli = ["-c", "import attention_scaling.cli, numpy, os; print(len(os.listdir("
           "'/proc/self/task')))"]
    assert _threads(cli, None) == 1
    assert _threads(cli, "2") == 2
    script = tmp_path / "pool_threads.py"
    script.write_text(POOL_THREADS, encoding="utf-8")
    assert _threads([str(script)], None) + 1 == _threads([str(script)], "2")


#: A process that has computed nothing: is a view ready once a job's results are primed?
PRIMED_IS_READY = """
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from attention_scaling import core, work
if __name__ == "__main__":
    values = {**work.defaults(), "tab": "saturation", "keys": 16, "align": 0.3,
              "temperature": 10.0}
    before = work.ready(values)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as one:
        one.submit(work.prepare, values).result()
        again = one.submit(work.prepare, values).result()
    core.prime(again)
    print(before, work.ready(values))
"""


def test_a_jobs_results_make_its_view_ready_in_a_process_that_computed_nothing(tmp_path):
    """What a job records is all its view needs, even in a server process that has drawn
    nothing yet (no warm start: `panel serve`, a notebook) and from a worker that had
    computed that view before (its own caches answer, and it must still record every
    result): else the page would send the same job again and again, and never show the
    change."""
    import subprocess
    import sys
    script = tmp_path / "primed_is_ready.py"
    script.write_text(PRIMED_IS_READY, encoding="utf-8")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=300, check=True)
    assert r.stdout.split()[-2:] == ["False", "True"], r.stdout + r.stderr


def test_warming_that_fails_in_the_server_s_loop_says_so_once_as_a_warning(monkeypatch, caplog):
    """The server's loop warms the pool (work.warm, as `attention-scaling serve` calls it).
    When every job fails, as when the pool stops with the server during the warm-up (Ctrl-C
    sends the signal to the workers too), the log holds one warning and no error."""
    import logging
    from concurrent.futures import Future
    from concurrent.futures.process import BrokenProcessPool

    from tornado.ioloop import IOLoop

    def broken(values):
        job = Future()
        job.set_exception(BrokenProcessPool("a worker was terminated"))
        return job

    submitted = []
    monkeypatch.setattr(work, "submit", lambda values: submitted.append(values) or broken(values))
    monkeypatch.setattr(work, "_argument", lambda: None)

    async def main():
        IOLoop.current().add_callback(work.warm)
        while not submitted:
            await asyncio.sleep(0.01)
        for _ in range(20):             # the loop's turns after the callback
            await asyncio.sleep(0)

    with caplog.at_level(logging.WARNING):
        run_in_thread(main, 30)
    assert len(submitted) > 10                         # every first view was asked for
    assert [r.levelname for r in caplog.records] == ["WARNING"], \
        [(r.levelname, r.getMessage()) for r in caplog.records]
    assert "Warming the first views failed" in caplog.records[0].getMessage()
