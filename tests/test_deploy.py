"""Past one machine (docs/deploy.md): Debian's real nginx in front of several
`attention-scaling serve` processes, from the templates in deploy/nginx/, driven by a real
Chromium: the page, its websocket, sticky sessions, TLS. And the Kubernetes manifests in
deploy/k8s/ against the Kubernetes schemas (offline, from the kubernetes-validate package).

nginx comes from `scripts/ensure-nginx` (`make test` runs it); without it those tests skip.
"""

from __future__ import annotations

import copy
import http.client
import json
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlparse

import pytest

from attention_scaling import cli
from conftest import CLI, Server, free_port, wait_column
from conftest import INIT, LIVE, assert_plots_drawn, column, open_app, wait_changed
from testkit.nginx import (HTTP_TEMPLATE, TLS_TEMPLATE, Nginx, nginx_executable, site_config,
                           wait_for_port)

ROOT = Path(__file__).resolve().parents[1]
K8S_DIR = ROOT / "deploy" / "k8s"
DOC = ROOT / "docs" / "deploy.md"

COOKIE = "as_affinity"
# The servers here ping every second; one nginx gives up on a silent websocket after 3 s, so a
# websocket that outlives a few idle seconds there shows the pings keep it open through nginx.
TEST_KEEP_ALIVE_S = 1
TEST_READ_TIMEOUT_S = 3
N_BACKENDS = 3
# Sizing (docs/deploy.md, docs/benchmarks.md): memory per session and of the bare process.
MIB_PER_SESSION = 2
BASE_MIB = 100
STUDENTS_PER_POD = 300
# Requests of one page load at most (nginx's log): the page, its scripts and styles (the
# programs' library among them), the websocket.
REQUESTS_PER_PAGE_LOAD = 12


NO_NGINX = ("nginx is not installed: run scripts/ensure-nginx (as root it installs Debian's "
            "nginx-light with apt-get; `make test` runs it), or apt-get install nginx-light")


# ---------------------------------------------------------------------------------------------
# The templates as text: what every deployment needs, whatever nginx does with it.

def directive_values(text: str, name: str) -> list[str]:
    return re.findall(rf"^\s*{name}\s+([^;]*);", text, re.M)


WS_LOCATION = r"location ~ /ws\$ \{[^}]*\}"


def ws_location(text: str) -> str:
    (block,) = re.findall(WS_LOCATION, text)
    return block


