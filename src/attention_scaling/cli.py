"""Command line: ``attention-scaling serve`` runs the explorer on a Panel server;
``attention-scaling export OUT.html`` writes an offline copy (see :mod:`export`).

Every ``serve`` option can also come from an environment variable (a container is configured
that way); a flag on the command line wins over the variable. See :data:`ENVIRONMENT`.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import sys

from . import blas

blas.one_thread()        # before anything loads NumPy: see blas.py

from .server.limits import (DEFAULT_MAX_SESSIONS, DEFAULT_WEBSOCKETS_PER_ADDRESS,  # noqa: E402
                            MEMORY_LIMIT_MIB, SESSION_MIB)
from .server.line import DEFAULT_OPENING_AT_ONCE, OPENING_HOLD_S  # noqa: E402

DEFAULT_PORT = 5006
DEFAULT_ADDRESS = "127.0.0.1"
# Sessions: Bokeh drops a session once it has had no open websocket for this long (a closed
# tab, or a page whose websocket never came), checked every min(17 s, lifetime): a closed tab
# is released 30-47 s later by default. 30 s covers BokehJS's own reconnect attempts (5 tries,
# 0/2/4/8/16 s apart) and holds a third fewer closed tabs than 60 s (`make loadtest`,
# docs/benchmarks.md "Tuning chosen").
DEFAULT_UNUSED_SESSION_LIFETIME_S = 30
DEFAULT_KEEP_ALIVE_S = 30
DEFAULT_FRAME_ANCESTORS = "*"

# serve option -> environment variable. Lists (origins) are separated by commas or spaces.
ENVIRONMENT = {
    "port": "ATTENTION_SCALING_PORT",
    "address": "ATTENTION_SCALING_ADDRESS",
    "allow_websocket_origin": "ATTENTION_SCALING_ALLOWED_ORIGINS",
    "num_procs": "ATTENTION_SCALING_WORKERS",
    "prefix": "ATTENTION_SCALING_PREFIX",
    "max_sessions": "ATTENTION_SCALING_MAX_SESSIONS",
    "frame_ancestors": "ATTENTION_SCALING_FRAME_ANCESTORS",
}


def _int_in_range(what: str, low: int, high: int, low_note: str = ""):
    """An argparse type for an integer ``what`` in [low, high], refusing the rest clearly."""

    def check(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"{what} must be between {low}{low_note} and {high}, got {value}")
        return value

    return check


_port = _int_in_range("port", 0, 65535)
_num_procs = _int_in_range("number of processes", 0, 64, " (one per core)")
_seconds = _int_in_range("seconds", 1, 86400)
_sessions = _int_in_range("sessions", 1, 100_000)
_open_at_once = _int_in_range("sessions opened at a time", 0, 1000, " (no line)")
_hold = _int_in_range("seconds", 1, 600)
_per_address = _int_in_range("websockets per address", 0, 100_000, " (no limit)")


def _matching(pattern: str, message: str, normalise=lambda text: text):
    """An argparse type that accepts text matching ``pattern`` and refuses the rest clearly."""
    regex = re.compile(pattern)

    def check(text: str) -> str:
        if not regex.match(text):
            raise argparse.ArgumentTypeError(f"{message}, got {text!r}")
        return normalise(text)

    return check


# A host as Bokeh matches it: dot-separated labels, each a name or a whole `*` (any label),
# then an optional :PORT or :*. `*` alone (any host at all) needs --allow-any-origin.
_LABEL = r"(\*|[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)"
_origin = _matching(rf"^{_LABEL}(\.{_LABEL})*(:([0-9]{{1,5}}|\*))?$",
                    "websocket origin must look like HOST or HOST:PORT (e.g. localhost:5006; "
                    "a label may be a whole * such as *.example.edu, but not part of one)")
ANY_ORIGIN = re.compile(r"^\*(:\*)?$")


def _frame_ancestors(text: str) -> str:
    from .server import check_frame_ancestors
    try:
        return check_frame_ancestors(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
_address = _matching(r"^([0-9.]+|[0-9A-Fa-f:]+|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)$",
                     "address must be an IP address or host name (e.g. 0.0.0.0)")
_prefix = _matching(r"^/?[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*/?$",
                    "prefix must be a URL path such as /explorer (letters, digits, . _ ~ -)",
                    lambda text: "/" + text.strip("/"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="attention-scaling",
        description="An interactive explorer of why scaled dot-product attention divides "
                    "its logits by √d_k.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    serve = sub.add_parser(
        "serve", help="serve the explorer in the browser (Panel server)",
        description="Serve the explorer at http://ADDRESS:PORT/ (PREFIX prepended when given).",
    )
    _network_options(serve)
    _classroom_options(serve)
    serve.epilog = ("environment variables (a flag given on the command line wins): " + "; ".join(
        f"{var} for --{name.replace('_', '-')}" for name, var in ENVIRONMENT.items())
        + " (the origins and the frame ancestors each separated by commas or spaces); "
          "ATTENTION_SCALING_ALLOW_ANY_ORIGIN=1 for "
          "--allow-any-origin; ATTENTION_SCALING_SECRET_KEY: the key that signs session ids "
          "and tokens, at least 32 printable ASCII characters, one key for processes behind "
          "a proxy that is not sticky (default: a key made at each start); "
          "BOKEH_VALIDATE_DOC: when set, Bokeh's own setting decides whether each session's "
          "document is checked (default: not checked, a test checks the page's document); "
          + ", ".join(blas.THREAD_VARIABLES) + ": NumPy's BLAS threads in each process "
          "(default 1: the worker pool has a process per core)")
    export = sub.add_parser(
        "export", help="write a self-contained offline HTML copy of the explorer",
        description="Write the explorer as one HTML file that works from file:// with no "
                    "server and no network: every setting of the controls is precomputed.",
    )
    export.add_argument("out", metavar="OUT.html", help="the HTML file to write")
    export.add_argument("--seeds", default="4", metavar="N",
                        help="number of random draws to include, 1 to 4 (default 4; the "
                             "first is the seed of Fig. 3)")
    return parser


def _network_options(serve: argparse.ArgumentParser) -> None:
    """serve's options of where it listens and who may reach it."""
    serve.add_argument("--port", type=_port, default=None,
                       help=f"port to listen on (default {DEFAULT_PORT}; 0 picks a free one)")
    serve.add_argument("--address", type=_address, default=None,
                       help=f"address to bind (default {DEFAULT_ADDRESS}, this machine only; "
                            "0.0.0.0 for every interface)")
    serve.add_argument("--allow-websocket-origin", action="append", type=_origin,
                       default=[], metavar="HOST[:PORT]",
                       help="a host browsers may open the app from (repeatable); "
                            "default: the address and port served")
    serve.add_argument("--num-procs", type=_num_procs, default=None, metavar="N",
                       help="worker processes sharing the port (default 1; 0: one per core). "
                            "A page and its websocket may reach different processes, which then "
                            "builds the session twice: prefer one process per port behind a "
                            "sticky proxy (docs/deploy.md)")
    serve.add_argument("--prefix", type=_prefix, default=None, metavar="P",
                       help="URL path prefix, e.g. /explorer behind a reverse proxy")
    serve.add_argument("--allow-any-origin", action="store_true",
                       help="accept --allow-websocket-origin '*' (any site's pages may then "
                            "open websockets to this server; refused without this flag)")
    serve.add_argument("--frame-ancestors", type=_frame_ancestors, default=None,
                       metavar="SOURCES",
                       help="which pages may embed the explorer in an iframe, as a "
                            "Content-Security-Policy frame-ancestors list (default *: no "
                            "policy, any course page; e.g. \"'self' https://lms.example.edu\")")
    serve.add_argument("--use-xheaders", action="store_true",
                       help="behind a reverse proxy: take the client's address and scheme from "
                            "its X-Real-Ip / X-Forwarded-For / X-Forwarded-Proto headers")
    serve.add_argument("--show", action="store_true", help="open a browser tab")


