"""The latency adaptations (attention_scaling.latency) are in place and keep their promises."""

import os

import panel as pn
import pytest
import panel.io.document as pdoc
from bokeh.server.views.ws import WSHandler

from attention_scaling import core, latency
from attention_scaling.page import Explorer, create_page


def test_install_patches_panel_dispatch_and_bokeh_websocket_once():
    first = latency.install()
    again = latency.install()
    assert first == again == {"dispatch": True, "nodelay": True, "validation": True,
                              "defaults": True, "stable": True, "lists": True, "refs": True,
                              "synced": True, "ids": True, "shims": True, "prepared": True}
    assert getattr(pdoc._dispatch_msgs, "_attention_scaling", False)
    assert getattr(WSHandler.open, "_attention_scaling", False)
    # installed once: the wrapper wraps Panel's original, not itself
    assert not getattr(pdoc._dispatch_msgs.__wrapped__, "_attention_scaling", False)


def test_page_installs_them():
    create_page()
    assert getattr(pdoc._dispatch_msgs, "_attention_scaling", False)


def test_fast_widgets_have_no_debounce_and_no_busy_bookkeeping():
    w = latency.fast(pn.widgets.Switch())
    assert w._debounce == 0
    assert "value" in w._busy__ignore
    assert pn.widgets.Switch._debounce > 0          # the class itself is untouched
    ex = Explorer()
    assert ex.scaled_switch._debounce == 0


def test_sliders_are_bokeh_models_synced_both_ways():
    ex = Explorer()
    ex.state.d_k = 128
    assert ex.d_k_slider.value == list(ex.state.param.d_k.objects).index(128)
    ex.d_k_slider.value = 0          # as if from the browser (no document: applied directly)
    assert ex.state.d_k == 1
    ex.temperature_slider.value = len(ex.state.param.temperature.objects) - 1
    assert ex.state.temperature == 10


def test_session_hold_without_a_document_is_a_plain_block():
    with latency.session_hold(None):
        x = 1
    assert x == 1


def test_the_page_document_passes_bokehs_validation_that_sessions_skip(caplog):
    """Sessions skip Bokeh's per-session document check (latency 6); the check runs here."""
    import logging
    import os

    from bokeh.core.validation.check import check_integrity
    from bokeh.document import Document
    from bokeh.settings import settings

    latency.install()
    if "BOKEH_VALIDATE_DOC" not in os.environ:
        assert settings.perform_document_validation() is False
    for hidden in (set(), {"header", "controls", "text"}):
        doc = Document()
        Explorer().page(hidden=hidden).server_doc(doc)
        with caplog.at_level(logging.WARNING):
            issues = check_integrity(list(doc.models))
        assert not issues.error and not issues.warning, issues


def test_cached_overridden_defaults_equal_bokehs_own_for_every_model_class():
    """The per-class cache (latency 7) returns exactly what Bokeh computes, for every class."""
    from bokeh.core.has_props import HasProps
    from bokeh.model import Model

    latency.install()
    original = HasProps._overridden_defaults.__func__.__wrapped__
    classes = list(Model.model_class_reverse_map.values())
    assert len(classes) > 300
    for cls in classes:
        assert HasProps._overridden_defaults.__func__(cls) == original(cls), cls
    # and a model built afterwards still gets its class's overrides
    from bokeh.plotting import figure
    fig = figure()
    assert fig.toolbar.logo == original(type(fig.toolbar)).get("logo", "normal")


def test_stable_defaults_read_as_bokeh_reads_them_for_every_model_class():
    """Latency 13: every default read through the cache equals Bokeh's own, for every property
    of every model class, read twice (the second comes from the cache); a mutable one is a
    fresh copy each time, as Bokeh's is; a theme still wins."""
    from bokeh.core.property.descriptors import PropertyDescriptor
    from bokeh.model import Model
    from bokeh.themes import Theme

    latency.install()
    original = PropertyDescriptor._get_default.__wrapped__
    checked = copies = 0
    for cls in Model.model_class_reverse_map.values():
        try:
            ours, theirs = cls(), cls()
        except Exception:       # classes that need arguments
            continue
        for name in cls.properties():
            desc = cls.lookup(name)
            if name in ours._property_values or desc.has_unstable_default(ours):
                continue
            try:
                want = original(desc, theirs)
            except Exception:
                continue
            for _ in range(2):
                got = desc._get_default(ours)
                assert type(got) is type(want), (cls, name)
                assert got == want or (got != got and want != want), (cls, name)   # or NaN
            if isinstance(got, list):
                again = desc._get_default(ours)
                assert again is not got
                got.append("changed")
                assert desc._get_default(ours) == want, (cls, name)
                copies += 1
            checked += 1
    assert checked > 5000 and copies > 100
    from bokeh.plotting import figure
    themed, plain = figure(), figure()
    Theme(json={"attrs": {"Plot": {"background_fill_color": "#123456"}}}).apply_to_model(themed)
    assert themed.background_fill_color == "#123456"
    assert plain.background_fill_color == "#ffffff"


