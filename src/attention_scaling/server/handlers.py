"""The classroom server's handlers: Panel's page and websocket handlers with the session cap,
the opening line, the host check and the bounds on what a websocket may send, all reading one
:class:`Classroom` (a server's configuration and its running state), and the 404 for routes
the app does not use. :func:`install` registers them for a :class:`ServerConfig`."""

from __future__ import annotations

import asyncio
import html
import logging
import weakref
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urlparse

from bokeh.events import ConnectionLost
from bokeh.server.util import check_allowlist
from bokeh.settings import settings
from bokeh.util.token import check_token_signature, get_session_id
from panel.io.server import DocHandler, WSHandler
from tornado import web
from tornado.websocket import WebSocketClosedError

from .. import seams, training
from ..training import is_loopback
from .limits import (DEFAULT_MAX_SESSIONS, DEFAULT_TRAINING_RUNS_PER_ADDRESS,
                     DEFAULT_WEBSOCKETS_PER_ADDRESS, MESSAGE_EVERY_S, MESSAGES_BURST, OPENS_BURST,
                     OPENS_EVERY_S, PULL_DOC_BURST, PULL_DOC_EVERY_S, WEBSOCKETS_PER_SESSION,
                     Allowance, MessageBounds)
from .line import (DEFAULT_OPENING_AT_ONCE, LINE_PROGRESS_S, LINE_WAIT_MAX_S, OPENING_HOLD_S,
                   PROGRAMS_ROUTE, ConnectingPage, OpeningLine, unused_bundles)

log = logging.getLogger("attention_scaling.server")


@dataclass(frozen=True)
class ServerConfig:
    """What ``attention-scaling serve`` sets for the handlers (docs/security.md)."""

    max_sessions: int = DEFAULT_MAX_SESSIONS
    websockets_per_address: int = DEFAULT_WEBSOCKETS_PER_ADDRESS   # 0: no limit
    training_runs_per_address: int = DEFAULT_TRAINING_RUNS_PER_ADDRESS   # 0: no limit
    open_at_once: int = DEFAULT_OPENING_AT_ONCE                    # 0: no line
    opening_hold_s: float = OPENING_HOLD_S                         # a first websocket's place
    trust_forwarded_host: bool = False                             # --use-xheaders
    title: str = "Explorer"
    icon_href: str = ""
    #: query arguments -> the ready-made first view's HTML ("" for none), for a visitor who
    #: arrives while other sessions are opening (first_views.FirstViews.html)
    first_view: Callable | None = None
    #: (file name, bytes) of a script every page loads before its documents, served at
    #: PROGRAMS_ROUTE (style.library_file), or None
    programs: tuple[str, bytes] | None = None


def open_sessions(tornado_app) -> int:
    return sum(len(ctx.sessions) for ctx in tornado_app.applications.values())