def _classroom_options(serve: argparse.ArgumentParser) -> None:
    """serve's options of how many sessions it holds and how it keeps them."""
    serve.add_argument("--unused-session-lifetime", type=_seconds, metavar="S",
                       default=DEFAULT_UNUSED_SESSION_LIFETIME_S,
                       help="drop a session whose browser never connected (or went away) after "
                            f"S seconds (default {DEFAULT_UNUSED_SESSION_LIFETIME_S})")
    serve.add_argument("--keep-alive", type=_seconds, metavar="S", default=DEFAULT_KEEP_ALIVE_S,
                       help="ping each open websocket every S seconds so proxies keep it open "
                            f"(default {DEFAULT_KEEP_ALIVE_S})")
    serve.add_argument("--max-sessions", type=_sessions, default=None, metavar="N",
                       help="open sessions one process holds; past it a new visitor gets a "
                            "short 'server is full' page (HTTP 503) and the open sessions keep "
                            f"working (default {DEFAULT_MAX_SESSIONS}: a "
                            f"{MEMORY_LIMIT_MIB // 1024} GiB memory limit at {SESSION_MIB:g} "
                            "MiB per session, docs/security.md)")
    serve.add_argument("--open-at-once", type=_open_at_once, default=None, metavar="N",
                       help="sessions one process opens at a time (page, websocket, document); "
                            "visitors past them wait in arrival order, their page showing that "
                            f"it is connecting (default {DEFAULT_OPENING_AT_ONCE}; 0: no line, "
                            "all at once)")
    serve.add_argument("--opening-hold", type=_hold, default=None, metavar="S",
                       help="the longest a new page's websocket keeps its place in the opening "
                            "before its browser has asked for the document (default "
                            f"{OPENING_HOLD_S} s, "
                            "server.OPENING_HOLD_S: a slow browser then makes way for the next "
                            "visitor)")
    serve.add_argument("--websockets-per-address", type=_per_address, default=None,
                       metavar="N",
                       help="live websockets (open pages) one client address may hold; "
                            "loopback is not limited (a proxy on this machine speaks for "
                            f"many) (default {DEFAULT_WEBSOCKETS_PER_ADDRESS}; 0: no limit, e.g. "
                            "for a whole class behind "
                            "one NAT address without a proxy)")
    serve.add_argument("--stats", action="store_true",
                       help="also serve /stats: JSON with this process's open sessions and "
                            "memory (for load tests and monitoring)")