@pytest.mark.parametrize("template", [HTTP_TEMPLATE, TLS_TEMPLATE], ids=["http", "tls"])
def test_nginx_template_has_affinity_websocket_headers_and_timeouts(template):
    text = template.read_text()
    assert directive_values(text, "hash") == ["$as_affinity consistent"]
    assert "ip_hash" not in re.sub(r"#.*", "", text)
    assert directive_values(text, "proxy_http_version") == ["1.1"]
    headers = dict(v.split(None, 1) for v in directive_values(text, "proxy_set_header"))
    assert headers["Upgrade"] == "$http_upgrade"
    assert headers["Connection"] == "$as_connection_upgrade"
    for name in ("X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "Host"):
        assert name in headers
    assert directive_values(text, "proxy_buffering") == ["off"]
    # the websocket is silent between moves except for the server's pings
    (read_timeout,) = directive_values(ws_location(text), "proxy_read_timeout")
    assert int(read_timeout.rstrip("s")) >= 3 * cli.DEFAULT_KEEP_ALIVE_S
    (set_cookie,) = directive_values(text, "add_header Set-Cookie")
    assert set_cookie == "$as_affinity_set_cookie always"
    cookie = re.search(r'""\s+"(as_affinity=\$request_id;[^"]*)"', text).group(1)
    assert "HttpOnly" in cookie and "Path=/" in cookie
    if template == TLS_TEMPLATE:                 # kept and sent inside another site's iframe
        assert {"Secure", "SameSite=None", "Partitioned"} <= set(cookie.split("; "))
    else:                                        # SameSite=None needs Secure, so https only
        assert "SameSite=Lax" in cookie and "Secure" not in cookie


SECURITY_HEADERS = ("X-Content-Type-Options", "Referrer-Policy", "Content-Security-Policy")


def limit_sizes(text: str) -> tuple[float, int, int]:
    """(requests per second, burst, websockets) per client address, from a template."""
    (zone,) = directive_values(text, "limit_req_zone")
    rate = re.fullmatch(r"\$as_limit_key zone=attention_scaling_req:\d+m rate=(\d+)r/s", zone)
    (limit_req,) = directive_values(text, "limit_req")
    burst = re.fullmatch(r"zone=attention_scaling_req burst=(\d+) nodelay", limit_req)
    (limit_conn,) = directive_values(ws_location(text), "limit_conn")
    conns = re.fullmatch(r"attention_scaling_conn (\d+)", limit_conn)
    assert rate and burst and conns, (zone, limit_req, limit_conn)
    return float(rate.group(1)), int(burst.group(1)), int(conns.group(1))


@pytest.mark.parametrize("template", [HTTP_TEMPLATE, TLS_TEMPLATE], ids=["http", "tls"])
def test_nginx_template_limits_per_address_and_hides_its_version(template):
    text = template.read_text()
    code = re.sub(r"#.*", "", text)
    # every server block, the https redirect's too, hides nginx's version
    assert code.count("server_tokens off;") == code.count("server {") >= 1
    # per address, sized for a class behind one NAT address: every student's page and
    # websocket at once within the burst, and as many open websockets
    assert directive_values(text, "limit_conn_zone") == [
        "$binary_remote_addr zone=attention_scaling_conn:10m"]
    rate, burst, conns = limit_sizes(text)
    assert burst >= 2 * STUDENTS_PER_POD and conns >= STUDENTS_PER_POD and rate >= 1
    assert re.search(r"map \$uri \$as_limit_key \{\s*~/static/\s+\"\";\s*"
                     r"default\s+\$binary_remote_addr;", code)
    assert directive_values(text, "limit_req_status") == ["429"]
    assert directive_values(text, "limit_conn_status") == ["429"]
    assert directive_values(text, "error_page") == ["429 @as_too_many"]
    assert re.search(r"location @as_too_many \{[^}]*return 429 \"[^\"]+\";", code)
    # the app's security headers are neither set again nor hidden here
    for header in SECURITY_HEADERS:
        assert header.lower() not in code.lower(), header
    assert "proxy_hide_header" not in code
    # /stats (also PREFIX/stats) and /components/ (also PREFIX/components/)
    assert re.search(r"location ~ /stats/\?\$ \{\s*allow 127\.0\.0\.1;\s*allow ::1;\s*deny all;",
                     code)
    assert re.search(r"location ~ /components/ \{\s*return 404;\s*\}", code)

# ---------------------------------------------------------------------------------------------
# Running the templates: backends, nginx (testkit.nginx), and a config made from a template.

@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    """Three `serve --stats` backends behind nginx made from deploy/nginx/attention-scaling.conf.
    The backends allow the origins of every nginx of this module; nothing they hold expires."""
    if not nginx_executable():
        pytest.skip(NO_NGINX)
    ports = {"http": free_port(), "tls": free_port(), "tls_redirect": free_port(),
             "split": free_port(), "idle": free_port()}
    origins = [arg for name in ("http", "tls", "split", "idle")
               for arg in ("--allow-websocket-origin", f"127.0.0.1:{ports[name]}")]
    extra = ("--stats", *origins, "--keep-alive", str(TEST_KEEP_ALIVE_S),
             "--unused-session-lifetime", "3600")
    # one signing key for all backends, so a websocket that reaches another backend than
    # its page is accepted there (test_without_the_cookie_key_a_tab_costs_two_sessions)
    env = {"ATTENTION_SCALING_SECRET_KEY": "k" * 40}
    with ThreadPoolExecutor(N_BACKENDS) as pool:
        started = [pool.submit(Server, *extra, env=env) for _ in range(N_BACKENDS)]
    backends = [f.result() for f in started if f.exception() is None]
    try:
        for future in started:
            future.result()                     # the first failure to start, if any
        site = site_config(HTTP_TEMPLATE, [b.port for b in backends], ports["http"])
        proxy = Nginx(tmp_path_factory.mktemp("nginx"), site, ports["http"])
    except BaseException:
        for b in backends:
            b.stop()
        raise
    proxy.backends = backends
    proxy.ports = ports
    yield proxy
    proxy.stop()
    for b in backends:
        b.stop()


def stats(backend) -> dict:
    with urllib.request.urlopen(backend.url + "stats", timeout=10) as r:
        return json.load(r)


def all_stats(backends) -> dict[str, dict]:
    return {f"127.0.0.1:{b.port}": stats(b) for b in backends}


def routes_of(proxy: Nginx, key: str, closed: bool = False) -> dict:
    """Where nginx sent every request of one browser (one affinity key). nginx logs the
    websocket's upgrade request when the websocket closes: with `closed`, wait for that line."""
    deadline = time.monotonic() + (10 if closed else 0)
    while True:
        rows = [r for r in proxy.access_log() if r["key"] == key]
        page = [r["upstream"] for r in rows if r["method"] == "GET" and r["uri"] == "/"]
        ws = [r["upstream"] for r in rows if r["uri"] == "/ws"]
        ws_status = [r["status"] for r in rows if r["uri"] == "/ws"]
        if ws or time.monotonic() > deadline:
            return {"all": {r["upstream"] for r in rows}, "page": page, "ws": ws,
                    "ws_status": ws_status}
        time.sleep(0.2)


def sessions_delta(before: dict, after: dict) -> dict[str, tuple[int, int]]:
    """Per backend: (sessions opened, websockets opened) between two all_stats()."""
    return {b: (after[b]["sessions"] - before[b]["sessions"],
                after[b]["connections"] - before[b]["connections"]) for b in before}


def open_tab(browser, url: str, *, backends=None, embed: bool = False, **context_args):
    """A fresh browser (context: no cookie) with the app loaded from `url`, or, with `embed`,
    loaded in an iframe of an opaque about:blank page (another site). With `backends`, also the
    (sessions, websockets) each of them gained meanwhile. A load that Chromium aborts because
    the machine's network interfaces changed (ERR_NETWORK_CHANGED, e.g. Docker starting a
    container) has nothing to do with what is tested: it is tried again."""
    from playwright.sync_api import Error as PlaywrightError
    for attempt in range(3):
        before = all_stats(backends) if backends else None
        context = browser.new_context(viewport={"width": 1440, "height": 1200}, **context_args)
        page = context.new_page()
        page.console_errors, page.requests, page.websockets, page.failures = [], [], [], []
        page.on("websocket", lambda ws: page.websockets.append(ws.url))
        page.on("console", lambda m: m.type == "error" and page.console_errors.append(m.text))
        page.on("pageerror", lambda e: page.console_errors.append(str(e)))
        page.on("request", lambda r: page.requests.append(r.url))
        page.on("requestfailed", lambda r: page.failures.append(r.failure or ""))
        try:
            if embed:
                context.add_init_script(INIT)
                page.set_content(f'<iframe src="{url}" width="1200" height="900"></iframe>')
                frame = page.wait_for_selector("iframe").content_frame()
                frame.wait_for_function(LIVE, timeout=30_000)
            else:
                open_app(page, type("Target", (), {"url": url}))
        except PlaywrightError:
            context.close()
            if attempt < 2 and any("ERR_NETWORK_CHANGED" in f for f in page.failures):
                time.sleep(1)                   # let the closed tab's websocket go
                continue
            raise
        delta = sessions_delta(before, all_stats(backends)) if backends else None
        return context, page, delta
    raise AssertionError("unreachable")


def affinity_cookie(context) -> dict:
    (cookie,) = [c for c in context.cookies() if c["name"] == COOKIE]
    return cookie


def move_slider(page) -> None:
    before = column(page, "unscaled-weights-source", "weight")
    page.locator(".noUi-handle").first.focus()
    page.keyboard.press("ArrowRight")
    wait_changed(page, "unscaled-weights-source", "weight", before)


@pytest.mark.browser
def test_the_page_works_through_nginx_with_its_websocket(deployment, browser):
    """The page, its cookie and a change over the websocket, through nginx. Over 20 s on a
    loaded machine: its time in the report holds the module's deployment, three backends and
    nginx started, then a page opened through it."""
    context, page, _ = open_tab(browser, deployment.url)
    try:
        assert "√dₖ" in page.title()
        assert_plots_drawn(page)
        cookie = affinity_cookie(context)
        assert re.fullmatch(r"[0-9a-f]{32}", cookie["value"]) and cookie["httpOnly"]
        move_slider(page)                                   # 64 -> 80, over the websocket
        wait_column(page, "jacobian-diagonal-marker", "width", ["80"])
        before = column(page, "jacobian-source", "value")
        page.get_by_role("button", name="unscaled", exact=True).click()
        wait_changed(page, "jacobian-source", "value", before)
        foreign = [u for u in page.requests if not u.startswith(("data:", "blob:"))
                   and urlparse(u).netloc != deployment.host]
        assert foreign == []
        assert page.console_errors == []
        assert page.websockets == [f"ws://{deployment.host}/ws"]
        # the server sends its scripts uncompressed; nginx gzips them
        (script,) = [u for u in page.requests if "/static/js/bokeh.min.js" in u]
        request = urllib.request.Request(script, headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(request, timeout=10) as r:
            assert r.headers["Content-Encoding"] == "gzip"
    finally:
        context.close()
    route = routes_of(deployment, cookie["value"], closed=True)
    assert len(route["page"]) == 1 and route["ws"] == route["page"], route
    assert route["ws_status"] == [101] and route["all"] == set(route["page"]), route
    # what the per-address limits are sized by: the requests of one page load, and of those
    # the ones the templates count (all but those with /static/ in their path, the
    # templates' `~/static/`): the page and its websocket
    rows = [r for r in deployment.access_log() if r["key"] == cookie["value"]]
    assert len(rows) <= REQUESTS_PER_PAGE_LOAD, rows
    assert sorted(r["uri"] for r in rows if "/static/" not in r["uri"]) == ["/", "/ws"]


def test_stats_through_nginx_only_from_the_machine_itself(deployment):
    def get(path: str, source: str) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", deployment.port, timeout=10,
                                          source_address=(source, 0))
        try:
            conn.request("GET", path)
            return conn.getresponse().status
        finally:
            conn.close()
    assert get("/stats", "127.0.0.1") == 200
    assert get("/stats", "127.0.0.2") == 403      # another address (loopback's whole /8)
    assert get("/liveness", "127.0.0.2") == 200


def test_nginx_closes_a_silent_websocket_after_its_read_timeout(deployment, tmp_path):
    """The control for the next test: a backend that upgrades and then sends nothing is cut
    off by nginx after the websocket location's proxy_read_timeout."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(20)

    def silent_backend():
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(20)
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(4096)
            conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                         b"Connection: Upgrade\r\n\r\n")
            try:
                while conn.recv(4096):
                    pass
            except OSError:
                pass

    thread = threading.Thread(target=silent_backend, daemon=True)
    thread.start()
    port = free_port()
    site = site_config(HTTP_TEMPLATE, [listener.getsockname()[1]], port,
                       ws_read_timeout=TEST_READ_TIMEOUT_S)
    proxy = Nginx(tmp_path / "nginx", site, port)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=20) as client:
            client.sendall(b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                           b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                           b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
            head = client.recv(4096)
            assert head.startswith(b"HTTP/1.1 101"), head
            t0 = time.monotonic()
            while client.recv(4096):
                pass
            waited = time.monotonic() - t0
        assert TEST_READ_TIMEOUT_S - 0.5 < waited < TEST_READ_TIMEOUT_S + 5, waited
    finally:
        proxy.stop()
        listener.close()
        thread.join(5)


# ---------------------------------------------------------------------------------------------
# Limits and guards, against a stub backend: it answers every request at once (200, the path
# as its body, the security headers the app sets), upgrades a websocket request and holds it
# open, and records what reached it. nginx is the template, only the ports replaced.

STUB_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": "frame-ancestors 'self' https://course.example",
}


class StubBackend:
    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        self.paths: list[str] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                stub.paths.append(self.path)
                if self.headers.get("Upgrade", "").lower() == "websocket":
                    self.send_response(101)
                    self.send_header("Upgrade", "websocket")
                    self.send_header("Connection", "Upgrade")
                    self.end_headers()
                    self.wfile.flush()
                    try:
                        while self.rfile.read1(4096):   # until nginx closes it
                            pass
                    except OSError:
                        pass
                    self.close_connection = True
                    return
                body = self.path.encode()
                self.send_response(200)
                self.send_header("Server", "stub/9.9")
                for name, value in STUB_HEADERS.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture(scope="module")
def stub_backend():
    stub = StubBackend()
    yield stub
    stub.stop()


@pytest.fixture(scope="module")
def stub_proxy(stub_backend, tmp_path_factory):
    """nginx from attention-scaling.conf in front of the stub backend."""
    if not nginx_executable():
        pytest.skip(NO_NGINX)
    port = free_port()
    proxy = Nginx(tmp_path_factory.mktemp("nginx-stub"),
                  site_config(HTTP_TEMPLATE, [stub_backend.port], port), port)
    yield proxy
    proxy.stop()


def get(port: int, path: str, source: str = "127.0.0.1", headers: dict | None = None,
        timeout: float = 10) -> tuple[int, dict, bytes]:
    """One GET on a new connection from `source` (any 127.x.y.z: loopback is a /8): the
    status, the headers (name -> list of values) and the body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout,
                                      source_address=(source, 0))
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        received: dict[str, list[str]] = {}
        for name, value in response.getheaders():
            received.setdefault(name.lower(), []).append(value)
        return response.status, received, response.read()
    finally:
        conn.close()


