"""Keeps what a stranger can make the server log small (docs/security.md)."""

from __future__ import annotations

import logging
import time

from .limits import LOG_KINDS_MAX, LOG_RECORD_CHARS, LOG_REPEAT_S

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
        if len(self._last) >= LOG_KINDS_MAX:
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
