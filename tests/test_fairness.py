"""One session's share of the server under load: a bystander's slider changes while other
sessions train at the heaviest setting and loop PULL-DOC-REQ. The test asserts what the load
must not take away (every change answered, the runs going on meanwhile); how long the answers
take, against the same bystander's quiet answers, is a figure of `make bench` (section
*fairness*, :func:`bystander_under_load` with ``quiet``), not a pass or fail here."""

from __future__ import annotations

import asyncio
import json
import time

from conftest import DOCUMENT_READY, Server, bokeh_socket, page_token, run_in_thread
from conftest import read_bokeh as read_message

HEAVIEST = "?tab=training&d_k=4096&keys=64"
#: The bystander: a student on the Saturation tab (a change redraws its curves, ~25 ms quiet)
BYSTANDER = "?tab=saturation"
CHANGES = 40            # slider changes per phase, measured (make bench)
CHECKED = 10            # slider changes per phase, checked (the test)
CHANGE_GAP_S = 0.1      # between an answer and the next change
PHASE_LIMIT_S = 25      # a measured phase ends after this long, answered or not
HANG_S = 120            # a checked phase's guard against a hang
SETTLE_S = 15           # the most the load runs before the bystander is measured again


async def send(ws, msgtype: str, content: dict, n=[0]) -> str:
    n[0] += 1
    msgid = f"f{n[0]}"
    await ws.write_message(json.dumps({"msgid": msgid, "msgtype": msgtype}))
    await ws.write_message("{}")
    await ws.write_message(json.dumps(content))
    return msgid


def models_by_name(doc: dict) -> dict:
    """The document's models with a name: name -> (id, attributes)."""
    found, stack = {}, [doc]
    while stack:
        o = stack.pop()
        if isinstance(o, list):
            stack.extend(o)
        elif isinstance(o, dict):
            name = o.get("attributes", {}).get("name") if o.get("type") == "object" else None
            if isinstance(name, str) and "id" in o:
                found[name] = (o["id"], o["attributes"])
            stack.extend(o.values())
    return found


async def pull(ws) -> dict | None:
    """The whole document (PULL-DOC-REQ), or None when the socket closed first."""
    await send(ws, "PULL-DOC-REQ", {})
    while True:
        msg = await read_message(ws)
        if msg is None:
            return None
        if msg[0]["msgtype"] == "PULL-DOC-REPLY":
            return json.loads(msg[1])["doc"]


async def open_session(url: str, query: str = ""):
    """A session as a page opens it: the page, its websocket, the ACK, the document and
    document_ready. (websocket, token, named models)."""
    from tornado.httpclient import AsyncHTTPClient
    html = (await AsyncHTTPClient().fetch(url + query, request_timeout=120)).body.decode()
    token = page_token(html)
    ws = await bokeh_socket(url, token)
    ws.protocol.set_nodelay(True)
    assert (await read_message(ws))[0]["msgtype"] == "ACK"
    doc = await pull(ws)
    await send(ws, "PATCH-DOC", {"events": [DOCUMENT_READY]})
    return ws, token, models_by_name(doc)


async def drain(ws, counter: dict, key: str, stop: asyncio.Event) -> None:
    """Read everything the server sends on ``ws`` until it closes or ``stop`` is set,
    counting PATCH-DOCs."""
    while not stop.is_set():
        try:
            msg = await read_message(ws, timeout=5)
        except asyncio.TimeoutError:
            continue
        except Exception:
            return
        if msg is None:
            return
        if msg[0]["msgtype"] == "PATCH-DOC":
            counter[key] = counter.get(key, 0) + 1


async def click_train(ws, models) -> None:
    await send(ws, "PATCH-DOC", {"events": [{
        "kind": "MessageSent", "msg_type": "bokeh_event",
        "msg_data": {"type": "event", "name": "button_click",
                     "values": {"type": "map",
                                "entries": [["model", {"id": models["train"][0]}]]}}}]})


async def pull_loop(url: str, token: str, stats: dict, stop: asyncio.Event) -> None:
    """PULL-DOC-REQ after PULL-DOC-REQ on one session's token, reconnecting when closed."""
    ws = None
    while not stop.is_set():
        try:
            if ws is None:
                ws = await bokeh_socket(url, token)
                if (await read_message(ws))[0]["msgtype"] != "ACK":
                    raise ConnectionError
            if await pull(ws) is None:
                ws = None
                stats["closed"] = stats.get("closed", 0) + 1
            else:
                stats["pulls"] = stats.get("pulls", 0) + 1
        except Exception:
            ws = None
            stats["refused"] = stats.get("refused", 0) + 1
            await asyncio.sleep(0.5)
    if ws is not None:
        ws.close()


async def slider_answers(ws, models, changes: int = CHANGES,
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
        await send(ws, "PATCH-DOC", {"events": [{
            "kind": "ModelChanged", "model": {"id": slider_id}, "attr": "value",
            "new": position}]})
        while True:
            left = end - time.monotonic()
            try:
                header, content = await read_message(ws, timeout=max(left, 0.01))
            except asyncio.TimeoutError:
                return [*times, time.perf_counter() - t0], len(times)
            if header["msgtype"] == "PATCH-DOC" and source in content:
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
        ws, _token, by_models = await open_session(url, BYSTANDER)
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
        for i, (tws, _t, models) in enumerate(training):
            await click_train(tws, models)
            tasks.append(asyncio.ensure_future(drain(tws, progress, f"t{i}", stop)))
        for pws, token, _m in pulling:
            pws.close()
            tasks.append(asyncio.ensure_future(pull_loop(url, token, pulled, stop)))
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


def test_a_bystander_is_answered_while_others_train_and_pull(tmp_path):
    """6 sessions train at the heaviest setting the controls allow and 3 loop PULL-DOC-REQ:
    each of a bystander's slider changes is answered, and the trainers' curves grow while it
    is (the runs take turns on one training thread, a slice at a time). Over 20 s: ten
    sessions at the heaviest setting opened and trained. The answers' times against the
    bystander's quiet ones: `make bench`, section fairness."""
    srv = Server(log=tmp_path / "server.log")
    try:
        result = bystander_under_load(srv.url, trainers=6, pullers=3, quiet=False)
    finally:
        srv.stop()
    before, after = result["training_patches"]
    summary = (f"{len(result['loaded'])} answers, training patches {result['training_patches']}, "
               f"pulls {result['pulls']}")
    assert result["answered"] == CHECKED, summary
    assert len(after) == 6 and sum(after.values()) > sum(before.values()), summary
