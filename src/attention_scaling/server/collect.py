"""Garbage collection with many sessions open: collect, then freeze what survived."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc

# Each session holds ~10,000 objects tracked by Python's cyclic collector; with 150 sessions
# a full collection walks 1.7 million of them and stops the server for 1-2 s about once a
# minute while students move sliders. Every GC_FREEZE_PERIOD_S the server collects and then
# freezes what survived (gc.freeze), so later collections, Panel's after each closed tab
# included, walk only what is younger; once enough sessions have ended, their frozen objects
# are thawed and everything is collected once.

# After each collection the C allocator is asked to give the memory freed since back to the
# system (glibc's malloc_trim; elsewhere nothing is done): without it, the peaks of building
# and serialising documents stay in the process's RSS. Twelve sessions at the heaviest address
# (tests/test_shared_state.py) hold 265-276 MiB with it and 300-332 MiB without; a trim takes
# about 5 ms with a 1.2 GiB heap.

GC_FREEZE_PERIOD_S = 10.0
#: Thaw and collect everything once this many sessions (or a tenth of those open) ended.
GC_FULL_AFTER_ENDED = 8
_GC = {"freezer": None, "live": 0, "ended": 0, "full": 0}


def _malloc_trim():
    """glibc's ``malloc_trim(0)`` as a function of no arguments, or None without glibc."""
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim") if name else None
    except (OSError, AttributeError):
        return None


_TRIM = _malloc_trim()


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
    """Collect, then freeze what survived, then return the freed memory to the system; thaw
    first when enough sessions have ended (then their objects are reclaimed). Returns
    whether the collection was a full one."""
    full = _GC["ended"] >= max(GC_FULL_AFTER_ENDED, _GC["live"] // 10)
    if full:
        gc.unfreeze()
        _GC["ended"] = 0
        _GC["full"] += 1
    gc.collect()
    gc.freeze()
    if _TRIM is not None:
        _TRIM(0)
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
