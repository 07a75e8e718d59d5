"""The benchmark suite: `make bench` (or `make bench-quick`).

    python -m benchmarks.run [--quick] [--out PATH]

Measures, in one run, and prints a table (and writes the same figures as JSON, path printed):
  core     one full recompute of everything shown (core.compute_state_uncached), µs, at d_k = 64
           and 4096, warm (the seed's draw cached, as when a slider moves) and cold (a new seed);
           and a setting found in compute_state's cache of recent states;
  server   one control change to the finished document update (PATCH-DOC message built), µs,
           with the new state in the cache (a setting some session already visited) and not;
  document what a session's document costs: built and serialised (CPU ms), its models and
           KB, and each part's (title bar, controls, notes, each block of the open tab, the
           rest) models and KB of JSON;
  browser  real headless Chromium against three servers on 127.0.0.1, side by side:
             floor   a plain Bokeh app doing the same update (benchmarks/apps/bokeh_floor.py)
             panel   a plain Panel app, default behaviour (benchmarks/apps/panel_default.py)
             ours    `attention-scaling serve`
           slider change -> new bar data applied in the browser, and -> the next painted frame,
           median and p95 over N changes after a warm-up, driven through the widget model and
           through the keyboard, a page per server, the servers taking turns every 10 changes;
           once per viewport of --viewports (default: a 1400 x 1000 desktop, whose section is
           "browser", and a 375 x 812 phone, where the controls sit above the charts:
           "browser at 375x812"), each with the speed goals of its own;
  load     navigation -> first chart drawn (median of 15 cold page loads each, the servers
           taking turns);
  sessions server memory per open session (RSS delta over 50 sessions) and time to open one;
  argument new saturation curves in the page after a temperature change, and present mode's
           "Print handout", click -> print dialog (a fresh page; again with its steps built);
  fairness a bystander's slider answers quiet, then while six sessions train at the heaviest
           setting and three loop PULL-DOC-REQ (tests/test_fairness.py's scenario, timed), and
           the ratio of their p95s, on a server of its own;
  sweep    one learning-rate sweep (core.LearningRateSweep, the chart the Training tab fills
           after Train: every rule's rates x 3 seeds x 300 steps) at d_k = 64 and 1024, 8 keys,
           s, in one thread, start to end (a served sweep also rests between its slices);
  export   `attention-scaling export OUT.html` with its defaults (4 seeds), a fresh process
           each, start to exit, s, wall time (it computes on a pool of one worker per core);
           left out with --quick.
And the machine's speed during each section: a fixed small pure-Python task timed every 0.5 s
in a separate process (this VM's CPU speed switches between two levels ~2x apart, and every
other figure moves with it). Then the speed goals, each against this run's figures (ours and
the floor's), met or not, and the sections that ran in a slow phase (also in the JSON).

Timings never fail anything: this reports. `--quick` runs few iterations (CI keeps it working).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from testkit.processes import CHROMIUM_ARGS, chromium_executable, free_port, stop_group

ROOT = Path(__file__).resolve().parents[1]

BIN = Path(sys.executable).parent
#: The session-signing key of the served app in a benchmark run (a loopback-only server),
#: and the Bokeh client's of the sessions section (Bokeh reads these when it is imported).
SESSION_KEY = "benchmark-session-key-" + "0" * 16
os.environ.update(BOKEH_SECRET_KEY=SESSION_KEY, BOKEH_SIGN_SESSIONS="true")
#: How long a page may take to answer before a run gives up on it: a report, never a pass or
#: fail, so it waits out a busy machine (or a floor server building 30 strangers' sessions).
NAVIGATION_MS = 120_000


# ---------------------------------------------------------------------------- helpers

#: Row names, written by the sections below and read by :data:`GOALS` (one spelling each).
PATCH_ROW = "control change -> patch built"
PATCH_UNCACHED_ROW = "control change -> patch built, state not cached"
LOAD_ROW = "{kind} navigation -> first chart drawn"
SESSION_CPU_ROW = "{kind} server CPU per page opened (server and its workers)"
SESSION_CPU_RATIO_ROW = "server CPU per page opened: ours / floor (median)"
WIRE_ROW = "{kind} first view on the wire beyond the static files (page + websocket)"
LINE_ROW = "{kind} first chart drawn, right after 30 page requests that never connect"
LINE_RATIO_ROW = "after 30 page requests that never connect: ours / floor (first chart, median)"
MEMORY_ROW = "memory per session"
DATA_ROW = "{kind} {mode}: data"
LOST_ROW = "{kind} {mode}: lost"
PANEL_RATIO_ROW = "{mode}: default Panel / ours (data, median)"
FLOOR_RATIO_ROW = "{mode}: ours / Bokeh floor (data, median)"
CURVES_ROW = "new saturation curves, {n_keys} keys (2,000 draws x 25 widths x 3 rules)"
CURVES_BROWSER_ROW = "temperature change -> new curves in the page, 64 keys"
FIRST_VIEW_ROW = "{tab} by its address, new session -> its chart's data ({at})"
BYSTANDER_ROW = "a bystander's d_k change -> new bars ({while_})"
EXPORT_ROW = "attention-scaling export OUT.html (4 seeds), wall time"
HANDOUT_ROW = "Print handout click -> print dialog, {page}"
FAIRNESS_ROW = "a bystander's slider answer ({while_})"
FAIRNESS_LOAD = "6 sessions train at the heaviest setting, 3 loop PULL-DOC-REQ"
FAIRNESS_RATIO_ROW = "a bystander's slider answer: loaded / quiet (p95)"
MODES = ("model paced", "model drag", "keyboard")
#: The browser section's viewports: the desktop's (section "browser") and a phone's.
DESKTOP, PHONE = "1400x1000", "375x812"


def browser_section(viewport: str) -> str:
    """The name of the browser section measured at ``viewport`` ("WIDTHxHEIGHT")."""
    return "browser" if viewport == DESKTOP else f"browser at {viewport}"


def is_browser_section(name: str) -> bool:
    return name == "browser" or name.startswith("browser at ")

#: A moment of the run was in one of this VM's slow phases when the speed probe's task took at
#: least this many times its fastest time in the run (the two speeds are ~2x apart).
SLOW_PHASE = 1.5

def pct(xs, q):
    """The q-quantile of xs, interpolated linearly between ranks (None when xs is empty);
    benchmarks/loadtest.py uses it too."""
    xs = sorted(xs)
    if not xs:
        return None
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summary(xs, unit):
    r = lambda v: None if v is None else round(v, 3)  # noqa: E731
    return {"median": r(pct(xs, 0.5)), "p95": r(pct(xs, 0.95)), "n": len(xs), "unit": unit}


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


class Served:
    """One server subprocess on a free loopback port, stopped by its PID (process group)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.port = port = free_port()
        origin = f"127.0.0.1:{port}"
        common = ["--address", "127.0.0.1", "--port", str(port)]
        if kind == "floor":
            cmd = [str(BIN / "bokeh"), "serve", str(ROOT / "benchmarks/apps/bokeh_floor.py"),
                   *common, "--allow-websocket-origin", origin]
            self.url = f"http://{origin}/bokeh_floor"
        elif kind == "panel":
            cmd = [str(BIN / "panel"), "serve", str(ROOT / "benchmarks/apps/panel_default.py"),
                   *common, "--allow-websocket-origin", origin]
            self.url = f"http://{origin}/panel_default"
        else:
            cmd = [str(BIN / "attention-scaling"), "serve", *common]
            self.url = f"http://{origin}/"
        # ours signs its session ids, with the key the sessions section's Bokeh client uses;
        # the others run as they come
        env = {k: v for k, v in os.environ.items()
               if k not in ("BOKEH_SECRET_KEY", "BOKEH_SIGN_SESSIONS")}
        if kind == "ours":
            env["ATTENTION_SCALING_SECRET_KEY"] = SESSION_KEY
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True, cwd=ROOT, env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{kind} server exited early")
                time.sleep(0.2)
        else:
            self.stop()
            raise RuntimeError(f"{kind} server did not start")

    def stop(self) -> None:
        stop_group(self.proc)


