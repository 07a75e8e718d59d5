"""One session's share of the server under load, the scenario of tests/test_fairness.py and
of `make bench`'s section *fairness*: a bystander's slider changes while other sessions train
at the heaviest setting and loop PULL-DOC-REQ (:func:`bystander_under_load`)."""

from __future__ import annotations

import asyncio
import time

from .bokeh_client import Connection, models_by_name
from .processes import run_in_thread

HEAVIEST = "?tab=training&d_k=4096&keys=64"
#: The bystander: a student on the Saturation tab (a change redraws its curves, ~25 ms quiet)
BYSTANDER = "?tab=saturation"
CHANGES = 40            # slider changes per phase, measured (make bench)
CHECKED = 10            # slider changes per phase, checked (the test)
CHANGE_GAP_S = 0.1      # between an answer and the next change
PHASE_LIMIT_S = 25      # a measured phase ends after this long, answered or not
HANG_S = 120            # a checked phase's guard against a hang
SETTLE_S = 15           # the most the load runs before the bystander is measured again


async def open_session(url: str, query: str = ""):
    """A session as a page opens it: the page, its websocket, the ACK, the document and
    document_ready. (connection, named models)."""
    connection = await Connection.open(url + query)
    reply = await connection.pull(120)
    await connection.ready()
    return connection, models_by_name(reply.content["doc"])


async def drain(connection, counter: dict, key: str, stop: asyncio.Event) -> None:
    """Read everything the server sends on ``connection`` until it closes or ``stop`` is
    set, counting PATCH-DOCs."""
    while not stop.is_set():
        try:
            msg = await connection.receive(timeout=5)
        except asyncio.TimeoutError:
            continue
        except Exception:
            return
        if msg is None:
            return
        if msg.msgtype == "PATCH-DOC":
            counter[key] = counter.get(key, 0) + 1


async def click_train(connection, models) -> None:
    await connection.send("PATCH-DOC", {"events": [{
        "kind": "MessageSent", "msg_type": "bokeh_event",
        "msg_data": {"type": "event", "name": "button_click",
                     "values": {"type": "map",
                                "entries": [["model", {"id": models["train"][0]}]]}}}]})


async def pull_loop(url: str, token: str, stats: dict, stop: asyncio.Event) -> None:
    """PULL-DOC-REQ after PULL-DOC-REQ on one session's token, reconnecting when closed."""
    connection = None
    while not stop.is_set():
        try:
            if connection is None:
                connection = await Connection.connect(url, token)
                ack = await connection.receive()
                if ack is None or ack.msgtype != "ACK":
                    raise ConnectionError
            if await connection.pull() is None:
                connection = None
                stats["closed"] = stats.get("closed", 0) + 1
            else:
                stats["pulls"] = stats.get("pulls", 0) + 1
        except Exception:
            connection = None
            stats["refused"] = stats.get("refused", 0) + 1
            await asyncio.sleep(0.5)
    if connection is not None:
        connection.close()


async def slider_answers(connection, models, changes: int = CHANGES,
                         limit: float = PHASE_LIMIT_S) -> tuple[list[float], int]:
    """Seconds from a d_k slider change sent to the PATCH-DOC that answers it, change after
    change (``changes`` of them, or as many as ``limit`` seconds allow; one left unanswered
    counts the time it waited, and ends the list), and how many were answered."""
    slider_id, attrs = models["d_k"]
    source = models["scaled-weights-source"][0]
    position = attrs["value"]
    times = []
    end = time.monotonic() + limit
    for i in range(changes):
        position = position + 1 if i % 2 == 0 else position - 1
        t0 = time.perf_counter()
        await connection.send("PATCH-DOC", {"events": [{
            "kind": "ModelChanged", "model": {"id": slider_id}, "attr": "value",
            "new": position}]})
        while True:
            left = end - time.monotonic()
            try:
                msg = await connection.receive(timeout=max(left, 0.01))
            except asyncio.TimeoutError:
                return [*times, time.perf_counter() - t0], len(times)
            if msg is None:
                return [*times, time.perf_counter() - t0], len(times)
            if msg.msgtype == "PATCH-DOC" and source in msg.content_json:
                break
        times.append(time.perf_counter() - t0)
        if time.monotonic() > end:
            break
        await asyncio.sleep(CHANGE_GAP_S)
    return times, len(times)


def bystander_under_load(url: str, trainers: int, pullers: int, quiet: bool = True) -> dict:
    """Every session opened first; the bystander's answers quiet (measured: ``quiet``;
    otherwise a few, to warm the caches), then while ``trainers`` sessions train at the
    heaviest setting and ``pullers`` loop PULL-DOC-REQ (CHANGES of them measured, CHECKED
    checked). A scenario that does not finish in time is reported with the seconds each of
    its phases took."""
    changes, limit = (CHANGES, PHASE_LIMIT_S) if quiet else (CHECKED, HANG_S)
    phases: dict[str, float] = {}
    start = time.monotonic()

    def reached(phase: str) -> None:
        phases[phase] = round(time.monotonic() - start, 1)

    async def scenario():
        ws, by_models = await open_session(url, BYSTANDER)
        reached("bystander open")
        training = [await open_session(url, HEAVIEST) for _ in range(trainers)]
        reached("trainers open")
        pulling = [await open_session(url, HEAVIEST) for _ in range(pullers)]
        reached("pullers open")
        await slider_answers(ws, by_models, changes, limit)   # warm-up: caches, allocations
        reached("warm-up")
        quiet_times = (await slider_answers(ws, by_models))[0] if quiet else []
        reached("quiet")
        progress, pulled, stop = {}, {}, asyncio.Event()
        tasks = []
        for i, (tws, models) in enumerate(training):
            await click_train(tws, models)
            tasks.append(asyncio.ensure_future(drain(tws, progress, f"t{i}", stop)))
        for pws, _m in pulling:
            pws.close()
            tasks.append(asyncio.ensure_future(pull_loop(url, pws.token, pulled, stop)))
        # the server lets a session pull twice at once (the page and one reconnect): measure
        # once every puller has used that and been refused (or after SETTLE_S)
        settle = time.monotonic() + SETTLE_S
        while time.monotonic() < settle and (
                pulled.get("closed", 0) + pulled.get("refused", 0) < pullers):
            await asyncio.sleep(0.1)
        await asyncio.sleep(1)
        reached("load settled")
        before = dict(progress)
        loaded, answered = await slider_answers(ws, by_models, changes, limit)
        reached("loaded")
        after = dict(progress)
        stop.set()
        for s in [ws, *(t[0] for t in training)]:
            s.close()
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks, timeout=15)
        return {"quiet": quiet_times, "loaded": loaded, "answered": answered,
                "training_patches": (before, after),
                "pulls": pulled}

    try:
        return run_in_thread(scenario, timeout=240 if quiet else 2 * HANG_S + 120)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; seconds at the end of each phase: {phases}") from None
