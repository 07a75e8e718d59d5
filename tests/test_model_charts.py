"""state.py and charts.py: each control change puts exactly core's numbers into the chart data."""

import re

import numpy as np
import pytest

from attention_scaling import core
from attention_scaling.figures import Charts
from attention_scaling.style import KEY_LABELS
from attention_scaling.state import ExplorerState
from attention_scaling.state import FIG3_SEED
from attention_scaling.prose.text import explanation_of, fields_of, weight_label


def _bound():
    state = ExplorerState()
    charts = Charts()
    charts.update(state.result, state.rule, fields_of(state))
    state.param.watch(lambda *_: charts.update(state.result, state.rule, fields_of(state)),
                      ["result", "rule"])
    return state, charts


def _max_label(source) -> str:
    """The one non-empty "max weight" label of a bar chart's source (it sits on the top bar)."""
    labels = [t for t in source.data["label"] if t]
    assert len(labels) == 1
    top = source.data["label"].index(labels[0])
    assert source.data["weight"][top] == max(source.data["weight"])
    return labels[0]


def _assert_matches(state, charts, d_k, t, seed, rule, n=8):
    expected = core.compute_state(d_k, t, seed, n)
    labels = [f"k{i + 1}" for i in range(n)]
    # the left chart: the model's logits where it divides them, ÷√d_k where it is unscaled
    left = expected.variants["sqrt" if rule == "none" else rule]
    for source, var in ((charts.scaled_source, left),
                        (charts.unscaled_source, expected.unscaled)):
        np.testing.assert_array_equal(source.data["weight"], var.probs)
        np.testing.assert_array_equal(source.data["logit"], var.logits)
        np.testing.assert_array_equal(source.data["pq"], var.diagonal)
        assert source.data["key"] == labels
    assert _max_label(charts.scaled_source) == f"max weight {weight_label(left)}"
    title = charts.scaled_fig.title.text
    assert title.startswith("Scaled by 1/dₖ" if rule == "linear" else "Scaled by 1/√dₖ")
    assert title.endswith("◀ model uses this") == (rule != "none")
    assert _max_label(charts.unscaled_source) == f"max weight {weight_label(expected.unscaled)}"
    active = expected.active(rule)
    np.testing.assert_array_equal(charts.jacobian_source.data["value"], active.jacobian.ravel())
    cells = charts.jacobian_labels_source.data
    assert cells["key"] == labels              # printed on the diagonal cells only
    assert cells["text"] == ["<0.001" if x < 0.0005 else f"{x:.3f}" for x in active.diagonal]
    assert "0.000" not in cells["text"]
    np.testing.assert_array_equal(charts.diagonal_source.data["value"], expected.sweep(rule).ravel())
    assert charts.marker_source.data["width"] == [str(d_k)]
    assert charts.marker_source.data["h"] == [n + 0.2]
    assert list(charts.scaled_fig.x_range.factors) == labels
    assert list(charts.jacobian_fig.y_range.factors) == labels[::-1]


@pytest.mark.parametrize("change", [
    dict(d_k=4096), dict(d_k=1), dict(d_k=80), dict(temperature=0.1), dict(temperature=10.0),
    dict(seed=5), dict(rule="none"), dict(rule="linear"), dict(d_k=128, rule="none", temperature=2.5, seed=99),
    dict(keys=3), dict(keys=64, d_k=512, rule="linear"), dict(keys=2, d_k=1),
])
def test_each_control_updates_chart_data_to_exactly_what_core_computes(change):
    state, charts = _bound()
    state.param.update(**change)
    _assert_matches(state, charts, state.d_k, state.temperature, state.seed, state.rule,
                    state.keys)


def test_default_is_fig3():
    state, charts = _bound()
    assert (state.d_k, state.temperature, state.seed, state.rule) == (64, 1.0, FIG3_SEED, "sqrt")
    assert _max_label(charts.scaled_source) == "max weight 27%"
    assert _max_label(charts.unscaled_source) == "max weight 80%"
    state.param.update(d_k=512, seed=3, temperature=0.5)
    state.reset_to_fig3()
    assert _max_label(charts.unscaled_source) == "max weight 80%"


def test_resample_draws_a_new_seed_and_new_data():
    state, charts = _bound()
    before = list(charts.scaled_source.data["weight"])
    state.draw_new_seed()
    assert state.seed != FIG3_SEED
    assert list(charts.scaled_source.data["weight"]) != before
    _assert_matches(state, charts, state.d_k, state.temperature, state.seed, state.rule)


def test_scaling_toggle_switches_the_jacobian_not_the_bars():
    state, charts = _bound()
    bars = list(charts.unscaled_source.data["weight"])
    jac_on = list(charts.jacobian_source.data["value"])
    state.rule = "none"
    assert list(charts.unscaled_source.data["weight"]) == bars
    assert list(charts.jacobian_source.data["value"]) != jac_on
    assert charts.unscaled_fig.outline_line_color is not None
    assert charts.scaled_fig.outline_line_color is None


def test_bad_values_are_rejected_by_the_parameters():
    state = ExplorerState()
    with pytest.raises(ValueError):
        state.d_k = 65
    with pytest.raises(ValueError):
        state.temperature = 0.0
    with pytest.raises(ValueError):
        state.seed = -1
    assert state.d_k == 64