def _from_environment(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Fill the serve options not given as flags from their environment variables, checked by
    the same rules as the flags; a bad value exits with a message naming the variable."""
    types = {"port": _port, "address": _address, "num_procs": _num_procs, "prefix": _prefix,
             "allow_websocket_origin": _origin, "max_sessions": _sessions,
             "frame_ancestors": _frame_ancestors}
    defaults = {"port": DEFAULT_PORT, "address": DEFAULT_ADDRESS, "num_procs": 1,
                "prefix": None, "allow_websocket_origin": [],
                "max_sessions": DEFAULT_MAX_SESSIONS, "frame_ancestors": DEFAULT_FRAME_ANCESTORS}
    for name, var in ENVIRONMENT.items():
        if getattr(args, name) not in (None, []):
            continue
        text = os.environ.get(var, "").strip()
        if not text:
            setattr(args, name, defaults[name])
            continue
        try:
            if name == "allow_websocket_origin":
                value = [types[name](item) for item in re.split(r"[,\s]+", text) if item]
            else:
                value = types[name](text)
        except argparse.ArgumentTypeError as exc:
            parser.exit(2, f"attention-scaling serve: error: {var}: {exc}\n")
        setattr(args, name, value)


def _secret_key(parser: argparse.ArgumentParser) -> str:
    """The key that signs session ids and tokens: ATTENTION_SCALING_SECRET_KEY (for processes
    behind a proxy that is not sticky; at least 32 printable ASCII characters), otherwise one
    made for this run (the --num-procs workers share it: they fork after it is made)."""
    import secrets
    key = os.environ.get("ATTENTION_SCALING_SECRET_KEY", "").strip()
    if not key:
        return secrets.token_urlsafe(32)
    if len(key) < 32 or not key.isascii() or not key.isprintable():
        parser.exit(2, "attention-scaling serve: error: ATTENTION_SCALING_SECRET_KEY must be at "
                       "least 32 printable ASCII characters (e.g. from: python3 -c 'import "
                       "secrets; print(secrets.token_urlsafe(32))')\n")
    return key


def _check_any_origin(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """``*`` as a websocket origin lets a page of any site drive this server: refused unless
    --allow-any-origin (or ATTENTION_SCALING_ALLOW_ANY_ORIGIN=1) says so, then warned about."""
    if os.environ.get("ATTENTION_SCALING_ALLOW_ANY_ORIGIN", "").strip() in ("1", "true", "yes"):
        args.allow_any_origin = True
    wildcards = [o for o in args.allow_websocket_origin if ANY_ORIGIN.match(o)]
    if not wildcards:
        return
    if not args.allow_any_origin:
        parser.exit(2, f"attention-scaling serve: error: websocket origin {wildcards[0]!r} lets "
                       "pages of any site open websockets to this server; name the hosts "
                       "students use instead, or add --allow-any-origin if that is intended\n")
    print("attention-scaling: warning: --allow-any-origin: pages of any site may open "
          "websockets to this server", file=sys.stderr, flush=True)


def _stats_handler():
    """/stats: this process's live sessions and open websockets, and its memory, as JSON."""
    import psutil
    from tornado import web

    from . import seams

    class Stats(web.RequestHandler):
        def get(self) -> None:
            tornado_app = self.application
            sessions = sum(len(list(ctx.sessions))
                           for ctx in tornado_app.applications.values())
            rss_kib = psutil.Process().memory_info().rss // 1024
            self.set_header("Cache-Control", "no-store")
            self.write({"pid": os.getpid(), "sessions": sessions,
                        "connections": seams.open_connections(tornado_app),
                        "rss_kib": rss_kib,
                        # objects moved out of the collector's reach (server/collect.py)
                        "gc_frozen": gc.get_freeze_count()})

    return Stats


#: How long the parent of --num-procs workers waits for them to stop before it kills them.
WORKERS_STOP_S = 5.0


def _children() -> list[int]:
    """The process ids of this process's children."""
    import psutil
    return [child.pid for child in psutil.Process().children()]


def _stop_workers(signum: int) -> None:
    """In the parent of --num-procs workers: pass the signal on as SIGTERM, wait up to
    WORKERS_STOP_S for the workers to end (then SIGKILL the rest), and exit."""
    import signal
    import time
    children = _children()
    for pid in children:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + WORKERS_STOP_S
    while children and time.monotonic() < deadline:
        for pid in list(children):
            try:
                done, _status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                children.remove(pid)
        time.sleep(0.05)
    for pid in children:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    print(f"attention-scaling: stopped (signal {signum})", flush=True)
    sys.stderr.flush()
    os._exit(0)


def _stop_on_signal(signum, _frame) -> None:
    """Stop the running event loop from a signal handler. Not by raising KeyboardInterrupt:
    raised inside a weakref callback or ``__del__`` it is ignored and the server keeps going.
    Where no loop runs and workers were forked (the parent of ``--num-procs`` workers waits
    for them), the workers are stopped and the parent exits; before the server started, it
    raises."""
    from tornado.ioloop import IOLoop
    from tornado.process import task_id

    loop = IOLoop.current(instance=False)
    if loop is not None and loop.asyncio_loop.is_running():
        loop.asyncio_loop.call_soon_threadsafe(loop.stop)
        return
    if task_id() is None and _children():
        _stop_workers(signum)
    raise KeyboardInterrupt


def _install(args: argparse.Namespace) -> None:
    """The classroom server's limits and pages (server.install), its bounded logs, and
    SIGTERM and SIGINT stopping it: explicitly, because as a container's PID 1 (Docker,
    Kubernetes) a process has no default action for them and would wait to be killed; the
    parent of --num-procs workers stops its workers first."""
    import signal

    from . import seams, server
    from .page import FAVICON, TITLE
    from .server.first_views import FirstViews
    from .style import library_file

    seams.check_versions()
    server.skip_document_validation()
    server.install(server.ServerConfig(
        max_sessions=args.max_sessions,
        websockets_per_address=(DEFAULT_WEBSOCKETS_PER_ADDRESS
                                if args.websockets_per_address is None
                                else args.websockets_per_address),
        open_at_once=(DEFAULT_OPENING_AT_ONCE if args.open_at_once is None
                      else args.open_at_once),
        opening_hold_s=(OPENING_HOLD_S if args.opening_hold is None
                        else args.opening_hold),
        trust_forwarded_host=args.use_xheaders,
        title=TITLE, icon_href=FAVICON, first_view=FirstViews().html,
        programs=library_file()))
    server.bound_logs()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _stop_on_signal)


