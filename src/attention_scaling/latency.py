"""Why the page answers a slider in ~8 ms, not Panel's ~65 ms, opens faster and repaints
sooner: the costs removed.

Measured on 127.0.0.1 in headless Chromium (slider value set → new bar data in the browser),
a plain Panel app takes ~60 ms where a plain Bokeh app needs ~5-10 ms. The time goes to:

1. **Panel's debounce of browser→server changes** (``panel.reactive.Syncable._debounce``,
   a class attribute, 50 ms): each incoming property change waits 50 ms on a timeout
   callback before Panel applies it. Panel has no public setting for it. We set it to 0 on
   our own widgets (:func:`fast`). Semantics stay: Panel merges pending changes into one
   dict per widget and keeps a single flush callback pending, so when a user drags fast the
   last value always wins and values are never applied out of order.

2. **Panel's dispatch of server→browser messages** (``panel.io.document._dispatch_msgs``):
   when Bokeh is still writing to the websocket (its ``write_lock`` is held, typically by the
   reply to the very change we are answering), Panel re-queues the patch and polls again
   after ``asyncio.sleep(0.01)``: 10-15 ms for nothing. :func:`install` wraps it so it waits on
   the lock itself (woken the moment the write finishes) and then runs Panel's original,
   which re-checks and keeps its own poll as a fallback. Same queue, same order.

3. **Nagle's algorithm on the websocket**: Bokeh sends a message as several websocket frames
   (header, metadata, content, binary buffers); with Nagle on, a later small frame can wait for
   the client's delayed ACK (~40 ms). Tornado's public ``WebSocketHandler.set_nodelay(True)``
   turns it off; :func:`install` calls it when Bokeh's websocket handler opens.

4. **Panel's busy-state bookkeeping**: around every widget change Panel adds and removes a
   "busy" event on ``pn.state`` (``Reactive._process_events``), which toggles read-only flags
   on all of ``pn.state``'s parameters and drives a template's spinner: ~3 ms per change.
   :func:`fast` opts our widgets out through Panel's ``_busy__ignore`` list, and the page
   has no busy spinner.

5. **Panel's widget path itself**: even with 1-4 removed, a change to a Panel widget is
   applied in a callback scheduled *after* Bokeh has begun its reply to the browser's
   message, through Panel's parameter syncing (~3-5 ms here), and the update then waits for
   that reply to finish writing. The two sliders that carry drags (head width, temperature)
   are therefore plain Bokeh ``Slider`` models in a ``pn.pane.Bokeh`` (page.index_slider): their
   Python ``on_change`` runs while Bokeh applies the message, and :func:`session_hold` batches
   the whole update into one PATCH-DOC that leaves before Bokeh's reply. Bokeh applies
   messages in arrival order, so values are never applied out of order and the last one
   wins. The switch and buttons stay Panel widgets (with :func:`fast`).

6. **Bokeh's document validation on every session open** (``Document.validate``: an
   integrity check over every model, ~4-8% of the server's work to open a tab). Our document
   is the same for every session; a unit test validates it instead. :func:`install` turns it
   off through Bokeh's public setting (``BOKEH_VALIDATE_DOC``), unless that variable is set.

7. **Bokeh's default lookups while a session's document is built and serialised**: every
   read of a property left at its default asks the class for its overridden defaults
   (``HasProps._overridden_defaults``), which merges a dict over the whole class hierarchy on
   each call — ~40,000 calls per session here. The result depends only on the class (Bokeh
   fills ``__overridden_defaults__`` when the class is created), so :func:`install` caches it
   per class: ~15% less server work to open a tab (measured side by side, alternating).

8. **Bokeh's encoding of list columns, item by item**: a PATCH-DOC's plain Python lists (the
   small columns are sent as lists, see charts.py) go through ``Serializer.encode`` once per
   item (~300 calls per change): about half of building the message. A list whose items are
   all finite floats, safe-range ints, strings or bools encodes to itself; :func:`install`
   gives ``Serializer._encode_list`` that shortcut and leaves every other list to Bokeh.
   A test compares the result with Bokeh's own encoder.

9. **Python's full garbage collections with many sessions open**: each session holds ~10,000
   objects tracked by the cyclic collector; with 150 sessions a full collection walks 1.7
   million of them and stops the server for 1-2 s, about once a minute while students move
   sliders (new column data survives each change and fills the oldest generation), and
   Panel runs one more a few seconds after every closed tab. Every change in flight waits.
   :func:`install` (inside a running server) collects and then ``gc.freeze()``-s every 10 s,
   so collections only walk what is younger than that; a closed session's objects (frozen
   with the rest) are reclaimed by a full collection once enough sessions have ended
   (:func:`collect_and_freeze`), which also replaces Panel's collection after each one.

10. **Bokeh's model references, built through a typing construct**: every outgoing message
    starts by mapping every model of the session's document (~190 here) to a reference,
    ``Model.ref``, which calls the ``TypedDict`` ``Ref(id=...)``: ~0.4 µs a call against
    ~0.1 µs for the same plain dict written as a literal (a ``TypedDict`` instance *is* a
    plain dict). With the reverse mapping for incoming messages this was ~12% of the server's
    CPU per change. :func:`install` gives ``Model.ref`` the literal; a test checks that the
    results are equal dicts for every model of the page.

11. **...and the same references, rebuilt for every message**: the set of models a session
    has already sent (``DocumentModelManager.synced_references``) changes only when models
    are added or removed, yet Bokeh rebuilds it, and a reference for each of its models, for
    every outgoing message: ~5% of the server's CPU per change. :func:`install` keeps both
    per document until its model set changes (the manager's model dict is replaced, or the
    number of models or of not-yet-sent models changes) and hands ``Serializer`` a copy of
    the references. A test compares the messages with Bokeh's own, also after models were
    added to a live document.

12. **...and the reverse, for every incoming message**: ``Document.apply_json_patch`` builds
    its ``Deserializer`` from ``list(doc.models)``, which maps every model's id to the model
    again (~5-8% of the server's CPU per change), although the document's model manager
    keeps exactly that mapping. :func:`install` hands the ``Deserializer`` a copy of it.

Opening a page (benchmarks/run.py's "navigation -> first chart drawn") had two more costs on
the server's one thread, before the browser could start:

13. **Bokeh's defaults, recomputed on every read**: a property left at its default is
    recomputed (copied, prepared, validated) each time it is read, and Bokeh and Panel walk
    all of a new document's models about a dozen times while they build a session
    (``Model.references`` for ``select``, ``remove_root``, CSS patching, the model manager),
    reading every property that can hold a model. A *stable* default (Bokeh's own notion: not
    a factory, not a container; Bokeh keeps the others per instance itself) depends only on
    the property and the class, so :func:`install` remembers it per (property, class) and
    hands out a copy where Bokeh would (lists, dataclasses); a theme's values still go to
    Bokeh. Building and serialising a session's document: ~400 → ~265 ms (medians of 20
    builds, processes alternating); benchmarks/run.py's time to open a session 1.07 → 0.72 s.
    A test compares every default of every model class with Bokeh's own.

14. **gzip of every script for every page load**: we serve compressed (5.7 MB of scripts
    become 1.6 MB per student on a classroom's network), but Tornado's ``compress_response``
    compresses BokehJS and Panel's bundles again for every page: ~130 ms of the server's
    thread per page load (55 ms for bokeh.min.js alone) while everyone else waits.
    :func:`gzip_static_once` is Tornado's own transform that also keeps the compressed body
    of each static file sent whole, named by its content hash (the ``Etag``), and sends that
    the next time: the six scripts then take ~12 ms. The CLI passes it as the server's
    ``transforms``.

    Together with 15 below (the Location model is gone from every session), a page opens
    ~0.26 s sooner: 2.16 → 1.90 s (navigation → first chart, medians of 15, the previous
    version and this one served side by side, loads alternating).

16. **A script the page never uses**: Panel puts es-module-shims (a polyfill for its
    ``ReactiveESM`` components, JavaScript modules in the page) on every page. On load it
    detects the browser's module features by building elements and a hidden frame: 50-80 ms
    of the browser's main thread per page load (a CPU profile of a cold load) for a page
    with no such component. :func:`install` leaves it out of a page whose document has no
    ``ReactiveESM`` model and keeps it wherever one is (a test checks both).

17. **The document serialised while the browser waits for it**: the browser asks for the
    session's document (PULL-DOC) only once it has loaded and run all the scripts,
    ~0.5 s after it got the page; the server, idle in between, then spends ~45 ms (up to
    ~90 ms in this VM's slow phases) turning the document into JSON while the page waits.
    :func:`install` has the server do that right after it has sent the page (the page is
    not held back: a test makes serialising slow and times the page) and answers the
    PULL-DOC with the result, if the document has not changed since (any change of the
    document discards it; a test checks that the reply equals Bokeh's own in both cases).
    The result holds ~1.2 MB until the browser asks, so at most :data:`MAX_PREPARED`
    documents wait at once. Side by side with 16 (12 cold loads each, alternating): first
    chart drawn 1,726 → 1,631 ms, the browser's main thread busy 1,216 → 1,089 ms.

And back to every change:

15. **Panel's Location, a second round trip per change**: Panel keeps the address bar in sync
    from the server (``pn.state.location``): the server sends the new query string, the
    browser applies it and sends the resulting address back, and the server processes that
    as a Panel widget change (busy bookkeeping included) and answers it: two more messages
    each way per slider step. The page writes its address itself instead (page.URL_JS: the
    query string travels with the text fields) and the CLI serves without a Location
    (``pn.serve(location=False)``). Server CPU per change, driven from a real browser, side
    by side: 7.3 → 4.9 ms.

18. **Style work BokehJS repeats on every paint** (the page's side; the plain-Bokeh floor pays
    the same). A change's repaint took ~30 ms of the browser's main thread, and about a third
    of it went to two things (CPU profiles of 60 changes):

    - *CSS variables read again for every renderer drawn*: Bokeh 3.9 lets a style sheet
      override any visual property (``--bk-major-label-text-color`` and so on) and looks each
      one up, ``getComputedStyle(el).getPropertyValue(...)``, every time it draws: ~1,500
      lookups per change here, all returning "" (this page sets no such variable, at load or
      later). The browser's wrap of ``VisualProperties._get_css_value`` looks each up once
      per renderer view (its first paint after the wrap, or a view Bokeh rebuilds) and
      reuses the answer.
    - *Style sheets rewritten with the same text*: each renderer puts its position into its own
      ``<style>`` on every paint (``InlineStyleSheet._update`` sets ``textContent``), 83 per
      change here, of which 78 with the text they already had; each rewrite makes the browser
      recompute styles, forced by the next style read in the same paint. The wrap skips a
      rewrite that would not change the text (the DOM ends the same).

    :func:`lighten_repaint` adds both wraps to a document, run by the browser once the
    document is ready, after its first paint (served page and offline copy; the first paint
    spends no measurable time on these lookups, so nothing is lost by wrapping later).
    Alternate changes in one page, each wrap on and off: the next painted frame after a
    change 69.9 → 60.0 ms (CSS variables) and 65.2 → 55.2 ms (style sheets, with the first
    on), 60 changes each, in a slow phase.
    Browser tests compare every remembered value with Bokeh's own lookup, and check that a
    change makes no lookups and that no style sheet in the views' shadow roots is written
    with the text it had; if a Bokeh upgrade renames what these wrap, the page keeps Bokeh's
    behaviour (with a console warning) and those tests fail.

19. **The tab icon, drawn again after every address update** (the page's side). After each
    change the page writes the controls into its address (page.URL_JS, ``replaceState``), and
    Chromium then fetches and decodes the tab icon again. The icon was an SVG, which Chromium
    draws as a document of its own on the page's main thread: an ``<svg>`` and its shapes
    inserted, styled, laid out and painted, once per slider step (a trace's style
    invalidations show them). The page's icon is now the same drawing as a PNG (page.FAVICON;
    scripts/favicon.py draws assets/favicon.svg in Chromium), which is only decoded. Two
    servers side by side (pages alternating, 200 changes each, slow phase): new data
    9.05 → 8.30 ms paced and 10.05 → 8.65 ms dragging (p95 15.1 → 14.3), the next frame
    52.2 → 49.7 and 54.2 → 50.4 ms. A browser test traces slider steps with the SVG icon put
    back (it must see the icon's document drawn) and then with the page's own icon (it fails
    on any svg document); another checks that the PNG is the SVG drawn.

Measured effect (benchmarks/run.py, docs/benchmarks.md; medians, slider set from JavaScript):
default Panel ~66 ms, with 1-4 ~17 ms, with 1-5 ~12 ms, the same figures as a plain Bokeh app
(one message per event) ~11-12.6 ms; with 8-12 too (and states kept per setting in core),
8.6 ms. Served, 8 and 10-12 cut the server's CPU per change from 5.6-6.1 to 4.5-4.9 ms, and 9
the latency tail under load (150 students on one process, side by side: p95 160 → 81 ms, max
4.6 → 0.9 s); two processes behind nginx then carry 300 students at p95 41 ms.

Everything is in this module, idempotent, and checked by tests: unit tests assert that the
patches are in place, and a browser test fails if a change takes anywhere near 50 ms again
(median of many), which is what a Panel or Bokeh upgrade that reintroduces a delay would do.
"""

