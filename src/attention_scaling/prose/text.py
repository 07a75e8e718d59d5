"""All the explorer's prose and formulas: title, caption, guide, the live explanation and the
readout's numbers, each composed from a state core computed (:func:`text_fields`), so every
number in words is the number on the charts."""

from __future__ import annotations

import html
import math
import re

import numpy as np

from .. import core
from .formatting import (distinct, fmt, median_interval, median_range, percent, percent_range,
                         share_of_draws, tiny)

TITLE = f"Why attention divides by √{core.DK}"

#: The caption under the paired bar charts, two paragraphs with {field} slots (see
#: :func:`fill`); :func:`caption_html` wraps it and may end it with a sentence of the page's
#: own (the offline copy's).
CAPTION = (
    "Both charts show the same {n_words} query–key dot products of one random draw: divided by "
    "{pair_div} on the left, raw on the right. Over many draws <i>q</i>·<i>k</i> has "
    "variance d<sub>k</sub>, so the raw logits grow like √d<sub>k</sub> and, as the head "
    "widens, the unscaled softmax puts more and more weight on one key; the ÷√d<sub>k</sub> "
    "logits keep unit variance at every width.{align_caption}</p><p class='caption'>Over "
    "{mc_n} random draws at d<sub>k</sub> = {d}, T = {t}{mc_align} the median max weight is "
    "{mc_s} ÷√d<sub>k</sub> and {mc_u} unscaled: "
    "a typical draw puts {mc_u} of the weight on one key unscaled. This draw puts {sqrt_max_w} "
    "÷√d<sub>k</sub> ({s_pct}) and {none_max_w} unscaled ({u_pct}).{mild} This one draw "
    "changes with d<sub>k</sub> in its own way: each width extends the same q and k by more "
    "components, and the ÷√d<sub>k</sub> logits{corr_keys} at widths d and d′ correlate by "
    "only √(d/d′)."
)


def caption_html(extra: str = "") -> str:
    """The caption's HTML, {field} slots unfilled; ``extra`` is appended as plain text."""
    tail = f" {html.escape(extra)}" if extra else ""
    return f"<p class='caption'>{CAPTION}{tail}</p>"


#: Said of the unscaled draw when it is in the lowest or highest third of the draws.
MILD = (" Unscaled, this draw is milder than {share}{by}: it understates how much weight a "
        "typical draw piles on one key. Resample to see others.")
EXTREME = " Unscaled, this draw is more extreme than {share}{by}."
#: Where the draw's weight and the median print alike (">99.9%"): what the place is by.
BY_THE_REST = " (by the weight left for the other keys: both print as {shown})"
#: How many in ten: the words of :func:`place_sentence`'s shares.
TENTHS = {6: "six", 7: "seven", 8: "eight", 9: "nine"}


def _place(u: core.Variant, pct: float, typ) -> str:
    """:func:`place_sentence` for the unscaled draw ``u`` at percentile ``pct`` of the Monte
    Carlo ``typ``, with its weight as printed where the median prints alike."""
    shown = weight_label(u)
    return place_sentence(pct, typ.draws,
                          alike=shown == percent_range(*typ.median_range[False]) and shown)


def place_sentence(pct: float, draws: int, alike: str | bool = False) -> str:
    """The sentence on where the unscaled draw falls among the Monte Carlo's ``draws``
    draws (``pct``: its percentile), past a third of them either way: the largest share of
    draws it is milder (or more extreme) than, in tenths ("seven draws in ten") or "99
    draws in 100", at the end of the percentile's sampling error nearer the middle (as
    :func:`percentile_phrase`); "" in the middle third. ``alike``: the draw's weight as
    printed where it prints as the median does (">99.9%" both), said with what the place is
    measured by (:data:`BY_THE_REST`)."""
    if 100 / 3 <= pct <= 200 / 3:
        return ""
    spread = percentile_error(pct, draws)
    beyond = pct - spread if pct > 50 else 100 - pct - spread
    if beyond >= 99:
        share = "99 draws in 100"
    else:
        tenths = min(max(math.floor(beyond / 10), 6), 9)
        share = f"{TENTHS[tenths]} draws in ten"
    by = BY_THE_REST.format(shown=alike) if alike else ""
    return (EXTREME if pct > 50 else MILD).format(share=share, by=by)


#: The gradient comparison of the live explanation, by which variant lets more through in
#: this draw (the spread chart shows how it goes over many draws).
GRAD_SCALED = "more reaches the query scaled, in this draw."
GRAD_UNSCALED = ("more reaches the query unscaled, in this draw; the chart of many draws "
                 "shows how often unscaled gets almost none.")
GRAD_SAME = f"the same, since at {core.DK} = 1 scaling divides by √1 = 1."


def guide_html(resample: str = "Press <b>Resample</b> a few times: the bars and dots move, "
               "the boxes do not.") -> str:
    """The one draw's "Try this"; ``resample`` is its second step's wording."""
    return (
        "<div class='try'><h2>Try this</h2><ol>"
        "<li>At T = 1, move <b>d<sub>k</sub></b> from 64 to 512: the unscaled gradients "
        "spread further left.</li>"
        f"<li>{resample}</li>"
        "<li>At d<sub>k</sub> = 64, set <b>T</b> to 0.125 = 1/√64: the scaled chart becomes "
        "what the raw one was at T = 1.</li></ol></div>"
    )


#: The fixed formulas shown above the live explanation, as TeX in $$…$$: the page's Div
#: (disable_math=False) has Bokeh's own MathJax (BokehJS's bokeh-mathjax bundle, served by
#: the page and inlined in the offline copy) draw them as SVG paths of MathJax's fonts, the
#: same in every browser. Screen readers read each formula's words (``sr-only``) and skip
#: its drawing (``aria-hidden``: MathJax's SVG has no text of its own).
FORMULAS = "<div class='formulas'>" + "".join(
    f"<span><span class='sr-only'>{html.escape(words)}</span>"
    f"<span aria-hidden='true'>$${tex}$$</span></span>"
    for tex, words in (
        (r"\operatorname{Var}(q\cdot k) = d_k", f"Var(q·k) = {core.DK}"),
        (r"\operatorname{Var}\bigl(q\cdot k/\sqrt{d_k}\bigr) = 1", f"Var(q·k / √{core.DK}) = 1"),
        (r"p = \operatorname{softmax}(z/T)", "p = softmax(z / T)"),
        (r"\frac{\partial p_i}{\partial u_j} = p_i\,(\delta_{ij} - p_j),\quad u = z/T",
         "∂pᵢ / ∂uⱼ = pᵢ (δᵢⱼ − pⱼ), with u = z / T"),
        (r"\frac{\partial p}{\partial q} = \frac{J K}{s\,T},\quad s = \sqrt{d_k},\ 1"
         r"\ \text{or}\ d_k", f"∂p / ∂q = J K / (s T), with s = √{core.DK}, 1 or {core.DK}"),
    )) + "</div>"