def _origins(args: argparse.Namespace) -> list[str]:
    """The hosts browsers may open websockets from: the flags', or the address served."""
    origins = list(args.allow_websocket_origin) or [
        f"{h}:{args.port}" for h in ("localhost", "127.0.0.1", args.address)
        if h not in ("0.0.0.0", "::")]
    return list(dict.fromkeys(origins))


def _server_options(args: argparse.Namespace) -> dict:
    """pn.serve's options from the command line."""
    from . import server
    from .page import TITLE
    from .style import library_file
    return dict(
        port=args.port,
        address=args.address,
        websocket_origin=_origins(args),
        num_procs=args.num_procs,
        prefix=args.prefix or "",
        show=args.show,
        title=TITLE,
        liveness=True,
        # no Panel Location: the page writes its address itself (assets/js/write-url.js), and
        # Panel's would echo the address back to the server after every change
        location=False,
        # the browser programs' library, fetched once and kept (page.serve_session)
        extra_patterns=server.not_served_patterns()
        + server.programs_patterns(library_file()) + (
            [("/stats", _stats_handler())] if args.stats else []),
        unused_session_lifetime_milliseconds=args.unused_session_lifetime * 1000,
        check_unused_sessions_milliseconds=min(17_000, args.unused_session_lifetime * 1000),
        keep_alive_milliseconds=args.keep_alive * 1000,
        use_xheaders=args.use_xheaders,
        # gzip: the first page load is 5.7 MB of scripts uncompressed, 1.6 MB compressed;
        # each static file is compressed once, not for every page load
        transforms=[server.security_headers(args.frame_ancestors), server.GzipStaticOnce],
        # The session carries none of the request's headers and cookies (the page needs
        # none): Bokeh would put them all, HttpOnly cookies included, into the page's
        # session token.
        include_headers=[],
        include_cookies=[],
        # a websocket with a made-up session id is refused instead of building a session
        sign_sessions=True,
        secret_key=args.secret_key.encode("ascii"),
        websocket_max_message_size=server.MAX_MESSAGE_BYTES,
        http_server_kwargs={"max_header_size": server.MAX_HEADER_BYTES,
                            "max_body_size": server.MAX_BODY_BYTES,
                            # Tornado's header timeout, and how long a kept-alive
                            # connection may wait for its next request
                            "idle_connection_timeout": server.HEADER_TIMEOUT_S},
    )


