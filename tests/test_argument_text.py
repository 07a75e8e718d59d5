"""The argument's sentences against core's numbers: each number printed is the one core
computed, and each worded comparison holds for those numbers, over a sweep of settings."""

import itertools
import math
import re

import numpy as np
import pytest
from conftest import share_shows

from attention_scaling import core
from attention_scaling.prose.lead import training_lead
from attention_scaling.prose.formatting import fmt
from attention_scaling.prose.text import (budget_html, equal_step_lean_html,
                                          training_sweep_html,
                                          gradient_html, plain, saturation_html, training_html,
                                          variance_html)

SETTINGS = list(itertools.product([1, 8, 64, 512, 4096], [0.1, 1.0, 10.0], [2, 8, 64],
                                  [0.0, 0.5, 1.0]))


@pytest.mark.parametrize("d_k", core.D_K_VALUES)
def test_variance_sentence_prints_the_measured_spreads(d_k):
    dist, curve = core.logit_distribution(d_k), core.logit_std_curve()
    text = plain(variance_html(d_k, dist, curve, core.LOGIT_DRAWS))
    for rule in core.RULES:
        assert fmt(dist[f"std_{rule}"]) in text
    assert f"(√{d_k} = {fmt(math.sqrt(d_k))})" in text
    gap = max(abs(s / math.sqrt(d) - 1) for s, d in zip(curve["std_raw"], curve["d_k"]))
    assert f"the largest gap is {fmt(100 * gap, 2)}%" in text
    assert abs(dist["std_sqrt"] - 1) < 0.03          # "unit variance, at every width"


def percent_shows(printed: str, x: float) -> bool:
    """``printed`` is an honest percentage of the weight ``x`` (< 1) to the digits it shows."""
    if printed == ">99.9%":
        return x > 0.999
    if printed == "<0.1%":
        return 0 < x < 1e-3
    digits = printed.rstrip("%").partition(".")[2]
    shown = float(printed.rstrip("%"))
    return 0 < shown < 100 and abs(shown - 100 * x) <= 0.5 * 10.0 ** -len(digits) + 1e-9


#: A printed median max weight: one percentage, or its interval's two ends.
INTERVAL = r"([<>]?[\d.]+%(?:–[<>]?[\d.]+%| to [<>]?[\d.]+%)?)"


def interval_shows(printed: str, table: dict, rule: str, i: int) -> bool:
    """``printed`` is the median max weight of ``rule`` at row ``i`` of ``table`` (core's
    curves or head budget) to the digits its 95% interval supports: one number honest for
    both ends where they print alike, else each end honest and the two different."""
    lo = float(table[f"max_weight_median_lo_{rule}"][i])
    hi = float(table[f"max_weight_median_hi_{rule}"][i])
    assert lo <= float(table[f"max_weight_median_{rule}"][i]) <= hi
    ends = re.split(r"–| to ", printed)
    if len(ends) == 1:
        return percent_shows(printed, lo) and percent_shows(printed, hi)
    a, b = ends
    return a != b and percent_shows(a, lo) and percent_shows(b, hi)


def pair_shows(a: str, b: str, x: float, y: float) -> bool:
    """Two printed weights: each honest, and different where the weights differ to three
    significant digits (both above 99.9% excepted)."""
    return (percent_shows(a, x) and percent_shows(b, y)
            and (a != b or f"{100 * x:.3g}" == f"{100 * y:.3g}" or a == ">99.9%"))


def tiny_value(printed: str) -> float:
    """log10 of a number printed as "0.454", "1.94e-4" or "3.98 × 10-621" (the plain text of
    3.98 × 10<sup>-621</sup>)."""
    if " × 10" in printed:
        mantissa, exponent = printed.split(" × 10")
        return math.log10(float(mantissa)) + int(exponent)
    return math.log10(float(printed))


def tiny_shows(printed: str, log10x: float) -> bool:
    """``printed`` is 10 ** ``log10x`` to its three significant digits."""
    return abs(tiny_value(printed) - log10x) <= math.log10(1 + 5.01e-3)


def range_shows(printed: str, log10x: float, se: float) -> bool:
    """``printed`` ("0.39–0.53", "between 6.2 × 10-17820 and 1.1 × 10-17766" or one number) is
    the median 10 ** ``log10x``'s 95% interval, ``log10x`` ± 1.96 ``se``, each end to two
    significant digits (one number where both ends print alike)."""
    m = re.fullmatch(r"between (.+) and (.+)", printed) or re.fullmatch(
        r"([^–]+)–([^–]+)", printed)
    low, high = (m[1], m[2]) if m else (printed, printed)
    two = math.log10(1 + 5.01e-2)        # half a unit of the second significant digit
    return (abs(tiny_value(low) - (log10x - 1.96 * se)) <= two
            and abs(tiny_value(high) - (log10x + 1.96 * se)) <= two
            and (m is None or low != high))


def _rendered(html, d_k, t, n, rho):
    """The curves and the draw at a setting, and ``html``'s text of them, as plain text."""
    curves = core.saturation_curves(t, n, rho)
    draw = core.draw_metrics(d_k, t, 2288, n, rho)
    return curves, draw, plain(html(d_k, t, n, rho, curves, draw, core.CURVE_DRAWS))