#: The same formulas in HTML, for the offline copy: no MathJax bundle (1.8 MB) in the file.
FORMULAS_HTML = "<div class='formulas'>" + "".join(
    f"<span class='formula'>{formula}</span>" for formula in (
        "Var(<i>q</i>·<i>k</i>) = <i>d</i><sub><i>k</i></sub>",
        "Var(<i>q</i>·<i>k</i>/√<i>d</i><sub><i>k</i></sub>) = 1",
        "<i>p</i> = softmax(<i>z</i>/<i>T</i>)",
        "∂<i>p</i><sub><i>i</i></sub>/∂<i>u</i><sub><i>j</i></sub> = <i>p</i><sub><i>i</i></sub>"
        "(δ<sub><i>ij</i></sub> − <i>p</i><sub><i>j</i></sub>), <i>u</i> = <i>z</i>/<i>T</i>",
        "∂<i>p</i>/∂<i>q</i> = <i>J K</i>/(<i>s T</i>), <i>s</i> = √<i>d</i><sub><i>k</i></sub>, "
        "1 or <i>d</i><sub><i>k</i></sub>")) + "</div>"

#: The words the first screens use, in plain words: (term as HTML, its meaning as HTML),
#: gathered under the one draw's "More detail" (:data:`GLOSSARY_HTML`).
GLOSSARY = (
    ("d<sub>k</sub>", "the head's width: how many numbers each query and each key has."),
    ("logit", "a key's score for the query, <i>q</i>·<i>k</i> (divided by the rule's "
     "divisor and by T), before the softmax turns the scores into weights."),
    ("T, temperature", "what the logits are divided by before the softmax: below 1 it "
     "sharpens the weights, above 1 it flattens them."),
    ("max weight", "the share of the attention that the key with the most gets."),
    ("effective keys e<sup>H</sup>", "how many keys the weights are spread over: e to the "
     "power of their entropy H; 1 when one key takes everything, n when n keys share "
     "equally."),
    ("Jacobian ∂p<sub>i</sub>/∂u<sub>j</sub>", "how far weight i moves when the score of "
     "key j moves a little (the heat map); its diagonal is p<sub>i</sub>(1 − p<sub>i</sub>)."),
    ("Frobenius norm ‖∂p/∂q‖", "how strongly the weights answer a change of the query: the "
     "square root of the sum of the squares of ∂p/∂q's entries. The loss's gradient reaches "
     "the query, and <i>W</i><sub><i>Q</i></sub>, through it."),
    ("barely learn", "said of a draw whose gradient to the query is under a tenth of the "
     "÷√d<sub>k</sub> median: at a learning rate that suits ÷√d<sub>k</sub>, its step is "
     "under a tenth of a typical one."),
    ("SGD, learning rate", "stochastic gradient descent, the way the Training tab trains: "
     "each step moves every weight a little against its gradient on a batch of examples; the "
     "learning rate sets how far."),
    ("batch", f"the {core.TRAIN_BATCH} examples whose mean loss one training step follows."),
    ("equal-step rate", "a rule's learning rate base · s²/d<sub>k</sub> (s its divisor): "
     "every rule's logits then take the same step per unit of the loss's gradient at the "
     "logits (÷√d<sub>k</sub> trains at the base rate, unscaled at base/d<sub>k</sub>)."),
    ("learning-rate sweep", "the same training at a row of rates (each rule's equal-step rate "
     "times powers of 4), to find each rule's best rate: where it ends lowest."),
    ("μP", "maximal update parametrization (Tensor Programs V): a recipe that scales the "
     "initial weights and learning rates with width, so that a rate tuned on a narrow model "
     "suits a wide one; it divides the logits by d<sub>k</sub>."),
    ("a median as a range (96%–97%)", f"a median over {core.CURVE_DRAWS:,} draws is known "
     "only to within a few draws: where those draws round to different numbers, the page "
     "prints the range that holds the median with 95% confidence, not one number."),
)
GLOSSARY_HTML = ("<div class='glossary'><h2>Words used here</h2><dl>" + "".join(
    f"<dt>{term}</dt><dd>{meaning}</dd>" for term, meaning in GLOSSARY) + "</dl></div>")

#: The axis of the gradient to the query, in words where the prose writes ‖∂p/∂q‖_F: a chart
#: draws its text itself, and Unicode has no subscript F (a TeX axis label would be drawn
#: once, in the light theme's colour).
GRAD_Q_AXIS = "Frobenius norm ‖∂p/∂q‖ (log)"


def header_html(subtitle: str = "") -> str:
    """The page's title bar (``id='header'``); ``subtitle`` is plain text after the title."""
    sub = f"<span class='subtitle'>{html.escape(subtitle)}</span>" if subtitle else ""
    return (f"<header id='header' class='app-header'><h1>{html.escape(TITLE)}</h1>{sub}"
            "</header>")


#: What the explanation calls the logits the model uses, by rule (core.Rule.word).
WHICH = {r.key: r.word for r in core.RULE_TABLE}


#: Numbers of keys in words, as the texts say them ("the same eight dot products").
NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 6: "six", 8: "eight", 12: "twelve"}


def align_texts(r: core.State, n_words: str) -> dict[str, str]:
    """The one draw's sentences that depend on the alignment rho of its first key: with
    rho = 0 all keys are independent of the query; with rho > 0, q . k_1 = rho |q|^2 +
    sqrt(1 - rho^2) q . eps averages rho d_k over draws."""
    rho, d = r.align, r.d_k
    if not rho:
        return {"spread": f"one query against {n_words} keys, a small sample whose spread "
                          "varies from draw to draw around those typical values.",
                "align_caption": "", "mc_align": "", "corr_keys": ""}
    return {
        "spread": (f"one query against {n_words} keys, k1 among them aligned with the query "
                   f"(ρ = {fmt(rho)}): its logit is {fmt(float(r.raw_logits[0]))} raw and "
                   f"{fmt(float(r.scaled.logits[0]))} scaled in this draw, against an average "
                   f"of ρ·{core.DK} = {fmt(rho * d)} raw and ρ√{core.DK} = "
                   f"{fmt(rho * math.sqrt(d))} "
                   "scaled over draws; the other keys are independent of q, with typical "
                   f"logits ±{fmt(math.sqrt(d))} raw and ±1 scaled."),
        "align_caption": (" That is for keys drawn independently of the query. Here k1 is "
                          f"aligned with it (ρ = {fmt(rho)}), as training makes keys: q·k1 "
                          f"averages ρ·{core.DK} = {fmt(rho * d)} over draws, so it grows like "
                          f"{core.DK} raw and like √{core.DK} scaled (ρ√{core.DK} = "
                          f"{fmt(rho * math.sqrt(d))} here); only ÷{core.DK} keeps its average "
                          "fixed, at ρ."),
        "mc_align": f", with k1 aligned at ρ = {fmt(rho)},",
        "corr_keys": " of the independent keys",
    }


