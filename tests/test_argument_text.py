"""The argument's sentences against core's numbers: each number printed is the one core
computed, and each worded comparison holds for those numbers, over a sweep of settings."""

import itertools
import math
import re

import numpy as np
import pytest

from attention_scaling import core
from attention_scaling.lead import training_lead
from attention_scaling.text import (TRAINING_SWEEP_64, _fmt, _training_lean, budget_html,
                                    gradient_html, plain, saturation_html, training_html,
                                    variance_html)

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


def _own(runs):
    """Median, min and max over ``runs`` of the mean of their last 50 losses, and the median
    first loss: this test's own."""
    tails = sorted(float(np.mean(run.loss[-50:])) for run in runs)
    return tails[1], tails[0], tails[2], float(np.median([run.loss[0] for run in runs]))


@pytest.mark.parametrize("d_k,seed", [(64, 2288), (1024, 7)])
def test_training_sentences_are_the_runs_own_numbers(d_k, seed):
    seeded = {r: core.train_seeds(d_k, r, seed) for r in core.RULES}   # its runs: one a seed
    own = {r: _own(s.runs) for r, s in seeded.items()}          # (test_argument_core.py)
    text = plain(training_html(seeded, d_k, 1.0, 8))
    lead = plain(training_lead(seeded))
    rates = {"none": f"1/{d_k}", "sqrt": "1", "linear": str(d_k)}
    assert ("s²/dk for its divisor s: unscaled {none}, ÷√dk {sqrt}, ÷dk {linear}."
            .format(**rates)) in text
    assert (f"the unscaled run's step would be {d_k} times ÷√dk's and the ÷dk run's 1/{d_k} "
            f"of it: the runs would compare steps dk² = {d_k * d_k:,} times apart") in text
    assert f"from seeds {seed}, {seed + 1} and {seed + 2}" in text
    assert "mean loss of its last 50 steps" in text
    for r, label in (("none", "unscaled"), ("sqrt", "÷√dk"), ("linear", "÷dk")):
        med, lo, hi, start = own[r]
        assert (f"{label} {_fmt(med)} ({_fmt(lo)} to {_fmt(hi)}), from a first loss of "
                f"{_fmt(start)}") in text
        assert f"{label} {_fmt(med)}" in lead
    sq, lin = own["sqrt"][0], own["linear"][0]
    assert lin < sq and f"Here ÷dk ends below ÷√dk ({_fmt(lin)} against {_fmt(sq)})" in text
    assert len(lead.split()) <= 30
    if d_k == 1024:      # THE-ARGUMENT.md point 14: unscaled does not learn at this width
        assert own["none"][0] > own["none"][3]
        assert lead.endswith("; unscaled ends above its start: it does not learn.")
    else:
        assert own["none"][0] < 0.5 * own["none"][3] and lead.endswith("÷dk 0.0115.")


def test_the_training_lead_says_which_rules_do_not_or_barely_learn():
    class Run:
        def __init__(self, start, final):
            self.runs = [type("R", (), {"loss": [start]})()] * 3
            self.final = {"median": final}
    runs = {"none": Run(0.8, 0.85), "sqrt": Run(0.5, 0.3), "linear": Run(0.4, 0.01)}
    assert plain(training_lead(runs)).endswith(
        "unscaled 0.85, ÷√dk 0.3, ÷dk 0.01; unscaled ends above its start: it does not learn; "
        "÷√dk barely learns.")
    runs["sqrt"] = Run(0.5, 0.6)
    assert plain(training_lead(runs)).endswith(
        "; unscaled and ÷√dk end above their starts: they do not learn.")


def test_the_tuned_rates_the_training_text_quotes_are_a_sweep_s():
    """text.TRAINING_SWEEP_64: at d_k = 64, T = 1, 8 keys, seeds 7 to 9, each rule's median
    final loss is lowest at the quoted rate among it and the powers of 4 beside it, and is
    the quoted number; the equal step is ÷d_k's best and a quarter of ÷√d_k's."""
    for r, (rate, loss) in TRAINING_SWEEP_64.items():
        medians = {lr: core.train_seeds(64, r, 7, lr=lr).final["median"]
                   for lr in (rate / 4, rate, rate * 4)}
        assert min(medians, key=medians.get) == rate, (r, medians)
        assert _fmt(medians[rate]) == _fmt(loss) or _fmt(medians[rate], 2) == _fmt(loss, 2)
    assert TRAINING_SWEEP_64["linear"][0] == core.rule_learning_rate("linear", 64)
    assert TRAINING_SWEEP_64["sqrt"][0] == 4 * core.rule_learning_rate("sqrt", 64)
    assert TRAINING_SWEEP_64["sqrt"][1] < TRAINING_SWEEP_64["linear"][1] < \
        TRAINING_SWEEP_64["none"][1]
    text = plain(_training_lean({r: type("S", (), {"final": {"median": 0.01}})()
                                 for r in core.RULES}))
    assert ("unscaled at 1/4, 16 times its equal-step rate (0.0119); ÷√dk at 4, 4 times its "
            "equal-step rate (0.00856); ÷dk at its equal-step rate, 64 (0.009). Tuned, ÷√dk "
            "ends ahead of ÷dk, and unscaled learns, less well than both.") in text
    assert "Here ÷dk and ÷√dk end level (0.01 against 0.01)" in text