@pytest.mark.parametrize("d_k,t,n,rho", SETTINGS)
def test_saturation_sentences_hold_in_every_setting(d_k, t, n, rho):
    curves, draw, text = _rendered(saturation_html, d_k, t, n, rho)
    i = core.D_K_VALUES.index(d_k)
    m = re.search(rf"the median max weight is {INTERVAL} unscaled, {INTERVAL} ÷√dk and "
                  rf"{INTERVAL} ÷dk\.", text)
    assert all(interval_shows(m[k + 1], curves, r, i) for k, r in enumerate(core.RULES))
    m = re.search(r"This draw \(the dots\): (\S+) unscaled, (\S+) ÷√dk and (\S+) ÷dk\.", text)
    assert all(percent_shows(m[k + 1], draw[r].max_weight) for k, r in enumerate(core.RULES))
    assert (f", {n} keys" in text) and ((f"ρ = {rho:g}" in text) == bool(rho))
    if rho:
        # the aligned logit rho |q|^2 has mean rho d_k exactly (E|q|^2 = d_k)
        j = core.D_K_VALUES.index(64)
        s, lin = curves["max_weight_median_sqrt"], curves["max_weight_median_linear"]
        m = re.search(rf"is {INTERVAL} at dk = 64 and {INTERVAL} at 4096; ÷dk keeps the logit "
                      rf"of order ρ, and its median max weight is {INTERVAL} at 64 and {INTERVAL} "
                      rf"at 4096\. "
                      r"μP \(Tensor Programs V\) divides by dk for this reason", text)
        end = len(core.D_K_VALUES) - 1
        assert all(interval_shows(m[k + 1], curves, r, x) for k, (r, x) in enumerate(
            [("sqrt", j), ("sqrt", end), ("linear", j), ("linear", end)])), m.groups()
    else:
        s = curves["max_weight_median_sqrt"]
        m = re.search(r"stays between (\S+) and (\S+)\.", text)
        assert pair_shows(m[1], m[2], min(s), max(s))
        m = re.search(r"the unscaled median goes from (\S+) to (\S+), while", text)
        none = curves["max_weight_median_none"]
        assert pair_shows(m[1], m[2], none[0], none[-1])
        m = re.search(r"its median goes from (\S+) to (\S+)\.", text)
        assert pair_shows(m[1], m[2], curves["max_weight_median_linear"][0],
                          curves["max_weight_median_linear"][-1])
        lin = curves["max_weight_median_linear"]
        assert f"flattens toward the even {fmt(100 / n)}%" in text
        # "flattens toward uniform as the head widens": it ends nearer 1/n than it starts
        assert abs(lin[-1] - 1 / n) <= abs(lin[0] - 1 / n) + 1e-12


@pytest.mark.parametrize("d_k,t,n,rho", SETTINGS)
def test_gradient_sentences_hold_in_every_setting(d_k, t, n, rho):
    curves, draw, text = _rendered(gradient_html, d_k, t, n, rho)
    i = core.D_K_VALUES.index(d_k)
    m = re.search(r"its median is (.+) unscaled, (.+) ÷√dk and (.+) ÷dk \(this draw: (.+) "
                  r"unscaled, (.+) ÷√dk and (.+) ÷dk\)\.", text)
    for k, r in enumerate(core.RULES):
        assert range_shows(m[k + 1], curves[f"log10_grad_q_median_{r}"][i],
                           curves[f"log10_grad_q_median_se_{r}"][i]), m[k + 1]
        assert tiny_shows(m[k + 4], draw[r].log10_query_gradient)
    none, sqrt = curves["log10_grad_q_median_none"], curves["log10_grad_q_median_sqrt"]
    assert none[0] == pytest.approx(sqrt[0], rel=1e-12)        # d_k = 1: the same rule
    after = re.search(r"from dk = (\d+) on the unscaled median is below", text) or \
        re.search(r"Below dk = (\d+) the two medians cross; from there on the unscaled median "
                  r"is below", text)
    if after:
        k = core.D_K_VALUES.index(int(after[1]))
        assert k >= 1 and all(none[j] < sqrt[j] for j in range(k, len(none)))
        assert k == 1 or not none[k - 1] < sqrt[k - 1]
        if m := re.search(r"(?:From dk = 2 to (\d+)|At dk = (2)) more reaches the query "
                          r"unscaled", text):
            assert core.D_K_VALUES.index(int(m[1] or m[2])) == k - 1
            assert m[1] is None or int(m[1]) > 2         # never "from 2 to 2"
            assert all(none[j] >= sqrt[j] for j in range(1, k))
        if text.count("At dk = 1 the two coincide"):
            assert k == 1
    else:
        assert "is not below the ÷√dk one at the widest heads" in text and none[-1] >= sqrt[-1]
    assert "Up to dk = 1 " not in text
    if ratio := re.search(r"at 4096 it is (.+) times smaller", text):
        _ratio_shows(ratio[1], sqrt[-1] - none[-1], math.hypot(
            curves["log10_grad_q_median_se_none"][-1], curves["log10_grad_q_median_se_sqrt"][-1]))


