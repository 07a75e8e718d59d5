"""The explorer's state: its controls as ``param`` parameters, and what follows from them.

``Explorer``'s parameters are the controls (head width, scaling on/off,
temperature, random seed). ``result`` is the derived :class:`core.State`,
recomputed by core whenever a control changes. The explanatory text is
composed here too, from the same ``result``, so every number in words matches
the charts. No Panel import: this layer runs anywhere ``param`` does.
"""

from __future__ import annotations

import html
import math
import random
import re
from functools import lru_cache

import param

from . import core

#: The seed and width that reproduce the reference figure ("Fig. 3"): 8 keys,
#: scaled max weight 27%, unscaled max weight 80%, at T = 1.
FIG3_SEED = 2288
FIG3_D_K = 64
MAX_SEED = 2**31 - 1


def _fmt(x: float, digits: int = 3) -> str:
    """A number for on-screen text: ``digits`` significant digits, no exponent clutter."""
    if x == 0:
        return "0"
    if abs(x) >= 1e-3:
        s = f"{x:.{digits}g}"
        return s if "e" not in s else f"{x:,.0f}"
    return f"{x:.1e}"


TITLE = "Why attention divides by √d_k"

#: The caption under the paired bar charts (served page and offline export).
CAPTION = (
    "Both charts show the same query–key dot products over eight keys. When the "
    "components of q and k have unit variance, those products spread out like √d_k: "
    "the wider the head, the larger the raw logits, and the softmax piles almost all "
    "weight onto one key. Dividing by √d_k cancels that growth at every width, so "
    "the left chart looks the same whether d_k is 4 or 4096."
)


def guide_html(resample: str = "<b>Resample</b> to see it is not one lucky draw.") -> str:
    """The "Try this" steps beside the controls; ``resample`` is the last step's wording."""
    return (
        "<div class='guide'><h4>Try this</h4><ol>"
        "<li>Drag <b>d<sub>k</sub></b> to the right: the unscaled bars collapse onto one key, "
        "the scaled ones barely move.</li>"
        "<li>Switch <b>scaling</b> off: the Jacobian fades and the gradient readout drops.</li>"
        "<li>Lower <b>T</b> below 1: temperature sharpens the softmax the same way.</li>"
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
    f"<mfrac><mrow><mo>∂</mo>{_mi('p', 'i')}</mrow><mrow><mo>∂</mo>{_mi('z', 'j')}</mrow></mfrac>"
    f"<mo>=</mo>{_mi('p', 'i')}{_paren(_mi('δ', 'ij') + '<mo>−</mo>' + _mi('p', 'j'))}",
)) + "</div>"


def header_html(subtitle: str = "") -> str:
    """The page's title bar (``id='header'``); ``subtitle`` is plain text after the title."""
    sub = f"<span class='subtitle'>{html.escape(subtitle)}</span>" if subtitle else ""
    return (f"<header id='header' class='app-header'><h1>{html.escape(TITLE)}</h1>{sub}"
            "</header>")


