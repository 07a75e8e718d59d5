"""The classroom server: which routes answer, how many sessions and websockets one process
takes, the line a class arriving at once waits in, the headers every response carries, and
how much one request or message can write to the log. ``attention-scaling serve`` (:mod:`cli`)
builds one :class:`ServerConfig` and passes it to :func:`install`; docs/security.md lists
every limit and its default.

Built of subclasses of Panel's page and websocket handlers, Tornado output transforms and
handlers and a :class:`logging.Filter`; what they rely on beyond the libraries' public API
goes through :mod:`attention_scaling.seams`.

- :mod:`.limits`: the numbers (memory and the session cap, messages, allowances)
- :mod:`.line`: the opening line and the page a waiting visitor sees first
- :mod:`.handlers`: the page and websocket handlers, :class:`ServerConfig`, :func:`install`
- :mod:`.first_views`: ready-made first views
- :mod:`.http`: response headers, static files gzipped once, document validation
- :mod:`.logs`: the log's bounds
- :mod:`.collect`: garbage collection with many sessions open
"""

import importlib

#: Where each name lives: the package loads a module only when one of its names is asked
#: for (PEP 562), so that the command line can read the limits without loading Bokeh and Panel.
_HOME = {
    "GC_FREEZE_PERIOD_S": "collect",
    "GC_FULL_AFTER_ENDED": "collect",
    "_GC": "collect",
    "collect_and_freeze": "collect",
    "session_ended": "collect",
    "start_gc_freezer": "collect",
    "track_session": "collect",
    "Classroom": "handlers",
    "ServerConfig": "handlers",
    "CappedDocHandler": "handlers",
    "CappedWSHandler": "handlers",
    "NotServed": "handlers",
    "install": "handlers",
    "not_served_patterns": "handlers",
    "programs_patterns": "handlers",
    "open_sessions": "handlers",
    "_GZIP_CACHE": "http",
    "GZIP_CACHE_MAX_BYTES": "http",
    "GzipStaticOnce": "http",
    "check_frame_ancestors": "http",
    "security_headers": "http",
    "skip_document_validation": "http",
    "BASE_MIB": "limits",
    "CACHES_MIB": "limits",
    "DEFAULT_MAX_SESSIONS": "limits",
    "DEFAULT_WEBSOCKETS_PER_ADDRESS": "limits",
    "HEADER_TIMEOUT_S": "limits",
    "HEADROOM_MIB": "limits",
    "LOG_RECORD_CHARS": "limits",
    "LOG_REPEAT_S": "limits",
    "MAX_BODY_BYTES": "limits",
    "MAX_HEADER_BYTES": "limits",
    "MAX_MESSAGE_BUFFERS": "limits",
    "MAX_MESSAGE_BYTES": "limits",
    "MEMORY_LIMIT_MIB": "limits",
    "MESSAGE_EVERY_S": "limits",
    "MESSAGES_BURST": "limits",
    "OPENS_BURST": "limits",
    "OPENS_EVERY_S": "limits",
    "PULL_DOC_BURST": "limits",
    "PULL_DOC_EVERY_S": "limits",
    "SESSION_MIB": "limits",
    "WEBSOCKETS_PER_SESSION": "limits",
    "Allowance": "limits",
    "MessageBounds": "limits",
    "DEFAULT_OPENING_AT_ONCE": "line",
    "LINE_PROGRESS_S": "line",
    "LINE_WAIT_MAX_S": "line",
    "OPENING_HOLD_S": "line",
    "PROGRAMS_ROUTE": "line",
    "ConnectingPage": "line",
    "OpeningLine": "line",
    "unused_bundles": "line",
    "BoundedLog": "logs",
    "bound_logs": "logs",
}


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)


__all__ = sorted(_HOME)