from __future__ import annotations

import functools
import gc
import logging
import threading
import weakref
from contextlib import contextmanager

log = logging.getLogger(__name__)



def fast(widget):
    """Apply browser changes of ``widget`` at once and without busy-state bookkeeping.

    ``_debounce = 0``: applied on the next event-loop turn instead of after 50 ms (1 above).
    ``_busy__ignore``: Panel marks the whole session busy around every widget change (for a
    loading spinner) and back, ~3 ms of parameter bookkeeping per change on this machine;
    Panel's own layouts opt out the same way for ``scroll_position`` (4 above).
    """
    widget._debounce = 0
    widget._busy__ignore = [*type(widget)._busy__ignore, "value"]
    return widget


@contextmanager
def session_hold(doc):
    """Batch the Bokeh events of a change made in a plain Bokeh callback into one message.

    Panel's ``pn.io.hold()`` needs Panel's current document, which a Bokeh ``on_change``
    callback does not set; this sets it, then holds.
    """
    import panel as pn
    from panel.io.state import set_curdoc

    if doc is None:
        yield
        return
    with set_curdoc(doc), pn.io.hold():
        yield


def _replace(owner, name: str, make, unwrap=lambda found: found, rewrap=lambda f: f) -> bool:
    """Replace ``owner.name`` (a module's or a class's function) once per process with
    ``make(original)``. ``unwrap``/``rewrap`` get the function out of and back into a
    descriptor (classmethod, property). The replacement is marked, and keeps the original as
    ``__wrapped__`` (the tests compare with it). True when in place; False, logged, when
    Panel or Bokeh no longer has the original."""
    import inspect

    found = inspect.getattr_static(owner, name, None)
    original = unwrap(found) if found is not None else None
    if original is None:
        log.warning("attention-scaling: %s.%s not found; not adapted",
                    getattr(owner, "__name__", owner), name)
        return False
    if getattr(original, "_attention_scaling", False):
        return True
    new = make(original)
    new._attention_scaling = True
    new.__wrapped__ = original
    new.__doc__ = new.__doc__ or original.__doc__
    setattr(owner, name, rewrap(new))
    return True


