"""The explorer's controls as one declarative table (:data:`CONTROLS`: name, kind, allowed
values, URL key, label, default), and what is derived from it: the param state
(:class:`ExplorerState`), reading the URL (:func:`parse_query`) and writing it
(:func:`to_query`). A new control is one row; the pages build their widgets from the rows."""

from __future__ import annotations

import math
import random
import urllib.parse
from dataclasses import dataclass, fields, make_dataclass
from typing import Callable, NamedTuple

import param

from . import core
MAX_SEED = 2**31 - 1

#: The seed and width that reproduce the reference figure ("Fig. 3"): 8 keys,
#: scaled max weight 27%, unscaled max weight 80%, at T = 1.
FIG3_SEED = 2288
FIG3_D_K = 64


@dataclass(frozen=True)
class Control:
    """One control. ``kind``: ``choice`` (one of ``values``, shown as a slider over their
    positions; a URL value between them takes the nearest on a log scale), ``count`` (a
    whole number from ``values[0]`` to ``values[1]``), ``option`` (one of the words
    ``values``, shown as buttons labelled by ``show``) or ``tab`` (one of the words
    ``values``; the tabs are its widget). ``show`` writes a value for the URL and the
    slider's label; ``positive`` refuses a URL value <= 0 instead of clamping it;
    ``linear``: a URL value between two takes the nearest on a linear scale; ``group``:
    ``draw`` for the controls of the one-draw view and all tabs, ``argument`` for those only
    the argument's tabs (over many draws and training) use; ``core``: the argument of
    core.compute_state it gives (the state is computed anew when it changes)."""

    name: str
    kind: str
    url_key: str
    label: str
    default: object
    doc: str
    values: tuple = ()
    show: Callable = str
    positive: bool = False
    linear: bool = False
    group: str = "draw"
    core: str = ""


@dataclass(frozen=True)
class Tab:
    """One tab of the explorer: ``key`` (its value in links, ?tab=), ``title``, ``names``:
    the controls its charts depend on, in order (its downloads are named after them), and
    ``idle``: the controls it does not use, each with why (they are disabled while it is
    shown); in present mode (assets/js/present.js) its step shows ``charts``, its main
    charts (figure names), and only the controls of ``present``; ``ask``: how its question
    (quiz) is guessed, ``percent`` (a slider) or ``choice`` (buttons), "" for none. The
    argument's tabs are drawn by their class in ``argument.TAB_VIEWS``."""

    key: str
    title: str
    names: tuple[str, ...]
    idle: tuple[tuple[str, str], ...] = ()
    charts: tuple[str, ...] = ()
    present: tuple[str, ...] = ()
    ask: str = ""


_ALL = ("d_k", "temperature", "seed", "keys", "align", "rule")
#: The explorer's tabs, in the order of the argument; the first is the one draw.
TABS = (
    Tab("draw", "One draw", ("d_k", "temperature", "seed", "keys", "rule"),
        charts=("scaled-weights", "unscaled-weights"), present=("d_k", "rule"), ask="percent"),
    Tab("variance", "1 Variance", ("d_k",), charts=("logit-histogram", "logit-histogram-scaled"),
        present=("d_k",), ask="choice", idle=(
        ("rule", f"both histograms are shown, raw and ÷√{core.DK}"),
        ("temperature", "q·k comes before the softmax and its T"),
        ("seed", "the histograms hold 20,000 draws, not one"),
        ("keys", "each draw is one query and one key"),
        ("align", "the keys here are independent of the query"))),
    Tab("saturation", "2 Saturation", _ALL, charts=("saturation-curves",),
        present=("d_k", "temperature"), ask="percent"),
    Tab("gradient", "3 Gradient", _ALL, charts=("gradient-frozen-share",),
        present=("d_k", "temperature"), ask="percent"),
    Tab("training", "4 Training", ("d_k", "temperature", "seed", "keys"),
        charts=("training-loss",), present=("d_k",), ask="choice", idle=(
        ("rule", "every rule trains at once"),
        ("align", "the training keys are independent of the query"))),
    Tab("budget", "5 Heads", ("temperature", "keys", "align", "rule"), charts=("head-budget",),
        present=("temperature",), ask="percent", idle=(
        ("d_k", f"this tab splits a width of 512 into heads of every {core.DK}"),
        ("seed", "the medians are over 2,000 draws, not one"))),
)

