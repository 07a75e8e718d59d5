"""A class arriving at once (issue 20): sessions opened first come, first served by a bounded
line, the page's title and a "connecting" notice sent before the visitor's turn, and only the
bundles the page uses. Order and behaviour are asserted here; times live in the benchmarks
(`make loadtest ARGS="--burst 300"`)."""

import asyncio
import json
import logging
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from conftest import INIT, UI_WAIT_MS, Server, assert_plots_drawn, column, run_in_thread, wait_still

from attention_scaling import core
from attention_scaling import server as served
from attention_scaling.page import Explorer
from attention_scaling.server.first_views import FirstViews
from attention_scaling.server.line import CONNECTING_AFTER_S, FIRST_VIEW_END
from attention_scaling.state import ExplorerState
from attention_scaling.state import FIG3_SEED
from attention_scaling.style import library_file
from attention_scaling.prose.text import TITLE, fields_of

ROOT = Path(__file__).resolve().parents[1]


# ---- the line itself, in one event loop

def run(coroutine):
    """The scenario in an event loop of its own (Playwright's keeps one on this thread)."""
    return run_in_thread(lambda: coroutine, timeout=30)


def test_the_line_admits_at_once_then_serves_waiters_in_arrival_order():
    async def scenario():
        line = served.OpeningLine(at_once=2)
        order = []

        async def visitor(n):
            assert await line.enter(10)
            order.append(n)

        assert await line.enter(1) and await line.enter(1)        # two places taken
        assert line.ahead() == 2
        waiters = []
        for n in range(5):
            waiters.append(asyncio.ensure_future(visitor(n)))
            await asyncio.sleep(0)                                 # arrive one after another
        await asyncio.sleep(0.01)
        assert order == [] and line.ahead() == 7
        for _ in range(7):
            line.release()
            await asyncio.sleep(0.01)
        await asyncio.gather(*waiters)
        return order

    assert run(scenario()) == [0, 1, 2, 3, 4]


def test_a_waiting_page_is_told_how_many_are_before_it():
    async def scenario():
        line = served.OpeningLine(at_once=1)
        assert await line.enter(1)
        holders = [type("Holder", (), {"_place": None})() for _ in range(3)]
        tasks = [asyncio.ensure_future(line.enter(10, holder=h)) for h in holders]
        await asyncio.sleep(0.01)
        before = [line.before(h._place) for h in holders]
        holders[0]._place.cancel()                                # the first one left
        await asyncio.sleep(0.01)
        after = line.before(holders[2]._place)
        for t in tasks:
            t.cancel()
        return before, after

    assert run(scenario()) == ([1, 2, 3], 2)
    text = served.ConnectingPage.progress(2)
    assert "2 visitors before you" in text and text.startswith("<script>")
    assert "before you" not in served.ConnectingPage.waiting(0)


def test_a_visitor_who_leaves_the_line_gives_up_its_turn():
    async def scenario():
        line = served.OpeningLine(at_once=1)
        assert await line.enter(1)

        class Holder:
            _place = None

        gone, stays = Holder(), Holder()
        t_gone = asyncio.ensure_future(line.enter(10, holder=gone))
        t_stays = asyncio.ensure_future(line.enter(10, holder=stays))
        await asyncio.sleep(0.01)
        gone._place.cancel()                                      # the tab was closed
        assert await t_gone is False
        line.release()
        assert await t_stays is True
        return line.busy

    assert run(scenario()) == 1


def test_waiting_longer_than_the_limit_is_refused_and_takes_no_place():
    async def scenario():
        line = served.OpeningLine(at_once=1)
        assert await line.enter(1)
        late = await line.enter(0.05)
        line.release()
        return late, line.busy

    assert run(scenario()) == (False, 0)


