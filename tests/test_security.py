"""What a stranger can send the classroom server, against `attention-scaling serve`: routes that
import modules, sessions past the cap, forged session ids, oversized and malformed messages,
cookies and headers in the page, refused origins and hosts, the response headers; and, as a
minimal client of Bokeh's protocol would: messages that promise endless buffers, routes that
build sessions outside the cap, many websockets on one page's token, pages that never
connect, tokens of expired sessions, document requests in a loop, half-sent requests, and
signals to a server with workers. Each of these fails on a server without the limit it
checks. (Shared state between sessions: test_shared_state.py; one session's share of the
server: test_served_training.py and test_fairness.py.)"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import tornado.websocket
from pathlib import Path

import pytest
from conftest import (CLI, UI_WAIT_MS, Server, free_port, page_token, run_in_thread,
                      status_of, token_payload, wait_still, wait_until_live)

from testkit.bokeh_client import Connection

from attention_scaling import server as served
from attention_scaling import work

ZEN = "Beautiful is better than ugly"
COMPONENT_PATHS = ["components/this/x/__css__/y", "components/venv.__main__/x/__css__/y",
                   "components/panel.widgets/Button/__css__/x", "components/"]


#: The unscaled bars' weights in a served page, as one string (a JavaScript expression).
WEIGHTS_JS = ("(d => Array.from(d instanceof Map ? d.get('weight') : d.weight).join(','))("
              "[...Bokeh.documents[0].all_models].find("
              "m => m.name === 'unscaled-weights-source').data)")


async def read_bokeh_message(connection, timeout: float = 10):
    """One whole Bokeh message from ``connection``: its header's msgtype, or None when the
    connection closed."""
    message = await connection.receive(timeout)
    return None if message is None else message.msgtype


def stats(server: Server) -> dict:
    return json.loads(urllib.request.urlopen(server.url + "stats", timeout=10).read())


@pytest.fixture(scope="module")
def stats_server(tmp_path_factory):
    """`serve --stats` shared by the tests below that neither count the log's repeats nor
    fill the cap; sessions are kept all module long (a day's lifetime), so that a test's
    session count moves only by what it does. Its whole log is checked at the end."""
    srv = Server("--stats", "--unused-session-lifetime", "86400",
                 log=tmp_path_factory.mktemp("stats-server") / "server.log")
    yield srv
    out = srv.stop()
    assert "Traceback" not in out


def no_connections(srv: Server) -> None:
    """Wait until the websockets earlier tests closed are gone from /stats."""
    deadline = time.monotonic() + 30
    while stats(srv)["connections"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stats(srv)["connections"] == 0


def test_the_stock_panel_route_imports_what_the_url_names(tmp_path):
    """Positive control for the components test below: on Panel's own server (what the app
    replaces) the first of COMPONENT_PATHS imports the module `this`, whose ZEN shows in the
    server's log, where that test looks for it."""
    from conftest import free_port, stop_group, wait_until_live
    port = free_port()
    app = tmp_path / "app.py"
    app.write_text("import panel as pn\npn.panel('hi').servable()\n")
    log = tmp_path / "panel.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([str(CLI).replace("attention-scaling", "panel"), "serve",
                                 str(app), "--port", str(port), "--address", "127.0.0.1",
                                 "--liveness"],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        assert wait_until_live(f"http://127.0.0.1:{port}/liveness", proc, 60)
        status_of(f"http://127.0.0.1:{port}/{COMPONENT_PATHS[0]}")
    finally:
        stop_group(proc)
    assert ZEN in log.read_text()


@pytest.mark.parametrize("prefix", ["", "/course"])
def test_the_components_route_imports_nothing_and_the_server_keeps_answering(tmp_path, prefix):
    srv = Server("--stats", prefix=prefix, log=tmp_path / "server.log")
    try:
        for path in COMPONENT_PATHS:
            code, _headers, body = status_of(srv.url + path)
            assert code == 404, (path, code)
            assert b"Traceback" not in body
        assert status_of(srv.url + "liveness")[0] == 200
        assert status_of(srv.url)[0] == 200
    finally:
        out = srv.stop()
    assert srv.proc.returncode == 0     # stopped by us, not by argparse in venv.__main__
    assert ZEN not in out
    assert "Traceback" not in out


def test_every_response_carries_the_security_headers(server):
    for path in ["", "static/js/bokeh.min.js", "liveness", "components/this/x/__css__/y"]:
        _code, headers, _body = status_of(server.url + path)
        assert headers["X-Content-Type-Options"] == "nosniff", path
        assert headers["Referrer-Policy"] == "same-origin", path
        # any page may embed it by default, also one with an opaque origin (a file, a
        # sandboxed iframe), which even `frame-ancestors *` would refuse: no policy at all
        assert "Content-Security-Policy" not in headers, path
        assert "Server" not in headers, (path, headers.get("Server"))
    assert status_of(server.url)[1]["Content-Type"].lower() == "text/html; charset=utf-8"


