"""The benchmark's verdict on the speed goals (benchmarks/run.py: goals, slow_phases,
goals_table), checked on figures written out by hand, so each row's value, its side (at most /
at least) and its boundary are known exactly. The row names are the ones the benchmark's
sections write (run.py's *_ROW constants, used by both)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_run", ROOT / "benchmarks" / "run.py")
run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run)

BEST = "fastest run of the task (the machine at its best)"


def row(median, p95=None, unit="ms"):
    return {"median": median, "p95": p95, "unit": unit}


def data(kind, mode):
    return run.DATA_ROW.format(kind=kind, mode=mode)


def lost(kind, mode):
    return run.LOST_ROW.format(kind=kind, mode=mode)


def figures(**over):
    """A whole run's figures: every goal met by ours exactly at its limit."""
    browser = {}
    for mode in run.MODES:
        browser[data("ours", mode)] = row(10, 15)
        browser[data("floor", mode)] = row(10.01, 14)
        browser[data("panel", mode)] = row(60, 70)
        for kind in ("ours", "floor", "panel"):
            browser[lost(kind, mode)] = {"median": 0, "unit": "count"}
    results = {
        "browser": browser,
        "server": {run.PATCH_ROW: row(1000, 1400, "µs"),
                   run.PATCH_UNCACHED_ROW: row(999.9, 1500, "µs")},
        "load": {run.LOAD_ROW.format(kind="ours"): row(1500, 1900),
                 run.LOAD_ROW.format(kind="floor"): row(1500.1, 1900),
                 run.LINE_RATIO_ROW: row(1.5, unit="x"),
                 run.SESSION_CPU_RATIO_ROW: {"median": 1.0, "exact": 1.0, "unit": "x"},
                 run.WIRE_ROW.format(kind="ours"): row(300, 300, "KB"),
                 run.WIRE_ROW.format(kind="floor"): row(48, 48, "KB")},
        "sessions": {run.MEMORY_ROW: row(2, unit="MiB")},
    }
    for section, rows in over.items():
        results[section].update(rows)
    results["ratios"] = run.ratios(results["browser"])
    return results


def missed(got):
    return sorted(name for name, g in got.items() if g["met"] is False)


def test_every_goal_is_read_and_a_value_at_its_limit_meets_it():
    got = run.goals(figures())
    assert len(got) == 19
    assert all(g["met"] is True for g in got.values()), missed(got)
    # ratios: 60 / 10 = 6.0x, exactly the "at least 6x"
    assert got["keyboard: >= 6x faster than default Panel"]["ours"] == 6.0
    assert got["server: change -> patch built <= 1 ms (state cached)"]["unit"] == "µs"
    assert got["server: the same, state not cached"]["ours"] == 999.9


def test_just_past_a_limit_is_missed_on_the_right_side():
    got = run.goals(figures(
        browser={data("ours", "keyboard"): row(10.01, 15.01),      # 60 / 10.01 = 5.994x
                 data("panel", "model drag"): row(59.995, 70)},    # 5.9995x: 6.0 rounded
        load={run.LOAD_ROW.format(kind="ours"): row(1500.1),
              run.SESSION_CPU_RATIO_ROW: {"median": 1.0, "exact": 1.004, "unit": "x"},
              run.WIRE_ROW.format(kind="ours"): row(300.1, unit="KB")},
        server={run.PATCH_UNCACHED_ROW: row(1000.5, unit="µs")},
        sessions={run.MEMORY_ROW: row(2.001, unit="MiB")}))
    assert missed(got) == sorted([
        "keyboard: new data median <= 10 ms", "keyboard: new data p95 <= 15 ms",
        "keyboard: >= 6x faster than default Panel",
        "model drag: >= 6x faster than default Panel",   # judged unrounded
        "page load: first chart drawn <= 1.5 s",
        "server CPU per page opened: <= 1.0x the floor",       # judged unrounded
        "first view on the wire beyond the static files: <= 300 KB",
        "server: the same, state not cached",
        "memory per session <= 2 MiB"])


def test_the_floor_is_judged_by_the_same_goal_side_by_side():
    got = run.goals(figures())
    paced = got["model paced: new data median <= 10 ms"]
    assert (paced["floor"], paced["floor_met"]) == (10.01, False)
    assert got["model paced: new data p95 <= 15 ms"]["floor_met"] is True
    assert got["page load: first chart drawn <= 1.5 s"]["floor_met"] is False
    # goals without a floor figure (ratios, server, memory) say so rather than guess
    assert got["memory per session <= 2 MiB"]["floor"] is None
    assert got["memory per session <= 2 MiB"]["floor_met"] is None


def test_lost_changes_miss_a_goal_however_fast_the_others_were():
    got = run.goals(figures(browser={lost("ours", "model drag"): {"median": 3, "unit": "count"},
                                     lost("floor", "model paced"): {"median": 1, "unit": "count"}}))
    drag = got["model drag: new data median <= 10 ms"]
    assert (drag["ours"], drag["met"], drag["note"]) == (10, False, "3 changes lost")
    assert got["model paced: new data p95 <= 15 ms"]["floor_met"] is False
    assert got["model paced: new data p95 <= 15 ms"]["met"] is True
    # every change lost: no median at all, and still a miss
    everything = run.goals(figures(browser={data("ours", "keyboard"): row(None, None),
                                            lost("ours", "keyboard"): {"median": 100}}))
    assert everything["keyboard: new data median <= 10 ms"]["met"] is False