class ExplorerState(param.Parameterized):
    """Controls of the explorer and the results core computes from them."""

    d_k = param.Selector(
        default=FIG3_D_K, objects=list(core.D_K_VALUES), label="Head width d_k",
        doc="Dimension of the query and key vectors (log-spaced, 1 to 4096).",
    )
    scaled = param.Boolean(
        default=True, label="Divide logits by √d_k",
        doc="Which variant 'the model' uses: it drives the Jacobian heatmap and the gradient readout.",
    )
    temperature = param.Selector(
        default=1.0, objects=list(core.TEMPERATURES), label="Temperature T",
        doc="Softmax temperature: p = softmax(logits / T), applied to both charts.",
    )
    seed = param.Integer(
        default=FIG3_SEED, bounds=(0, MAX_SEED), label="Random seed",
        doc="Seed of the random query and keys (nested across widths).",
    )
    resample = param.Action(
        default=lambda self: self.draw_new_seed(), label="Resample q and k",
        doc="Draw a new random query and keys (a new seed).",
    )

    result = param.ClassSelector(
        class_=core.State, constant=True, precedence=-1,
        doc="Everything shown, as computed by core for the current controls.",
    )

    def __init__(self, **params):
        super().__init__(**params)
        self._recompute()

    @param.depends("d_k", "temperature", "seed", watch=True)
    def _recompute(self) -> None:
        state = core.compute_state(self.d_k, self.temperature, self.seed)
        # what param.edit_constant(self) does, for the one parameter it concerns: it would
        # unlock and relock every parameter, a third of the cost of a change outside Bokeh
        result = self.param["result"]
        result.constant = False
        try:
            self.result = state
        finally:
            result.constant = True

    def draw_new_seed(self) -> None:
        """Pick a different random seed (and so a new draw of q and k)."""
        new = self.seed
        while new == self.seed:
            new = random.randint(0, MAX_SEED)
        self.seed = new

    def reset_to_fig3(self) -> None:
        """Restore the reference figure: d_k = 64, T = 1, scaling on, seed 2288."""
        self.param.update(d_k=FIG3_D_K, temperature=1.0, seed=FIG3_SEED, scaled=True)

    # ---- text derived from the result -------------------------------------------------

    @property
    def active(self) -> core.Variant:
        return self.result.active(self.scaled)

    def text_fields(self) -> dict[str, str]:
        """Every number (and variable word) of the explanation and the readout, as shown."""
        r = self.result
        return dict(_text_fields(r.d_k, r.temperature, r.seed, bool(self.scaled)))

    def explanation(self) -> str:
        """The explanation as HTML, with the current numbers filled in (see :func:`fill`)."""
        return fill(EXPLANATION, self.text_fields())


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
    return {
        "d": str(r.d_k),
        "root": _fmt(math.sqrt(r.d_k)),
        "raw_sd": _fmt(float(r.raw_logits.std())),
        "scaled_sd": _fmt(float(s.logits.std())),
        "temp": temp,
        "which": "scaled" if scaled else "unscaled",
        "max_diag": _fmt(act.max_diagonal),
        "frob": _fmt(act.frobenius),
        "max_w": core.percent(act.max_weight),
        "eff": _fmt(act.effective_keys),
        "s_max_w": core.percent(s.max_weight), "u_max_w": core.percent(u.max_weight),
        "s_eff": _fmt(s.effective_keys), "u_eff": _fmt(u.effective_keys),
        "s_diag": _fmt(s.max_diagonal), "u_diag": _fmt(u.max_diagonal),
        "s_frob": _fmt(s.frobenius), "u_frob": _fmt(u.frobenius),
    }


_DK = "<i>d</i><sub><i>k</i></sub>"
_PI = "<i>p</i><sub><i>i</i></sub>"

