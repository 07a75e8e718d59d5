"""The argument's tabs over many draws and through training: one class per tab (its figures
and sources, built once; its body; how it draws a :class:`state.Setting` from core) and
:data:`TAB_VIEWS`, the table of them. A tab is its row in ``state.TABS`` and its class here;
the layout, the downloads and the offline copy derive the rest. Sources are named
``<figure name>-source``."""

from __future__ import annotations

import math

import numpy as np
from bokeh.models import (BasicTickFormatter, Button, ColumnDataSource, CustomJSTickFormatter,
                          Div, FixedTicker, LogTicker, NumeralTickFormatter, Range1d)
from bokeh.plotting import figure

from . import core
from .prose import quiz
from .state import ONE_DRAW, Setting
from .style import (MARK, RULE_COLORS, RULE_DASH, RULE_MARKER, SCALED_COLOR, UNSCALED_COLOR,
                    derived_glyph_looks, legend_below, log10_axis, script, style_figure,
                    subtitle)
from .prose.lead import (TRAINING_LEAD, budget_lead, gradient_lead, saturation_lead,
                         training_lead, variance_lead)
from .prose.text import (GRAD_Q_AXIS, TRAINING_INTRO, budget_html,
                         gradient_html, saturation_html, scaled_score_example, softmax_example,
                         training_html, training_status_html, training_sweep_html, variance_html)

#: The dotted line of the current width and the dashed √d_k (Bokeh's "dotted", "dashed").
DOTTED, DASHED = (2, 4), (6,)
#: Ticks of the d_k axes (log): the powers of four.
WIDTH_TICKS = (1, 4, 16, 64, 256, 1024, 4096)
#: The head-budget tab's metrics per rule (core.head_budget): the gradient in log10.
BUDGET_METRICS = ("max_weight", "log10_grad_q")
#: The model width the head-budget tab splits into heads.
BUDGET_WIDTH = 512
#: The heads the Heads step's question splits it into: 64 heads of 8, a split its lead does
#: not print (one head of 512 and eight of 64) and whose answer is not the Saturation
#: question's (d_k = 64).
BUDGET_HEADS = 64
#: Steps of a training run.
TRAINING_STEPS = 300


def log_figure(name: str, title: str, x_label: str, y_label: str, *, y_log=False,
               log10_y=False, x_range=None, height=260) -> figure:
    """A figure over d_k on a log axis (and ``y_log``: a log y axis; ``log10_y``: a y axis of
    log10 values, labelled as powers of ten)."""
    fig = figure(name=name, title=title, height=height, sizing_mode="stretch_width",
                 min_width=260, tools="", x_axis_type="log",
                 y_axis_type="log" if y_log else "linear",
                 **({"x_range": x_range} if x_range is not None else {}))
    fig.xaxis.axis_label = x_label
    fig.yaxis.axis_label = y_label
    fig.xaxis.ticker = FixedTicker(ticks=WIDTH_TICKS)
    fig.xaxis.formatter = BasicTickFormatter(use_scientific=False)
    if log10_y:
        log10_axis(fig.yaxis)
    style_figure(fig)
    return fig


def _span(values, log: bool = False) -> tuple[float, float] | None:
    """The ends of an axis over the finite ``values`` (their log10 where ``log``: the
    positive ones) with a little room on each side; None if there are none."""
    v = np.concatenate([np.ravel(np.asarray(x, float)) for x in values])
    v = v[np.isfinite(v) & (v > 0)] if log else v[np.isfinite(v)]
    if not len(v):
        return None
    lo, hi = (float(np.log10(v.min())), float(np.log10(v.max()))) if log else \
        (float(v.min()), float(v.max()))
    pad = max(0.06 * (hi - lo), 0.25)
    return (10.0 ** (lo - pad), 10.0 ** (hi + pad)) if log else (lo - pad, hi + pad)


def _set_range(rng: Range1d, ends) -> None:
    if ends is not None and (rng.start, rng.end) != ends:
        rng.start, rng.end = ends


def fit_range(rng: Range1d, *values) -> None:
    """Span ``rng`` over the finite ``values`` (log10 values: every one is drawn) with a
    little room on each side."""
    _set_range(rng, _span(values))


def fit_log_range(rng: Range1d, *values) -> None:
    """Span the log axis ``rng`` over the positive ``values`` (learning rates and losses,
    well inside float64's range) with a little room on each side."""
    _set_range(rng, _span(values, log=True))


def _same(*names):
    return [[n, n] for n in names]


#: The curves' metrics the charts draw (core.saturation_curves): the gradient in log10, so
#: that every value is drawn.
CURVE_METRICS = ("max_weight", "eff_keys", "log10_grad_q")
#: The curves' source's columns besides d_k: each metric's median and quartiles per rule, and
#: per rule the share of the draws under a tenth of the ÷√d_k median gradient.
CURVE_COLUMNS = (*(f"{m}_{q}_{r}" for m in CURVE_METRICS for q in ("median", "q25", "q75")
                   for r in core.RULES), *(f"frozen_share_{r}" for r in core.RULES))