def test_nginx_hides_its_version_and_passes_the_apps_security_headers(stub_proxy, stub_backend):
    status, headers, body = get(stub_proxy.port, "/?d_k=128")
    assert status == 200 and body == b"/?d_k=128"
    assert headers["server"] == ["nginx"]                  # no version; the backend's is not sent
    for name, value in STUB_HEADERS.items():
        assert headers[name.lower()] == [value], name     # once, as the backend set it
    # nginx's own answers carry no version either
    status, headers, body = get(stub_proxy.port, "/components/x/y")
    assert status == 404 and headers["server"] == ["nginx"]
    assert b"nginx/" not in body and b"<center>nginx</center>" in body


@pytest.mark.parametrize("prefix", ["", "/explorer"])
def test_stats_refused_to_other_addresses_also_under_a_prefix(stub_backend, tmp_path, prefix):
    """The regex location guards /stats wherever it sits: with the template as it is, and with
    `location /` moved under a prefix as docs/deploy.md says. 127.0.0.2 (loopback, but not the
    127.0.0.1 the template allows) stands for a client on another machine: nginx judges it by
    the connection's source address like any other."""
    if not nginx_executable():
        pytest.skip(NO_NGINX)
    port = free_port()
    proxy = Nginx(tmp_path / "nginx",
                  site_config(HTTP_TEMPLATE, [stub_backend.port], port, prefix=prefix or None),
                  port)
    try:
        paths = [f"{prefix}/stats", f"{prefix}/stats/", f"{prefix}/stats?x=1",
                 f"{prefix}//stats", f"{prefix}/st%61ts", "/a/b/stats"]
        for path in paths:
            stub_backend.paths.clear()
            assert get(port, path, source="127.0.0.2")[0] == 403, path
            assert stub_backend.paths == [], path          # never reached the backend
            status, _, body = get(port, path, source="127.0.0.1")
            assert status == 200 and len(stub_backend.paths) == 1, path   # passed on
        assert get(port, f"{prefix}/liveness", source="127.0.0.2")[0] == 200
    finally:
        proxy.stop()


