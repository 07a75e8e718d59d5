"""One session's share of the server, measured against its own quiet run: a bystander's slider
answer while other sessions train at the heaviest setting and loop PULL-DOC-REQ, relative to
the same bystander's answer on the same server before they started (not an absolute time)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from conftest import DOCUMENT_READY, Server, bokeh_socket, page_token, run_in_thread
from conftest import read_bokeh as read_message

pytestmark = pytest.mark.relative

HEAVIEST = "?tab=training&d_k=4096&keys=64"
#: The bystander: a student on the Saturation tab (a change redraws its curves, ~25 ms quiet)
BYSTANDER = "?tab=saturation"
CHANGES = 40            # slider changes per phase
CHANGE_GAP_S = 0.1      # between an answer and the next change
PHASE_LIMIT_S = 25      # a phase ends after this long, answered or not
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


async def slider_answers(ws, models) -> list[float]:
    """Seconds from a d_k slider change sent to the PATCH-DOC that answers it, change after
    change (CHANGES of them, or as many as PHASE_LIMIT_S allows; one left unanswered counts
    the time it waited)."""
    slider_id, attrs = models["d_k"]
    source = models["scaled-weights-source"][0]
    position = attrs["value"]
    times = []
    end = time.monotonic() + PHASE_LIMIT_S
    for i in range(CHANGES):
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
                times.append(time.perf_counter() - t0)
                return times
            if header["msgtype"] == "PATCH-DOC" and source in content:
                break
        times.append(time.perf_counter() - t0)
        if time.monotonic() > end:
            return times
        await asyncio.sleep(CHANGE_GAP_S)
    return times


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]


def bystander_under_load(url: str, trainers: int, pullers: int) -> dict:
    """Every session opened first; the bystander's answers quiet, then while ``trainers``
    sessions train at the heaviest setting and ``pullers`` loop PULL-DOC-REQ. A scenario that
    does not finish in time is reported with the seconds each of its phases took."""
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
        await slider_answers(ws, by_models)          # warm-up: caches, first allocations
        reached("warm-up")
        quiet = await slider_answers(ws, by_models)
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
        loaded = await slider_answers(ws, by_models)
        reached("loaded")
        after = dict(progress)
        stop.set()
        for s in [ws, *(t[0] for t in training)]:
            s.close()
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks, timeout=15)
        return {"quiet": quiet, "loaded": loaded, "training_patches": (before, after),
                "pulls": pulled}

    try:
        return run_in_thread(scenario, timeout=240)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; seconds at the end of each phase: {phases}") from None


def test_a_bystander_answers_within_twice_its_quiet_time_while_others_train_and_pull(tmp_path):
    """6 sessions train at the heaviest setting the controls allow and 3 loop PULL-DOC-REQ:
    a bystander's slider answer (p95) stays within 2x its own quiet p95 in the same run, and
    the trainers' curves keep growing meanwhile (taking turns). Over 20 s: the quiet
    run, then the loaded one, each long enough for a p95."""
    srv = Server(log=tmp_path / "server.log")
    try:
        t0 = time.monotonic()
        result = bystander_under_load(srv.url, trainers=6, pullers=3)
        took = time.monotonic() - t0
    finally:
        srv.stop()
    quiet, loaded = p95(result["quiet"]), p95(result["loaded"])
    summary = (f"quiet p95 {quiet * 1e3:.0f} ms, loaded p95 {loaded * 1e3:.0f} ms "
               f"({len(result['loaded'])} answers), "
               f"training patches {result['training_patches']}, "
               f"pulls {result['pulls']}, {took:.0f} s")
    print(summary)
    before, after = result["training_patches"]
    # the runs take turns on one training thread, a slice (a step of each rule, ~0.2 s at
    # this setting) at a time: they advance while the bystander is measured
    assert len(after) == 6 and sum(after.values()) > sum(before.values()), summary
    assert len(result["loaded"]) == CHANGES, summary
    assert loaded <= 2 * quiet, summary