#: ``_replace``'s arguments for a property's getter
_PROPERTY = dict(unwrap=lambda found: found.fget if isinstance(found, property) else None,
                 rewrap=property)


def _patch_dispatch() -> bool:
    import panel.io.document as pdoc

    def make(original):
        async def _dispatch_msgs(doc):
            # Wait for Bokeh's in-flight websocket write to finish instead of sleeping 10 ms.
            for conn in list(pdoc._WRITE_MSGS.get(doc, {})):
                lock = getattr(getattr(conn, "_socket", None), "write_lock", None)
                # the same "is it held" test Panel uses (tornado.locks.Lock has no locked())
                if lock is not None and lock._block._value == 0:
                    async with lock:
                        pass
            await original(doc)
        return _dispatch_msgs

    return _replace(pdoc, "_dispatch_msgs", make)


def _patch_nodelay() -> bool:
    from bokeh.server.views.ws import WSHandler

    def make(original):
        def open(self, *args, **kwargs):
            self.set_nodelay(True)
            return original(self, *args, **kwargs)
        return open

    return _replace(WSHandler, "open", make)


def _cache_overridden_defaults() -> bool:
    from bokeh.core.has_props import HasProps

    def make(original):
        cache: dict[type, dict] = {}

        def _overridden_defaults(cls) -> dict:
            found = cache.get(cls)
            if found is None:
                found = cache[cls] = original(cls)
            return found
        return _overridden_defaults

    return _replace(HasProps, "_overridden_defaults", make,
                    unwrap=lambda found: getattr(found, "__func__", None), rewrap=classmethod)


