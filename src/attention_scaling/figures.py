"""The one draw's Bokeh figures (the two bar charts of the reference figure, the Jacobian and
its diagonal across widths), its texts and readout, built once and updated in place
(``Charts.update`` assigns new ``.data``); the ``*_data`` functions turn core's variants into
their columns. Stable names for tests: ``scaled-weights``, ``unscaled-weights``,
``jacobian``, ``jacobian-diagonal`` and ``<name>-source``."""

from __future__ import annotations

import html
import math

import numpy as np
from bokeh.core.properties import value
from bokeh.models import (ColorBar, ColumnDataSource, CustomJS, CustomJSHover,
                          CustomJSTickFormatter, CustomJSTransform, Div, FactorRange,
                          HoverTool, LinearColorMapper, Range1d)
from bokeh.plotting import figure
from bokeh.transform import transform

from . import core
from .style import (DIVERGING, FONT, KEY_LABELS, LABEL_ALPHA, MARK, MUTED_ALPHA, RULE_COLORS,
                    RULE_MARKER, SCALED_COLOR, SEQUENTIAL, UNSCALED_COLOR, contrast,
                    derived_glyph_looks, log10_axis, script, style_figure, subtitle)
from .prose.lead import DRAW_LEAD
from .prose.text import (EXPLANATION, GRAD_Q_AXIS, WHICH, caption_html, divisor_html, divisor_text,
                         fill,
                         weight_label)


def scaled_title(rule: str) -> str:
    """The left bar chart's title when it shows ``rule``'s logits: "Scaled by 1/√dₖ"."""
    return f"Scaled by 1/{divisor_text(core.RULE[rule])}"


def scaled_note(rule: str) -> str:
    """The left bar chart's second line when it shows ``rule``'s logits: their spread, which
    is √d_k to the power 1 - 2·exponent (q·k's is √d_k)."""
    exponent = core.RULE[rule].exponent
    spread = ("unit variance at every " + core.DK if exponent == 0.5 else
              f"their spread shrinks as 1/√{core.DK}" if exponent == 1.0 else
              f"their spread goes as {core.DK}^{0.5 - exponent:g}")
    return f"logits q·k/{divisor_text(core.RULE[rule])}: {spread}"


#: The gradient spread chart's margin beyond its data at either end, a share of its span.
SPREAD_MARGIN = 0.03
#: The highest weight at which a bar chart's "max weight" label sits on its bar's top; on a
#: taller bar it sits at this height, across the bar, where a phone's 100 px chart still
#: holds it under the chart's top (assets/js/label-height.js).
LABEL_CAP = 0.8