def test_a_figure_missing_from_a_section_that_ran_is_not_measured():
    results = figures()
    for mode in run.MODES:                     # `--servers floor,ours`: no default Panel
        del results["browser"][data("panel", mode)]
    del results["server"][run.PATCH_UNCACHED_ROW]
    got = run.goals(results)
    assert len(got) == 19
    not_measured = sorted(name for name, g in got.items() if g["met"] is None)
    assert not_measured == sorted([f"{mode}: >= 6x faster than default Panel"
                                   for mode in run.MODES] + ["server: the same, state not cached"])
    text = run.goals_table(got, {})
    assert "met by ours: 15 of 15 (4 not measured)" in text
    assert "not measured" in text.splitlines()[7]      # the first ratio goal's line
    # ours against the floor is still there without Panel
    assert run.FLOOR_RATIO_ROW.format(mode="keyboard") in run.ratios(results["browser"])


def test_sections_not_run_leave_their_goals_out():
    results = figures()
    del results["load"], results["sessions"]
    got = run.goals(results)
    assert len(got) == 14
    assert not any(name.startswith(("page load", "memory")) for name in got)
    assert run.goals({}) == {}
    assert run.goals_table({}, {}) == ""


def test_slow_phases_are_the_share_of_each_sections_probe_samples():
    speed = {BEST: {"median": 3.2, "unit": "ms"},
             "during browser": {**row(4.0), "slow": 0.25}, "during load": {**row(3.3), "slow": 0.0}}
    phases = run.slow_phases(speed)
    assert phases == {"browser": 0.25, "load": 0.0}
    text = run.goals_table(run.goals(figures()), phases)
    assert text.splitlines()[-1].endswith("by section: browser 25%")
    assert "met by ours: 19 of 19" in text
    assert run.slow_phases({}) == {}


def test_the_probe_counts_a_sample_at_the_threshold_as_slow(tmp_path, monkeypatch):
    probe = run.SpeedProbe.__new__(run.SpeedProbe)       # its report, without its process
    probe.proc = None
    probe.path = tmp_path / "speed.txt"
    best = 2.0
    samples = [best, best * run.SLOW_PHASE, best * run.SLOW_PHASE - 0.001, 9.0]
    probe.path.write_text("".join(f"{10 + i} {ms}\n" for i, ms in enumerate(samples)))
    probe.windows = [("browser", 10, 13)]
    monkeypatch.setattr(run, "stop_group", lambda proc: None)
    report = run.SpeedProbe.report(probe)
    assert report[BEST]["median"] == best
    assert report["during browser"]["slow"] == 0.5      # 3.0 and 9.0 of the four


def test_the_table_prints_measured_rows_only():
    results = figures()
    results["machine"] = {"date": "x", "cpus": 2}
    results["goals"] = run.goals(results)
    results["slow phases"] = {"browser": 0.5}
    text = run.table(results)
    assert "-- browser" in text and "-- server" in text
    assert "-- machine" not in text and "-- goals" not in text and "-- slow phases" not in text


def test_ours_more_than_a_tenth_slower_than_the_floor_misses_that_goal():
    results = figures()
    rows = results["browser"]
    floor = rows[run.DATA_ROW.format(kind="floor", mode="model paced")]["median"]
    rows[run.DATA_ROW.format(kind="ours", mode="model paced")]["median"] = floor * 1.2
    got = run.goals(results)
    assert got["model paced: within 1.1x of the Bokeh floor"]["met"] is False
    assert got["model drag: within 1.1x of the Bokeh floor"]["met"] is True


def test_each_viewport_of_the_browser_section_has_the_browser_goals_of_its_own():
    results = figures()
    narrow = run.browser_section(run.PHONE)
    assert narrow == "browser at 375x812" and run.browser_section(run.DESKTOP) == "browser"
    results[narrow] = dict(results["browser"])
    results[narrow][data("ours", "keyboard")] = row(12, 15)      # past 10 on the phone only
    got = run.goals(results)
    browser_goals = [g for g in run.GOALS if g[1] == "browser"]
    assert len(got) == 19 + len(browser_goals)
    assert missed(got) == sorted(["keyboard: new data median <= 10 ms (at 375x812)",
                                  "keyboard: >= 6x faster than default Panel (at 375x812)",
                                  "keyboard: within 1.1x of the Bokeh floor (at 375x812)"])
    assert got["keyboard: new data median <= 10 ms"]["met"] is True
    assert got["keyboard: new data median <= 10 ms (at 375x812)"]["ours"] == 12


def test_the_document_s_parts_hold_each_model_once_and_its_bytes_add_up():
    """Section *document*'s parts of a served session's document: every model in exactly one
    part, the controls and the one draw's charts each in a part of their own, the served
    document without the programs' library, and the models' own bytes adding up to the
    document's JSON (within the references they share)."""
    from bokeh.core.json_encoder import serialize_json

    from attention_scaling.style import LIBRARY
    doc = run.session_document()
    sizes = run._own_sizes(doc.to_json(deferred=False))
    assert {m.id for m in doc.models} <= set(sizes)
    parts = run.document_parts(doc, set(sizes))
    everything = [i for _, ids in parts for i in ids]
    assert sorted(everything) == sorted(sizes)
    names = [name for name, _ in parts]
    assert "controls" in names and "open tab: scaled-weights, unscaled-weights" in names
    assert "open tab: jacobian, jacobian-diagonal" in names
    assert doc.get_model_by_name(LIBRARY) is None
    whole = len(serialize_json(doc.to_json(deferred=False)))
    assert abs(sum(sizes.values()) - whole) <= 0.01 * whole
