"""A served training run, in-process on a Bokeh server: the loop stays free while it trains at
the heaviest setting, it ends as core's run, and it stops when its session's connection is
lost or its session ends."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest
from bokeh.application import Application
from bokeh.application.handlers.function import FunctionHandler
from bokeh.events import ConnectionLost
from bokeh.models import ColumnDataSource
from bokeh.server.server import Server as BokehServer
from conftest import free_port, run_in_thread
from tornado.httpclient import AsyncHTTPClient

from attention_scaling import core, training
from attention_scaling.argument import TRAINING_STEPS
from attention_scaling.page import Explorer
from attention_scaling.state import ExplorerState

HEAVIEST = dict(d_k=4096, keys=64)


@pytest.fixture
def advances(monkeypatch) -> list:
    """Every TrainingRun.advance call (from any thread): the thread that made it."""
    calls = []
    advance = core.TrainingRun.advance

    def counted(run, count):
        calls.append(threading.get_ident())
        return advance(run, count)

    monkeypatch.setattr(core.TrainingRun, "advance", counted)
    return calls


async def served(settings: dict, **server_args):
    """An in-process Bokeh server whose session holds an Explorer at ``settings`` on the
    training tab that starts training at once; (server, explorer, document) once a request
    has made the session."""
    made = []

    def build(doc):
        explorer = Explorer(ExplorerState(tab="training", **settings))
        doc.add_root(explorer.view.root)
        doc.add_next_tick_callback(explorer.start_training)
        made.append((explorer, doc))

    port = free_port()
    server_args.setdefault("unused_session_lifetime_milliseconds", 600_000)
    # unsigned, whatever Bokeh's process-wide defaults (another test may have set them)
    server_args.setdefault("sign_sessions", False)
    server_args.setdefault("secret_key", None)
    server = BokehServer({"/": Application(FunctionHandler(build))}, port=port,
                         address="127.0.0.1", **server_args)
    server.start()
    await AsyncHTTPClient().fetch(f"http://127.0.0.1:{port}/", request_timeout=120)
    return server, *made[0]


def steps_shown(explorer) -> int:
    return len(explorer.view.argument.tabs["training"].source.data.get("step", []))


async def until(condition, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "timed out"
        await asyncio.sleep(0.02)


async def slice_under_way_ended() -> None:
    """Until the training thread has ended the slice it was running (a stopped job takes no
    slice after it)."""
    await until(lambda: training.scheduler().running is None)


def test_the_loop_answers_while_a_run_trains_at_the_heaviest_setting(advances):
    """The server's loop is never held by training at d_k = 4096 with 64 keys (a step of the
    three rules there takes ~0.2 s): every step is taken off the loop's thread, and a 10 ms
    timer on the loop fires while each of three slices of the curves is on show. (How late
    it fires is timed by `make bench`, section fairness: a bystander's answers while six
    sessions train at this setting.)"""
    async def scenario():
        server, explorer, doc = await served(HEAVIEST)
        loop_thread = threading.get_ident()
        try:
            ticks = []          # the steps shown at each tick of the timer, in order
            while len(set(ticks) - {0}) < 3:        # until it has seen three slices
                await asyncio.sleep(0.01)
                ticks.append(steps_shown(explorer))
                assert len(ticks) < 60_000, "three more slices were not shown in 10 min"
            doc.callbacks.trigger_event(ConnectionLost())
            return loop_thread, ticks
        finally:
            server.stop()

    loop_thread, ticks = run_in_thread(scenario, timeout=900)
    assert advances and loop_thread not in advances
    shown = [n for n in sorted(set(ticks)) if n > 0]     # each seen by a tick of the timer
    assert len(shown) >= 3 and shown[-1] < TRAINING_STEPS + 1
    assert ticks == sorted(ticks)       # the curves only grow


def sweep_points_shown(explorer) -> int:
    data = explorer.view.argument.tabs["training"].sweep_source.data
    return sum(int(np.isfinite(data.get(f"final_median_{r}", [])).sum()) for r in core.RULES)


def test_a_served_run_ends_as_cores_run_with_nothing_left_scheduled():
    """The runs end as core's; then the learning-rate sweep at their setting fills its chart
    point by point (the Train button usable meanwhile), each point the median of core's runs
    at its rate; then nothing is left scheduled."""
    async def scenario():
        server, explorer, doc = await served(dict(d_k=64, keys=8, seed=4242))
        try:
            await until(lambda: steps_shown(explorer) == TRAINING_STEPS + 1)
            await until(lambda: not explorer.view.train_button.disabled, timeout=10)
            seen, tab = set(), explorer.view.argument.tabs["training"]
            while "Learning-rate sweep: " not in tab.status.text:      # its end shown
                seen.add(sweep_points_shown(explorer))
                await asyncio.sleep(0.02)
            # the sweep's end: its callbacks removed
            await until(lambda: not doc.session_callbacks, timeout=10)
            return (dict(tab.source.data), dict(tab.sweep_source.data), seen,
                    tab.status.text, explorer.view.train_button.disabled,
                    list(doc.session_callbacks))
        finally:
            server.stop()

    data, sweep, seen, status, disabled, callbacks = run_in_thread(scenario, timeout=240)
    assert len(seen) > 3                          # points shown as they arrived
    assert "Learning-rate sweep: " in status
    seed = 4242
    for rule in core.RULES:     # each point: the median of core's runs at its rate
        rates = [x for x in sweep[f"lr_{rule}"] if np.isfinite(x)]
        assert rates[0] < core.rule_learning_rate(rule, 64) < rates[-1]
        for lr, median in zip(rates, sweep[f"final_median_{rule}"]):
            own = np.median([core.train(64, rule, seed + i, lr=lr).final_loss for i in range(3)])
            assert median == own, (rule, lr)
        best = int(np.nanargmin(sweep[f"final_median_{rule}"]))
        assert sweep[f"best_{rule}"][best] == sweep[f"final_median_{rule}"][best]
    for rule in core.RULES:     # core's runs from the seed and the next two, at its rates
        runs = [core.train(64, rule, seed + i, temperature=1.0, steps=TRAINING_STEPS, n_keys=8,
                           lr=core.rule_learning_rate(rule, 64)) for i in range(3)]
        for metric in ("loss", "log10_grad_wq", "log10_grad_wk"):
            by_step = np.array([getattr(run, metric) for run in runs])
            assert data[f"{metric}_median_{rule}"] == np.median(by_step, axis=0).tolist()
        for metric in ("loss",):
            by_step = np.array([getattr(run, metric) for run in runs])
            assert data[f"{metric}_min_{rule}"] == by_step.min(axis=0).tolist()
            assert data[f"{metric}_max_{rule}"] == by_step.max(axis=0).tolist()
    assert not disabled
    assert callbacks == []


def test_a_run_stops_when_its_connection_is_lost_and_can_start_again(advances):
    """What the server does when a session's last websocket closes (Bokeh's ConnectionLost
    through the document's Python event callbacks) stops the run: no more steps, nothing
    left scheduled, the Train button usable again, and Train starts a new run."""
    async def scenario():
        server, explorer, doc = await served(HEAVIEST)
        try:
            await until(lambda: steps_shown(explorer) > 1)
            doc.callbacks.trigger_event(ConnectionLost())
            await slice_under_way_ended()
            taken = len(advances)
            await asyncio.sleep(1.5)
            after = (len(advances) - taken, list(doc.session_callbacks),
                     explorer.view.train_button.disabled)
            doc.add_next_tick_callback(explorer.start_training)
            await until(lambda: len(advances) > taken + 3)
            doc.callbacks.trigger_event(ConnectionLost())
            return after
        finally:
            server.stop()

    more, callbacks, disabled = run_in_thread(scenario, timeout=240)
    assert more == 0
    assert callbacks == []
    assert not disabled


def test_a_run_stops_when_its_session_is_destroyed(advances):
    """A session nobody connects to is destroyed after Bokeh's unused-session lifetime
    (here 1 s): its run takes no more steps."""
    async def scenario():
        server, explorer, doc = await served(
            HEAVIEST, unused_session_lifetime_milliseconds=1000,
            check_unused_sessions_milliseconds=200)
        try:
            await until(lambda: len(advances) > 0)
            await until(lambda: not server.get_sessions("/"), timeout=30)
            await slice_under_way_ended()
            taken = len(advances)
            await asyncio.sleep(1.5)
            return len(advances) - taken
        finally:
            server.stop()

    assert run_in_thread(scenario, timeout=240) == 0


def test_train_while_the_sweep_is_under_way_at_that_setting_changes_nothing():
    """A Train click while the runs' sweep is under way (the button is usable then) neither
    restarts the runs nor the sweep: the same runs and sweep go on to the sweep's end."""
    async def scenario():
        server, explorer, doc = await served(dict(d_k=64, keys=8, seed=5151))
        try:
            tab = explorer.view.argument.tabs["training"]
            await until(lambda: "Sweeping learning rates" in tab.status.text, timeout=120)
            runs, sweep = explorer.training.runs, explorer.training.sweep
            for _ in range(3):
                doc.add_next_tick_callback(explorer.start_training)
                await asyncio.sleep(0.3)
            same = explorer.training.runs is runs and explorer.training.sweep is sweep
            await until(lambda: "Learning-rate sweep: " in tab.status.text, timeout=180)
            return same, explorer.training.runs is runs, sweep.done
        finally:
            server.stop()

    assert run_in_thread(scenario, timeout=240) == (True, True, True)


