"""The classroom server's limits: which routes answer, how many sessions and websockets one
process takes, the headers every response carries, and how much one request or message can
write to the log. Used by ``attention-scaling serve`` (:mod:`cli`); docs/security.md lists
every limit and its default.

Built of subclasses of Panel's page and websocket handlers, Tornado output transforms and
handlers and a :class:`logging.Filter`; what they rely on beyond the libraries' public API
(the route table they are registered in, a finished response, a partial message, Panel's
rendered page) goes through :mod:`seams`.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import html
import ipaddress
import json
import logging
import re
import time
import weakref
from urllib.parse import urlparse

from bokeh.server.util import check_allowlist
from bokeh.settings import settings
from bokeh.events import ConnectionLost
from bokeh.util.token import check_token_signature, get_session_id
from panel.io.server import DocHandler, WSHandler
from tornado import web

from . import seams

log = logging.getLogger("attention_scaling.server")

# Memory per process, in its heaviest state (docs/deploy.md "Sizing"). Measured as the RSS
# growth of a served process (/stats) over 30 sessions opened one after another, each a page,
# its websocket and its document (PULL-DOC), every tab built, read after the server's periodic
# garbage collection: 4.3 MiB a session at the heaviest address the controls allow
# (?tab=saturation&keys=64&d_k=4096&align=1; 4.2 MiB at the defaults, 1.4 MiB with only the
# one draw shown), plus a training run under way at d_k = 4096 (3 MiB: W_Q and W_K, 4096 x 16
# float64, for each of the three rules, let go when the run ends), so 7.5 MiB a session. The
# process itself: 236 MiB with its first sessions at that address (the Monte Carlo draws for
# 64 keys; 90 MiB at the defaults). The settings' caches the sessions share (core's states,
# full draws, typical draws and curves, text's fields; each bounded by its number of entries)
# grow by at most 160 MiB more when a class visits many settings at 64 keys (their entries'
# sizes times their counts). The documented limit is 2 GiB per process (the systemd unit's
# MemoryMax, the pod's limit, the `docker run --memory`); 184 MiB of it is kept for a training
# step at d_k = 4096 with 64 keys (131 MiB of temporaries at its peak, one step at a time),
# garbage not yet collected (closed tabs, up to a tenth of the sessions) and sessions being
# built. So the default cap is (2048 - 240 - 160 - 184) / 7.5 = 195 sessions: a class of 300
# on two processes.
MEMORY_LIMIT_MIB = 2048
BASE_MIB = 240
CACHES_MIB = 160
HEADROOM_MIB = 184
SESSION_MIB = 7.5
DEFAULT_MAX_SESSIONS = int((MEMORY_LIMIT_MIB - BASE_MIB - CACHES_MIB - HEADROOM_MIB)
                           // SESSION_MIB)

#: Websockets one process keeps open, as a multiple of its session cap: a page has one, and
#: a reconnecting page briefly two.
WEBSOCKETS_PER_SESSION = 2

#: The largest websocket message the server reads. The browser's largest message is a few
#: hundred bytes (a control change, the first document request: 326 bytes measured); Bokeh's
#: default is 20 MiB. Tornado closes a connection that sends more (close code 1009).
MAX_MESSAGE_BYTES = 64 * 1024

#: Buffers one websocket message may promise (its header's ``num_buffers``). The browser's
#: messages carry none; Bokeh keeps every buffer of a message until the promised count has
#: arrived, so the count and the whole message (header, metadata, content and every buffer)
#: are bounded together: past MAX_MESSAGE_BYTES in all, the connection is closed.
MAX_MESSAGE_BUFFERS = 16

#: A session's document is sent whole on a PULL-DOC-REQ (160-480 ms of the server's thread at
#: the heaviest settings; BokehJS asks once per connection): a session may ask PULL_DOC_BURST
#: times at once (the first page and one reconnect), then once per PULL_DOC_EVERY_S; a
#: websocket that asks more often is closed.
PULL_DOC_BURST = 2
PULL_DOC_EVERY_S = 60.0
#: Websockets a session may open: OPENS_BURST at once, then one per OPENS_EVERY_S (BokehJS
#: reconnects a dropped page up to 5 times, 0-16 s apart); past it the handshake gets 429
#: before any work.
OPENS_BURST = 4
OPENS_EVERY_S = 10.0

#: Live websockets from one client address (not loopback: a proxy on this machine, or the load
#: test, speaks for many). A page has one; a student with several tabs open has a few.
DEFAULT_WEBSOCKETS_PER_ADDRESS = 16

#: HTTP request limits (Tornado's defaults: 64 KiB of headers, 100 MB of body). The app
#: takes no request body; a page URL with every control is under 200 bytes.
MAX_HEADER_BYTES = 16 * 1024
MAX_BODY_BYTES = 64 * 1024
#: A connection must send a request's headers within this long, and may stay open without a
#: request no longer (Tornado's default: an hour): half-sent requests cannot hold sockets.
HEADER_TIMEOUT_S = 10

#: One log record at most this long (message and exception summary), and a message of the
#: same kind from the same place at most once per LOG_REPEAT_S seconds (then a count).
LOG_RECORD_CHARS = 500
LOG_REPEAT_S = 60.0
_LOG_KINDS_MAX = 256

FULL_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="60">
<title>The classroom server is full</title>
<style>body{font:17px/1.5 system-ui,"Segoe UI",Arial,sans-serif;margin:0;display:grid;
place-items:center;min-height:100vh;background:#f6f7f9;color:#1d2433}
main{max-width:32em;padding:24px}h1{font-size:1.4em;margin:0 0 .4em}</style></head>
<body><main><h1>The classroom server is full — try again in a minute</h1>
<p>Every place on this server is taken. This page tries again by itself in a minute;
your teacher can also raise the limit (<code>--max-sessions</code>).</p></main></body></html>
"""