def gradient_window(curves: dict) -> int:
    """How many widths (the first of core.D_K_VALUES) the gradient chart's y axis spans: those
    its sentence compares, up to 4x the width from which on the unscaled median stays below
    the ÷√d_k one (core.unscaled_below_from), and at least to d_k = 64; every width when the
    unscaled median is not below at the widest. The medians at 4096 lie up to ~20 decades
    apart: an axis over all of them leaves the crossing a thin band."""
    k = core.unscaled_below_from(curves)
    if k is None:
        return len(core.D_K_VALUES)
    last = max(64, 4 * core.D_K_VALUES[k])
    return sum(w <= last for w in core.D_K_VALUES)


class Shared:
    """What the argument's tabs share: the d_k axis, the saturation curves and this draw's
    dots (two tabs draw them, one source each), and each rule's lines, highlighted
    together."""

    def __init__(self) -> None:
        self._curves_shown = None
        self._highlighted = None
        #: The lines of each rule, thicker for the rule the model uses (:meth:`highlight`).
        self.rule_lines: dict[str, list] = {r: [] for r in core.RULES}
        self.widths = [float(w) for w in core.D_K_VALUES]
        self.x_range = Range1d(0.8, 5200)
        self.curves_source = ColumnDataSource(
            {"d_k": self.widths, **{c: [0.0] * len(self.widths) for c in CURVE_COLUMNS}},
            name="saturation-curves-source")
        nr = len(core.RULES)
        self.draw_source = ColumnDataSource(dict(
            d_k=[64.0] * nr, rule=list(core.RULES), max_weight=[0.5] * nr,
            eff_keys=[1.0] * nr, log10_grad_q=[0.0] * nr,
            color=[RULE_COLORS[r] for r in core.RULES],
            marker=[RULE_MARKER[r] for r in core.RULES]), name="saturation-draw-source")
        #: The saturation curves' figures, by name (:meth:`curve_figure`).
        self.curve_figs: dict = {}

    def rule_line(self, fig, x: str, y: str, source, rule: str, highlighted: bool = True):
        """A line of ``rule`` in its colour and dash, named in the legend; ``highlighted``:
        drawn thick with the others of its rule when the model uses it."""
        line = fig.line(x=x, y=y, source=source, line_color=RULE_COLORS[rule],
                        line_width=2.5, line_dash=RULE_DASH[rule],
                        legend_label=core.RULE_LABELS[rule])
        if highlighted:
            self.rule_lines[rule].append(line)
        return line

    def curve_figure(self, name: str, metric: str, title: str, label: str):
        """One panel of the saturation curves: per rule the median and middle half of
        ``metric`` (of :data:`CURVE_METRICS`) against d_k, and this draw's dots at the current
        width."""
        log10 = metric.startswith("log10_")
        fig = log_figure(name, title, f"head width {core.DK} (log)", label, log10_y=log10,
                         x_range=self.x_range)
        for r in core.RULES:
            fig.varea(x="d_k", y1=f"{metric}_q25_{r}", y2=f"{metric}_q75_{r}",
                      source=self.curves_source, fill_color=RULE_COLORS[r], fill_alpha=0.15)
            self.rule_line(fig, "d_k", f"{metric}_median_{r}", self.curves_source, r)
        # the current width: a vertical line from the dots' own source (one message)
        fig.vspan(x="d_k", source=self.draw_source, line_color=MARK, line_dash=DOTTED,
                  line_width=1.5)
        fig.scatter(x="d_k", y=metric, source=self.draw_source, size=11, fill_color="color",
                    line_color=MARK, marker="marker")
        legend_below(fig)
        if metric == "max_weight":
            fig.y_range = Range1d(0, 1.04)
        elif log10:
            fig.y_range = Range1d(-3, 1)      # update_curves sets it to the data
            #: What the y axis spans (:func:`gradient_window`).
            self.gradient_note = subtitle(fig, "")
        self.curve_figs[name] = fig
        return fig

    def share_figure(self, name: str) -> figure:
        """Per rule against d_k, the share of the draws whose gradient to the query is under a
        tenth of the ÷√d_k median, and the current width."""
        fig = log_figure(name, f"Share under ÷√{core.DK}'s median / 10",
                         f"head width {core.DK} (log)", "share of draws", x_range=self.x_range)
        for r in core.RULES:
            self.rule_line(fig, "d_k", f"frozen_share_{r}", self.curves_source, r)
        fig.vspan(x="d_k", source=self.draw_source, line_color=MARK, line_dash=DOTTED,
                  line_width=1.5)
        fig.y_range = Range1d(-0.02, 1.04)
        fig.yaxis.formatter = NumeralTickFormatter(format="0%")
        legend_below(fig)
        subtitle(fig, f"of the gradient to q, over {core.CURVE_DRAWS:,} draws a width")
        return fig

    def curve_tables(self, *metrics):
        """The CSV of curves of ``metrics``: every rule's median and quartiles, and this
        draw."""
        return [(self.curves_source, _same("d_k", *(f"{m}_{q}_{r}" for m in metrics
                                                    for r in core.RULES
                                                    for q in ("median", "q25", "q75")))),
                (self.draw_source, [[c, f"this_draw_{c}"] for c in ("rule", "d_k", *metrics)])]

    def update_curves(self, curves: dict, d_k: int, draw: dict) -> None:
        """The saturation curves (core.saturation_curves) and where this draw (rule ->
        Variant, core.draw_metrics) sits on them, at width ``d_k``."""
        if self._curves_shown is not curves:
            self.curves_source.data = {k: np.asarray(curves[k], float).tolist()
                                       for k in ("d_k", *CURVE_COLUMNS)}
            self._curves_shown = curves
        variants = [draw[r] for r in core.RULES]
        log10_grad_q = [float(v.log10_query_gradient) for v in variants]
        self.draw_source.data.update(
            d_k=[float(d_k)] * len(variants),
            max_weight=[v.max_weight for v in variants],
            eff_keys=[v.effective_keys for v in variants],
            log10_grad_q=log10_grad_q)
        if "saturation-gradient" in self.curve_figs:
            n = gradient_window(curves)
            fit_range(self.curve_figs["saturation-gradient"].y_range,
                      log10_grad_q if d_k <= core.D_K_VALUES[n - 1] else [],
                      *(curves[f"log10_grad_q_{q}_{r}"][:n] for q in ("q25", "q75")
                        for r in core.RULES))
            note = (f"y axis fitted to {core.DK} ≤ {core.D_K_VALUES[n - 1]} (wider {core.DK} "
                    "run off it)" if n < len(core.D_K_VALUES) else f"y axis fitted to every {core.DK}")
            if self.gradient_note.text != note:
                self.gradient_note.text = note

    def draw_curves(self, s: Setting) -> tuple[dict, dict]:
        """Draw the curves at ``s``; the curves and this draw, for the tab's text."""
        curves = core.saturation_curves(s.temperature, s.keys, s.align)
        draw = core.draw_metrics(s.d_k, s.temperature, s.seed, s.keys, s.align)
        self.update_curves(curves, s.d_k, draw)
        return curves, draw

    def highlight(self, rule: str) -> None:
        """Draw the lines of ``rule`` (the rule the model uses) thicker than the others."""
        if rule == self._highlighted:
            return
        for r, lines in self.rule_lines.items():
            for line in lines:
                line.glyph.line_width = 4.5 if r == rule else 2.0
        self._highlighted = rule

    def forget_highlight(self) -> None:
        """Lines have joined: the next :meth:`highlight` draws every one."""
        self._highlighted = None


