"""The explorer's state: its controls as ``param`` parameters, and what follows from them.

``Explorer``'s parameters are the controls (head width, scaling on/off,
temperature, random seed). ``result`` is the derived :class:`core.State`,
recomputed by core whenever a control changes. The explanatory text is
composed here too, from the same ``result``, so every number in words matches
the charts. No Panel import: this layer runs anywhere ``param`` does.
"""

from __future__ import annotations

import math
import random

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


def _m(tex: str) -> str:
    """Inline math, rendered in the browser by Bokeh's bundled MathJax (a Div with math on)."""
    return "\\(" + tex + "\\)"


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
        with param.edit_constant(self):
            self.result = state

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

    def explanation(self) -> str:
        """HTML explaining the current state, with its numbers; math in \\( ... \\).

        Only numbers and fixed words go into it, so nothing needs escaping.
        """
        r = self.result
        d = r.d_k
        root = _fmt(math.sqrt(d))
        t = r.temperature
        act = r.active(self.scaled)
        which = "scaled" if self.scaled else "unscaled"
        temp_line = ""
        if t != 1:
            effect = "flattens" if t > 1 else "sharpens"
            temp_line = (f" Both charts also divide by the temperature {_m('T = ' + _fmt(t))},"
                         f" which {effect} the weights.")
        qk = _m(r"q \cdot k")
        width = _m(f"d_k = {d}")
        divisor = _m(r"\sqrt{%d} = %s" % (d, root))
        jac = _m(r"\partial p_i / \partial z_j = p_i(\delta_{ij} - p_j)")
        diag = _m("p_i(1-p_i)")
        norm = _m(r"\lVert J \rVert_F")
        return (
            f"<p>With independent unit-variance components, {qk} is a sum of {width} terms of "
            f"variance 1, so its variance is {d} and typical logits are about ±{root}. "
            f"Dividing by {divisor} restores unit variance. In this draw the raw logits have "
            f"standard deviation {_fmt(float(r.raw_logits.std()))}; scaled, "
            f"{_fmt(float(r.scaled.logits.std()))}.{temp_line}</p>"
            f"<p>The softmax Jacobian is {jac}; its diagonal {diag} is at most 1/4 and vanishes "
            f"as {_m('p_i')} nears 0 or 1. The model here uses the <b>{which}</b> logits: largest "
            f"{_m('p(1-p)')} = {_fmt(act.max_diagonal)}, {norm} = "
            f"{_fmt(act.frobenius)}, max weight {core.percent(act.max_weight)} spread over "
            f"{_fmt(act.effective_keys)} effective keys.</p>"
        )

    def readout_rows(self) -> list[tuple[str, str, str]]:
        """(quantity, scaled, unscaled) rows of the gradient readout."""
        s, u = self.result.scaled, self.result.unscaled
        return [
            ("max weight", core.percent(s.max_weight), core.percent(u.max_weight)),
            ("effective keys e^H", _fmt(s.effective_keys, 3), _fmt(u.effective_keys, 3)),
            ("largest p(1 − p)", _fmt(s.max_diagonal), _fmt(u.max_diagonal)),
            ("‖J‖_F", _fmt(s.frobenius), _fmt(u.frobenius)),
        ]