def _open_sessions(tornado_app) -> int:
    return sum(len(ctx.sessions) for ctx in tornado_app.applications.values())


class Limits:
    """The per-process limits the handlers below enforce (set by ``attention-scaling serve``
    before the server starts)."""

    max_sessions = DEFAULT_MAX_SESSIONS
    websockets_per_address = DEFAULT_WEBSOCKETS_PER_ADDRESS    # 0: no limit
    building = 0                                  # page requests past the check, not done
    trust_forwarded_host = False                  # --use-xheaders: behind a proxy
    websockets: weakref.WeakSet = weakref.WeakSet()
    #: session id -> its live websocket (one per session: a newer one replaces it)
    by_session: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
    #: client address -> its live websockets
    by_address: dict[str, weakref.WeakSet] = {}

    @classmethod
    def max_websockets(cls) -> int:
        return cls.max_sessions * WEBSOCKETS_PER_SESSION

    @classmethod
    def full(cls, tornado_app) -> bool:
        """Whether a new session would pass the cap: open, and being built."""
        return _open_sessions(tornado_app) + cls.building >= cls.max_sessions


class Allowance:
    """How often each session may do a costly thing: ``burst`` times at once, then one per
    ``every_s`` (a token bucket per session id, for the last ``4 x --max-sessions`` sessions
    seen)."""

    def __init__(self, burst: int, every_s: float) -> None:
        self.burst, self.every_s = float(burst), every_s
        self._buckets: collections.OrderedDict[str, list[float]] = collections.OrderedDict()

    def take(self, session_id: str, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        tokens, then = self._buckets.pop(session_id, [self.burst, now])
        tokens = min(self.burst, tokens + (now - then) / self.every_s)
        allowed = tokens >= 1.0
        self._buckets[session_id] = [tokens - allowed, now]
        while len(self._buckets) > 4 * Limits.max_sessions:
            self._buckets.popitem(last=False)
        return allowed


PULLS = Allowance(PULL_DOC_BURST, PULL_DOC_EVERY_S)
OPENS = Allowance(OPENS_BURST, OPENS_EVERY_S)


class MessageBounds:
    """One websocket's messages as Bokeh's protocol frames them (a header, metadata, content,
    then a header and a payload per buffer), each message bounded as a whole: its buffer
    count at most MAX_MESSAGE_BUFFERS, all its frames together at most MAX_MESSAGE_BYTES.
    :meth:`take` answers why a frame breaks the bounds, or None; :attr:`kind` is the
    message's type once its header was read."""

    def __init__(self) -> None:
        self.left = 0               # frames still to come of the current message
        self.size = 0
        self.kind = None

    def take(self, fragment) -> str | None:
        if self.left == 0:
            self.size = 0
            if not isinstance(fragment, str):
                return "a message must begin with its header"
            try:
                header = json.loads(fragment)
            except ValueError:
                return "a message header that is not JSON"
            if not isinstance(header, dict):
                return "a message header that is not an object"
            buffers = header.get("num_buffers", 0)
            if (isinstance(buffers, bool) or not isinstance(buffers, int)
                    or not 0 <= buffers <= MAX_MESSAGE_BUFFERS):
                return f"a message promising {str(buffers)[:20]} buffers"
            self.kind = header.get("msgtype")
            self.left = 3 + 2 * buffers
        self.size += len(fragment)
        if self.size > MAX_MESSAGE_BYTES:
            return f"a message over {MAX_MESSAGE_BYTES} bytes"
        self.left -= 1
        return None


# ---- a class arriving at once: first come, first served ---------------------------------
#: Sessions one process opens at a time (a page being built, or a websocket pulling its
#: document); later visitors wait in arrival order. Every session in the opening competes for
#: the one event loop: with a whole class admitted at once, the first student's websocket
#: waits behind every later student's page, and all are ready at about the same time.
#: Measured with 30 at once on one process (`make loadtest`, median of two runs): p50 3.5 s
#: with 1 or 2 at a time, 4.1 s with 4, 5.0 s with 8, 8.0 s with no line. Two, so that the
#: next page is built while a browser pulls its document.
DEFAULT_OPENING_AT_ONCE = 2
#: A session's first websocket holds a place until it has pulled its document (BokehJS asks
#: right after the connection's ACK), or this long at most.
OPENING_HOLD_S = 2.0
#: The longest a visitor waits in line; then the page says the server is busy and reloads.
LINE_WAIT_MAX_S = 300.0
#: How often a waiting page is told how many are before it (a few bytes; a proxy's read
#: timeout, 60 s in the nginx templates, never sees a silent page).
LINE_PROGRESS_S = 10.0


class OpeningLine:
    """First come, first served: at most ``at_once`` places in the opening, the rest waiting
    in arrival order. A page request holds a place while its session is built and its page
    sent (:meth:`enter`, :meth:`release`); a session's first websocket takes one while it
    pulls the document (:meth:`connected`, :meth:`done`, at most OPENING_HOLD_S). A place is
    held only for the work a request causes: a page whose browser never connects delays no
    one once it is sent. (Measured: a student arriving after 30 page requests that never
    connect was live after 10-11 s when each sent page kept its place 0.5 s for its
    websocket, against 4-8 s for a plain Bokeh app; tests/test_stranger.py.)"""

    def __init__(self, at_once: int = DEFAULT_OPENING_AT_ONCE) -> None:
        self.at_once = at_once
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

    def connected(self, session_id: str, seconds: float = OPENING_HOLD_S) -> None:
        """The first websocket of ``session_id`` opened: it holds a place until :meth:`done`
        or ``seconds``. A later websocket of the same session (a reconnect) takes none."""
        if self.at_once <= 0 or session_id in self._connected:
            return
        self._connected[session_id] = None
        while len(self._connected) > 4096:
            self._connected.popitem(last=False)
        self.busy += 1
        loop = asyncio.get_running_loop()
        self.held[session_id] = loop.call_later(seconds, self.done, session_id)

    def done(self, session_id: str) -> None:
        """``session_id`` pulled its document, or its websocket closed: its place is free."""
        timer = self.held.pop(session_id, None)
        if timer is not None:
            timer.cancel()
            self.release()


LINE = OpeningLine()
#: query arguments -> the ready-made first view's HTML ("" for none), sent to a visitor who
#: arrives while other sessions are opening (page.FirstViews.html; set by the command line's
#: serve).
FIRST_VIEW = None

# Over the page rather than in its flow: the explorer's layout never moves when it goes.
CONNECTING_CSS = """#as-connecting{font:17px/1.5 system-ui,"Segoe UI",Arial,sans-serif;
color:var(--as-theme-ink,#1d2433);padding:16px 24px;position:fixed;top:0;left:0;right:0;
z-index:10;background:var(--as-theme-card,#fff)}#as-connecting h1{font-size:1.4em;
margin:0 0 .3em}#as-connecting p{margin:0;color:var(--as-theme-muted,#4a5568)}
@media (prefers-color-scheme:dark){#as-connecting{color:var(--as-theme-ink,#e4e7eb);
background:var(--as-theme-card,#11161b)}#as-connecting p{color:var(--as-theme-muted,#bcc6d0)}}#as-connecting .dot{display:inline-block;width:.6em;
height:.6em;border-radius:50%;background:#3b6fd4;margin-right:.5em;animation:as-pulse 1s
ease-in-out infinite alternate}@keyframes as-pulse{from{opacity:.25}to{opacity:1}}
@media (prefers-reduced-motion:reduce){#as-connecting .dot{animation:none}}"""

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


class ConnectingPage:
    """The first bytes of every page, sent before the session is built: the title and a
    "connecting" notice (also in embed mode) and the page's scripts, which the browser then
    loads while the visitor waits; then the page Panel renders, whose document head is moved
    into the body (styles and scripts work there), without the scripts already sent and the
    bundles the document does not use."""

    title = "Explorer"
    icon_href = ""
    #: The script tags of the pages this process has rendered (learnt from the first one; the
    #: same for every page): sent with the notice.
    scripts = ""

    @classmethod
    def head(cls, ahead: int) -> str:
        title = html.escape(cls.title)
        icon = f'<link rel="icon" href="{html.escape(cls.icon_href)}">' if cls.icon_href else ""
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                f"<title>{title}</title>{icon}<style>{CONNECTING_CSS}</style></head><body>"
                f'<div id="as-connecting" role="status" aria-live="polite"><h1>{title}</h1>'
                f'<p><span class="dot"></span><span id="as-connecting-text">{cls.waiting(ahead)}'
                f"</span></p></div><script>{CONNECTING_JS}</script>\n"
                f"{cls.scripts}")

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

    @classmethod
    def body(cls, page: str, unused: set[str], sent: str = "") -> str:
        """Panel's page without its document head's own tags, the script tags in ``sent``
        and the scripts of ``unused`` bundles (their file names without .min.js). The first
        page's scripts become :attr:`scripts`."""
        page = seams.HEAD_PARTS.sub("", page)
        page = seams.SCRIPT_TAG.sub(lambda m: "" if m.group(1) in unused or m.group(0).strip()
                                    in sent else m.group(0), page)
        if "es-module-shims" in unused:
            page = seams.ES_MODULE_OPTIONS.sub("", page)
        if not cls.scripts:
            cls.scripts = "\n".join(m.group(0).strip() for m in seams.SCRIPT_TAG.finditer(page))
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