def test_a_run_is_shown_in_new_rows_only_one_update_a_slice(monkeypatch):
    """After its first show, each update of a run adds only its new rows to the training
    source (a stream) and changes only the sweep's new rows and changed cells (a stream and a
    patch), never the whole data; the page is updated at most once per slice the scheduler
    ran, and each slice but the ends of the runs and of the sweep trained at least
    TRAINING_SLICE_S (so at most 1 / TRAINING_SLICE_S updates a second)."""
    async def scenario():
        server, explorer, doc = await served(dict(d_k=64, keys=8, seed=6262))
        tab = explorer.view.argument.tabs["training"]
        shows = []
        show = tab.show

        def counted(*args, **kwargs):
            shows.append(explorer.training.job)
            return show(*args, **kwargs)

        tab.show = counted
        try:
            await until(lambda: explorer.training.job is not None)
            job = explorer.training.job
            await until(lambda: "Learning-rate sweep: " in tab.status.text, timeout=180)
            return None, shows, job, dict(tab.source.data)
        finally:
            server.stop()

    calls = []
    for method in ("stream", "patch"):
        def record(source, new, *args, _method=method, _real=getattr(ColumnDataSource, method),
                   **kwargs):
            calls.append((source.name, _method, new))
            return _real(source, new, *args, **kwargs)
        monkeypatch.setattr(ColumnDataSource, method, record)
    _, shows, job, data = run_in_thread(scenario, timeout=240)
    streamed = [c for c in calls if c[0] == "training-source"]
    assert len(streamed) > 1 and all(method == "stream" for _, method, _ in streamed)
    rows = [len(new["step"]) for _, _, new in streamed]
    first = TRAINING_STEPS + 1 - sum(rows)          # the rows of the first show, set whole
    assert all(n > 0 for n in rows) and first >= 0
    assert data["step"] == list(range(TRAINING_STEPS + 1))
    steps = [s for _, _, new in streamed for s in new["step"]]
    assert steps == list(range(first, TRAINING_STEPS + 1))       # each row once, in order
    sweep_calls = [c for c in calls if c[0] == "training-lr-sweep-source"]
    assert sweep_calls and all(len(next(iter(new.values()))) < 40 if method == "stream"
                               else True for _, method, new in sweep_calls)
    # the shows of this run: at most one a slice, and one before the first
    assert len([j for j in shows if j is job]) <= len(job.slices) + 1
    assert len(job.slices) <= 2 + sum(job.slices) / training.TRAINING_SLICE_S