def test_the_servers_own_headers_pass_through_nginx_unchanged(deployment):
    """The page's security headers through nginx are exactly the backend's own (whatever the
    server sets: the template neither adds nor hides any); the Server header names no version."""
    via_nginx = get(deployment.port, "/")
    key = re.match(rf"{COOKIE}=([0-9a-f]+);", via_nginx[1]["set-cookie"][0]).group(1)
    deadline = time.monotonic() + 5
    while not (served := routes_of(deployment, key)["page"]) and time.monotonic() < deadline:
        time.sleep(0.1)                          # nginx logs the request once it is done
    (backend,) = [b for b in deployment.backends if served == [f"127.0.0.1:{b.port}"]]
    # asked for as the browser asks nginx: a backend answers only for the allowed hosts
    direct = get(backend.port, "/", headers={"Host": f"127.0.0.1:{deployment.port}"})
    assert via_nginx[0] == direct[0] == 200
    for name in SECURITY_HEADERS:
        assert via_nginx[1].get(name.lower()) == direct[1].get(name.lower()), name
    assert via_nginx[1]["server"] == ["nginx"]

def test_components_route_answered_404_by_nginx(stub_proxy, stub_backend):
    stub_backend.paths.clear()
    for path in ("/components/this/x/__css__/y", "/explorer/components/this/x/__css__/y",
                 "/components/", "/compo%6eents/x"):
        status, _, body = get(stub_proxy.port, path)
        assert status == 404 and b"<title>404 Not Found</title>" in body, path
    assert stub_backend.paths == []
    assert get(stub_proxy.port, "/static/js/bokeh.min.js")[0] == 200   # the rest still passes