# ---------------------------------------------------------------------------- machine speed

# A separate process that runs the same small pure-Python task (~3.5 ms on this machine at its
# best) every half second and writes "wall-clock time, CPU ms taken" lines: <1% of one core.
# CPU time, not wall time: waiting for a core that the browser or a server holds is not
# counted, so what it shows is the speed of the CPU itself.
PROBE = """
import sys, time
out = open(sys.argv[1], "a", buffering=1)
while True:
    t = time.process_time()
    s = 0
    for i in range(30_000):
        s += i * i % 7
    out.write(f"{time.time():.3f} {(time.process_time() - t) * 1e3:.3f}\\n")
    time.sleep(0.5)
"""


class SpeedProbe:
    """The machine's speed through a run, section by section: this VM's CPU speed switches
    between two levels about 2x apart, for seconds to minutes at a time, and every timing in
    the table moves with it. The same fixed task, timed every 0.5 s while the run goes on,
    shows how fast the machine was during each section (its median) against the fastest seen
    in the run; the side-by-side comparisons (ratios) hold either way."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.write_text("")
        self.proc = subprocess.Popen([sys.executable, "-c", PROBE, str(path)],
                                     stdout=subprocess.DEVNULL, start_new_session=True)
        self.windows: list[tuple[str, float, float]] = []

    @contextmanager
    def section(self, name: str):
        t = time.time()
        try:
            yield
        finally:
            self.windows.append((name, t, time.time()))

    def report(self) -> dict:
        stop_group(self.proc)
        samples = []
        for line in self.path.read_text().splitlines():
            try:
                t, ms = map(float, line.split())
            except ValueError:
                continue
            samples.append((t, ms))
        out = {}
        if samples:
            best = min(ms for _, ms in samples)
            out["fastest run of the task (the machine at its best)"] = {
                "median": round(best, 3), "unit": "ms", "n": len(samples)}
            for name, t0, t1 in self.windows:
                xs = [ms for t, ms in samples if t0 <= t <= t1]
                if xs:
                    out[f"during {name}"] = summary(xs, "ms")
                    # the share of the section's samples taken in a slow phase
                    out[f"during {name}"]["slow"] = round(
                        sum(x >= SLOW_PHASE * best for x in xs) / len(xs), 2)
        return out


# ---------------------------------------------------------------------------- core + server

def bench_core(n: int) -> dict:
    from attention_scaling import core
    out = {}
    for d in (64, 4096):
        warm = []
        core.compute_state_uncached(d, 1.0, 2288)
        for i in range(n):
            t = time.perf_counter()
            core.compute_state_uncached(d, 1.0, 2288)
            warm.append((time.perf_counter() - t) * 1e6)
        cold = []
        for i in range(max(10, n // 10)):
            seed = 10_000_000 + d * 1000 + i
            t = time.perf_counter()
            core.compute_state_uncached(d, 1.0, seed)
            cold.append((time.perf_counter() - t) * 1e6)
        out[f"recompute d_k={d} warm"] = summary(warm, "µs")
        out[f"recompute d_k={d} cold (new seed)"] = summary(cold, "µs")
    hit = []
    core.compute_state(64, 1.0, 2288)
    for i in range(n):
        t = time.perf_counter()
        core.compute_state(64, 1.0, 2288)
        hit.append((time.perf_counter() - t) * 1e6)
    out["state from the cache (compute_state)"] = summary(hit, "µs")
    # the argument's Monte Carlo, each setting new (the cache emptied before each run); the
    # draws behind it are made once per process and key count, timed on their own
    for n_keys, runs in ((8, max(5, n // 20)), (64, max(5, n // 40))):
        core._curve_draws.cache_clear()
        t = time.perf_counter()
        core._curve_draws(n_keys)
        out[f"the curves' draws for {n_keys} keys (once per process)"] = {
            "median": round((time.perf_counter() - t) * 1e3, 3), "unit": "ms"}
        times = []
        for i in range(runs):
            core._saturation_curves.cache_clear()
            t = time.perf_counter()
            core.saturation_curves(core.TEMPERATURES[i % len(core.TEMPERATURES)], n_keys,
                                   core.ALIGNMENTS[i % len(core.ALIGNMENTS)])
            times.append((time.perf_counter() - t) * 1e3)
        out[CURVES_ROW.format(n_keys=n_keys)] = \
            summary(times, "ms")
    for d_k in (64, 1024):
        train = []
        for i in range(max(3, n // 50)):
            t = time.perf_counter()
            for rule in core.RULES:
                core.train_seeds(d_k, rule, 2288 + i, steps=300)
            train.append((time.perf_counter() - t) * 1e3)
        out[f"a Train: 300 steps x 3 rules x {core.TRAIN_SEEDS} seeds at d_k = {d_k}"] = \
            summary(train, "ms")
    return out


def bench_sweep(n: int) -> dict:
    """One learning-rate sweep from start to end, ``n`` times per width (never the kept one:
    each a new core.LearningRateSweep, seeds 2288 + i)."""
    from attention_scaling import core
    out = {}
    for d_k in (64, 1024):
        times = []
        for i in range(n):
            sweep = core.LearningRateSweep(d_k, 1.0, 2288 + i)
            t = time.perf_counter()
            sweep.run()
            times.append(time.perf_counter() - t)
        out[f"a learning-rate sweep at d_k = {d_k}, 8 keys, start to end"] = summary(times, "s")
    return out


def bench_export(n: int) -> dict:
    """`attention-scaling export` with its defaults, ``n`` times, each a fresh process (what a
    user runs), start to exit: wall time."""
    import tempfile
    times = []
    with tempfile.TemporaryDirectory() as folder:
        for i in range(n):
            t = time.perf_counter()
            subprocess.run([str(BIN / "attention-scaling"), "export", f"{folder}/explorer.html"],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times.append(time.perf_counter() - t)
    return {EXPORT_ROW: summary(times, "s")}


def bench_server(n: int) -> dict:
    """A control change on a live Explorer in a Bokeh Document, to the PATCH-DOC message built."""
    from bokeh.document import Document
    from bokeh.protocol import Protocol

    from attention_scaling import core, server
    from attention_scaling.page import Explorer

    server.skip_document_validation()   # as `attention-scaling serve` does
    # The change is made on the state, outside a hold: every Bokeh event reaches on_change
    # directly; the PATCH-DOC built from them is what the server would send.
    doc = Document()
    explorer = Explorer()
    doc.add_root(explorer.__panel__().get_root(doc))
    doc.to_json()   # as a session's first message (PULL-DOC) does: every model is now known
    events = []
    doc.on_change(events.append)
    proto = Protocol()
    values = list(core.D_K_VALUES)
    times, fresh, sizes = [], [], []
    gc.collect()
    for i in range(2 * n + 20):
        target = (i * 7) % len(values)
        if values[target] == explorer.state.d_k:
            target = (target + 1) % len(values)
        cached = i % 2 == 0        # alternate: the state in compute_state's cache, or not
        core._cached_state.cache_clear()
        if cached:
            st = explorer.state
            core.compute_state(values[target], st.temperature, st.seed)
        events.clear()
        t = time.perf_counter()
        explorer.state.d_k = values[target]
        msg = proto.create("PATCH-DOC", events)
        dt = (time.perf_counter() - t) * 1e6
        if i >= 20:
            (times if cached else fresh).append(dt)
            sizes.append(len(msg.content_json) + sum(len(b.to_bytes()) for b in msg.buffers))
    return {PATCH_ROW: summary(times, "µs"),
            PATCH_UNCACHED_ROW: summary(fresh, "µs"),
            "patch size": {"median": statistics.median(sizes), "unit": "bytes"}}


# ---------------------------------------------------------------------------- browser

SETUP_JS = r"""
(expected) => {
  const doc = Bokeh.documents[0];
  const models = [...doc.all_models];
  const slider = models.find(m => m.type === 'Slider' || (m.constructor && m.constructor.__name__ === 'Slider'))
  const src = doc.get_model_by_name('scaled-weights-source');
  const first = () => { const d = src.data; const w = d instanceof Map ? d.get('weight') : d.weight; return w[0]; };
  const L = {slider, src, pending: null, keyT0: null};
  const check = () => {
    const p = L.pending;
    if (!p || Math.abs(first() - expected[p.index]) > 1e-12) return;
    L.pending = null;
    const t0 = p.key ? L.keyT0 : p.t0;
    const tData = performance.now() - t0;
    // next painted frame: the task after the next animation frame; if no frame comes
    // (a hidden page gets none), report the data time alone after 1 s
    let settled = false;
    const done = (frame) => { if (!settled) { settled = true; p.resolve([tData, frame]); } };
    requestAnimationFrame(() => setTimeout(() => done(performance.now() - t0), 0));
    setTimeout(() => done(null), 1000);
  };
  src.properties.data.change.connect(check);
  src.change.connect(check);
  L.arm = (index, key) => { L.result = undefined; L.done = new Promise(resolve => {
      const finish = (r) => { L.result = r; resolve(r); };
      const mine = {index, key, t0: performance.now(), resolve: finish};
      L.pending = mine;
      // give up on THIS change after 5 s (compare the object: an old timer for the same
      // index must not cancel a newer change, which then never resolved: the "stalls")
      setTimeout(() => { if (L.pending === mine) { L.pending = null; finish(null); } }, 5000);
    }); };
  document.addEventListener('keydown', () => { L.keyT0 = performance.now(); }, true);
  window.__lat = L;
  return [models.filter(m => m.type === 'Slider').length, slider.value];
}
"""

# Started without awaiting it; Python polls window.__run with a timeout (an awaited
# page.evaluate can hang forever if the page stalls).
RUN_MODEL_JS = r"""
({indices, gap}) => {
  const L = window.__lat; window.__run = null;
  (async () => {
    const out = [];
    for (const i of indices) {
      L.arm(i, false);
      L.slider.value = i;
      out.push(await L.done);
      await new Promise(r => setTimeout(r, gap * (0.5 + Math.random())));
    }
    window.__run = out;
  })();
}
"""


def run_model(page, indices, gap, chunk=10):
    """Drive the changes in chunks; a chunk the page does not finish in time counts as lost."""
    out = []
    for k in range(0, len(indices), chunk):
        part = indices[k:k + chunk]
        page.evaluate(RUN_MODEL_JS, {"indices": part, "gap": gap})
        try:
            page.wait_for_function("() => window.__run !== null", timeout=len(part) * 6000)
            out += page.evaluate("() => window.__run")
        except Exception:  # a stalled page: count the chunk as lost, go on
            out += [None] * len(part)
            print(f"  chunk of {len(part)} changes did not finish in time", file=sys.stderr)
    return out


def _launch(p):
    exe = chromium_executable()
    return p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS) if exe \
        else p.chromium.launch(args=CHROMIUM_ARGS)


def _open(page, url):
    page.goto(url, timeout=NAVIGATION_MS)
    page.wait_for_function(
        "() => window.Bokeh && Bokeh.documents.length > 0 && "
        "Bokeh.documents[0].get_model_by_name('scaled-weights-source') && "
        "document.querySelector('body') !== null && "
        "!document.getElementById('as-first-view')", timeout=60_000)
    page.wait_for_timeout(800)


def press_keys(page, steps: int, state: dict, n_values: int) -> list:
    """``steps`` presses of ArrowRight / ArrowLeft on the focused slider handle, one at a time,
    turning at the ends (``state``: the position and direction, kept between calls); each
    press's [data, frame] times, or None if its data did not arrive."""
    out = []
    for _ in range(steps):
        if not 0 <= state["at"] + state["direction"] < n_values:
            state["direction"] = -state["direction"]
        state["at"] += state["direction"]
        page.evaluate("(i) => window.__lat.arm(i, true)", state["at"])
        page.keyboard.press("ArrowRight" if state["direction"] > 0 else "ArrowLeft")
        page.wait_for_function("() => window.__lat.result !== undefined", timeout=10_000)
        out.append(page.evaluate("() => window.__lat.result"))
        time.sleep(0.1)
    return out