def test_a_place_is_held_only_for_the_work_a_request_causes():
    """A page's place is free once it is sent (a browser that never connects delays no one);
    a session's first websocket takes a place until it pulled its document or the hold
    ended; a reconnect of the same session takes none."""
    async def scenario():
        line = served.OpeningLine(at_once=1)
        assert await line.enter(1)                                # page a built
        line.release()                                            # and sent
        assert line.busy == 0
        line.connected("a", seconds=60)                           # a's websocket opened
        nxt = asyncio.ensure_future(line.enter(5))
        await asyncio.sleep(0.01)
        assert not nxt.done()
        line.done("a")                                            # document pulled
        assert await nxt
        line.release()
        line.connected("a", seconds=60)                           # a reconnects: no place
        assert line.busy == 0
        line.connected("b", seconds=0.05)                         # never pulled
        after = asyncio.ensure_future(line.enter(5))
        assert await asyncio.wait_for(after, 1)
        line.done("b")                                            # too late: no double free
        return line.busy

    assert run(scenario()) == 1


def test_a_websocket_holds_its_place_for_the_line_s_hold():
    """Without a hold of its own, a first websocket's place lasts the line's ``hold_s`` (the
    server's --opening-hold), then frees itself."""
    async def scenario():
        line = served.OpeningLine(at_once=1, hold_s=0.05)
        line.connected("a")
        assert line.busy == 1
        assert await asyncio.wait_for(line.enter(5), 1)
        return line.busy, line.held

    assert run(scenario()) == (1, {})


def test_no_line_when_at_once_is_zero():
    async def scenario():
        line = served.OpeningLine(at_once=0)
        return all([await line.enter(0.01) for _ in range(50)])

    assert run(scenario())


def test_the_page_without_its_head_the_scripts_sent_and_unused_bundles():
    connecting = served.ConnectingPage("T")
    page = ('<!DOCTYPE html>\n<html lang="en" >\n<head><meta charset="utf-8"><title>T</title>'
            '<link rel="icon" href="data:x"><script type="esms-options">{"shimMode": true}'
            '</script>\n<script type="text/javascript" src="static/extensions/panel/bundled/'
            'reactiveesm/es-module-shims@^1.10.0/dist/es-module-shims.min.js"></script>\n'
            '<script type="text/javascript" src="static/js/bokeh.min.js?v=1"></script>\n'
            '<script type="text/javascript" src="static/js/bokeh-gl.min.js?v=2"></script>\n'
            '<script type="text/javascript" src="static/js/bokeh-tables.min.js?v=3"></script>\n'
            '</head><body><div data-root-id="p1"></div></body></html>')
    body = connecting.body(page, {"bokeh-gl", "es-module-shims"})
    # the first page's scripts go with every later page's notice, and not again after it
    learnt = connecting.scripts
    assert "bokeh.min.js" in learnt and "bokeh-tables" in learnt and "bokeh-gl" not in learnt
    assert learnt in connecting.head(0)
    later = connecting.body(page, {"bokeh-gl", "es-module-shims"}, learnt)
    assert "<script" not in later and 'data-root-id="p1"' in later
    for gone in ("<!DOCTYPE", "<html", "<head>", "</head>", "<body", "<title>", "charset",
                 "rel=\"icon\"", "bokeh-gl", "es-module-shims", "esms-options"):
        assert gone not in body, gone
    for kept in ("bokeh.min.js", "bokeh-tables.min.js", 'data-root-id="p1"', "</body>"):
        assert kept in body, kept


def test_the_bundles_a_document_does_not_use():
    from bokeh.document import Document
    from bokeh.models import ColumnDataSource, DataTable, Div
    from bokeh.plotting import figure
    import panel as pn

    def unused(*roots):
        doc = Document()
        for root in roots:
            doc.add_root(root)
        return served.unused_bundles(doc)

    everything = {"bokeh-gl", "es-module-shims", "panel", "bokeh-tables"}
    assert unused(Div(text="x")) == everything
    assert unused(figure(output_backend="webgl")) == everything - {"bokeh-gl"}
    assert unused(DataTable(source=ColumnDataSource())) == everything - {"bokeh-tables"}
    doc = Document()
    doc.add_root(pn.Column(pn.pane.Markdown("x")).get_root(doc))
    # Panel's bundle, and bokeh-tables, which it imports
    assert served.unused_bundles(doc) == {"bokeh-gl", "es-module-shims"}
    # the explorer's own page, every tab built: Bokeh models only
    explorer = Explorer(ExplorerState(tab="saturation"))
    doc = Document()
    doc.add_root(explorer.page().get_root(doc))
    for tab in ("variance", "gradient", "training", "budget"):
        explorer.state.tab = tab
    for name in ("saturation-curves", "logit-histogram", "training-loss", "head-budget"):
        assert doc.get_model_by_name(name) is not None, name
    assert served.unused_bundles(doc) == everything