#: The one draw's tab: the first (the argument's tabs follow it, drawn by argument.TAB_VIEWS).
ONE_DRAW = TABS[0].key

CONTROLS = (
    Control("d_k", "choice", "d_k", f"Head width {core.DK}", FIG3_D_K,
            "Dimension of the query and key vectors (log-spaced, 1 to 4096).",
            values=tuple(core.D_K_VALUES), core="d_k"),
    Control("rule", "option", "rule", "Scaling of the logits", "sqrt",
            f"What the logits q·k are divided by: nothing, √{core.DK} (the Transformer's rule) "
            f"or {core.DK} (μP's). The model uses this rule: it drives the Jacobian heat map, "
            "the gradient readout and the highlighted curves.",
            values=core.RULES, show=core.RULE_LABELS.get),
    Control("temperature", "choice", "temperature", "Temperature T", 1.0,
            "Softmax temperature: p = softmax(logits / T), applied to both charts.",
            values=tuple(core.TEMPERATURES), show=lambda v: f"{v:g}", positive=True,
            core="temperature"),
    Control("seed", "count", "seed", "Random seed", FIG3_SEED,
            "Seed of the random query and keys (nested across widths).",
            values=(0, MAX_SEED), core="seed"),
    Control("tab", "tab", "tab", "Section", "draw",
            "The tab shown: the one draw, or a step of the argument over many draws.",
            values=tuple(t.key for t in TABS)),
    Control("keys", "choice", "keys", "Number of keys n", core.N_KEYS,
            "How many keys the query attends over, in every view.",
            values=core.KEY_COUNTS, core="n_keys"),
    Control("align", "choice", "align", "Trained alignment ρ", 0.0,
            "Correlation of the first key with the query (k1 = ρq + √(1−ρ²)ε), as training "
            "makes a query and the key it should match.",
            values=core.ALIGNMENTS, show=lambda v: f"{v:g}", linear=True, group="argument",
            core="align"),
)


def _setting_of(cls, state):
    """The setting of an :class:`ExplorerState` (or any object with the controls)."""
    return cls(**{f.name: getattr(state, f.name) for f in fields(cls)})


#: The controls the charts depend on (every row of :data:`CONTROLS` but the tab) as one
#: frozen value, what a view draws: ``Setting(d_k=64, rule="sqrt", ...)``, or
#: ``Setting.of(explorer_state)``.
Setting = make_dataclass("Setting", [c.name for c in CONTROLS if c.kind != "tab"], frozen=True,
                         namespace={"of": classmethod(_setting_of)})

#: Parts of the page that ``?hide=`` can hide (``text``: every sentence of prose, what
#: layout.View._text lets through); ``?embed=1`` hides the header.
VIEW_PARTS = ("header", "controls", "text")
#: The address's keys that are not controls: the view switches (:func:`parse_query`), the
#: theme (assets/js/theme.js) and present mode (assets/js/present.js). A preset keeps them.
VIEW_KEYS = ("embed", "hide", "theme", "present")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _parameter(c: Control) -> param.Parameter:
    common = dict(default=c.default, label=c.label, doc=c.doc)
    if c.kind in ("choice", "option", "tab"):
        return param.Selector(objects=list(c.values), **common)
    return param.Integer(bounds=c.values, **common)