def spread_clause(d_k: int, spread: dict) -> str:
    """What the spread of the gradient to the query over many draws (core.gradient_spread)
    says, unscaled against ÷√d_k, in plain text: whether unscaled's median is above ÷√d_k's,
    below it, or near it (within two standard errors), and the shares of draws that barely
    learn (under a tenth of the ÷√d_k median) under each."""
    if d_k == 1:
        return "every rule divides by 1, so their gradients match, draw by draw"
    none, sqrt = spread["frozen_share_none"], spread["frozen_share_sqrt"]
    gap = spread["median_none"] - spread["median_sqrt"]
    se = math.hypot(spread["median_se_none"], spread["median_se_sqrt"])
    larger = gap > 2 * se
    size = "above" if larger else "below" if gap < -2 * se else "near"
    head = (f"unscaled's median gradient is {size} ÷√{core.DK}'s, "
            f"{'but' if larger and none > 0 else 'and'} "
            f"{_share(none)} barely learn")
    tail = _share(sqrt).removesuffix(" of draws").removesuffix(" draws")
    verb = "does" if tail.startswith("none") else "do"
    return f"{head}; under ÷√{core.DK}, {tail} {verb}"


def readout_values(v: core.Variant) -> dict[str, str]:
    """A variant's numbers as the readout shows them (fields ``<rule>_<name>``)."""
    return {"max_w": weight_label(v), "top": f"k{v.argmax + 1}", "eff": fmt(v.effective_keys),
            "diag": tiny(v.log10_max_diagonal), "frob": tiny(v.log10_frobenius),
            "grad": tiny(v.log10_query_gradient)}


def readout_fields(r: core.State) -> dict[str, str]:
    """Every rule's readout values (:func:`readout_values`), as fields ``<rule>_<name>``."""
    return {f"{key}_{name}": value for key, v in r.variants.items()
            for name, value in readout_values(v).items()}


@core.memo(maxsize=core.STATE_CACHE_SIZE)
def _text_fields(d_k: int, temperature: float, seed: int, rule: str,
                 n_keys: int, align: float) -> dict[str, str]:
    """fields_of(state): a pure function of the controls, kept for the same recent
    settings as core.compute_state (whose cached state it reads); callers get a copy. A
    core memo, so that a worker process records it (work.prepare) even where it holds the
    result already and computes none of the core results inside it."""
    r = core.compute_state(d_k, temperature, seed, n_keys, align)
    t = r.temperature
    act = r.active(rule)
    s, u = r.scaled, r.unscaled
    temp = ""
    if t != 1:
        effect = "flattens" if t > 1 else "sharpens"
        temp = (f" Both charts also divide by the temperature T = {fmt(t)}, which {effect}"
                " the weights.")
        if r.d_k > 1 and t * math.sqrt(r.d_k) == 1:
            temp += (f" At T = 1/√{r.d_k} the scaled chart is the unscaled chart at T = 1: "
                     f"softmax(q·k/(√{core.DK}·T)) = softmax(q·k).")
    typ = core.typical(r.d_k, t, n_keys, align)
    s_pct, u_pct = typ.percentile(True, s.log10_rest), typ.percentile(False, u.log10_rest)
    if r.d_k == 1:
        grad = GRAD_SAME
    else:
        grad = (GRAD_SCALED if s.log10_query_gradient > u.log10_query_gradient
                else GRAD_UNSCALED)
    eff = fmt(act.effective_keys)
    return {
        "d": str(r.d_k),
        "n_words": NUMBER_WORDS.get(n_keys, str(n_keys)),
        "t": fmt(t),
        "seed": str(r.seed),
        "rule": rule,
        "root": fmt(math.sqrt(r.d_k)),
        "raw_sd": fmt(float(r.raw_logits.std())),
        "scaled_sd": fmt(float(s.logits.std())),
        "temp": temp,
        "which": WHICH[rule],
        "active": rule,
        "max_diag": tiny(act.log10_max_diagonal),
        "frob": tiny(act.log10_frobenius),
        "frob_z": tiny(act.log10_frobenius - math.log10(t)),
        "grad": tiny(act.log10_query_gradient),
        "max_w": weight_label(act),
        # the left bar chart's logits (core.paired_rule): the model's, ÷√d_k where unscaled
        "pair_max_w": weight_label(r.paired(rule)),
        "pair_word": core.RULE[core.paired_rule(rule)].word,
        "pair_div": divisor_text(core.RULE[core.paired_rule(rule)]),
        "eff": eff,
        "keys": "key" if eff == "1" else "keys",
        **readout_fields(r),
        "grad_cmp": grad,
        "grad_spread": spread_clause(r.d_k, core.gradient_spread(r.d_k, t, n_keys, align)),
        "mc_n": f"{typ.draws:,}",
        "mc_s": percent_range(*typ.median_range[True]),
        "mc_u": percent_range(*typ.median_range[False]),
        "s_pct": percentile_phrase(s_pct, typ.draws),
        "u_pct": percentile_phrase(u_pct, typ.draws),
        # by the draw's place among the Monte Carlo's (exact where both weights round to 1)
        "mild": _place(u, u_pct, typ),
        **align_texts(r, NUMBER_WORDS.get(n_keys, str(n_keys))),
    }


def text_fields(d_k: int, temperature: float, seed: int, rule,
                n_keys: int = core.N_KEYS, align: float = 0.0) -> dict[str, str]:
    """Every number (and variable word) of the explanation, caption and readout, as shown,
    for the state core computes at these settings (``n_keys`` keys, the first ``align``-
    correlated with the query), the model using ``rule`` (a rule of core.RULES, or scaled:
    True / False); a copy: the caller may add to it."""
    return dict(_text_fields(d_k, temperature, seed, core.as_rule(rule), int(n_keys),
                             float(align)))


def fields_of(state) -> dict[str, str]:
    """:func:`text_fields` of an explorer's state (state.ExplorerState: its computed result
    and its rule)."""
    r = state.result
    return text_fields(r.d_k, r.temperature, r.seed, state.rule, len(r.raw_logits), r.align)


def explanation_of(state) -> str:
    """The explanation as HTML for an explorer's state, its numbers filled in."""
    return fill(EXPLANATION, fields_of(state))


#: While the worker pool computes a setting the page has not shown before (page.Explorer.change).
BUSY_HTML = ("<p class='busy' role='status'>Computing this setting… the charts show the "
             "previous one until it is ready.</p>")


def idle_note_html(why: str) -> str:
    """The note under a control the open tab does not use (state.TABS' idle rows)."""
    return f"<p class='idle-note'>Not used on this tab: {html.escape(why)}.</p>"