class Classroom:
    """One server's configuration and running state: its opening line, the page it sends
    first, the sessions being built, its live websockets (per session, per client address),
    each session's allowances and what it has said in the log."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.line = OpeningLine(config.open_at_once, config.opening_hold_s)
        self.page = ConnectingPage(config.title, config.icon_href,
                                   config.programs[0] if config.programs else "")
        self.building = 0                         # page requests past the cap, not done
        self.websockets: weakref.WeakSet = weakref.WeakSet()
        #: session id -> its live websocket (one per session: a newer one replaces it)
        self.by_session: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        #: client address -> its live websockets
        self.by_address: dict[str, weakref.WeakSet] = {}
        keep = 4 * config.max_sessions
        self.pulls = Allowance(PULL_DOC_BURST, PULL_DOC_EVERY_S, keep)
        self.messages = Allowance(MESSAGES_BURST, MESSAGE_EVERY_S, keep)
        self.opens = Allowance(OPENS_BURST, OPENS_EVERY_S, keep)
        self.refusals = RefusalLog()
        self.origins = OriginLog()

    def max_websockets(self) -> int:
        return self.config.max_sessions * WEBSOCKETS_PER_SESSION

    def others_opening(self) -> bool:
        """Whether a page request under way shares the server with other sessions opening:
        another page request under way (before the line, in it or being built: a class
        arriving at once is all here before the first has entered the line) or a session
        pulling its document. Its visitor then waits, and gets a ready-made first view."""
        return self.building > 1 or self.line.opening()

    def full(self, tornado_app) -> bool:
        """Whether a new session would pass the cap: open, and being built."""
        return open_sessions(tornado_app) + self.building >= self.config.max_sessions


#: The look of the server's own short pages (full, refused).
NOTICE_STYLE = """<style>body{font:17px/1.5 system-ui,"Segoe UI",Arial,sans-serif;margin:0;
display:grid;place-items:center;min-height:100vh;background:#f6f7f9;color:#1d2433}
main{max-width:32em;padding:24px}h1{font-size:1.4em;margin:0 0 .4em}</style>"""

FULL_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="60">
<title>The classroom server is full</title>""" + NOTICE_STYLE + """</head>
<body><main><h1>The classroom server is full — try again in a minute</h1>
<p>Every place on this server is taken. This page tries again by itself in a minute;
your teacher can also raise the limit (<code>--max-sessions</code>).</p></main></body></html>
"""


REFUSED_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Not served here</title>""" + NOTICE_STYLE.replace("{", "{{").replace("}", "}}") + """</head>
<body><main><h1>Not served here</h1><p>{what}</p></main></body></html>
"""


def asked_for_host(request, trust_forwarded_host: bool) -> str:
    """The host and port the browser asked for: the ``Host`` header, or behind a proxy with
    --use-xheaders its ``X-Forwarded-Host`` when it sends one."""
    host = request.headers.get("Host", "")
    if trust_forwarded_host:
        host = request.headers.get("X-Forwarded-Host", "").split(",")[0].strip() or host
    return host.lower()[:300]


def host_allowed(handler) -> bool:
    """Whether the host a request asked for is one the page may be opened from (the allowed
    websocket origins; ``*`` allows any): a page of another site whose name was made to point
    at this server (DNS rebinding) asks for that site's host, and is refused."""
    allowed = set(handler.application.websocket_origins)
    if settings.allowed_ws_origin():
        allowed = set(settings.allowed_ws_origin())
    host = asked_for_host(handler.request, handler.classroom.config.trust_forwarded_host)
    return bool(host) and check_allowlist(host, allowed)


class RefusalLog:
    """Says once per (kind, subject), for the first 64 of them, why a request was refused."""

    def __init__(self) -> None:
        self.seen: set[tuple[str, str]] = set()

    def once(self, kind: str, subject: str, message: str, *args) -> None:
        if (kind, subject) in self.seen or len(self.seen) >= 64:
            return
        self.seen.add((kind, subject))
        log.error(message, *args)


def say_host_refused(handler) -> None:
    host = asked_for_host(handler.request, handler.classroom.config.trust_forwarded_host)
    handler.classroom.refusals.once(
        "host", host, "Refused a request for host %r with 403: not an allowed host. If "
        "students open the page at that address, set ATTENTION_SCALING_ALLOWED_ORIGINS=%s or "
        "pass --allow-websocket-origin %s", host[:100], host[:100], host[:100])


def refuse_request(handler) -> bool:
    """Answer a page request that may not open a session, and say so: 403 for a host that is
    not allowed, and for a session id or token named in the address (a page always gets a new
    session; Bokeh would otherwise open, or wait for, the session named). True when refused."""
    if not host_allowed(handler):
        say_host_refused(handler)
        what = ("This server does not answer for the address this page was asked for. "
                "Running the server? Allow this address's host (and its port, other than "
                "80 or 443) with --allow-websocket-origin or ATTENTION_SCALING_ALLOWED_ORIGINS; "
                "the server's log names the exact value. A student: ask your teacher for the "
                "address the class uses.")
    elif any(name.startswith("bokeh-") for name in handler.request.arguments):
        handler.classroom.refusals.once(
            "session-id", "", "Refused a page request naming a session or token in its "
            "address (bokeh-session-id, bokeh-token) with 403")
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

    classroom: Classroom       # set by install()
    _place = None              # this visitor's place in line while it waits
    _session = None
    _streaming = False
    _sent_scripts = ""         # the script tags sent with the notice
    _left = False              # the visitor closed the connection

    async def prepare(self):
        if refuse_request(self):
            return
        await super().prepare()

    async def head(self, *args, **kwargs):
        """An uptime check's HEAD: the status and headers a GET would get (503 once the cap is
        held), no body, and no session built."""
        self.set_header("Cache-Control", "no-store")
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        if self.classroom.full(self.application):
            self.set_status(503)
            self.set_header("Retry-After", "60")
        self.finish()

    async def get(self, *args, **kwargs):
        if self.classroom.full(self.application):
            log.warning("Full: %d sessions open (--max-sessions %d); refused a new visitor "
                        "with 503", open_sessions(self.application),
                        self.classroom.config.max_sessions)
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
        self.classroom.building += 1
        admitted = False
        try:
            self.set_header("Cache-Control", "no-store")
            self.set_header("Content-Type", "text/html; charset=UTF-8")
            room = self.classroom
            self._sent_scripts = room.page.scripts
            self.write(room.page.head(room.line.ahead(), prefix))
            if (room.config.first_view is not None and self._sent_scripts
                    and room.others_opening()):
                try:
                    self.write(room.config.first_view(self.request.arguments))
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
            self.classroom.building -= 1
            if admitted:            # the page is built and sent: the next visitor's turn
                self.classroom.line.release()

    async def _wait_in_line(self) -> bool:
        """Wait for this visitor's turn, telling its page every LINE_PROGRESS_S how many are
        before it (which also keeps a proxy's read timeout from cutting the page off)."""
        waiter = asyncio.ensure_future(self.classroom.line.enter(LINE_WAIT_MAX_S, holder=self))
        while not (await asyncio.wait({waiter}, timeout=LINE_PROGRESS_S))[0]:
            try:
                self.write(ConnectingPage.progress(self.classroom.line.before(self._place)))
                await self.flush()
            except Exception:                    # the visitor went away mid-write
                self.on_connection_close()
        return waiter.result()

    async def get_session(self):
        self._session = await super().get_session()
        return self._session

    def write(self, chunk) -> None:
        if self._streaming and isinstance(chunk, str) and self._session is not None:
            chunk = self.classroom.page.body(chunk, unused_bundles(self._session.document),
                                        self._sent_scripts)
        super().write(chunk)

    def on_connection_close(self) -> None:
        """A visitor who leaves the line (closed tab, reload) gives up its place."""
        self._left = True
        if self._place is not None and not self._place.done():
            self._place.cancel()
        super().on_connection_close()


class OriginLog:
    """Says once per origin (for the first 64 of them) why a websocket was refused."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def refused(self, origin: str, asked_for: list[str], allowed) -> None:
        if origin in self.seen or len(self.seen) >= 64:
            return
        self.seen.add(origin)
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
    """Panel's websocket handler with the classroom's limits: an allowed host, a cap on open
    websockets, a token this server signed, a session held here or room for it, a session's
    and an address's share of websockets, one live websocket per session, every message
    bounded, document requests rationed and errors answered without a traceback; and an Origin
    check whose refusal message suggests a host only when it is the one the browser asked for
    (the proxy's X-Forwarded-Host with --use-xheaders)."""

    def check_origin(self, origin: str) -> bool:
        allowed = set(self.application.websocket_origins)
        if settings.allowed_ws_origin():
            allowed = set(settings.allowed_ws_origin())
        if check_allowlist(urlparse(origin).netloc.lower(), allowed):
            return True
        asked_for = [self.request.headers.get("Host", "").lower()]
        if self.classroom.config.trust_forwarded_host:
            asked_for.append(self.request.headers.get("X-Forwarded-Host", "").lower())
        self.classroom.origins.refused(origin, asked_for, allowed)
        return False

    classroom: Classroom       # set by install()
    _bounds = None             # MessageBounds: this connection's messages
    _session_id = None
    _address = None
    _refused = False
    _gone = False              # closed: nothing is read from it or written to it any more
    _handling = 0              # messages being handled (Bokeh awaits the document's lock)
    _close_waits = False       # closed while one was: its session let go of after it

    async def prepare(self):
        if not host_allowed(self):
            say_host_refused(self)
            self.set_status(403)
            self.finish()
            return
        if len(self.classroom.websockets) >= self.classroom.max_websockets():
            log.warning("Full: %d websockets open; refused one more with 503",
                        len(self.classroom.websockets))
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
        if self._session_id not in live and self.classroom.full(self.application):
            # a session this process does not hold (expired, or opened by another process)
            # would be built anew: only within the cap
            log.warning("Full: %d sessions open (--max-sessions %d); refused a websocket for a "
                        "session not held here with 503", open_sessions(self.application),
                        self.classroom.config.max_sessions)
            self.set_status(503)
            self.finish()
            return
        if not self.classroom.opens.take(self._session_id):
            self.classroom.refusals.once(
                "opens", "", "Refused a websocket with 429: its session opened more than %d "
                "at once, or more than one per %g s", OPENS_BURST, OPENS_EVERY_S)
            self.set_status(429)
            self.finish()
            return
        self._address = self.request.remote_ip or ""
        limit = self.classroom.config.websockets_per_address
        if limit and not is_loopback(self._address):
            others = self.classroom.by_address.get(self._address, ())
            mine = self.classroom.by_session.get(self._session_id)
            if len(others) - (mine in others) >= limit:
                self.classroom.refusals.once(
                    "address", self._address, "Refused a websocket from %s with 429: %d open "
                    "from that address (the limit per address)", self._address[:60],
                    len(others))
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
        self.classroom.websockets.add(self)
        self.classroom.by_address.setdefault(self._address, weakref.WeakSet()).add(self)
        older = self.classroom.by_session.get(self._session_id)
        self.classroom.by_session[self._session_id] = self
        if older is not None and older is not self:
            # one live websocket per session: the newer one (a reconnect) replaces it
            older.close(1000, "replaced by a newer connection of this session")
        self._bounds = MessageBounds()
        self.classroom.line.connected(self._session_id)
        # Bokeh sends a message as several frames; with Nagle's algorithm a later small one
        # can wait for the browser's delayed ACK (~40 ms)
        self.set_nodelay(True)
        return super().open(*args, **kwargs)

    async def on_message(self, fragment) -> None:
        if self._refused or self._gone:
            # a closed connection's messages still read from Tornado's buffer: its session is
            # detached (Bokeh would fail on them), and nothing may answer them
            return
        problem = self._bounds.take(fragment)
        if problem is None and self._bounds.kind == "PULL-DOC-REQ" and self._bounds.left == 2 \
                and not self.classroom.pulls.take(self._session_id):
            problem = (f"more than {PULL_DOC_BURST} document requests at once, or more than "
                       f"one per {PULL_DOC_EVERY_S:g} s")
        if problem is None and self._bounds.started \
                and not self.classroom.messages.take(self._session_id):
            problem = (f"too many messages: more than {MESSAGES_BURST} at once, or more "
                       f"than {1 / MESSAGE_EVERY_S:g} a second")
        if problem is not None:
            self._refuse(problem)
            return
        self._handling += 1
        try:
            await super().on_message(fragment)
        finally:
            self._handling -= 1
            if self._close_waits and not self._handling:
                self._close_waits = False
                self._closed()

    def _refuse(self, problem: str) -> None:
        """Close this websocket for a message it may not send, and let go of what it sent."""
        self._refused = True
        # a flood is a kind of its own in the bounded log, not one more refused message
        form = ("Closed a websocket (from %s) that sent %s" if problem.startswith("too many")
                else "Closed a websocket (from %s) for %s")
        self.classroom.refusals.once("message", problem.split()[1] if " " in problem else problem,
                                     form, self._address[:60], problem)
        seams.drop_partial_message(self)      # Bokeh's partial message and its buffers
        self.close(1009 if "bytes" in problem else 1008, "message refused")

    async def write_message(self, message, binary: bool = False, locked: bool = True) -> None:
        """Bokeh's write, none once the connection is closed; a write that finds it closed
        (the client left while the server was answering) ends its writes, quietly: Tornado
        calls on_close once it has read to the end."""
        if self._gone:
            return
        try:
            await super().write_message(message, binary, locked)
        except WebSocketClosedError:
            self._gone = True

    def ping(self, data=b"") -> None:
        """Tornado's ping (Bokeh's keep-alive), none once the connection is closed; a ping
        that finds it closed marks it so and leaves it to on_close (Bokeh would let go of its
        session here, and on_close would then find none)."""
        if self._gone:
            return
        try:
            super().ping(data)
        except WebSocketClosedError:
            self._gone = True

    async def send_message(self, message) -> None:
        if self._gone:
            return
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
            self.classroom.line.done(self.connection.session.id)     # this session has opened

    def on_close(self) -> None:
        """Nothing read or written from now on; the session let go of (Bokeh detaches it from
        this connection) once no message of this connection is being handled: a message
        waiting for the document's lock would otherwise find no session."""
        self._gone = True
        if self._handling:
            self._close_waits = True
            return
        self._closed()

    def _closed(self) -> None:
        self.classroom.websockets.discard(self)
        peers = self.classroom.by_address.get(self._address)
        if peers is not None:
            peers.discard(self)
            if not peers:
                self.classroom.by_address.pop(self._address, None)
        session = self.connection.session if self.connection is not None else None
        if self._session_id is not None:
            self.classroom.line.done(self._session_id)
            if self.classroom.by_session.get(self._session_id) is self:
                del self.classroom.by_session[self._session_id]
        super().on_close()
        if (session is not None and not session.destroyed
                and self.classroom.by_session.get(self._session_id) is None):
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



def programs_patterns(programs: tuple[str, bytes]) -> list[tuple]:
    """The route for ``pn.serve(extra_patterns=...)`` that serves the script ``programs``
    (file name, bytes): named by its content's hash, so kept by browsers and proxies for a
    year; any other name under the route is a 404."""
    name, body = programs

    class ProgramsFile(web.RequestHandler):
        def initialize(self, **_route_context) -> None:
            """Bokeh hands its routes their context; this one needs none."""

        def get(self, asked: str) -> None:
            if asked != name:
                raise web.HTTPError(404)
            self.set_header("Content-Type", "text/javascript; charset=UTF-8")
            self.set_header("Cache-Control", "public, max-age=31536000, immutable")
            self.finish(body)

    return [(PROGRAMS_ROUTE + r"([^/]+)", ProgramsFile)]


def install(config: ServerConfig) -> Classroom:
    """Serve pages and websockets with handlers that read a new :class:`Classroom` for
    ``config`` (and set the training scheduler's runs per address), and answer /autoload.js
    and /metadata with 404 (:func:`seams.install_handlers`: Bokeh's route table is read when
    a server is made)."""
    classroom = Classroom(config)
    training.scheduler().runs_per_address = config.training_runs_per_address
    page = type("ClassroomDocHandler", (CappedDocHandler,), {"classroom": classroom})
    socket = type("ClassroomWSHandler", (CappedWSHandler,), {"classroom": classroom})
    seams.install_handlers(page, socket, NotServed)
    return classroom