def test_one_address_over_its_burst_gets_429(stub_proxy, stub_backend):
    """A class behind one address: every student's page and websocket request at once pass.
    The same address going on gets 429 with one line of text; its scripts and styles are not
    counted, and other addresses are not affected. Bounded: at most 3 x burst requests and 60 s
    (nginx refills 10 per second; a request here takes ~1 ms, so the 429 comes right after the
    burst unless a request takes ~70 ms or more)."""
    rate, burst, _ = limit_sizes(HTTP_TEMPLATE.read_text())
    port, source = stub_proxy.port, "127.0.0.3"
    statuses = []
    t0 = time.monotonic()
    for i in range(STUDENTS_PER_POD):          # a class arriving: the page and its websocket
        statuses.append(get(port, f"/?student={i}", source)[0])
        statuses.append(get(port, "/ws", source)[0])
    assert statuses == [200] * 2 * STUDENTS_PER_POD
    body = headers = None
    while time.monotonic() - t0 < 60 and len(statuses) < 3 * burst:
        status, headers, body = get(port, "/", source)
        statuses.append(status)
        if status == 429:
            break
    elapsed = time.monotonic() - t0
    assert statuses[-1] == 429, f"no 429 after {len(statuses)} requests in {elapsed:.1f} s"
    passed = statuses.count(200)
    # nodelay: the burst, plus the first request, plus what refilled meanwhile
    assert burst <= passed <= burst + 1 + rate * elapsed + 1, (passed, elapsed)
    assert body == b"Too many requests from your address; please try again in a minute.\n"
    assert headers["content-type"] == ["text/plain"] and headers["server"] == ["nginx"]
    assert get(port, "/static/js/bokeh.min.js", source)[0] == 200      # not counted
    assert get(port, "/", "127.0.0.4")[0] == 200                      # another address


def upgrade(port: int, source: str, path: str = "/ws") -> tuple[socket.socket, bytes]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                 "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            break
        head += chunk
    return sock, head


def test_open_websockets_per_address_are_limited(stub_backend, tmp_path):
    """limit_conn on the websocket location, its number cut to 2 here: a third open websocket
    from one address gets 429, another address still gets its own, and once one closes the
    same address gets one again."""
    if not nginx_executable():
        pytest.skip(NO_NGINX)
    port = free_port()
    proxy = Nginx(tmp_path / "nginx",
                  site_config(HTTP_TEMPLATE, [stub_backend.port], port, ws_conn_limit=2), port)
    socks = []
    try:
        for _ in range(2):
            sock, head = upgrade(port, "127.0.0.5")
            socks.append(sock)
            assert head.startswith(b"HTTP/1.1 101"), head
        sock, head = upgrade(port, "127.0.0.5")
        socks.append(sock)
        assert head.startswith(b"HTTP/1.1 429"), head
        while b"Too many requests from your address" not in head and (chunk := sock.recv(4096)):
            head += chunk                        # the one-line body, if not read yet
        assert b"Too many requests from your address" in head, head
        sock, head = upgrade(port, "127.0.0.6")
        socks.append(sock)
        assert head.startswith(b"HTTP/1.1 101"), head
        socks.pop(0).close()
        deadline = time.monotonic() + 10
        while True:                              # nginx sees the close within moments
            sock, head = upgrade(port, "127.0.0.5")
            socks.append(sock)
            if head.startswith(b"HTTP/1.1 101") or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert head.startswith(b"HTTP/1.1 101"), head
    finally:
        for sock in socks:
            sock.close()
        proxy.stop()

@pytest.mark.browser
def test_the_servers_pings_keep_an_idle_websocket_open_through_nginx(deployment, browser,
                                                                     tmp_path):
    """The same short read timeout in front of the real servers (pinging every second): a
    page left idle for longer still gets its changes over the same websocket."""
    port = deployment.ports["idle"]
    site = site_config(HTTP_TEMPLATE, [b.port for b in deployment.backends], port,
                       ws_read_timeout=TEST_READ_TIMEOUT_S)
    proxy = Nginx(tmp_path / "nginx", site, port)
    try:
        context, page, _ = open_tab(browser, proxy.url)
        try:
            page.wait_for_timeout((TEST_READ_TIMEOUT_S + 2) * 1000)
            move_slider(page)
            # never reconnected (the address's query, if the page had rewritten it first)
            assert [w.split("?")[0] for w in page.websockets] == [f"ws://{proxy.host}/ws"]
            assert page.console_errors == []
        finally:
            context.close()
    finally:
        proxy.stop()


def wait_for_no_websockets(backends, seconds: float = 15) -> None:
    """Until the websockets of earlier tests' closed tabs are gone from /stats."""
    deadline = time.monotonic() + seconds
    while sum(s["connections"] for s in all_stats(backends).values()) and \
            time.monotonic() < deadline:
        time.sleep(0.2)


@pytest.mark.browser
def test_each_browser_keeps_its_page_and_websocket_on_one_backend(deployment, browser):
    """Fresh browsers (no cookie) spread over the backends, and each one's page and websocket
    reach the same backend: the backend that served the page (nginx's log) is the one whose
    /stats, asked directly, counts one more session AND one more open websocket. Had the
    websocket gone elsewhere, that other backend would count a session of its own (Bokeh opens
    one for an unknown id) and the page's would keep one with no websocket."""
    backends = deployment.backends
    wait_for_no_websockets(backends)
    tabs = []                                   # (context, page, key, backend "ip:port")
    try:
        while len(tabs) < 10 and (len(tabs) < 4 or len({t[3] for t in tabs}) < 2):
            context, page, delta = open_tab(browser, deployment.url, backends=backends)
            key = affinity_cookie(context)["value"]
            tabs.append((context, page, key, None))
            (served,) = routes_of(deployment, key)["page"]
            assert delta == {b: (1, 1) if b == served else (0, 0) for b in delta}, (served, delta)
            tabs[-1] = (context, page, key, served)
        used = {t[3] for t in tabs}
        assert len(used) >= 2, f"{len(tabs)} fresh browsers all landed on {used}"
        # every page still talks to its own session, and /stats through nginx with a
        # browser's cookie comes from the process that served its page
        pids = {b: s["pid"] for b, s in all_stats(backends).items()}
        for context, page, _, backend in tabs:
            move_slider(page)
            assert context.request.get(deployment.url + "stats").json()["pid"] == pids[backend]
        assert sum(s["connections"] for s in all_stats(backends).values()) >= len(tabs)
    finally:
        for context, *_ in tabs:
            context.close()
    # nginx's log, once the websockets closed: every request of a browser went to one backend
    for _, _, key, backend in tabs:
        route = routes_of(deployment, key, closed=True)
        assert route["page"] == route["ws"] == [backend] and route["all"] == {backend}, route
        assert route["ws_status"] == [101], route


