"""Command line: ``attention-scaling serve`` runs the explorer on a Panel server;
``attention-scaling export OUT.html`` writes an offline copy (see :mod:`export`)."""

from __future__ import annotations

import argparse
import re
import sys

DEFAULT_PORT = 5006
DEFAULT_ADDRESS = "127.0.0.1"


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"port must be an integer, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be between 0 and 65535, got {value}")
    return value


def _num_procs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"number of processes must be an integer, got {text!r}") from None
    if not 0 <= value <= 64:
        raise argparse.ArgumentTypeError(
            f"number of processes must be between 0 (one per core) and 64, got {value}")
    return value


def _matching(pattern: str, message: str, normalise=lambda text: text):
    """An argparse type that accepts text matching ``pattern`` and refuses the rest clearly."""
    regex = re.compile(pattern)

    def check(text: str) -> str:
        if not regex.match(text):
            raise argparse.ArgumentTypeError(f"{message}, got {text!r}")
        return normalise(text)

    return check


_origin = _matching(r"^(\*|[A-Za-z0-9*]([A-Za-z0-9.*-]*[A-Za-z0-9*])?)(:[0-9]{1,5})?$",
                    "websocket origin must look like HOST or HOST:PORT (e.g. localhost:5006)")
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
    serve.add_argument("--port", type=_port, default=DEFAULT_PORT,
                       help=f"port to listen on (default {DEFAULT_PORT}; 0 picks a free one)")
    serve.add_argument("--address", default=DEFAULT_ADDRESS,
                       help=f"address to bind (default {DEFAULT_ADDRESS}, this machine only; "
                            "0.0.0.0 for every interface)")
    serve.add_argument("--allow-websocket-origin", action="append", type=_origin,
                       default=[], metavar="HOST[:PORT]",
                       help="a host browsers may open the app from (repeatable); "
                            "default: the address and port served")
    serve.add_argument("--num-procs", type=_num_procs, default=1, metavar="N",
                       help="worker processes (default 1; 0 starts one per core)")
    serve.add_argument("--prefix", type=_prefix, default=None, metavar="P",
                       help="URL path prefix, e.g. /explorer behind a reverse proxy")
    serve.add_argument("--show", action="store_true", help="open a browser tab")
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


def _serve(args: argparse.Namespace) -> int:
    import panel as pn

    from .page import create_page

    origins = list(args.allow_websocket_origin)
    if not origins:
        origins = [f"{h}:{args.port}" for h in ("localhost", "127.0.0.1", args.address)
                   if h not in ("0.0.0.0", "::")]
    prefix_shown = args.prefix or ""
    print(f"attention-scaling: serving on http://{args.address}:{args.port}{prefix_shown}/ "
          f"(websocket origins: {', '.join(dict.fromkeys(origins))})", flush=True)
    pn.serve(
        create_page,
        port=args.port,
        address=args.address,
        websocket_origin=list(dict.fromkeys(origins)),
        num_procs=args.num_procs,
        prefix=args.prefix or "",
        show=args.show,
        title="Why attention divides by √d_k",
        liveness=True,
    )
    return 0


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
        info = export.export(out, seeds)
    except (OSError, ValueError) as exc:
        return fail(f"cannot write {args.out!r}: {exc}")
    print(f"attention-scaling: wrote {info['path']}: {info['states']} states "
          f"({len(info['seeds'])} seeds x {len(export.core.D_K_VALUES)} widths x "
          f"{len(export.core.TEMPERATURES)} temperatures, both variants), "
          f"{info['bytes'] / 1e6:.2f} MB ({info['bytes']} bytes), "
          f"in {info['seconds']:.1f} s", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "export":
        return _export(args)
    parser.error(f"unknown command {args.command!r}")  # pragma: no cover
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