# ---- a real server on loopback

def burst(url: str, n: int, tmp_path) -> dict:
    """`python -m benchmarks.loadtest --burst n` against ``url``: the burst's figures."""
    out = tmp_path / "burst.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.loadtest", "--url", url,
         "--burst", str(n), "--duration", "0", "--warmup", "1", "--release-timeout", "1",
         "--out", str(out)], capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(out.read_text())["results"]["burst"]


def test_a_burst_is_served_first_come_first_served(tmp_path):
    """Sessions requested in the same second, one opened at a time: every one opens, each
    session's steps follow one another, and its first slider move is answered once it is
    live (the load test's time to interactive). That pages go out in the order the server received
    their requests is asserted causally by
    test_the_line_admits_at_once_then_serves_waiters_in_arrival_order. The load test's own
    clock is not that order: it stamps a request when its client begins it, and on a busy
    machine two requests begun 90 ms apart reached the server the other way round (Tornado's
    client resolves the address on threads). How pages and documents follow the stamps is the
    load test's figure ("later arrival ready before an earlier one"). Over 20 s on a loaded
    machine: eight sessions, each built in turn by a server that opens one at a time."""
    srv = Server("--stats", "--open-at-once", "1")
    try:
        b = burst(srv.url, 8, tmp_path)
    finally:
        srv.stop()
    assert b["ready"] == 8 and b["errors"] == {}
    # [requested, page received, document received, ready, first change answered], in the
    # order requests were sent: each student's first slider move answered once it was live
    timeline = sorted(b["timeline_s"])
    assert len(timeline) == 8 and all(t[0] < t[1] <= t[2] <= t[3] < t[4] for t in timeline), \
        timeline
    assert b["time_to_interactive_ms"]["n"] == 8


def hold_the_only_place(url: str):
    """A page whose websocket connects and does not ask for its document: it holds its place
    in the opening (the server's hold is longer than any test). Returns once the websocket is
    open: a function that closes it, which frees the place, and returns once it is closed."""
    import threading

    from conftest import page_token
    from testkit.bokeh_client import Connection
    opened, release, closed = threading.Event(), threading.Event(), threading.Event()

    async def connect_and_wait():
        with urllib.request.urlopen(url, timeout=60) as resp:
            token = page_token(resp.read().decode())
        ws = await Connection.connect(url, token)
        await ws.receive(60)                      # the ACK: connected
        opened.set()
        await asyncio.get_running_loop().run_in_executor(None, release.wait, 600)
        ws.close()
        closed.set()

    threading.Thread(target=lambda: asyncio.run(connect_and_wait()), daemon=True).start()
    assert opened.wait(60)

    def free():
        release.set()
        assert closed.wait(60)
    return free


@pytest.fixture(scope="module")
def one_at_a_time():
    """One session opens at a time, and a first websocket holds its place for up to 600 s:
    a test frees the place itself (hold_the_only_place) once it has seen the waiting page."""
    srv = Server("--open-at-once", "1", "--opening-hold", "600")
    yield srv
    srv.stop()