class TabView:
    """An argument tab: ``figures`` (name -> figure, in page order), ``tables`` (its CSV:
    [(source, [[column, header], ...])]), ``body()`` (its charts and rows, under its lead),
    ``draw(setting)`` (its charts at a :class:`state.Setting`, from core; returns the HTML of
    its lead sentence and of its "More detail"). The offline copy stores its text by ``offline`` (``width``, ``temperature`` or
    ``setting``: one per seed, width and temperature) and, by the index each names, the
    models of ``stores``: (source name or ``<figure>:y_range``, index), and its question by
    the index ``asked`` names (what the question depends on). ``trains``: it is drawn by
    training runs (its Train button, :meth:`TrainingTab.show`) rather than from the controls,
    and its question costs nothing; ``present_extra``: the names of its models that present
    mode shows beside its charts; ``with_page``: it is built with the page and drawn with it
    at every change, whichever tab is open (:class:`OneDrawTab`), where the others are built
    when first shown and drawn while shown."""

    key = ""
    offline = "setting"
    asked = "setting"
    stores: tuple = ()
    trains = False
    with_page = False
    present_extra: tuple[str, ...] = ()

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.figures: dict = {}
        self.tables: list = []

    def body(self) -> list:
        return list(self.figures.values())

    def draw(self, s: Setting) -> tuple[str, str]:
        raise NotImplementedError

    def question(self, s: Setting) -> quiz.Question | None:
        """Its predict-then-reveal question at ``s`` (quiz), None for none."""
        return None


#: The one draw's CSV columns per bar chart: (source column, header before _scaled or
#: _unscaled), after the key.
DRAW_COLUMNS = (("logit", "logit"), ("weight", "weight"), ("pq", "p_1_minus_p"),
                ("gq", "grad_to_query"))

class OneDrawTab(TabView):
    """The one draw: one seeded query and its keys at the controls (``charts``, a
    figures.Charts: the bars, the gradient's spread, the heat maps, their texts), built with
    the page and drawn with it at every change, whichever tab is open (``with_page``). The
    offline copy stores it in records of its own (export), not by ``offline``."""

    key, offline, with_page = ONE_DRAW, None, True

    def __init__(self, charts) -> None:
        super().__init__(None)
        self.charts = c = charts
        self.figures = {f.name: f for f in (c.scaled_fig, c.unscaled_fig, c.spread.fig,
                                            c.jacobian_fig, c.diagonal_fig)}
        self.tables = [(c.scaled_source, [["key", "key"]]),
                       *((source, [[k, f"{head}_{side}"] for k, head in DRAW_COLUMNS])
                         for source, side in ((c.scaled_source, "scaled"),
                                              (c.unscaled_source, "unscaled"))),
                       *c.spread.tables]

    def draw(self, s: Setting, fields: dict) -> None:
        """Draw the one draw at ``s`` from core, its texts from ``fields`` (prose
        text.fields_of of the same state, and what the page adds)."""
        self.charts.update(core.compute_state(s.d_k, s.temperature, s.seed, s.keys, s.align),
                           s.rule, fields)

    def question(self, s: Setting) -> quiz.Question:
        return quiz.draw_question(s.d_k, s.temperature, s.seed, s.keys, s.align)


