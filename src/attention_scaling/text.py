"""All the explorer's prose and formulas: title, caption, guide, the live explanation and the
readout's numbers, each composed from a state core computed (:func:`text_fields`), so every
number in words is the number on the charts."""

from __future__ import annotations

import html
import math
import re
from functools import lru_cache

from . import core

#: The seed and width that reproduce the reference figure ("Fig. 3"): 8 keys,
#: scaled max weight 27%, unscaled max weight 80%, at T = 1.
FIG3_SEED = 2288
FIG3_D_K = 64


def _fmt(x: float, digits: int = 3) -> str:
    """A number for on-screen text: ``digits`` significant digits, no exponent clutter."""
    if x == 0:
        return "0"
    if abs(x) >= 1e-3:
        s = f"{x:.{digits}g}"
        return s if "e" not in s else f"{x:,.0f}"
    mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


TITLE = "Why attention divides by √d_k"

#: The caption under the paired bar charts, two paragraphs with {field} slots (see
#: :func:`fill`); :func:`caption_html` wraps it and may end it with a sentence of the page's
#: own (the offline copy's).
CAPTION = (
    "Both charts show the same eight query–key dot products of one random draw: divided by "
    "√d<sub>k</sub> on the left, raw on the right. Over many draws <i>q</i>·<i>k</i> has "
    "variance d<sub>k</sub>, so the raw logits grow like √d<sub>k</sub> and, as the head "
    "widens, the unscaled softmax puts more and more weight on one key; the scaled logits keep "
    "unit variance at every width.</p><p class='caption'>Over {mc_n} random draws at "
    "d<sub>k</sub> = {d}, T = {t} the median max weight is {mc_s} scaled and {mc_u} unscaled: "
    "a typical draw puts {mc_u} of the weight on one key unscaled. This draw puts {s_max_w} "
    "scaled ({s_pct}) and {u_max_w} unscaled ({u_pct}).{mild}{fig3} This one draw changes "
    "with d<sub>k</sub> in its own way: each width extends the same q and k by more "
    "components, and the scaled logits at widths d and d′ correlate by only √(d/d′)."
)


def caption_html(extra: str = "") -> str:
    """The caption's HTML, {field} slots unfilled; ``extra`` is appended as plain text."""
    tail = f" {html.escape(extra)}" if extra else ""
    return f"<p class='caption'>{CAPTION}{tail}</p>"


#: Said of the unscaled draw when it is in the lowest or highest third of the draws.
MILD = (" Unscaled, this draw is milder than two draws in three: it understates how much "
        "weight a typical draw piles on one key. Resample to see others.")
EXTREME = " Unscaled, this draw is more extreme than two draws in three."


def fig3_note() -> str:
    """Said while the reference figure's seed is shown: the draw was picked to match it."""
    ref = core.compute_state(FIG3_D_K, 1.0, FIG3_SEED)
    return (f" This draw (seed {FIG3_SEED}) was picked because it matches the reference "
            f"figure, {weight_label(ref.scaled)} scaled and {weight_label(ref.unscaled)} "
            f"unscaled at d_k = {FIG3_D_K}, T = 1.")


#: The gradient comparison of the live explanation, by which variant lets more through.
GRAD_SCALED = "scaling lets more gradient reach the query here."
GRAD_UNSCALED = ("more reaches the query without scaling here: the unscaled logits are "
                 "√d_k times larger, and at this setting that outweighs the saturation "
                 "of their softmax.")
GRAD_SAME = "the same, since at d_k = 1 scaling divides by √1 = 1."


def guide_html(resample: str = "<b>Resample</b> draws a new q and new keys: one more "
               "sample, where the caption's medians describe all of them.") -> str:
    """The "Try this" steps beside the controls; ``resample`` is the last step's wording."""
    return (
        "<div class='guide'><h4>Try this</h4><ol>"
        "<li>Drag <b>d<sub>k</sub></b> to the right: the caption's unscaled median climbs "
        "towards 100%, while this one draw's bars move in their own way.</li>"
        "<li>Switch <b>scaling</b> off: the heat map, the explanation and the highlighted "
        "readout column follow the unscaled softmax; ‖∂p/∂q‖<sub>F</sub> is the gradient "
        "that reaches the query.</li>"
        "<li>Lower <b>T</b> below 1: it sharpens both charts; at T = 1/√d<sub>k</sub> the "
        "scaled chart equals the unscaled one at T = 1.</li>"
        f"<li>{resample}</li></ol></div>"
    )


def _mi(name: str, sub: str = "") -> str:
    """A MathML identifier with an optional subscript of single-letter identifiers (d_k, δ_ij)."""
    if not sub:
        return f"<mi>{name}</mi>"
    return f"<msub><mi>{name}</mi><mrow>{''.join(f'<mi>{c}</mi>' for c in sub)}</mrow></msub>"


