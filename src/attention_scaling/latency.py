"""Why the page answers a slider in ~12 ms, not Panel's ~66 ms, and opens faster: the costs removed.

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

Measured effect (benchmarks/run.py, docs/benchmarks.md; medians, slider set from JavaScript):
default Panel ~66 ms, with 1-4 ~17 ms, with 1-5 ~12 ms, the same figures as a plain Bokeh app
(one message per event) ~11 ms.

Everything is in this module, idempotent, and checked by tests: unit tests assert that the
patches are in place, and a browser test fails if a change takes anywhere near 50 ms again
(median of many), which is what a Panel or Bokeh upgrade that reintroduces a delay would do.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager

log = logging.getLogger(__name__)

_INSTALLED = {"dispatch": False, "nodelay": False, "validation": False, "defaults": False}


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


def _patch_dispatch() -> bool:
    try:
        import panel.io.document as pdoc
    except ImportError:  # pragma: no cover
        return False
    original = getattr(pdoc, "_dispatch_msgs", None)
    if original is None or getattr(original, "_attention_scaling", False):
        return original is not None

    async def _dispatch_msgs(doc):
        # Wait for Bokeh's in-flight websocket write to finish instead of sleeping 10 ms.
        for conn in list(pdoc._WRITE_MSGS.get(doc, {})):
            lock = getattr(getattr(conn, "_socket", None), "write_lock", None)
            # the same "is it held" test Panel itself uses (tornado.locks.Lock has no locked())
            if lock is not None and lock._block._value == 0:
                async with lock:
                    pass
        await original(doc)

    _dispatch_msgs._attention_scaling = True
    _dispatch_msgs.__wrapped__ = original
    pdoc._dispatch_msgs = _dispatch_msgs
    return True


def _patch_nodelay() -> bool:
    try:
        from bokeh.server.views.ws import WSHandler
    except ImportError:  # pragma: no cover
        return False
    original = WSHandler.open
    if getattr(original, "_attention_scaling", False):
        return True

    def open(self, *args, **kwargs):
        self.set_nodelay(True)
        return original(self, *args, **kwargs)

    open._attention_scaling = True
    open.__wrapped__ = original
    WSHandler.open = open
    return True


def _cache_overridden_defaults() -> bool:
    from bokeh.core.has_props import HasProps

    current = HasProps.__dict__.get("_overridden_defaults")
    original = getattr(current, "__func__", None)
    if original is None:
        log.warning("attention-scaling: HasProps._overridden_defaults not found; not cached")
        return False
    if getattr(original, "_attention_scaling", False):
        return True
    cache: dict[type, dict] = {}

    def _overridden_defaults(cls) -> dict:
        found = cache.get(cls)
        if found is None:
            found = cache[cls] = original(cls)
        return found

    _overridden_defaults._attention_scaling = True
    _overridden_defaults.__wrapped__ = original
    _overridden_defaults.__doc__ = original.__doc__
    HasProps._overridden_defaults = classmethod(_overridden_defaults)
    return True


def install() -> dict:
    """Install the server-side adaptations (2, 3, 6 and 7 above) once per process; returns what
    holds."""
    if not _INSTALLED["defaults"]:
        _INSTALLED["defaults"] = _cache_overridden_defaults()
    if not _INSTALLED["validation"]:
        import os

        from bokeh.settings import settings
        if "BOKEH_VALIDATE_DOC" not in os.environ:
            settings.perform_document_validation.set_value(False)
        _INSTALLED["validation"] = True
    if not _INSTALLED["dispatch"]:
        _INSTALLED["dispatch"] = _patch_dispatch()
    if not _INSTALLED["nodelay"]:
        _INSTALLED["nodelay"] = _patch_nodelay()
    if not all(_INSTALLED.values()):
        log.warning("attention-scaling: latency adaptations not all installed: %s", _INSTALLED)
    return dict(_INSTALLED)