@pytest.mark.browser
@pytest.mark.parametrize("query", ["?d_k=128", "?embed=1&d_k=128"])
def test_a_waiting_page_shows_its_title_connecting_and_the_first_view_then_goes_live(
        page, one_at_a_time, query):
    url = one_at_a_time.url + query
    free = hold_the_only_place(one_at_a_time.url)
    responses = []
    page.on("response", lambda r: responses.append((r.status, r.url)))
    page.add_init_script(INIT)
    page.goto(url, wait_until="commit")
    notice = page.locator("#as-connecting")
    # hidden for its first CONNECTING_AFTER_S of waiting, shown after: the notice's own clock
    # (its CSS animation's time, paused and set), not the test's
    notice.wait_for(state="attached", timeout=UI_WAIT_MS)
    ms = 1000 * CONNECTING_AFTER_S
    assert page.evaluate("""(ms) => { const box = document.getElementById('as-connecting');
      const late = box.getAnimations().find((a) => a.animationName === 'as-late');
      late.pause();
      return [0, ms - 50, ms + 50].map((t) => { late.currentTime = t;
                                                 return getComputedStyle(box).visibility; });
      }""", ms) == ["hidden", "hidden", "visible"]
    notice.wait_for(state="visible", timeout=UI_WAIT_MS)
    text = notice.inner_text()
    assert TITLE in text and "Connecting" in text
    assert page.title() == TITLE
    # while it waits: the explorer as it opens at this address, drawn with no session, inert
    page.wait_for_selector("#as-first-view[data-drawn='1']", state="attached",
                           timeout=UI_WAIT_MS)
    expected = core.compute_state(128, 1.0, FIG3_SEED)
    weights = page.evaluate("() => window.__col('scaled-weights-source', 'weight')")
    assert weights == pytest.approx(expected.scaled.probs.tolist(), rel=1e-12)
    assert page.evaluate("() => document.getElementById('as-first-view').inert")
    assert page.evaluate("() => window.__asFirstView !== null && Bokeh.documents.length === 1")
    assert notice.is_visible()
    page.evaluate("() => { window.__firstDoc = Bokeh.documents[0]; }")
    # once the place is free, the live page draws, the first view and notice go
    free()
    notice.wait_for(state="detached", timeout=UI_WAIT_MS)
    assert page.locator("#as-first-view").count() == 0
    page.wait_for_function("() => Bokeh.documents.length === 1 && Bokeh.documents[0] !== "
                           "window.__firstDoc && (window.__col('jacobian-diagonal-source', "
                           "'value') || []).length > 0", timeout=UI_WAIT_MS)
    assert_plots_drawn(page)
    assert column(page, "scaled-weights-source", "weight") == pytest.approx(
        expected.scaled.probs.tolist(), rel=1e-12)
    wait_still(page)
    assert page.console_errors == [] and page.failed_requests == []
    assert [r for r in responses if r[0] >= 400] == []
    scripts = page.evaluate("() => Array.from(document.scripts, s => s.src).filter(Boolean)")
    names = sorted(Path(s.split("?")[0]).name for s in scripts)
    # only what the page uses (BokehJS's MathJax draws the formulas): no WebGL plot, no
    # ES-module component, no Panel model, no table; and the programs' library
    assert names == ["bokeh-mathjax.min.js", "bokeh-widgets.min.js", "bokeh.min.js",
                     library_file()[0]], names


def _first_view_document(html_text: str):
    """The Bokeh document a first view's HTML carries, read back by Bokeh itself."""
    from bokeh.document import Document
    data = re.search(r'<script type="application/json" id="as-first-view-doc">(.*?)</script>',
                     html_text, re.S).group(1)
    data = json.loads(data)
    return Document.from_json(data["doc"]), data["root"]


def test_a_page_request_arriving_with_others_under_way_gets_a_first_view():
    """A class arriving at once is all at the server before the first page has entered the
    line: a page request shares the server (and gets a first view) when another request is
    under way, in the line or not yet, or a session is pulling its document; alone, it does
    not."""
    room = served.Classroom(served.ServerConfig(open_at_once=2))

    async def decisions() -> list[bool]:
        seen = []
        room.building = 1                     # this request alone
        seen.append(room.others_opening())
        room.building = 2                     # another one under way, not in the line yet
        seen.append(room.others_opening())
        room.building = 1
        assert await room.line.enter(1)       # another page in the line, being built
        seen.append(room.others_opening())
        room.line.release()
        seen.append(room.others_opening())
        room.line.connected("s1")             # a session pulling its document
        seen.append(room.others_opening())
        room.line.done("s1")
        seen.append(room.others_opening())
        return seen

    assert run_in_thread(decisions) == [False, True, True, False, True, False]