class VarianceTab(TabView):
    """1 Variance: q·k over many draws, raw and ÷√d_k, and its spread against d_k."""

    key, offline, asked = "variance", "width", "width"
    stores = (("logit-histogram-source", "width"), ("logit-width-source", "width"))

    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        self.hist_source = ColumnDataSource(
            {f"{c}_{r}": [0.0] for r in ("none", "sqrt") for c in ("left", "right", "top")},
            name="logit-histogram-source")
        for name, rule, title, color in (
                ("logit-histogram", "none", "q·k over many draws", UNSCALED_COLOR),
                ("logit-histogram-scaled", "sqrt", f"q·k / √{core.DK} over many draws",
                 SCALED_COLOR)):
            fig = figure(name=name, title=title, height=250, sizing_mode="stretch_width",
                         min_width=240, tools="")
            fig.quad(left=f"left_{rule}", right=f"right_{rule}", top=f"top_{rule}", bottom=0,
                     source=self.hist_source, fill_color=color, fill_alpha=0.7,
                     line_color=None)
            fig.xaxis.axis_label = "logit"
            fig.yaxis.axis_label = "density"
            style_figure(fig)
            self.figures[name] = fig
        widths = shared.widths
        self.std_source = ColumnDataSource(dict(d_k=widths, std_raw=[1.0] * len(widths),
                                                sqrt_d_k=[w ** 0.5 for w in widths]),
                                           name="logit-std-source")
        fig = log_figure("logit-std", f"Spread of q·k against {core.DK}",
                         f"head width {core.DK} (log)",
                         "standard deviation (log)", y_log=True, x_range=shared.x_range)
        fig.line(x="d_k", y="sqrt_d_k", source=self.std_source, line_color=MARK,
                 line_dash=DASHED, legend_label=f"√{core.DK}")
        fig.scatter(x="d_k", y="std_raw", source=self.std_source, size=7,
                    fill_color=UNSCALED_COLOR, line_color=MARK, legend_label="measured")
        legend_below(fig)
        fig.yaxis.ticker = FixedTicker(ticks=[1, 2, 4, 8, 16, 32, 64])
        fig.yaxis.formatter = BasicTickFormatter(use_scientific=False)
        self.width_source = ColumnDataSource(dict(d_k=[64.0]), name="logit-width-source")
        fig.vspan(x="d_k", source=self.width_source, line_color=MARK, line_dash=DOTTED)
        self.figures["logit-std"] = fig
        self.tables = [(self.hist_source, _same(*self.hist_source.data)),
                       (self.std_source, _same("d_k", "std_raw", "sqrt_d_k"))]

    def body(self) -> list:
        f = self.figures
        return [[f["logit-histogram"], f["logit-histogram-scaled"]], f["logit-std"]]

    def update_logits(self, dist: dict) -> None:
        """The histograms of q·k, raw and divided by sqrt(d_k) (core.logit_distribution)."""
        data = {}
        for rule in ("none", "sqrt"):
            edges = np.asarray(dist[f"edges_{rule}"], float)
            data.update({f"left_{rule}": edges[:-1].tolist(), f"right_{rule}": edges[1:].tolist(),
                         f"top_{rule}": np.asarray(dist[f"counts_{rule}"], float).tolist()})
        self.hist_source.data = data

    def update_std(self, curve: dict) -> None:
        self.std_source.data = dict(d_k=np.asarray(curve["d_k"], float).tolist(),
                                    std_raw=np.asarray(curve["std_raw"]).tolist(),
                                    sqrt_d_k=np.sqrt(np.asarray(curve["d_k"], float)).tolist())

    def draw(self, s: Setting) -> tuple[str, str]:
        dist, std = core.logit_distribution(s.d_k), core.logit_std_curve()
        self.update_logits(dist)
        if self.std_source.data["std_raw"] != std["std_raw"].tolist():   # the same at every
            self.update_std(std)                                         # setting: set once
        self.width_source.data = dict(d_k=[float(s.d_k)])
        return variance_lead(s.d_k, dist), (
            variance_html(s.d_k, dist, std, core.LOGIT_DRAWS) + scaled_score_example())

    def question(self, s: Setting) -> quiz.Question:
        return quiz.variance_question(s.d_k)