def _bars(name: str, title: str, color: str, note: str) -> tuple:
    """A bar chart of attention weights over the keys: its figure, source, bars' glyph and
    second line (the left chart's follow the rule it shows)."""
    n = len(KEY_LABELS)
    zeros = np.zeros(n)
    # the "max weight" label is a column of the bars' own source ("" except on the highest
    # bar): one data change per chart and update, not two
    source = ColumnDataSource(
        data=dict(key=list(KEY_LABELS), logit=zeros, weight=zeros, pq=zeros, gq=zeros,
                  alpha=zeros + MUTED_ALPHA, line=zeros, label=[""] * n, align=["center"] * n,
                  label_alpha=zeros),
        name=f"{name}-source",
    )
    fig = figure(
        name=name, title=title, x_range=FactorRange(*KEY_LABELS), y_range=Range1d(0, 1.13),
        height=330, sizing_mode="stretch_width", min_width=260, tools="",
    )
    bars = fig.vbar(x="key", top="weight", width=0.72, source=source, fill_color=color,
                    fill_alpha="alpha", line_color=MARK, line_width="line", name=f"{name}-bars")
    # dark on a light pill: readable over the light and the dark theme's backgrounds
    fig.text(x="key", y=transform("weight", CustomJSTransform(
                 args=dict(cap=LABEL_CAP), v_func=script("label-height"))),
             text="label", source=source, text_align="align",
             text_baseline="bottom", y_offset=-6, text_font=value(FONT), text_font_size="14px",
             text_font_style="bold", text_color="#1f2933", background_fill_color="#ffffff",
             background_fill_alpha="label_alpha", padding=2)
    fig.add_tools(HoverTool(renderers=[bars], tooltips=[
        ("key", "@key"), ("logit", "@logit{0.000}"), ("weight", "@weight{custom}"),
        ("p(1 − p)", "@pq{custom}"), ("‖∂pᵢ/∂q‖ (to the query)", "@gq{custom}"),
    ], formatters={"@weight": CustomJSHover(code=script("hover-weight")),
                   "@pq": CustomJSHover(code=script("hover-positive")),
                   "@gq": CustomJSHover(code=script("hover-positive"))},
        mode="mouse", point_policy="follow_mouse"))
    fig.yaxis.axis_label = "attention weight"
    fig.yaxis.ticker = [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    fig.yaxis.formatter.use_scientific = False
    fig.xaxis.axis_label = "key"
    fig.xaxis.formatter = key_labels(fig, "x")
    style_figure(fig)
    line = subtitle(fig, note)
    line.name = f"{name}-subtitle"
    fig.xgrid.grid_line_color = None
    return fig, source, bars.glyph, line


# The *_data functions return only the columns that change; the static ones (key labels,
# heatmap coordinates) are set once when the sources are created. Small columns go as plain
# lists: Bokeh sends every NumPy array as a binary buffer in two extra websocket frames, and
# for a handful of numbers those frames cost more (on both ends) than the JSON. The large,
# rarely sent sweep stays a NumPy buffer.

def bar_data(v: core.Variant) -> dict:
    """Changing columns of one bar chart: logits, weights, p(1-p), the gradient ||dp_i/dq||
    that reaches the query, highlight of the max and its "max weight 27%" label (``label``
    is empty on every other bar, ``label_alpha`` 0 there)."""
    top = np.arange(len(v.probs)) == v.argmax
    text, align = max_label(v)
    n = len(v.probs)
    return dict(
        logit=v.logits.tolist(),
        weight=v.probs.tolist(),
        pq=v.diagonal.tolist(),
        gq=v.query_rows.tolist(),
        alpha=np.where(top, 1.0, MUTED_ALPHA).tolist(),
        line=np.where(top, 2.0, 0.0).tolist(),
        label=["" if i != v.argmax else text for i in range(n)],
        align=["center" if i != v.argmax else align for i in range(n)],
        label_alpha=[LABEL_ALPHA if i == v.argmax else 0.0 for i in range(n)],
    )


def max_label(v: core.Variant) -> tuple[str, str]:
    """The "max weight 27%" label placed on the highlighted bar, and its alignment."""
    top = v.argmax
    # keep the label inside the plot when the highlighted bar is near an edge: centred over
    # the second bar, "max weight 27%" sticks out of a chart squeezed to ~230 px (a 900 px
    # window); it reads from the bar towards the middle instead
    n = len(v.probs)
    align = "left" if top <= 1 else "right" if top >= n - 2 else "center"
    return f"max weight {weight_label(v)}", align


#: The sweep's width labels: their slant (radians), and the widths labelled where the chart is
#: too narrow for all 25 (the powers of four).
SWEEP_LABEL_ANGLE = 0.9
SWEEP_LABEL_EVERY = tuple(str(w) for w in core.D_K_VALUES if w & (w - 1) == 0 and
                          (w.bit_length() - 1) % 2 == 0)


def key_labels(fig, dim: str) -> CustomJSTickFormatter:
    """The labels of a key axis of ``fig`` along ``dim`` ("x" or "y"): thinned in the browser
    to what the chart's width or height has room for (assets/js/key-ticks.js)."""
    return CustomJSTickFormatter(args=dict(fig=fig, dim=dim), code=script("key-ticks"))


#: The outline of the heatmap's diagonal cells.
INK = "#1f2933"
#: The colour of a number printed on each colour of the Jacobian's map: black or white,
#: whichever contrasts more with the cell (at least 4.5:1 on every colour of the map).
CELL_INKS = tuple(max(("#000000", "#ffffff"), key=lambda ink, c=c: contrast(ink, c))
                  for c in DIVERGING)


def cell_ink(x: float) -> str:
    """The colour of a number printed on the Jacobian's cell of value ``x``: the cell's
    colour as the map's LinearColorMapper picks it (BokehJS: the palette's entry at
    floor((x - low) / (high - low) * size), the last one at high)."""
    low, high, size = -core.JACOBIAN_BOUND, core.JACOBIAN_BOUND, len(DIVERGING)
    return CELL_INKS[min(max(int((x - low) / (high - low) * size), 0), size - 1)]


def cell_text(x: float) -> str:
    """A p(1 - p) printed in its heat-map cell: three decimals, "<0.001" for what would print
    as 0.000 (a softmax's weights are all positive, so none of these is 0, even where float64
    underflows to it)."""
    return "<0.001" if x < 0.0005 else f"{x:.3f}"


def jacobian_data(v: core.Variant) -> dict:
    """The n x n Jacobian heatmap's values, row-major (row i = p_i, column j = u_j = z_j / T)."""
    return dict(value=v.jacobian.ravel().tolist())


def diagonal_label_data(v: core.Variant) -> dict:
    """The diagonal p_i(1 - p_i) printed in the heatmap's diagonal cells (``text``), in the
    colour (``ink``) that reads on the cell (:func:`cell_ink`): one row per key, the off-diagonal cells hold no text."""
    text, ink = [], []
    for x in v.diagonal.tolist():
        text.append(cell_text(x))
        ink.append(cell_ink(x))
    return dict(text=text, ink=ink)


def sweep_data(state: core.State, rule) -> dict:
    """Values of the key x width heatmap of p(1 - p) under the active rule, row-major."""
    return dict(value=state.sweep(rule).ravel())


#: The readout's rows: (header HTML, header tooltip, the cell's {field} slots, the row's
#: class, shown: False for the rows under "More detail"), one column per rule of
#: core.RULE_TABLE.
READOUT_ROWS = (
    ("max weight", "", "{{{r}_max_w}} on {{{r}_top}}", "", True),
    ("effective keys e<sup>H</sup> (H: entropy)", "the exponential of the entropy H of the "
     "weights: how "
     "many keys share them", "{{{r}_eff}}", "", True),
    ("largest p(1 − p)", "", "{{{r}_diag}}", "", False),
    ("‖J‖<sub>F</sub> = ‖∂p/∂u‖<sub>F</sub>", "the softmax Jacobian with respect to its own "
     "input u = z/T (the heat map)", "{{{r}_frob}}", "", False),
    ("‖∂p/∂q‖<sub>F</sub>, to the query", "∂p/∂q = J K / (s T), s the rule's divisor: the "
     "gradient that reaches the query and the query's weights", "{{{r}_grad}}", "to-query", True),
)


def _readout_table(shown: bool) -> str:
    """The readout's table of the rows ``shown`` (or the others), a column per rule; the
    rule the model uses is highlighted through the table's data-active attribute (the
    rule's key, filled in for '@active' as a plain attribute value, not a span; style:
    style.rule_css)."""
    rules = core.RULE_TABLE
    head = "".join(f"<th data-rule='{r.key}'>{r.html}</th>" for r in rules)
    body = "".join(
        f"<tr{f' class={cls!r}' if cls else ''}><th{f' title={tip!r}' if tip else ''}>{name}</th>"
        + "".join(f"<td data-rule='{r.key}'>{cell.format(r=r.key)}</td>" for r in rules)
        + "</tr>" for name, tip, cell, cls, row_shown in READOUT_ROWS if row_shown == shown)
    return ("<table data-active='@active'><thead><tr><th><span class='sr-only'>measure</span>"
            f"</th>{head}</tr></thead><tbody>{body}</tbody></table>")


def readout_html() -> str:
    """The gradient readout: its shown rows with {field} slots (see text.fill)."""
    return ("<div class='readout'><h2>How much gradient gets through</h2>"
            f"{_readout_table(True)}</div>")


def readout_detail_html() -> str:
    """The readout's other rows and what they mean, for "More detail"."""
    *others, last = [divisor_html(r) for r in core.RULE_TABLE]
    divisors = f"{', '.join(others)} or {last}"
    return ("<div class='readout'>" + _readout_table(False) +
            "<p>p(1 − p) peaks at ¼ when a weight is ½ and tends to 0 as it nears 0 or 1; "
            "the highlighted column is the rule the model uses. "
            "J is the softmax's Jacobian with respect to its own input u = z/T, the same for "
            "any logits that give the same weights; ∂p/∂q = J K/(s T) is what reaches the "
            f"query (s the rule's divisor: {divisors}), so it carries the 1/s and the 1/T.</p>"
            "</div>")



#: The bar charts as text for screen readers (assets/js/describe-bars.js fills it): visually
#: hidden, read in page order right after the charts: the summary (a polite live region,
#: announced once the controls are still, and the one copy of it in the page) and the table.
BARS_TEXT = (
    "<div class='sr-only'><p aria-live='polite' data-summary></p>"
    "<table><caption>The two bar charts as a table: each key's logit, attention weight and "
    "p(1 − p), divided by √d<sub>k</sub> and raw</caption><thead><tr><th scope='col'>key</th>"
    "<th scope='col' data-left-logit>logit ÷√d<sub>k</sub></th><th scope='col'>weight, scaled</th>"
    "<th scope='col'>p(1 − p), scaled</th><th scope='col'>logit, raw</th>"
    "<th scope='col'>weight, unscaled</th><th scope='col'>p(1 − p), unscaled</th></tr></thead>"
    "<tbody data-bars></tbody></table></div>"
)


#: The heat maps as text for screen readers (assets/js/describe-heatmaps.js fills it).
HEATMAPS_TEXT = (
    "<div class='sr-only'><p data-diagonal></p>"
    "<table><caption>The largest p(1 − p) at every head width, as the heat map of the "
    "diagonal shows it</caption><thead><tr><th scope='col'>d<sub>k</sub></th>"
    "<th scope='col'>largest p(1 − p)</th><th scope='col'>on key</th></tr></thead>"
    "<tbody data-sweep></tbody></table></div>"
)


#: The spread chart's columns per rule (core.gradient_spread): its quantiles in log10 and the
#: shares of the draws below a tenth of the ÷√d_k median and of the rule's own median.
SPREAD_COLUMNS = (*core.SPREAD_QUANTILES, "frozen_share", "spread_share")


class SpreadChart:
    """‖∂p/∂q‖_F over the draws at the current setting (core.gradient_spread), a row per rule
    on a log10 axis: the middle half of the draws (box), the middle 90% (whiskers), the median
    (bar), this draw (dot), and the line of a tenth of the ÷√d_k median, under which a draw
    barely learns. Its source holds one row: each rule's columns (``<column>_<rule>``,
    :data:`SPREAD_COLUMNS`) and ``tenth``; this draw's values are a source of their own
    (``this_draw_<rule>``): they change with the seed, the spread does not."""

    def __init__(self) -> None:
        rules = core.RULES
        self.source = ColumnDataSource(
            {**{f"{c}_{r}": [0.0] for r in rules for c in SPREAD_COLUMNS}, "tenth": [0.0]},
            name="gradient-spread-source")
        self.this_draw_source = ColumnDataSource({f"this_draw_{r}": [0.0] for r in rules},
                                                 name="gradient-this-draw-source")
        rows = {r: float(len(rules) - 1 - i) for i, r in enumerate(rules)}   # unscaled on top
        self.fig = fig = figure(
            name="gradient-spread", title=f"Gradient to q over {core.CURVE_DRAWS:,} draws",
            height=230, sizing_mode="stretch_width", min_width=260, tools="",
            x_range=Range1d(-3, 1), y_range=Range1d(-0.6, len(rules) - 0.4))
        src = self.source
        fig.vspan(x="tenth", source=src, line_color=MARK, line_dash=(6,),
                  line_width=1.5)
        for r, y in rows.items():
            color = RULE_COLORS[r]
            fig.segment(x0=f"q05_{r}", x1=f"q95_{r}", y0=y, y1=y, source=src, line_color=color,
                        line_width=2)
            fig.hbar(y=y, left=f"q25_{r}", right=f"q75_{r}", height=0.45, source=src,
                     fill_color=color, fill_alpha=0.35, line_color=color)
            fig.rect(x=f"median_{r}", y=y, width=3, height=0.45, width_units="screen",
                     source=src, fill_color=color, line_color=color)
            fig.scatter(x=f"this_draw_{r}", y=y, source=self.this_draw_source, size=11,
                        marker=RULE_MARKER[r], fill_color=color, line_color=MARK)
        fig.yaxis.ticker = list(rows.values())
        fig.yaxis.major_label_overrides = {y: core.RULE[r].label for r, y in rows.items()}
        log10_axis(fig.xaxis)
        fig.xaxis.axis_label = GRAD_Q_AXIS
        style_figure(fig)
        subtitle(fig, f"dot: this draw; dashed: ÷√{core.DK} median / 10")
        self._shown = None

    def update(self, spread: dict, this_draw: dict) -> None:
        """The spread (core.gradient_spread) and this draw's log10 ||dp/dq||_F (rule ->
        value); the axis spans both, with :data:`SPREAD_MARGIN` to spare."""
        rules = core.RULES
        if spread is not self._shown:
            self.source.data = {**{f"{c}_{r}": [float(spread[f"{c}_{r}"])]
                                   for r in rules for c in SPREAD_COLUMNS},
                                "tenth": [float(spread["median_sqrt"]) - 1.0]}
            self._shown = spread
        self.this_draw_source.data = {f"this_draw_{r}": [float(this_draw[r])] for r in rules}
        lo = min(spread["q05_" + r] for r in rules)
        hi = max(spread["q95_" + r] for r in rules)
        lo, hi = min(lo, *this_draw.values()), max(hi, *this_draw.values())
        # a margin of a few percent of the span (at least 0.3 decades) keeps the markers at
        # either end whole on a span of hundreds of decades
        pad = max(0.3, SPREAD_MARGIN * (hi - lo))
        start, end = math.floor(lo - pad), math.ceil(hi + pad)
        rng = self.fig.x_range
        if (rng.start, rng.end) != (start, end):
            rng.start, rng.end = start, end

    @property
    def tables(self) -> list:
        """Its CSV: the spread's columns and this draw's."""
        def header(c: str) -> str:
            name, _, rule = c.rpartition("_")
            return (c if "share" in c else "log10_grad_q_tenth_of_sqrt_median" if c == "tenth"
                    else f"log10_grad_q_{name}_{rule}")
        return [(self.source, [[c, header(c)] for c in self.source.data]),
                (self.this_draw_source, [[c, f"this_draw_log10_grad_q_{c.rpartition('_')[2]}"]
                                         for c in self.this_draw_source.data])]


class Charts:
    """The one draw's Bokeh figures and their data sources, created once."""

    def __init__(self, caption_extra: str = "") -> None:
        #: The caption, the live explanation and the gradient readout: Divs whose HTML is
        #: written once; later changes send only ``text_source`` (field, value) and the browser
        #: fills the spans. ``caption_extra`` ends the caption (plain text).
        self.lead = Div(text="", sizing_mode="stretch_width", name="draw-lead")
        self.caption = Div(text="", sizing_mode="stretch_width", name="caption")
        self.explanation = Div(text="", sizing_mode="stretch_width", name="explanation")
        self.readout = Div(text="", sizing_mode="stretch_width", name="readout", min_width=280)
        self.readout_detail = Div(text="", sizing_mode="stretch_width", name="readout-detail")
        self._caption_html = caption_html(caption_extra)
        self.text_source = ColumnDataSource(data=dict(field=[], value=[]), name="text-source")
        # so that it is part of the document with any of the Divs (an embed may hide the text)
        for div in self.texts:
            div.tags = [self.text_source]
        self.text_source.js_on_change("data", CustomJS(
            args=dict(source=self.text_source, divs=self.texts), code=script("fill-spans")))
        # the left chart's bars and second line follow the rule it shows (_style_variant)
        self.scaled_fig, self.scaled_source, self._scaled_glyph, self._scaled_note = _bars(
            "scaled-weights", scaled_title("sqrt"), SCALED_COLOR, scaled_note("sqrt"))
        self.unscaled_fig, self.unscaled_source, _, _ = _bars(
            "unscaled-weights", "Unscaled", UNSCALED_COLOR,
            f"logits q·k: their spread grows as √{core.DK}")
        self.jacobian_fig, self.jacobian_source, self.jacobian_labels_source = self._jacobian()
        self.bars_text = Div(text=BARS_TEXT, name="bars-text", disable_math=True,
                             sizing_mode="stretch_width", margin=0)
        # the left chart's rule as the table and the summary name it, by its chart's title
        left_names = {scaled_title(r): ["Scaled" if r == "sqrt" else scaled_title(r),
                                        f"logit ÷{divisor_text(core.RULE[r])}"]
                      for r in core.RULES if r != "none"}
        describe = CustomJS(args=dict(scaled=self.scaled_source, unscaled=self.unscaled_source,
                                      div=self.bars_text, left=self.scaled_fig.title,
                                      left_names=left_names), code=script("describe-bars"))
        for source in (self.scaled_source, self.unscaled_source):
            source.js_on_change("data", describe)
        self.diagonal_fig, self.diagonal_source, self.marker_source = self._diagonal()
        #: The gradient to the query over many draws, and this draw among them.
        self.spread = SpreadChart()
        self.heatmaps_text = Div(text=HEATMAPS_TEXT, name="heatmaps-text", disable_math=True,
                                 sizing_mode="stretch_width", margin=0)
        heatmaps = CustomJS(args=dict(cells=self.jacobian_labels_source,
                                      sweep=self.diagonal_source, marker=self.marker_source,
                                      widths=[str(w) for w in core.D_K_VALUES],
                                      div=self.heatmaps_text), code=script("describe-heatmaps"))
        for source in (self.jacobian_labels_source, self.diagonal_source, self.marker_source):
            source.js_on_change("data", heatmaps)
        #: Browser programs to run once the document is shown (doc.js_on_event
        #: "document_ready"): the charts' text.
        # the diagonal cells' numbers only where they fit (assets/js/cell-numbers.js)
        cell_numbers = CustomJS(args=dict(fig=self.jacobian_fig, cells=self._cell_text,
                                          source=self.jacobian_labels_source),
                                code=script("cell-numbers"))
        self.jacobian_labels_source.js_on_change("data", cell_numbers)
        self.ready = [describe, heatmaps, cell_numbers]
        derived_glyph_looks(self.figures.values())
        self._sweep_key = None
        self._n = len(KEY_LABELS)               # the number of keys the charts show
        self._styled_for: str | None = None   # the rule the titles and outlines show

    @property
    def texts(self) -> list[Div]:
        """The Divs of text: lead, caption, explanation, readout and its detail."""
        return [self.lead, self.caption, self.explanation, self.readout, self.readout_detail]

    @property
    def figures(self) -> dict:
        return {
            "scaled-weights": self.scaled_fig,
            "unscaled-weights": self.unscaled_fig,
            "jacobian": self.jacobian_fig,
            "jacobian-diagonal": self.diagonal_fig,
            "gradient-spread": self.spread.fig,
        }

    @property
    def sources(self) -> list[ColumnDataSource]:
        return [self.scaled_source, self.unscaled_source, self.jacobian_source,
                self.jacobian_labels_source, self.diagonal_source, self.marker_source,
                self.spread.source, self.spread.this_draw_source]

    def _jacobian(self):
        n = len(KEY_LABELS)
        source = ColumnDataSource(data=dict(
            row=[KEY_LABELS[i] for i in range(n) for _ in range(n)],
            col=[KEY_LABELS[j] for _ in range(n) for j in range(n)],
            value=np.zeros(n * n)), name="jacobian-source")
        # the outlined diagonal cells, and the p(1 - p) printed in them
        diagonal = ColumnDataSource(data=dict(key=list(KEY_LABELS), text=[""] * n, ink=[INK] * n),
                                    name="jacobian-diagonal-cells")
        mapper = LinearColorMapper(palette=DIVERGING, low=-core.JACOBIAN_BOUND,
                                   high=core.JACOBIAN_BOUND)
        fig = figure(
            name="jacobian", title="Jacobian ∂pᵢ/∂uⱼ",
            x_range=FactorRange(*KEY_LABELS), y_range=FactorRange(*reversed(KEY_LABELS)),
            height=360, sizing_mode="stretch_width", min_width=280, max_width=460, tools="",
            x_axis_location="above",
        )
        cells = fig.rect(x="col", y="row", width=1, height=1, source=source,
                         fill_color={"field": "value", "transform": mapper}, line_color=None)
        fig.rect(x="key", y="key", width=1, height=1, source=diagonal, fill_alpha=0,
                 line_color=INK, line_width=1.5)
        self._cell_text = fig.text(
            x="key", y="key", text="text", source=diagonal, text_align="center",
            text_baseline="middle", text_font=value(FONT), text_font_size="11px",
            text_color="ink")
        fig.add_tools(HoverTool(renderers=[cells], tooltips=[
            ("∂p", "@row"), ("∂u", "@col"), ("J = ∂p/∂u", "@value{%.4g}")],
            formatters={"@value": "printf"}))
        bar = ColorBar(color_mapper=mapper, width=12, title="J",
                       major_label_text_font=FONT, title_text_font=FONT)
        fig.add_layout(bar, "right")
        fig.xaxis.axis_label = "softmax input uⱼ = zⱼ / T"
        fig.yaxis.axis_label = "weight pᵢ"
        fig.xaxis.formatter = key_labels(fig, "x")
        fig.yaxis.formatter = key_labels(fig, "y")
        style_figure(fig)
        fig.grid.grid_line_color = None
        fig.axis.axis_line_color = None
        fig.axis.major_tick_line_color = None
        return fig, source, diagonal

    def _diagonal(self):
        widths = [str(w) for w in core.D_K_VALUES]
        n, m = len(KEY_LABELS), len(widths)
        source = ColumnDataSource(data=dict(
            key=[KEY_LABELS[i] for i in range(n) for _ in range(m)],
            width=[widths[j] for _ in range(n) for j in range(m)],
            value=np.zeros(n * m)), name="jacobian-diagonal-source")
        marker = ColumnDataSource(data=dict(width=[str(core.D_K_VALUES[0])], y=[n / 2],
                                            h=[n + 0.2]), name="jacobian-diagonal-marker")
        mapper = LinearColorMapper(palette=SEQUENTIAL, low=0, high=core.JACOBIAN_BOUND)
        fig = figure(
            name="jacobian-diagonal", title="Diagonal pᵢ(1 − pᵢ)",
            x_range=FactorRange(*widths), y_range=FactorRange(*reversed(KEY_LABELS)),
            height=300, sizing_mode="stretch_width", min_width=280, tools="",
        )
        fig.rect(x="width", y="key", width=1, height=1, source=source,
                 fill_color={"field": "value", "transform": mapper}, line_color=None)
        fig.rect(x="width", y="y", width=1, height="h", source=marker, fill_alpha=0,
                 line_color="#00b3ff", line_width=3)
        fig.add_tools(HoverTool(tooltips=[
            ("key", "@key"), (core.DK, "@width"), ("p(1 − p)", "@value{custom}")],
            formatters={"@value": CustomJSHover(code=script("hover-positive"))},
            renderers=[fig.renderers[0]]))
        bar = ColorBar(color_mapper=mapper, width=12, title="p(1−p)",
                       major_label_text_font=FONT, title_text_font=FONT)
        fig.add_layout(bar, "right")
        fig.xaxis.axis_label = f"head width {core.DK} (log-spaced)"
        fig.yaxis.axis_label = "key"
        fig.yaxis.formatter = key_labels(fig, "y")
        fig.xaxis.major_label_orientation = SWEEP_LABEL_ANGLE
        # every width labelled where there is room, the powers of four where there is not
        fig.xaxis.formatter = CustomJSTickFormatter(
            args=dict(fig=fig, angle=SWEEP_LABEL_ANGLE, every=SWEEP_LABEL_EVERY),
            code=script("sweep-ticks"))
        style_figure(fig)
        subtitle(fig, f"as the head widens (outlined: this {core.DK})")
        fig.grid.grid_line_color = None
        fig.axis.axis_line_color = None
        return fig, source, marker

    def update(self, state: core.State, rule, fields: dict[str, str] | None = None) -> None:
        """Replace the sources' changing columns (and the active-rule styling) from ``state``,
        the model using ``rule`` (core.RULES, or scaled: True / False); ``fields``
        (prose.text.fields_of) are the numbers of the text."""
        rule = core.as_rule(rule)
        self._resize(len(state.scaled.probs))
        self.scaled_source.data.update(bar_data(state.paired(rule)))
        self.unscaled_source.data.update(bar_data(state.unscaled))
        active = state.active(rule)
        self.jacobian_source.data.update(jacobian_data(active))
        self.jacobian_labels_source.data.update(diagonal_label_data(active))
        # The sweep depends on seed, T and the rule, not on d_k: resend only when it changed.
        sweep_key = (state.seed, state.temperature, rule)
        if sweep_key != self._sweep_key:
            self.diagonal_source.data.update(sweep_data(state, rule))
            self._sweep_key = sweep_key
        self.marker_source.data = dict(width=[str(state.d_k)], y=[self._n / 2],
                                       h=[self._n + 0.2])
        self.spread.update(core.gradient_spread(state.d_k, state.temperature, self._n,
                                                state.align),
                           {r: v.log10_query_gradient for r, v in state.variants.items()})
        if rule != self._styled_for:
            self._style_variant(rule)
        if fields:
            self.update_text(fields)

    def _resize(self, n: int) -> None:
        """Give the charts ``n`` keys (k1 … kn): their sources' fixed columns and their
        ranges' factors. Nothing is sent when the number of keys is the one shown."""
        if n == self._n:
            return
        labels = [f"k{i + 1}" for i in range(n)]
        zeros = [0.0] * n
        for source, fig in ((self.scaled_source, self.scaled_fig),
                            (self.unscaled_source, self.unscaled_fig)):
            source.data = dict(key=labels, logit=zeros, weight=zeros, pq=zeros, gq=zeros,
                               alpha=[MUTED_ALPHA] * n, line=zeros, label=[""] * n,
                               align=["center"] * n, label_alpha=zeros)
            fig.x_range.factors = labels
        self.jacobian_source.data = dict(row=[a for a in labels for _ in labels],
                                         col=[b for _ in labels for b in labels],
                                         value=[0.0] * (n * n))
        self.jacobian_labels_source.data = dict(key=labels, text=[""] * n, ink=[INK] * n)
        self.jacobian_fig.x_range.factors = labels
        self.jacobian_fig.y_range.factors = labels[::-1]
        widths = [str(w) for w in core.D_K_VALUES]
        self.diagonal_source.data = dict(key=[a for a in labels for _ in widths],
                                         width=[w for _ in labels for w in widths],
                                         value=np.zeros(n * len(widths)))
        self.diagonal_fig.y_range.factors = labels[::-1]
        self.marker_source.data = dict(width=list(self.marker_source.data["width"]),
                                       y=[n / 2], h=[n + 0.2])
        self._sweep_key = None
        self._n = n

    def _style_variant(self, rule: str) -> None:
        """Titles and outlines that say which rule the model uses (the ÷d_k logits have no
        bar chart: neither is outlined). Set only when the rule changes: even setting an
        equal value costs Bokeh ~0.1 ms per property."""
        variant = WHICH[rule]
        self.jacobian_fig.title.text = f"Jacobian ∂pᵢ/∂uⱼ, {variant} logits"
        self.diagonal_fig.title.text = f"Diagonal pᵢ(1 − pᵢ), {variant} logits"
        pair = core.paired_rule(rule)
        self._scaled_glyph.fill_color = RULE_COLORS[pair]
        self._scaled_note.text = scaled_note(pair)
        for fig, base, on in ((self.scaled_fig, scaled_title(pair), rule == pair),
                              (self.unscaled_fig, "Unscaled", rule == "none")):
            fig.outline_line_color = MARK if on else None
            fig.outline_line_width = 3 if on else 1
            fig.title.text = base + ("  ◀ model uses this" if on else "")
        self._styled_for = rule

    def update_text(self, fields: dict[str, str]) -> None:
        """The texts' numbers (prose.text.fields_of), written once as HTML, then
        sent as values only."""
        if not self.explanation.text:   # first time: the whole HTML, numbers filled in
            active = html.escape(fields["active"], quote=True)
            self.lead.text = f"<p class='lead'>{fill(DRAW_LEAD, fields)}</p>"
            self.caption.text = fill(self._caption_html, fields)
            self.explanation.text = f"<div class='explanation'>{fill(EXPLANATION, fields)}</div>"
            self.readout.text = fill(readout_html(), fields).replace("@active", active)
            self.readout_detail.text = fill(readout_detail_html(), fields).replace(
                "@active", active)
        names, values = list(fields), list(fields.values())
        if self.text_source.data["field"] == names:
            # the same fields as before (the usual case): only the values go to the browser
            self.text_source.data.update(value=values)
        else:
            self.text_source.data = dict(field=names, value=values)
