"""scripts/slowest-tests, which ends `make test` with its slowest tests: read from pytest's
JUnit reports (every one named, together), slowest first, at most N, a missing report
skipped."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "slowest-tests"


def report(path: Path, cases: dict[str, float]) -> Path:
    rows = "".join(f'<testcase classname="tests.test_x" name="{name}" time="{t}"/>'
                   for name, t in cases.items())
    path.write_text(f'<?xml version="1.0"?><testsuites><testsuite name="pytest">{rows}'
                    '</testsuite></testsuites>', encoding="utf-8")
    return path


def test_the_slowest_of_both_reports_slowest_first_and_no_more_than_asked(tmp_path):
    a = report(tmp_path / "a.xml", {"test_quick": 0.5, "test_slow": 42.0, "test_mid": 7.34})
    b = report(tmp_path / "b.xml", {"test_timing": 30.0, "test_none": 0.0})
    out = subprocess.run([sys.executable, str(SCRIPT), "3", str(a), str(b),
                          str(tmp_path / "missing.xml")],
                         capture_output=True, text=True, check=True).stdout
    lines = [line.split() for line in out.strip().splitlines()[1:]]
    assert [(row[0], row[2]) for row in lines] == [
        ("42.0", "tests.test_x::test_slow"), ("30.0", "tests.test_x::test_timing"),
        ("7.3", "tests.test_x::test_mid")]
    assert "The 3 slowest tests" in out
