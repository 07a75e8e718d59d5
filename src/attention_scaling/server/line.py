"""A class arriving at once: the opening line (first come, first served), and the page a
waiting visitor sees first (the title, a "connecting" notice, then the explorer)."""

from __future__ import annotations

import asyncio
import collections
import html
import json

from .. import seams

#: Sessions one process opens at a time (a page being built, or a websocket pulling its
#: document); later visitors wait in arrival order. Every session in the opening competes for
#: the one event loop: with a whole class admitted at once, the first student's websocket
#: waits behind every later student's page, and all are ready at about the same time.
#: Measured with 30 at once on one process (`make loadtest`, median of two runs): p50 3.5 s
#: with 1 or 2 at a time, 4.1 s with 4, 5.0 s with 8, 8.0 s with no line. Two, so that the
#: next page is built while a browser pulls its document.
DEFAULT_OPENING_AT_ONCE = 2
#: A session's first websocket holds a place until it has pulled its document (BokehJS asks
#: right after the connection's ACK), or this long at most (``serve --opening-hold``).
OPENING_HOLD_S = 2
#: The longest a visitor waits in line; then the page says the server is busy and reloads.
LINE_WAIT_MAX_S = 300.0
#: How often a waiting page is told how many are before it (a few bytes; a proxy's read
#: timeout, 60 s in the nginx templates, never sees a silent page).
LINE_PROGRESS_S = 10.0


class OpeningLine:
    """First come, first served: at most ``at_once`` places in the opening, the rest waiting
    in arrival order. A page request holds a place while its session is built and its page
    sent (:meth:`enter`, :meth:`release`); a session's first websocket takes one while it
    pulls the document (:meth:`connected`, :meth:`done`, at most ``hold_s``). A place is
    held only for the work a request causes: a page whose browser never connects delays no
    one once it is sent. (Measured: a student arriving after 30 page requests that never
    connect was live after 10-11 s when each sent page kept its place 0.5 s for its
    websocket, against 4-8 s for a plain Bokeh app; tests/test_security.py.)"""

    def __init__(self, at_once: int = DEFAULT_OPENING_AT_ONCE,
                 hold_s: float = OPENING_HOLD_S) -> None:
        self.at_once = at_once
        self.hold_s = hold_s
        self.busy = 0
        self.waiting: collections.deque = collections.deque()
        self.held: dict[str, asyncio.TimerHandle] = {}
        #: sessions whose first websocket has taken its place (bounded: the latest ones)
        self._connected: collections.OrderedDict[str, None] = collections.OrderedDict()

    def ahead(self) -> int:
        """Visitors before one arriving now: opening and waiting."""
        return self.busy + sum(1 for f in self.waiting if not f.done())

    def opening(self) -> bool:
        """Whether a visitor arriving now shares the server with other sessions opening."""
        return self.at_once > 0 and self.ahead() > 0

    async def enter(self, timeout: float, holder=None) -> bool:
        """Wait for a place in arrival order: True once given one, False after ``timeout`` s
        or when the wait was cancelled (``holder._place.cancel()``: the visitor left). An
        ``at_once`` of 0 means no line."""
        if self.at_once <= 0 or (self.busy < self.at_once
                                 and not any(not f.done() for f in self.waiting)):
            self.busy += 1
            return True
        place = asyncio.get_running_loop().create_future()
        self.waiting.append(place)
        if holder is not None:
            holder._place = place
        try:
            await asyncio.wait_for(asyncio.shield(place), timeout)
        except asyncio.TimeoutError:
            pass
        except asyncio.CancelledError:
            if not place.cancelled():           # the request itself was cancelled
                if place.done():
                    self.release()
                place.cancel()
                raise
        if place.done() and not place.cancelled():
            return True
        place.cancel()
        return False

    def before(self, place) -> int:
        """Visitors before the one waiting with ``place``: opening, and waiting ahead of it."""
        ahead = 0
        for f in self.waiting:
            if f is place:
                break
            ahead += not f.done()
        return self.busy + ahead

    def release(self) -> None:
        self.busy = max(0, self.busy - 1)
        while self.waiting and self.busy < max(1, self.at_once):
            place = self.waiting.popleft()
            if not place.done():
                self.busy += 1
                place.set_result(True)

    def connected(self, session_id: str, seconds: float | None = None) -> None:
        """The first websocket of ``session_id`` opened: it holds a place until :meth:`done`
        or ``seconds`` (the line's ``hold_s``). A later websocket of the same session (a
        reconnect) takes none."""
        if self.at_once <= 0 or session_id in self._connected:
            return
        self._connected[session_id] = None
        while len(self._connected) > 4096:
            self._connected.popitem(last=False)
        self.busy += 1
        loop = asyncio.get_running_loop()
        self.held[session_id] = loop.call_later(self.hold_s if seconds is None else seconds,
                                                self.done, session_id)

    def done(self, session_id: str) -> None:
        """``session_id`` pulled its document, or its websocket closed: its place is free."""
        timer = self.held.pop(session_id, None)
        if timer is not None:
            timer.cancel()
            self.release()


