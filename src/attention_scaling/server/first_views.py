"""Ready-made first views: for a visitor who arrives while other sessions are opening, the
explorer as it opens at the visitor's address, drawn by the browser with no session until the
live one replaces it (assets/js/first-view.js)."""

from __future__ import annotations

import collections
import json
import logging
import time

from bokeh.document import Document

from ..page import Explorer
from ..state import CONTROLS, ExplorerState, parse_query
from ..style import script
from .line import FIRST_VIEW_END

log = logging.getLogger("attention_scaling.server")


class FirstViews:
    """Ready-made first views: for a visitor who arrives while other sessions are opening,
    the explorer as it opens at the visitor's address, as a standalone document that BokehJS
    draws with no session (assets/js/first-view.js) until the live one replaces it. Built
    like a session's page (:func:`create_page`'s explorer) and kept per address, at most
    :attr:`size` of them; an address not kept is built at most :attr:`builds_per_s` times a
    second (each is a whole explorer on the server's thread), else the visitor sees the
    notice alone."""

    size = 32
    builds_per_s = 1.0

    def __init__(self) -> None:
        self._kept: collections.OrderedDict = collections.OrderedDict()
        self._next_build = 0.0
        self._said_busy = False

    def html(self, args) -> str:
        """The first view's HTML for query arguments ``args`` (as a server hands them over),
        or "" when none is kept and another may not be built yet."""
        values, hidden, notices = parse_query(args)
        key = (tuple((c.name, values.get(c.name, c.default)) for c in CONTROLS),
               tuple(sorted(hidden)), tuple(notices))
        found = self._kept.get(key)
        if found is not None:
            self._kept.move_to_end(key)
            return found
        now = time.monotonic()
        if now < self._next_build:
            if not self._said_busy:
                self._said_busy = True
                log.warning("Ready-made first views: more new addresses than %g a second; "
                            "visitors of the others see the connecting notice alone",
                            self.builds_per_s)
            return ""
        self._next_build = now + 1 / self.builds_per_s
        found = self._kept[key] = first_view_html(values, hidden, notices)
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)
        return found


def first_view_html(values: dict, hidden=frozenset(), notices=()) -> str:
    """The explorer for these controls as standalone HTML: an inert box, the document's JSON
    and the script that draws it (assets/js/first-view.js). Without the programs' library:
    the page has loaded it before (ConnectingPage.programs)."""
    explorer = Explorer(ExplorerState(**values), hidden=hidden, notices=notices,
                        library=False)
    doc = Document()
    doc.add_root(explorer.view.root)
    # its theme, labels and tables as the live page's; the address is left to the live page
    doc.js_on_event("document_ready", *explorer.view.ready)
    data = json.dumps({"doc": doc.to_json(deferred=False), "root": explorer.view.root.id},
                      separators=(",", ":"), allow_nan=False)
    # "<" occurs only inside the JSON's strings, where \u003c is the same character: nothing
    # in the data can end the script element
    return ('<div id="as-first-view" inert><div id="as-first-view-root"></div></div>'
            '<script type="application/json" id="as-first-view-doc">'
            + data.replace("<", "\\u003c") + "</script><script>" + script("first-view")
            + "</script>" + FIRST_VIEW_END + "\n")