class _Units:
    def __iter__(self):
        return self

    def __next__(self):
        return None


def test_runs_per_address_are_capped_and_the_refusal_said_once(caplog):
    """Past runs_per_address jobs under way from one address, submit refuses (logged once
    for that address); a loopback address is not capped; a stopped job frees its place."""
    scheduler = training.Scheduler(runs_per_address=2)
    account = training.Account()

    def submit(address):
        return scheduler.submit(account, address, _Units(), lambda job, done: None)

    first, second = submit("10.1.2.3"), submit("10.1.2.3")
    with caplog.at_level("WARNING", logger="attention_scaling.training"):
        refused = [submit("10.1.2.3"), submit("10.1.2.3")]
    other = submit("10.9.9.9")
    local = [submit("127.0.0.1") for _ in range(4)]
    first.stop()
    again = submit("10.1.2.3")
    for job in [second, other, *local, again]:
        job.stop()
    assert first is not None and second is not None and other is not None
    assert refused == [None, None]
    assert all(job is not None for job in local)
    assert again is not None
    said = [r for r in caplog.records if "10.1.2.3" in r.getMessage()]
    assert len(said) == 1


def test_the_session_that_used_least_training_time_goes_next():
    """With one session's account far ahead, the other's ready job takes every slice until it
    has caught up (order: by measured seconds used, not by turns)."""
    scheduler = training.Scheduler()
    ahead, behind = training.Account(), training.Account()
    ahead.used_s = 1e6
    order = []

    def units(name):
        while True:
            order.append(name)
            yield

    jobs = {}
    for name, account in (("ahead", ahead), ("behind", behind)):
        jobs[name] = scheduler.submit(account, "", units(name), lambda job, done: job.resume())
    deadline = time.monotonic() + 60
    while order.count("behind") < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    for job in jobs.values():
        job.stop()
    # the first job submitted may take the very first slice; every slice after that is behind's
    assert order.count("behind") >= 3
    first_behind = order.index("behind")
    assert "ahead" not in order[first_behind:]