#: Changes per turn when the servers take turns in the browser section.
TURN = 10


def bench_browser(servers: dict, n: int, warm: int, viewport: str = DESKTOP) -> dict:
    """One page per server, open together at ``viewport`` ("WIDTHxHEIGHT", CSS pixels); for
    each way of changing the slider, ``warm`` changes on each page, then ``n`` on each in turns
    of :data:`TURN` (the servers' order reversed every other turn), so that a change in this
    VM's speed falls on all alike."""
    width, height = (int(x) for x in viewport.split("x"))
    from playwright.sync_api import sync_playwright

    from attention_scaling import core
    values = list(core.D_K_VALUES)
    expected = [float(core.compute_state(d, 1.0, 2288).scaled.probs[0]) for d in values]
    start = values.index(64)
    # widget model: jump between widths (each step changes the data); the same for every page
    idx, cur = [], start
    for i in range(n + warm):
        cur = (cur + 1 + (i * 5) % (len(values) - 1)) % len(values)
        idx.append(cur)
    kinds = list(servers)
    results = {}

    def in_turns(mode: str, run) -> None:
        print(f"browser at {viewport}: {mode}, the servers taking turns", file=sys.stderr,
              flush=True)
        for kind in kinds:
            run(kind, 0, warm)
        got: dict[str, list] = {kind: [] for kind in kinds}
        for turn, k in enumerate(range(0, n, TURN)):
            for kind in (kinds if turn % 2 == 0 else kinds[::-1]):
                got[kind] += run(kind, warm + k, min(TURN, n - k))
        for kind, res in got.items():
            ok = [r for r in res if r]
            results[DATA_ROW.format(kind=kind, mode=mode)] = summary([r[0] for r in ok], "ms")
            results[f"{kind} {mode}: frame"] = summary(
                [r[1] for r in ok if r[1] is not None], "ms")
            results[LOST_ROW.format(kind=kind, mode=mode)] = {"median": len(res) - len(ok),
                                                              "unit": "count"}

    with sync_playwright() as p:
        browser = _launch(p)
        pages = {}
        for kind, srv in servers.items():
            pages[kind] = browser.new_page(viewport={"width": width, "height": height})
            _open(pages[kind], srv.url)
            pages[kind].evaluate(SETUP_JS, expected)
        for pace, gap in (("paced", 150), ("drag", 40)):
            in_turns(f"model {pace}",
                     lambda kind, i, m, gap=gap: run_model(pages[kind], idx[i:i + m], gap))
        # keyboard: ArrowRight / ArrowLeft on each page's focused slider handle
        keys = {}
        for kind, page in pages.items():
            page.evaluate(f"() => {{ window.__lat.slider.value = {start}; }}")
            page.wait_for_timeout(300)
            page.locator(".noUi-handle").first.focus()
            keys[kind] = {"at": start, "direction": 1}
        in_turns("keyboard", lambda kind, _i, m: press_keys(pages[kind], m, keys[kind], len(values)))
        browser.close()
    return results