_MISSING = object()
_UNSTABLE = object()
_IMMUTABLE = frozenset({type(None), bool, int, float, str})


def _cache_stable_defaults() -> bool:
    from copy import copy

    from bokeh.core.property.descriptors import PropertyDescriptor

    def make(original):
        cache: dict[tuple, object] = {}

        def _get_default(self, obj):
            themed = obj.themed_values()
            if themed is not None and self.name in themed:
                return original(self, obj)
            key = (self, type(obj))
            found = cache.get(key, _MISSING)
            if found is _MISSING:
                value = original(self, obj)
                # Bokeh keeps an unstable default (a list, a model, a factory's result) per
                # instance itself; a stable one depends only on the class: remember it.
                if self.has_unstable_default(obj):
                    cache[key] = _UNSTABLE
                    return value
                cache[key] = found = value
            elif found is _UNSTABLE:
                return original(self, obj)
            # Bokeh hands out a copy of a stable default on every read: so do we
            return found if type(found) in _IMMUTABLE else copy(found)
        return _get_default

    return _replace(PropertyDescriptor, "_get_default", make)


def _fast_plain_lists() -> bool:
    from bokeh.core import serialization as ser

    lo, hi = -ser._MAX_SAFE_INT, ser._MAX_SAFE_INT
    inf = float("inf")

    def make(original):
        def _encode_list(self, obj: list):
            # Exactly what Bokeh's per-item encoding returns for these exact types: a finite
            # float, an int in JavaScript's safe range, a str or a bool encode to themselves
            # (and are never model references). Anything else, NaN or inf goes to Bokeh's.
            for x in obj:
                t = type(x)
                if t is float:
                    if x != x or x == inf or x == -inf:
                        break
                elif t is int:
                    if not lo < x <= hi:
                        break
                elif t is not str and t is not bool:
                    break
            else:
                return list(obj)
            return original(self, obj)
        return _encode_list

    return _replace(ser.Serializer, "_encode_list", make)