def _ratio_shows(printed: str, log10_ratio: float, se: float) -> None:
    """The ratio carries the digits its standard error allows, and no more."""
    if se <= 0.1:
        assert re.fullmatch(r"[\d.]+( × 10\d+)?", printed), printed
        value = tiny_value(printed) if "×" in printed else math.log10(float(printed))
        assert abs(value - log10_ratio) <= math.log10(1.051)
    elif se <= 1 and log10_ratio + 2 * se < 3:
        lo, hi = map(lambda x: int(x.replace(",", "")),
                     re.fullmatch(r"([\d,]+) to ([\d,]+)", printed).groups())
        assert lo <= 10 ** (log10_ratio - 2 * se) and hi >= 10 ** (log10_ratio + 2 * se)
        assert all(len(str(x).rstrip("0")) == 1 for x in (lo, hi)), printed   # one digit
    elif se <= 1:
        assert printed == f"about 10{round(log10_ratio)}", printed
    else:
        lo, hi = map(int, re.fullmatch(r"10(\d+) to 10(\d+)", printed).groups())
        assert lo <= log10_ratio - 2 * se and hi >= log10_ratio + 2 * se and lo % 5 == hi % 5 == 0


def test_the_ratio_at_the_widest_heads_has_the_digits_its_sample_supports():
    """Issue 30: "9.1 × 10^257 times" from draws whose log10 ratio has a standard error of
    about 7 decades prints as a range; the default's (about 0.3 decades) as an order."""
    text = _rendered(gradient_html, 64, 1.0, 8, 0.0)[2]
    assert "at 4096 it is about 1010 times smaller" in text
    text = _rendered(gradient_html, 64, 0.1, 2, 0.0)[2]
    lo, hi = map(int, re.search(r"at 4096 it is 10(\d+) to 10(\d+) times", text).groups())
    assert lo < 258 < hi and hi - lo >= 20


@pytest.mark.parametrize("width,t,n,rho", [(512, 1.0, 8, 0.0), (64, 0.1, 2, 0.5),
                                           (4096, 10.0, 64, 1.0), (512, 1.0, 64, 0.5)])
def test_budget_sentence_compares_one_head_with_eight(width, t, n, rho):
    budget = core.head_budget(width, t, n, rho)
    text = plain(budget_html(budget, width, t, n, rho))
    j = list(budget["heads"]).index(8)
    m = re.search(rf"one head of \d+ has a median max weight of {INTERVAL} and a median "
                  rf"gradient to the query of (.+?); 8 heads of \d+ have {INTERVAL} and (.+?) "
                  r"each", text)
    assert interval_shows(m[1], budget, "none", 0) and interval_shows(m[3], budget, "none", j)
    for printed, row in ((m[2], 0), (m[4], j)):
        assert range_shows(printed, budget["log10_grad_q_median_none"][row],
                           budget["log10_grad_q_median_se_none"][row]), printed
    assert "100%" not in text
    if rho:
        assert (f"the unaligned logits have variance {width // 8} instead of {width}, the "
                f"aligned one mean {fmt(rho * width / 8)} instead of {fmt(rho * width)}") in text
    else:
        assert f"their logits have variance {width // 8} instead of {width}" in text
    m = re.search(rf"÷√dk: {INTERVAL} for one head of {width}, {INTERVAL} for each of 8 "
                  rf"heads of {width // 8}", text)
    assert interval_shows(m[1], budget, "sqrt", 0) and interval_shows(m[2], budget, "sqrt", j)


@pytest.mark.parametrize("d_k,t,n,rho", SETTINGS[::3])
def test_the_saturation_and_heads_leads_print_each_median_to_its_interval(d_k, t, n, rho):
    """The Saturation lead's medians at d_k and the Heads lead's, one head against eight: each
    to the digits its 95% interval supports (never a digit the 2,000 draws do not fix)."""
    from attention_scaling.prose.lead import budget_lead, saturation_lead
    curves = core.saturation_curves(t, n, rho)
    i = core.D_K_VALUES.index(d_k)
    text = plain(saturation_lead(d_k, rho, curves))
    if not rho:
        m = re.match(rf"Median max weight at dk = {d_k}: unscaled {INTERVAL}, ÷√dk {INTERVAL}; ",
                     text)
        assert interval_shows(m[1], curves, "none", i) and interval_shows(m[2], curves, "sqrt", i)
    budget = core.head_budget(512, t, n, rho)
    j = list(budget["heads"]).index(8)
    text = plain(budget_lead(budget, 512))
    m = re.fullmatch(rf"Unscaled median max weight: {INTERVAL} for one head of 512, {INTERVAL} "
                     rf"for each of 8 heads of 64; ÷√dk: (?:{INTERVAL} either way|{INTERVAL} and "
                     rf"{INTERVAL})\.", text)
    assert m is not None, text
    assert len(text.split()) <= 30
    assert interval_shows(m[1], budget, "none", 0) and interval_shows(m[2], budget, "none", j)
    if m[3]:            # the two print alike: said once
        assert interval_shows(m[3], budget, "sqrt", 0) and interval_shows(m[3], budget, "sqrt", j)
    else:
        assert m[4] != m[5]
        assert interval_shows(m[4], budget, "sqrt", 0) and interval_shows(m[5], budget, "sqrt", j)