REFUSED_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Not served here</title></head>
<body><h1>Not served here</h1><p>{what}</p></body></html>
"""


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def asked_for_host(request) -> str:
    """The host and port the browser asked for: the ``Host`` header, or behind a proxy with
    --use-xheaders its ``X-Forwarded-Host`` when it sends one."""
    host = request.headers.get("Host", "")
    if Limits.trust_forwarded_host:
        host = request.headers.get("X-Forwarded-Host", "").split(",")[0].strip() or host
    return host.lower()[:300]


def host_allowed(handler) -> bool:
    """Whether the host a request asked for is one the page may be opened from (the allowed
    websocket origins; ``*`` allows any): a page of another site whose name was made to point
    at this server (DNS rebinding) asks for that site's host, and is refused."""
    allowed = set(handler.application.websocket_origins)
    if settings.allowed_ws_origin():
        allowed = set(settings.allowed_ws_origin())
    host = asked_for_host(handler.request)
    return bool(host) and check_allowlist(host, allowed)


class _RefusalLog:
    """Says once per (kind, subject), for the first 64 of them, why a request was refused."""

    seen: set[tuple[str, str]] = set()

    @classmethod
    def once(cls, kind: str, subject: str, message: str, *args) -> None:
        if (kind, subject) in cls.seen or len(cls.seen) >= 64:
            return
        cls.seen.add((kind, subject))
        log.error(message, *args)