def _plain_model_refs() -> bool:
    from bokeh.model import Model

    def make(_original):
        def ref(self):
            # what Ref(id=self._id) returns, without the TypedDict call
            return {"id": self._id}
        return ref

    return _replace(Model, "ref", make, **_PROPERTY)


class _SyncedModels(frozenset):
    """A document's synced models (what ``synced_references`` returns), with their
    references built once (``refs``: id(model) -> {"id": ...}, as ``Serializer`` keeps them)."""

    __slots__ = ("refs",)


def _cache_synced_references() -> bool:
    from bokeh.core.serialization import Serializer
    from bokeh.document.models import DocumentModelManager

    def make_synced(original):
        def synced_references(self):
            models, new = self._models, self._new_models
            cached = getattr(self, "_attention_scaling_synced", None)
            # The cache holds the model dict it was made from, so that identity is not reused.
            # Bokeh replaces the set of not-yet-sent models after every message (usually by
            # another empty one): compare its contents.
            if (cached is not None and cached[0] is models and cached[1] == len(models)
                    and cached[2] == new):
                return cached[3]
            synced = _SyncedModels(original(self))
            synced.refs = {id(m): m.ref for m in synced}
            self._attention_scaling_synced = (models, len(models), frozenset(new), synced)
            return synced
        return synced_references

    def make_destroy(original):
        def destroy(self):
            self._attention_scaling_synced = None
            return original(self)
        return destroy

    def make_init(original):
        def __init__(self, *, references=set(), deferred=True, check_circular=False):
            refs = references.refs if type(references) is _SyncedModels else None
            if refs is None:
                original(self, references=references, deferred=deferred,
                         check_circular=check_circular)
            else:
                original(self, references=(), deferred=deferred, check_circular=check_circular)
                self._references = dict(refs)     # Serializer adds to it: a copy
        return __init__

    return (_replace(DocumentModelManager, "synced_references", make_synced, **_PROPERTY)
            and _replace(DocumentModelManager, "destroy", make_destroy)
            and _replace(Serializer, "__init__", make_init))


_LOCAL = threading.local()