def test_frame_ancestors_can_be_restricted_and_bad_sources_are_refused():
    """The policy is sent; a page of a site it does not allow that asks for the explorer in
    an iframe (the browser then shows its own "refused to connect") is named in the log, with
    what to set, once; an allowed site is not."""
    srv = Server("--frame-ancestors", "'self' https://lms.example.edu")
    embeds = ["https://lms.example.edu/course", srv.url + "x", "https://other.example/week1",
              "https://other.example/week2"]
    try:
        headers = status_of(srv.url)[1]
        for referer in embeds:
            code = status_of(srv.url, {"Sec-Fetch-Dest": "iframe", "Referer": referer})[0]
            assert code == 200
    finally:
        out = srv.stop()
    assert headers["Content-Security-Policy"] == "frame-ancestors 'self' https://lms.example.edu"
    assert out.count("embedded the explorer in an iframe") == 1, out
    assert ("A page at https://other.example embedded the explorer in an iframe" in out
            and "add https://other.example to --frame-ancestors" in out)
    for bad in ["'self'; script-src *", "https://a.edu<script>", ""]:
        r = subprocess.run([CLI, "serve", "--frame-ancestors", bad], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 2 and "frame" in r.stderr and "Traceback" not in r.stderr, bad


@pytest.mark.parametrize("origin,allowed", [
    ("https://lms.example.edu", True), ("http://lms.example.edu", False),
    ("https://lms.example.edu:8443", False), ("https://sub.lms.example.edu", False),
    ("https://a.uni.example", True), ("https://uni.example", False),
    ("http://127.0.0.1:5006", True), ("http://127.0.0.1:5007", False),
    ("https://other.example", False)])
def test_frame_ancestor_sources_match_as_a_browser_matches_them(origin, allowed):
    """CSP's source matching for frame-ancestors ('self', a host with its default port, a
    *. label that needs a subdomain, https only from an https source), which the log's
    "not allowed" follows."""
    from attention_scaling.server.http import frame_source_allows
    sources = ["'self'", "https://lms.example.edu", "https://*.uni.example"]
    assert frame_source_allows(sources, origin, "http://127.0.0.1:5006") == allowed


def test_the_page_carries_none_of_the_requests_cookies_or_headers(server):
    secret_cookie, secret_header = "abc123cookievalue", "hdr42value"
    code, _headers, body = status_of(server.url, {
        "Cookie": f"secretcookie={secret_cookie}; other=1",
        "X-Secret-Header": secret_header, "Authorization": "Bearer tok987"})
    html = body.decode()
    assert code == 200
    payload = token_payload(page_token(html))
    assert payload["session_id"]             # the decoding worked
    for value in (secret_cookie, secret_header, "tok987", "secretcookie"):
        assert value not in html
        assert value not in json.dumps(payload)
    assert payload.get("cookies", {}) == {} and payload.get("headers", {}) == {}


def test_a_websocket_with_a_made_up_session_id_builds_no_session(stats_server):
    from bokeh.util.token import generate_jwt_token
    srv = stats_server
    no_connections(srv)
    sessions, logged = stats(srv)["sessions"], len(srv.output().encode())
    forged = [generate_jwt_token(f"forged-session-{i:04d}-{'x' * 30}", signed=False)
              for i in range(5)]

    async def attempt():
        closed = 0
        for token in forged:
            try:
                ws = await Connection.connect(srv.url, token)
            except Exception:
                closed += 1
                continue
            if await read_bokeh_message(ws) is None:
                closed += 1
        return closed

    assert run_in_thread(attempt) == len(forged)
    assert stats(srv)["sessions"] == sessions
    assert stats(srv)["connections"] == 0
    # a real page's token still works
    token = page_token(urllib.request.urlopen(srv.url, timeout=30).read().decode())

    async def real():
        ws = await Connection.connect(srv.url, token)
        first = await read_bokeh_message(ws)
        ws.close()
        return first
    assert run_in_thread(real) == "ACK"
    out = srv.output().encode()[logged:]
    assert b"Traceback" not in out
    assert len(out) < 10_000


def test_oversized_and_malformed_messages_are_refused_with_little_logged(tmp_path):
    srv = Server("--stats", log=tmp_path / "server.log")
    try:
        before = len(srv.output().encode())
        async def send(fragments):
            # a page of its own each time: a session opens only a few websockets in a row
            token = page_token(urllib.request.urlopen(srv.url, timeout=30).read().decode())
            ws = await Connection.connect(srv.url, token)
            assert await read_bokeh_message(ws) == "ACK"
            for fragment in fragments:
                await ws.ws.write_message(fragment)
            # the server answers (ERROR), closes (None), or says nothing in 3 s
            try:
                answer = await read_bokeh_message(ws, 3)
            except asyncio.TimeoutError:
                answer = "silence"
            code = ws.close_code
            ws.close()
            return answer, code

        header = json.dumps({"msgid": "1", "msgtype": "PATCH-DOC", "num_buffers": 0})
        answer, code = run_in_thread(lambda: send(["x" * 300_000]))
        assert answer is None and code in (1009, None)   # closed: "message too big"
        for _ in range(5):
            run_in_thread(lambda: send([header, "{}", "{" + "x" * 60_000]))
        pull = json.dumps({"msgid": "2", "msgtype": "PULL-DOC-REQ", "num_buffers": 0})
        for _ in range(5):
            run_in_thread(lambda: send([header, "{}", json.dumps(
                {"events": [{"kind": "ModelChanged", "model": {"id": "p" + "9" * 50_000},
                             "attr": "value", "new": 1}], "references": []}), pull]))
        assert status_of(srv.url + "liveness")[0] == 200
        assert status_of(srv.url)[0] == 200
        grown = len(srv.output().encode()) - before
    finally:
        srv.stop()
    assert grown < 10_000, grown


@pytest.mark.browser
def test_a_float_or_out_of_range_slider_value_is_ignored(page, tmp_path):
    srv = Server(log=tmp_path / "server.log")
    try:
        page.goto(srv.url)
        page.wait_for_selector(".noUi-handle", timeout=30_000)
        slider = ("[...Bokeh.documents[0].all_models].find("
                  "m => m.type === 'Slider' && m.title.startsWith('Head width'))")
        weights = WEIGHTS_JS
        start = page.evaluate(f"() => [{slider}.value, {weights}]")
        before = len(srv.output().encode())
        for bad in (2.5, -3, 1e300, 25):
            page.evaluate(f"() => {{ {slider}.value = {bad}; }}")
            # the server puts the handle back where the state is
            page.wait_for_function(f"() => {slider}.value === {start[0]}",
                                   timeout=UI_WAIT_MS)
        assert page.evaluate(f"() => [{slider}.value, {weights}]") == start
        # and a real change still works
        page.evaluate(f"() => {{ {slider}.value = {start[0]} + 1; }}")
        page.wait_for_function(f"() => {weights} !== {json.dumps(start[1])}",
                               timeout=UI_WAIT_MS)
        grown = len(srv.output().encode()) - before
    finally:
        out = srv.stop()
    assert grown < 10_000, grown
    assert "Traceback" not in out and "TypeError" not in out


def _ws_status(url: str, origin: str, page_host: str | None = None, **headers: str) -> int:
    """The HTTP status of a websocket handshake with a real page's token (the page asked for
    as ``page_host``), from ``origin``."""
    from tornado.httpclient import HTTPClientError, HTTPRequest
    from tornado.websocket import websocket_connect
    token = page_token(status_of(url, {"Host": page_host} if page_host else None)[2].decode())

    async def connect():
        try:
            ws = await websocket_connect(HTTPRequest(
                url.replace("http://", "ws://") + "ws", request_timeout=10,
                headers={"Origin": origin, **{k.replace("_", "-"): v
                                              for k, v in headers.items()}}),
                subprotocols=["bokeh", token])
            ws.close()
            return 101
        except HTTPClientError as exc:
            return exc.code
    return run_in_thread(connect)


@pytest.mark.parametrize("xheaders", [False, True])
def test_a_refused_origin_is_explained_without_trusting_the_stranger(tmp_path, xheaders):
    """A page of another site is refused and the log suggests nothing to allow, once per
    origin. Behind a proxy (--use-xheaders), a browser that asked the proxy for a host not
    allowed is refused and told what to set; without it, the same forwarded header is not
    believed. A page whose Host and Origin are both a host not allowed (a name made to point
    at this server: DNS rebinding) is refused too, its page and its websocket."""
    srv = Server(*(["--use-xheaders"] if xheaders else []), log=tmp_path / "server.log")
    try:
        assert _ws_status(srv.url, "http://evil.example") == 403
        assert _ws_status(srv.url, "http://evil.example") == 403
        assert _ws_status(srv.url, "http://laptop.example:5006",
                          X_Forwarded_Host="laptop.example:5006") == 403
        assert _ws_status(srv.url, "http://laptop.example:5006", Host="laptop.example:5006") == 403
        assert _ws_status(srv.url, "http://rebound.example", Host="rebound.example") == 403
        code, headers, body = status_of(srv.url, {"Host": "rebound.example"})
        assert code == 403 and b"Not served here" in body and b"<script" not in body
        assert headers["Cache-Control"] == "no-store"
        # the teacher looking at a refused iframe learns the setting; the host is not echoed
        assert b"--allow-websocket-origin" in body and b"ATTENTION_SCALING_ALLOWED_ORIGINS" in body
        assert b"rebound" not in body
        code, _headers, body = status_of(srv.url, {"Host": "<b>x</b>.example"})
        assert code in (400, 403) and b"<b>x</b>" not in body
        forwarded = status_of(srv.url, {"X-Forwarded-Host": "laptop.example:5006"})[0]
        assert forwarded == (403 if xheaders else 200)
        # health checks ask with any Host (a pod's address): /liveness answers them
        assert status_of(srv.url + "liveness", {"Host": "10.1.2.3:5006"})[0] == 200
    finally:
        out = srv.stop()
    assert out.count("evil.example") == 1
    assert "another site" in out
    assert "ALLOWED_ORIGINS=evil" not in out and "--allow-websocket-origin evil" not in out
    assert out.count("set ATTENTION_SCALING_ALLOWED_ORIGINS=laptop.example:5006") == 1
    assert out.count("rebound.example") <= 1     # one record a minute per message


def test_an_allowed_host_opens_the_page_and_its_websocket():
    srv = Server("--allow-websocket-origin", "laptop.example:5006")
    try:
        assert status_of(srv.url, {"Host": "laptop.example:5006"})[0] == 200
        assert _ws_status(srv.url, "http://laptop.example:5006", page_host="laptop.example:5006",
                          Host="laptop.example:5006") == 101
        assert status_of(srv.url, {"Host": "laptop.example:5007"})[0] == 403
    finally:
        srv.stop()


@pytest.mark.parametrize("args,message", [
    (["--allow-websocket-origin", "*"], "--allow-any-origin"),
    (["--allow-websocket-origin", "*:*"], "--allow-any-origin"),
    (["--allow-websocket-origin", "a*"], "websocket origin must look like"),
    (["--allow-websocket-origin", "*example.edu"], "websocket origin must look like"),
    (["--max-sessions", "0"], "sessions must be between 1"),
    (["--max-sessions", "lots"], "sessions must be an integer"),
])
def test_unsafe_or_unknown_origin_patterns_are_refused(args, message):
    r = subprocess.run([CLI, "serve", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and message in errors[0]     # one line (after argparse's usage)


def test_any_origin_only_when_asked_for_and_then_with_a_warning():
    srv = Server("--allow-websocket-origin", "*", "--allow-any-origin",
                 "--allow-websocket-origin", "*.example.edu")
    try:
        assert _ws_status(srv.url, "http://anything.example") == 101
    finally:
        out = srv.stop()
    assert "warning: --allow-any-origin" in out


def test_the_default_cap_is_the_documented_one():
    """The cap and its sizing as docs/deploy.md ("Sizing") and docs/security.md state them."""
    import re
    from pathlib import Path

    from attention_scaling import server
    docs = Path(__file__).resolve().parents[1] / "docs"
    deploy = " ".join((docs / "deploy.md").read_text(encoding="utf-8").split())
    cap = re.search(r"`--max-sessions` \(`ATTENTION_SCALING_MAX_SESSIONS`\), default \*\*(\d+)\*\*",
                    deploy)
    sizing = re.search(r"\((\d+) − (\d+) − (\d+) − (\d+)\) / ([\d.]+) = (\d+),", deploy)
    row = re.search(r"^\| open sessions per process \| (\d+) \(a (\d+) GiB memory limit at "
                    r"([\d.]+) MiB", (docs / "security.md").read_text(encoding="utf-8"), re.M)
    assert cap and sizing and row
    assert server.DEFAULT_MAX_SESSIONS == int(cap[1]) == int(sizing[6]) == int(row[1])
    assert (server.MEMORY_LIMIT_MIB, server.BASE_MIB, server.CACHES_MIB, server.HEADROOM_MIB,
            server.SESSION_MIB) == tuple(map(float, sizing.groups()[:5]))
    assert server.SESSION_MIB == float(row[3]) and server.MEMORY_LIMIT_MIB == 1024 * int(row[2])


@pytest.mark.browser
def test_past_the_cap_visitors_get_a_short_503_and_open_sessions_keep_working(browser, tmp_path):
    cap = 3
    srv = Server("--stats", "--max-sessions", str(cap), log=tmp_path / "server.log")
    contexts = []
    try:
        pages = []
        for _ in range(cap):
            context = browser.new_context()
            contexts.append(context)
            pg = context.new_page()
            pg.goto(srv.url)
            pg.wait_for_selector(".noUi-handle", timeout=30_000)
            pages.append(pg)
        assert stats(srv)["sessions"] == cap
        for _ in range(3):
            code, headers, body = status_of(srv.url)
            assert code == 503
            assert b"The classroom server is full" in body and b"Traceback" not in body
            assert headers["Retry-After"] == "60"
        with pytest.raises(urllib.error.HTTPError) as refused:     # an uptime check's HEAD
            urllib.request.urlopen(urllib.request.Request(srv.url, method="HEAD"), timeout=10)
        assert refused.value.code == 503 and refused.value.headers["Retry-After"] == "60"
        assert stats(srv)["sessions"] == cap
        # a browser past the cap sees the page too
        extra = browser.new_context()
        contexts.append(extra)
        full = extra.new_page()
        full.goto(srv.url)
        assert "The classroom server is full" in full.inner_text("h1")
        weights = f"() => {WEIGHTS_JS}"
        for pg in pages:
            before = pg.evaluate(weights)
            pg.locator(".noUi-handle").first.focus()
            pg.keyboard.press("ArrowRight")
            pg.wait_for_function(f"() => ({weights})() !== {json.dumps(before)}",
                                 timeout=UI_WAIT_MS)
        rss_mib = stats(srv)["rss_kib"] / 1024
        from attention_scaling import server
        assert rss_mib < server.BASE_MIB + server.HEADROOM_MIB + cap * server.SESSION_MIB, rss_mib
    finally:
        for context in contexts:
            context.close()
        out = srv.stop()
    assert out.count("Full:") == 1          # said once, not once per refused visitor
    assert "Traceback" not in out


def test_bounded_log_cuts_a_record_and_holds_back_repeats():
    """The filter on its own: a 60 KB message with a traceback becomes one short line, the
    same kind again within the minute is held back, and the next one after it says so."""
    import logging

    from attention_scaling import server
    bounded = server.BoundedLog()

    def record(text: str, exc=None) -> logging.LogRecord:
        return logging.LogRecord("bokeh.server.protocol_handler", logging.ERROR, __file__, 1,
                                 "error handling message\n message: %r", (text,),
                                 (type(exc), exc, None) if exc else None)

    first = record("x" * 60_000, ValueError("bad\nvalue"))
    assert bounded.filter(first)
    line = logging.Formatter().format(first)
    assert len(line) < server.LOG_RECORD_CHARS + 200 and "\n" not in line
    assert "ValueError: bad" in line and "characters cut" in line
    assert not any(bounded.filter(record("y")) for _ in range(100))
    bounded._last = {k: [v[0] - server.LOG_REPEAT_S, v[1]] for k, v in bounded._last.items()}
    later = record("z")
    assert bounded.filter(later)
    assert "100 more like it" in later.getMessage()


@pytest.mark.browser
@pytest.mark.parametrize("prefix,query", [("", ""), ("", "?embed=1"), ("/course", "")])
def test_the_page_loads_every_resource_without_an_error(page, request, prefix, query):
    """Served, embedded and behind a prefix, with the app's limits and headers: every request
    answered 2xx (or 304), no console error, the charts drawn. (Without a prefix: the
    session's server, started with the same arguments.)"""
    srv = Server(prefix=prefix) if prefix else request.getfixturevalue("server")
    answers = []
    page.on("response", lambda r: answers.append((r.status, r.url)))
    try:
        page.goto(srv.url + query)
        page.wait_for_function(f"() => window.Bokeh && Bokeh.documents.length > 0 "
                               f"&& {WEIGHTS_JS}.length > 0", timeout=30_000)
        wait_still(page)
    finally:
        if prefix:
            srv.stop()
    assert answers and all(200 <= s < 300 or s == 304 for s, _ in answers), answers
    assert not page.console_errors, page.console_errors
    assert not page.failed_requests, page.failed_requests


def test_the_programs_library_is_one_file_kept_for_a_year_and_in_no_session_document(server):
    """The browser programs' library reaches a page as one file named by its content's hash,
    loaded before Bokeh's scripts and kept by the browser (immutable for a year), not in
    each session's document; any other name on its route is a 404."""
    import hashlib
    import re

    from testkit.bokeh_client import models_by_name

    from attention_scaling.style import LIBRARY, library_code
    status, _, body = status_of(server.url)
    page = body.decode()
    found = re.findall(r'<script src="(/as/static/programs-([0-9a-f]{16})\.js)"></script>', page)
    assert status == 200 and len(found) == 1, page[:2000]
    (path, digest), = found
    assert page.index(path) < page.index("bokeh.min.js")
    origin = server.url.rstrip("/")
    status, headers, program = status_of(origin + path)
    assert status == 200 and headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert headers["Content-Type"].startswith("text/javascript")
    assert hashlib.sha256(program).hexdigest()[:16] == digest
    assert library_code() in program.decode()
    assert status_of(origin + "/as/static/programs-0123456789abcdef.js")[0] == 404
    assert status_of(origin + "/as/static/" + "../" * 3 + "etc/passwd")[0] == 404

    async def pulled():
        connection = await Connection.open(server.url)
        try:
            return (await connection.pull()).content["doc"]
        finally:
            connection.close()
    doc = run_in_thread(pulled)
    assert LIBRARY not in models_by_name(doc)
    assert library_code()[:400] not in json.dumps(doc)
    assert "globalThis[Symbol.for('attention-scaling.programs')]" in json.dumps(doc)


def test_a_short_signing_key_is_refused():
    import os
    r = subprocess.run([CLI, "serve"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "ATTENTION_SCALING_SECRET_KEY": "short"})
    assert r.returncode == 2
    assert "ATTENTION_SCALING_SECRET_KEY must be at least 32" in r.stderr
    assert "Traceback" not in r.stderr


# ---- as a minimal client of Bokeh's protocol would ---------------------------------------

def token_of(srv: Server) -> str:
    return page_token(status_of(srv.url)[2].decode())


async def read_message(connection, timeout: float = 10):
    """One whole Bokeh message: (header, content parsed), or None when the connection
    closed."""
    message = await connection.receive(timeout)
    return None if message is None else (message.header, message.content)


async def send(connection, msgtype: str, content: dict, msgid: str = "1", **header) -> None:
    await connection.send(msgtype, content, msgid=msgid, **header)


async def connected(url: str, token: str) -> Connection:
    """A websocket past its ACK."""
    connection = await Connection.connect(url, token)
    answer = await read_message(connection)
    assert answer and answer[0]["msgtype"] == "ACK"
    return connection


async def closed(connection, timeout: float = 5) -> bool:
    """Whether the server closes ``connection`` within ``timeout`` s (whatever it sends
    before)."""
    try:
        while await asyncio.wait_for(connection.ws.read_message(), timeout) is not None:
            pass
        return True
    except asyncio.TimeoutError:
        return False


def rss_mib(srv: Server) -> float:
    return stats(srv)["rss_kib"] / 1024


def test_a_message_promising_a_billion_buffers_is_closed_and_holds_no_memory(tmp_path):
    srv = Server("--stats", log=tmp_path / "server.log")
    try:
        token = token_of(srv)
        before = rss_mib(srv)

        async def flood(num_buffers: int, frames: int):
            ws = await connected(srv.url, token)
            sent = 0
            try:
                await ws.ws.write_message(json.dumps({"msgid": "1", "msgtype": "PATCH-DOC",
                                                      "num_buffers": num_buffers}))
                await ws.ws.write_message("{}")
                await ws.ws.write_message(json.dumps({"events": []}))
                for _ in range(frames):
                    await ws.ws.write_message(json.dumps({"id": "i"}))
                    await ws.ws.write_message(b"\0" * 60 * 1024, binary=True)
                    sent += 1
            except Exception:                 # the server closed the connection
                pass
            shut = await closed(ws)
            return sent, shut, ws.close_code

        sent, shut, code = run_in_thread(lambda: flood(10**9, 300), timeout=120)
        assert shut and code == 1008, (sent, code)
        # within the buffer count, the message as a whole is bounded: 2 x 60 KiB is too much
        sent, shut, code = run_in_thread(lambda: flood(4, 4), timeout=60)
        assert shut and code == 1009, (sent, code)
        assert rss_mib(srv) < before + 64
        assert status_of(srv.url)[0] == 200
    finally:
        out = srv.stop()
    assert "Traceback" not in out
    assert out.count("Closed a websocket") <= 2


@pytest.mark.parametrize("prefix", ["", "/course"])
def test_autoload_and_metadata_are_not_served_and_build_no_session(tmp_path, prefix):
    srv = Server("--stats", "--max-sessions", "3", prefix=prefix, log=tmp_path / "server.log")
    try:
        for _ in range(5):
            code, headers, body = status_of(srv.url + 'autoload.js?bokeh-autoload-element=");alert(1);//')
            assert code == 404 and b"alert(1)" not in body
        assert status_of(srv.url + "metadata")[0] == 404
        assert stats(srv)["sessions"] == 0
        assert status_of(srv.url)[0] == 200
    finally:
        srv.stop()


def test_a_head_request_gets_the_page_s_headers_and_builds_no_session(stats_server):
    """An uptime check that asks with HEAD: 200 and the page's headers, no body, no
    session."""
    srv = stats_server
    sessions = stats(srv)["sessions"]
    for url in (srv.url, srv.url + "?d_k=128"):
        request = urllib.request.Request(url, method="HEAD")
        with urllib.request.urlopen(request, timeout=10) as resp:
            assert resp.status == 200 and resp.read() == b""
            assert resp.headers["Content-Type"].lower() == "text/html; charset=utf-8"
            assert resp.headers["X-Content-Type-Options"] == "nosniff"
            assert resp.headers["Cache-Control"] == "no-store"
    assert stats(srv)["sessions"] == sessions


def test_a_session_id_or_token_in_the_address_is_refused(stats_server):
    srv = stats_server
    sessions = stats(srv)["sessions"]
    for query in ["?bokeh-session-id=abc", "?bokeh-token=abc", "?d_k=64&bokeh-session-id=x"]:
        code, headers, body = status_of(srv.url + query)
        assert code == 403, query
        assert b"reload" not in body and b"<script" not in body
        assert headers["Cache-Control"] == "no-store"
    assert stats(srv)["sessions"] == sessions


def test_one_live_websocket_per_session_and_the_next_student_goes_live(tmp_path):
    """45 websockets on one page's token: a few are let in, each replacing the one before,
    the rest refused before the handshake; a student who arrives after them goes live."""
    srv = Server("--stats", "--max-sessions", "3", log=tmp_path / "server.log")
    try:
        token = token_of(srv)

        async def many():
            from tornado.httpclient import HTTPClientError
            sockets, refused = [], []
            for _ in range(45):
                try:
                    sockets.append(await connected(srv.url, token))
                except HTTPClientError as exc:
                    refused.append(exc.code)
            deadline = time.monotonic() + 10      # the replaced ones close
            while stats(srv)["connections"] > 1 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            open_now = stats(srv)["connections"]
            shut = [await closed(ws, 0.2) for ws in sockets[:-1]]
            for ws in sockets:
                ws.close()
            return len(sockets), set(refused), open_now, all(shut)

        accepted, refused, open_now, older_closed = run_in_thread(many, timeout=120)
        assert accepted == served.OPENS_BURST and refused == {429}
        assert open_now == 1 and older_closed

        async def student():
            ws = await connected(srv.url, token_of(srv))
            await send(ws, "PULL-DOC-REQ", {})
            answer = await read_message(ws)
            ws.close()
            return answer[0]["msgtype"]

        assert run_in_thread(student) == "PULL-DOC-REPLY"
    finally:
        srv.stop()


def test_websockets_per_client_address_are_bounded(tmp_path):
    """Behind a proxy (--use-xheaders) the client's address is the one it forwards."""
    srv = Server("--stats", "--use-xheaders", "--websockets-per-address", "2",
                 log=tmp_path / "server.log")
    try:
        async def scenario():
            from tornado.httpclient import HTTPClientError, HTTPRequest
            from tornado.websocket import websocket_connect

            async def open_from(address: str):
                try:
                    return await websocket_connect(HTTPRequest(
                        srv.url.replace("http://", "ws://") + "ws", request_timeout=10,
                        headers={"Origin": srv.url.rstrip("/"), "X-Real-Ip": address}),
                        subprotocols=["bokeh", token_of(srv)])
                except HTTPClientError as exc:
                    return exc.code

            kept = [await open_from("10.0.0.5"), await open_from("10.0.0.5")]
            third = await open_from("10.0.0.5")
            other = await open_from("10.0.0.6")
            answer = [isinstance(ws, int) for ws in kept], third, isinstance(other, int)
            for ws in kept + [other]:
                if not isinstance(ws, int):
                    ws.close()
            return answer

        assert run_in_thread(scenario, timeout=60) == ([False, False], 429, False)
    finally:
        out = srv.stop()
    assert out.count("with 429") == 1          # said once


def test_an_expired_session_does_not_come_back_past_the_cap(tmp_path):
    srv = Server("--stats", "--max-sessions", "2", "--unused-session-lifetime", "1",
                 log=tmp_path / "server.log")
    try:
        token = token_of(srv)                       # a page whose websocket never came
        deadline = time.monotonic() + 30
        while stats(srv)["sessions"] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert stats(srv)["sessions"] == 0          # expired; its token is still valid

        async def fill_and_return():
            # two students, connected, fill the cap
            students = [await connected(srv.url, token_of(srv)) for _ in range(2)]
            from tornado.httpclient import HTTPClientError
            try:
                back = await Connection.connect(srv.url, token)
                back.close()
                code = 101
            except HTTPClientError as exc:
                code = exc.code
            sessions = stats(srv)["sessions"]
            for ws in students:
                ws.close()
            return code, sessions

        code, sessions = run_in_thread(fill_and_return, timeout=60)
        assert code == 503 and sessions == 2
    finally:
        srv.stop()


def test_document_requests_are_rate_limited_per_session(stats_server):
    srv = stats_server
    token = token_of(srv)

    async def loop_pulls():
        ws = await connected(srv.url, token)
        answers = []
        for i in range(4):
            try:
                await send(ws, "PULL-DOC-REQ", {}, msgid=str(i))
                answer = await read_message(ws)
                while answer and answer[0]["msgtype"] == "PATCH-DOC":   # the page's own
                    answer = await read_message(ws)
            except Exception:
                answer = None
            answers.append(answer and answer[0]["msgtype"])
            if answer is None:
                break
        code = ws.close_code
        # a new websocket of the same session gets no fresh allowance
        again = await connected(srv.url, token)
        try:
            await send(again, "PULL-DOC-REQ", {})
        except tornado.websocket.WebSocketClosedError:     # closed before it could ask
            return answers, code, again.close_code == 1008
        second = await closed(again)
        return answers, code, second

    answers, code, second = run_in_thread(loop_pulls, timeout=60)
    assert answers == ["PULL-DOC-REPLY", "PULL-DOC-REPLY", None] and code == 1008
    assert second


def test_a_flood_of_messages_closes_the_websocket_and_is_not_worked_through(stats_server):
    srv = stats_server
    token = token_of(srv)
    flood = 12 * served.MESSAGES_BURST

    async def send_flood():
        ws = await connected(srv.url, token)
        for i in range(flood):
            try:
                await send(ws, "PATCH-DOC", {"events": [], "references": []}, msgid=str(i))
            except tornado.websocket.WebSocketClosedError:
                break
        answered = 0
        while (answer := await read_message(ws, timeout=60)) is not None:
            answered += answer[0]["msgtype"] == "OK"
        return answered, ws.close_code

    answered, code = run_in_thread(send_flood, timeout=240)
    # closed past the allowance, and what came after the limit was dropped, not answered
    assert code == 1008
    assert served.MESSAGES_BURST <= answered < flood
    assert srv.output().count("too many messages") == 1


def test_the_message_allowance_refills_at_its_rate():
    allowance = served.Allowance(served.MESSAGES_BURST, served.MESSAGE_EVERY_S)
    assert all(allowance.take("a", now=0.0) for _ in range(served.MESSAGES_BURST))
    assert not allowance.take("a", now=0.0)
    assert allowance.take("a", now=served.MESSAGE_EVERY_S)     # one more, one interval later
    assert not allowance.take("a", now=served.MESSAGE_EVERY_S)
    assert allowance.take("b", now=0.0)                         # each session its own


def test_an_error_reply_carries_no_traceback(stats_server):
    srv = stats_server
    logged = len(srv.output())
    token = token_of(srv)

    async def bad_patch():
        ws = await connected(srv.url, token)
        await send(ws, "PATCH-DOC", {"events": [{"kind": "ModelChanged",
                                                 "model": {"id": "nope"}, "attr": "value",
                                                 "new": 1}], "references": []})
        answer = await read_message(ws)
        ws.close()
        return answer

    header, content = run_in_thread(bad_patch)
    assert header["msgtype"] == "ERROR"
    assert content["traceback"] is None
    assert "Traceback" not in json.dumps(content) and ".py" not in json.dumps(content)
    assert "Traceback" not in srv.output()[logged:]     # and the whole log at the end


def test_a_half_sent_request_is_closed_after_the_header_timeout(server):
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    sock.settimeout(served.HEADER_TIMEOUT_S + 10)
    start = time.monotonic()
    try:
        data = sock.recv(1024)
    except OSError:
        data = b""
    waited = time.monotonic() - start
    sock.close()
    assert data == b"" and waited < served.HEADER_TIMEOUT_S + 5, waited


def _children_of(pid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(name))
    return found


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_server_with_workers_stops_on_a_signal_workers_included(signum):
    port = free_port()
    proc = subprocess.Popen([CLI, "serve", "--port", str(port), "--address", "127.0.0.1",
                             "--num-procs", "2"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert wait_until_live(f"http://127.0.0.1:{port}/liveness", proc, 60)
        deadline = time.monotonic() + 30
        while len(_children_of(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        workers = _children_of(proc.pid)
        assert len(workers) == 2
        os.kill(proc.pid, signum)                 # the parent only, as docker stop does
        proc.wait(8)

        def alive():
            found = []
            for w in workers:
                try:
                    if " Z " not in Path(f"/proc/{w}/stat").read_text():
                        found.append(w)
                except OSError:                   # gone
                    pass
            return found
        deadline = time.monotonic() + 0.5        # the parent has waited for them
        while alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alive() == []
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0      # nothing holds the port
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_ctrl_c_in_a_terminal_stops_the_server_and_its_workers_quietly():
    """Ctrl-C in the terminal that runs `attention-scaling serve` (`make serve`): SIGINT to
    the whole process group, the workers included. The server says it stopped, its workers
    leave, and no process prints a traceback or its name."""
    port = free_port()
    proc = subprocess.Popen([CLI, "serve", "--port", str(port), "--address", "127.0.0.1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        assert wait_until_live(f"http://127.0.0.1:{port}/liveness", proc, 60)

        def started(pid: int) -> bool:           # its start ran: its leave-with-parent thread
            try:
                return len(os.listdir(f"/proc/{pid}/task")) >= 2
            except OSError:
                return False
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            workers = [p for p in _children_of(proc.pid)
                       if "spawn_main" in Path(f"/proc/{p}/cmdline").read_text()]
            if len(workers) == work.workers() and all(started(p) for p in workers):
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the pool's workers did not start")

        def cpu() -> list[int]:                  # the workers' CPU ticks so far
            return [sum(map(int, Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1]
                            .split()[11:13])) for p in workers]
        before, still = cpu(), 0                 # then idle on their queue (warmed up)
        while still < 5 and time.monotonic() < deadline:
            time.sleep(0.2)
            now = cpu()
            still, before = (still + 1 if now == before else 0), now
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{w}").exists() for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert "attention-scaling: stopped" in out, out
    for noise in ("Traceback", "KeyboardInterrupt", "Process SpawnProcess", "ERROR"):
        assert noise not in out, out
    assert not any(Path(f"/proc/{w}").exists() for w in workers)


def test_requests_that_never_connect_hold_no_place_in_the_line():
    """8 page requests at once that never open a websocket, one place in the opening line:
    once every one has its page, the line is empty (a sent page holding its place for a
    websocket would put the next student behind the last ones). The next student's page says
    no visitor is before it, and its session goes live (how soon after 30 such requests,
    against the plain Bokeh app, is `make bench`'s row "after 30 page requests that never
    connect": goal 1.5x)."""
    import threading
    srv = Server("--open-at-once", "1")
    try:
        strangers = [threading.Thread(target=status_of, args=(srv.url,), daemon=True)
                     for _ in range(8)]
        for t in strangers:
            t.start()
        for t in strangers:
            t.join(300)
        assert not any(t.is_alive() for t in strangers)
        page = status_of(srv.url)[2].decode()
        assert "Connecting to the server…" in page and "before you" not in page

        async def student():
            ws = await Connection.connect(srv.url, page_token(page))
            assert (await read_message(ws, 120))[0]["msgtype"] == "ACK"
            await send(ws, "PULL-DOC-REQ", {})
            answer = (await read_message(ws, 120))[0]["msgtype"]
            ws.close()
            return answer

        assert run_in_thread(student, timeout=300) == "PULL-DOC-REPLY"
    finally:
        srv.stop()


def test_a_client_that_floods_and_leaves_leaves_no_error_in_the_log(tmp_path):
    """A client opens a session, sends slider changes back to back (each one a redraw) with a
    Train click now and then, and closes without reading the answers; three times. The
    server handles no message of a connection that has closed (Bokeh's session is let go of
    then: handling one failed with AssertionError) and writes nothing to it: the log has no
    such error nor a failed send, and the server keeps answering. Over 20 s: three sessions
    opened on the Training tab, each sent 1,000 changes the server works through until their
    connection closes."""
    from testkit.fairness import click_train, open_session

    srv = Server(log=tmp_path / "server.log")
    try:
        async def flood():
            for round_ in range(3):
                ws, models = await open_session(srv.url, "?tab=training")
                slider = models["d_k"][0]
                for i in range(1000):
                    event = {"kind": "ModelChanged", "model": {"id": slider}, "attr": "value",
                             "new": i % 7}
                    for frame in ({"msgid": f"f{round_}-{i}", "msgtype": "PATCH-DOC"}, {},
                                  {"events": [event]}):
                        ws.ws.write_message(json.dumps(frame))
                    if i % 100 == 0:
                        await click_train(ws, models)
                ws.close()
                await asyncio.sleep(1)

        run_in_thread(flood, timeout=240)
        # the server has read every message of the three (its answers wait on nothing): a new
        # page opens and is answered
        assert status_of(srv.url)[0] == 200
        time.sleep(5)
        log = srv.output()
    finally:
        srv.stop()
    for sign in ("AssertionError", "Uncaught exception", "could not handle",
                 "Failed sending message", "error handling message"):
        assert sign not in log, log[-3000:]