def test_explanation_numbers_come_from_the_state():
    state = ExplorerState(d_k=256)
    text = explanation_of(state)
    plain = re.sub(r"<[^>]+>", "", text)
    assert "dk = 256 terms" in plain and "√256 = 16" in plain and "about ±16" in plain
    raw_sd = f"{float(state.result.raw_logits.std()):.3g}"
    assert raw_sd in text
    fields = fields_of(state)
    assert (fields["sqrt_max_w"], fields["none_max_w"]) == (
        weight_label(state.result.scaled), weight_label(state.result.unscaled))
    assert fields["frob"] == f"{state.result.scaled.frobenius:.3g}"
    assert '<span data-k="raw_sd">' in text


def test_text_source_carries_the_fields_and_the_divs_are_written_once():
    state, charts = _bound()
    first = charts.explanation.text
    assert '<span data-k="d">64</span>' in first
    assert "<table data-active='sqrt'>" in charts.readout.text
    state.d_k = 512
    assert charts.explanation.text == first          # the browser fills the spans
    values = dict(zip(charts.text_source.data["field"], charts.text_source.data["value"]))
    assert values == fields_of(state) and values["d"] == "512"


def test_figures_have_stable_names():
    charts = Charts()
    assert {f.name for f in charts.figures.values()} == {
        "scaled-weights", "unscaled-weights", "jacobian", "jacobian-diagonal", "gradient-spread"}


def test_text_fields_are_shared_per_setting_but_handed_out_as_copies():
    a = ExplorerState(d_k=128, temperature=2.5, seed=7)
    b = ExplorerState(d_k=128, temperature=2.5, seed=7)
    fa = fields_of(a)
    fa["d"] = "tampered"
    assert fields_of(b)["d"] == "128" and fields_of(a)["d"] == "128"
    b.rule = "none"
    assert fields_of(b)["which"] == "unscaled" and fields_of(a)["which"] == "scaled"
    assert fields_of(b)["max_w"] == weight_label(b.result.unscaled)


@pytest.mark.parametrize("top, align", [(0, "left"), (1, "left"), (2, "center"), (5, "center"),
                                        (6, "right"), (7, "right")])
def test_the_max_label_reads_towards_the_middle_near_an_edge(top, align):
    from attention_scaling.figures import bar_data

    logits = np.zeros(len(KEY_LABELS))
    logits[top] = 3.0
    v = core.variant(logits)
    bars = bar_data(v)
    text = f"max weight {weight_label(v)}"
    # on the highest bar only
    assert bars["label"] == [text if k == top else "" for k in range(len(KEY_LABELS))]
    assert bars["align"][top] == align


def _luminance(color: str) -> float:
    c = [int(color[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    c = [x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]


def test_the_cell_numbers_read_on_every_colour_of_the_map():
    """Each number printed on a Jacobian cell is at least 4.5:1 (WCAG) against the cell's
    colour as BokehJS's LinearColorMapper picks it, for every value a diagonal cell holds
    (p(1 - p), 0 to 1/4)."""
    from attention_scaling.figures import cell_ink
    from attention_scaling.style import DIVERGING
    low, high = -core.JACOBIAN_BOUND, core.JACOBIAN_BOUND
    for x in np.linspace(0, core.JACOBIAN_BOUND, 2001):
        cell = DIVERGING[min(int((x - low) / (high - low) * len(DIVERGING)), len(DIVERGING) - 1)]
        hi, lo = sorted((_luminance(cell_ink(x)), _luminance(cell)), reverse=True)
        assert (hi + 0.05) / (lo + 0.05) >= 4.5, (x, cell, cell_ink(x))


def test_an_update_leaves_bokeh_s_property_checks_on_for_every_thread(monkeypatch):
    """Bokeh turns a title given as text into a Title, and the like, only while its property
    checks are on, and that switch is one for the whole process: an update that turned it off
    (Bokeh's ``without_property_validation``) let a session's tabs, built meanwhile on the
    build thread, come out with a bare string for a title, and the session never got them."""
    from bokeh.core.property.bases import validation_on

    from attention_scaling import figures
    seen = []
    real = figures.bar_data
    monkeypatch.setattr(figures, "bar_data", lambda v: seen.append(validation_on()) or real(v))
    state = ExplorerState()
    Charts().update(state.result, state.rule, fields_of(state))
    assert seen and all(seen)


@pytest.mark.parametrize("d_k,t", [(64, 1.0), (4096, 0.1), (1, 10.0)])
def test_the_gradient_spread_axis_leaves_room_beyond_every_mark(d_k, t):
    """The spread chart's x range reaches past every box end, whisker and dot by at least 2%
    of its span at either end (a marker drawn at the edge is cut in half: at d_k = 4096,
    T = 0.1 the span is hundreds of decades)."""
    state, charts = _bound()
    state.d_k, state.temperature = d_k, t
    spread, dots = charts.spread.source.data, charts.spread.this_draw_source.data
    marks = [spread[f"{q}_{r}"][0] for q in core.SPREAD_QUANTILES for r in core.RULES] + [
        spread["tenth"][0], *(v[0] for v in dots.values())]
    rng = charts.spread.fig.x_range
    room = 0.02 * (rng.end - rng.start)
    assert rng.start <= min(marks) - room and max(marks) + room <= rng.end, (
        rng.start, rng.end, min(marks), max(marks))