def _patching() -> list:
    """This thread's model dicts of the documents applying a patch (innermost last)."""
    stack = getattr(_LOCAL, "patching", None)
    if stack is None:
        stack = _LOCAL.patching = []
    return stack


def _reuse_model_ids() -> bool:
    from bokeh.core.serialization import Deserializer
    from bokeh.document import Document

    def make_apply(original):
        def apply_json_patch(self, patch_json, *, setter=None):
            stack = _patching()
            stack.append(self.models._models)
            try:
                return original(self, patch_json, setter=setter)
            finally:
                stack.pop()
        return apply_json_patch

    def make_init(original):
        def __init__(self, references=None, *, setter=None):
            stack = _patching()
            by_id = stack[-1] if stack else None
            # the first Deserializer of apply_json_patch: built from exactly these models
            if (by_id is not None and type(references) is list
                    and len(references) == len(by_id)):
                original(self, None, setter=setter)
                self._references = dict(by_id)
                stack[-1] = None              # once per patch
            else:
                original(self, references, setter=setter)
        return __init__

    return (_replace(Document, "apply_json_patch", make_apply)
            and _replace(Deserializer, "__init__", make_init))


GC_FREEZE_PERIOD_S = 10.0
#: A full collection (everything thawed) once this many sessions ended since the last one,
#: or a tenth of the open sessions if that is more: the memory of at most that many closed
#: tabs waits to be reclaimed, and a class that keeps its tabs open never pauses for it.
GC_FULL_AFTER_ENDED = 8
_GC = {"freezer": None, "live": 0, "ended": 0, "full": 0}


def track_session(doc) -> None:
    """Count ``doc``'s session (and, through Bokeh's ``on_session_destroyed``, its end) for the
    collection policy of 9 above; create_page calls this for every page."""
    if doc is None:
        return
    _GC["live"] += 1
    doc.on_session_destroyed(_session_ended)


def _session_ended(_session_context) -> None:
    _GC["live"] = max(0, _GC["live"] - 1)
    _GC["ended"] += 1