def test_the_training_text_reports_on_the_idea_not_on_the_software():
    runs = {r: core.train_seeds(64, r, 2288, temperature=1.0, steps=300) for r in core.RULES}
    text = plain(training_html(runs, 64, 1.0, 8))
    assert "nothing raised an error" not in text and "finite number" not in text


OVERCLAIM = re.compile(r"not enough|That is why μP|why μP uses")


def test_no_text_preset_or_doc_overclaims_about_mu_p():
    """THE-ARGUMENT 15: say what the curves show (÷√d_k sharpens a trained peak as heads
    widen; μP gives that as its reason for 1/d_k), never that √d_k "is not enough"."""
    from pathlib import Path

    from attention_scaling.state import PRESETS

    root = Path(__file__).resolve().parents[1]
    files = [*sorted((root / "src" / "attention_scaling").glob("*.py")),
             *sorted((root / "docs").glob("*.md")), root / "README.md"]
    for f in files:
        assert not OVERCLAIM.search(" ".join(f.read_text(encoding="utf-8").split())), f
    assert not any(OVERCLAIM.search(p.label) for p in PRESETS)
    for rho in (0.5, 1.0):
        text = _rendered(saturation_html, 64, 1.0, 8, rho)[2]
        assert not OVERCLAIM.search(text) and "μP (Tensor Programs V) divides by dk" in text


def test_the_trained_keys_preset_says_what_its_curves_show():
    """"÷√d_k sharpens as heads widen" at the preset's setting (ρ = 0.5, T = 1, 8 keys):
    the ÷√d_k median max weight climbs from 64 to 4096, the ÷d_k one does not."""
    from attention_scaling.state import PRESETS

    label, values = next(p[:2] for p in PRESETS if p.label.startswith("Trained keys"))
    assert label == "Trained keys (ρ = 0.5): ÷√dₖ sharpens as heads widen"
    c = core.saturation_curves(1.0, 8, values["align"])
    j = core.D_K_VALUES.index(64)
    sq = c["max_weight_median_sqrt"][j:]
    assert np.all(np.diff(sq) >= 0) and sq[-1] - sq[0] > 0.15
    assert c["max_weight_median_linear"][-1] - c["max_weight_median_linear"][j] < 0.01


def test_percentages_print_digits_that_differ():
    """Issue 30 (e): at d_k = 4096, T = 10, 64 keys the ÷√d_k medians (1.82%–1.96%) read
    "between 1.8% and 2.0%", not "between 2% and 2%"."""
    text = _rendered(saturation_html, 4096, 10.0, 64, 0.0)[2]
    assert "stays between 1.8% and 2.0%" in text
    assert "its median goes from 1.8% to 1.6%" in text


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
        assert (f"{label} {fmt(med)} ({fmt(lo)} to {fmt(hi)}), from a first loss of "
                f"{fmt(start)}") in text
        assert f"{label} {fmt(med)}" in lead
    sq, lin = own["sqrt"][0], own["linear"][0]
    assert lin < sq and f"Here, at the equal step, ÷dk ends below ÷√dk ({fmt(lin)} against {fmt(sq)})" in text
    assert len(lead.split()) <= 30
    assert lead.startswith("At the equal-step rates, final loss (median of 3 seeds): ")
    if d_k == 1024:      # THE-ARGUMENT.md point 14: at its equal-step rate, unscaled stalls
        assert own["none"][0] > own["none"][3]
        assert lead.endswith("; unscaled ends above its start.")
    else:
        assert own["none"][0] < 0.5 * own["none"][3] and lead.endswith("÷dk 0.0115.")


def test_the_training_lead_says_which_rules_do_not_or_barely_learn():
    class Run:
        def __init__(self, start, final):
            self.runs = [type("R", (), {"loss": [start]})()] * 3
            self.final = {"median": final}
    runs = {"none": Run(0.8, 0.85), "sqrt": Run(0.5, 0.3), "linear": Run(0.4, 0.01)}
    assert plain(training_lead(runs)) == (
        "At the equal-step rates, final loss (median of 3 seeds): unscaled 0.85, ÷√dk 0.3, "
        "÷dk 0.01; unscaled ends above its start; ÷√dk barely learns.")
    runs["sqrt"] = Run(0.5, 0.6)
    assert plain(training_lead(runs)).endswith(
        "; unscaled and ÷√dk end above their starts.")
    assert "not learn" not in plain(training_lead(runs))     # said only after the sweep


