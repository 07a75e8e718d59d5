"""The benchmark's verdict on issue 3's goals (benchmarks/run.py: goals, slow_phases), checked
on figures written out by hand, so each row's value, its side (at most / at least) and its
boundary are known exactly."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_run", ROOT / "benchmarks" / "run.py")
run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run)

SPEED = "machine speed (a fixed pure-Python task, ms; lower is faster)"


def row(median, p95=None, unit="ms"):
    return {"median": median, "p95": p95, "unit": unit}


def figures(**over):
    """A whole run's figures: every goal met by ours exactly at its limit."""
    browser = {}
    for mode in ("model paced", "model drag", "keyboard"):
        browser[f"ours {mode}: data"] = row(10, 15)
        browser[f"floor {mode}: data"] = row(10.01, 14)
        browser[f"panel {mode}: data"] = row(60, 70)
    results = {
        "browser": browser,
        "server": {"control change -> patch built": row(1000, 1400, "µs")},
        "load": {"ours navigation -> first chart drawn": row(1500, 1900),
                 "floor navigation -> first chart drawn": row(1500.1, 1900)},
        "sessions": {"memory per session": row(2, unit="MiB")},
    }
    results["ratios"] = run.ratios(browser)
    for section, rows in over.items():
        results[section].update(rows)
    return results


def test_every_goal_is_read_and_a_value_at_its_limit_meets_it():
    got = run.goals(figures())
    assert len(got) == 12
    assert all(g["met"] for g in got.values()), [n for n, g in got.items() if not g["met"]]
    # ratios: 60 / 10 = 6.0x, exactly the "at least 6x"
    assert got["keyboard: >= 6x faster than default Panel"]["ours"] == 6.0
    assert got["server: change -> patch built <= 1 ms (state cached)"]["unit"] == "µs"


def test_just_past_a_limit_is_missed_on_the_right_side():
    results = figures(browser={"ours keyboard: data": row(10.01, 15.01)},
                      load={"ours navigation -> first chart drawn": row(1500.1)},
                      server={"control change -> patch built": row(1000.5, unit="µs")},
                      sessions={"memory per session": row(2.001, unit="MiB")})
    results["ratios"] = run.ratios(results["browser"])      # 60 / 10.01 = 5.99x
    got = run.goals(results)
    missed = sorted(n for n, g in got.items() if not g["met"])
    assert missed == sorted([
        "keyboard: new data median <= 10 ms", "keyboard: new data p95 <= 15 ms",
        "keyboard: >= 6x faster than default Panel",
        "page load: first chart drawn <= 1.5 s",
        "server: change -> patch built <= 1 ms (state cached)",
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


def test_sections_not_run_leave_their_goals_out():
    results = figures()
    del results["load"], results["sessions"]
    got = run.goals(results)
    assert len(got) == 10
    assert not any(name.startswith(("page load", "memory")) for name in got)
    assert run.goals({}) == {}
    assert run.goals_table({}, {}) == ""


def test_slow_phases_are_each_sections_probe_against_the_fastest():
    speed = {"fastest run of the task (the machine at its best)": {"median": 3.2, "unit": "ms"},
             "during browser": row(6.4), "during load": row(4.0)}
    phases = run.slow_phases(speed)
    assert phases == {"browser": 2.0, "load": 1.25}
    text = run.goals_table(run.goals(figures()), phases)
    assert text.splitlines()[-1].endswith("during: browser 2.0x")
    assert "met by ours: 12 of 12" in text
    assert run.slow_phases({}) == {}
