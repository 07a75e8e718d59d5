"""Every place the explorer's Python relies on Panel, Bokeh or Tornado beyond their public API,
in one module: what each seam touches, the versions it was checked against (pyproject.toml
pins their minor versions), why no public API serves, and what breaks if an upgrade changes
it. tests/test_seams.py checks each assumption against the installed libraries, so that an
upgrade that breaks one fails there, by name, before anything else does.

The browser's seams (BokehJS internals in assets/js) are listed in docs/architecture.md.
"""

from __future__ import annotations

import re
import warnings

#: The minor versions every seam below was checked against.
CHECKED = {"bokeh": "3.9", "panel": "1.9", "tornado": "6.6"}


def check_versions() -> list[str]:
    """The libraries whose installed minor version is not the one the seams were checked
    against (a warning is given for each; pyproject.toml keeps them pinned)."""
    import bokeh
    import panel
    import tornado
    found = {"bokeh": bokeh.__version__, "panel": panel.__version__,
             "tornado": tornado.version}
    off = [f"{name} {found[name]} (checked: {minor}.x)" for name, minor in CHECKED.items()
           if not found[name].startswith(minor + ".")]
    for line in off:
        warnings.warn(f"attention_scaling.seams: {line}; see src/attention_scaling/seams.py",
                      stacklevel=2)
    return off


# ---- Bokeh's per-application route table ---------------------------------------------------
# Panel registers its page and websocket handlers, /autoload.js and /metadata in Bokeh's
# module-level list `bokeh.server.urls.per_app_patterns`, read when a server is made. No
# argument of `pn.serve` replaces them, and `extra_patterns` are matched after them, so the
# capped handlers and the 404 for routes the app does not use take their places in that list.
# If Panel renames or moves them, install_handlers raises at start.

def install_handlers(page, websocket, not_served, unused_routes=("/autoload.js", "/metadata")):
    """Put ``page`` and ``websocket`` in place of Panel's page and websocket handlers in
    Bokeh's per-application route table, and ``not_served`` on ``unused_routes``.
    Idempotent. RuntimeError when Panel's handlers are not found."""
    from bokeh.server.urls import per_app_patterns
    from panel.io.server import DocHandler, WSHandler
    for i, (route, handler, *rest) in enumerate(per_app_patterns):
        if handler is DocHandler:
            per_app_patterns[i] = (route, page, *rest)
        elif handler is WSHandler:
            per_app_patterns[i] = (route, websocket, *rest)
        elif route in unused_routes:
            per_app_patterns[i] = (route, not_served, *rest)
    handlers = {entry[1] for entry in per_app_patterns}
    if not {page, websocket, not_served} <= handlers:
        raise RuntimeError("Panel's page and websocket handlers are not in Bokeh's route "
                           "table: this Panel version is not supported (see pyproject.toml)")


# ---- Bokeh's open websockets ---------------------------------------------------------------
# `BokehTornado._clients` is the set of open ServerConnections; Bokeh offers no count of them.
# Used by `serve --stats` only (monitoring and the load test).

def open_connections(tornado_app) -> int:
    return len(tornado_app._clients)


# ---- a Tornado response already finished ---------------------------------------------------
# `RequestHandler._finished`: whether finish() was called. The page handler streams its
# "connecting" notice before the session is built; when building fails, it must not finish
# twice, and Tornado has no public flag for a finished response.

def finished(handler) -> bool:
    return handler._finished


# ---- a websocket's partial message ---------------------------------------------------------
# Bokeh's websocket handler keeps the message being received in `handler.receiver` (a
# bokeh.protocol.receiver.Receiver, buffers included). When the server refuses a message and
# closes the connection, dropping it frees what the stranger sent at once, not when the
# handler is collected.

def drop_partial_message(handler) -> None:
    handler.receiver = None


# ---- Panel's rendered page -----------------------------------------------------------------
# The page is sent in two parts: first the title, a "connecting" notice and the scripts
# (before the session is built), then the page Panel renders, whose document head is moved
# into the body. Panel renders it from its Jinja template; no option leaves the head out or
# names the bundles a document does not use. These patterns find the head's own tags and the
# bundles' script tags (file name without .min.js) in Panel 1.9's page.

HEAD_PARTS = re.compile(
    r'<!DOCTYPE html>|<html[^>]*>|</?head>|<body[^>]*>|<meta charset="[^"]*">'
    r'|<title>.*?</title>|<link rel="(?:apple-touch-icon|icon)"[^>]*>', re.I | re.S)
SCRIPT_TAG = re.compile(r'<script[^>]*\ssrc="[^"]*/([^/"?]+?)\.min\.js[^"]*"[^>]*></script>\s*')
ES_MODULE_OPTIONS = re.compile(r'<script type="esms-options">[^<]*</script>\s*')


# ---- a served function that builds its own document ----------------------------------------
# `pn.serve(fn)` calls ``fn`` for each session with `pn.state.curdoc` set to the session's
# document, and wraps what it returns in a pane that it adds to the document; a function that
# returns None leaves the document as the function built it (panel/io/application.py,
# `_eval_panel`). The explorer is a Bokeh layout: in `pn.pane.Bokeh`, Panel walks the whole
# model graph twice more per session (to rewrite the CustomJS code that names the root, which
# is the root itself here, and to take the models out of any other document, where none is),
# about a fifth of building a session's document (docs/benchmarks.md). So the served function
# adds the layout itself and returns None. If Panel starts to require a returned object, the
# page is empty: tests/test_seams.py serves such a function and looks for its root.

def add_root(doc, root, title: str) -> None:
    """Put the Bokeh layout ``root`` in the session's document ``doc`` under ``title``, as
    `pn.serve` would with the layout in its Bokeh pane; the served function then returns
    None."""
    doc.title = title
    doc.add_root(root)


# ---- Panel's notebook extension ------------------------------------------------------------
# `pn.extension._loaded`: whether Panel's JavaScript was already sent to this notebook.
# `Explorer()` loads it once so that a notebook needs no `pn.extension()` cell; calling
# pn.extension() again would send it again.

def panel_extension_loaded() -> bool:
    import panel as pn
    return bool(pn.extension._loaded)