def test_a_first_view_is_the_explorer_at_its_address_built_once():
    views = FirstViews()
    args = {"d_k": [b"512"], "rule": [b"none"], "temperature": [b"2.5"], "seed": [b"7"]}
    first = views.html(args)
    doc, root = _first_view_document(first)
    expected = core.compute_state(512, 2.5, 7)
    source = doc.get_model_by_name("scaled-weights-source")
    assert source.data["weight"] == pytest.approx(expected.scaled.probs.tolist(), rel=1e-12)
    assert doc.get_model_by_name("unscaled-weights-source").data["weight"] == pytest.approx(
        expected.unscaled.probs.tolist(), rel=1e-12)
    assert doc.get_model_by_id(root) is not None
    # its last bytes say where it ends (the load test reads them, as line.FIRST_VIEW_END)
    assert first.endswith(FIRST_VIEW_END + "\n") and first.count(FIRST_VIEW_END) == 1
    # the same address again (and its defaults spelled out): the kept one, not a new build
    assert views.html(args) is first
    assert views.html({**args, "keys": [b"8"], "align": [b"0"]}) is first


def test_first_views_are_bounded_and_nothing_sent_can_end_their_script(caplog):
    """A ready-made first view carries nothing from its address that could end its script
    or add markup; the views kept are bounded, and addresses new faster than the build rate
    get the notice alone, said once in the log (about 2 s alone; 24 s once, with the
    machine's two cores shared with another suite)."""
    views = FirstViews()
    views.builds_per_s = 1e9
    views.size = 3
    hostile = {"d_k": [b"</script><script>alert(1)</script>"],
               "seed": ["\u2028<!--".encode()], "tab": [b"<img src=x onerror=alert(1)>"]}
    text = views.html(hostile)
    assert text.count("</script>") == 2 and "<img" not in text and "alert(1)</script>" not in text
    doc, _ = _first_view_document(text)
    assert doc.get_model_by_name("scaled-weights-source") is not None
    for seed in range(5):
        views.html({"seed": [str(seed).encode()]})
    assert len(views._kept) == 3
    # new addresses faster than the rate: after one build, no first view (the notice
    # alone), said once
    views.builds_per_s = 1e-6
    assert views.html({"seed": [b"99"]}) != ""
    with caplog.at_level(logging.WARNING):
        assert views.html({"seed": [b"100"]}) == "" and views.html({"seed": [b"101"]}) == ""
    assert sum("Ready-made first views" in r.getMessage() for r in caplog.records) == 1
    assert views.html({"seed": [b"4"]}) != ""        # a kept one is still sent


@pytest.mark.browser
def test_a_repeat_visit_takes_its_scripts_from_the_browser_cache(page, server):
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    seen = {"cached": 0, "bytes": 0, "files": set()}
    cdp.on("Network.requestServedFromCache",
           lambda e: seen.__setitem__("cached", seen["cached"] + 1))
    cdp.on("Network.loadingFinished",
           lambda e: seen.__setitem__("bytes", seen["bytes"] + e["encodedDataLength"]))
    cdp.on("Network.requestWillBeSent", lambda e: e.get("type") in ("Script", "Stylesheet")
           and seen["files"].add(e["request"]["url"].rsplit("/", 1)[-1].split("?")[0]))
    page.add_init_script(INIT)
    for visit in range(2):
        if visit:
            seen.update(cached=0, bytes=0, files=set())
        page.goto(server.url)
        page.wait_for_function("() => (window.__col('jacobian-diagonal-source', 'value') || [])"
                               ".length > 0", timeout=30_000)
        page.wait_for_timeout(300)
        if not visit:
            first = dict(seen)
    assert first["cached"] == 0 and first["bytes"] > 100_000
    assert {"bokeh.min.js", "bokeh-widgets.min.js", library_file()[0]} <= first["files"], first
    # every script and style again from the cache: only the page itself crosses the network
    assert seen["files"] == first["files"], (first, seen)
    assert seen["cached"] >= len(first["files"]) and seen["bytes"] < 20_000, (first, seen)