def notice_html(notices: list[str]) -> str:
    """The notice about adjusted URL values: plain text, escaped, never markup."""
    if not notices:
        return ""
    items = "".join(f"<li>{html.escape(n)}</li>" for n in notices[:8])
    more = f"<li>… and {len(notices) - 8} more.</li>" if len(notices) > 8 else ""
    return (f"<div class='notice' role='status'><b>Some link settings were adjusted:</b>"
            f"<ul>{items}{more}</ul></div>")


def weight_label(v: core.Variant) -> str:
    """A variant's max weight as printed: never "100%" while its other weights are positive
    (known from the logits, :attr:`core.Variant.log10_rest`, where their sum underflows)."""
    return percent(v.max_weight, below_one=v.log10_rest > -math.inf)


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st, ..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def percentile_error(pct: float, draws: int) -> float:
    """How far a percentile ``pct`` read from ``draws`` draws may be off, in percentiles: two
    standard errors of the share below it, and the quantiles' 0.1% steps."""
    return 200 * math.sqrt(pct * (100 - pct) / 1e4 / draws) + 0.1


def percentile_phrase(pct: float, draws: int | None = None) -> str:
    """Where a draw falls among the Monte Carlo's ``draws`` draws: "24th percentile", or,
    where two standard errors of the share (and the quantiles' 0.1% steps) span two whole
    percentiles, both ("25th–26th percentile"); never a 0th or a 100th."""
    def whole(x: float) -> int:
        return math.floor(x + 0.5)

    if whole(pct) < 1:
        return "below the 1st percentile"
    if whole(pct) > 99:
        return "above the 99th percentile"
    spread = 0.0 if draws is None else percentile_error(pct, draws)
    lo, hi = max(whole(pct - spread), 1), min(whole(pct + spread), 99)
    return f"{ordinal(lo)} percentile" if lo == hi else f"{ordinal(lo)}–{ordinal(hi)} percentile"


_DK = "<i>d</i><sub><i>k</i></sub>"
_PI = "<i>p</i><sub><i>i</i></sub>"

#: The live explanation: HTML with {field} slots that :func:`fill` turns into
#: ``<span data-k="field">value</span>``. Formulas are typeset in HTML (italic variables,
#: sub- and superscripts); the fixed ones above it (FORMULAS) are MathML.
EXPLANATION = (
    "<p>With independent unit-variance components, <i>q</i>·<i>k</i> is a sum of "
    + _DK + " = {d} terms of variance 1: over draws its variance is {d}, typical logits are "
    "about ±{root}, and dividing by √{d} = {root} restores unit variance. This draw's {n_words} "
    "logits have standard deviation {raw_sd} raw and {scaled_sd} scaled: {spread}{temp}</p>"
    "<p>The softmax's own Jacobian <i>J</i> = ∂<i>p</i>/∂<i>u</i> (the heat map, "
    "<i>u</i> = <i>z</i>/<i>T</i>) has diagonal " + _PI + "(1 − " + _PI + "), at most ¼ and "
    "vanishing as " + _PI + " nears 0 or 1; with respect to the logits <i>z</i> it is "
    "<i>J</i>/<i>T</i>. What reaches the query, and through it <i>W</i><sub><i>Q</i></sub>, "
    "is ∂<i>p</i>/∂<i>q</i> = <i>J K</i>/(<i>s T</i>), with <i>s</i> = √" + _DK
    + " scaled, 1 unscaled and " + _DK + " under ÷d<sub>k</sub>. The model here uses the "
    "<b>{which}</b> logits: largest "
    "<i>p</i>(1 − <i>p</i>) = {max_diag}, ‖<i>J</i>‖<sub>F</sub> = {frob} "
    "(‖∂<i>p</i>/∂<i>z</i>‖<sub>F</sub> = {frob_z}), ‖∂<i>p</i>/∂<i>q</i>‖<sub>F</sub> = "
    "{grad}; max weight {max_w}, spread over {eff} effective {keys}.</p>"
    "<p>‖∂<i>p</i>/∂<i>q</i>‖<sub>F</sub> is {sqrt_grad} scaled and {none_grad} unscaled: "
    "{grad_cmp}</p>"
)


def fill(template: str, fields: dict[str, str]) -> str:
    """Fill a template's {field} slots with ``<span data-k="field">value</span>`` (escaped).

    The spans let the browser replace just the numbers on later changes (see
    charts.Charts), with no re-render of the surrounding text.
    """
    return re.sub(
        r"\{(\w+)\}",
        lambda m: f'<span data-k="{m.group(1)}">{html.escape(fields[m.group(1)])}</span>',
        template,
    )


def plain(markup: str) -> str:
    """The text a browser shows for ``markup`` (its textContent): tags dropped, entities
    decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


# ---- URL state: the one place where controls are written to and read from a query string ----


# ---- the argument over many draws and through training ------------------------------------

def _dk(d: int | str) -> str:
    return f"d<sub>k</sub> = {d}"


def _setting(d_k: int, temperature: float, n_keys: int, align: float) -> str:
    """"d_k = 64, T = 1, 8 keys" and, when a key is aligned, the alignment."""
    aligned = f", the first aligned with the query by ρ = {align:g}" if align else ""
    return f"{_dk(d_k)}, T = {fmt(temperature)}, {n_keys} keys{aligned}"


def _share(x: float) -> str:
    """A share of the curves' draws (core.CURVE_DRAWS) in words (formatting.share_of_draws)."""
    return share_of_draws(x, core.CURVE_DRAWS)


def _rules(values: dict, show=percent) -> str:
    """ "80% unscaled, 27% ÷√d_k and 15% ÷d_k" """
    return (f"{show(values['none'])} unscaled, {show(values['sqrt'])} ÷√d<sub>k</sub> and "
            f"{show(values['linear'])} ÷d<sub>k</sub>")


def _factor(x: float) -> str:
    """A ratio in words: "3.4 times", "7.6 × 10<sup>9</sup> times"."""
    if not math.isfinite(x):
        return "more than 10<sup>308</sup> times"
    if x < 1e4:
        return f"{fmt(x, 2)} times"
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa} × 10<sup>{int(exponent)}</sup> times"


def _one_digit(x: float, rounding) -> str:
    """``x`` (at least 1) to one significant digit, rounded by ``rounding`` (math.floor or
    math.ceil): 2.83 -> "2", 7.61 -> "8", 431 -> "500" with ceil."""
    scale = 10 ** math.floor(math.log10(x))
    return f"{rounding(x / scale) * scale:,.0f}"