class _State(param.Parameterized):
    """Behaviour of the state; its control parameters come from :data:`CONTROLS`."""

    result = param.ClassSelector(
        class_=core.State, constant=True, precedence=-1,
        doc="Everything shown, as computed by core for the current controls.",
    )

    def __init__(self, **params):
        super().__init__(**params)
        self._recompute()
        self.param.watch(self._recompute, [c.name for c in CONTROLS if c.core])

    def _recompute(self, *_events) -> None:
        state = core.compute_state(**{c.core: getattr(self, c.name) for c in CONTROLS if c.core})
        # what param.edit_constant(self) does, for the one parameter it concerns: it would
        # unlock and relock every parameter, a third of the cost of a change outside Bokeh
        result = self.param["result"]
        result.constant = False
        try:
            self.result = state
        finally:
            result.constant = True

    def new_seed(self) -> int:
        """A random seed other than the current one."""
        new = self.seed
        while new == self.seed:
            new = random.randint(0, MAX_SEED)
        return new

    def draw_new_seed(self) -> None:
        """Pick a different random seed (and so a new draw of q and k)."""
        self.seed = self.new_seed()

    def reset_to_fig3(self) -> None:
        """Restore the reference figure: every control at its default (d_k = 64, T = 1,
        the 1/sqrt(d_k) rule, seed 2288, the one-draw tab)."""
        self.param.update({c.name: c.default for c in CONTROLS})

    @property
    def active(self) -> core.Variant:
        return self.result.active(self.rule)


#: Controls of the explorer and the results core computes from them.
ExplorerState = param.parameterized_class(
    "ExplorerState", {c.name: _parameter(c) for c in CONTROLS}, bases=_State)
ExplorerState.__module__ = __name__
ExplorerState.__doc__ = ("Controls of the explorer (one parameter per row of CONTROLS) and the "
                         "results core computes from them.")


def to_query(state) -> dict[str, str]:
    """The controls of ``state`` as query-string values (all of them, the seed included)."""
    out = {}
    for c in CONTROLS:
        value = getattr(state, c.name)
        out[c.url_key] = value if c.kind in ("option", "tab") else c.show(value)
    return out


def _shown(raw: str, limit: int = 32) -> str:
    """A user-supplied value for a notice: truncated, as a repr (escaping is the page's job)."""
    text = raw if len(raw) <= limit else raw[:limit] + "…"
    return repr(text)


def _nearest(x: float, options, linear: bool = False) -> float:
    """The option nearest ``x``, on a log scale unless ``linear``."""
    if linear:
        return min(options, key=lambda o: abs(o - x))
    return min(options, key=lambda o: abs(math.log(o) - math.log(x)))


class _Query:
    """Query arguments read one key at a time; every adjustment adds a notice in plain text."""

    def __init__(self, args) -> None:
        self.args = args
        self.notices: list[str] = []

    def last(self, key: str) -> str | None:
        """The last value given for ``key`` (str or bytes in), stripped; None if absent."""
        items = self.args.get(key) or []
        if not items:
            return None
        if len(items) > 1:
            self.notices.append(f"{key} was given {len(items)} times; using the last one.")
        raw = items[-1]
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8", errors="replace")
        return str(raw).strip()

    def flag(self, key: str) -> bool | None:
        raw = self.last(key)
        if raw is None:
            return None
        if raw.lower() in _TRUE | _FALSE:
            return raw.lower() in _TRUE
        self.notices.append(f"Ignored {key}={_shown(raw)}: use 1 or 0.")
        return None

    def word(self, c: Control, raw: str):
        """An option or tab: one of its words."""
        if raw in c.values:
            return raw
        self.notices.append(f"Ignored {c.url_key}={_shown(raw)}: use one of "
                            f"{', '.join(c.values)}.")
        return None

    def count(self, c: Control, raw: str):
        """A whole number from ``values[0]`` to ``values[1]`` (larger: the largest)."""
        low, high = c.values
        if not (raw.isascii() and raw.isdigit() and len(raw) <= 30):
            self.notices.append(f"Ignored {c.url_key}={_shown(raw)}: not a whole number from "
                                f"{low} to {high}.")
            return None
        n = int(raw)
        if n > high:
            self.notices.append(f"{c.url_key}={_shown(raw)} is too large; using {high}.")
            n = high
        return max(n, low)

    def choice(self, c: Control, raw: str):
        """The value of ``values`` nearest a finite number written in ASCII (positive where
        it must be)."""
        key = c.url_key
        try:
            x = float(raw) if raw.isascii() else float("nan")
        except ValueError:
            x = float("nan")
        if not math.isfinite(x):
            self.notices.append(f"Ignored {key}={_shown(raw)}: not a finite number.")
            return None
        if c.positive and x <= 0:
            self.notices.append(f"Ignored {key}={_shown(raw)}: it must be positive.")
            return None
        options = c.values
        near = _nearest(min(max(x, options[0]), options[-1]), options, c.linear)
        if not math.isclose(near, x, rel_tol=1e-9):
            self.notices.append(f"{key}={_shown(raw)} is not one of the values offered; "
                                f"using {c.show(near)}.")
        return near

    def hidden(self) -> set[str]:
        """The parts of the page ``embed`` and ``hide`` leave out."""
        hidden = {"header"} if self.flag("embed") else set()
        for token in (t.strip().lower() for t in (self.last("hide") or "").split(",")):
            if token in VIEW_PARTS:
                hidden.add(token)
            elif token:
                self.notices.append(f"Ignored hide={_shown(token)}: can hide "
                                    f"{', '.join(VIEW_PARTS)}.")
        return hidden


