"""A server or a browser in a process of its own, for the tests, the benchmarks and the
scripts: `attention-scaling serve` on a free loopback port (:class:`Server`), the Chromium
to drive, waiting until a server answers, stopping a process group, and a coroutine run in a
thread of its own."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

#: How the tests and the benchmarks start Chromium (headless, no network of its own).
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chromium_executable() -> str | None:
    """Debian's Chromium when installed (or $CHROMIUM); otherwise None, so Playwright uses
    its own build."""
    if os.environ.get("CHROMIUM"):
        return os.environ["CHROMIUM"]
    for path in ("/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if os.path.exists(path):
            return path
    return shutil.which("chromium")


def run_in_thread(coroutine_function, timeout: float = 60):
    """``asyncio.run(coroutine_function())`` in a thread of its own, returning its result or
    raising its exception: Playwright's sync API keeps an event loop on the main thread."""
    import asyncio
    import sys
    import threading
    import traceback

    box: dict = {}

    def target() -> None:
        try:
            box["result"] = asyncio.run(coroutine_function())
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if "error" in box:
        raise box["error"]
    if "result" not in box:
        frame = sys._current_frames().get(thread.ident)
        where = "".join(traceback.format_stack(frame)[-6:]) if frame is not None else ""
        raise TimeoutError(f"{coroutine_function.__name__} did not finish in {timeout} s; "
                           f"its thread was at:\n{where}")
    return box["result"]


def stop_group(proc: subprocess.Popen) -> None:
    """Stop a process started with start_new_session=True, and its children: TERM, then KILL."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def wait_until_live(url: str, proc: subprocess.Popen, timeout: float = 60,
                    output=lambda: "") -> bool:
    """Wait until ``url`` (a server's /liveness) answers; RuntimeError if ``proc`` exits first
    (with ``output()`` in the message), False if it does not answer within ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early:\n{output()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


#: The command line of the environment running this (the venv's `attention-scaling`).
CLI = str(Path(sys.executable).with_name("attention-scaling"))


#: What `attention-scaling serve` prints when its port is taken, and how many free ports a
#: :class:`Server` tries.
PORT_TAKEN = "Address already in use"
PORT_ATTEMPTS = 5


class Server:
    """`attention-scaling serve` in a subprocess on a free loopback port; stopped by its PID."""

    def __init__(self, *extra: str, prefix: str = "", port: int | None = None,
                 log: Path | None = None, env: dict | None = None) -> None:
        """``log``: a file that takes the server's output (its size can be read while the
        server runs); otherwise a pipe, read by :meth:`stop`. ``env``: variables added to
        the server's environment. Without ``port``, a free one; if another process takes it
        before the server listens (free_port only finds one), the server says so and exits,
        and it starts again on another."""
        if prefix:
            extra = ("--prefix", prefix, *extra)
        self.log = log
        for attempt in range(PORT_ATTEMPTS):
            self.port = port or free_port()
            self.url = f"http://127.0.0.1:{self.port}{prefix}/"
            out = open(log, "w") if log else subprocess.PIPE
            self.proc = subprocess.Popen(
                [CLI, "serve", "--port", str(self.port), "--address", "127.0.0.1", *extra],
                stdout=out, stderr=subprocess.STDOUT, text=True,
                start_new_session=True, env={**os.environ, **(env or {})},
            )
            if log:
                out.close()
            try:
                live = wait_until_live(self.url + "liveness", self.proc, 60, self.output)
            except RuntimeError as exc:
                if port is None and PORT_TAKEN in str(exc) and attempt + 1 < PORT_ATTEMPTS:
                    continue
                raise
            if not live:
                self.stop()
                raise RuntimeError("server did not answer within 60 s")
            return

    def output(self) -> str:
        """What the server printed so far (with ``log``), or all of it once it has stopped."""
        if self.log:
            return Path(self.log).read_text(errors="replace")
        return self.proc.stdout.read() if self.proc.stdout else ""

    def stop(self) -> str:
        stop_group(self.proc)
        return self.output()