def _log_factor(log10_ratio: float, se: float) -> str:
    """A ratio known by its log10 and that log's standard error (in decades), with the
    digits its sample supports: two significant digits (:func:`_factor`) for se <= 0.1; for
    se <= 1, the range of two standard errors either side to one digit ("3 to 8 times")
    where it stays under 1,000, else "about 10<sup>10</sup> times"; for a larger se that
    range widened to multiples of 5 in the exponent ("10<sup>240</sup> to 10<sup>275</sup>
    times")."""
    if se <= 0.1:
        if log10_ratio < 300:
            return _factor(10.0 ** log10_ratio)
        exponent = math.floor(log10_ratio)
        return f"{10.0 ** (log10_ratio - exponent):.1f} × 10<sup>{exponent}</sup> times"
    if se <= 1 and log10_ratio + 2 * se < 3:
        return (f"{_one_digit(10 ** (log10_ratio - 2 * se), math.floor)} to "
                f"{_one_digit(10 ** (log10_ratio + 2 * se), math.ceil)} times")
    if se <= 1:
        return f"about 10<sup>{round(log10_ratio)}</sup> times"
    lo = 5 * math.floor((log10_ratio - 2 * se) / 5)
    hi = 5 * math.ceil((log10_ratio + 2 * se) / 5)
    return f"10<sup>{lo}</sup> to 10<sup>{hi}</sup> times" if lo > 0 else f"up to 10<sup>{hi}</sup> times"


def _median_grad(table: dict, rule: str, i: int) -> str:
    """The median gradient to the query of ``rule`` at row ``i`` of ``table``
    (core.saturation_curves or core.head_budget), to the digits its 95% interval supports
    (:func:`formatting.median_range`)."""
    return median_range(float(table[f"log10_grad_q_median_{rule}"][i]),
                        float(table[f"log10_grad_q_median_se_{rule}"][i]), markup=True)


def _grad(log10x: float) -> str:
    """A gradient norm given by its log10, as printed in HTML (:func:`tiny`)."""
    return tiny(log10x, markup=True)


def final_losses(runs: dict) -> tuple[dict, str]:
    """What finished training runs (rule -> core.SeededTraining) ended with: per rule the
    median over the seeds of the mean loss of the last core.TRAIN_TAIL steps, and those
    numbers in a sentence's words (without its full stop)."""
    final = {r: run.final["median"] for r, run in runs.items()}
    seeds = len(next(iter(runs.values())).runs)
    shown = named_values(final)
    return final, (f"Mean loss of the last {core.TRAIN_TAIL} steps, median of {seeds} seeds: "
                   f"{shown}")


def variance_html(d_k: int, dist: dict, std_curve: dict, draws: int) -> str:
    """What the histograms show at ``d_k``: the measured spread of q·k over ``draws`` draws
    (core.logit_distribution) under each rule, against √d_k and 1, and how far the measured
    spread at any width (core.logit_std_curve) is from √d_k."""
    gaps = np.abs(np.asarray(std_curve["std_raw"]) / np.sqrt(std_curve["d_k"]) - 1)
    return (
        f"<p>Over {draws:,} random draws of <i>q</i> and <i>k</i> at {_dk(d_k)}, "
        f"<i>q</i>·<i>k</i> has standard deviation {fmt(dist['std_none'])} (√{d_k} = "
        f"{fmt(math.sqrt(d_k))}); divided by √d<sub>k</sub> it is {fmt(dist['std_sqrt'])} "
        f"(unit variance, at every width), and divided by d<sub>k</sub> it is "
        f"{fmt(dist['std_linear'])}. The chart below sets the measured spread at every width "
        f"beside √d<sub>k</sub>: the largest gap is {fmt(100 * float(gaps.max()), 2)}%.</p>")


def saturation_html(d_k: int, temperature: float, n_keys: int, align: float, curves: dict,
                    draw: dict, draws: int) -> str:
    """What the saturation curves show at this setting and where this draw (rule -> Variant)
    sits; every number read from ``curves`` (core.saturation_curves) and ``draw``."""
    i = core.D_K_VALUES.index(d_k)
    shown = {r: median_interval(curves, r, i) for r in core.RULES}
    first = {r: curves[f"max_weight_median_{r}"][0] for r in core.RULES}
    last = {r: curves[f"max_weight_median_{r}"][-1] for r in core.RULES}
    sqrt_all = [float(x) for x in curves["max_weight_median_sqrt"]]
    this = {r: weight_label(v) for r, v in draw.items()}
    lo, hi = distinct(min(sqrt_all), max(sqrt_all))
    head = (f"<p>Over {draws:,} random draws at {_setting(d_k, temperature, n_keys, align)}, "
            f"the median max weight is {_rules(shown, str)}. This draw (the dots): "
            f"{_rules(this, str)}.</p>")
    if not align:
        tail = (
            "<p>From d<sub>k</sub> = 1 to 4096 the unscaled median goes from {} to {}, while "
            "÷√d<sub>k</sub> keeps unit variance and stays between {} and {}. ÷d<sub>k</sub> "
            "leaves the logits a standard deviation of 1/√d<sub>k</sub>, so the softmax "
            "flattens toward the even {}% as the head widens: its median goes from {} to {}."
            "</p>").format(*distinct(first["none"], last["none"]), lo, hi,
                           fmt(100 / n_keys), *distinct(first["linear"], last["linear"]))
    else:
        # the medians to the digits their 95% intervals support (never a digit 2,000 draws
        # do not fix, as two values made to print apart would get)
        j, end = core.D_K_VALUES.index(64), len(core.D_K_VALUES) - 1
        sq = [median_interval(curves, "sqrt", x) for x in (j, end)]
        lin = [median_interval(curves, "linear", x) for x in (j, end)]
        tail = (
            f"<p>With ρ = {align:g} the aligned logit ρ|q|² has mean ρ·d<sub>k</sub>: "
            f"÷√d<sub>k</sub> lets it grow like ρ√d<sub>k</sub>, and its median max weight is "
            f"{sq[0]} at d<sub>k</sub> = 64 and {sq[1]} at 4096; ÷d<sub>k</sub> keeps the "
            f"logit of order ρ, and its median max weight is {lin[0]} at 64 and {lin[1]} at "
            f"4096. "
            f"μP (Tensor Programs V) divides by d<sub>k</sub> "
            f"for this reason, within a scaling of every update with width; a sharp peak on "
            f"the aligned key can be what a trained head wants, and heads of 64–128 train "
            f"well with ÷√d<sub>k</sub>.</p>")
    return head + tail