@pytest.mark.browser
def test_without_the_cookie_key_a_tab_costs_two_sessions(deployment, browser, tmp_path):
    """What stickiness prevents: hashing each request on its own ($request_id, what a proxy
    without affinity amounts to) sends the websocket to another process than the page. The page
    still works (Bokeh builds a second session there for the unknown id), but the first session
    stays behind connected to nothing: twice the CPU (~1.2 s) and memory for every tab."""
    port = deployment.ports["split"]
    site = site_config(HTTP_TEMPLATE, [b.port for b in deployment.backends], port,
                       affinity="hash $request_id;")
    proxy = Nginx(tmp_path / "nginx", site, port)
    tabs = []
    wait_for_no_websockets(deployment.backends)
    try:
        for _ in range(10):                     # each try splits with probability 2/3
            context, page, delta = open_tab(browser, proxy.url, backends=deployment.backends)
            tabs.append(context)
            if sorted(delta.values()) != [(0, 0), (0, 0), (1, 1)]:
                break
        else:
            pytest.fail("10 tabs and never a websocket on another backend than its page")
        key = affinity_cookie(context)["value"]
        move_slider(page)                       # it works, on the second session
        for context in tabs:
            context.close()
        route = routes_of(proxy, key, closed=True)
    finally:
        for context in tabs:
            context.close()
        proxy.stop()
    (page_backend,), (ws_backend,) = route["page"], route["ws"]
    assert page_backend != ws_backend, route
    assert delta[page_backend] == (1, 0), delta           # the orphan, built for nothing
    assert delta[ws_backend] == (1, 1), delta             # the one the page really uses


