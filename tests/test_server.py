"""The server's own speed measures, all public API: controls as plain Bokeh widgets synced
both ways, one message per change, static files compressed once, the collector frozen with
many sessions open, Bokeh's per-session document check left to a test, no BrowserInfo."""

import os

import panel as pn

from attention_scaling import server as served
from attention_scaling.documents import held
from attention_scaling.page import Explorer, serve_session


def test_sliders_are_bokeh_models_synced_both_ways():
    ex = Explorer()
    ex.state.d_k = 128
    assert ex.d_k_slider.value == list(ex.state.param.d_k.objects).index(128)
    ex.d_k_slider.value = 0          # as if from the browser (no document: applied directly)
    assert ex.state.d_k == 1
    ex.temperature_slider.value = len(ex.state.param.temperature.objects) - 1
    assert ex.state.temperature == 10


def test_the_page_document_passes_bokehs_validation_that_sessions_skip(caplog):
    """Sessions skip Bokeh's per-session document check; the check runs here."""
    import logging
    import os

    from bokeh.core.validation.check import check_integrity
    from bokeh.document import Document
    from bokeh.settings import settings

    served.skip_document_validation()
    if "BOKEH_VALIDATE_DOC" not in os.environ:
        assert settings.perform_document_validation() is False
    for hidden in (set(), {"header", "controls", "text"}):
        doc = Document()
        Explorer(hidden=hidden).page().server_doc(doc)
        with caplog.at_level(logging.WARNING):
            issues = check_integrity(list(doc.models))
        assert not issues.error and not issues.warning, issues


GZIP_FILES = {"app.js": b"const x = 1;\n" * 4000, "logo.png": bytes(range(256)) * 40,
              # compresses to more than the sockets buffer: a client can leave mid-file
              "big.js": os.urandom(6 * 2**20).hex().encode()}


def test_static_files_are_gzipped_once_and_served_whole(tmp_path):
    """A static file is compressed once; every answer is the file itself, with or
    without gzip, for a range too, also after a client left in the middle of a file (Tornado
    still finishes that response); a changed file is compressed again; pages and files that
    Tornado does not compress are not kept."""
    import asyncio
    import gzip

    from tornado.httpclient import AsyncHTTPClient
    from tornado.web import Application, RequestHandler, StaticFileHandler

    from conftest import free_port, run_in_thread

    for name, data in GZIP_FILES.items():
        (tmp_path / name).write_bytes(data)

    class Page(RequestHandler):
        def get(self):
            self.write("<p>page</p>" * 500)

    async def main():
        port = free_port()
        app = Application([(r"/static/(.*)", StaticFileHandler, {"path": str(tmp_path)}),
                           (r"/page", Page)], transforms=[served.GzipStaticOnce])
        server = app.listen(port, address="127.0.0.1")
        client = AsyncHTTPClient(force_instance=True)
        url = f"http://127.0.0.1:{port}"

        async def get(path, **headers):
            return await client.fetch(url + path, headers=headers, decompress_response=False,
                                      raise_error=False)
        try:
            served._GZIP_CACHE.clear()
            answers = [await get("/static/app.js", **{"Accept-Encoding": "gzip"})
                       for _ in range(3)]
            for r in answers:
                assert r.code == 200 and r.headers["Content-Encoding"] == "gzip"
                assert gzip.decompress(r.body) == GZIP_FILES["app.js"]
            assert len(served._GZIP_CACHE) == 1
            assert answers[1].body == answers[2].body        # the kept copy
            assert int(answers[1].headers["Content-Length"]) == len(answers[1].body)
            plain = await get("/static/app.js")
            assert "Content-Encoding" not in plain.headers
            assert plain.body == GZIP_FILES["app.js"]
            part = await get("/static/app.js", Range="bytes=10-99")
            assert part.code == 206 and part.body == GZIP_FILES["app.js"][10:100]
            png = await get("/static/logo.png", **{"Accept-Encoding": "gzip"})
            assert "Content-Encoding" not in png.headers
            assert png.body == GZIP_FILES["logo.png"]
            # a client that reads the first bytes of a big file and hangs up
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /static/big.js HTTP/1.1\r\nHost: x\r\n"
                         b"Accept-Encoding: gzip\r\n\r\n")
            await writer.drain()
            await reader.read(1000)
            writer.close()
            await asyncio.sleep(0.5)
            big = await get("/static/big.js", **{"Accept-Encoding": "gzip"})
            assert gzip.decompress(big.body) == GZIP_FILES["big.js"]
            again = await get("/static/big.js", **{"Accept-Encoding": "gzip"})
            assert gzip.decompress(again.body) == GZIP_FILES["big.js"]
            served._GZIP_CACHE.pop(next(k for k in served._GZIP_CACHE if "big" in k[0]))
            page = await get("/page", **{"Accept-Encoding": "gzip"})
            assert gzip.decompress(page.body) == b"<p>page</p>" * 500
            assert len(served._GZIP_CACHE) == 1             # neither the png nor the page
            (tmp_path / "app.js").write_bytes(b"let y = 2;\n" * 3000)
            StaticFileHandler.reset()                        # forget the old content hash
            changed = await get("/static/app.js", **{"Accept-Encoding": "gzip"})
            assert gzip.decompress(changed.body) == b"let y = 2;\n" * 3000
        finally:
            client.close()
            server.stop()
            served._GZIP_CACHE.clear()

    run_in_thread(main)