@pytest.mark.parametrize("kind", ["switch", "rule"])
def test_the_load_test_finds_the_scaling_control_by_name(kind):
    """The load test drives the scaling control whether the page has the Switch "scaled" or
    a RadioButtonGroup "rule" of the three rules."""
    import random
    import types

    from bokeh.core.json_encoder import serialize_json
    from bokeh.document import Document
    from bokeh.layouts import column
    from bokeh.models import ColumnDataSource, RadioButtonGroup, Slider, Switch
    from benchmarks import loadtest

    control = (Switch(name="scaled", active=True) if kind == "switch" else
               RadioButtonGroup(name="rule", labels=["none", "1/√d_k", "1/d_k"], active=1))
    doc = Document()
    doc.add_root(column(Slider(name="d_k", title="d_k", start=0, end=24, value=6, step=1),
                        control))
    doc.add_root(ColumnDataSource(name="scaled-weights-source", data={"x": [1]}))
    doc_json = json.loads(serialize_json(doc.to_json()))
    lt = types.SimpleNamespace(rec=None, args=types.SimpleNamespace(seed=1))
    session = loadtest.Session(lt, 0)
    session._find_models(doc_json)
    found = session.controls["scaled"]
    assert found["id"] == control.id and found["attr"] == "active"
    rng = random.Random(0)
    if kind == "switch":
        assert loadtest.toggled(found, rng) is False
    else:
        assert found["choices"] == 3
        assert {loadtest.toggled(found, rng) for _ in range(50)} == {0, 2}


def test_the_load_test_counts_a_change_replaced_by_a_newer_one_as_replaced_not_lost():
    """While the worker pool computes a setting, a newer change replaces the one waiting
    (the newest wins) and one update answers both: the load test gives that update to the
    change whose text fields (width, temperature, rule) it shows, and counts the older as
    replaced, instead of handing it to the oldest and timing the newer out as lost. The
    page's own document: the fields' rows come from its text-source."""
    import types

    from bokeh.core.json_encoder import serialize_json
    from bokeh.document import Document
    from benchmarks import loadtest

    explorer = Explorer(ExplorerState())
    doc = Document()
    doc.add_root(explorer.view.root)
    lt = types.SimpleNamespace(rec=None, args=types.SimpleNamespace(seed=1))
    session = loadtest.Session(lt, 0)
    session._find_models(json.loads(serialize_json(doc.to_json())))
    d_k = core.D_K_VALUES.index(64)
    expected = []
    for position in (d_k + 1, d_k + 2):          # 80, then 96 before 80's update
        session.controls["d_k"]["value"] = position
        expected.append(session._shows())
        session.pending.append([0.0, "steady", "d_k", False, expected[-1]])
    assert [e["d"] for e in expected] == ["80", "96"] and expected[0]["t"] == "1"

    def update(d: int) -> list:
        """The text-source's event of an update that shows width ``d``, as the server sends
        it (the values' column, in the document's row order)."""
        state = ExplorerState(d_k=d)
        fields = fields_of(state)
        rows = list(explorer.charts.text_source.data["field"])
        values = [fields.get(k, "") for k in rows]    # (the page's own rows: its address)
        return [{"kind": "ColumnDataChanged", "model": {"id": session.text_id}, "attr": "data",
                 "data": {"type": "map", "entries": [["value", values]]}}]

    assert session._answered(update(96)) == 1     # the newer: 80 was replaced by it
    assert session._answered(update(80)) == 0     # 80's own update: the oldest
    assert session._answered([]) == 0             # an update that does not say: the oldest