class SaturationTab(TabView):
    """2 Saturation: the max weight and effective keys against d_k, per rule."""

    key, asked = "saturation", "grid"
    stores = (("saturation-curves-source", "temperature"),
              ("saturation-draw-source", "setting"), ("saturation-gradient:y_range", "setting"))

    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        for name, metric, title, label in (
                ("saturation-curves", "max_weight", "Max weight: median and middle half",
                 "max weight"),
                ("saturation-eff-keys", "eff_keys", "Effective keys eᴴ (H: entropy)",
                 "effective keys")):
            self.figures[name] = shared.curve_figure(name, metric, title, label)
        self.tables = shared.curve_tables("max_weight", "eff_keys")

    def body(self) -> list:
        return [list(self.figures.values())]

    def draw(self, s: Setting) -> tuple[str, str]:
        curves, draw = self.shared.draw_curves(s)
        return saturation_lead(s.d_k, s.align, curves), (
            saturation_html(s.d_k, s.temperature, s.keys, s.align, curves, draw,
                            core.CURVE_DRAWS) + softmax_example())

    def question(self, s: Setting) -> quiz.Question:
        return quiz.saturation_question(s.d_k, s.temperature, s.keys, s.align)


class GradientTab(TabView):
    """3 Gradient: against d_k, per rule, the share of draws whose gradient to the query is
    under a tenth of the ÷√d_k median (where the unscaled median says "more", how many draws
    get almost none), and that gradient's median and middle half."""

    key, asked = "gradient", "grid"
    stores = SaturationTab.stores

    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        self.figures["gradient-frozen-share"] = shared.share_figure("gradient-frozen-share")
        self.figures["saturation-gradient"] = shared.curve_figure(
            "saturation-gradient", "log10_grad_q", "Gradient to the query",
            GRAD_Q_AXIS)
        (curves, columns), this_draw = shared.curve_tables("log10_grad_q")
        self.tables = [(curves, columns + _same(*(f"frozen_share_{r}" for r in core.RULES))),
                       this_draw]

    def draw(self, s: Setting) -> tuple[str, str]:
        curves, draw = self.shared.draw_curves(s)
        return gradient_lead(s.d_k, curves), gradient_html(
            s.d_k, s.temperature, s.keys, s.align, curves, draw, core.CURVE_DRAWS)

    def question(self, s: Setting) -> quiz.Question:
        return quiz.gradient_question(s.d_k, s.temperature, s.keys, s.align)


#: The training source's columns per rule: the median over the seeds of each metric per step,
#: and the seeds' min and max of the loss (its band). The gradients draw the median only: the
#: offline copy holds every width's run (bands there would add ~0.2 MB).
TRAINING_COLUMNS = (("loss", ("median", "min", "max")), ("log10_grad_wq", ("median",)),
                    ("log10_grad_wk", ("median",)))