GC_SCRIPT = r"""
import asyncio, gc, json, time, weakref
from attention_scaling import server
from attention_scaling.server import collect

class Node:
    pass

# the periodic passes, counted: a step of the scenario waits for the next pass, not a while
passes = [0]
collect_and_freeze = collect.collect_and_freeze
def counted():
    passes[0] += 1
    return collect_and_freeze()
collect.collect_and_freeze = counted

async def next_pass():
    seen = passes[0]
    deadline = time.monotonic() + 30
    while passes[0] == seen:
        assert time.monotonic() < deadline, "no periodic pass"
        await asyncio.sleep(0.01)

async def main():
    out = {"without_loop": None}
    started = server.start_gc_freezer(period_s=0.2)
    out["started"] = started and server.start_gc_freezer(period_s=0.2)   # idempotent
    out["frozen_at_start"] = gc.get_freeze_count()
    # a cycle that dies after the periodic freeze has frozen it: only a thaw reclaims it
    a, b = Node(), Node()
    a.other, b.other = b, a
    dead = weakref.ref(a)
    await next_pass()                              # frozen by the periodic callback
    out["frozen_later"] = gc.get_freeze_count()
    del a, b
    gc.collect()
    out["alive_after_plain_collect"] = dead() is not None   # frozen: not walked
    # sessions end: below the threshold a collection (Panel runs one after each) and the
    # periodic pass stay young-only
    for _ in range(server.GC_FULL_AFTER_ENDED - 1):
        server.session_ended(None)
    gc.collect()
    await next_pass()
    out["alive_below_threshold"] = dead() is not None
    server.session_ended(None)                          # the threshold: the next pass is full
    await next_pass()
    out["alive_after_session_collect"] = dead() is not None
    out["frozen_after_session_collect"] = gc.get_freeze_count()
    out["full"] = server._GC["full"]
    # young garbage is collected by the periodic pass itself
    c, d = Node(), Node()
    c.other, d.other = d, c
    young = weakref.ref(c)
    del c, d
    await next_pass()
    out["young_alive"] = young() is not None
    print(json.dumps(out))

print(json.dumps({"no_loop": server.start_gc_freezer()}))
asyncio.run(main())
"""


def test_gc_freezer_freezes_periodically_and_ended_sessions_are_still_reclaimed():
    """In its own process (it changes the process's collector). Panel's own collection
    after a session ends stays young-only until enough sessions ended."""
    import json
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", GC_SCRIPT], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    first, second = (json.loads(line) for line in r.stdout.strip().splitlines()[-2:])
    assert first == {"no_loop": False}        # outside a running server it does nothing
    assert second["started"] is True
    assert second["frozen_at_start"] > 10_000
    assert second["frozen_later"] >= second["frozen_at_start"]
    assert second["alive_after_plain_collect"] is True
    assert second["alive_below_threshold"] is True
    assert second["alive_after_session_collect"] is False
    assert second["full"] == 1
    assert second["frozen_after_session_collect"] > 10_000    # frozen again afterwards
    assert second["young_alive"] is False


TRIM_SCRIPT = """
import json, psutil
from attention_scaling.server import collect
def rss(): return psutil.Process().memory_info().rss / 2**20
held = [bytearray(1000) for _ in range(300_000)]
pin = bytearray(1000)       # allocated last: the freed memory is not at the heap's top
before = rss()
del held
freed = rss()
collect.collect_and_freeze()
print(json.dumps({"before": before, "freed": freed, "after": rss(), "pin": len(pin)}))
"""