def say_host_refused(handler) -> None:
    host = asked_for_host(handler.request)
    _RefusalLog.once("host", host, "Refused a request for host %r with 403: not an allowed host. "
                     "If students open the page at that address, set "
                     "ATTENTION_SCALING_ALLOWED_ORIGINS=%s or pass --allow-websocket-origin %s",
                     host[:100], host[:100], host[:100])


def refuse_request(handler) -> bool:
    """Answer a page request that may not open a session, and say so: 403 for a host that is
    not allowed, and for a session id or token named in the address (a page always gets a new
    session; Bokeh would otherwise open, or wait for, the session named). True when refused."""
    if not host_allowed(handler):
        say_host_refused(handler)
        what = ("This server does not answer for the address this page was asked for. If "
                "you typed it, ask your teacher for the address the class uses.")
    elif any(name.startswith("bokeh-") for name in handler.request.arguments):
        _RefusalLog.once("session-id", "", "Refused a page request naming a session or token "
                         "in its address (bokeh-session-id, bokeh-token) with 403")
        what = "This address names a session; open the page without it."
    else:
        return False
    handler.set_status(403)
    handler.set_header("Cache-Control", "no-store")
    handler.set_header("Content-Type", "text/html; charset=UTF-8")
    handler.finish(REFUSED_PAGE.format(what=html.escape(what)))
    return True


class CappedDocHandler(DocHandler):
    """Panel's page handler, refusing a new session once the process holds its cap (the
    visitor gets a short 503 page and no session is built), and opening sessions first come,
    first served (:class:`OpeningLine`), the page's title and a "connecting" notice sent
    before the visitor's turn."""

    _place = None              # this visitor's place in line while it waits
    _session = None
    _streaming = False
    _sent_scripts = ""         # the script tags sent with the notice
    _left = False              # the visitor closed the connection

    async def prepare(self):
        if refuse_request(self):
            return
        await super().prepare()

    async def get(self, *args, **kwargs):
        if Limits.full(self.application):
            log.warning("Full: %d sessions open (--max-sessions %d); refused a new visitor "
                        "with 503", _open_sessions(self.application), Limits.max_sessions)
            self.set_status(503)
            self.set_header("Retry-After", "60")
            self.set_header("Cache-Control", "no-store")
            self.set_header("Content-Type", "text/html; charset=UTF-8")
            self.finish(FULL_PAGE)
            return
        prefix = self.application.prefix
        if prefix and self.request.path == prefix and not prefix.endswith("/"):
            await super().get(*args, **kwargs)  # Panel's redirect to PREFIX/
            return
        Limits.building += 1
        admitted = False
        try:
            self.set_header("Cache-Control", "no-store")
            self.set_header("Content-Type", "text/html; charset=UTF-8")
            self._sent_scripts = ConnectingPage.scripts
            self.write(ConnectingPage.head(LINE.ahead()))
            if FIRST_VIEW is not None and self._sent_scripts and LINE.opening():
                try:
                    self.write(FIRST_VIEW(self.request.arguments))
                except Exception:          # the visitor still gets the notice and the page
                    log.exception("Could not build a ready-made first view")
            self._streaming = True
            await self.flush()
            admitted = await self._wait_in_line()
            if self._left:
                return
            if not admitted:
                log.warning("Busy: a visitor waited %g s in line; asked it to reload",
                            LINE_WAIT_MAX_S)
                self.finish(ConnectingPage.reload_notice(
                    "The server is too busy to open the explorer now"))
                return
            try:
                await super().get(*args, **kwargs)
            except Exception:
                # the notice is out already: an error page is no longer possible
                log.exception("Could not open a session")
                if not seams.finished(self):
                    self.finish(ConnectingPage.reload_notice(
                        "The server could not open the explorer"))
        finally:
            Limits.building -= 1
            if admitted:            # the page is built and sent: the next visitor's turn
                LINE.release()

    async def _wait_in_line(self) -> bool:
        """Wait for this visitor's turn, telling its page every LINE_PROGRESS_S how many are
        before it (which also keeps a proxy's read timeout from cutting the page off)."""
        waiter = asyncio.ensure_future(LINE.enter(LINE_WAIT_MAX_S, holder=self))
        while not (await asyncio.wait({waiter}, timeout=LINE_PROGRESS_S))[0]:
            try:
                self.write(ConnectingPage.progress(LINE.before(self._place)))
                await self.flush()
            except Exception:                    # the visitor went away mid-write
                self.on_connection_close()
        return waiter.result()

    async def get_session(self):
        self._session = await super().get_session()
        return self._session

    def write(self, chunk) -> None:
        if self._streaming and isinstance(chunk, str) and self._session is not None:
            chunk = ConnectingPage.body(chunk, unused_bundles(self._session.document),
                                        self._sent_scripts)
        super().write(chunk)

    def on_connection_close(self) -> None:
        """A visitor who leaves the line (closed tab, reload) gives up its place."""
        self._left = True
        if self._place is not None and not self._place.done():
            self._place.cancel()
        super().on_connection_close()