# True once the scaled bar chart's view has finished drawing.
DRAWN_JS = """() => {
  try {
    const doc = window.Bokeh && Bokeh.documents[0];
    const fig = doc && doc.get_model_by_name('scaled-weights');
    const view = fig && Bokeh.index.find_one(fig);
    return view != null && view.has_finished();
  } catch (e) { return false; }
}"""


def group_cpu_s(pgid: int) -> float:
    """CPU seconds (user + system) the live processes of process group ``pgid`` have used:
    a server started with start_new_session and its worker processes."""
    hz, total = os.sysconf("SC_CLK_TCK"), 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:                    # pgrp
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / hz


#: After the first chart is drawn, how long a page open's server CPU is still counted (the
#: rest of its first view, its idle work).
SETTLE_MS = 1000


def _wire_counter(page) -> dict:
    """Bytes the page receives beyond the static files: the page's HTML as sent (encoded)
    and every websocket frame (binary frames decoded from the protocol's base64), from
    Chromium's own network events."""
    import base64
    got = {"bytes": 0}
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    documents = set()

    def sent(event):
        if event.get("type") == "Document":
            documents.add(event["requestId"])

    def finished(event):
        if event["requestId"] in documents:
            got["bytes"] += int(event["encodedDataLength"])

    def frame(event):
        r = event["response"]
        data = r.get("payloadData", "")
        got["bytes"] += (len(base64.b64decode(data)) if r.get("opcode") == 2
                         else len(data.encode()))
    cdp.on("Network.requestWillBeSent", sent)
    cdp.on("Network.loadingFinished", finished)
    cdp.on("Network.webSocketFrameReceived", frame)
    return got


def bench_load(servers: dict, n: int) -> dict:
    """Cold page loads (a fresh browser context each), the servers taking turns: round i loads
    each once, in reverse order every other round, so a change in this VM's speed during
    the section falls on all of them alike. Round 0 is a warm-up. Per load also the server's
    CPU (its process group, from navigation to :data:`SETTLE_MS` after the first chart) and
    what the page received beyond the static files (:func:`_wire_counter`)."""
    from playwright.sync_api import sync_playwright
    times: dict[str, list] = {kind: [] for kind in servers}
    cpu: dict[str, list] = {kind: [] for kind in servers}
    wire: dict[str, list] = {kind: [] for kind in servers}
    with sync_playwright() as p:
        browser = _launch(p)
        for i in range(n + 1):
            for kind in (list(servers) if i % 2 else list(servers)[::-1]):
                ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
                page = ctx.new_page()
                counted = _wire_counter(page)
                before = group_cpu_s(servers[kind].proc.pid)
                page.goto(servers[kind].url, wait_until="commit", timeout=NAVIGATION_MS)
                page.wait_for_function(DRAWN_JS, polling="raf", timeout=60_000)
                t = page.evaluate("() => performance.now()")   # ms since navigation start
                page.wait_for_timeout(SETTLE_MS)
                if i:
                    times[kind].append(t)
                    cpu[kind].append(1e3 * (group_cpu_s(servers[kind].proc.pid) - before))
                    wire[kind].append(counted["bytes"] / 1e3)
                ctx.close()
        browser.close()
    rows = {}
    for kind in servers:
        rows[LOAD_ROW.format(kind=kind)] = summary(times[kind], "ms")
        rows[SESSION_CPU_ROW.format(kind=kind)] = summary(cpu[kind], "ms")
        rows[WIRE_ROW.format(kind=kind)] = summary(wire[kind], "KB")
    if cpu.get("ours") and cpu.get("floor"):
        exact = pct(cpu["ours"], 0.5) / pct(cpu["floor"], 0.5)
        rows[SESSION_CPU_RATIO_ROW] = {"median": round(exact, 2), "exact": exact, "n": n,
                                       "unit": "x"}
    return rows


def _get_only(url: str, count: int) -> list:
    """``count`` page requests that read their page and never open its websocket, under
    way on threads of their own (joined by the caller)."""
    import threading
    import urllib.request

    def get() -> None:
        try:
            with urllib.request.urlopen(url, timeout=120) as resp:
                resp.read()
        except OSError:
            pass
    threads = [threading.Thread(target=get, daemon=True) for _ in range(count)]
    for t in threads:
        t.start()
    return threads


def bench_line(servers: dict, n: int) -> dict:
    """A student arriving right after 30 page requests that never open a websocket (a page
    saved or prefetched, a crawler): from navigation to the first chart drawn, the floor and
    ours taking turns as in :func:`bench_load`; the ratio of the medians (goal 1.5x: such
    requests hold no place in the opening line, tests/test_security.py)."""
    from playwright.sync_api import sync_playwright
    kinds = [k for k in ("floor", "ours") if k in servers]
    times: dict[str, list] = {kind: [] for kind in kinds}
    with sync_playwright() as p:
        browser = _launch(p)
        for i in range(n + 1):
            for kind in (kinds if i % 2 else kinds[::-1]):
                strangers = _get_only(servers[kind].url, 30)
                time.sleep(0.2)                      # the strangers' requests are in
                ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
                page = ctx.new_page()
                page.goto(servers[kind].url, wait_until="commit", timeout=NAVIGATION_MS)
                page.wait_for_function(DRAWN_JS, polling="raf", timeout=120_000)
                t = page.evaluate("() => performance.now()")
                if i:
                    times[kind].append(t)
                ctx.close()
                for t_ in strangers:
                    t_.join(120)
        browser.close()
    rows = {LINE_ROW.format(kind=kind): summary(v, "ms") for kind, v in times.items()}
    if len(kinds) == 2 and times["floor"] and times["ours"]:
        ratio = pct(times["ours"], 0.5) / pct(times["floor"], 0.5)
        rows[LINE_RATIO_ROW] = {"median": round(ratio, 3), "p95": None, "n": n, "unit": "x"}
    return rows


