"""The classroom server's limits as numbers: memory per process and per session, the session
cap they size, and what one websocket, request or session may send (docs/security.md lists
each with what it defends)."""

from __future__ import annotations

import collections
import json
import time

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
#: Messages a session may send: MESSAGES_BURST at once, then one per MESSAGE_EVERY_S (a
#: slider dragged as fast as a hand can sends about 60 a second; a page that answers them
#: sends fewer). A websocket that sends more is closed, and nothing it sent after the limit
#: is worked through.
MESSAGES_BURST = 240
MESSAGE_EVERY_S = 0.01
#: Websockets a session may open: OPENS_BURST at once, then one per OPENS_EVERY_S (BokehJS
#: reconnects a dropped page up to 5 times, 0-16 s apart); past it the handshake gets 429
#: before any work.
OPENS_BURST = 4
OPENS_EVERY_S = 10.0

#: Live websockets from one client address (not loopback: a proxy on this machine, or the load
#: test, speaks for many). A page has one; a student with several tabs open has a few.
DEFAULT_WEBSOCKETS_PER_ADDRESS = 16

#: Training runs (a Train's runs, then their sweep) under way from one client address at once
#: (not loopback, as above): a student's page has one, a student with several tabs a few.
#: Past it, Train says so in the page and trains nothing.
DEFAULT_TRAINING_RUNS_PER_ADDRESS = 2

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
LOG_KINDS_MAX = 256



class Allowance:
    """How often each session may do a costly thing: ``burst`` times at once, then one per
    ``every_s`` (a token bucket per session id, for the last ``keep`` sessions seen)."""

    def __init__(self, burst: int, every_s: float, keep: int = 4 * DEFAULT_MAX_SESSIONS) -> None:
        self.burst, self.every_s, self.keep = float(burst), every_s, keep
        self._buckets: collections.OrderedDict[str, list[float]] = collections.OrderedDict()

    def take(self, session_id: str, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        tokens, then = self._buckets.pop(session_id, [self.burst, now])
        tokens = min(self.burst, tokens + (now - then) / self.every_s)
        allowed = tokens >= 1.0
        self._buckets[session_id] = [tokens - allowed, now]
        while len(self._buckets) > self.keep:
            self._buckets.popitem(last=False)
        return allowed


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
        self.started = False        # the last frame taken was a message's header

    def take(self, fragment) -> str | None:
        self.started = self.left == 0
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
