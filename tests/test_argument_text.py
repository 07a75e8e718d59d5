"""The argument's sentences against core's numbers: each number printed is the one core
computed, and each worded comparison holds for those numbers, over a sweep of settings."""

import itertools
import math
import re

import pytest

from attention_scaling import core
from attention_scaling.text import (_fmt, budget_html, gradient_html, plain, saturation_html,
                                    training_html, variance_html)

SETTINGS = list(itertools.product([1, 8, 64, 512, 4096], [0.1, 1.0, 10.0], [2, 8, 64],
                                  [0.0, 0.5, 1.0]))


@pytest.mark.parametrize("d_k", core.D_K_VALUES)
def test_variance_sentence_prints_the_measured_spreads(d_k):
    dist, curve = core.logit_distribution(d_k), core.logit_std_curve()
    text = plain(variance_html(d_k, dist, curve, core.LOGIT_DRAWS))
    for rule in core.RULES:
        assert _fmt(dist[f"std_{rule}"]) in text
    assert f"(√{d_k} = {_fmt(math.sqrt(d_k))})" in text
    gap = max(abs(s / math.sqrt(d) - 1) for s, d in zip(curve["std_raw"], curve["d_k"]))
    assert f"the largest gap is {_fmt(100 * gap, 2)}%" in text
    assert abs(dist["std_sqrt"] - 1) < 0.03          # "unit variance, at every width"


def _rendered(html, d_k, t, n, rho):
    """The curves and the draw at a setting, and ``html``'s text of them, as plain text."""
    curves = core.saturation_curves(t, n, rho)
    draw = core.draw_metrics(d_k, t, 2288, n, rho)
    return curves, draw, plain(html(d_k, t, n, rho, curves, draw, core.CURVE_DRAWS))


@pytest.mark.parametrize("d_k,t,n,rho", SETTINGS)
def test_saturation_sentences_hold_in_every_setting(d_k, t, n, rho):
    curves, draw, text = _rendered(saturation_html, d_k, t, n, rho)
    i = core.D_K_VALUES.index(d_k)
    med = [core.percent(curves[f"max_weight_median_{r}"][i], below_one=True) for r in core.RULES]
    assert (f"the median max weight is {med[0]} unscaled, {med[1]} ÷√dk and {med[2]} ÷dk."
            in text)
    this = [core.percent(draw[r].max_weight, below_one=draw[r].rest > 0) for r in core.RULES]
    assert f"This draw (the dots): {this[0]} unscaled, {this[1]} ÷√dk and {this[2]} ÷dk." in text
    assert (f", {n} keys" in text) and ((f"ρ = {rho:g}" in text) == bool(rho))
    if rho:
        # the aligned logit rho |q|^2 has mean rho d_k exactly (E|q|^2 = d_k)
        j = core.D_K_VALUES.index(64)
        pc = lambda x: core.percent(x, below_one=True)          # noqa: E731
        assert (f"is {pc(curves['max_weight_median_sqrt'][j])} at dk = 64 and "
                f"{pc(curves['max_weight_median_sqrt'][-1])} at 4096" in text)
    else:
        s = curves["max_weight_median_sqrt"]
        pc = lambda x: core.percent(x, below_one=True)          # noqa: E731
        assert f"stays between {pc(min(s))} and {pc(max(s))}" in text
        lin = curves["max_weight_median_linear"]
        assert f"flattens toward the even {_fmt(100 / n)}%" in text
        # "flattens toward uniform as the head widens": it ends nearer 1/n than it starts
        assert abs(lin[-1] - 1 / n) <= abs(lin[0] - 1 / n) + 1e-12


@pytest.mark.parametrize("d_k,t,n,rho", SETTINGS)
def test_gradient_sentences_hold_in_every_setting(d_k, t, n, rho):
    curves, draw, text = _rendered(gradient_html, d_k, t, n, rho)
    i = core.D_K_VALUES.index(d_k)
    shown = lambda x: "<1e-300" if x < 1e-300 else _fmt(x)   # noqa: E731
    for r in core.RULES:
        assert shown(float(curves[f"grad_q_median_{r}"][i])) in text
        assert shown(draw[r].query_gradient) in text
    none, sqrt = curves["grad_q_median_none"], curves["grad_q_median_sqrt"]
    assert none[0] == pytest.approx(sqrt[0], rel=1e-12)        # d_k = 1: the same rule
    after = re.search(r"from dk = (\d+) on the unscaled median is below", text) or \
        re.search(r"Below dk = (\d+) the two medians cross; from there on the unscaled median "
                  r"is below", text)
    if after:
        k = core.D_K_VALUES.index(int(after[1]))
        assert k >= 1 and all(none[j] < sqrt[j] for j in range(k, len(none)))
        assert k == 1 or not none[k - 1] < sqrt[k - 1]
        if m := re.search(r"From dk = 2 to (\d+) more reaches the query unscaled", text):
            assert core.D_K_VALUES.index(int(m[1])) == k - 1
            assert all(none[j] >= sqrt[j] for j in range(1, k))
        if text.count("At dk = 1 the two coincide"):
            assert k == 1
    else:
        assert "is not below the ÷√dk one at the widest heads" in text and none[-1] >= sqrt[-1]
    assert "Up to dk = 1 " not in text


@pytest.mark.parametrize("width,t,n,rho", [(512, 1.0, 8, 0.0), (64, 0.1, 2, 0.5),
                                           (4096, 10.0, 64, 1.0), (512, 1.0, 64, 0.5)])
def test_budget_sentence_compares_one_head_with_eight(width, t, n, rho):
    budget = core.head_budget(width, t, n, rho)
    text = plain(budget_html(budget, width, t, n, rho))
    pc = lambda x: core.percent(x, below_one=True)              # noqa: E731
    grad = lambda x: "<1e-300" if x < 1e-300 else _fmt(float(x))   # noqa: E731
    j = list(budget["heads"]).index(8)
    assert (f"one head of {width} has a median max weight of "
            f"{pc(budget['max_weight_median_none'][0])}") in text
    assert (f"8 heads of {width // 8} have {pc(budget['max_weight_median_none'][j])} "
            f"and {grad(budget['grad_q_median_none'][j])} each") in text
    assert "100%" not in text
    if rho:
        assert (f"the unaligned logits have variance {width // 8} instead of {width}, the "
                f"aligned one mean {_fmt(rho * width / 8)} instead of {_fmt(rho * width)}") in text
    else:
        assert f"their logits have variance {width // 8} instead of {width}" in text
    assert (f"÷√dk: {pc(budget['max_weight_median_sqrt'][0])} for one head of {width}, "
            f"{pc(budget['max_weight_median_sqrt'][j])} for each of 8 heads of {width // 8}"
            in text)


def test_training_sentence_is_the_runs_own_numbers():
    runs = {r: core.train(64, r, 2288, temperature=1.0, steps=300) for r in core.RULES}
    text = plain(training_html(runs, 64, 1.0, 8))
    for r, run in runs.items():
        start, end = float(run.loss[0]), float(run.loss[-1])
        assert f"from {_fmt(start)} to {_fmt(end)}" in text
        word = "down" if end < start else "up"
        assert f"({word} {_fmt(abs(100 * (end - start) / start), 2)}%)" in text
    ratio = float(runs["none"].grad_wq[0]) / float(runs["sqrt"].grad_wq[0])
    assert f"{_fmt(ratio, 2)} times the ÷√dk run's {_fmt(runs['sqrt'].grad_wq[0])}" in text
    assert "nothing raised an error" in text