def test_the_periodic_collection_gives_freed_memory_back_to_the_system():
    """300 MiB of small objects freed stay in the process's RSS (the allocator keeps them)
    until the server's periodic collection, which returns them to the system (glibc's
    malloc_trim). In its own process, whose RSS is read from the system."""
    import json
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", TRIM_SCRIPT], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    rss = json.loads(r.stdout.strip().splitlines()[-1])
    assert rss["freed"] > rss["before"] - 100          # freed, yet still held
    assert rss["after"] < rss["freed"] - 200, rss       # given back


def serve_in_process(port: int, app=serve_session):
    """``app`` (by default the app as the CLI serves it) served as the CLI serves it (no
    Location), in this thread's event loop; sessions unsigned whatever Bokeh's process-wide
    defaults (read when Bokeh's server module is first imported) say, as this test process
    imports it in many ways."""
    return pn.serve(app, port=port, address="127.0.0.1", show=False, start=False,
                    location=False, websocket_origin=[f"127.0.0.1:{port}"],
                    sign_sessions=False, secret_key=None)


def fetch_page(port: int) -> bytes:
    """GET the page, blocking (run it in an executor: the server shares the event loop)."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/")
    return conn.getresponse().read()


def test_a_served_session_has_no_browser_info_model():
    """The page never reads the browser's settings: no Panel BrowserInfo root in a served
    session (it would send seven messages to the server while the page is being drawn)."""
    import asyncio

    from conftest import free_port, run_in_thread

    async def main():
        port = free_port()
        server = serve_in_process(port)
        try:
            await asyncio.get_running_loop().run_in_executor(None, fetch_page, port)
            [session] = server.get_sessions("/")
            return [type(root).__name__ for root in session.document.roots]
        finally:
            server.stop()

    roots = run_in_thread(main)
    assert roots == ["Column"], roots          # the explorer's layout, and nothing of Panel's




def test_a_change_is_held_into_one_message():
    """Bokeh's Document.hold around a change: the events of the whole update (bars, heatmap,
    text, marker) reach the document's listeners as one batch on release."""
    from bokeh.document import Document
    ex = Explorer()
    doc = Document()
    ex.page().server_doc(doc)
    seen = []
    doc.callbacks.on_change(lambda event: seen.append(event))
    with held(doc):
        ex.state.d_k = 512
        assert seen == []                        # nothing leaves while held
    assert len(seen) > 5                         # the whole update, released together
    with held(None):                             # no document (a script): a plain block
        ex.state.d_k = 64
    assert ex.d_k_slider.value == list(ex.state.param.d_k.objects).index(64)


def test_controls_are_plain_bokeh_widgets_bound_to_the_state():
    ex = Explorer()
    ex.rule_buttons.active = 0
    assert ex.state.rule == "none"
    ex.state.rule = "linear"
    assert ex.rule_buttons.active == 2
    ex.rule_buttons.active = 7              # not a rule (a forged message): put back
    assert ex.rule_buttons.active == 2 and ex.state.rule == "linear"


def test_one_binder_puts_back_every_forged_value_of_each_kind_of_control():
    """A slider (an option's position), the tabs (the active index) and the seed (a count
    within its bounds): a value that is not one is put back where the state is, a real one
    applied, and the state's own change reaches the widget."""
    ex = Explorer()
    s, tabs = ex.state, ex.view.widgets["tab"]
    low, high = s.param.seed.bounds
    for widget, prop, name, forged, real in (
            (ex.d_k_slider, "value", "d_k", (2.5, -1, 1e308, float("nan"), 25), 3),
            (tabs, "active", "tab", (-1, len(tabs.tabs), 10**9), 2),
            (ex.seed_input, "value", "seed", (low - 1, high + 1, 3.5, float("inf")), 1234)):
        shown = getattr(widget, prop)
        for bad in forged:
            setattr(widget, prop, bad)
            assert getattr(widget, prop) == shown, (name, bad)
        before = getattr(s, name)
        setattr(widget, prop, real)
        assert getattr(s, name) != before and getattr(widget, prop) == real, name
    s.seed = 77
    assert ex.seed_input.value == 77
    s.tab = list(s.param.tab.objects)[0]
    assert tabs.active == 0
