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

from .collect import (GC_FREEZE_PERIOD_S, GC_FULL_AFTER_ENDED, _GC, collect_and_freeze,
                      session_ended, start_gc_freezer, track_session)
from .handlers import (Classroom, ServerConfig, CappedDocHandler, CappedWSHandler, NotServed,
                       install, not_served_patterns, open_sessions)
from .http import (_GZIP_CACHE, GZIP_CACHE_MAX_BYTES, GzipStaticOnce, check_frame_ancestors,
                   security_headers, skip_document_validation)
from .limits import (BASE_MIB, CACHES_MIB, DEFAULT_MAX_SESSIONS, DEFAULT_WEBSOCKETS_PER_ADDRESS,
                     HEADER_TIMEOUT_S, HEADROOM_MIB, LOG_RECORD_CHARS, LOG_REPEAT_S,
                     MAX_BODY_BYTES, MAX_HEADER_BYTES, MAX_MESSAGE_BUFFERS, MAX_MESSAGE_BYTES,
                     MEMORY_LIMIT_MIB, MESSAGE_EVERY_S, MESSAGES_BURST, OPENS_BURST,
                     OPENS_EVERY_S, PULL_DOC_BURST, PULL_DOC_EVERY_S, SESSION_MIB,
                     WEBSOCKETS_PER_SESSION, Allowance, MessageBounds)
from .line import (DEFAULT_OPENING_AT_ONCE, LINE_PROGRESS_S, LINE_WAIT_MAX_S, OPENING_HOLD_S,
                   ConnectingPage, OpeningLine, unused_bundles)
from .logs import BoundedLog, bound_logs

__all__ = [
    "_GC",
    "_GZIP_CACHE",
    "Allowance",
    "BASE_MIB",
    "bound_logs",
    "BoundedLog",
    "CACHES_MIB",
    "CappedDocHandler",
    "CappedWSHandler",
    "check_frame_ancestors",
    "Classroom",
    "collect_and_freeze",
    "ConnectingPage",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_OPENING_AT_ONCE",
    "DEFAULT_WEBSOCKETS_PER_ADDRESS",
    "GC_FREEZE_PERIOD_S",
    "GC_FULL_AFTER_ENDED",
    "GZIP_CACHE_MAX_BYTES",
    "GzipStaticOnce",
    "HEADER_TIMEOUT_S",
    "HEADROOM_MIB",
    "install",
    "LINE_PROGRESS_S",
    "LINE_WAIT_MAX_S",
    "LOG_RECORD_CHARS",
    "LOG_REPEAT_S",
    "MAX_BODY_BYTES",
    "MAX_HEADER_BYTES",
    "MAX_MESSAGE_BUFFERS",
    "MAX_MESSAGE_BYTES",
    "MEMORY_LIMIT_MIB",
    "MessageBounds",
    "not_served_patterns",
    "NotServed",
    "open_sessions",
    "OPENING_HOLD_S",
    "OpeningLine",
    "OPENS_BURST",
    "OPENS_EVERY_S",
    "PULL_DOC_BURST",
    "PULL_DOC_EVERY_S",
    "MESSAGE_EVERY_S",
    "MESSAGES_BURST",
    "security_headers",
    "ServerConfig",
    "session_ended",
    "SESSION_MIB",
    "skip_document_validation",
    "start_gc_freezer",
    "track_session",
    "unused_bundles",
    "WEBSOCKETS_PER_SESSION",
]