def _serve(args: argparse.Namespace) -> int:
    import panel as pn
    from tornado import process

    from . import server, work
    from .page import serve_session

    _install(args)

    def session_page():
        serve_session()
        server.track_session(pn.state.curdoc)
        server.start_gc_freezer()

    try:
        # started here rather than by pn.serve: with --num-procs each process (forked by the
        # server's constructor) warms its own worker pool once its loop runs
        try:
            served = pn.serve(session_page, start=False, **_server_options(args))
        except OSError as exc:      # the port taken, or the address not this machine's
            work.shutdown()
            print(f"attention-scaling serve: error: cannot listen on {args.address}:{args.port}: "
                  f"{exc.strerror or exc} (choose another --port or --address)",
                  file=sys.stderr, flush=True)
            return 2
        if process.task_id() in (None, 0):     # once, not in every process of --num-procs
            print(f"attention-scaling: serving on http://{args.address}:{args.port}"
                  f"{args.prefix or ''}/ "
                  f"(websocket origins: {', '.join(_origins(args))}; browsers from other "
                  f"hosts need {ENVIRONMENT['allow_websocket_origin']} or --allow-websocket-origin)",
                  flush=True)
        served.io_loop.add_callback(work.warm)
        served.start()
        served.io_loop.start()
    except KeyboardInterrupt:   # Ctrl-C or SIGINT
        pass
    work.shutdown()
    print("attention-scaling: stopped", flush=True)
    # Leave now: Panel's and Bokeh's worker threads would otherwise keep the process alive.
    sys.stderr.flush()
    os._exit(0)


def _export(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    from . import export

    def fail(message: str) -> int:
        print(f"attention-scaling export: error: {message}", file=sys.stderr)
        return 2

    try:
        seeds = int(args.seeds)
    except ValueError:
        return fail(f"--seeds must be an integer, got {args.seeds!r}")
    if not 1 <= seeds <= export.MAX_SEEDS:
        return fail(f"--seeds must be between 1 and {export.MAX_SEEDS} (the file must stay "
                    f"under {export.MAX_BYTES / 1e6:g} MB), got {seeds}")
    out = Path(args.out)
    parent = out.parent if str(out.parent) else Path(".")
    if out.is_dir():
        return fail(f"{args.out!r} is a directory")
    if not parent.is_dir():
        return fail(f"cannot write {args.out!r}: directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        return fail(f"cannot write {args.out!r}: permission denied")
    try:
        info = export.export(out, seeds, progress=sys.stderr)
    except (OSError, ValueError) as exc:
        return fail(f"cannot write {args.out!r}: {exc}")
    print(f"attention-scaling: wrote {info['path']}: {info['states']} states "
          f"({len(info['seeds'])} seeds x {len(export.core.D_K_VALUES)} widths x "
          f"{len(export.core.TEMPERATURES)} temperatures, each under the "
          f"{len(export.core.RULES)} scaling rules), "
          f"{info['bytes'] / 1e6:.2f} MB ({info['bytes']} bytes), "
          f"in {info['seconds']:.1f} s", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "serve":
        _from_environment(args, parser)
        _check_any_origin(args, parser)
        args.secret_key = _secret_key(parser)
        return _serve(args)
    if args.command == "export":
        return _export(args)
    parser.error(f"unknown command {args.command!r}")  # pragma: no cover
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