class TrainingTab(TabView):
    """4 Training: one head trained under each rule from core.TRAIN_SEEDS seeds, each rule at
    its own learning rate (core.rule_learning_rate); per step the median loss and gradients
    over the seeds, the loss with the seeds' range as a band. Run by its Train button (:meth:`show`),
    not drawn from the controls."""

    key, offline = "training", None     # asked by setting: the offline runs have one seed
    trains = True
    present_extra = ("train", "training-status")

    def __init__(self, shared: Shared, css=(), button_css=()) -> None:
        super().__init__(shared)
        self.button = Button(label="Train", button_type="primary", name="train",
                             stylesheets=list(button_css), width=160, margin=(5, 10))
        self.status = Div(text="", name="training-status", stylesheets=list(css),
                          disable_math=True, margin=(10, 10))
        self.source = ColumnDataSource(
            {"step": [], **{f"{m}_{q}_{r}": [] for r in core.RULES
                            for m, qs in TRAINING_COLUMNS for q in qs}},
            name="training-source")
        fig = figure(name="training-loss",
                     title="Loss", height=260, sizing_mode="stretch_width", min_width=260,
                     tools="")
        subtitle(fig, f"median of {core.TRAIN_SEEDS} seeds, and their range")
        for r in core.RULES:
            fig.varea(x="step", y1=f"loss_min_{r}", y2=f"loss_max_{r}", source=self.source,
                      fill_color=RULE_COLORS[r], fill_alpha=0.15)
            shared.rule_line(fig, "step", f"loss_median_{r}", self.source, r, highlighted=False)
        fig.x_range = Range1d(0, 1)
        fig.y_range = Range1d(0, 1)
        fig.xaxis.axis_label = "step"
        fig.yaxis.axis_label = "loss"
        self.figures["training-loss"] = fig
        # log10 of the norms on a linear axis, its ticks written as powers of ten: they may
        # fall below float64's range (core takes them in the log domain there)
        fig = figure(name="training-gradients",
                     title="Gradient to the query's weights",
                     height=260, sizing_mode="stretch_width", min_width=260, tools="")
        for r in core.RULES:
            shared.rule_line(fig, "step", f"log10_grad_wq_median_{r}", self.source, r,
                             highlighted=False)
            fig.line(x="step", y=f"log10_grad_wk_median_{r}", source=self.source,
                     line_width=1, line_color=RULE_COLORS[r], line_dash=RULE_DASH[r])
        fig.x_range = self.figures["training-loss"].x_range
        fig.y_range = Range1d(-3, 1)
        log10_axis(fig.yaxis)
        fig.xaxis.axis_label = "step"
        fig.yaxis.axis_label = "‖∂L/∂W‖ (log)"    # short enough for a phone's chart
        subtitle(fig, "median; thin lines: the key's weights")
        self.figures["training-gradients"] = fig
        self.figures["training-lr-sweep"] = self._sweep_figure(shared)
        for fig in self.figures.values():
            style_figure(fig)
            fig.min_border_right = 24          # room for the last step's tick label
            legend_below(fig)
        #: The sweep source's rows (None: as many as the sweep's longest rule has rates).
        self.sweep_rows = None
        self._runs_shown = None      # the runs the source shows (show_runs)
        self.tables = [(self.source, _same(*self.source.data)),
                       (self.sweep_source, _same(*self.sweep_source.data))]
        self.intro = TRAINING_INTRO

    def _sweep_figure(self, shared: Shared):
        """The learning-rate sweep: per rule its median final loss against the rate, the
        seeds' range as a band, its best rate filled, Train's rate as a ring, and a
        cross at the top for a rate whose median run diverged."""
        self.sweep_source = ColumnDataSource(
            {f"{c}_{r}": [] for r in core.RULES for c in SWEEP_COLUMNS},
            name="training-lr-sweep-source")
        # min_border_right: room for the last tick's label (10³), centred on the frame's edge
        fig = figure(name="training-lr-sweep", title=SWEEP_TITLE, height=280,
                     min_border_right=24,
                     sizing_mode="stretch_width", min_width=260, tools="", x_axis_type="log",
                     y_axis_type="log", x_range=Range1d(1e-3, 1e3), y_range=Range1d(1e-3, 1))
        subtitle(fig, "filled: best rate; ring: Train's rate")
        for r in core.RULES:
            fig.varea(x=f"lr_{r}", y1=f"final_min_{r}", y2=f"final_max_{r}",
                      source=self.sweep_source, fill_color=RULE_COLORS[r], fill_alpha=0.15)
            shared.rule_line(fig, f"lr_{r}", f"final_median_{r}", self.sweep_source, r,
                             highlighted=False)
            for y, look in ((f"best_{r}", dict(size=11, fill_color=RULE_COLORS[r])),
                            (f"train_{r}", dict(size=15, marker="circle", fill_color=None,
                                                line_width=2)),
                            (f"diverged_{r}", dict(size=12, marker="x", line_width=2))):
                fig.scatter(x=f"lr_{r}", y=y, source=self.sweep_source,
                            line_color=RULE_COLORS[r],
                            **{"marker": RULE_MARKER[r], **look})
        for axis in (fig.xaxis, fig.yaxis):     # plain text (Bokeh's log labels are TeX)
            axis.ticker = LogTicker(mantissas=[1, 2, 5])
            axis.formatter = CustomJSTickFormatter(code=script("log-ticks"))
        fig.xaxis.axis_label = "learning rate (log)"
        fig.yaxis.axis_label = "final loss (log)"
        return fig

    def body(self) -> list:
        figs = list(self.figures.values())
        return [[self.button, self.status], figs[:2], figs[2]]

    def draw(self, s: Setting | None) -> tuple[str, str]:
        return TRAINING_LEAD, self.intro

    def question(self, s: Setting, running: bool = False) -> quiz.Question:
        """Which rule ends lowest at ``s``, before its runs' answer (``running``: they are
        under way)."""
        return quiz.training_question(s.d_k, s.temperature, running=running)

    def show(self, runs: dict, d_k: int, temperature: float, n_keys: int,
             sweep=None) -> tuple[str, str] | None:
        """The runs so far (rule -> core.SeededTraining) on the charts and the status line,
        and ``sweep`` (a core.LearningRateSweep under way or done, or None: none yet) on
        the learning-rate chart; once every run is done, the HTML of the lead and the "More
        detail" of what they showed, the sweep's paragraph once it is done (else None)."""
        self.show_runs(runs)
        self.show_sweep(None if sweep is None else sweep.result(), self.sweep_rows)
        done = all(run.done for run in runs.values())
        step = min(run.steps_done for run in runs.values())
        self.status.text = training_status_html(step, TRAINING_STEPS, d_k, temperature, n_keys,
                                                done, sweep)
        if not done:
            return None
        detail = training_html(runs, d_k, temperature, n_keys)
        swept = sweep.result() if sweep is not None and sweep.done else None
        if swept is not None:
            detail += training_sweep_html(swept, d_k)
        return training_lead(runs, swept), detail

    def show_sweep(self, result, rows: int | None = None) -> None:
        """A sweep's points (rule -> core.RuleSweep, or None: empty) on its chart, its axes
        spanning them (``rows``: see :func:`sweep_data`)."""
        data = sweep_data(result, rows)
        fig = self.figures["training-lr-sweep"]
        rates = [v for k, v in data.items() if k.startswith("lr_")]
        losses = [v for k, v in data.items() if k.startswith(("final_min_", "final_max_"))]
        if result is not None:     # the axis spans every rule's first rates from the start
            rates += [s.equal_step * float(core.SWEEP_FACTOR) ** k for s in result.values()
                      for k in (-core.SWEEP_START, core.SWEEP_START)]
        fit_log_range(fig.x_range, *rates)
        fit_log_range(fig.y_range, *losses)
        for r in core.RULES:        # a diverged median's cross: at the top of the axis
            data[f"diverged_{r}"] = [fig.y_range.end / 1.5 if x == 1 else math.nan
                                     for x in data[f"diverged_{r}"]]
        send_changes(self.sweep_source, data)

    def show_runs(self, run_by_rule: dict) -> None:
        """The training runs so far (rule -> core.SeededTraining), replacing what is shown:
        per rule and step the median over the seeds and their range; the axes span the
        planned steps and the values so far."""
        runs = run_by_rule.values()
        first = next(iter(runs))
        setting = [str(first.d_k), f"{first.temperature:g}", str(first.seed), str(first.n_keys)]
        if self.source.tags != setting:     # what the downloads are named after
            self.source.tags = setting
        loss_fig, grad_fig = self.figures["training-loss"], self.figures["training-gradients"]
        steps = max(run.steps for run in runs)
        if loss_fig.x_range.end != steps:
            loss_fig.x_range.end = steps
        data = training_data(run_by_rule)
        losses = [x for r in run_by_rule for x in data[f"loss_max_{r}"]]
        grads = [x for r in run_by_rule for m in ("log10_grad_wq", "log10_grad_wk")
                 for x in data[f"{m}_median_{r}"] if math.isfinite(x)]
        if losses:
            loss_fig.y_range.end = 1.05 * max(losses)
        if grads:
            grad_fig.y_range.start, grad_fig.y_range.end = min(grads) - 0.3, max(grads) + 0.3
        if self._runs_shown is not run_by_rule:      # other runs: their rows replace these
            self._runs_shown = run_by_rule
            self.source.data = data
        else:
            send_changes(self.source, data)