#: The live explanation: HTML with {field} slots that :func:`fill` turns into
#: ``<span data-k="field">value</span>``. Formulas are typeset in HTML (italic variables,
#: sub- and superscripts); the fixed ones above it (FORMULAS) are MathML.
EXPLANATION = (
    "<p>With independent unit-variance components, <i>q</i>·<i>k</i> is a sum of "
    + _DK + " = {d} terms of variance 1, so its variance is {d} and typical logits are about "
    "±{root}. Dividing by √{d} = {root} restores unit variance. In this draw the raw logits "
    "have standard deviation {raw_sd}; scaled, {scaled_sd}.{temp}</p>"
    "<p>The Jacobian's diagonal " + _PI + "(1 − " + _PI + ") is at most ¼ and vanishes as "
    + _PI + " nears 0 or 1. The model here uses the <b>{which}</b> logits: largest "
    "<i>p</i>(1 − <i>p</i>) = {max_diag}, ‖<i>J</i>‖<sub>F</sub> = {frob}, max weight {max_w} "
    "spread over {eff} effective keys.</p>"
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


# ---- URL state: the one place where controls are written to and read from a query string ----

#: Parts of the page that ``?hide=`` can hide; ``?embed=1`` hides the header.
VIEW_PARTS = ("header", "controls", "text")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _shown(raw: str, limit: int = 32) -> str:
    """A user-supplied value for a notice: truncated, as a repr (escaping is the page's job)."""
    text = raw if len(raw) <= limit else raw[:limit] + "…"
    return repr(text)


def _nearest_log(x: float, options) -> float:
    return min(options, key=lambda o: abs(math.log(o) - math.log(x)))


def to_query(state: ExplorerState) -> dict[str, str]:
    """The controls of ``state`` as query-string values (all of them, the seed included)."""
    return {
        "d_k": str(state.d_k),
        "scaled": "1" if state.scaled else "0",
        "temperature": f"{state.temperature:g}",
        "seed": str(state.seed),
    }


def parse_query(args) -> tuple[dict, set[str], list[str]]:
    """Read controls and view switches from query arguments, safely.

    ``args`` maps a key to a list of values (str or bytes), as a server hands them over.
    Returns (parameter values to apply, parts of the page to hide, notices). Every value is
    checked: numbers out of range are clamped to the nearest valid value, unusable ones
    (text, NaN, infinity, empty) are ignored; each adjustment adds a notice in plain text.
    Nothing that comes in is ever returned as markup.
    """
    values: dict = {}
    hidden: set[str] = set()
    notices: list[str] = []

    def last(key: str) -> str | None:
        items = args.get(key) or []
        if not items:
            return None
        if len(items) > 1:
            notices.append(f"{key} was given {len(items)} times; using the last one.")
        raw = items[-1]
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8", errors="replace")
        return str(raw).strip()

    def number(key: str, raw: str) -> float | None:
        try:
            x = float(raw)
        except ValueError:
            x = float("nan")
        if not math.isfinite(x):
            notices.append(f"Ignored {key}={_shown(raw)}: not a finite number.")
            return None
        return x

    raw = last("d_k")
    if raw is not None and (x := number("d_k", raw)) is not None:
        widths = core.D_K_VALUES
        if x in widths:
            values["d_k"] = int(x)
        else:
            near = int(_nearest_log(min(max(x, widths[0]), widths[-1]), widths))
            notices.append(f"d_k={_shown(raw)} is not one of the widths offered; using {near}.")
            values["d_k"] = near

    raw = last("temperature")
    if raw is not None and (x := number("temperature", raw)) is not None:
        temps = core.TEMPERATURES
        if x <= 0:
            notices.append(f"Ignored temperature={_shown(raw)}: it must be positive.")
        else:
            near = _nearest_log(min(max(x, temps[0]), temps[-1]), temps)
            if not math.isclose(near, x, rel_tol=1e-9):
                notices.append(f"temperature={_shown(raw)} is not one of the values offered; "
                               f"using {near:g}.")
            values["temperature"] = near

    raw = last("seed")
    if raw is not None:
        if raw.isascii() and raw.isdigit() and len(raw) <= 30:
            seed = int(raw)
            if seed > MAX_SEED:
                notices.append(f"seed={_shown(raw)} is too large; using {MAX_SEED}.")
                seed = MAX_SEED
            values["seed"] = seed
        else:
            notices.append(f"Ignored seed={_shown(raw)}: not a whole number from 0 to {MAX_SEED}.")

    def flag(key: str) -> bool | None:
        raw = last(key)
        if raw is None:
            return None
        if raw.lower() in _TRUE | _FALSE:
            return raw.lower() in _TRUE
        notices.append(f"Ignored {key}={_shown(raw)}: use 1 or 0.")
        return None

    if (scaled := flag("scaled")) is not None:
        values["scaled"] = scaled
    if flag("embed"):
        hidden.add("header")
    raw = last("hide")
    if raw:
        for token in (t.strip().lower() for t in raw.split(",")):
            if token in VIEW_PARTS:
                hidden.add(token)
            elif token:
                notices.append(f"Ignored hide={_shown(token)}: can hide "
                               f"{', '.join(VIEW_PARTS)}.")
    return values, hidden, notices