class _OriginLog:
    """Says once per origin (for the first 64 of them) why a websocket was refused."""

    seen: set[str] = set()

    @classmethod
    def refused(cls, origin: str, asked_for: list[str], allowed) -> None:
        if origin in cls.seen or len(cls.seen) >= 64:
            return
        cls.seen.add(origin)
        origin_host = urlparse(origin).netloc.lower()
        if origin_host and origin_host in asked_for:
            log.error("Refusing a browser that opened the page at %s: that host is not "
                      "allowed. To let it in, set ATTENTION_SCALING_ALLOWED_ORIGINS=%s (several "
                      "hosts: separate them with commas) or pass --allow-websocket-origin %s. "
                      "Allowed now: %s", origin_host[:100], origin_host[:100],
                      origin_host[:100], ", ".join(sorted(allowed)))
        else:
            log.error("Refused a websocket from a page of another site (Origin %r; the "
                      "browser asked for this server as %r). Nothing to change: only pages "
                      "this server sent may connect.", origin[:100],
                      asked_for[0][:100])


class CappedWSHandler(WSHandler):
    """Panel's websocket handler with a cap on open websockets per process, and an Origin
    check whose refusal message suggests a host only when it is the one the browser asked for
    (the proxy's X-Forwarded-Host with --use-xheaders; Tornado itself accepts, before this
    check, a page whose Origin is the Host it asked for)."""

    def check_origin(self, origin: str) -> bool:
        allowed = set(self.application.websocket_origins)
        if settings.allowed_ws_origin():
            allowed = set(settings.allowed_ws_origin())
        if check_allowlist(urlparse(origin).netloc.lower(), allowed):
            return True
        asked_for = [self.request.headers.get("Host", "").lower()]
        if Limits.trust_forwarded_host:
            asked_for.append(self.request.headers.get("X-Forwarded-Host", "").lower())
        _OriginLog.refused(origin, asked_for, allowed)
        return False

    _bounds = None             # MessageBounds: this connection's messages
    _session_id = None
    _address = None
    _refused = False

    async def prepare(self):
        if not host_allowed(self):
            say_host_refused(self)
            self.set_status(403)
            self.finish()
            return
        if len(Limits.websockets) >= Limits.max_websockets():
            log.warning("Full: %d websockets open; refused one more with 503",
                        len(Limits.websockets))
            self.set_status(503)
            self.finish()
            return
        token = self._signed_token()
        if token is None:
            log.warning("Refused a websocket without a session token signed by this server "
                        "(from %s) with 403", self.request.remote_ip)
            self.set_status(403)
            self.finish()
            return
        self._session_id = get_session_id(token)
        live = {session.id for ctx in self.application.applications.values()
                for session in ctx.sessions}
        if self._session_id not in live and Limits.full(self.application):
            # a session this process does not hold (expired, or opened by another process)
            # would be built anew: only within the cap
            log.warning("Full: %d sessions open (--max-sessions %d); refused a websocket for a "
                        "session not held here with 503", _open_sessions(self.application),
                        Limits.max_sessions)
            self.set_status(503)
            self.finish()
            return
        if not OPENS.take(self._session_id):
            _RefusalLog.once("opens", "", "Refused a websocket with 429: its session opened more "
                             "than %d at once, or more than one per %g s", OPENS_BURST,
                             OPENS_EVERY_S)
            self.set_status(429)
            self.finish()
            return
        self._address = self.request.remote_ip or ""
        limit = Limits.websockets_per_address
        if limit and not _is_loopback(self._address):
            others = Limits.by_address.get(self._address, ())
            mine = Limits.by_session.get(self._session_id)
            if len(others) - (mine in others) >= limit:
                _RefusalLog.once("address", self._address, "Refused a websocket from %s with "
                                 "429: %d open from that address (the limit per address)",
                                 self._address[:60], len(others))
                self.set_status(429)
                self.finish()
                return
        await super().prepare()

    def _signed_token(self) -> str | None:
        """The token the handshake offers with Bokeh's subprotocol, if this server signed it
        (Bokeh checks it only after the upgrade, and then answers a forged one with an
        internal error)."""
        offered = [p.strip() for p in
                   self.request.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        if len(offered) != 2 or offered[0] != "bokeh":
            return None
        try:
            signed = check_token_signature(offered[1], secret_key=self.application.secret_key,
                                           signed=self.application.sign_sessions)
        except Exception:                         # not a token at all
            return None
        return offered[1] if signed else None

    def open(self, *args, **kwargs):
        Limits.websockets.add(self)
        Limits.by_address.setdefault(self._address, weakref.WeakSet()).add(self)
        older = Limits.by_session.get(self._session_id)
        Limits.by_session[self._session_id] = self
        if older is not None and older is not self:
            # one live websocket per session: the newer one (a reconnect) replaces it
            older.close(1000, "replaced by a newer connection of this session")
        self._bounds = MessageBounds()
        LINE.connected(self._session_id)
        # Bokeh sends a message as several frames; with Nagle's algorithm a later small one
        # can wait for the browser's delayed ACK (~40 ms)
        self.set_nodelay(True)
        return super().open(*args, **kwargs)

    async def on_message(self, fragment) -> None:
        if self._refused:
            return
        problem = self._bounds.take(fragment)
        if problem is None and self._bounds.kind == "PULL-DOC-REQ" and self._bounds.left == 2 \
                and not PULLS.take(self._session_id):
            problem = (f"more than {PULL_DOC_BURST} document requests at once, or more than "
                       f"one per {PULL_DOC_EVERY_S:g} s")
        if problem is not None:
            self._refuse(problem)
            return
        await super().on_message(fragment)

    def _refuse(self, problem: str) -> None:
        """Close this websocket for a message it may not send, and let go of what it sent."""
        self._refused = True
        _RefusalLog.once("message", problem.split()[1] if " " in problem else problem,
                         "Closed a websocket (from %s) for %s", self._address[:60], problem)
        seams.drop_partial_message(self)      # Bokeh's partial message and its buffers
        self.close(1009 if "bytes" in problem else 1008, "message refused")

    async def send_message(self, message) -> None:
        if message.msgtype == "ERROR":
            # the detail (Bokeh puts a traceback in it) stays in the log, said once
            log.error("Answered a message this server could not handle (from %s) with a "
                      "generic error: %s", self._address and self._address[:60],
                      str(message.content.get("text", ""))[:200])
            message = self.connection.protocol.create(
                "ERROR", message.header.get("reqid", ""),
                "The server could not handle this message.")
            message.content["traceback"] = None
        await super().send_message(message)
        if message.msgtype == "PULL-DOC-REPLY" and self.connection is not None:
            LINE.done(self.connection.session.id)     # this session has opened

    def on_close(self) -> None:
        Limits.websockets.discard(self)
        peers = Limits.by_address.get(self._address)
        if peers is not None:
            peers.discard(self)
            if not peers:
                Limits.by_address.pop(self._address, None)
        session = self.connection.session if self.connection is not None else None
        if self._session_id is not None:
            LINE.done(self._session_id)
            if Limits.by_session.get(self._session_id) is self:
                del Limits.by_session[self._session_id]
        super().on_close()
        if (session is not None and not session.destroyed
                and Limits.by_session.get(self._session_id) is None):
            # no live websocket left: the session's Python callbacks for "connection_lost"
            # run on the next turn (a training run stops)
            doc = session.document
            doc.add_next_tick_callback(lambda: doc.callbacks.trigger_event(ConnectionLost()))


class NotServed(web.RequestHandler):
    """404 for a route this app does not use. Registered in place of Panel's
    ``/components/<module>/<class>/<attr>/<path>`` route, whose handler imports whatever
    module the URL names, and of ``/autoload.js`` (a whole session per request, for pages
    that embed the app by script: the explorer is embedded by iframe) and ``/metadata``."""

    def initialize(self, **_route_context) -> None:
        """Bokeh hands its per-application routes their application; this one needs none."""

    def prepare(self) -> None:
        raise web.HTTPError(404)


def not_served_patterns() -> list[tuple]:
    """Routes for ``pn.serve(extra_patterns=...)``, matched before Panel's own."""
    return [(r"/components(/.*)?", NotServed)]


def use_capped_handlers() -> None:
    """Serve pages and websockets with the capped handlers, and answer /autoload.js and
    /metadata with 404 (:func:`seams.install_handlers`). Idempotent."""
    seams.install_handlers(CappedDocHandler, CappedWSHandler, NotServed)


_FRAME_SOURCE = re.compile(
    r"^('self'|'none'|\*|[a-z][a-z0-9+.-]*:|([a-z][a-z0-9+.-]*://)?(\*\.)?"
    r"[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*(:([0-9]{1,5}|\*))?(/[A-Za-z0-9._~/-]*)?)$")


def check_frame_ancestors(text: str) -> str:
    """The sources of a ``Content-Security-Policy: frame-ancestors`` directive, checked:
    ``*``, ``'self'``, ``'none'``, schemes (``https:``) or hosts
    (``https://*.example.edu``), separated by spaces. ValueError for anything else."""
    sources = text.split()
    if not sources:
        raise ValueError("frame ancestors must name at least one source, e.g. * or 'self'")
    for source in sources:
        if not _FRAME_SOURCE.match(source):
            raise ValueError(f"{source!r} is not a frame-ancestors source (use *, 'self', "
                             "'none', https: or a host such as https://lms.example.edu)")
    if "'none'" in sources and len(sources) > 1:
        raise ValueError("'none' cannot be combined with other frame-ancestors sources")
    return " ".join(sources)


def security_headers(frame_ancestors: str = "*"):
    """A Tornado output transform that gives every response ``X-Content-Type-Options``,
    ``Referrer-Policy``, a charset on HTML and, unless ``frame_ancestors`` is ``*``,
    ``Content-Security-Policy: frame-ancestors``, and drops the ``Server`` header (Tornado's
    name and version). ``*`` sends no policy: a ``frame-ancestors *`` policy would still
    refuse parents with an opaque origin (a course page opened from a file, a sandboxed
    iframe of an LMS, about:blank), and any page may embed the explorer by default."""
    sources = check_frame_ancestors(frame_ancestors)
    policy = None if sources == "*" else f"frame-ancestors {sources}"

    class SecurityHeaders(web.OutputTransform):
        def transform_first_chunk(self, status_code, headers, chunk, finishing):
            headers["X-Content-Type-Options"] = "nosniff"
            headers["Referrer-Policy"] = "same-origin"
            if policy:
                headers["Content-Security-Policy"] = policy
            kind = headers.get("Content-Type", "")
            if kind.startswith("text/html") and "charset" not in kind:
                headers["Content-Type"] = "text/html; charset=UTF-8"
            if "Server" in headers:
                del headers["Server"]
            return status_code, headers, chunk

    return SecurityHeaders


class BoundedLog(logging.Filter):
    """Keeps what a stranger can make the server log small: a record is cut to
    LOG_RECORD_CHARS (its traceback to one line naming the exception), and a record of the
    same kind (logger and message template) passes at most once per LOG_REPEAT_S seconds, the
    next one saying how many were held back."""

    def __init__(self) -> None:
        super().__init__()
        self._last: dict[tuple, list] = {}        # kind -> [time passed, held back since]

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "attention_scaling_bounded", False):
            return True
        record.attention_scaling_bounded = True
        kind = (record.name, record.msg if isinstance(record.msg, str) else type(record.msg))
        now = time.monotonic()
        seen = self._last.get(kind)
        if seen is not None and now - seen[0] < LOG_REPEAT_S:
            seen[1] += 1
            return False
        if len(self._last) >= _LOG_KINDS_MAX:
            self._last.clear()
        held = seen[1] if seen else 0
        self._last[kind] = [now, 0]
        try:
            text = record.getMessage()
        except Exception:                         # a record whose arguments do not fit
            text = str(record.msg)
        if len(text) > LOG_RECORD_CHARS:
            text = text[:LOG_RECORD_CHARS] + f"… [{len(text) - LOG_RECORD_CHARS} characters cut]"
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            text += f" [{type(exc).__name__}: {str(exc)[:200]}]"
        record.exc_info = record.exc_text = record.stack_info = None
        if held:
            text += f" ({held} more like it in the last {LOG_REPEAT_S:g} s not shown)"
        record.msg, record.args = text.replace("\n", " "), ()
        return True