def gradient_html(d_k: int, temperature: float, n_keys: int, align: float, curves: dict,
                  draw: dict, draws: int) -> str:
    """The gradient reaching the query over many draws, read from ``curves``: at this width,
    and where the unscaled median falls below the ÷√d_k one for good."""
    i = core.D_K_VALUES.index(d_k)
    none = [float(x) for x in curves["log10_grad_q_median_none"]]
    sqrt = [float(x) for x in curves["log10_grad_q_median_sqrt"]]
    med = {r: _median_grad(curves, r, i) for r in core.RULES}
    this = {r: v.log10_query_gradient for r, v in draw.items()}
    text = (f"<p>‖∂<i>p</i>/∂<i>q</i>‖<sub>F</sub>, the gradient that reaches the query and "
            f"through it <i>W</i><sub><i>Q</i></sub>: over {draws:,} draws at "
            f"{_setting(d_k, temperature, n_keys, align)}, its median is {_rules(med, str)} "
            f"(this draw: {_rules(this, _grad)}).</p>" + share_text(i, curves))
    k = core.unscaled_below_from(curves)
    start = core.D_K_VALUES[1]
    if k is not None:
        se = math.hypot(curves["log10_grad_q_median_se_none"][-1],
                        curves["log10_grad_q_median_se_sqrt"][-1])
        if k == 1:
            head = (f"At d<sub>k</sub> = 1 the two coincide (√1 = 1); from d<sub>k</sub> = "
                    f"{start} on")
        elif all(none[j] >= sqrt[j] for j in range(1, k)):
            upto = (f"At d<sub>k</sub> = {start}" if k == 2 else
                    f"From d<sub>k</sub> = {start} to {core.D_K_VALUES[k - 1]}")
            head = (f"{upto} more reaches the query unscaled (its logits are merely larger); "
                    f"from d<sub>k</sub> = {core.D_K_VALUES[k]} on")
        else:
            head = (f"Below d<sub>k</sub> = {core.D_K_VALUES[k]} the two medians cross; from "
                    f"there on")
        text += (f"<p>{head} the unscaled median is below the ÷√d<sub>k</sub> one, and at 4096 "
                 f"it is {_log_factor(sqrt[-1] - none[-1], se)} smaller: the softmax saturates and p(1 − p) dies.</p>")
    else:
        text += ("<p>At this setting the unscaled median is not below the ÷√d<sub>k</sub> one "
                 "at the widest heads.</p>")
    return text


#: ÷d_k's gradients are called alike where at most this share of its draws falls under a
#: tenth of its own median.
ALIKE_SHARE = 0.05


def share_text(i: int, curves: dict) -> str:
    """The upper chart of the gradient tab at width index ``i``: the shares of the draws under
    a tenth of the ÷√d_k median (core.saturation_curves), and how ÷d_k's compare
    (:func:`_linear_spread`)."""
    shares = {r: float(curves[f"frozen_share_{r}"][i]) for r in core.RULES}
    text = ("<p>The upper chart counts the draws whose gradient is under a tenth of the "
            "÷√d<sub>k</sub> median, query rows that barely learn at a learning rate that "
            f"suits ÷√d<sub>k</sub>: here {_rules(shares, _share)}.")
    if core.D_K_VALUES[i] == 1:
        return text + (" At d<sub>k</sub> = 1 the three rules divide by the same 1, so their "
                       "counts are the same.</p>")
    if shares["linear"] > 0:
        text += " " + _linear_spread(i, curves)
    text += _yardstick(i, curves)
    equal = {r: float(curves[f"equal_step_share_{r}"][i]) for r in core.RULES}
    return text + (
        "</p><p>This count assumes one shared learning rate. The Training tab gives each rule "
        "the rate that moves its logits by the same step per unit of the loss's gradient at "
        "the logits. At those rates a logit's step is about this gradient times the rule's "
        "rate and √d<sub>k</sub> over its divisor, and it falls under a tenth of "
        f"÷√d<sub>k</sub>'s median step for {_rules(equal, _share)}.</p>")


#: ÷√d_k is called saturated itself where its median max weight is above this.
SATURATED_WEIGHT = 0.9


def _yardstick(i: int, curves: dict) -> str:
    """Where ÷√d_k, the yardstick, is saturated itself at width index ``i``: its own draws
    spread far below its median (more than :data:`ALIKE_SHARE` under a tenth of it), or its
    median max weight above :data:`SATURATED_WEIGHT`; else nothing."""
    own = float(curves["spread_share_sqrt"][i])
    if own > ALIKE_SHARE:
        return (" The yardstick is saturated too: under ÷√d<sub>k</sub> itself, "
                f"{_share(own)} fall under a tenth of its median.")
    weight = float(curves["max_weight_median_sqrt"][i])
    if weight > SATURATED_WEIGHT:
        return (" The yardstick is saturated too: ÷√d<sub>k</sub>'s own median max weight is "
                f"{median_interval(curves, 'sqrt', i)} here, so a tenth of its median gradient "
                "is itself small.")
    return ""


#: ÷d_k's median is called near the count's line (a tenth of ÷√d_k's) within this many
#: decades of it (a factor 1.5).
NEAR_THE_LINE = math.log10(1.5)


def _linear_spread(i: int, curves: dict) -> str:
    """÷d_k's median gradient against ÷√d_k's at width index ``i`` (with the digits the
    sample supports) and the share of ÷d_k's draws under a tenth of its own median, in the
    words that hold for them: smaller but alike (at most :data:`ALIKE_SHARE` so far below;
    where its median is near a tenth of ÷√d_k's, a count that can jump), smaller and spread,
    larger, or the same within two standard errors."""
    gap = float(curves["log10_grad_q_median_linear"][i] - curves["log10_grad_q_median_sqrt"][i])
    se = math.hypot(curves["log10_grad_q_median_se_linear"][i],
                    curves["log10_grad_q_median_se_sqrt"][i])
    own = float(curves["spread_share_linear"][i])
    below = ("none of them under a tenth of its own median" if own <= 0 else
             f"{_share(own)} under a tenth of its own median")
    if abs(gap) <= 2 * se:
        return (f"÷d<sub>k</sub>'s and ÷√d<sub>k</sub>'s medians agree within two standard "
                f"errors (÷d<sub>k</sub>: {below}).")
    factor = _log_factor(abs(gap), se)
    if gap > 0:
        return (f"Here ÷d<sub>k</sub>'s median is {factor} ÷√d<sub>k</sub>'s ({below}): the "
                "÷d<sub>k</sub> draws counted are its low tail.")
    if own <= ALIKE_SHARE:
        near = abs(abs(gap) - 1) < NEAR_THE_LINE
        return (f"÷d<sub>k</sub>'s gradients are smaller ({factor} at the median) but alike "
                f"({below}): a learning rate d<sub>k</sub> times ÷√d<sub>k</sub>'s gives them "
                "the same step per unit of gradient (the Training tab)." + (
                    " Its median is near the count's line (a tenth of ÷√d<sub>k</sub>'s), so "
                    "its alike draws cross that line together as d<sub>k</sub> changes: its "
                    "count can jump between none and most." if near else ""))
    return (f"÷d<sub>k</sub>'s median is {factor} smaller than ÷√d<sub>k</sub>'s, and its "
            f"gradients are spread ({below}).")