def _same_value(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)


def send_changes(source: ColumnDataSource, data: dict) -> None:
    """Make ``source`` hold ``data`` by sending only what changed: the rows past its own as
    one ``stream``, the cells of its rows that differ as one ``patch`` (NaN equals NaN); the
    whole data where ``data`` has other columns, or fewer rows."""
    old = source.data
    rows = len(next(iter(old.values()), []))
    if set(old) != set(data) or any(len(v) < rows for v in data.values()):
        source.data = data
        return
    patches = {}
    for name, values in data.items():
        changed = [(i, values[i]) for i, was in enumerate(old[name][:rows])
                   if not _same_value(was, values[i])]
        if changed:
            patches[name] = changed
    if patches:
        source.patch(patches)
    if any(len(v) > rows for v in data.values()):
        source.stream({name: values[rows:] for name, values in data.items()})


def training_data(run_by_rule: dict) -> dict:
    """The training source's columns (TRAINING_COLUMNS) for runs (rule -> core.SeededTraining)
    over the steps every run has taken; a gradient's log10 NaN (a gap) where it is exactly 0."""
    curves = {r: {m: run.curve(m) for m, _ in TRAINING_COLUMNS}
              for r, run in run_by_rule.items()}
    n = min(len(c["loss"]["median"]) for c in curves.values())
    data = {"step": list(range(n))}
    for r, curve in curves.items():
        for m, qs in TRAINING_COLUMNS:
            for q in qs:
                v = curve[m][q][:n]
                data[f"{m}_{q}_{r}"] = np.where(np.isfinite(v), v, math.nan).tolist()
    return data


#: The sweep source's columns, each with its rule's key after it: rate, median final loss and
#: the seeds' range, the median again at the best rate and at Train's (NaN elsewhere), and a
#: diverged median's cross (NaN elsewhere).
SWEEP_COLUMNS = ("lr", "final_median", "final_min", "final_max", "best", "train", "diverged")
SWEEP_TITLE = "Final loss against learning rate"


def sweep_data(result, rows: int | None = None) -> dict:
    """The sweep source's columns for ``result`` (rule -> core.RuleSweep, or None: empty):
    each rule's rates in order, the rules' columns as long as the longest, or ``rows`` (NaN
    after a rule's last rate); a median that is not finite (a diverged run) leaves the line
    and is drawn as a cross (its column 1 there, for show_sweep to place)."""
    if result is None:
        return {f"{c}_{r}": [] for r in core.RULES for c in SWEEP_COLUMNS}
    n = max([len(result[r].rates) for r in core.RULES] + [rows or 0])
    data = {}
    for r in core.RULES:
        s = result[r]
        finite = np.isfinite(s.median)
        cols = {"lr": s.rates, "final_median": np.where(finite, s.median, math.nan),
                "final_min": np.where(np.isfinite(s.low), s.low, math.nan),
                "final_max": np.where(np.isfinite(s.high), s.high, math.nan),
                "best": np.where(s.rates == s.best, s.median, math.nan),
                "train": np.where(s.rates == s.equal_step, s.median, math.nan),
                "diverged": np.where(finite, math.nan, 1.0)}
        for c in SWEEP_COLUMNS:
            v = np.asarray(cols[c], float)
            data[f"{c}_{r}"] = np.concatenate([v, np.full(n - len(v), math.nan)]).tolist()
    return data