def _paren(body: str) -> str:
    """Parentheses of text height (no formula here needs taller ones)."""
    return f"<mrow><mo stretchy='false'>(</mo>{body}<mo stretchy='false'>)</mo></mrow>"


_QK = "<mi>q</mi><mo>·</mo><mi>k</mi>"
_FUNCTION = "<mo>&#x2061;</mo>"          # invisible "function application"

#: The fixed formulas shown above the live explanation, as MathML: the browser typesets it
#: natively (Chromium, Firefox and Safari), so the page loads no MathJax (1.8 MB) and the
#: offline export shows the same formulas.
FORMULAS = "<div class='formulas'>" + "".join(f"<math display='block'><mrow>{f}</mrow></math>" for f in (
    f"<mi>Var</mi>{_FUNCTION}{_paren(_QK)}<mo>=</mo>{_mi('d', 'k')}",
    f"<mi>Var</mi>{_FUNCTION}{_paren(_QK + '<mo>/</mo><msqrt>' + _mi('d', 'k') + '</msqrt>')}"
    "<mo>=</mo><mn>1</mn>",
    f"<mi>p</mi><mo>=</mo><mi>softmax</mi>{_FUNCTION}{_paren('<mi>z</mi><mo>/</mo><mi>T</mi>')}",
    f"<mfrac><mrow><mo>∂</mo>{_mi('p', 'i')}</mrow><mrow><mo>∂</mo>{_mi('u', 'j')}</mrow></mfrac>"
    f"<mo>=</mo>{_mi('p', 'i')}{_paren(_mi('δ', 'ij') + '<mo>−</mo>' + _mi('p', 'j'))}"
    "<mo>,</mo><mspace width='0.5em'/><mi>u</mi><mo>=</mo><mi>z</mi><mo>/</mo><mi>T</mi>",
    "<mfrac><mrow><mo>∂</mo><mi>p</mi></mrow><mrow><mo>∂</mo><mi>q</mi></mrow></mfrac>"
    "<mo>=</mo><mfrac><mrow><mi>J</mi><mi>K</mi></mrow><mrow><mi>s</mi><mi>T</mi></mrow></mfrac>"
    "<mo>,</mo><mspace width='0.5em'/><mi>s</mi><mo>=</mo><msqrt>" + _mi('d', 'k') + "</msqrt>"
    "<mtext>&#xA0;or&#xA0;</mtext><mn>1</mn>",
)) + "</div>"


def header_html(subtitle: str = "") -> str:
    """The page's title bar (``id='header'``); ``subtitle`` is plain text after the title."""
    sub = f"<span class='subtitle'>{html.escape(subtitle)}</span>" if subtitle else ""
    return (f"<header id='header' class='app-header'><h1>{html.escape(TITLE)}</h1>{sub}"
            "</header>")


@lru_cache(maxsize=core.STATE_CACHE_SIZE)
def _text_fields(d_k: int, temperature: float, seed: int, scaled: bool) -> dict[str, str]:
    """ExplorerState.text_fields: a pure function of the controls, kept for the same recent
    settings as core.compute_state (whose cached state it reads); callers get a copy."""
    r = core.compute_state(d_k, temperature, seed)
    t = r.temperature
    act = r.active(scaled)
    s, u = r.scaled, r.unscaled
    temp = ""
    if t != 1:
        effect = "flattens" if t > 1 else "sharpens"
        temp = (f" Both charts also divide by the temperature T = {_fmt(t)}, which {effect}"
                " the weights.")
    typ = core.typical(r.d_k, t)
    s_pct, u_pct = typ.percentile(True, s.rest), typ.percentile(False, u.rest)
    if r.d_k == 1:
        grad = GRAD_SAME
    else:
        grad = GRAD_SCALED if s.query_gradient > u.query_gradient else GRAD_UNSCALED
    eff = _fmt(act.effective_keys)
    return {
        "d": str(r.d_k),
        "t": _fmt(t),
        "root": _fmt(math.sqrt(r.d_k)),
        "raw_sd": _fmt(float(r.raw_logits.std())),
        "scaled_sd": _fmt(float(s.logits.std())),
        "temp": temp,
        "which": "scaled" if scaled else "unscaled",
        "max_diag": _fmt(act.max_diagonal),
        "frob": _fmt(act.frobenius),
        "frob_z": _fmt(act.logit_frobenius),
        "grad": _fmt(act.query_gradient),
        "max_w": weight_label(act),
        "eff": eff,
        "keys": "key" if eff == "1" else "keys",
        "s_max_w": weight_label(s), "u_max_w": weight_label(u),
        "s_top": f"k{s.argmax + 1}", "u_top": f"k{u.argmax + 1}",
        "s_eff": _fmt(s.effective_keys), "u_eff": _fmt(u.effective_keys),
        "s_diag": _fmt(s.max_diagonal), "u_diag": _fmt(u.max_diagonal),
        "s_frob": _fmt(s.frobenius), "u_frob": _fmt(u.frobenius),
        "s_grad": _fmt(s.query_gradient), "u_grad": _fmt(u.query_gradient),
        "grad_cmp": grad,
        "mc_n": f"{typ.draws:,}",
        "mc_s": core.percent(typ.median[True], below_one=True),
        "mc_u": core.percent(typ.median[False], below_one=True),
        "s_pct": percentile_phrase(s_pct), "u_pct": percentile_phrase(u_pct),
        "mild": (MILD if u_pct < 100 / 3 and u.max_weight < typ.median[False]
                 else EXTREME if u_pct > 200 / 3 and u.max_weight > typ.median[False] else ""),
        "fig3": fig3_note() if r.seed == FIG3_SEED else "",
    }


