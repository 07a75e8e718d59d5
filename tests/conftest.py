"""Shared fixtures: a served app on 127.0.0.1 and a headless Chromium driven by Playwright."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from attention_scaling import blas

blas.one_thread()    # before NumPy loads, as in the package's own processes (blas.py)

from testkit.bokeh_client import (DOCUMENT_READY, Connection, page_token,  # noqa: E402,F401
                                  token_payload)
from testkit.browser import draw_svg  # noqa: E402,F401
from testkit.processes import (CHROMIUM_ARGS, CLI, Server, chromium_executable,  # noqa: E402,F401
                               free_port, run_in_thread, stop_group, wait_until_live)

#: How long a browser test waits for a whole training run (or the handout that runs one): a
#: busy CI machine took 74 s for what takes 1 s on a quiet one.
TRAINING_WAIT_MS = 240_000
#: How long a browser test waits for the page to show what it was asked for: a second on a quiet
#: machine, over 10 s with two tests at once on a slow CI machine. A bound, not a goal (the
#: benchmarks time the page).
UI_WAIT_MS = 60_000



@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """The worker's shared server. Its output goes to a file (a pipe nobody reads until the
    end would stop the server once full); what it printed during a failing test is added
    to that test's report (:func:`pytest_runtest_makereport`)."""
    srv = Server(log=tmp_path_factory.mktemp("server") / "server.log")
    yield srv
    srv.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failing test that used the shared server gets the lines that server printed while
    the test ran, as a section of its report."""
    srv = item.funcargs.get("server") if hasattr(item, "funcargs") else None
    if call.when == "setup" and isinstance(srv, Server) and srv.log:
        item.stash[_SERVER_LOG_AT] = Path(srv.log).stat().st_size
    report = yield
    if report.failed and isinstance(srv, Server) and srv.log:
        with open(srv.log, "rb") as log:
            log.seek(item.stash.get(_SERVER_LOG_AT, 0))
            printed = log.read(64_000).decode(errors="replace")
        report.sections.append(("the shared server's log during the test",
                                printed or "(nothing)"))
    return report


_SERVER_LOG_AT = pytest.StashKey[int]()


@dataclass(frozen=True)
class OfflineExport:
    """The offline copy `attention-scaling export` wrote: its file, what the command printed
    (on stdout and, its progress, on stderr, a file), and the payload it holds
    (export.build_payload's) for its seeds."""

    path: Path
    stdout: str
    payload: dict
    seeds: list
    stderr: str = ""


#: `attention-scaling export` in a fresh process (what a user runs: nothing another test loaded
#: into this process reaches the file), keeping the payload it computed for the tests; its exit
#: status goes last into a file of its own, so any process can tell that it has ended.
EXPORT_KEEPING_PAYLOAD = """
import os, pickle, sys
from attention_scaling import cli, export
built = {}
build_payload = export.build_payload
def kept(seeds, *args, **kwargs):
    built["payload"] = build_payload(seeds, *args, **kwargs)
    return built["payload"]
export.build_payload = kept
code = cli.main(["export", sys.argv[1]])
with open(sys.argv[2], "wb") as f:
    pickle.dump(built.get("payload"), f)
with open(sys.argv[3] + ".part", "w") as f:
    f.write(str(code))
os.replace(sys.argv[3] + ".part", sys.argv[3])
sys.exit(code)
"""

#: The folder of the run's export, made by the process that runs the session (pytest's own or,
#: with pytest-xdist, its controller) and handed to the workers it starts through this variable.
EXPORT_DIR_VARIABLE = "ATTENTION_SCALING_TEST_EXPORT_DIR"


class ExportRun:
    """`attention-scaling export` with its defaults in a process of its own, writing into
    ``folder``: one per test run, however many pytest processes share that run. The first to
    call `start` starts it, niced while the tests run beside it (it takes the CPU they leave
    idle); a test that waits for it puts it back to the tests' own priority."""

    def __init__(self, folder: Path) -> None:
        self.out, self.kept = folder / "explorer.html", folder / "payload.pickle"
        self.log, self.errors = folder / "export.log", folder / "export.err"
        self.pid_file, self.status = folder / "export.pid", folder / "export.status"

    def start(self) -> None:
        """Start the export unless a process of this run has started it already."""
        try:
            claim = os.open(self.pid_file, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        with open(self.log, "w") as out, open(self.errors, "w") as err:
            proc = subprocess.Popen(
                [sys.executable, "-c", EXPORT_KEEPING_PAYLOAD, str(self.out), str(self.kept),
                 str(self.status)],
                stdout=out, stderr=err, text=True, start_new_session=True,
                preexec_fn=lambda: os.nice(10))
        os.write(claim, str(proc.pid).encode())
        os.close(claim)

    def pid(self) -> int | None:
        """The export's process while it runs (it leads its own process group), else None."""
        try:
            pid = int(self.pid_file.read_text())
            with open(f"/proc/{pid}/stat") as f:
                running = f.read().rpartition(")")[2].split()[0] != "Z"
        except (OSError, ValueError, IndexError):
            return None
        return pid if running else None

    def signal(self, sig: int) -> None:
        pid = self.pid()
        if pid is not None:
            try:
                os.killpg(pid, sig)
            except OSError:                      # ended in between
                pass

    def result(self, timeout: float) -> OfflineExport:
        """The export's file and payload, once it has ended (waiting at most ``timeout`` s,
        also while the process that claimed it is still starting it)."""
        import pickle
        pid, deadline = self.pid(), time.monotonic() + timeout
        if pid is not None:
            try:
                os.setpriority(os.PRIO_PROCESS, pid, os.getpriority(os.PRIO_PROCESS, 0))
            except OSError:                      # ended already, or not allowed
                pass
        while not self.status.exists():
            started = self.pid_file.exists() and self.pid_file.read_text() != ""
            if started and self.pid() is None and not self.status.exists():
                raise RuntimeError("the export ended without its status:\n"
                                   + self.errors.read_text()[-2000:])
            if time.monotonic() > deadline:
                self.signal(signal.SIGKILL)
                raise subprocess.TimeoutExpired("attention-scaling export", timeout)
            time.sleep(0.5)
        stdout, stderr = self.log.read_text(), self.errors.read_text()
        assert self.status.read_text() == "0", stdout[-2000:] + stderr[-2000:]
        payload = pickle.loads(self.kept.read_bytes())
        return OfflineExport(self.out, stdout, payload, payload["seeds"], stderr)


def _export() -> ExportRun:
    return ExportRun(Path(os.environ[EXPORT_DIR_VARIABLE]))


def _uses_offline_export(item) -> bool:
    return "offline_export" in getattr(item, "fixturenames", ())


def _runs_the_session(config) -> bool:
    """True in pytest's own process or pytest-xdist's controller; False in a worker."""
    return not hasattr(config, "workerinput")


def pytest_configure(config):
    if _runs_the_session(config):
        import tempfile
        os.environ[EXPORT_DIR_VARIABLE] = tempfile.mkdtemp(prefix="attention-scaling-export-")


def pytest_collection_modifyitems(session, config, items):
    """The modules with a test of the offline copy run last (each in its own order), so that
    its export, started once the tests are collected, runs beside the other modules."""
    late = {item.path for item in items if _uses_offline_export(item)}
    items[:] = ([item for item in items if item.path not in late]
                + [item for item in items if item.path in late])


def pytest_collection_finish(session):
    if any(_uses_offline_export(item) for item in session.items):
        _export().start()


def pytest_sessionfinish(session, exitstatus):
    if _runs_the_session(session.config):
        run = _export()
        run.signal(signal.SIGKILL)
        shutil.rmtree(run.out.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def offline_export() -> OfflineExport:
    """`attention-scaling export` with its defaults, once per test run, in a process of its
    own (started when the tests were collected): every test of the offline copy shares it."""
    run = _export()
    run.start()
    return run.result(timeout=1200)


@pytest.fixture(scope="session")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        exe = chromium_executable()
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS) if exe else \
            p.chromium.launch(args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1440, "height": 1200})
    pg = context.new_page()
    pg.console_errors = []
    pg.failed_requests = []
    pg.requests = []
    pg.on("console", lambda m: m.type == "error" and pg.console_errors.append(m.text))
    pg.on("pageerror", lambda e: pg.console_errors.append(str(e)))
    pg.on("request", lambda r: pg.requests.append(r.url))
    pg.on("requestfailed", lambda r: pg.failed_requests.append(r.url))
    yield pg
    context.close()


def share_shows(words: str, x: float) -> bool:
    """``words`` ("none of 2,000 draws", "all 2,000 draws", "under 1% of draws", "26% of
    draws") is the share ``x`` of the curves' draws (core.CURVE_DRAWS)."""
    from attention_scaling import core
    exact = {f"none of {core.CURVE_DRAWS:,} draws": x == 0,
             f"all {core.CURVE_DRAWS:,} draws": x == 1, "under 1% of draws": 0 < x < 0.005,
             "over 99% of draws": 0.995 <= x < 1}
    if words in exact:
        return exact[words]
    m = re.fullmatch(r"(\d+)% of draws", words)
    return (bool(m) and 0.005 <= x < 0.995 and 1 <= int(m[1]) <= 99
            and abs(int(m[1]) - 100 * x) <= 0.5 + 1e-9)


def status_of(url: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


# ---- the served page in Chromium: shared by the browser, URL, fault, deploy and docker tests

PLOTS = ["scaled-weights", "unscaled-weights", "jacobian", "jacobian-diagonal"]

#: window.__AS: assets/js/helpers.js's AS, for the tests' own scripts in the page: what they
#: need of BokehJS's internals (a model's view, the view's shadow root) goes through it, as
#: the programs' does.
HELPERS = ("window.__AS = (() => {\n"
           + (Path(__file__).resolve().parents[1] / "assets" / "js" / "helpers.js").read_text(
               encoding="utf-8") + "\nreturn AS;\n})();\n")

# window.__col(name, col): a ColumnDataSource column from the page's Bokeh documents,
# as a plain array (BokehJS keeps data as an object or a Map depending on version).
INIT = HELPERS + """window.__col = (name, col) => {
  if (!window.Bokeh) return null;
  for (const doc of Bokeh.documents) {
    const src = doc.get_model_by_name(name);
    if (src) { const d = src.data; const v = d instanceof Map ? d.get(col) : d[col];
               return v ? Array.from(v) : null; }
  }
  return null;
};"""


#: The argument's tabs are all built, or none is and the page is on the one draw (the server
#: builds none until a step is asked for): BokehJS draws the tab headers anew when the server
#: puts built steps in their panels, and a click in the middle of that can meet a header on
#: its way out (seen once, under load: the click changed no tab).
NO_TAB_TO_BUILD = """() => { const tabs = Bokeh.documents[0].get_model_by_name('sections');
  const waiting = tabs.tabs.slice(1).filter((p) => p.child.type === 'Div').length;
  return waiting === 0 || (tabs.active === 0 && waiting === tabs.tabs.length - 1); }"""


#: The live explorer is drawn: its data in the page and no ready-made first view left (a page
#: that arrives while other sessions open shows one until its own session is drawn).
LIVE = ("() => !document.getElementById('as-first-view') && "
        "(window.__col('jacobian-diagonal-source', 'value') || []).length > 0")


def open_app(page, server):
    page.add_init_script(INIT)
    page.goto(server.url)
    page.wait_for_function(LIVE, timeout=UI_WAIT_MS)
    page.wait_for_selector(".noUi-handle", timeout=UI_WAIT_MS)


def open_at(page, server, search: str) -> None:
    """open_app with ``search`` appended to the page's address."""
    server_url = server.url
    server.url = server_url + search
    try:
        open_app(page, server)
    finally:
        server.url = server_url


def assert_plots_drawn(page):
    """All four named plots are in the document and drawn with a real size."""
    names = page.evaluate("""(names) => names.filter(n =>
        Bokeh.documents.some(d => d.get_model_by_name(n) !== null))""", PLOTS)
    assert names == PLOTS
    for name in PLOTS:
        box = page.evaluate("""(n) => { for (const d of Bokeh.documents) {
              const m = d.get_model_by_name(n); if (m) { const v = window.__AS.view(m);
                return v ? [v.bbox.width, v.bbox.height] : null; } } }""", name)
        assert box and box[0] > 100 and box[1] > 100, (name, box)


def column(page, name, col):
    return page.evaluate("([n, c]) => window.__col(n, c)", [name, col])


def wait_changed(page, name, col, before):
    page.wait_for_function(
        "([n, c, b]) => JSON.stringify(window.__col(n, c)) !== JSON.stringify(b)",
        arg=[name, col, before], timeout=UI_WAIT_MS)


#: A column equal to the one expected: exactly (rel null), or each number within rel of it
#: (relative to its size, at least 1).
COLUMN_IS = """([n, c, e, rel]) => { const v = window.__col(n, c);
  if (rel === null) return JSON.stringify(v) === JSON.stringify(e);
  return v !== null && v.length === e.length &&
    v.every((x, i) => Math.abs(x - e[i]) <= rel * Math.max(1, Math.abs(e[i]))); }"""


def wait_column(page, name, col, expected, timeout=UI_WAIT_MS, rel=None):
    """Wait until a data source's column equals ``expected`` (exactly, or with ``rel`` each
    number within that relative tolerance; a change's columns may reach the page a frame
    apart when the machine is busy); if it never does, an AssertionError with what the page
    shows then: the column, the address and the controls' values."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    if rel is not None:
        expected = [float(x) for x in expected]
    try:
        page.wait_for_function(COLUMN_IS, arg=[name, col, expected, rel], timeout=timeout)
    except PlaywrightTimeout:
        shown = page.evaluate("""([n, c]) => ({column: window.__col(n, c), address:
            window.location.search, controls: Object.fromEntries((window.__AS.noted(document,
            'preset-rows') || []).map((r) => [r.key, r.widget[r.prop]]))})""", [name, col])
        raise AssertionError(f"{name}.{col} is not {expected} after {timeout} ms: the page "
                             f"shows {shown}; its errors: "
                             f"{getattr(page, 'console_errors', 'not recorded')}") from None


#: Resolves once the page has been still for ``frames`` animation frames in a row: its size,
#: its scroll position and the boxes of the models named are the same from frame to frame and
#: the busy note is not shown. What a test measures of the layout after a change waits for
#: this, not for a fixed time: on a busy machine the layout takes longer, never less.
STILL = """async ([names, frames]) => {
  const boxes = () => names.map((n) => {
    const m = Bokeh.documents[0].get_model_by_name(n), v = m && window.__AS.view(m);
    return v == null ? null : [v.bbox.left, v.bbox.top, v.bbox.width, v.bbox.height]; });
  const look = () => {
    const busy = Bokeh.documents[0].get_model_by_name('busy');
    if (busy != null && busy.tags.includes('busy-on')) return null;
    const d = document.documentElement;
    return JSON.stringify([d.scrollHeight, d.scrollWidth, window.scrollX, window.scrollY,
                           window.innerWidth, window.innerHeight, boxes()]);
  };
  for (let last = null, same = 0; same < frames;) {
    await new Promise((done) => { requestAnimationFrame(() => done()); });
    const now = look();
    same = now !== null && now === last ? same + 1 : 0;
    last = now;
  }
  return true; }"""


def wait_still(target, *names: str, frames: int = 10) -> None:
    """Wait until the page (or frame) ``target`` is still (:data:`STILL`), the models
    ``names``' boxes included; an error after :data:`UI_WAIT_MS`."""
    target.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0",
                             timeout=UI_WAIT_MS)
    target.evaluate(
        f"([names, frames, limit]) => Promise.race([({STILL})([names, frames]), "
        "new Promise((_, no) => setTimeout(() => no(new Error('the page did not keep "
        "still')), limit))])", [list(names), frames, UI_WAIT_MS])


def eventually(probe, what: str, timeout_ms: int = UI_WAIT_MS):
    """``probe()``'s first true value, asked again every 50 ms; an AssertionError naming
    ``what`` and the last value after ``timeout_ms``. For what a page shows that no event
    says it has finished (a canvas repainted in a new theme): the assert waits for it
    instead of a fixed time before it."""
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not so after {timeout_ms / 1000:.0f} s")
        time.sleep(0.05)
