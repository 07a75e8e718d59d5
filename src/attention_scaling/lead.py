"""Each tab's one idea in words: its lead sentence (one sentence, at most 30 words, worded from
the state core computed, so that it is true in every state) and its "Try this" steps. The
tab's longer text (text.py) goes under its "More detail"."""

from __future__ import annotations

import math

from . import core
from .text import _distinct, _fmt, _median_weight

#: Words a lead sentence may hold.
LEAD_WORDS = 30

#: The one draw's lead: {field} slots of text.text_fields, filled in the browser as the
#: controls move (text.fill).
DRAW_LEAD = ("At d<sub>k</sub> = {d}, this draw's largest weight is {sqrt_max_w} with the "
             "logits divided by √d<sub>k</sub> and {none_max_w} raw; over {mc_n} draws, the "
             "median raw max weight is {mc_u}.")


def share(x: float) -> str:
    """A share of draws in words: "no draw", "every draw", "26% of draws"."""
    if x <= 0:
        return "no draw"
    if x >= 1:
        return "every draw"
    if x < 0.005:
        return "under 1% of draws"
    if x > 0.995:
        return "over 99% of draws"
    return f"{round(100 * x)}% of draws"


#: The training tab's lead.
TRAINING_LEAD = ("<b>Train</b> runs one attention head per rule for 300 steps of plain SGD, "
                 "from the same start and batches, and plots each loss as it falls.")


def variance_lead(d_k: int, dist: dict) -> str:
    """The spread of q·k at ``d_k`` (core.logit_distribution), raw against √d_k and scaled."""
    raw, scaled = _fmt(dist["std_none"]), _fmt(dist["std_sqrt"])
    if d_k == 1:
        return (f"At d<sub>k</sub> = 1, q·k has standard deviation {raw} over "
                f"{core.LOGIT_DRAWS:,} draws, and dividing by √1 = 1 changes nothing: widen "
                "the head to see it grow.")
    return (f"Over {core.LOGIT_DRAWS:,} draws q·k has standard deviation {raw} at "
            f"d<sub>k</sub> = {d_k}, close to √{d_k} = {_fmt(math.sqrt(d_k))}; divided by "
            f"√d<sub>k</sub> it is {scaled}, as at every width.")


def saturation_lead(d_k: int, align: float, curves: dict) -> str:
    """The median max weight at ``d_k`` and across widths (core.saturation_curves)."""
    i = core.D_K_VALUES.index(d_k)
    med = {r: curves[f"max_weight_median_{r}"] for r in ("none", "sqrt", "linear")}
    if not align:
        lo, hi = _distinct(min(med["sqrt"]), max(med["sqrt"]))
        return (f"Median max weight at d<sub>k</sub> = {d_k}: unscaled "
                f"{_median_weight(med['none'][i])}, ÷√d<sub>k</sub> "
                f"{_median_weight(med['sqrt'][i])}; up to d<sub>k</sub> = 4096 unscaled "
                f"reaches {_median_weight(med['none'][-1])}, ÷√d<sub>k</sub> stays between "
                f"{lo} and {hi}.")
    j = core.D_K_VALUES.index(64)
    a, b = _median_weight(med["sqrt"][j]), _median_weight(med["sqrt"][-1])
    la, lb = _median_weight(med["linear"][j]), _median_weight(med["linear"][-1])
    linear = f"÷d<sub>k</sub>'s stays at {la}" if la == lb else f"÷d<sub>k</sub>'s: {la}, {lb}"
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
    if none[i] <= 0:
        return (f"At d<sub>k</sub> = {d_k}, no unscaled draw gets under a tenth of the "
                f"÷√d<sub>k</sub> median gradient to the query; under ÷√d<sub>k</sub>, "
                f"{share(sqrt[i])}.")
    verb = "gets" if none[i] >= 1 else "get"
    return (f"At d<sub>k</sub> = {d_k}, unscaled, {share(none[i])} {verb} under a tenth "
            f"of the ÷√d<sub>k</sub> median gradient to the query and barely learn; under "
            f"÷√d<sub>k</sub>, {share(sqrt[i])}.")


def budget_lead(budget: dict, width: int) -> str:
    """One head of ``width`` against eight (core.head_budget)."""
    heads = [int(h) for h in budget["heads"]]
    h = 8 if 8 in heads else heads[-1]
    j = heads.index(h)
    none = budget["max_weight_median_none"]
    sqrt = budget["max_weight_median_sqrt"]
    one, many = _median_weight(none[0]), _median_weight(none[j])
    s1, s8 = _median_weight(sqrt[0]), _median_weight(sqrt[j])
    verb = (f"leaves the unscaled median max weight at {one}" if one == many
            else f"takes the unscaled median max weight from {one} to {many}")
    sq = f"÷√d<sub>k</sub> gives {s1} either way" if s1 == s8 else f"÷√d<sub>k</sub>: {s1}, {s8}"
    return (f"{h} heads of {width // h} instead of one of {width} {verb}; {sq}.")


#: Each tab's "Try this": two or three steps a student can take in under a minute.
TRY = {
    "variance": ("<li>Drag <b>d<sub>k</sub></b> from 1 to 4096: the raw histogram widens like "
                 "√d<sub>k</sub>, the scaled one stays put.</li>"
                 "<li>Read the lower chart: the measured spread sits on the √d<sub>k</sub> "
                 "line.</li>"),
    "saturation": ("<li>Drag <b>d<sub>k</sub></b>: the unscaled median climbs toward 100%, "
                   "÷√d<sub>k</sub> stays flat.</li>"
                   "<li>Set <b>ρ</b> to 0.5: now ÷√d<sub>k</sub> climbs too, ÷d<sub>k</sub> "
                   "does not.</li>"),
    "gradient": ("<li>Drag <b>d<sub>k</sub></b> from 16 to 512 and watch the unscaled row of "
                 "the lower chart spread out to the left.</li>"
                 "<li>Set <b>T</b> to 0.125: the ÷√d<sub>k</sub> row spreads like the "
                 "unscaled one at T = 1.</li>"),
    "training": ("<li>Press <b>Train</b> at d<sub>k</sub> = 64, then at 1024.</li>"
                 "<li>Compare where each loss ends: see More detail for the learning rate "
                 "each rule gets.</li>"),
    "budget": ("<li>Read the unscaled line from 1 head to 64: narrower heads saturate "
               "less.</li>"
               "<li>Set <b>T</b> to 0.5, then <b>ρ</b> to 0.5.</li>"),
}


def try_html(key: str) -> str:
    """An argument tab's "Try this" as HTML (the one draw's is text.guide_html)."""
    return f"<div class='try'><h4>Try this</h4><ol>{TRY[key]}</ol></div>"