def text_fields(d_k: int, temperature: float, seed: int, scaled: bool) -> dict[str, str]:
    """Every number (and variable word) of the explanation, caption and readout, as shown,
    for the state core computes at these settings (a copy: the caller may add to it)."""
    return dict(_text_fields(d_k, temperature, seed, scaled))


def notice_html(notices: list[str]) -> str:
    """The notice about adjusted URL values: plain text, escaped, never markup."""
    if not notices:
        return ""
    items = "".join(f"<li>{html.escape(n)}</li>" for n in notices[:8])
    more = f"<li>… and {len(notices) - 8} more.</li>" if len(notices) > 8 else ""
    return (f"<div class='notice' role='status'><b>Some link settings were adjusted:</b>"
            f"<ul>{items}{more}</ul></div>")


def weight_label(v: core.Variant) -> str:
    """A variant's max weight as printed: never "100%", its other weights being positive."""
    return core.percent(v.max_weight, below_one=v.rest > 0)


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st, ..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def percentile_phrase(pct: float) -> str:
    """Where a draw falls among the Monte Carlo's draws: "24th percentile", never a 0th or
    a 100th."""
    n = round(pct)
    if n < 1:
        return "below the 1st percentile"
    if n > 99:
        return "above the 99th percentile"
    return f"{ordinal(n)} percentile"


_DK = "<i>d</i><sub><i>k</i></sub>"
_PI = "<i>p</i><sub><i>i</i></sub>"

#: The live explanation: HTML with {field} slots that :func:`fill` turns into
#: ``<span data-k="field">value</span>``. Formulas are typeset in HTML (italic variables,
#: sub- and superscripts); the fixed ones above it (FORMULAS) are MathML.
EXPLANATION = (
    "<p>With independent unit-variance components, <i>q</i>·<i>k</i> is a sum of "
    + _DK + " = {d} terms of variance 1: over draws its variance is {d}, typical logits are "
    "about ±{root}, and dividing by √{d} = {root} restores unit variance. This draw's eight "
    "logits have standard deviation {raw_sd} raw and {scaled_sd} scaled: one query against "
    "eight keys, a small sample whose spread varies from draw to draw around those typical "
    "values.{temp}</p>"
    "<p>The softmax's own Jacobian <i>J</i> = ∂<i>p</i>/∂<i>u</i> (the heat map, "
    "<i>u</i> = <i>z</i>/<i>T</i>) has diagonal " + _PI + "(1 − " + _PI + "), at most ¼ and "
    "vanishing as " + _PI + " nears 0 or 1; with respect to the logits <i>z</i> it is "
    "<i>J</i>/<i>T</i>. What reaches the query, and through it <i>W</i><sub><i>Q</i></sub>, "
    "is ∂<i>p</i>/∂<i>q</i> = <i>J K</i>/(<i>s T</i>), with <i>s</i> = √" + _DK
    + " scaled and 1 unscaled. The model here uses the <b>{which}</b> logits: largest "
    "<i>p</i>(1 − <i>p</i>) = {max_diag}, ‖<i>J</i>‖<sub>F</sub> = {frob} "
    "(‖∂<i>p</i>/∂<i>z</i>‖<sub>F</sub> = {frob_z}), ‖∂<i>p</i>/∂<i>q</i>‖<sub>F</sub> = "
    "{grad}; max weight {max_w}, spread over {eff} effective {keys}.</p>"
    "<p>‖∂<i>p</i>/∂<i>q</i>‖<sub>F</sub> is {s_grad} scaled and {u_grad} unscaled: "
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