#: The training tab before its first run.
TRAINING_INTRO = (
    "<p><b>Train</b> runs one attention head under each rule at the current d<sub>k</sub>, T "
    f"and number of keys, from {core.TRAIN_SEEDS} seeds (the seed shown and the next ones), "
    "with the same starts and batches under each rule: it learns by plain SGD (small steps "
    "against each batch's gradient; the words are in the one draw's glossary) to copy the "
    "token of the key that matches a noisy query. The loss sits after the softmax, so every "
    "gradient reaching <i>W</i><sub><i>Q</i></sub> and <i>W</i><sub><i>K</i></sub> passes "
    "through its Jacobian.</p>"
    "<p>Each rule trains at the learning rate s²/d<sub>k</sub> for its divisor s. One SGD "
    "step on <i>W</i><sub><i>Q</i></sub> moves a logit by about lr·d<sub>k</sub>/s² per unit "
    "of gradient, so at these rates every rule's logits move by the same step per unit of "
    "gradient; one shared rate would compare step sizes d<sub>k</sub>² apart, not "
    "saturation. Then a sweep of learning rates finds each rule's own best rate.</p>")


def _change(before: float, after: float) -> str:
    """A relative change as words: "down 52%", "up 3%", "unchanged to 3 digits"."""
    if before == 0 or fmt(before) == fmt(after):
        return "unchanged to 3 digits"
    x = (after - before) / abs(before)
    return f"{'down' if x < 0 else 'up'} {fmt(abs(100 * x), 2)}%"


def training_status_html(step: int, steps: int, d_k: int, temperature: float, n_keys: int,
                         done: bool, sweep=None) -> str:
    """The line beside the Train button: the step the runs have reached, or where they ended,
    and the learning-rate sweep's points (``sweep``: a core.LearningRateSweep, or None)."""
    if not done:
        return f"<span class='status' role='status'>Training… step {step} of {steps}</span>"
    tail = ("" if sweep is None else
            f" Learning-rate sweep: {sweep.points_done} points." if sweep.done else
            f" Sweeping learning rates… {sweep.points_done} of {sweep.points_planned} points.")
    return (f"<span class='status' role='status'>Trained {step} of {steps} steps at "
            f"d<sub>k</sub> = {d_k}, T = {temperature:g}, {n_keys} keys.{tail}</span>")


def training_refused_html(limit: int) -> str:
    """The line beside the Train button when the server refuses a run: ``limit`` runs are
    under way from the same address already."""
    return (f"<span class='status' role='status'>The server is training {limit} "
            f"run{'s' if limit != 1 else ''} from your network address already (the most it "
            f"trains at once for one address). Train again once one of them has ended."
            f"</span>")


def named_values(values: dict) -> str:
    """Each rule's number after its name: "unscaled 0.128, ÷√d_k 0.013, ÷d_k 0.0115"."""
    return ", ".join(f"{RULE_LABELS_HTML[r]} {fmt(x)}" for r, x in values.items())


def rule_names(rules: list[str]) -> str:
    """Rules' names as a list in words: "unscaled", "unscaled and ÷d_k", "a, b and c"."""
    names = [RULE_LABELS_HTML[r] for r in rules]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _times_equal_step(x: float) -> str:
    """A rate as a multiple of its rule's equal-step rate, in words."""
    return "its equal-step rate" if x == 1 else f"{_rate(x)} × its equal-step rate"


def training_sweep_html(sweep, d_k: int) -> str:
    """What a finished learning-rate sweep (rule -> core.RuleSweep) at ``d_k`` showed: the
    rates swept, each rule's best rate and loss there, whether each learns there, and μP's
    rates beside ÷d_k's best."""
    spans = ", ".join(f"{RULE_LABELS_HTML[r]} {_rate(s.rates[0])} to {_rate(s.rates[-1])}"
                      for r, s in sweep.items())
    best = "; ".join(
        f"{RULE_LABELS_HTML[r]} {_rate(s.best)} ({fmt(float(s.median[s.rates == s.best][0]))}),"
        f" {_times_equal_step(s.best / s.equal_step)}" if np.isfinite(s.best) else
        f"{RULE_LABELS_HTML[r]} none (every median run diverged)" for r, s in sweep.items())
    stuck = [r for r, s in sweep.items()
             if not (np.isfinite(s.best) and s.median.min() < 0.5 * s.start)]
    learns = ("At its best rate each rule learns: its median final loss is under half its "
              "first loss." if not stuck else
              f"At its best rate {rule_names(stuck)} {'does' if len(stuck) == 1 else 'do'} not get "
              f"under half {'its' if len(stuck) == 1 else 'their'} first loss.")
    return (
        f"<p>The lower chart trains each rule again at {_dk(d_k)}, from the same seeds and for "
        f"the same steps, at its equal-step rate (the ring) times powers of 4, widened where "
        f"the lowest loss sat at an edge: {spans}. Each rule's best rate, its lowest median "
        f"final loss (filled): {best}. {learns}</p>"
        f"<p>On this toy at T = 1 with 8 keys (seeds {SWEEP_SEEDS_SHOWN[0]} to "
        f"{SWEEP_SEEDS_SHOWN[-1]}), ÷√d<sub>k</sub>'s best rate is 4 at d<sub>k</sub> = 64 "
        f"and at 1024, and ÷d<sub>k</sub>'s is d<sub>k</sub> at both: its best logit step "
        f"stays put. Unscaled's best rate is 1/4 at both, 16 and 256 times its equal-step "
        f"rate: the equal step shrinks its rate as 1/d<sub>k</sub>, its best rate does not "
        f"move, and at its best rate it learns at both widths. μP pairs 1/d<sub>k</sub> with SGD rates for input-like weights such as "
        f"these <i>W</i><sub><i>Q</i></sub> and <i>W</i><sub><i>K</i></sub> that grow in "
        f"proportion to width, so under μP's rates ÷d<sub>k</sub>'s best base rate stays "
        f"put too.</p>")


#: The seeds of the sweeps at d_k = 64 and 1024 the sweep's paragraph quotes (the page's
#: default seed and the next two; tests/test_argument_core.py checks its numbers).
SWEEP_SEEDS_SHOWN = (2288, 2289, 2290)


def _rate(x: float) -> str:
    """A learning rate as the page prints it: "1/1024", "1", "64", else 3 digits."""
    if x >= 1 and x == int(x):
        return str(int(x))
    if x < 1 and 1 / x == int(1 / x):
        return f"1/{int(1 / x)}"
    return fmt(x)


def training_html(runs: dict, d_k: int, temperature: float, n_keys: int) -> str:
    """What finished training runs (rule -> core.SeededTraining, each rule at its own
    learning rate) showed, in their own numbers: the rates and why, each rule's result
    (median and range over the seeds of the mean loss of the last core.TRAIN_TAIL steps), and
    how the equal step leans between ÷√d_k and ÷d_k."""
    return (_training_rates(runs, d_k) + _training_results(runs, d_k, temperature, n_keys)
            + equal_step_lean_html(runs))