GZIP_FILES = {"app.js": b"const x = 1;\n" * 4000, "logo.png": bytes(range(256)) * 40,
              # compresses to more than the sockets buffer: a client can leave mid-file
              "big.js": os.urandom(6 * 2**20).hex().encode()}


def test_static_files_are_gzipped_once_and_served_whole(tmp_path):
    """Latency 14: a static file is compressed once; every answer is the file itself, with or
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
                           (r"/page", Page)], transforms=[latency.gzip_static_once()])
        server = app.listen(port, address="127.0.0.1")
        client = AsyncHTTPClient(force_instance=True)
        url = f"http://127.0.0.1:{port}"

        async def get(path, **headers):
            return await client.fetch(url + path, headers=headers, decompress_response=False,
                                      raise_error=False)
        try:
            latency._GZIP_CACHE.clear()
            answers = [await get("/static/app.js", **{"Accept-Encoding": "gzip"})
                       for _ in range(3)]
            for r in answers:
                assert r.code == 200 and r.headers["Content-Encoding"] == "gzip"
                assert gzip.decompress(r.body) == GZIP_FILES["app.js"]
            assert len(latency._GZIP_CACHE) == 1
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
            latency._GZIP_CACHE.pop(next(k for k in latency._GZIP_CACHE if "big" in k[0]))
            page = await get("/page", **{"Accept-Encoding": "gzip"})
            assert gzip.decompress(page.body) == b"<p>page</p>" * 500
            assert len(latency._GZIP_CACHE) == 1             # neither the png nor the page
            (tmp_path / "app.js").write_bytes(b"let y = 2;\n" * 3000)
            StaticFileHandler.reset()                        # forget the old content hash
            changed = await get("/static/app.js", **{"Accept-Encoding": "gzip"})
            assert gzip.decompress(changed.body) == b"let y = 2;\n" * 3000
        finally:
            client.close()
            server.stop()
            latency._GZIP_CACHE.clear()

    run_in_thread(main)


def test_list_shortcut_encodes_exactly_as_bokeh_does():
    """Latency 8: plain lists skip Bokeh's per-item encoding; the result must not change."""
    import math
    import random

    import numpy as np
    from bokeh.core.serialization import Serializer
    from bokeh.models import Range1d

    latency.install()
    fast = Serializer._encode_list
    assert getattr(fast, "_attention_scaling", False)
    original = fast.__wrapped__
    rng = random.Random(3)
    big = 2 ** 53
    cases = [
        [], [0.5, -1.25, 3.0], ["a", "b"], [True, False, 1, 0], [1, 2.5, "x", True],
        [0.1, math.nan, 2.0], [math.inf], [-math.inf, 1.0], [big - 1], [big + 1], [-big],
        [np.float64(0.25), 1.0], [np.int64(3)], [None, 1.0], [[1.0, 2.0], [3.0]], [(1, 2)],
        [{"a": 1}], [Range1d(start=0, end=1)],
        [rng.uniform(-1e6, 1e6) for _ in range(200)],
        [str(rng.random()) for _ in range(50)],
    ]
    for case in cases:
        got = fast(Serializer(), case)
        want = original(Serializer(), case)
        assert got == want or repr(got) == repr(want), case
        assert type(got) is list
        if case:
            assert got is not case          # a copy, as Bokeh's encoder returns
    # out-of-range ints and NaN still reach Bokeh's own path (its warning, its NaN marker)
    assert fast(Serializer(), [math.nan])[0] == {"type": "number", "value": "nan"}


