"""The console script: --help, clear errors for bad arguments, and a real serve."""

import subprocess
import urllib.request

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


@pytest.mark.parametrize("args,message", [
    (["serve", "--port", "abc"], "port must be an integer"),
    (["serve", "--port", "70000"], "port must be between 0 and 65535"),
    (["serve", "--num-procs", "-2"], "number of processes must be between"),
    (["serve", "--num-procs", "many"], "number of processes must be an integer"),
    (["serve", "--allow-websocket-origin", "http://evil/<script>"], "websocket origin must look like"),
    (["serve", "--prefix", "a b"], "prefix must be a URL path"),
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