@pytest.mark.browser
def test_https_template_with_a_certificate(deployment, browser, tmp_path):
    """attention-scaling-tls.conf with a throw-away certificate: the page over https, its
    websocket over wss through nginx, a Secure cookie, and port 80 redirecting to https. Then
    the page embedded in an iframe of another site (an opaque about:blank page): the cookie is
    kept there too (SameSite=None; Partitioned), so the page and its websocket still share a
    backend. With the http template's SameSite=Lax cookie they do not (the cookie is dropped)."""
    openssl = shutil.which("openssl")
    if not openssl:
        pytest.skip("openssl is not installed: needed to make a throw-away certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    ports = deployment.ports
    site = site_config(TLS_TEMPLATE, [b.port for b in deployment.backends],
                       ports["tls_redirect"], tls_listen=ports["tls"], cert=(cert, key))
    proxy = Nginx(tmp_path / "nginx", site, ports["tls"], scheme="https")
    try:
        assert wait_for_port(ports["tls_redirect"], proxy.proc)
        conn = http.client.HTTPConnection("127.0.0.1", ports["tls_redirect"], timeout=10)
        conn.request("GET", "/some/page?x=1")
        response = conn.getresponse()
        assert response.status == 301
        assert response.getheader("Location") == "https://127.0.0.1/some/page?x=1"
        conn.close()
        context, page, _ = open_tab(browser, proxy.url, ignore_https_errors=True)
        try:
            cookie = affinity_cookie(context)
            assert cookie["secure"] and cookie["httpOnly"]
            move_slider(page)
            assert page.evaluate("() => location.protocol") == "https:"
            assert page.websockets == [f"wss://{proxy.host}/ws"]
            insecure = [u for u in page.requests if u.startswith("http:")]
            assert insecure == []
            assert page.console_errors == []
        finally:
            context.close()
        route = routes_of(proxy, cookie["value"], closed=True)
        assert route["ws"] == route["page"] and len(route["ws"]) == 1, route
        assert route["ws_status"] == [101], route

        wait_for_no_websockets(deployment.backends)
        context, _, delta = open_tab(browser, proxy.url + "?embed=1", embed=True,
                                     backends=deployment.backends, ignore_https_errors=True)
        try:
            key = affinity_cookie(context)["value"]
        finally:
            context.close()
        assert sorted(delta.values()) == [(0, 0)] * (N_BACKENDS - 1) + [(1, 1)], delta
        route = routes_of(proxy, key, closed=True)
        assert route["ws"] == route["page"] and len(route["ws"]) == 1, route
    finally:
        proxy.stop()


# ---------------------------------------------------------------------------------------------
# Kubernetes: the manifests against the schemas, and against each other.

def load_manifests() -> list[dict]:
    yaml = pytest.importorskip("yaml")
    docs = []
    for path in sorted(K8S_DIR.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def by_kind(docs: list[dict]) -> dict[str, dict]:
    """Each kind's object named attention-scaling (the second Ingress has another name)."""
    kinds = {}
    for d in docs:
        if d["metadata"]["name"] == "attention-scaling":
            assert d["kind"] not in kinds, f"two {d['kind']}s"
            kinds[d["kind"]] = d
    return kinds


def k8s_versions() -> list[str]:
    try:
        from kubernetes_validate import utils
    except ImportError:
        return ["missing"]
    # the oldest version still common in clusters, and the newest the package knows
    return ["1.30", ".".join(utils.latest_version().split(".")[:2])]


def k8s_validate(doc: dict, version: str) -> None:
    kv = pytest.importorskip("kubernetes_validate.utils",
                             reason="kubernetes-validate is not installed (test extra)")
    kv.validate(doc, version, strict=True)


@pytest.mark.parametrize("version", k8s_versions())
def test_manifests_validate_against_the_kubernetes_schemas(version):
    docs = load_manifests()
    assert sorted(d["kind"] for d in docs) == [
        "Deployment", "Ingress", "Ingress", "PodDisruptionBudget", "Service"]
    for doc in docs:
        k8s_validate(doc, version)


def _typo_in_a_field_name(kinds):
    container = kinds["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    container["livenesProbe"] = container.pop("livenessProbe")
    return kinds["Deployment"]


def _port_as_a_string(kinds):
    kinds["Deployment"]["spec"]["template"]["spec"]["containers"][0]["ports"][0][
        "containerPort"] = "5006"
    return kinds["Deployment"]


def _old_ingress_backend(kinds):
    path = kinds["Ingress"]["spec"]["rules"][0]["http"]["paths"][0]
    path["backend"] = {"serviceName": "attention-scaling", "servicePort": 80}
    return kinds["Ingress"]


def _container_without_a_name(kinds):
    del kinds["Deployment"]["spec"]["template"]["spec"]["containers"][0]["name"]
    return kinds["Deployment"]


@pytest.mark.parametrize("breakage", [_typo_in_a_field_name, _port_as_a_string,
                                      _old_ingress_backend, _container_without_a_name])
def test_the_schema_check_rejects_a_broken_manifest(breakage):
    kv = pytest.importorskip("kubernetes_validate.utils",
                             reason="kubernetes-validate is not installed (test extra)")
    broken = breakage(by_kind(copy.deepcopy(load_manifests())))
    with pytest.raises(kv.ValidationError):
        kv.validate(broken, k8s_versions()[-1], strict=True)


def quantity(text: str | int) -> float:
    """A Kubernetes quantity in base units (bytes, cores)."""
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9}
    match = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(text))
    assert match, text
    return float(match.group(1)) * units.get(match.group(2), 1) if match.group(2) else \
        float(match.group(1))


def test_manifests_fit_together_and_fit_the_app():
    kinds = by_kind(load_manifests())
    deployment, service, ingress, pdb = (kinds[k] for k in (
        "Deployment", "Service", "Ingress", "PodDisruptionBudget"))
    pod = deployment["spec"]["template"]
    labels = pod["metadata"]["labels"]
    for selector in (deployment["spec"]["selector"]["matchLabels"], service["spec"]["selector"],
                     pdb["spec"]["selector"]["matchLabels"]):
        assert selector.items() <= labels.items()
    (container,) = pod["spec"]["containers"]
    (port,) = container["ports"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert set(env) <= set(cli.ENVIRONMENT.values())
    assert int(env["ATTENTION_SCALING_PORT"]) == port["containerPort"] == cli.DEFAULT_PORT
    assert env["ATTENTION_SCALING_ADDRESS"] == "0.0.0.0"
    assert env["ATTENTION_SCALING_WORKERS"] == "1"   # several would split page and websocket
    hosts = [rule["host"] for rule in ingress["spec"]["rules"]]
    assert env["ATTENTION_SCALING_ALLOWED_ORIGINS"].split(",") == hosts
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert (get["path"], get["port"]) == ("/liveness", port["name"])
    assert container["livenessProbe"]["timeoutSeconds"] * container["livenessProbe"][
        "failureThreshold"] >= 30, "a busy server must not be restarted (its sessions die)"
    # the image: uid 10001, read-only root, /tmp writable
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["runAsNonRoot"] is True and security["runAsUser"] == 10001
    assert security["capabilities"]["drop"] == ["ALL"]
    (mount,) = container["volumeMounts"]
    assert mount["mountPath"] == "/tmp"
    assert {"name": mount["name"], "emptyDir": {"sizeLimit": "64Mi"}} in pod["spec"]["volumes"]
    # sizing: the pod's memory limit is the one the default session cap is sized for, and
    # its request holds the ordinary use of a class (the one draw, ~2 MiB a session)
    from attention_scaling import server
    resources = container["resources"]
    need = (BASE_MIB + STUDENTS_PER_POD * MIB_PER_SESSION) * 2**20
    assert quantity(resources["requests"]["memory"]) >= need
    assert quantity(resources["limits"]["memory"]) == server.MEMORY_LIMIT_MIB * 2**20
    assert quantity(resources["limits"]["cpu"]) >= quantity(resources["requests"]["cpu"])
    # Service -> pods, Ingress -> Service
    (service_port,) = service["spec"]["ports"]
    assert service_port["targetPort"] == port["name"]
    assert "sessionAffinity" not in service["spec"]
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == service["metadata"]["name"]
    assert backend["port"]["name"] == service_port["name"]
    notes = ingress["metadata"]["annotations"]
    assert notes["nginx.ingress.kubernetes.io/affinity"] == "cookie"
    assert notes["nginx.ingress.kubernetes.io/affinity-mode"] == "persistent"
    assert notes["nginx.ingress.kubernetes.io/session-cookie-name"] == COOKIE
    assert notes["nginx.ingress.kubernetes.io/session-cookie-samesite"] == "None"  # iframes
    assert notes["nginx.ingress.kubernetes.io/session-cookie-secure"] == "true"
    traefik = service["metadata"]["annotations"]
    assert traefik["traefik.ingress.kubernetes.io/service.sticky.cookie.name"] == COOKIE
    assert int(notes["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= \
        3 * cli.DEFAULT_KEEP_ALIVE_S
    assert ingress["spec"]["tls"][0]["hosts"] == hosts


def test_deployment_names_the_projects_version_as_its_image_tag():
    version = re.search(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(),
                        re.M).group(1)
    deployment = by_kind(load_manifests())["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    images = [c["image"] for c in pod["containers"] + pod.get("initContainers", [])]
    assert images == [f"attention-scaling:{version}"]
    for image in images:
        name, _, tag = image.rpartition("/")[2].partition(":")
        assert tag and tag != "latest" and "@" not in name, image
    assert ":latest" not in re.sub(r"#.*", "", (K8S_DIR / "deployment.yaml").read_text())


def test_ingress_limits_each_address_and_refuses_stats_and_components():
    docs = load_manifests()
    ingress = by_kind(docs)["Ingress"]
    notes = ingress["metadata"]["annotations"]
    prefix = "nginx.ingress.kubernetes.io/"
    rps = int(notes[prefix + "limit-rps"])
    burst = rps * int(notes[prefix + "limit-burst-multiplier"])
    connections = int(notes[prefix + "limit-connections"])
    # a class behind one NAT address opening the page at the same moment passes: ingress-nginx
    # counts every request, ~12 per page load (the page, its scripts and styles, the websocket)
    assert burst >= STUDENTS_PER_POD * REQUESTS_PER_PAGE_LOAD, burst
    assert connections >= 2 * STUDENTS_PER_POD and rps >= 1
    # the second Ingress: /stats and /components, same host and Service, refused to everyone
    (internal,) = [d for d in docs if d["kind"] == "Ingress" and d is not ingress]
    assert internal["metadata"]["annotations"] == {
        prefix + "denylist-source-range": "0.0.0.0/0,::/0"}
    assert internal["spec"]["ingressClassName"] == ingress["spec"]["ingressClassName"]
    (rule,) = internal["spec"]["rules"]
    assert rule["host"] == ingress["spec"]["rules"][0]["host"]
    paths = {(p["path"], p["pathType"]) for p in rule["http"]["paths"]}
    assert paths == {("/stats", "Prefix"), ("/components", "Prefix")}
    main_backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]
    assert all(p["backend"] == main_backend for p in rule["http"]["paths"])
    # and the main Ingress itself has no path of its own for them
    assert [p["path"] for p in ingress["spec"]["rules"][0]["http"]["paths"]] == ["/"]


SYSTEMD_UNIT = ROOT / "deploy" / "systemd" / "attention-scaling@.service"


def test_systemd_unit_runs_serve_from_the_environment_on_the_upstream_ports(tmp_path):
    text = SYSTEMD_UNIT.read_text()
    env = dict(line.split("=", 2)[1:] for line in text.splitlines()
               if line.startswith("Environment="))
    assert set(env) <= set(cli.ENVIRONMENT.values())
    assert env["ATTENTION_SCALING_PORT"] == "%i" and env["ATTENTION_SCALING_ADDRESS"] == "127.0.0.1"
    (exec_start,) = [line for line in text.splitlines() if line.startswith("ExecStart=")]
    assert exec_start.endswith("/attention-scaling serve")
    # one signing key for every backend, from a file the unit's comment (and deploy.md) makes
    (key_file,) = [line.split("=", 1)[1] for line in text.splitlines()
                   if line.startswith("EnvironmentFile=")]
    made = f'print("ATTENTION_SCALING_SECRET_KEY=" + secrets.token_urlsafe(32))'
    assert f"> {key_file}" in text and made in text
    assert f"> {key_file}" in (ROOT / "docs" / "deploy.md").read_text() and made in text
    # the instances the unit's comment enables are the upstream's ports
    enabled = re.findall(r"attention-scaling@(\d+)", text)
    upstream = re.findall(r"server 127\.0\.0\.1:(\d+)", HTTP_TEMPLATE.read_text())
    assert enabled == upstream
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        pytest.skip("systemd-analyze is not installed")
    # systemd's own check; it wants the program to exist, so point it at this one
    program = exec_start.split("=", 1)[1].split()[0]

    def verify(unit_text: str) -> str:
        (tmp_path / "attention-scaling@.service").write_text(unit_text.replace(program, CLI))
        instance = tmp_path / f"attention-scaling@{upstream[0]}.service"
        instance.unlink(missing_ok=True)
        instance.symlink_to("attention-scaling@.service")
        run = subprocess.run([analyze, "verify", str(instance)], capture_output=True, text=True)
        return (run.stdout + run.stderr).strip() if run.returncode == 0 else f"rc {run.returncode}"
    assert verify(text) == ""
    assert "Unknown key" in verify(text.replace("MemoryMax=", "MemoryMaxx="))


def test_the_deploy_doc_names_files_that_exist_and_the_static_export():
    text = DOC.read_text()
    named = set(re.findall(r"\b(deploy/[\w./-]+\.(?:conf|yaml|service))", text))
    assert named, "docs/deploy.md names no file under deploy/"
    assert [n for n in named if not (ROOT / n).exists()] == []
    assert "attention-scaling export" in text