def comparable(msg):
    """A message's content and buffers, with the buffers' ids (fresh for every message)
    replaced by their numbers."""
    text = msg.content_json
    for i, buf in enumerate(msg.buffers):
        text = text.replace(f'"id":"{buf.id}"', f'"id":"buffer {i}"')
    return text, [b.to_bytes() for b in msg.buffers]


def test_patch_docs_are_the_same_without_8_10_and_11(monkeypatch):
    """Latency 8, 10 and 11 only make messages faster: build real changes' PATCH-DOCs with
    them and with Bokeh's own list encoding, references and synced set, and compare; also
    when models are added to the live document (they must go out whole, once)."""
    from bokeh.core.serialization import Serializer
    from bokeh.document import Document
    from bokeh.document.models import DocumentModelManager
    from bokeh.model import Model
    from bokeh.models import Label
    from bokeh.protocol import Protocol

    latency.install()
    doc = Document()
    ex = Explorer()
    doc.add_root(ex.__panel__().get_root(doc))
    doc.to_json()                        # as a session does: every model is now known
    events = []
    doc.on_change(events.append)
    label = Label(x=1, y=0.5, text="added while live")

    changes = [lambda: ex.state.param.update(d_k=256),
               lambda: ex.state.param.update(scaled=False),
               lambda: ex.charts.scaled_fig.add_layout(label),        # a new model
               lambda: ex.state.param.update(temperature=2.0),
               lambda: setattr(label, "text", "changed"),             # now a known one
               lambda: ex.state.param.update(seed=7)]
    for i, change in enumerate(changes):
        events.clear()
        change()
        assert events
        with monkeypatch.context() as m:
            # both builds must see the same "not yet sent" models: flush after both
            m.setattr(doc.models, "flush_synced", lambda *args, **kwargs: None)
            fast = Protocol().create("PATCH-DOC", list(events))
            m.setattr(Serializer, "_encode_list", Serializer._encode_list.__wrapped__)
            m.setattr(Model, "ref", property(Model.ref.fget.__wrapped__))
            m.setattr(DocumentModelManager, "synced_references",
                      property(DocumentModelManager.synced_references.fget.__wrapped__))
            m.setattr(Serializer, "__init__", Serializer.__init__.__wrapped__)
            slow = Protocol().create("PATCH-DOC", list(events))
        assert comparable(fast) == comparable(slow), i
        whole = '"name":"Label"' in fast.content_json
        assert whole == (i == 2), i          # the new model went out whole, exactly once
        doc.models.flush_synced()
        # and the synced set is kept between messages (Bokeh replaces the empty set of
        # not-yet-sent models by another after each one)
        kept = doc.models.synced_references
        doc.models.flush_synced(lambda model: False)
        assert doc.models.synced_references is kept
    # a reference is exactly what Bokeh builds, for every model of the page
    original = Model.ref.fget.__wrapped__
    assert getattr(Model.ref.fget, "_attention_scaling", False)
    for model in doc.models:
        assert model.ref == original(model) == {"id": model.id}
        assert type(model.ref) is type(original(model)) is dict


def test_incoming_patches_apply_as_with_bokehs_own_deserializer(monkeypatch):
    """Latency 12: a browser's change (a PATCH-DOC with references to the page's models)
    applies exactly as before, and a reference to an unknown model still fails the same way."""
    import threading

    from bokeh.core.serialization import Deserializer, UnknownReferenceError
    from bokeh.document import Document

    latency.install()
    results, seen = [], []
    for adapted in (True, False):
        doc = Document()
        ex = Explorer()
        doc.add_root(ex.__panel__().get_root(doc))
        slider = ex.d_k_slider
        patch = {"events": [{"kind": "ModelChanged", "model": {"id": slider.id},
                             "attr": "value", "new": 3}]}
        # while the change is applied: was the manager's mapping handed over (consumed)? And a
        # Deserializer built meanwhile in another thread, from another page's models (as many
        # as this page has), must map those, not this document's.
        other = Document()
        other.add_root(Explorer().__panel__().get_root(other))
        assert len(other.models) == len(doc.models)

        def during(attr, old, new):
            seen.append(list(latency._patching()))
            box = {}
            t = threading.Thread(target=lambda: box.update(
                stack=list(latency._patching()), d=Deserializer(list(other.models))))
            t.start()
            t.join()
            assert box["stack"] == []                      # this thread applies no patch
            assert box["d"]._references == {m.id: m for m in other.models}

        slider.on_change("value", during)
        with monkeypatch.context() as m:
            if not adapted:
                m.setattr(Document, "apply_json_patch", Document.apply_json_patch.__wrapped__)
                m.setattr(Deserializer, "__init__", Deserializer.__init__.__wrapped__)
            doc.apply_json_patch(patch)
            results.append((ex.state.d_k, slider.value))
            by_id = {model.id: model for model in doc.models}
            d = Deserializer(list(doc.models))          # outside a patch: Bokeh's own
            assert d._references == by_id
            bad = {"events": [{"kind": "ModelChanged", "model": {"id": "p-nowhere"},
                               "attr": "value", "new": 1}]}
            with pytest.raises(UnknownReferenceError):
                doc.apply_json_patch(bad)
    assert results[0] == results[1] == (core.D_K_VALUES[3], 3)
    assert seen == [[None], []]          # the adapted path was taken, then Bokeh's own
    assert latency._patching() == []