def parse_query(args) -> tuple[dict, set[str], list[str]]:
    """Read controls and view switches from query arguments, safely.

    ``args`` maps a key to a list of values (str or bytes), as a server hands them over.
    Returns (parameter values to apply, parts of the page to hide, notices). Every value is
    checked: numbers out of range are clamped to the nearest valid value, unusable ones
    (text, NaN, infinity, empty) are ignored; each adjustment adds a notice in plain text.
    Nothing that comes in is ever returned as markup.
    """
    q = _Query(args)
    read = {"option": q.word, "tab": q.word, "count": q.count, "choice": q.choice}
    values: dict = {}
    for c in CONTROLS:
        raw = q.last(c.url_key)
        if raw is not None and (value := read[c.kind](c, raw)) is not None:
            values[c.name] = value
    # links from before the rule control: scaled=1 is the 1/sqrt(d_k) rule, scaled=0 none
    if (on := q.flag("scaled")) is not None:
        if "rule" in values:
            q.notices.append("Ignored scaled: rule is given.")
        else:
            values["rule"] = "sqrt" if on else "none"
    hidden = q.hidden()
    return values, hidden, q.notices


def presenting(args) -> bool:
    """Whether query arguments ``args`` (as :func:`parse_query` takes them) open present mode
    (``present``, one of :data:`VIEW_KEYS`; assets/js/present.js reads it in the browser)."""
    return bool(_Query(args).flag("present"))


class Preset(NamedTuple):
    """A link to a view: its label, the controls it sets (the others at their defaults) and
    whether a click also opens its tab's "More detail", where what the label names is."""

    label: str
    overrides: dict
    detail: bool = False


PRESETS = (
    Preset("Reference draw: 27% scaled, 80% unscaled", {}),
    Preset("softmax([1, 5, 10])", {"tab": "saturation"}, detail=True),
    Preset("112 / √64 = 14", {"tab": "variance"}, detail=True),
    Preset("Temperature 0.5", {"temperature": 0.5}),
    Preset("Temperature 2", {"temperature": 2.0}),
    Preset(f"Unscaled at {core.DK} = 64, T = 1", {"rule": "none"}),
    Preset(f"÷√{core.DK} at T = 1/√64 = 0.125: the same bars", {"temperature": 0.125}),
    Preset("One head of 512 vs eight of 64", {"tab": "budget"}),
    Preset(f"Trained keys (ρ = 0.5): ÷√{core.DK} sharpens as heads widen",
           {"tab": "saturation", "align": 0.5}),
)


def preset_query(overrides: dict) -> dict[str, str]:
    """The query string of a preset: every control, at its default unless ``overrides``
    sets it."""
    return to_query(ExplorerState(**overrides))


def preset_links() -> list[tuple[str, str, tuple[str, ...], str]]:
    """Each preset as (label, its query string, the address keys it keeps from the page's:
    :data:`VIEW_KEYS`, and the tab unless the preset sets one, the name of the "More detail"
    toggle a click opens or "")."""
    return [(p.label, urllib.parse.urlencode(preset_query(p.overrides)),
             VIEW_KEYS + (() if "tab" in p.overrides else ("tab",)),
             f"{p.overrides['tab']}-more-toggle" if p.detail else "")
            for p in PRESETS]