def bound_logs() -> BoundedLog:
    """Put one :class:`BoundedLog` on every handler that prints the server's log: Bokeh's
    and Panel's own, and one for everything else (Tornado), on the root logger. Idempotent."""
    bounded = BoundedLog()
    root = logging.getLogger()
    if not any(isinstance(f, BoundedLog) for h in root.handlers for f in h.filters):
        handler = logging.StreamHandler()
        handler.setLevel(logging.WARNING)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    for name in ("", "bokeh", "panel", "tornado"):
        for h in logging.getLogger(name).handlers:
            if not any(isinstance(f, BoundedLog) for f in h.filters):
                h.addFilter(bounded)
    return bounded


# ---- garbage collection with many sessions open -----------------------------------------
# Each session holds ~10,000 objects tracked by Python's cyclic collector; with 150 sessions
# a full collection walks 1.7 million of them and stops the server for 1-2 s about once a
# minute while students move sliders. Every GC_FREEZE_PERIOD_S the server collects and then
# freezes what survived (gc.freeze), so later collections, Panel's after each closed tab
# included, walk only what is younger; once enough sessions have ended, their frozen objects
# are thawed and everything is collected once.

GC_FREEZE_PERIOD_S = 10.0
#: Thaw and collect everything once this many sessions (or a tenth of those open) ended.
GC_FULL_AFTER_ENDED = 8
_GC = {"freezer": None, "live": 0, "ended": 0, "full": 0}