GC_SCRIPT = r"""
import asyncio, gc, json, time, weakref
import panel.io.document as pdoc
from attention_scaling import latency

class Node:
    pass

async def main():
    out = {"without_loop": None}
    started = latency.start_gc_freezer(period_s=0.2)
    out["started"] = started and latency.start_gc_freezer(period_s=0.2)   # idempotent
    out["frozen_at_start"] = gc.get_freeze_count()
    # a cycle that dies after the periodic freeze has frozen it: only a thaw reclaims it
    a, b = Node(), Node()
    a.other, b.other = b, a
    dead = weakref.ref(a)
    await asyncio.sleep(0.5)                       # frozen by the periodic callback
    out["frozen_later"] = gc.get_freeze_count()
    del a, b
    gc.collect()
    out["alive_after_plain_collect"] = dead() is not None   # frozen: not walked
    # sessions end: below the threshold Panel's post-session collection stays young-only
    for _ in range(latency.GC_FULL_AFTER_ENDED - 1):
        latency._session_ended(None)
    pdoc._garbage_collect()                         # what Panel runs after a session ends
    out["alive_below_threshold"] = dead() is not None
    latency._session_ended(None)                    # the threshold: a full collection
    pdoc._garbage_collect()
    out["alive_after_session_collect"] = dead() is not None
    out["frozen_after_session_collect"] = gc.get_freeze_count()
    out["full"] = latency._GC["full"]
    # young garbage is collected by the periodic pass itself
    c, d = Node(), Node()
    c.other, d.other = d, c
    young = weakref.ref(c)
    del c, d
    await asyncio.sleep(0.5)
    out["young_alive"] = young() is not None
    print(json.dumps(out))

print(json.dumps({"no_loop": latency.start_gc_freezer()}))
asyncio.run(main())
"""


def test_gc_freezer_freezes_periodically_and_ended_sessions_are_still_reclaimed():
    """Latency 9, in its own process (it changes the process's collector)."""
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


def _page_document():
    from bokeh.document import Document

    doc = Document()
    create_page().server_doc(doc)
    return doc


def test_module_shims_only_on_a_page_that_uses_them():
    """Latency 16: Panel's es-module-shims is left out of our page (no ReactiveESM model),
    kept on a page with one, and kept where Panel renders without a document."""
    from bokeh.document import Document
    from panel.io.resources import Resources
    from panel.io.state import set_curdoc

    class Counter(pn.custom.JSComponent):
        _esm = "export function render({ el }) { el.textContent = 'x' }"

    latency.install()
    resources = Resources(mode="server")
    ours = _page_document()
    with set_curdoc(ours):
        files = resources.js_files
    assert files and not any("es-module-shims" in f for f in files)
    assert any("bokeh.min.js" in f for f in files)
    other = Document()
    Counter().server_doc(other)
    with set_curdoc(other):
        assert any("es-module-shims" in f for f in resources.js_files)
    assert any("es-module-shims" in f for f in resources.js_files)    # no document