# Over the page rather than in its flow: the explorer's layout never moves when it goes. It
# shows once the page has waited CONNECTING_AFTER_S (a CSS animation's delay, from the
# notice's first bytes): a session that attaches sooner never says it is connecting.
CONNECTING_AFTER_S = 2
CONNECTING_CSS = """#as-connecting{font:17px/1.5 system-ui,"Segoe UI",Arial,sans-serif;
color:var(--as-theme-ink,#1d2433);padding:16px 24px;position:fixed;top:0;left:0;right:0;
z-index:10;background:var(--as-theme-card,#fff);animation:as-late 0s AFTER_Ss both}
@keyframes as-late{from{visibility:hidden}to{visibility:visible}}#as-connecting h1{font-size:1.4em;
margin:0 0 .3em}#as-connecting p{margin:0;color:var(--as-theme-muted,#4a5568)}
@media (prefers-color-scheme:dark){#as-connecting{color:var(--as-theme-ink,#e4e7eb);
background:var(--as-theme-card,#11161b)}#as-connecting p{color:var(--as-theme-muted,#bcc6d0)}}#as-connecting .dot{display:inline-block;width:.6em;
height:.6em;border-radius:50%;background:#3b6fd4;margin-right:.5em;animation:as-pulse 1s
ease-in-out infinite alternate}@keyframes as-pulse{from{opacity:.25}to{opacity:1}}
@media (prefers-reduced-motion:reduce){#as-connecting .dot{animation:none}}""".replace(
    "AFTER_S", str(CONNECTING_AFTER_S))

# The ready-made first view lies over the place where the live explorer is drawn, so that
# nothing moves when it goes.
CONNECTING_CSS += """#as-first-view{position:absolute;top:0;left:0;right:0;z-index:5;
background:var(--as-theme-card,#fff);cursor:progress}"""

# Removes the notice (and the ready-made first view) once BokehJS has drawn the live
# document (it is drawn only once the websocket delivered it); after a minute it says the
# server is still busy.
CONNECTING_JS = """(function(){var t0=Date.now(),timer=setInterval(function(){
var box=document.getElementById('as-connecting');if(!box){clearInterval(timer);return;}
var ph=document.querySelector('div[data-root-id]'),
fv=document.getElementById('as-first-view');
if(window.Bokeh&&Bokeh.documents&&Bokeh.documents.length&&(ph?(ph.childElementCount||
ph.shadowRoot):!fv)){clearInterval(timer);if(window.__asDropFirstView)__asDropFirstView();
else if(fv)fv.remove();box.remove();return;}
if(Date.now()-t0>60000){var m=document.getElementById('as-connecting-text');
if(m)m.textContent='Still connecting: the server is busy opening the explorer for the '+
'class. This page keeps trying.';}},100);})();"""


#: The last bytes of a ready-made first view (first_views.first_view_html): the load test
#: tells by them that a page carried one.
FIRST_VIEW_END = "<!-- end of the first view -->"

#: Where the server's own script (ConnectingPage.programs) is served, under the prefix: a path
#: with /static/ in it, so that it is compressed once (http.GzipStaticOnce).
PROGRAMS_ROUTE = "/as/static/"


