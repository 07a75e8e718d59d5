"""Each tab's one idea in words: its lead sentence (one sentence, at most 30 words, worded from
the state core computed, so that it is true in every state) and its "Try this" steps. The
tab's longer text (text.py) goes under its "More detail"."""

from __future__ import annotations

import math

import numpy as np

from .. import core
from .formatting import distinct, fmt, median_interval, median_weight, share_of_draws
from .text import RULE_LABELS_HTML, named_values, rule_names

#: Words a lead sentence may hold.
LEAD_WORDS = 30

#: The one draw's lead: {field} slots of text.text_fields, filled in the browser as the
#: controls move (text.fill).
DRAW_LEAD = ("At d<sub>k</sub> = {d}, this draw's max weight: {none_max_w} unscaled, "
             "{pair_max_w} {pair_word}; {grad_spread}.")


#: The training tab's lead before a run (core.rule_learning_rate: base · s²/d_k).
TRAINING_LEAD = (f"<b>Train</b> runs every rule 300 steps from {core.TRAIN_SEEDS} seeds at the "
                 "rate giving their logits equal steps per unit of gradient: unscaled at "
                 "1/d<sub>k</sub>, ÷√d<sub>k</sub> at 1, ÷d<sub>k</sub> at d<sub>k</sub>.")


def never_learns(sweep: dict) -> list[str]:
    """The rules of a finished learning-rate sweep (rule -> core.RuleSweep) whose median
    final loss is under their median first loss at no rate tried."""
    return [r for r, s in sweep.items()
            if not (np.isfinite(s.best) and float(s.median.min()) < s.start)]


def training_lead(runs: dict, sweep: dict | None = None) -> str:
    """What finished training runs (rule -> core.SeededTraining, each at its equal-step rate)
    reached: each rule's result (the median over the seeds of the mean loss of the last
    core.TRAIN_TAIL steps). Before the sweep: which rules end above their start or not
    below half of it, at those rates. With the finished learning-rate sweep (``sweep``: rule
    -> core.RuleSweep) each rule's result at its own best rate first, the equal-step results
    after, and "does not learn" only of a rule that learns at no rate tried."""
    final = {r: run.final["median"] for r, run in runs.items()}
    if sweep is not None:
        return _swept_lead(final, sweep)
    seeds = len(next(iter(runs.values())).runs)
    start = {r: float(np.median([one.loss[0] for one in run.runs])) for r, run in runs.items()}
    stuck = [r for r in runs if not final[r] < start[r]]
    slow = [r for r in runs if r not in stuck and not final[r] < 0.5 * start[r]]
    tail = "".join(f"; {rule_names(rs)} {verb}" for rs, verb in (
        (stuck, "ends above its start" if len(stuck) == 1 else "end above their starts"),
        (slow, "barely learns" if len(slow) == 1 else "barely learn")) if rs)
    return (f"At the equal-step rates, final loss (median of {seeds} seeds): "
            f"{named_values(final)}{tail}.")


def _swept_lead(final: dict, sweep: dict) -> str:
    best = ", ".join(f"{RULE_LABELS_HTML[r]} {fmt(float(s.median.min()))}"
                     if np.isfinite(s.best) else f"{RULE_LABELS_HTML[r]} diverges"
                     for r, s in sweep.items())
    stuck = never_learns(sweep)
    tail = (f"; {rule_names(stuck)} {'learns' if len(stuck) == 1 else 'learn'} at no rate "
            "tried" if stuck else "")
    return (f"Final loss, best swept rate: {best}; equal-step rates (the curves): "
            f"{named_values(final)}{tail}.")


def variance_lead(d_k: int, dist: dict) -> str:
    """The spread of q·k at ``d_k`` (core.logit_distribution), raw against √d_k and scaled."""
    raw, scaled = fmt(dist["std_none"]), fmt(dist["std_sqrt"])
    if d_k == 1:
        return (f"At d<sub>k</sub> = 1, q·k has standard deviation {raw} over "
                f"{core.LOGIT_DRAWS:,} draws, and dividing by √1 = 1 changes nothing: widen "
                "the head to see it grow.")
    return (f"Over {core.LOGIT_DRAWS:,} draws q·k has standard deviation {raw} at "
            f"d<sub>k</sub> = {d_k}, close to √{d_k} = {fmt(math.sqrt(d_k))}; divided by "
            f"√d<sub>k</sub> it is {scaled}, as at every width.")


def saturation_lead(d_k: int, align: float, curves: dict) -> str:
    """The median max weight at ``d_k`` and across widths (core.saturation_curves)."""
    i = core.D_K_VALUES.index(d_k)
    med = {r: curves[f"max_weight_median_{r}"] for r in ("none", "sqrt", "linear")}
    if not align:
        lo, hi = distinct(min(med["sqrt"]), max(med["sqrt"]))
        widest = core.D_K_VALUES[-1]
        across = (f"from d<sub>k</sub> = 1 to {widest}" if d_k == widest else
                  f"up to d<sub>k</sub> = {widest} unscaled reaches "
                  f"{median_weight(med['none'][-1])},")
        return (f"Median max weight at d<sub>k</sub> = {d_k}: unscaled "
                f"{median_interval(curves, 'none', i)}, ÷√d<sub>k</sub> "
                f"{median_interval(curves, 'sqrt', i)}; {across} ÷√d<sub>k</sub> stays "
                f"between {lo} and {hi}.")
    j = core.D_K_VALUES.index(64)
    a, b = median_weight(med["sqrt"][j]), median_weight(med["sqrt"][-1])
    la, lb = median_weight(med["linear"][j]), median_weight(med["linear"][-1])
    linear = (f"÷d<sub>k</sub>'s stays at {la}" if la == lb
              else f"÷d<sub>k</sub>'s goes from {la} to {lb}")
    grows = a != b and med["sqrt"][-1] > med["sqrt"][j]
    return (f"With k1 aligned (ρ = {align:g}), ÷√d<sub>k</sub>'s median max weight "
            + (f"climbs from {a} at d<sub>k</sub> = 64 to {b} at 4096" if grows
               else f"is {a} at d<sub>k</sub> = 64 and {b} at 4096")
            + f"; {linear}.")


