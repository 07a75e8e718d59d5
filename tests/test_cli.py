"""The console script: --help, clear errors for bad arguments, and a real serve."""

import subprocess
import urllib.request
from pathlib import Path

import pytest

from conftest import CLI, Server


def run(*args):
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=60)


def test_help_documents_the_commands():
    r = run("--help")
    assert r.returncode == 0
    assert "serve" in r.stdout and "√d_k" in r.stdout
    r = run("serve", "--help")
    assert r.returncode == 0
    for flag in ("--port", "--address", "--allow-websocket-origin", "--num-procs", "--prefix", "--show"):
        assert flag in r.stdout


SRC = Path(__file__).resolve().parents[1] / "src" / "attention_scaling"


def environment_read_by_the_source() -> set[str]:
    """Every environment variable src/ reads, found in its syntax trees: the names given as
    literals to ``os.environ`` (``.get``, ``[...]``, ``in``) or ``os.getenv``, and
    cli.ENVIRONMENT's, which cli._from_environment reads through a loop variable, and
    blas.THREAD_VARIABLES, which blas.one_thread sets where unset (BLAS reads them). Any other
    way of reading the environment fails here, so that a new one cannot go unseen."""
    import ast

    from attention_scaling import blas, cli

    found, unknown = set(), []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        functions = {child: node.name for node in ast.walk(tree)
                     if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                     for child in ast.walk(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "os" and any(
                    a.name in ("environ", "getenv", "environb") for a in node.names):
                unknown.append(f"{path.name}:{node.lineno}: from os import environ/getenv")
            if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id == "os" and node.attr in ("environ", "getenv", "environb")):
                continue
            up = parents[node]
            if node.attr == "getenv" and isinstance(up, ast.Call):
                key = up.args[0] if up.args else None
            elif isinstance(up, ast.Attribute) and up.attr == "get" \
                    and isinstance(parents[up], ast.Call):
                key = parents[up].args[0]
            elif isinstance(up, ast.Subscript):
                key = up.slice
            elif isinstance(up, ast.Compare) and up.comparators == [node]:
                key = up.left
            else:
                key = None
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                found.add(key.value)
            elif path.name == "cli.py" and functions.get(node) == "_from_environment":
                found.update(cli.ENVIRONMENT.values())
            elif path.name == "blas.py" and functions.get(node) == "one_thread":
                found.update(blas.THREAD_VARIABLES)
            else:
                unknown.append(f"{path.name}:{node.lineno}: {ast.unparse(up)}")
    assert unknown == [], unknown
    return found


def test_serve_help_lists_every_environment_variable_the_source_reads(capsys):
    from attention_scaling import cli

    names = environment_read_by_the_source()
    # the scan sees the ones known to be read (it is not finding nothing)
    assert {"ATTENTION_SCALING_SECRET_KEY", "ATTENTION_SCALING_ALLOW_ANY_ORIGIN",
            *cli.ENVIRONMENT.values()} <= names
    with pytest.raises(SystemExit) as done:
        cli.main(["serve", "--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    assert [name for name in sorted(names) if name not in shown] == []
    # a default the help gives is the server's own
    from attention_scaling import server
    assert f"(default {server.OPENING_HOLD_S} s, server.OPENING_HOLD_S" in " ".join(shown.split())


@pytest.mark.parametrize("args,message", [
    (["serve", "--port", "abc"], "port must be an integer"),
    (["serve", "--port", "70000"], "port must be between 0 and 65535"),
    (["serve", "--num-procs", "-2"], "number of processes must be between"),
    (["serve", "--num-procs", "many"], "number of processes must be an integer"),
    (["serve", "--allow-websocket-origin", "http://evil/<script>"], "websocket origin must look like"),
    (["serve", "--prefix", "a b"], "prefix must be a URL path"),
    (["serve", "--opening-hold", "0"], "seconds must be between 1 and 600"),
    (["serve", "--bogus"], "unrecognized arguments"),
    (["launch"], "invalid choice"),
    ([], "required"),
])
def test_bad_arguments_give_a_clear_error_and_exit_2(args, message):
    r = run(*args)
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_serve_with_prefix_serves_the_page():
    srv = Server(prefix="/course")
    try:
        with urllib.request.urlopen(srv.url, timeout=30) as resp:
            html = resp.read().decode()
        assert resp.status == 200 and srv.url.endswith("/course/")
        assert "Why attention divides by" in html
    finally:
        out = srv.stop()
    assert "serving on http://127.0.0.1:" in out


def test_a_taken_port_is_one_clear_line_and_a_test_server_moves_to_another(monkeypatch):
    """`serve` on a port another process holds says so in one line and exits with status 2
    (no traceback); testkit's Server, whose free port was taken before its server listened,
    starts again on another."""
    import socket

    from testkit import processes

    refused = []
    wait = processes.wait_until_live

    def watched(url, proc, *args, **kwargs):
        try:
            return wait(url, proc, *args, **kwargs)
        except RuntimeError as exc:
            refused.append((proc.returncode, str(exc)))
            raise

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        offered = iter([port])
        free = processes.free_port
        monkeypatch.setattr(processes, "free_port", lambda: next(offered, None) or free())
        monkeypatch.setattr(processes, "wait_until_live", watched)
        srv = processes.Server()
        try:
            with urllib.request.urlopen(srv.url + "liveness", timeout=30) as resp:
                assert resp.status == 200 and srv.port != port
        finally:
            srv.stop()
    assert len(refused) == 1, refused
    status, message = refused[0]
    assert status == 2
    assert (f"attention-scaling serve: error: cannot listen on 127.0.0.1:{port}: "
            f"{processes.PORT_TAKEN}") in message
    assert "Traceback" not in message and "serving on" not in message


def run_env(env, *args):
    import os
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env})


@pytest.mark.parametrize("var,value,message", [
    ("ATTENTION_SCALING_PORT", "abc", "ATTENTION_SCALING_PORT: port must be an integer"),
    ("ATTENTION_SCALING_PORT", "99999", "ATTENTION_SCALING_PORT: port must be between"),
    ("ATTENTION_SCALING_WORKERS", "-1", "ATTENTION_SCALING_WORKERS: number of processes"),
    ("ATTENTION_SCALING_ALLOWED_ORIGINS", "ok.example:80, <script>",
     "ATTENTION_SCALING_ALLOWED_ORIGINS: websocket origin must look like"),
    ("ATTENTION_SCALING_PREFIX", "a b", "ATTENTION_SCALING_PREFIX: prefix must be a URL path"),
    ("ATTENTION_SCALING_ADDRESS", "$(rm -rf /)", "ATTENTION_SCALING_ADDRESS: address must be"),
    ("ATTENTION_SCALING_FRAME_ANCESTORS", "'self', javascript:x",
     "ATTENTION_SCALING_FRAME_ANCESTORS: 'javascript:x' is not a frame-ancestors source"),
])
def test_bad_environment_names_the_variable_and_exits_2(var, value, message):
    r = run_env({var: value}, "serve")
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_environment_configures_serve_and_a_flag_wins():
    """Port and prefix from the environment; the refused foreign origin is logged, with no
    suggestion to allow it; /stats counts the session a page GET created."""
    import json
    import os

    from tornado.httpclient import HTTPClientError

    from conftest import free_port, page_token, run_in_thread, stop_group, wait_until_live
    from testkit.bokeh_client import Connection

    port = free_port()
    env = {**os.environ, "ATTENTION_SCALING_PORT": str(port),
           "ATTENTION_SCALING_PREFIX": "/room", "ATTENTION_SCALING_WORKERS": "1",
           "ATTENTION_SCALING_ADDRESS": "0.0.0.0"}  # the --address flag below wins
    proc = subprocess.Popen([CLI, "serve", "--stats", "--address", "127.0.0.1"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}/room"
    try:
        assert wait_until_live(base + "/liveness", proc, 60, proc.stdout.read)
        stats = lambda: json.loads(urllib.request.urlopen(base + "/stats", timeout=10).read())
        assert stats()["sessions"] == 0
        assert stats()["gc_frozen"] == 0
        html = urllib.request.urlopen(base + "/", timeout=30).read().decode()
        assert stats()["sessions"] == 1
        # the first session started the server's collect-and-freeze
        assert stats()["gc_frozen"] > 10_000

        async def foreign():
            with pytest.raises(HTTPClientError) as err:
                await Connection.connect(base + "/", page_token(html),
                                         headers={"Origin": "http://laptop.example:5006"})
            assert err.value.code == 403
        run_in_thread(foreign)
        # scripts come compressed, the second time from the compressed copy:
        # both are the file itself
        import gzip
        from pathlib import Path

        import bokeh
        script = (Path(bokeh.__file__).parent / "server/static/js/bokeh.min.js").read_bytes()
        request = urllib.request.Request(
            base + "/static/js/bokeh.min.js", headers={"Accept-Encoding": "gzip"})
        for _ in range(2):
            with urllib.request.urlopen(request, timeout=30) as resp:
                assert resp.headers["Content-Encoding"] == "gzip"
                assert gzip.decompress(resp.read()) == script
    finally:
        stop_group(proc)
    out = proc.stdout.read()
    assert f"serving on http://127.0.0.1:{port}/room/" in out
    # a page of another site: refused, and the log does not suggest letting it in
    assert "another site (Origin 'http://laptop.example:5006'" in out
    assert "ALLOWED_ORIGINS=laptop.example" not in out


def test_sigterm_stops_the_server_cleanly():
    """What Docker and Kubernetes send: a clean exit, status 0, no traceback."""
    import signal

    srv = Server()
    try:
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(10) == 0
    finally:
        out = srv.stop()
    assert "attention-scaling: stopped" in out
    assert "Traceback" not in out


def test_frame_ancestors_are_separated_by_spaces_or_commas_as_the_help_says():
    from attention_scaling.server import check_frame_ancestors
    for text in ("'self' https://lms.example.edu", "'self',https://lms.example.edu",
                 " 'self', https://lms.example.edu "):
        assert check_frame_ancestors(text) == "'self' https://lms.example.edu"
    with pytest.raises(ValueError, match="not a frame-ancestors source"):
        check_frame_ancestors("'self',<script>")
    assert "frame ancestors each separated by commas or spaces" in " ".join(
        run_env({}, "serve", "--help").stdout.split())