def collect_and_freeze() -> bool:
    """9 above: collect, then freeze what survived. Usually only what is younger than the last
    freeze is walked (a few ms); once enough sessions ended (:data:`GC_FULL_AFTER_ENDED`) their
    frozen objects are thawed and everything is collected. Returns whether it was full."""
    full = _GC["ended"] >= max(GC_FULL_AFTER_ENDED, _GC["live"] // 10)
    if full:
        gc.unfreeze()
        _GC["ended"] = 0
        _GC["full"] += 1
    gc.collect()
    gc.freeze()
    return full


def _patch_session_collection() -> bool:
    import panel.io.document as pdoc

    def make(_original):
        def _garbage_collect():
            # Panel collects everything shortly after each destroyed session (debounced): 1-2 s
            # with many sessions open, while everyone else waits. Our policy decides instead.
            collect_and_freeze()
        return _garbage_collect

    return _replace(pdoc, "_garbage_collect", make)


def start_gc_freezer(period_s: float = GC_FREEZE_PERIOD_S) -> bool:
    """Start (once per process) the periodic collect-and-freeze of 9 above on the running
    event loop; False when no loop runs (a script, a test, a notebook kernel's import)."""
    if _GC["freezer"] is not None:
        return True
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    from tornado.ioloop import PeriodicCallback

    if not _patch_session_collection():
        return False
    collect_and_freeze()
    _GC["freezer"] = PeriodicCallback(collect_and_freeze, period_s * 1000)
    _GC["freezer"].start()
    return True


def _skip_document_validation() -> bool:
    import os

    from bokeh.settings import settings
    if "BOKEH_VALIDATE_DOC" not in os.environ:
        settings.perform_document_validation.set_value(False)
    return True


#: Upper bound on the gzipped static files kept in memory (Bokeh's and Panel's: ~0.8 MB).
GZIP_CACHE_MAX_BYTES = 32 * 2**20
_GZIP_CACHE: dict[tuple[str, str], bytes] = {}


@functools.cache
def gzip_static_once():
    """14 above: a Tornado output transform, ``GZipContentEncoding`` that compresses each
    static file once. Pass it as the server's ``transforms=[...]`` (instead of
    ``compress_response=True``, which would compress every response again)."""
    from tornado.web import GZipContentEncoding

    class GzipStaticOnce(GZipContentEncoding):
        """Everything Tornado's gzip transform does, and for a complete ``200`` answer to a
        GET under ``/static/`` (a file, named by the content hash in its ``Etag``) the
        compressed body is kept and sent whole the next time."""

        def __init__(self, request):
            super().__init__(request)
            self._static = request.method == "GET" and "/static/" in request.path
            self._path = request.path
            self._parts: list[bytes] | None = None
            self._key = None
            self._hit = False
            self._size = self._fed = 0

        def transform_first_chunk(self, status_code, headers, chunk, finishing):
            etag = headers.get("Etag")
            if (self._gzipping and self._static and status_code == 200 and etag
                    and "Content-Range" not in headers and "Content-Encoding" not in headers):
                key = (self._path, etag)
                found = _GZIP_CACHE.get(key)
                if found is not None:
                    self._hit = True
                    if "Vary" in headers:
                        headers["Vary"] += ", Accept-Encoding"
                    else:
                        headers["Vary"] = "Accept-Encoding"
                    headers["Content-Encoding"] = "gzip"
                    headers["Content-Length"] = str(len(found))
                    return status_code, headers, found
                self._key, self._parts = key, []
                self._size = int(headers.get("Content-Length", -1))
            # Tornado's decides whether to compress (the type, the size) and compresses the
            # chunk through transform_chunk below, which keeps it
            answer = super().transform_first_chunk(status_code, headers, chunk, finishing)
            if not self._gzipping:
                self._parts = None
            return answer

        def transform_chunk(self, chunk, finishing):
            if self._hit:
                return b""          # the whole body went with the first chunk
            self._fed += len(chunk)
            return self._keep(super().transform_chunk(chunk, finishing), finishing)

        def _keep(self, out: bytes, finishing: bool) -> bytes:
            if self._parts is not None:
                self._parts.append(out)
                # Tornado finishes a response also when the client went away mid-file: keep
                # only what compressed the whole file
                if finishing:
                    body = b"".join(self._parts)
                    if (self._fed == self._size and sum(map(len, _GZIP_CACHE.values()))
                            + len(body) <= GZIP_CACHE_MAX_BYTES):
                        _GZIP_CACHE[self._key] = body
                    self._parts = None
            return out

    return GzipStaticOnce


def _no_unused_module_shims() -> bool:
    from panel.io.resources import Resources
    from panel.io.state import state
    from panel.models.esm import ReactiveESM

    def make(original):
        def js_files(self):
            files = original(self)
            doc = state.curdoc      # the session's document while Panel renders its page
            if doc is None or any(isinstance(m, ReactiveESM) for m in doc.models):
                return files
            return [f for f in files if "/es-module-shims" not in f]
        return js_files

    return _replace(Resources, "js_files", make, **_PROPERTY)


#: 17 above: a prepared document holds ~1.2 MB of Python objects until its browser asks for
#: it (~0.5 s, or until an unused session expires); at most this many at once (~10 MB in a
#: classroom's rush), the others are serialised when asked for, as Bokeh does.
MAX_PREPARED = 8
#: 17 above: document -> (its JSON, made after its page was sent; the change callback that
#: discards it). Only documents waiting for their PULL-DOC are here.
_PREPARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _take_prepared(doc):
    """The prepared JSON of ``doc`` (None if none), forgotten, and its change callback
    removed: a document's every later change does not pay for it."""
    found = _PREPARED.pop(doc, None)
    if found is None:
        return None
    doc.remove_on_change(found[1])
    return found[0]


def _discard_prepared(doc_ref, event) -> None:
    doc = doc_ref()
    if doc is not None:
        _take_prepared(doc)


def prepare_document(doc) -> None:
    """17 above: serialise ``doc`` now (as for a PULL-DOC) and keep the result for its first
    ``to_json()``, unless the document changes before then (or :data:`MAX_PREPARED` others
    are waiting)."""
    if (doc in _PREPARED or getattr(doc, "_attention_scaling_sent", False)
            or len(_PREPARED) >= MAX_PREPARED):
        return
    discard = functools.partial(_discard_prepared, weakref.ref(doc))
    doc.on_change(discard)
    to_json = type(doc).to_json
    _PREPARED[doc] = (getattr(to_json, "__wrapped__", to_json)(doc), discard)


def _prepare_documents() -> bool:
    from bokeh.document import Document
    from panel.io.server import DocHandler
    from tornado.ioloop import IOLoop

    def make_to_json(original):
        def to_json(self, *, deferred=True):
            prepared = _take_prepared(self)
            if prepared is not None and deferred:
                return prepared
            self._attention_scaling_sent = True     # serialised for a client: too late now
            return original(self, deferred=deferred)
        return to_json

    def make_get_session(original):
        async def get_session(self):
            session = await original(self)
            # Panel's handler renders and writes the page without waiting again after this:
            # a callback added now runs once the page has been sent
            IOLoop.current().add_callback(_prepare_session, session)
            return session
        return get_session

    return (_replace(Document, "to_json", make_to_json)
            and _replace(DocHandler, "get_session", make_get_session))


async def _prepare_session(session) -> None:
    if not session.destroyed:
        try:
            # with the session's document lock, as Bokeh's own PULL-DOC handler holds it
            await session.with_document_locked(prepare_document, session.document)
        except Exception:                                  # pragma: no cover - defensive
            log.exception("attention-scaling: preparing a document failed")


#: 18 above, run by the browser: wrap BokehJS's ``VisualProperties._get_css_value`` (where
#: every visual reads its CSS variable) with a memo per renderer view, and
#: ``InlineStyleSheet._update`` to skip a rewrite with the same text; once per page. Each in
#: try/catch: without the module or method (another Bokeh) the page keeps Bokeh's own.
REPAINT_JS = """
const wrap = (module, cls, method, make) => {
  try {
    const proto = Bokeh.require(module)[cls].prototype, original = proto[method];
    if (typeof original !== "function") {
      console.warn(`attention-scaling: no ${cls}.${method} to wrap (latency.py 18)`);
    } else if (original.attention_scaling_original === undefined) {
      const wrapped = make(original);
      wrapped.attention_scaling_original = original;
      proto[method] = wrapped;
    }
  } catch (error) {
    console.warn(`attention-scaling: ${cls}.${method} not wrapped (latency.py 18):`, error);
  }
};
wrap("core/visuals/visual", "VisualProperties", "_get_css_value", (original) => {
  const memo = new WeakMap();      // visual (one per renderer view) -> Map(name -> value)
  return function (name) {
    let values = memo.get(this);
    if (values === undefined) { values = new Map(); memo.set(this, values); }
    let value = values.get(name);
    if (value === undefined) { value = original.call(this, name); values.set(name, value); }
    return value;
  };
});
wrap("core/dom", "InlineStyleSheet", "_update", (original) => function (css) {
  if (this.el.textContent !== css) original.call(this, css);
});
"""


def lighten_repaint(doc) -> None:
    """18 above: when ``doc`` is shown (served or exported), the browser wraps BokehJS so that
    a repaint neither looks up CSS variables again nor rewrites style sheets unchanged."""
    from bokeh.models import CustomJS
    doc.js_on_event("document_ready", CustomJS(code=REPAINT_JS))


_STEPS = {"defaults": _cache_overridden_defaults, "stable": _cache_stable_defaults,
          "lists": _fast_plain_lists,
          "refs": _plain_model_refs, "synced": _cache_synced_references, "ids": _reuse_model_ids,
          "validation": _skip_document_validation, "dispatch": _patch_dispatch,
          "nodelay": _patch_nodelay, "shims": _no_unused_module_shims,
          "prepared": _prepare_documents}
_INSTALLED = dict.fromkeys(_STEPS, False)


def install() -> dict:
    """Install the server-side adaptations (2, 3, 6, 7, 8, 10-13, 16, 17, and 9 inside a
    running server) once per process; returns what holds (all but 9: :func:`start_gc_freezer`, and
    14: :func:`gzip_static_once`, which the server is given when it is made; 18 runs in the
    browser and is added to each document: :func:`lighten_repaint`)."""
    for name, step in _STEPS.items():
        if not _INSTALLED[name]:
            _INSTALLED[name] = step()
    # 9 needs the server's event loop: started by the first session (create_page calls this)
    start_gc_freezer()
    if not all(_INSTALLED.values()):
        log.warning("attention-scaling: latency adaptations not all installed: %s", _INSTALLED)
    return dict(_INSTALLED)
