"""A rule and a tab are each one row of a table: in a copy of the package, a fourth scaling rule
(÷d_k^0.75) is one row of core.RULE_TABLE and a new tab is one row of state.TABS plus its
class in argument.TAB_VIEWS; the served page, the readout, the curves, the downloads and the
offline payload all carry them with no other edit."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

RULE_ROW = ('    Rule("pow75", 0.75, "÷d_k^0.75", "÷d<sub>k</sub><sup>0.75</sup>", "÷d_k^0.75", '
            '"#CC79A7", "#A3487F", "#E59CC7", (1, 3), "diamond"),\n')
TAB_ROW = '    Tab("spread", "6 Spread", ("d_k",)),\n'
#: The new tab's class: the spread of the logits under each rule at the current width.
TAB_CLASS = '''

class SpreadTab(TabView):
    """6 Spread: the standard deviation of q . k under each rule at the current width."""

    key, offline = "spread", "width"
    stores = (("spread-source", "width"),)

    def __init__(self, shared):
        super().__init__(shared)
        self.source = ColumnDataSource(dict(rule=list(core.RULES), std=[0.0] * len(core.RULES)),
                                       name="spread-source")
        fig = figure(name="spread", x_range=list(core.RULES), height=250, tools="")
        fig.vbar(x="rule", top="std", width=0.8, source=self.source)
        self.figures["spread"] = fig
        self.tables = [(self.source, [["rule", "rule"], ["std", "std"]])]

    def draw(self, s):
        dist = core.logit_distribution(s.d_k)
        self.source.data = dict(rule=list(core.RULES),
                                std=[dist[f"std_{r}"] for r in core.RULES])
        return (f"The spread of the logits at d_k = {s.d_k}.",
                "<p>Their standard deviation under each rule, over 20,000 draws.</p>")


TAB_VIEWS["spread"] = SpreadTab
'''

#: Run in the copy: everything a reader and the offline copy get, as JSON.
PROBE = r'''
import json
from bokeh.document import Document
from attention_scaling import core, export, style
import concurrent.futures
# wiring, not training: the payload's runs and sweeps take two steps, in this process
export.TRAINING_STEPS = 2
export._pool = lambda: concurrent.futures.ThreadPoolExecutor(2)
from attention_scaling.page import Explorer
from attention_scaling.state import ExplorerState, Setting, parse_query

values, hidden, notices = parse_query({"rule": ["pow75"], "tab": ["spread"], "d_k": ["256"]})
explorer = Explorer(ExplorerState(**values))
doc = Document()
doc.add_root(explorer.view.root)
explorer.view.build_argument()
view = explorer.view
s = Setting.of(explorer.state)
for key in view.argument.tabs:
    if key != "training":
        view.draw_tab(key, s)
curves = core.saturation_curves(1.0, 8, 0.0)
a = view.argument
payload = export.build_payload(export.seed_list(1))
out = dict(
    notices=notices, rules=list(core.RULES),
    buttons=view.widgets["rule"].labels,
    active=view.widgets["rule"].labels[view.widgets["rule"].active],
    tabs=[p.title for p in view.tabs.tabs], tab=view.tabs.active,
    readout=view.charts.readout.text + view.charts.readout_detail.text,
    css="data-active='pow75'" in style.page_css(),
    curve=float(curves["max_weight_median_pow75"][core.D_K_VALUES.index(256)]),
    divisor=core.rule_divisor("pow75", 256),
    lines=len(a.rule_lines["pow75"]),
    highlighted=[l.glyph.line_width for l in a.rule_lines["pow75"]],
    csv=[c for tab in a.tabs.values() for _src, cols in tab.tables for c, _h in cols],
    downloads=sorted(view.downloads),
    spread=list(a.tabs["spread"].source.data["std"]),
    draw_spread=sorted(view.charts.spread.source.data),
    spread_text=[view.leads["spread"].text, view.section_texts["spread"].text],
    payload_rules=payload["rules"], records=payload["records"], states=payload["states"],
    payload_texts=len(payload["argument"]["texts"]["spread"]),
    payload_sources=payload["argument"]["sources"]["spread"],
    payload_blocks=sorted(payload["argument"]["blocks"]),
    widths=len(payload["argument"]["widths"]["pow75"]),
)
print(json.dumps(out))
'''


def _insert(path: Path, anchor: str, row: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(anchor) == 1, (path, anchor)
    path.write_text(text.replace(anchor, anchor + row), encoding="utf-8")


def test_a_fourth_rule_and_a_new_tab_are_one_row_each(tmp_path):
    """A rule and a tab added as one row each (core.RULE_TABLE, state.TABS) and a tab's
    class reach every place that lists them: the control, the address, the readout, the
    curves, every chart of rules, the downloads, the one draw's spread and the offline
    payload. Over 20 s: a fresh process computes the whole offline payload under four rules
    from a copy of the package (its training runs and sweeps two steps long, all the wiring
    needs, on threads of that process)."""
    package = tmp_path / "src" / "attention_scaling"
    shutil.copytree(ROOT / "src" / "attention_scaling", package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "assets", tmp_path / "assets")
    _insert(package / "core.py", '(2, 4, 6, 4), "triangle"),\n', RULE_ROW)
    _insert(package / "state.py", '("seed", "the medians are over 2,000 draws, not one"))),\n',
            TAB_ROW)
    with open(package / "argument.py", "a", encoding="utf-8") as f:
        f.write(TAB_CLASS)
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                       timeout=900, env={"PYTHONPATH": str(tmp_path / "src"),
                                         "PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.splitlines()[-1])
    from attention_scaling import core
    # the control and the address know the rule and the tab
    assert out["notices"] == []
    assert out["rules"] == [*core.RULES, "pow75"]
    assert out["buttons"][-1] == "÷d_k^0.75" and out["active"] == "÷d_k^0.75"
    assert out["tabs"][-1] == "6 Spread" and out["tab"] == len(out["tabs"]) - 1
    # the readout has its column, highlighted by its key
    assert "<th data-rule='pow75'>÷d<sub>k</sub><sup>0.75</sup></th>" in out["readout"]
    assert out["readout"].count("<td data-rule='pow75'>") == 5
    assert "data-active='pow75'" in out["readout"] and out["css"]
    # its divisor and its curves: between ÷√d_k and ÷d_k's
    assert out["divisor"] == 256 ** 0.75
    sqrt, linear = (core.saturation_curves(1.0, 8, 0.0)[f"max_weight_median_{r}"]
                    [core.D_K_VALUES.index(256)] for r in ("sqrt", "linear"))
    assert linear < out["curve"] < sqrt
    # its lines on every chart of rules, thick as the rule the model uses
    from attention_scaling.argument import Argument
    assert out["lines"] == len(out["highlighted"]) == len(Argument().rule_lines["sqrt"]) > 0
    assert set(out["highlighted"]) == {4.5}
    # downloads: its columns in the curves' CSV, and the new tab's own buttons
    assert {"max_weight_median_pow75", "log10_grad_q_median_pow75", "frozen_share_pow75",
            "loss_median_pow75"} <= set(out["csv"])
    assert "spread" in out["downloads"]
    # the one draw's gradient over many draws: a row of its chart
    assert {"q05_pow75", "median_pow75", "frozen_share_pow75"} <= set(out["draw_spread"])
    # the new tab drawn from core at the page's setting
    std = core.logit_distribution(256)
    assert out["spread"][:3] == [std[f"std_{r}"] for r in core.RULES]
    assert out["spread_text"] == [
        "<p class='lead'>The spread of the logits at d_k = 256.</p>",
        "<p>Their standard deviation under each rule, over 20,000 draws.</p>"]
    # the offline payload: every state under four rules, the new tab at every width
    assert out["payload_rules"] == out["rules"]
    assert out["records"] == 4 * out["states"] == 4 * len(core.D_K_VALUES) * len(
        core.TEMPERATURES)
    assert out["payload_texts"] == len(core.D_K_VALUES)
    assert out["payload_sources"] == [["spread-source", "width"]]
    assert "spread-source" in out["payload_blocks"] and out["widths"] > 0