@pytest.mark.parametrize("d_k", [64, 1024])
def test_after_the_sweep_the_lead_gives_each_rule_at_its_best_rate_first(d_k):
    """THE-ARGUMENT.md point 14: with the sweep done, the lead leads with each rule's loss at
    its own best rate (this test's own medians over the sweep's seeds), then the equal-step
    runs'; unscaled, which ends above its start at 1024's equal-step rate, learns at its best
    rate, so the lead says of no rule that it does not learn."""
    seed = 2288
    sweep = core.learning_rate_sweep(d_k, 1.0, seed)
    own = _own_sweep(sweep, d_k, seed, 1.0, 8, 300)
    runs = {r: core.train_seeds(d_k, r, seed) for r in core.RULES}
    lead = plain(training_lead(runs, sweep))
    best = ", ".join(f"{label} {fmt(own[r]['median'].min())}" for label, r in LABEL_RULE.items())
    equal = ", ".join(f"{label} {fmt(_own(runs[r].runs)[0])}" for label, r in LABEL_RULE.items())
    assert lead == (f"Final loss, best swept rate: {best}; equal-step rates (the curves): "
                    f"{equal}.")
    assert len(lead.split()) <= 30
    assert all(own[r]["median"].min() < own[r]["start"] for r in core.RULES)


def test_after_the_sweep_a_rule_that_learns_at_no_rate_is_named():
    """The "learns at no rate tried" branch, from a sweep of 3 steps at d_k = 1024, T = 0.1,
    where unscaled ends above its start at every rate."""
    sweep = core.learning_rate_sweep(1024, 0.1, 5, steps=3)
    runs = {r: core.train_seeds(1024, r, 5, temperature=0.1, steps=3) for r in core.RULES}
    names = [label for label, r in LABEL_RULE.items() if not sweep[r].median.min() < sweep[r].start]
    assert names
    said = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    assert plain(training_lead(runs, sweep)).endswith(
        f"; {said} {'learns' if len(names) == 1 else 'learn'} at no rate tried.")


def test_the_training_text_says_how_the_equal_step_runs_end():
    """At the equal step the text says which of ÷√d_k and ÷d_k ends lower, by its numbers."""
    def runs(sq, lin):
        return {r: type("S", (), {"final": {"median": x}})()
                for r, x in (("none", 0.5), ("sqrt", sq), ("linear", lin))}
    assert "Here, at the equal step, ÷dk and ÷√dk end level (0.01 against 0.01)." in plain(
        equal_step_lean_html(runs(0.01, 0.01)))
    assert "÷dk ends below ÷√dk (0.0085 against 0.0108)" in plain(
        equal_step_lean_html(runs(0.0108, 0.0085)))
    assert "÷dk ends above ÷√dk (0.2 against 0.0108)" in plain(equal_step_lean_html(runs(0.0108, 0.2)))


# ---- the learning-rate sweep's sentences: each a claim that holds for the sweep -------------

LABEL_RULE = {"unscaled": "none", "÷√dk": "sqrt", "÷dk": "linear"}


def _printed_rate(text: str) -> float:
    return 1 / float(text[2:]) if text.startswith("1/") else float(text)