class ConnectingPage:
    """The first bytes of every page, sent before the session is built: the title and a
    "connecting" notice (also in embed mode) and the page's scripts, which the browser then
    loads while the visitor waits; then the page Panel renders, whose document head is moved
    into the body (styles and scripts work there), without the scripts already sent and the
    bundles the document does not use. One per server, with its title and tab icon."""

    def __init__(self, title: str = "Explorer", icon_href: str = "",
                 programs: str = "") -> None:
        """``programs``: the file name of a script under the route PROGRAMS_ROUTE that
        every page loads before the page's own scripts, or ""."""
        self.title, self.icon_href, self.programs = title, icon_href, programs
        #: The script tags of the pages this server has rendered (learnt from the first one;
        #: the same for every page): sent with the notice.
        self.scripts = ""

    def head(self, ahead: int, prefix: str = "") -> str:
        """The page's first bytes, ``ahead`` visitors before it; its own script's address
        under the server's URL ``prefix``."""
        title = html.escape(self.title)
        own = (f'<script src="{html.escape(prefix + PROGRAMS_ROUTE + self.programs)}">'
               "</script>\n" if self.programs else "")
        icon = (f'<link rel="icon" href="{html.escape(self.icon_href)}">' if self.icon_href
                else "")
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                f"<title>{title}</title>{icon}<style>{CONNECTING_CSS}</style></head><body>"
                f'<div id="as-connecting" role="status" aria-live="polite"><h1>{title}</h1>'
                f'<p><span class="dot"></span><span id="as-connecting-text">{self.waiting(ahead)}'
                f"</span></p></div><script>{CONNECTING_JS}</script>\n"
                f"{own}{self.scripts}")

    @staticmethod
    def waiting(ahead: int) -> str:
        """The notice's text with ``ahead`` visitors before this one."""
        ahead = int(ahead)
        return "Connecting to the server…" + (
            f" {ahead} visitor{'s' if ahead != 1 else ''} before you." if ahead else "")

    @classmethod
    def progress(cls, ahead: int) -> str:
        """A line for a waiting page: how many visitors are before it now."""
        return (f"<script>(function(t){{if(t)t.textContent={json.dumps(cls.waiting(ahead))}}})"
                "(document.getElementById('as-connecting-text'))</script>\n")

    @staticmethod
    def reload_notice(what: str) -> str:
        """The end of a page that could not be opened: ``what``, and a reload in 5-15 s."""
        return (f"<p>{html.escape(what)}; this page tries again in a few seconds.</p><script>"
                "setTimeout(function(){location.reload()},5000+Math.random()*10000)</script>"
                "</body></html>")

    def body(self, page: str, unused: set[str], sent: str = "") -> str:
        """Panel's page without its document head's own tags, the script tags in ``sent``
        and the scripts of ``unused`` bundles (their file names without .min.js). The first
        page's scripts become :attr:`scripts`."""
        page = seams.HEAD_PARTS.sub("", page)
        page = seams.SCRIPT_TAG.sub(lambda m: "" if m.group(1) in unused or m.group(0).strip()
                                    in sent else m.group(0), page)
        if "es-module-shims" in unused:
            page = seams.ES_MODULE_OPTIONS.sub("", page)
        if not self.scripts:
            self.scripts = "\n".join(m.group(0).strip() for m in seams.SCRIPT_TAG.finditer(page))
        return page


def unused_bundles(doc) -> set[str]:
    """The scripts that ``doc`` has no model of: bokeh-gl without a WebGL plot,
    es-module-shims without an ES-module component, Panel's bundle without a Panel model,
    and bokeh-tables without a table or Panel (whose bundle imports it)."""
    from bokeh.models import Plot, TableWidget
    from panel.models.esm import ReactiveESM
    unused = {"bokeh-gl", "es-module-shims", "panel", "bokeh-tables"}
    for model in doc.models:
        if isinstance(model, Plot) and model.output_backend == "webgl":
            unused.discard("bokeh-gl")
        elif type(model).__module__.startswith("panel."):
            unused.difference_update({"panel", "bokeh-tables"})
            if isinstance(model, ReactiveESM):
                unused.discard("es-module-shims")
        elif isinstance(model, TableWidget):
            unused.discard("bokeh-tables")
    return unused