#: A control's changes (``slider`` set to each of ``positions`` from JavaScript), each timed
#: until ``source``'s ``column`` holds new data (null after ``wait`` ms), ``gap`` ms apart: a
#: temperature on the Saturation tab at 64 keys (a new Monte Carlo each: every temperature is
#: new to the server's cache once), or the width on the one draw.
CURVES_JS = r"""
async ({slider, source, column, positions, wait, gap}) => {
  const doc = Bokeh.documents[0];
  const control = doc.get_model_by_name(slider);
  const src = doc.get_model_by_name(source);
  const col = () => { const d = src.data; const v = d instanceof Map ? d.get(column) : d[column]; return JSON.stringify(Array.from(v)); };
  const out = [];
  for (const p of positions) {
    const before = col();
    const t0 = performance.now();
    const changed = new Promise(res => { const f = () => { if (col() !== before) { src.properties.data.change.disconnect(f); res(performance.now() - t0); } }; src.properties.data.change.connect(f); });
    control.value = p;
    out.push(await Promise.race([changed, new Promise(r => setTimeout(() => r(null), wait))]));
    await new Promise(r => setTimeout(r, gap));
  }
  return out;
}
"""


def bench_curves(srv: Served, n: int) -> dict:
    """New saturation curves in the browser: a temperature change on the Saturation tab at 64
    keys, to the new curves' data in the page (server Monte Carlo, message, BokehJS)."""
    from playwright.sync_api import sync_playwright

    from attention_scaling import core
    start = core.TEMPERATURES.index(1.0)
    # every other position, out from T = 1: each one new to the server
    order = [p for k in range(1, len(core.TEMPERATURES)) for p in (start + k, start - k)
             if 0 <= p < len(core.TEMPERATURES)][:n]
    with sync_playwright() as p:
        browser = _launch(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        _open(page, srv.url + "?tab=saturation&keys=64")
        page.wait_for_function("() => Bokeh.documents[0].get_model_by_name("
                               "'saturation-curves-source') !== null", timeout=60_000)
        times = page.evaluate(CURVES_JS, dict(
            slider="temperature", source="saturation-curves-source",
            column="max_weight_median_sqrt", positions=order, wait=10_000, gap=300))
        browser.close()
    ok = [t for t in times if t is not None]
    return {CURVES_BROWSER_ROW: summary(ok, "ms"),
            "new curves in the page, 64 keys: lost": {"median": len(times) - len(ok),
                                                      "unit": "count"}}


#: Each argument tab's main source, whose data says that the tab's chart has been drawn.
TAB_SOURCES = {"variance": "logit-histogram-source", "saturation": "saturation-curves-source",
               "gradient": "saturation-curves-source", "budget": "head-budget-source"}

#: Until the named source holds more than one row (a drawn chart).
HAS_DATA_JS = """(name) => { const d = window.Bokeh && Bokeh.documents[0];
  const m = d && d.get_model_by_name(name); if (!m) return false;
  const v = Object.values(m.data instanceof Map ? Object.fromEntries(m.data) : m.data)[0];
  return !!v && v.length > 1; }"""


def _new_settings():
    """Settings of (T, keys, alignment) nobody asked for, one after another (the defaults'
    T = 1 and 8 keys left out, and the half temperatures a question looks at)."""
    from attention_scaling import core
    for align in core.ALIGNMENTS[1:]:
        for keys in core.KEY_COUNTS[::-1]:
            for t in core.TEMPERATURES[::2]:
                if keys != core.N_KEYS:
                    yield t, keys, align


def bench_views(srv: Served, n: int) -> dict:
    """Each argument tab opened by its address in a new session (a new browser context):
    from navigation to its chart's data, at the defaults and at settings nobody asked for
    before. The first view of each tab at the defaults is left out (the server may still be
    warming its worker pool)."""
    from playwright.sync_api import sync_playwright
    settings = _new_settings()
    rows: dict = {}
    with sync_playwright() as p:
        browser = _launch(p)
        for tab, source in TAB_SOURCES.items():
            for at in ("defaults", "a new setting"):
                times = []
                for i in range(n + (at == "defaults")):
                    query = f"?tab={tab}"
                    if at != "defaults":
                        t, keys, align = next(settings)
                        query += f"&temperature={t}&keys={keys}&align={align}"
                    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
                    page = ctx.new_page()
                    page.goto(srv.url + query, wait_until="commit", timeout=NAVIGATION_MS)
                    page.wait_for_function(HAS_DATA_JS, arg=source, polling="raf",
                                           timeout=120_000)
                    ms = page.evaluate("() => performance.now()")
                    ctx.close()
                    if at != "defaults" or i:
                        times.append(ms)
                rows[FIRST_VIEW_ROW.format(tab=tab, at=at)] = summary(times, "ms")
        browser.close()
    return rows


#: Another student walking the Saturation tab through settings nobody asked for, one
#: message each, waiting for each one's curves, until window.__stop.
WALK_JS = r"""
(steps) => { (async () => {
  const doc = Bokeh.documents[0];
  const by = (n) => doc.get_model_by_name(n);
  const src = by('saturation-curves-source');
  const col = () => JSON.stringify(Array.from(src.data instanceof Map ? src.data.get('max_weight_median_sqrt') : src.data.max_weight_median_sqrt));
  for (const [t, k, a] of steps) {
    if (window.__stop) break;
    const before = col();
    by('temperature').value = t; by('keys').value = k; by('align').value = a;
    const end = performance.now() + 20000;
    while (col() === before && performance.now() < end && !window.__stop)
      await new Promise(r => setTimeout(r, 20));
  }
})(); }
"""


def bench_bystander(srv: Served, n: int) -> dict:
    """A student's d_k change on the one draw, quiet and while another session walks the
    Saturation tab's temperature, keys and alignment through settings nobody asked for."""
    from playwright.sync_api import sync_playwright

    from attention_scaling import core
    index = {v: i for i, v in enumerate(core.D_K_VALUES)}
    positions = [index[w] for w in (128, 256, 64, 512, 32)] * (n // 5 + 1)
    steps = [(core.TEMPERATURES.index(t), core.KEY_COUNTS.index(k), core.ALIGNMENTS.index(a))
             for t, k, a in _new_settings()]
    rows = {}
    with sync_playwright() as p:
        browser = _launch(p)
        bystander = browser.new_page(viewport={"width": 1400, "height": 1000})
        _open(bystander, srv.url)
        walker = browser.new_page(viewport={"width": 1400, "height": 1000})
        walker.goto(srv.url + "?tab=saturation", timeout=NAVIGATION_MS)
        walker.wait_for_function(HAS_DATA_JS, arg="saturation-curves-source", timeout=120_000)
        bars = dict(slider="d_k", source="scaled-weights-source", column="weight",
                    positions=positions[:n], wait=20_000, gap=200)
        rows[BYSTANDER_ROW.format(while_="quiet")] = summary(
            [t for t in bystander.evaluate(CURVES_JS, bars) if t is not None], "ms")
        walker.evaluate(WALK_JS, steps[100:])
        times = bystander.evaluate(CURVES_JS, bars)
        walker.evaluate("() => { window.__stop = true; }")
        rows[BYSTANDER_ROW.format(while_="another session walks new curves")] = summary(
            [t for t in times if t is not None], "ms")
        browser.close()
    return rows


#: Print handout's click to window.print (overridden: the time it was called, no dialog).
HANDOUT_INIT = """window.__printedAt = [];
window.print = () => { window.__printedAt.push(performance.now()); };"""


def bench_handout(srv: Served, n: int) -> dict:
    """Present mode's "Print handout" (assets/js/present.js), click to the print dialog: on a
    fresh page opened on the one draw (the argument's steps built, asked and answered, the
    training run pressed and waited for up to its bound), then again on that page (every
    step there already), ``n`` fresh pages."""
    from playwright.sync_api import sync_playwright
    times: dict[str, list] = {"fresh page": [], "steps already built": []}
    with sync_playwright() as p:
        browser = _launch(p)
        for _ in range(n):
            ctx = browser.new_context(viewport={"width": 1280, "height": 720})
            page = ctx.new_page()
            page.add_init_script(HANDOUT_INIT)
            _open(page, srv.url + "?present=1")
            button = page.get_by_role("button", name="Print handout")
            for kind in times:
                printed = page.evaluate("() => window.__printedAt.length")
                start = page.evaluate("() => performance.now()")
                button.click()
                page.wait_for_function("(n) => window.__printedAt.length > n", arg=printed,
                                       timeout=240_000)
                times[kind].append(page.evaluate("() => window.__printedAt.at(-1)") - start)
                page.evaluate("() => window.dispatchEvent(new Event('afterprint'))")
                page.wait_for_timeout(1000)
            ctx.close()
        browser.close()
    return {HANDOUT_ROW.format(page=kind): summary(v, "ms") for kind, v in times.items()}


def bench_fairness() -> dict:
    """tests/test_fairness.py's scenario (testkit.fairness), timed: a bystander's slider answers (CHANGES of them)
    quiet, then while six sessions train at the heaviest setting and three loop PULL-DOC-REQ,
    on one server of its own; and the ratio of their p95s (goal: at most 2)."""
    from testkit.fairness import bystander_under_load
    srv = Served("ours")
    try:
        result = bystander_under_load(srv.url, trainers=6, pullers=3)
    finally:
        srv.stop()
    ms = lambda xs: [x * 1e3 for x in xs]  # noqa: E731
    rows = {FAIRNESS_ROW.format(while_="quiet"): summary(ms(result["quiet"]), "ms"),
            FAIRNESS_ROW.format(while_=FAIRNESS_LOAD): {
                **summary(ms(result["loaded"]), "ms"),
                "answered": result["answered"], "pulls": result["pulls"]}}
    quiet, loaded = pct(result["quiet"], 0.95), pct(result["loaded"], 0.95)
    if quiet and loaded is not None:
        rows[FAIRNESS_RATIO_ROW] = {"median": round(loaded / quiet, 2), "exact": loaded / quiet,
                                    "unit": "x"}
    return rows


#: Section *document*'s rows: a whole session's document, and each part's share of it.
DOCUMENT_ROWS = ("a session's document: built (serve_session)", "a session's document: sent "
                 "(serialised for PULL-DOC)", "a session's document: models",
                 "a session's document: JSON")


def _own_sizes(doc_json) -> dict:
    """Each model's own bytes in a document's JSON, by id: its definition with the models it
    defines inside it written as references (each model is defined once, where it is first
    referred to)."""
    from bokeh.core.json_encoder import serialize_json

    def cut(o):
        if isinstance(o, dict):
            if o.get("type") == "object" and "id" in o and len(o) > 1:
                return {"id": o["id"]}
            return {k: cut(v) for k, v in o.items()}
        return [cut(v) for v in o] if isinstance(o, (list, tuple)) else o

    sizes, stack = {}, [doc_json]
    while stack:
        o = stack.pop()
        if isinstance(o, dict):
            if o.get("type") == "object" and "id" in o and len(o) > 1:
                sizes[o["id"]] = len(serialize_json({k: cut(v) for k, v in o.items()}))
            stack.extend(o.values())
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
    return sizes


def document_parts(doc, every: set) -> list[tuple[str, set]]:
    """A served session's document cut into the parts a reader sees, in order: the title
    bar, the controls, the notes, each block of the open tab (named by its named models),
    then the rest (the tabs' bar and placeholders, the page's programs);
    each part the ids of the models first reached from it, so that the parts partition
    ``every`` (the ids of the models the document's JSON holds: those of its roots, and
    those its own programs are given)."""
    def having(css: str):
        return next(m for m in doc.models if css in getattr(m, "css_classes", ()))

    def label(model) -> str:
        names = [m.name for i in _held([model], set()) if (m := doc.get_model_by_id(i)).name
                 and type(m).__name__ in ("figure", "Div", "Button")]
        return ", ".join(sorted(names)) or type(model).__name__

    body = having("app-body")
    root = next(m for m in doc.models if body in getattr(m, "children", ()))
    tabs = doc.get_model_by_name("sections")
    parts = [("title bar", [c for c in root.children if c is not body]),
             ("controls", [having("app-sidebar")]), ("notes (theme, presets)",
                                                    [having("app-notes")])]
    parts += [(f"open tab: {label(child)}", [child])
              for child in tabs.tabs[tabs.active].child.children]
    seen, out = set(), []
    for name, models in parts:
        ids = _held(models, seen)
        seen |= ids
        out.append((name, ids))
    out.append(("the rest (tabs, the page's programs)", every - seen))
    return out


#: Properties through which a model runs or names others rather than holding them: a part
#: holds the programs attached to it, not the models those programs are given.
_NOT_HELD = {"js_property_callbacks", "js_event_callbacks", "args", "tags"}


def _held(models, seen: set) -> set:
    """The ids of ``models`` and of every model they hold, not already in ``seen``."""
    from bokeh.model import Model
    from bokeh.model.util import visit_value_and_its_immediate_references
    found, stack = set(), list(models)
    while stack:
        model = stack.pop()
        if model.id in seen or model.id in found:
            continue
        found.add(model.id)
        for name, value in model.properties_with_values(include_defaults=False).items():
            if name not in _NOT_HELD:
                visit_value_and_its_immediate_references(
                    value, lambda m: stack.append(m) if isinstance(m, Model) else None)
    return found


def session_document():
    """A session's document at the defaults, built as `attention-scaling serve` builds it
    (page.serve_session: without the programs' library, which the page loads as a file)."""
    import panel as pn
    from bokeh.document import Document

    from attention_scaling import page
    doc = Document()
    pn.state.curdoc = doc
    try:
        page.serve_session()
    finally:
        pn.state.curdoc = None
    return doc


def bench_document(n: int) -> dict:
    """What each part of a session's document costs: a session's page built as the server
    builds it (:func:`session_document`) and serialised as its first message sends it, the
    whole timed n times (CPU); then each part's models and bytes of JSON
    (:func:`document_parts`; a part's bytes include the references it holds to others)."""
    from bokeh.core.json_encoder import serialize_json

    from attention_scaling import server

    server.skip_document_validation()   # as `attention-scaling serve` does
    session_document()      # imports, caches, the state's first compute
    built, sent = [], []
    for _ in range(n):
        gc.collect()
        t = time.process_time()
        doc = session_document()
        built.append((time.process_time() - t) * 1e3)
        t = time.process_time()
        doc_json = doc.to_json(deferred=False)
        text = serialize_json(doc_json)
        sent.append((time.process_time() - t) * 1e3)
    sizes = _own_sizes(doc_json)
    out = {DOCUMENT_ROWS[0]: summary(built, "ms CPU"), DOCUMENT_ROWS[1]: summary(sent, "ms CPU"),
           DOCUMENT_ROWS[2]: {"median": len(sizes), "n": 1, "unit": "models"},
           DOCUMENT_ROWS[3]: {"median": round(len(text) / 1e3, 1), "n": 1, "unit": "KB"}}
    for name, ids in document_parts(doc, set(sizes)):
        kb = sum(sizes.get(i, 0) for i in ids) / 1e3
        out[f"part: {name}"] = {"median": round(kb, 1), "n": 1, "unit": f"KB, {len(ids)} models"}
    return out


def bench_sessions(srv: Served, n_sessions: int) -> dict:
    """RSS growth of the server per open session, and time to open one (HTTP page + websocket)."""
    from bokeh.client import pull_session
    url = srv.url.rstrip("/") + "/"
    # warm up: imports, first document
    with urllib.request.urlopen(url, timeout=60) as r:
        r.read()
    time.sleep(1)
    base = rss_kib(srv.proc.pid)
    sessions, open_ms = [], []
    for _ in range(n_sessions):
        t = time.perf_counter()
        sessions.append(pull_session(url=url))
        open_ms.append((time.perf_counter() - t) * 1e3)
    time.sleep(1)
    after = rss_kib(srv.proc.pid)
    for s in sessions:
        s.close()
    per = (after - base) / n_sessions / 1024
    return {MEMORY_ROW: {"median": round(per, 3), "unit": "MiB",
                                   "n": n_sessions, "rss_before_MiB": round(base / 1024, 1),
                                   "rss_after_MiB": round(after / 1024, 1)},
            "time to open a session": summary(open_ms, "ms")}


# ---------------------------------------------------------------------------- report

def table(results: dict) -> str:
    lines = [f"{'measure':58} {'median':>10} {'p95':>10}  unit"]
    for section, rows in results.items():
        if not isinstance(rows, dict) or not any(
                isinstance(r, dict) and "median" in r for r in rows.values()):
            continue            # the machine's description, the goals (printed after)
        lines.append(f"-- {section}")
        for name, r in rows.items():
            if isinstance(r, dict) and "median" in r:
                p95 = r.get("p95")
                lines.append(f"{name:58} {r['median']:>10} {'' if p95 is None else p95:>10}  {r['unit']}")
    return "\n".join(lines)


def ratios(b: dict) -> dict:
    """Default Panel against ours and ours against the floor, for whichever servers ran. Each
    row keeps its unrounded value (``exact``) for the goals."""
    out = {}
    for mode in MODES:
        data = {kind: b.get(DATA_ROW.format(kind=kind, mode=mode), {}).get("median")
                for kind in ("ours", "panel", "floor")}
        for row, num, den in ((PANEL_RATIO_ROW, "panel", "ours"), (FLOOR_RATIO_ROW, "ours", "floor")):
            if data[num] and data[den]:
                exact = data[num] / data[den]
                out[row.format(mode=mode)] = {"median": round(exact, 2), "exact": exact, "unit": "x"}
    return out


#: The speed goals: (goal, section, our row, the floor's row or None, the row counting
#: lost changes (``{kind}`` for ours or the floor) or None, statistic, limit, at least (True)
#: or at most). Each is read from this run's own figures by :func:`goals`.
GOALS = [
    *[(f"{mode}: new data {stat} <= {limit} ms", "browser", DATA_ROW.format(kind="ours", mode=mode),
       DATA_ROW.format(kind="floor", mode=mode), LOST_ROW.format(kind="{kind}", mode=mode),
       stat, limit, False)
      for mode in MODES for stat, limit in (("median", 10), ("p95", 15))],
    *[(f"{mode}: >= 6x faster than default Panel", "browser", PANEL_RATIO_ROW.format(mode=mode),
       None, None, "exact", 6, True) for mode in MODES],
    *[(f"{mode}: within 1.1x of the Bokeh floor", "browser", FLOOR_RATIO_ROW.format(mode=mode),
       None, None, "exact", 1.1, False) for mode in MODES],
    ("server: change -> patch built <= 1 ms (state cached)", "server", PATCH_ROW, None, None,
     "median", 1000, False),
    ("server: the same, state not cached", "server", PATCH_UNCACHED_ROW, None, None,
     "median", 1000, False),
    ("page load: first chart drawn <= 1.5 s", "load", LOAD_ROW.format(kind="ours"),
     LOAD_ROW.format(kind="floor"), None, "median", 1500, False),
    ("server CPU per page opened: <= 1.0x the floor", "load", SESSION_CPU_RATIO_ROW, None,
     None, "exact", 1.0, False),
    ("first view on the wire beyond the static files: <= 300 KB", "load",
     WIRE_ROW.format(kind="ours"), WIRE_ROW.format(kind="floor"), None, "median", 300, False),
    ("page load after 30 requests that never connect: <= 1.5x the floor", "load",
     LINE_RATIO_ROW, None, None, "median", 1.5, False),
    ("memory per session <= 2 MiB", "sessions", MEMORY_ROW, None, None, "median", 2, False),
    *[(f"new curves, {n} keys: p95 <= 250 ms", "core", CURVES_ROW.format(n_keys=n), None,
       None, "p95", 250, False) for n in (8, 64)],
    ("new curves in the page, 64 keys: p95 <= 250 ms", "argument", CURVES_BROWSER_ROW, None,
     None, "p95", 250, False),
    *[(f"{tab} by its address: p95 <= {limit} s ({at})", "views",
       FIRST_VIEW_ROW.format(tab=tab, at=at), None, None, "p95", limit * 1000, False)
      for tab in TAB_SOURCES for at, limit in (("defaults", 3), ("a new setting", 5))],
    ("offline export written <= 20 s", "export", EXPORT_ROW, None, None, "median", 20, False),
    ("a bystander's answer under training and pulls: p95 <= 2x its quiet p95", "fairness",
     FAIRNESS_RATIO_ROW, None, None, "exact", 2, False),
]


def goals(results: dict) -> dict:
    """Each speed goal against this run's figures: our value, the plain-Bokeh floor's
    where it has one (the same goal for the floor, measured side by side), and whether each is
    met: True, False, or None when not measured. A goal of a section this run left out is left
    out; a figure missing from a section that ran (a server not run, every change lost) is
    "not measured", and a change lost on the way counts against its goal."""
    # each section's rows, the browser's with its ratios (unrounded, whichever servers ran)
    sections = {name: dict(rows) for name, rows in results.items() if isinstance(rows, dict)}
    browsers = [name for name in sections if is_browser_section(name)]
    for name in browsers:
        sections[name].update(ratios(results[name]))
    # the browser's goals once per viewport measured, named after it but the desktop's
    expanded = []
    for goal in GOALS:
        if goal[1] != "browser":
            expanded.append(goal)
            continue
        for section in browsers or ["browser"]:
            at = section.removeprefix("browser").strip()
            expanded.append((goal[0] + (f" ({at})" if at else ""), section, *goal[2:]))
    out = {}
    for name, section, ours_row, floor_row, lost_row, stat, limit, at_least in expanded:
        if section not in sections:
            continue
        rows = sections[section]

        def verdict(row, kind):
            if not row:
                return None, None, ""               # no such figure for the floor
            value = rows.get(row, {}).get(stat)
            lost = rows.get(lost_row.format(kind=kind), {}).get("median") if lost_row else None
            if lost:
                return value, False, f"{lost} changes lost"
            if value is None:
                return None, None, ""
            return value, (value >= limit if at_least else value <= limit), ""

        ours, met, note = verdict(ours_row, "ours")
        floor, floor_met, floor_note = verdict(floor_row, "floor")
        out[name] = {"ours": None if ours is None else round(ours, 3),
                     "floor": None if floor is None else round(floor, 3),
                     "limit": limit, "unit": rows.get(ours_row, {}).get("unit", ""),
                     "met": met, "floor_met": floor_met,
                     "note": "; ".join(n for n in (note, floor_note and "floor " + floor_note) if n)}
    return out


def slow_phases(speed: dict) -> dict:
    """Section -> the share of the speed probe's samples during it taken in a slow phase."""
    return {key.removeprefix("during "): row["slow"]
            for key, row in speed.items() if key.startswith("during ") and "slow" in row}


def goals_table(met: dict, phases: dict) -> str:
    """The goals as printed under the table: ours and the floor's value, and which meets it."""
    if not met:
        return ""
    yes = lambda ok: "-" if ok is None else ("yes" if ok else "NO")  # noqa: E731
    w = max(54, *(len(name) for name in met))
    lines = [f"{'goal, this run':{w}} {'ours':>13} {'floor':>13}  met: ours  floor"]
    for name, g in met.items():
        ours, floor = (f"{v} {g['unit']}" if v is not None else "" for v in (g["ours"], g["floor"]))
        lines.append(f"{name:{w}} {ours or 'not measured':>13} {floor:>13}  "
                     f"{yes(g['met']):>9}  {yes(g['floor_met']):>5}"
                     + (f"  ({g['note']})" if g["note"] else ""))
    judged = [g["met"] for g in met.values() if g["met"] is not None]
    lines.append(f"met by ours: {sum(judged)} of {len(judged)}"
                 + (f" ({len(met) - len(judged)} not measured)" if len(judged) < len(met) else ""))
    slow = [f"{name} {share:.0%}" for name, share in phases.items() if share > 0]
    if slow:
        lines.append(f"samples in a slow phase (the probe's task at >= {SLOW_PHASE}x its "
                     "fastest), by section: " + ", ".join(slow))
    return "\n".join(lines)


def run_sections(results: dict, sections: set, probe: SpeedProbe, kinds: str,
                 quick: bool, viewports=(DESKTOP, PHONE)) -> None:
    """The sections asked for, into ``results``, each timed by the speed probe; the browser
    section once per viewport of ``viewports``."""
    n_core, n_srv, n_browser, warm, n_load, n_sess = (
        (50, 30, 12, 4, 3, 5) if quick else (2000, 500, 100, 20, 15, 50))
    if "core" in sections:
        with probe.section("core"):
            results["core"] = bench_core(n_core)
    if "server" in sections:
        with probe.section("server"):
            results["server"] = bench_server(n_srv)
    if "document" in sections:
        with probe.section("document"):
            results["document"] = bench_document(5 if quick else 30)
    servers = {}
    try:
        if sections & {"browser", "load"}:
            for kind in kinds.split(","):
                servers[kind] = Served(kind)
        if "browser" in sections:
            for viewport in viewports:
                name = browser_section(viewport)
                with probe.section(name):
                    results[name] = bench_browser(servers, n_browser, warm, viewport)
                results[name.replace("browser", "ratios", 1)] = ratios(results[name])
        if "load" in sections:
            with probe.section("load"):
                results["load"] = bench_load(servers, n_load)
                results["load"].update(bench_line(servers, n_load))
    finally:
        for srv in servers.values():
            srv.stop()
    if "argument" in sections:
        srv = Served("ours")
        try:
            with probe.section("argument"):
                results["argument"] = bench_curves(srv, 8 if quick else 20)
                results["argument"].update(bench_handout(srv, 1 if quick else 5))
        finally:
            srv.stop()
    if sections & {"views", "bystander"}:
        srv = Served("ours")
        try:
            if "views" in sections:
                with probe.section("views"):
                    results["views"] = bench_views(srv, 3 if quick else 20)
            if "bystander" in sections:
                with probe.section("bystander"):
                    results["bystander"] = bench_bystander(srv, 10 if quick else 50)
        finally:
            srv.stop()
    if "sweep" in sections:
        with probe.section("sweep"):
            results["sweep"] = bench_sweep(2 if quick else 5)
    if "fairness" in sections:
        with probe.section("fairness"):
            results["fairness"] = bench_fairness()
    if "export" in sections and not quick:
        with probe.section("export"):
            results["export"] = bench_export(3)
    if "sessions" in sections:
        srv = Served("ours")
        try:
            with probe.section("sessions"):
                results["sessions"] = bench_sessions(srv, n_sess)
        finally:
            srv.stop()


def _viewports(text: str) -> list[str]:
    out = []
    for item in text.split(","):
        try:
            width, height = (int(x) for x in item.strip().split("x"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r}: use WIDTHxHEIGHT, e.g. {PHONE}")
        if not (200 <= width <= 4000 and 200 <= height <= 4000):
            raise argparse.ArgumentTypeError(f"{item!r}: 200 to 4000 pixels each way")
        out.append(f"{width}x{height}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="few iterations (CI: keep it working)")
    ap.add_argument("--out", type=Path, default=None, help="JSON output path")
    ap.add_argument("--servers", default="floor,panel,ours",
                    help="which servers to compare in the browser (default floor,panel,ours)")
    ap.add_argument("--sections",
                    default="core,server,document,browser,load,argument,views,bystander,"
                            "fairness,sessions,sweep,export",
                    help="which sections to run (default: all)")
    ap.add_argument("--viewports", default=f"{DESKTOP},{PHONE}", type=_viewports,
                    help="the browser section's viewports, WIDTHxHEIGHT in CSS pixels, "
                         f"comma-separated (default {DESKTOP},{PHONE}: a desktop and a phone)")
    args = ap.parse_args(argv)
    sections = set(args.sections.split(","))

    results = {"machine": {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(), "platform": platform.platform(),
        "cpus": os.cpu_count(), "quick": args.quick,
    }}
    import bokeh
    import numpy
    import panel
    results["machine"].update(panel=panel.__version__, bokeh=bokeh.__version__,
                              numpy=numpy.__version__)
    out = args.out or ROOT / "benchmarks" / "results" / (
        "quick.json" if args.quick else "latest.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    speed_key = "machine speed (a fixed pure-Python task, ms; lower is faster)"
    results[speed_key] = {}     # printed first
    probe = SpeedProbe(out.with_suffix(".speed.txt"))
    try:
        run_sections(results, sections, probe, args.servers, args.quick, args.viewports)
    finally:
        results[speed_key] = probe.report()
    results["goals"] = goals(results)
    results["slow phases"] = slow_phases(results[speed_key])
    out.write_text(json.dumps(results, indent=2))
    print(table(results))
    print("\n" + goals_table(results["goals"], results["slow phases"]))
    print(f"\nJSON: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