def track_session(doc) -> None:
    """Count ``doc``'s session and, through Bokeh's ``on_session_destroyed``, its end."""
    if doc is None:
        return
    _GC["live"] += 1
    doc.on_session_destroyed(session_ended)


def session_ended(session_context) -> None:
    _GC["live"] = max(0, _GC["live"] - 1)
    _GC["ended"] += 1


def collect_and_freeze() -> bool:
    """Collect, then freeze what survived; thaw first when enough sessions have ended (then
    their objects are reclaimed). Returns whether the collection was a full one."""
    full = _GC["ended"] >= max(GC_FULL_AFTER_ENDED, _GC["live"] // 10)
    if full:
        gc.unfreeze()
        _GC["ended"] = 0
        _GC["full"] += 1
    gc.collect()
    gc.freeze()
    return full


def start_gc_freezer(period_s: float = GC_FREEZE_PERIOD_S) -> bool:
    """Start (once per process) the periodic collect-and-freeze on the running event loop;
    False when no loop runs."""
    if _GC["freezer"] is not None:
        return True
    import asyncio

    from tornado.ioloop import PeriodicCallback
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    collect_and_freeze()
    _GC["freezer"] = PeriodicCallback(collect_and_freeze, period_s * 1000)
    _GC["freezer"].start()
    return True


# ---- static files compressed once --------------------------------------------------------
#: Upper bound on the gzipped static files kept in memory (Bokeh's and Panel's: ~0.8 MB).
GZIP_CACHE_MAX_BYTES = 32 * 2**20
_GZIP_CACHE: dict[tuple[str, str], bytes] = {}


class GzipStaticOnce(web.GZipContentEncoding):
    """Tornado's gzip transform, and for a complete ``200`` answer to a GET under
    ``/static/`` (a file named by the content hash in its ``Etag``) the compressed body is
    kept and sent whole the next time: the page's 5.7 MB of scripts are compressed once per
    process, not for every page load (~130 ms of the server's thread each)."""

    def __init__(self, request):
        super().__init__(request)
        self._accepts = "gzip" in request.headers.get("Accept-Encoding", "")
        self._static = request.method == "GET" and "/static/" in request.path
        self._path = request.path
        self._parts: list[bytes] | None = None
        self._key = None
        self._hit = False
        self._size = self._fed = 0

    def transform_first_chunk(self, status_code, headers, chunk, finishing):
        etag = headers.get("Etag")
        if (self._accepts and self._static and status_code == 200 and etag
                and "Content-Range" not in headers and "Content-Encoding" not in headers):
            key = (self._path, etag)
            found = _GZIP_CACHE.get(key)
            if found is not None:
                self._hit = True
                headers["Vary"] = (headers["Vary"] + ", Accept-Encoding" if "Vary" in headers
                                   else "Accept-Encoding")
                headers["Content-Encoding"] = "gzip"
                headers["Content-Length"] = str(len(found))
                return status_code, headers, found
            self._key, self._parts = key, []
            self._size = int(headers.get("Content-Length", -1))
        answer = super().transform_first_chunk(status_code, headers, chunk, finishing)
        if answer[1].get("Content-Encoding") != "gzip":     # Tornado chose not to compress
            self._parts = None
        return answer

    def transform_chunk(self, chunk, finishing):
        if self._hit:
            return b""          # the whole body went with the first chunk
        self._fed += len(chunk)
        out = super().transform_chunk(chunk, finishing)
        if self._parts is not None:
            self._parts.append(out)
            # Tornado also finishes a response whose client went away mid-file: keep only
            # what compressed the whole file
            if finishing:
                body = b"".join(self._parts)
                if (self._fed == self._size and sum(map(len, _GZIP_CACHE.values()))
                        + len(body) <= GZIP_CACHE_MAX_BYTES):
                    _GZIP_CACHE[self._key] = body
                self._parts = None
        return out


def skip_document_validation() -> None:
    """Bokeh checks every model of a document when a session opens (~4-8% of the work of
    opening a tab); the page's document is the same for every session and a unit test
    validates it instead. Bokeh's public setting, unless BOKEH_VALIDATE_DOC is set."""
    import os
    if "BOKEH_VALIDATE_DOC" not in os.environ:
        settings.perform_document_validation.set_value(False)