def test_a_prepared_document_is_what_bokeh_would_send_until_it_changes():
    """Latency 17: the PULL-DOC reply made from the prepared JSON equals Bokeh's own; a change
    to the document discards it (the reply then has the change); it is used once."""
    from bokeh.document import Document
    from bokeh.protocol import Protocol

    latency.install()
    doc = _page_document()
    watchers = doc.callbacks.change_callbacks()
    latency.prepare_document(doc)
    assert doc in latency._PREPARED
    prepared = Protocol().create("PULL-DOC-REPLY", "x", doc)
    assert doc not in latency._PREPARED                 # used once
    assert doc.callbacks.change_callbacks() == watchers  # later changes do not pay for it
    fresh = Protocol().create("PULL-DOC-REPLY", "x", doc)
    assert comparable(prepared) == comparable(fresh)
    assert '"name":"Slider"' in prepared.content_json

    doc = _page_document()
    watchers = doc.callbacks.change_callbacks()
    latency.prepare_document(doc)
    slider = next(m for m in doc.models if type(m).__name__ == "Slider")
    slider.value = 3                                           # as a browser's change would
    assert doc not in latency._PREPARED
    assert doc.callbacks.change_callbacks() == watchers
    reply = Protocol().create("PULL-DOC-REPLY", "x", doc)
    assert comparable(reply) == comparable(Protocol().create("PULL-DOC-REPLY", "x", doc))
    assert any(m.get("id") == slider.id and dict(m["attributes"]).get("value") == 3
               for m in _models(reply.content["doc"]))
    # serialised for a client already: not prepared again
    latency.prepare_document(doc)
    assert doc not in latency._PREPARED
    assert Document() not in latency._PREPARED
    # at most MAX_PREPARED wait at once; one is free again once used
    waiting = [Document() for _ in range(latency.MAX_PREPARED + 1)]
    for d in waiting:
        latency.prepare_document(d)
    prepared = [d in latency._PREPARED for d in waiting]
    assert prepared == [True] * latency.MAX_PREPARED + [False]
    waiting[0].to_json()
    latency.prepare_document(waiting[-1])
    assert waiting[-1] in latency._PREPARED
    for d in waiting:
        d.to_json()
    assert len(latency._PREPARED) == 0


def _models(obj):
    """Every serialised model (``{"type": "object", "id": ...}``) in a document's JSON."""
    if isinstance(obj, dict):
        if obj.get("type") == "object" and "id" in obj:
            yield obj
        for value in obj.values():
            yield from _models(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _models(value)


def serve_in_process(port: int):
    """The app as the CLI serves it (no Location), in this thread's event loop."""
    return pn.serve(create_page, port=port, address="127.0.0.1", show=False, start=False,
                    location=False, websocket_origin=[f"127.0.0.1:{port}"])


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

    assert run_in_thread(main) == ["Column"]


def test_the_document_is_prepared_after_its_page_is_sent_and_answers_the_pull(monkeypatch):
    """Latency 17 in a real server: the page goes out first (preparing is made slow here and
    the page does not wait for it), then the session's document is prepared, and the
    browser's PULL-DOC is answered with it."""
    import asyncio
    import time
    import types

    from bokeh.protocol import Protocol
    from bokeh.server.session import ServerSession

    from conftest import free_port, run_in_thread

    latency.install()
    real = latency.prepare_document
    started = []

    def slow_prepare(doc):
        started.append(time.monotonic())
        time.sleep(1.0)                  # blocks the server, as a slow serialisation would
        real(doc)
    monkeypatch.setattr(latency, "prepare_document", slow_prepare)

    async def main():
        port = free_port()
        server = serve_in_process(port)
        try:
            # the time the page arrived, taken in the client's thread (the server's is blocked
            # while it prepares)
            body, received = await asyncio.get_running_loop().run_in_executor(
                None, lambda: (fetch_page(port), time.monotonic()))
            assert b"data-root-id" in body
            for _ in range(100):
                if started and server.get_sessions("/")[0].document in latency._PREPARED:
                    break
                await asyncio.sleep(0.05)
            assert started, "the document was never prepared"
            # the whole page arrived before preparing began (else it would have waited 1 s)
            assert received < started[0] + 0.5
            [session] = server.get_sessions("/")
            protocol = Protocol()
            connection = types.SimpleNamespace(session=session, protocol=protocol)
            reply = await ServerSession.pull(protocol.create("PULL-DOC-REQ"), connection)
            assert session.document not in latency._PREPARED    # it was used
            assert comparable(reply) == comparable(
                protocol.create("PULL-DOC-REPLY", reply.header["reqid"], session.document))
        finally:
            server.stop()

    run_in_thread(main)