class BudgetTab(TabView):
    """5 Heads: one model width split into h heads of d_k = width / h, per rule."""

    key, offline, asked = "budget", "temperature", "temperature"
    stores = (("head-budget-source", "temperature"), ("head-budget-gradient:y_range",
                                                      "temperature"))

    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        self.source = ColumnDataSource(
            {"heads": [], "d_k": [], **{f"{m}_median_{r}": [] for m in BUDGET_METRICS
                                        for r in core.RULES}}, name="head-budget-source")
        for name, metric, title, label in (
                ("head-budget", "max_weight", "Median max weight per head", "max weight"),
                ("head-budget-gradient", "log10_grad_q", "Median gradient to q per head",
                 GRAD_Q_AXIS)):
            log10 = metric.startswith("log10_")
            fig = figure(name=name, title=title, height=250, sizing_mode="stretch_width",
                         min_width=240, tools="", x_axis_type="log",
                         **({"y_range": Range1d(-3, 1)} if log10 else {}))
            for r in core.RULES:
                shared.rule_line(fig, "heads", f"{metric}_median_{r}", self.source, r)
                fig.scatter(x="heads", y=f"{metric}_median_{r}", source=self.source,
                            marker=RULE_MARKER[r], size=8, fill_color=RULE_COLORS[r],
                            line_color=MARK)
            fig.xaxis.ticker = FixedTicker(ticks=[2 ** i for i in range(13)])
            fig.xaxis.formatter = BasicTickFormatter(use_scientific=False)
            fig.xaxis.axis_label = f"number of heads h ({core.DK} = width / h)"
            fig.yaxis.axis_label = label
            if log10:
                log10_axis(fig.yaxis)
            style_figure(fig)
            legend_below(fig)
            self.figures[name] = fig
        self.tables = [(self.source, _same(*self.source.data))]

    def body(self) -> list:
        return [list(self.figures.values())]

    def draw(self, s: Setting) -> str:
        budget = core.head_budget(BUDGET_WIDTH, s.temperature, s.keys, s.align)
        self.source.data = data = {k: np.asarray(budget[k], float).tolist()
                                   for k in self.source.data}
        fit_range(self.figures["head-budget-gradient"].y_range,
                  *(data[f"log10_grad_q_median_{r}"] for r in core.RULES))
        return budget_lead(budget, BUDGET_WIDTH), budget_html(
            budget, BUDGET_WIDTH, s.temperature, s.keys, s.align)

    def question(self, s: Setting) -> quiz.Question:
        return quiz.budget_question(BUDGET_WIDTH, BUDGET_HEADS, s.temperature, s.keys, s.align)


#: The argument's tabs, by key (each a row of state.TABS): the class that builds and draws it.
TAB_VIEWS: dict[str, type[TabView]] = {cls.key: cls for cls in (
    OneDrawTab, VarianceTab, SaturationTab, GradientTab, TrainingTab, BudgetTab)}


def trains(key: str) -> bool:
    """Whether the tab ``key`` (a row of state.TABS) is drawn by training runs."""
    cls = TAB_VIEWS.get(key)
    return cls is not None and cls.trains


def with_page(key: str) -> bool:
    """Whether the tab ``key`` (a row of state.TABS) is built and drawn with the page
    (:attr:`TabView.with_page`)."""
    cls = TAB_VIEWS.get(key)
    return cls is not None and cls.with_page


class Argument:
    """The argument's tabs ``tab_keys`` (by default all of :data:`TAB_VIEWS` but those built
    with the page), built once, and
    what they share (``shared``: another Argument's, for tabs that join it, :meth:`adopt`).
    ``figures``: every tab's figures by name; ``rule_lines``: each rule's lines."""

    def __init__(self, tab_keys=None, css=(), button_css=(), shared: Shared | None = None
                 ) -> None:
        self.shared = shared = shared or Shared()
        self.tabs: dict[str, TabView] = {}
        for key in ([k for k in TAB_VIEWS if not with_page(k)] if tab_keys is None
                    else tab_keys):
            cls = TAB_VIEWS[key]
            self.tabs[key] = (cls(shared, css, button_css) if cls.trains else cls(shared))
        self.rule_lines = shared.rule_lines
        self.figures = {name: fig for tab in self.tabs.values()
                        for name, fig in tab.figures.items()}
        derived_glyph_looks(self.figures.values())

    def adopt(self, other: Argument) -> None:
        """Take the tabs of ``other``, built on this one's ``shared``; their lines are
        highlighted at the next :meth:`draw`."""
        assert other.shared is self.shared
        self.tabs.update(other.tabs)
        self.figures.update(other.figures)
        self.shared.forget_highlight()

    def draw(self, key: str, s: Setting) -> tuple[str, str]:
        """Draw tab ``key`` at ``s`` with the lines of its rule highlighted; the HTML of its
        lead and of its "More detail"."""
        self.shared.highlight(s.rule)
        return self.tabs[key].draw(s)

    def model(self, name: str):
        """A source or a ``<figure>:<range>`` the offline copy stores, by its name."""
        if ":" in name:
            fig, attr = name.split(":")
            return getattr(self.figures[fig], attr)
        return next(found for fig in self.figures.values()
                    if (found := fig.select_one({"name": name})) is not None)
