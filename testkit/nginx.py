"""Debian's nginx in front of the explorer's servers, from the templates in deploy/nginx/ with
only the loopback ports (and what a test asks for) replaced: tests/test_deploy.py's
deployments and the load test's --backends."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

from .processes import stop_group

ROOT = Path(__file__).resolve().parents[1]
NGINX_DIR = ROOT / "deploy" / "nginx"
HTTP_TEMPLATE = NGINX_DIR / "attention-scaling.conf"
TLS_TEMPLATE = NGINX_DIR / "attention-scaling-tls.conf"


def nginx_executable() -> str | None:
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None)



def sub_exactly(pattern: str, repl, text: str, count: int, what: str) -> str:
    new, n = re.subn(pattern, repl, text, flags=re.M)
    if n != count:
        raise AssertionError(f"the template changed: expected {count} {what}, found {n}")
    return new


def site_config(template: Path, backends: list[int], listen: int, *, tls_listen: int = 0,
                cert: tuple[Path, Path] | None = None, affinity: str | None = None,
                ws_read_timeout: int | None = None, ws_conn_limit: int | None = None,
                prefix: str | None = None) -> str:
    """The template with only the loopback ports (and where asked the certificate, the
    websocket's read timeout or connection limit, the hash key, or `location /` moved under a
    path prefix as docs/deploy.md says) replaced."""
    text = template.read_text()

    def servers(match: re.Match) -> str:
        return "\n".join(f"{match.group(1)}server 127.0.0.1:{port}{match.group(2)};"
                         for port in backends)
    # the three `server 127.0.0.1:500x ...;` lines of the upstream become the test's backends
    text = sub_exactly(r"^(\s*)server 127\.0\.0\.1:500[678]\b([^;\n]*);\n"
                       r"(?:\s*server 127\.0\.0\.1:500[678]\b[^;\n]*;\n){2}",
                       lambda m: servers(m) + "\n", text, 1, "upstream of three backends")
    text = sub_exactly(r"^(\s*)listen 80;$", rf"\1listen 127.0.0.1:{listen};", text, 1,
                       "`listen 80;`")
    text = sub_exactly(r"^\s*listen \[::\]:80;\n", "", text, 1, "`listen [::]:80;`")
    if ws_read_timeout is not None:
        text = sub_exactly(r"(location ~ /ws\$ \{[^}]*proxy_read_timeout) \d+s;",
                           rf"\1 {ws_read_timeout}s;", text, 1, "websocket read timeout")
    if ws_conn_limit is not None:
        text = sub_exactly(r"(location ~ /ws\$ \{[^}]*limit_conn attention_scaling_conn) \d+;",
                           rf"\1 {ws_conn_limit};", text, 1, "websocket connection limit")
    if prefix is not None:
        text = sub_exactly(r"^(\s*)location / \{", rf"\1location {prefix}/ {{", text, 1,
                           "`location / {`")
    if cert:
        text = sub_exactly(r"^(\s*)listen 443 ssl http2;$",
                           rf"\1listen 127.0.0.1:{tls_listen} ssl http2;", text, 1,
                           "`listen 443 ssl http2;`")
        text = sub_exactly(r"^\s*listen \[::\]:443 ssl http2;\n", "", text, 1,
                           "`listen [::]:443 ssl http2;`")
        text = sub_exactly(r"^(\s*ssl_certificate)\s+\S+;", rf"\1 {cert[0]};", text, 1,
                           "ssl_certificate")
        text = sub_exactly(r"^(\s*ssl_certificate_key)\s+\S+;", rf"\1 {cert[1]};", text, 1,
                           "ssl_certificate_key")
    if affinity is not None:          # only to show what breaks without the cookie's key
        text = sub_exactly(r"^(\s*)hash \$as_affinity consistent;", rf"\1{affinity}", text, 1,
                           "hash directive")
    return text


MAIN_CONF = """\
daemon off;
master_process on;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/logs/error.log notice;
events {{ worker_connections {wc}; }}
http {{
    client_body_temp_path {d}/tmp/client_body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    log_format deploy_test '$upstream_addr\\t$status\\t$request_method\\t$uri\\t$as_affinity';
    access_log {d}/logs/access.log deploy_test;
    include {d}/site.conf;
}}
"""


def wait_for_port(port: int, proc: subprocess.Popen, seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


class Nginx:
    """Debian's nginx with its own prefix, pid file and logs under `directory`, in the
    foreground (daemon off), stopped by its PID."""

    def __init__(self, directory: Path, site: str, port: int, scheme: str = "http",
                 worker_connections: int = 512) -> None:
        self.dir = directory
        self.port = port
        self.url = f"{scheme}://127.0.0.1:{port}/"
        self.host = f"127.0.0.1:{port}"
        for sub in ("logs", "tmp"):
            (directory / sub).mkdir(parents=True, exist_ok=True)
        (directory / "site.conf").write_text(site)
        conf = directory / "nginx.conf"
        conf.write_text(MAIN_CONF.format(d=directory, wc=worker_connections))
        exe = nginx_executable()
        cmd = [exe, "-p", str(directory), "-e", str(directory / "logs" / "error.log"),
               "-c", str(conf)]
        check = subprocess.run([*cmd, "-t"], capture_output=True, text=True)
        if check.returncode != 0:
            raise AssertionError(f"nginx -t refused the config:\n{check.stderr}\n{site}")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True)
        if not wait_for_port(port, self.proc):
            out = self.stop()
            raise RuntimeError(f"nginx did not start:\n{out}\n{self.error_log()}")

    def error_log(self) -> str:
        path = self.dir / "logs" / "error.log"
        return path.read_text() if path.exists() else ""

    def access_log(self) -> list[dict]:
        rows = []
        for line in (self.dir / "logs" / "access.log").read_text().splitlines():
            upstream, status, method, uri, key = line.split("\t")
            rows.append({"upstream": upstream, "status": int(status), "method": method,
                         "uri": uri, "key": key})
        return rows

    def stop(self) -> str:
        stop_group(self.proc)
        return self.proc.stdout.read() if self.proc.stdout else ""