def _training_rates(runs: dict, d_k: int) -> str:
    rates = ", ".join(f"{RULE_LABELS_HTML[r]} {_rate(run.lr)}" for r, run in runs.items())
    if d_k == 1:
        return (f"<p>At {_dk(1)} every rule divides by 1 and trains at rate 1: the three "
                "runs are the same.</p>")
    return (f"<p>Each rule trains at its own learning rate, s²/d<sub>k</sub> for its divisor "
            f"s: {rates}. One SGD step on <i>W</i><sub><i>Q</i></sub> moves a logit by about "
            f"lr·d<sub>k</sub>/s². At one shared rate the unscaled run's step would be "
            f"{d_k} times ÷√d<sub>k</sub>'s and the ÷d<sub>k</sub> run's 1/{d_k} of it: the "
            f"runs would compare steps d<sub>k</sub>² = {d_k * d_k:,} times apart, not "
            "saturation. At these "
            "rates every rule's logits move by the same step per unit of gradient.</p>")


def _training_results(runs: dict, d_k: int, temperature: float, n_keys: int) -> str:
    first = runs["sqrt"]
    seeds = first.seeds
    starts = {r: float(np.median([one.loss[0] for one in run.runs])) for r, run in runs.items()}
    g0 = {r: float(np.median([one.grad_wq[0] for one in run.runs])) for r, run in runs.items()}
    results = "; ".join(
        f"{RULE_LABELS_HTML[r]} {fmt(run.final['median'])} ({fmt(run.final['min'])} to "
        f"{fmt(run.final['max'])}), from a first loss of {fmt(starts[r])}"
        for r, run in runs.items())
    ratio = g0["none"] / g0["sqrt"] if g0["sqrt"] else math.inf
    return (
        f"<p>{first.steps} steps of plain SGD on batches of {core.TRAIN_BATCH} at "
        f"{_dk(d_k)}, T = {fmt(temperature)}, {n_keys} keys, from seeds "
        f"{', '.join(str(x) for x in seeds[:-1])} and {seeds[-1]}, with the same starts and "
        f"batches under each rule. One batch's loss is noise, so a run's result is the mean "
        f"loss of its last {core.TRAIN_TAIL} steps, and a rule's the median over its "
        f"{len(seeds)} seeds (their range in brackets): {results}. The charts draw each "
        "rule's median per step, the loss's band its seeds' range. At the start the median gradient "
        f"reaching <i>W</i><sub><i>Q</i></sub> is {fmt(g0['none'])} unscaled, "
        f"{_factor(ratio)} the ÷√d<sub>k</sub> runs' {fmt(g0['sqrt'])} (÷d<sub>k</sub>: "
        f"{fmt(g0['linear'])}).</p>")


def equal_step_lean_html(runs: dict) -> str:
    sq, lin = runs["sqrt"].final["median"], runs["linear"].final["median"]
    here = ("÷d<sub>k</sub> and ÷√d<sub>k</sub> end level" if fmt(sq) == fmt(lin) else
            f"÷d<sub>k</sub> ends {'below' if lin < sq else 'above'} ÷√d<sub>k</sub>")
    return (f"<p>Here, at the equal step, {here} ({fmt(lin)} against {fmt(sq)}). These "
            "rates equalise the logits' step per unit of the loss's gradient at the logits, "
            "not the step itself: that gradient passes through the softmax's Jacobian, which "
            "shrinks it where the softmax saturates. So the curves show how far each rule's "
            "own gradients carry it at one step per unit of gradient, not each rule at its "
            "best. The learning-rate sweep then gives each rule its own best rate.</p>")


def budget_html(budget: dict, width: int, temperature: float, n_keys: int, align: float) -> str:
    """The head budget at ``width``: one head against eight (or the most there are)."""
    heads = [int(h) for h in budget["heads"]]
    h = 8 if 8 in heads else heads[-1]
    j = heads.index(h)
    narrow = width // h
    aligned = f", the first key aligned by ρ = {align:g}" if align else ""
    why = (f"the unaligned logits have variance {narrow} instead of {width}, the aligned one "
           f"mean {fmt(align * narrow)} instead of {fmt(align * width)}" if align else
           f"their logits have variance {narrow} instead of {width}")
    return (
        f"<p>A model width of {width} split into h heads of d<sub>k</sub> = {width}/h "
        f"(T = {fmt(temperature)}, {n_keys} keys{aligned}). Unscaled, one head of {width} "
        f"has a median max weight of {median_interval(budget, 'none', 0)} and a median gradient to "
        f"the query of {_median_grad(budget, 'none', 0)}; {h} heads of {narrow} have "
        f"{median_interval(budget, 'none', j)} and {_median_grad(budget, 'none', j)} each: "
        f"{why}. "
        f"÷√d<sub>k</sub>: {median_interval(budget, 'sqrt', 0)} for one head of {width}, "
        f"{median_interval(budget, 'sqrt', j)} for each of {h} heads of {narrow}.</p>")


#: The rules' names in the page's HTML.
RULE_LABELS_HTML = {r.key: r.html for r in core.RULE_TABLE}


def divisor_text(rule: core.Rule) -> str:
    """What ``rule`` divides q·k by, as plain text: 1, √dₖ, dₖ or dₖ^power."""
    return {0.0: "1", 0.5: f"√{core.DK}", 1.0: core.DK}.get(
        rule.exponent, f"{core.DK}^{rule.exponent:g}")


def divisor_html(rule: core.Rule) -> str:
    """What ``rule`` divides q·k by, as HTML: 1, √d_k, d_k or d_k to its power."""
    dk = "d<sub>k</sub>"
    return {0.0: "1", 0.5: f"√{dk}", 1.0: dk}.get(rule.exponent,
                                                   f"{dk}<sup>{rule.exponent:g}</sup>")


def presets_html(presets) -> str:
    """The presets as links: ``presets`` is (label, query string, the address keys a click
    keeps, the disclosure a click opens or "") rows (state.preset_links);
    assets/js/presets.js reads their data-preset, data-keep and data-open."""
    links = "".join(
        f"<li><a href='?{html.escape(query, quote=True)}' data-preset='"
        f"{html.escape(query, quote=True)}' data-keep='{' '.join(keep)}'"
        + (f" data-open='{html.escape(opens, quote=True)}'" if opens else "")
        + f">{html.escape(label)}</a></li>" for label, query, keep, opens in presets)
    return f"<div class='presets'><h2>Presets</h2><ul>{links}</ul></div>"


def softmax_example() -> str:
    """softmax([1, 5, 10]), computed: the sentence of the saturation tab."""
    p = core.softmax([1.0, 5.0, 10.0])
    shown = ", ".join(f"{x:.3f}" for x in p)
    return (f"<p>softmax([1, 5, 10]) = [{shown}]: logits a few units apart already put "
            f"{100 * float(p.max()):.1f}% of the weight on one key.</p>")


def scaled_score_example(score: float = 112.0, d_k: int = 64) -> str:
    """The Illustrated Transformer's worked example, computed."""
    return (f"<p>A raw score <i>q</i>·<i>k</i> = {fmt(score)} at {_dk(d_k)} (The Illustrated "
            f"Transformer's example) is {fmt(score)}/√{d_k} = {fmt(score / math.sqrt(d_k))} "
            "after scaling.</p>")