def gradient_lead(d_k: int, curves: dict) -> str:
    """How often the unscaled gradient is tiny at ``d_k``, against ÷√d_k (the shares of
    draws below a tenth of the ÷√d_k median, core.saturation_curves)."""
    i = core.D_K_VALUES.index(d_k)
    none, sqrt = curves["frozen_share_none"], curves["frozen_share_sqrt"]
    if d_k == 1:
        return ("At d<sub>k</sub> = 1 every rule divides by 1: the gradient reaching the query "
                "is the same under all of them, draw by draw.")
    n = core.CURVE_DRAWS
    return (f"At d<sub>k</sub> = {d_k}, at one shared learning rate, "
            f"{share_of_draws(none[i], n)} unscaled get under a tenth of ÷√d<sub>k</sub>'s "
            f"median gradient and barely learn; ÷√d<sub>k</sub>: {share_of_draws(sqrt[i], n)}.")


def budget_lead(budget: dict, width: int) -> str:
    """One head of ``width`` against eight (core.head_budget): the median max weights, each
    to the digits its interval supports."""
    heads = [int(h) for h in budget["heads"]]
    h = 8 if 8 in heads else heads[-1]
    j = heads.index(h)
    one, many = median_interval(budget, "none", 0), median_interval(budget, "none", j)
    s1, s8 = median_interval(budget, "sqrt", 0), median_interval(budget, "sqrt", j)
    sq = f"{s1} either way" if s1 == s8 else f"{s1} and {s8}"
    return (f"Unscaled median max weight: {one} for one head of {width}, {many} for each of "
            f"{h} heads of {width // h}; ÷√d<sub>k</sub>: {sq}.")


#: Each tab's "Try this": two or three steps a student can take in under a minute, each with
#: the controls it asks for (state.CONTROLS' names).
TRY = {
    "variance": (("<li>Drag <b>d<sub>k</sub></b> from 1 to 4096: the raw histogram widens like "
                  "√d<sub>k</sub>, the scaled one stays put.</li>", {"d_k"}),
                 ("<li>Read the lower chart: the measured spread sits on the √d<sub>k</sub> "
                  "line.</li>", set())),
    "saturation": (("<li>At ρ = 0, drag <b>d<sub>k</sub></b>: the unscaled median "
                    "climbs toward 100%, ÷√d<sub>k</sub> stays flat.</li>", {"d_k"}),
                   ("<li>Then set <b>ρ</b> to 0.5: now ÷√d<sub>k</sub> climbs too, "
                    "÷d<sub>k</sub> does not.</li>", {"align"})),
    "gradient": (("<li>At T = 1 and ρ = 0, drag <b>d<sub>k</sub></b> from 16 to 512: "
                  "the unscaled share in the upper chart climbs.</li>", {"d_k"}),
                 ("<li>Set <b>T</b> to 0.125: ÷√d<sub>k</sub>'s logits grow as large as "
                  "unscaled's at d<sub>k</sub> = 64 and T = 1, and many of ÷√d<sub>k</sub>'s "
                  "draws barely learn too.</li>",
                  {"temperature"})),
    "training": (("<li>Press <b>Train</b> at d<sub>k</sub> = 64: every rule learns, unscaled "
                  "least.</li>", set()),
                 ("<li>Set <b>d<sub>k</sub></b> to 1024 and press <b>Train</b> again: the "
                  "unscaled loss stays near its start, the others fall as at 64.</li>",
                  {"d_k"})),
    "budget": (("<li>Read the unscaled line from 1 head to 64: narrower heads saturate "
                "less.</li>", set()),
               ("<li>At ρ = 0, set <b>T</b> to 0.5: every line rises, and "
                "÷√d<sub>k</sub>'s stays flat from 1 head to 64.</li>", {"temperature"}),
               ("<li>Then set <b>ρ</b> to 0.5: now ÷√d<sub>k</sub>'s line climbs toward "
                "one head as well (the aligned key's q·k grows like ρ·d<sub>k</sub>, so its "
                "logit ÷√d<sub>k</sub> like ρ√d<sub>k</sub>), and ÷d<sub>k</sub>'s stays "
                "flat from 1 head to 64.</li>", {"align"})),
}


def try_html(key: str, controls=None) -> str:
    """An argument tab's "Try this" as HTML, "" for a tab without one (the one draw's is
    text.guide_html): its steps whose controls are all among ``controls`` (every step when
    None)."""
    steps = "".join(step for step, needs in TRY.get(key, ())
                    if controls is None or needs <= set(controls))
    return f"<div class='try'><h2>Try this</h2><ol>{steps}</ol></div>" if steps else ""