def _own_sweep(sweep, d_k, seed, temperature, n_keys, steps):
    """This test's own numbers for a sweep: per rule its rates as multiples of the equal
    step, the median over the seeds of its losses, and the median first loss of core's runs
    (their first step, before any update)."""
    own = {}
    for r, s in sweep.items():
        starts = []
        for i in range(s.losses.shape[1]):
            run = core.start_training(d_k, r, seed + i, temperature, steps, n_keys)
            run.advance(1)
            starts.append(run.loss[0])
        own[r] = dict(times=s.rates / core.rule_learning_rate(r, d_k),
                      median=np.array([sorted(row)[len(row) // 2] for row in s.losses]),
                      start=float(np.median(starts)))
    return own


def _sweep_claims(sweep, own):
    def spans(m):
        for part in m["spans"].split(", "):
            label, lo, _, hi = part.rsplit(" ", 3)
            s = sweep[LABEL_RULE[label]]
            if not (math.isclose(_printed_rate(lo), s.rates[0], rel_tol=5e-3)
                    and math.isclose(_printed_rate(hi), s.rates[-1], rel_tol=5e-3)):
                return False
        for r, o in own.items():        # powers of 4 from the equal step; an edge best at reach
            k = np.log(o["times"]) / np.log(4)
            if not np.allclose(k, np.round(k)) or not np.all(np.diff(np.round(k)) == 1):
                return False
            j = int(np.argmin(o["median"]))
            if (j == 0 and k[0] > -core.SWEEP_REACH) or (
                    j == len(k) - 1 and k[-1] < core.SWEEP_REACH):
                return False
        return True

    def best(m):
        parts = m["best"].split("; ")
        for part in parts:
            hit = re.fullmatch(r"(\S+) (\S+) \((\S+)\), (its equal-step rate|(\S+) × its "
                               r"equal-step rate)", part)
            r = LABEL_RULE[hit[1]]
            o, j = own[r], int(np.argmin(own[r]["median"]))
            if not (math.isclose(_printed_rate(hit[2]), sweep[r].rates[j], rel_tol=5e-3)
                    and fmt(o["median"][j]) == hit[3]):
                return False
            if (hit[5] is None) != (o["times"][j] == 1) or (
                    hit[5] and not math.isclose(_printed_rate(hit[5]), o["times"][j],
                                                rel_tol=5e-3)):
                return False
        return len(parts) == len(sweep)

    def learn(r):
        return own[r]["median"].min() < 0.5 * own[r]["start"]

    def stays_put():
        a, b = (core.learning_rate_sweep(d, 1.0, 2288) for d in (64, 1024))
        return (a["sqrt"].best == b["sqrt"].best == 4 and a["linear"].best == 64
                and b["linear"].best == 1024)

    def unscaled_stays_put():
        a, b = (core.learning_rate_sweep(d, 1.0, 2288) for d in (64, 1024))
        return (a["none"].best == b["none"].best == 0.25
                and a["none"].best / a["none"].equal_step == 16
                and b["none"].best / b["none"].equal_step == 256
                and all(s["none"].median.min() < 0.5 * s["none"].start for s in (a, b)))

    return [
        (r"The lower chart trains each rule again at dk = (?P<d>\d+), from the same seeds and "
         r"for the same steps, at its equal-step rate \(the ring\) times powers of 4, widened "
         r"where the lowest loss sat at an edge: (?P<spans>.+)\.", spans),
        (r"Each rule's best rate, its lowest median final loss \(filled\): (?P<best>.+)\.", best),
        (r"At its best rate each rule learns: its median final loss is under half its first "
         r"loss\.", lambda m: all(learn(r) for r in sweep)),
        (r"At its best rate (?P<names>.+) (does|do) not get under half (its|their) first loss\.",
         lambda m: {LABEL_RULE[x] for x in re.split(r", | and ", m["names"])}
         == {r for r in sweep if not learn(r)}),
        (r"On this toy at T = 1 with 8 keys \(seeds 2288 to 2290\), ÷√dk's best rate is 4 at "
         r"dk = 64 and at 1024, and ÷dk's is dk at both: its best logit step stays put\.",
         lambda m: stays_put()),
        (r"Unscaled's best rate is 1/4 at both, 16 and 256 times its equal-step rate: the "
         r"equal step shrinks its rate as 1/dk, its best rate does not move, and at its best "
         r"rate it learns at both widths\.", lambda m: unscaled_stays_put()),
        (r"μP pairs 1/dk with SGD rates for input-like weights such as these WQ and WK that "
         r"grow in proportion to width, so under μP's rates ÷dk's best base rate stays put "
         r"too\.", lambda m: stays_put()),
    ]


@pytest.mark.parametrize("d_k,t,n_keys,steps", [(64, 1.0, 8, 300), (1024, 1.0, 8, 300),
                                                (1, 1.0, 8, 40), (3, 0.1, 2, 40),
                                                (4096, 10.0, 64, 20), (48, 0.1, 64, 40)])
def test_every_sentence_of_the_sweep_is_a_claim_that_holds(d_k, t, n_keys, steps):
    """Each of the six sentences of the learning-rate sweep's text matches exactly one claim,
    and that claim holds on the sweep, checked against a sweep this test runs itself
    (:func:`_own_sweep`). Over 20 s at d_k = 64 and 4096: two whole sweeps (three rules, every
    rate, three seeds) at the full number of steps."""
    seed = 2288
    sweep = core.learning_rate_sweep(d_k, t, seed, n_keys, steps=steps)
    own = _own_sweep(sweep, d_k, seed, t, n_keys, steps)
    text = plain(training_sweep_html(sweep, d_k))
    claims = [(re.compile(p), cond) for p, cond in _sweep_claims(sweep, own)]
    sentences = [s for s in re.split(r"(?<=\.)\s*(?=[A-Zμ])", text) if s]
    assert len(sentences) == 6
    for sentence in sentences:
        hits = [(p, cond) for p, cond in claims if p.fullmatch(sentence)]
        assert len(hits) == 1, sentence
        assert hits[0][1](hits[0][0].fullmatch(sentence)), f"false here: {sentence!r}"


def test_a_sweep_whose_rules_stall_says_which():
    """The "does not get under half" branch, from a sweep of 3 steps (nothing learns yet)."""
    sweep = core.learning_rate_sweep(16, 1.0, 5, steps=3)
    text = plain(training_sweep_html(sweep, 16))
    assert "At its best rate unscaled, ÷√dk and ÷dk do not get under half their first loss." \
        in text


def test_a_false_sweep_sentence_is_caught():
    sweep = core.learning_rate_sweep(64, 1.0, 2288)
    own = _own_sweep(sweep, 64, 2288, 1.0, 8, 300)
    text = plain(training_sweep_html(sweep, 64)).replace("÷√dk 4 (", "÷√dk 16 (")
    pattern, cond = _sweep_claims(sweep, own)[1]
    sentence = next(s for s in re.split(r"(?<=\.)\s*(?=[A-Zμ])", text) if s.startswith("Each"))
    assert not cond(re.compile(pattern).fullmatch(sentence))


# ---- the gradient tab's counts: each sentence a claim that holds for core's curves ---------

def _own_share_shows(printed: str, x: float) -> bool:
    if printed == "none of them under a tenth of its own median":
        return x == 0
    return printed.endswith(" under a tenth of its own median") and share_shows(
        printed.removesuffix(" under a tenth of its own median"), x)


def _factor_shows(printed: str, log10_ratio: float, se: float) -> bool:
    try:
        _ratio_shows(printed, log10_ratio, se)
    except (AssertionError, TypeError, ValueError):
        return False
    return True


def _share_claims(i: int, curves: dict):
    """(pattern, condition) for each sentence the gradient tab's count paragraph may say at
    width index ``i``: each condition from core's curves alone (the shares' own Monte Carlo
    check is tests/test_argument_core.py's)."""
    share = {r: curves[f"frozen_share_{r}"][i] for r in core.RULES}
    gap = curves["log10_grad_q_median_linear"][i] - curves["log10_grad_q_median_sqrt"][i]
    se = math.hypot(curves["log10_grad_q_median_se_linear"][i],
                    curves["log10_grad_q_median_se_sqrt"][i])
    own = curves["spread_share_linear"][i]
    d_k = core.D_K_VALUES[i]
    return [
        (r"The upper chart counts the draws whose gradient is under a tenth of the ÷√dk median, "
         r"query rows that barely learn at a learning rate that suits ÷√dk: here (?P<a>.+) unscaled, "
         r"(?P<b>.+) ÷√dk and (?P<c>.+) ÷dk\.",
         lambda m: all(share_shows(m[k], share[r]) for k, r in zip("abc", core.RULES))),
        (r"At dk = 1 the three rules divide by the same 1, so their counts are the same\.",
         lambda m: d_k == 1 and share["none"] == share["sqrt"] == share["linear"]),
        (r"The yardstick is saturated too: under ÷√dk itself, (?P<s>.+) fall under a tenth of "
         r"its median\.", lambda m: d_k > 1 and curves["spread_share_sqrt"][i] > 0.05
         and share_shows(m["s"], curves["spread_share_sqrt"][i])),
        (rf"The yardstick is saturated too: ÷√dk's own median max weight is {INTERVAL} here, so "
         r"a tenth of its median gradient is itself small\.",
         lambda m: d_k > 1 and curves["spread_share_sqrt"][i] <= 0.05
         and curves["max_weight_median_sqrt"][i] > 0.9
         and interval_shows(m[1], curves, "sqrt", i)),
        (r"This count assumes one shared learning rate\.", lambda m: d_k > 1),
        (r"The Training tab gives each rule the rate that moves its logits by the same step per "
         r"unit of the loss's gradient at the logits\.",
         lambda m: d_k > 1),
        (r"At those rates a logit's step is about this gradient times the rule's rate and √dk "
         r"over its divisor, and it falls under a tenth of ÷√dk's median step for (?P<a>.+) "
         r"unscaled, (?P<b>.+) ÷√dk and (?P<c>.+) ÷dk\.",
         lambda m: d_k > 1 and all(share_shows(m[k], curves[f"equal_step_share_{r}"][i])
                                   for k, r in zip("abc", core.RULES))),
        # small: ÷d_k's median below ÷√d_k's beyond two standard errors; alike: few of its
        # draws far below its own median
        (r"÷dk's gradients are smaller \((?P<f>.+) times at the median\) but alike "
         r"\((?P<own>.+)\): a learning rate dk times ÷√dk's gives them the same step per "
         r"unit of gradient \(the Training tab\)\.",
         lambda m: d_k > 1 and gap < -2 * se and own <= 0.05 and _own_share_shows(m["own"], own)
         and _factor_shows(m["f"], -gap, se)),
        # near the line: ÷d_k's median within a factor 1.5 of a tenth of ÷√d_k's
        (r"Its median is near the count's line \(a tenth of ÷√dk's\), so its alike draws cross "
         r"that line together as dk changes: its count can jump between none and most\.",
         lambda m: d_k > 1 and gap < -2 * se and own <= 0.05
         and 1 / 1.5 < 10 ** -gap / 10 < 1.5),
        (r"÷dk's median is (?P<f>.+) times smaller than ÷√dk's, and its gradients are spread "
         r"\((?P<own>.+)\)\.",
         lambda m: d_k > 1 and gap < -2 * se and own > 0.05 and _own_share_shows(m["own"], own)
         and _factor_shows(m["f"], -gap, se)),
        # the draws counted (under a tenth of ÷√d_k's median) are then all under a tenth of
        # its own, a share no larger than the one printed
        (r"Here ÷dk's median is (?P<f>.+) times ÷√dk's \((?P<own>.+)\): the ÷dk draws counted "
         r"are its low tail\.",
         lambda m: d_k > 1 and gap > 2 * se and share["linear"] <= own
         and _own_share_shows(m["own"], own) and _factor_shows(m["f"], gap, se)),
        (r"÷dk's and ÷√dk's medians agree within two standard errors \(÷dk: (?P<own>.+)\)\.",
         lambda m: d_k > 1 and abs(gap) <= 2 * se and _own_share_shows(m["own"], own)),
    ]


def _check_share_sentences(text: str, i: int, curves: dict) -> list:
    claims = [(re.compile(p), cond) for p, cond in _share_claims(i, curves)]
    sentences = [s for s in re.split(r"(?<=\.)\s*(?=[A-Z÷])", text) if s]
    false = []
    for sentence in sentences:
        hits = [(p, cond) for p, cond in claims if p.fullmatch(sentence)]
        assert len(hits) == 1, sentence
        if not hits[0][1](hits[0][0].fullmatch(sentence)):
            false.append(sentence)
    return false


@pytest.mark.parametrize("t,n,rho", list(itertools.product([0.1, 1.0, 10.0], [2, 8, 64],
                                                           [0.0, 0.5, 1.0])))
def test_every_sentence_of_the_gradient_counts_is_a_claim_that_holds(t, n, rho):
    """At every width, each sentence of the gradient tab's count paragraph matches exactly one
    claim, and that claim holds on core's curves: ÷d_k's gradients are called smaller only
    where its median is below ÷√d_k's beyond two standard errors, and alike only where at
    most 5% of its draws fall under a tenth of its own median."""
    from attention_scaling.prose.text import share_text
    curves = core.saturation_curves(t, n, rho)
    for i in range(len(core.D_K_VALUES)):
        text = plain(share_text(i, curves))
        assert _check_share_sentences(text, i, curves) == [], (core.D_K_VALUES[i], text)


def test_a_share_of_some_draws_never_prints_as_none_or_all():
    """Every share of the 2,000 draws prints as this test reads it: a share above 0 never as
    "0% of draws" and one below 1 never as "100% of draws" (10 draws of 2,000, 0.5%, is "1%",
    1,990, 99.5%, "over 99%"); none and all are said of the 2,000 counted, not of every draw
    there could be."""
    from attention_scaling.prose.formatting import share_of_draws
    n = core.CURVE_DRAWS
    for k in range(n + 1):
        x = k / n
        words = share_of_draws(x, n)
        assert share_shows(words, x), (k, words)
        assert words not in ("0% of draws", "100% of draws", "no draw", "every draw")
    assert share_of_draws(0.005, n) == "1% of draws"
    assert share_of_draws(0.995, n) == "over 99% of draws"
    assert (share_of_draws(0, n), share_of_draws(1, n)) == ("none of 2,000 draws",
                                                            "all 2,000 draws")


def test_a_false_gradient_count_sentence_is_caught():
    """"Smaller but alike" at d_k = 4, T = 0.1, 2 keys fails its claim: ÷d_k's median is 27
    times ÷√d_k's there, and 29% of its draws fall under a tenth of its own median. At d_k = 1
    no sentence sets ÷d_k apart."""
    curves = core.saturation_curves(0.1, 2, 0.0)
    i = core.D_K_VALUES.index(4)
    from attention_scaling.prose.text import share_text
    text = plain(share_text(i, curves))
    assert "Here ÷dk's median is 27 times ÷√dk's" in text
    head = text.split(". ")[0] + "."
    wrong = (head + " ÷dk's gradients are smaller (27 times at the median) but alike (29% of "
             "draws under a tenth of its own median): a learning rate dk times ÷√dk's gives "
             "them the same step per unit of gradient (the Training tab).")
    assert _check_share_sentences(wrong, i, curves) == [wrong.split(". ", 1)[1]]
    at_one = plain(share_text(0, curves))
    assert "÷dk's" not in at_one.split(". ", 1)[1] and "the same 1" in at_one


@pytest.mark.parametrize("d_k,t,n,rho", [(4096, 1.0, 8, 0.5), (64, 1.0, 8, 0.0),
                                         (1, 1.0, 8, 0.0), (4096, 0.1, 64, 1.0)])
def test_the_gradient_lead_states_core_s_shares_in_agreeing_words(d_k, t, n, rho):
    """The gradient tab's lead: the unscaled and ÷√d_k shares core counted, none or all said
    of the draws counted ("all 2,000 draws unscaled get ... and barely learn")."""
    from attention_scaling.prose.lead import gradient_lead
    curves = core.saturation_curves(t, n, rho)
    i = core.D_K_VALUES.index(d_k)
    text = plain(gradient_lead(d_k, curves))
    none, sqrt = curves["frozen_share_none"][i], curves["frozen_share_sqrt"][i]
    if d_k == 1:
        assert text.startswith("At dk = 1 every rule divides by 1")
        return
    m = re.fullmatch(r"At dk = (\d+), at one shared learning rate, (?P<share>.+?) unscaled "
                     r"get under a tenth of ÷√dk's median gradient and barely "
                     r"learn; ÷√dk: (?P<sqrt>.+)\.", text)
    assert m is not None and int(m[1]) == d_k, text
    assert share_shows(m["share"], none) and share_shows(m["sqrt"], sqrt)


def test_the_one_draw_s_spread_clause_says_near_where_the_medians_cross():
    """Unscaled's median gradient against ÷√d_k's, at T = 1 and 8 keys, as 20,000 draws of
    full vectors place them (THE-ARGUMENT: 0.49 against 0.37 at d_k = 64; at 80, 0.35
    against 0.37, closer than 2,000 draws can tell apart; at 128 far below): "above",
    "near", "below"."""
    from attention_scaling.prose.text import spread_clause
    said = {d_k: re.match(r"unscaled's median gradient is (\w+)",
                          spread_clause(d_k, core.gradient_spread(d_k, 1.0, 8, 0.0)))[1]
            for d_k in (64, 80, 128)}
    assert said == {64: "above", 80: "near", 128: "below"}
