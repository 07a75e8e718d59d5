"""Numbers as the page prints them: significant digits, weights as percentages that never
round to an extreme they do not reach, numbers below float64's range by their exponent, shares
of draws in words. The prose modules (text, lead, quiz) and the offline copy's texts print
every number through these; nothing here computes one."""

from __future__ import annotations

import math


def percent(x: float, below_one: bool = False) -> str:
    """A weight as the percentage printed on screen: one decimal below 20% ("12.6%", and an
    even 1/8 is "12.5%"), whole numbers from there ("27%") except where rounding would print
    an extreme the weight does not reach: 99.5% to 99.95% gets one decimal ("99.9%"), above
    that ">99.9%"; "100%" only for exactly 1 and not ``below_one`` (a weight within 1e-16 of
    1 is 1.0 in float64: pass ``below_one`` when it is known to be less, e.g. from
    :attr:`core.Variant.log10_rest` > -inf). Likewise a positive weight under 0.05% is "<0.1%",
    never "0%" or "0.0%"."""
    x = float(x)
    v = 100 * x
    if x >= 1.0 and below_one:
        return ">99.9%"
    if x >= 1.0 or x <= 0.0:
        return f"{round(v)}%"
    if v < 19.95:                       # one decimal while it stays below "20.0%"
        return "<0.1%" if v < 0.05 else f"{v:.1f}%"
    whole = round(v)
    if whole < 100:
        return f"{whole}%"
    return ">99.9%" if v >= 99.95 else f"{v:.1f}%"


def percent_range(low: float, high: float) -> str:
    """A weight known to lie between ``low`` and ``high`` (below 1), to the digits both ends
    share: "97%" where both print so, else both ends ("96%–97%"; "99.9% to >99.9%")."""
    a, b = percent(low, below_one=True), percent(high, below_one=True)
    if a == b:
        return a
    return f"{a} to {b}" if a[0] in "<>" or b[0] in "<>" else f"{a}–{b}"


def fmt(x: float, digits: int = 3) -> str:
    """A number for on-screen text: ``digits`` significant digits, no exponent clutter."""
    if x == 0:
        return "0"
    if abs(x) >= 1e-3:
        s = f"{x:.{digits}g}"
        return s if "e" not in s else f"{x:,.0f}"
    mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def tiny(log10x: float, markup: bool = False, digits: int = 3) -> str:
    """A positive number given by its log10, as printed to ``digits`` significant digits:
    :func:`fmt` in float64's range, and below it its true exponent, "3.98 × 10^-621"
    ("10<sup>-621</sup>" in ``markup``), never 0 (only an exact 0, log10 = -inf, prints
    "0")."""
    if log10x >= -300:
        return fmt(10.0 ** log10x, digits)
    if log10x == -math.inf:
        return "0"
    exponent = math.floor(log10x)
    mantissa = f"{10.0 ** (log10x - exponent):.{digits - 1}f}"
    if float(mantissa) >= 10:
        mantissa, exponent = f"{1:.{digits - 1}f}", exponent + 1
    return f"{mantissa} × " + (f"10<sup>{exponent}</sup>" if markup else f"10^{exponent}")


def median_range(log10x: float, se: float, markup: bool = False) -> str:
    """A median over draws given by its log10 and that log10's standard error, to the
    digits its 95% interval (1.96 standard errors either side) supports: one number where
    both ends print alike at two significant digits, else both ends ("0.39–0.53"; "between
    3.9 × 10^-621 and 4.1 × 10^-621" where they need an exponent)."""
    half = 1.96 * se
    low, high = tiny(log10x - half, markup, 2), tiny(log10x + half, markup, 2)
    if low == high:
        return low
    return f"between {low} and {high}" if "×" in low + high else f"{low}–{high}"


def median_weight(x: float) -> str:
    """A median max weight: a softmax weight is below 1 even where float64 rounds it to 1."""
    return percent(x, below_one=True)


def median_interval(table: dict, rule: str, i: int) -> str:
    """The median max weight of ``rule`` at row ``i`` of ``table`` (core.saturation_curves or
    core.head_budget) to the digits its 95% interval supports: one number where both ends
    print alike, else both ends (:func:`percent_range`: "96%–97%")."""
    return percent_range(float(table[f"max_weight_median_lo_{rule}"][i]),
                         float(table[f"max_weight_median_hi_{rule}"][i]))


def distinct(a: float, b: float) -> tuple[str, str]:
    """Two weights (:func:`median_weight`) with as many decimals (up to two more) as it
    takes for different values to print differently ("1.82%" and "1.83%", not "1.8%" twice)."""
    pa, pb = median_weight(a), median_weight(b)
    if pa != pb or a == b or pa.startswith(">"):
        return pa, pb
    for digits in (1, 2):
        fa, fb = f"{100 * a:.{digits}f}%", f"{100 * b:.{digits}f}%"
        if fa != fb:
            return fa, fb
    return pa, pb


def share_of_draws(x: float, draws: int) -> str:
    """A share ``x`` of ``draws`` draws, in words: "26% of draws"; a share above 0 that
    rounds to 0% is "under 1% of draws", one below 1 that rounds to 100% "over 99% of
    draws". None and all are said of the draws counted ("none of 2,000 draws", "all 2,000
    draws"): a sample with no exception says little more about the distribution than
    that its exceptions are rare."""
    if x <= 0:
        return f"none of {draws:,} draws"
    if x >= 1:
        return f"all {draws:,} draws"
    shown = math.floor(100 * x + 0.5)       # half up: 0.5% is 1%, never 0% of some draws
    if shown < 1:
        return "under 1% of draws"
    if shown > 99:
        return "over 99% of draws"
    return f"{shown}% of draws"
