"""Bokeh figures of the explorer, built once and updated in place (``Charts.update`` assigns new
``.data``), and :class:`View`: the whole explorer as Bokeh models, one layout for the served
page, the offline copy and the notebook. Stable names for tests: ``scaled-weights``,
``unscaled-weights``, ``jacobian``, ``jacobian-diagonal`` and ``<name>-source``."""

from __future__ import annotations

import functools
import html
import json
import re
from pathlib import Path

import numpy as np
from bokeh.layouts import column, row
from bokeh.models import (
    Button,
    ColorBar,
    ColumnDataSource,
    CustomJS,
    CustomJSHover,
    CustomJSTickFormatter,
    Div,
    FactorRange,
    HoverTool,
    InlineStyleSheet,
    Legend,
    LinearColorMapper,
    Range1d,
    Slider,
    FixedTicker,
    BasicTickFormatter,
    GlyphRenderer,
    RadioButtonGroup,
    TabPanel,
    Tabs,
    Title,
)
from bokeh.palettes import Inferno256
from bokeh.core.properties import value, without_property_validation
from bokeh.plotting import figure

from . import core
from .state import CONTROLS
from .text import (EXPLANATION, FORMULAS, RULE_LABELS, TRAINING_INTRO, budget_html,
                   caption_html, fill, gradient_html, header_html, saturation_html,
                   scaled_score_example, softmax_example, training_html,
                   training_status_html, variance_html, weight_label)

# Okabe-Ito colours: distinguishable with every common colour-vision deficiency.
SCALED_COLOR = "#0072B2"     # blue
UNSCALED_COLOR = "#D55E00"   # vermillion
LINEAR_COLOR = "#009E73"     # bluish green
MUTED_ALPHA = 0.55
#: Opacity of the light pill behind the "max weight" label (none behind the empty ones).
LABEL_ALPHA = 0.85
def lab_to_hex(lab: np.ndarray) -> list[str]:
    """CIELAB (D65) colours, rows of (L*, a*, b*), as sRGB hex strings (clipped to the gamut)."""
    lab = np.asarray(lab, dtype=float)
    fy = (lab[:, 0] + 16) / 116
    f = np.stack([fy + lab[:, 1] / 500, fy, fy - lab[:, 2] / 200], axis=1)
    xyz = np.where(f > 6 / 29, f ** 3, 3 * (6 / 29) ** 2 * (f - 4 / 29)) * [0.95047, 1.0, 1.08883]
    rgb = xyz @ np.array([[3.2406, -0.9689, 0.0557], [-1.5372, 1.8758, -0.2040],
                          [-0.4986, 0.0415, 1.0570]])
    rgb = np.clip(rgb, 0, 1)
    rgb = np.where(rgb <= 0.0031308, 12.92 * rgb, 1.055 * rgb ** (1 / 2.4) - 0.055)
    return ["#%02x%02x%02x" % tuple(row) for row in np.round(255 * rgb).astype(int)]


def diverging_palette(n: int = 255, low=(38.0, 18.0, -62.0), high=(38.0, 58.0, 44.0),
                      mid=(97.0, 0.0, 0.0)) -> list[str]:
    """A perceptually uniform diverging map: straight lines in CIELAB from ``low`` to the
    near-white ``mid`` and on to ``high``, so lightness (and chroma) change evenly with the
    value on both sides, blue below 0 and red above."""
    t = np.linspace(-1, 1, n)[:, None]
    lab = np.where(t < 0, np.array(mid) + (-t) * (np.array(low) - mid),
                   np.array(mid) + t * (np.array(high) - mid))
    return lab_to_hex(lab)


# Module-level values that reach a model are tuples and every column a source is given is a
# list of its own: Bokeh keeps a list as it is given (a source's column, a ticker's ticks, a
# palette) and extends or patches it in place when a browser streams into it, so a list shared
# by two sessions would carry one session's message into the other's page.

#: Diverging map for the Jacobian: blue < 0 < red, near-white at 0, lightness linear in |J|.
DIVERGING = tuple(diverging_palette())
#: Sequential map for p(1 - p): black ("cold", no gradient) to yellow ("warm").
SEQUENTIAL = Inferno256

KEY_LABELS = tuple(f"k{i + 1}" for i in range(core.N_KEYS))

_HERE = Path(__file__).resolve().parent
#: CSS and favicon: inside the package when installed from a wheel, the repository's
#: assets/ folder in a source checkout (editable install).
ASSETS = next((p for p in (_HERE / "assets", _HERE.parents[1] / "assets") if p.is_dir()),
              _HERE / "assets")


@functools.lru_cache(maxsize=1)
def page_css() -> str:
    """The page's style sheet (assets/style.css) as text."""
    return (ASSETS / "style.css").read_text(encoding="utf-8")


def script_globals(code: str) -> list[str]:
    """The names a browser program takes from outside, as its ``/* global a, b */`` line
    declares them (the names eslint checks it against): its CustomJS args, Bokeh's own
    (cb_obj; value for a hover; tick, ticks for a tick formatter) and AS."""
    found = re.search(r"^/\* global ([^*]*)\*/", code, re.MULTILINE)
    return [n.strip() for n in found.group(1).split(",") if n.strip()] if found else []


@functools.cache
def script(name: str) -> str:
    """The JavaScript of ``assets/js/<name>.js``: the code of a CustomJS, CustomJSHover or
    CustomJSTickFormatter, or a page's script; preceded by assets/js/helpers.js (which
    defines ``AS``) when its ``/* global */`` line names AS."""
    code = (ASSETS / "js" / f"{name}.js").read_text(encoding="utf-8")
    if "AS" in script_globals(code):
        code = (ASSETS / "js" / "helpers.js").read_text(encoding="utf-8") + "\n" + code
    return code


def position_formatter(labels: list[str]) -> CustomJSTickFormatter:
    """Show ``labels[position]`` for a slider over positions, formatted in the browser."""
    return CustomJSTickFormatter(code=f"return {json.dumps(labels)}[tick] ?? '';")
FONT = "'Inter', 'Segoe UI', 'Helvetica Neue', Arial, sans-serif"


def _style(fig) -> None:
    fig.toolbar.logo = None
    fig.toolbar_location = None
    fig.outline_line_color = None
    fig.background_fill_color = "#ffffff"
    fig.border_fill_color = "#ffffff"
    fig.title.text_font = FONT
    fig.title.text_font_size = "15px"
    fig.title.text_color = "#1f2933"
    fig.min_border_left = 10
    for axis in (fig.xaxis, fig.yaxis):
        axis.axis_label_text_font = FONT
        axis.axis_label_text_font_style = "normal"
        axis.axis_label_text_color = "#52606d"
        axis.major_label_text_font = FONT
        axis.major_label_text_color = "#52606d"
        axis.axis_line_color = "#9aa5b1"
        axis.major_tick_line_color = "#9aa5b1"
        axis.minor_tick_line_color = None
    fig.grid.grid_line_color = "#e4e7eb"


def derived_glyph_looks(figures) -> None:
    """Let BokehJS derive each glyph's looks when it is selected against and when it is muted
    ("auto") instead of keeping two more glyph models per renderer: nothing in these charts is
    selected (no selection tool) or muted (no legend click policy), so both looks are never
    shown. A session at the heaviest setting, every tab built, holds 691 models instead of 809
    and ~0.55 MiB less on the server (tracemalloc, five explorers)."""
    for fig in figures:
        for renderer in fig.renderers:
            if isinstance(renderer, GlyphRenderer):
                renderer.nonselection_glyph = "auto"
                renderer.muted_glyph = "auto"


def subtitle(fig, text: str) -> None:
    """A second, smaller line under the figure's title: what does not fit on the title's own
    line on a phone (static; the title carries what changes with the rule)."""
    fig.add_layout(Title(text=text, text_font=FONT, text_font_size="13px",
                         text_font_style="normal", text_color="#52606d"), "above")


def _bars(name: str, title: str, color: str, note: str) -> tuple:
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
                    fill_alpha="alpha", line_color="#1f2933", line_width="line")
    # dark on a light pill: readable over the light and the dark theme's backgrounds
    fig.text(x="key", y="weight", text="label", source=source, text_align="align",
             text_baseline="bottom", y_offset=-6, text_font=value(FONT), text_font_size="14px",
             text_font_style="bold", text_color="#1f2933", background_fill_color="#ffffff",
             background_fill_alpha="label_alpha", padding=2)
    fig.add_tools(HoverTool(renderers=[bars], tooltips=[
        ("key", "@key"), ("logit", "@logit{0.000}"), ("weight", "@weight{custom}"),
        ("p(1 − p)", "@pq{custom}"), ("‖∂p_i/∂q‖ (to the query)", "@gq{custom}"),
    ], formatters={"@weight": CustomJSHover(code=script("hover-weight")),
                   "@pq": CustomJSHover(code=script("hover-positive")),
                   "@gq": CustomJSHover(code=script("hover-positive"))},
        mode="mouse", point_policy="follow_mouse"))
    fig.yaxis.axis_label = "attention weight"
    fig.yaxis.ticker = [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    fig.yaxis.formatter.use_scientific = False
    fig.xaxis.axis_label = "key"
    _style(fig)
    subtitle(fig, note)
    fig.xgrid.grid_line_color = None
    return fig, source


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


#: Text colour of the numbers printed in the heatmap's cells (white on the darkest cells).
INK, INK_ON_DARK = "#1f2933", "#ffffff"


def cell_text(x: float) -> str:
    """A p(1 - p) printed in its heat-map cell: three decimals, "<0.001" for what would print
    as 0.000 (a softmax's weights are all positive, so none of these is 0, even where float64
    underflows to it)."""
    return "<0.001" if x < 0.0005 else f"{x:.3f}"


def jacobian_data(v: core.Variant) -> dict:
    """The n x n Jacobian heatmap's values, row-major (row i = p_i, column j = u_j = z_j / T)."""
    return dict(value=v.jacobian.ravel().tolist())


def diagonal_label_data(v: core.Variant) -> dict:
    """The diagonal p_i(1 - p_i) printed in the heatmap's diagonal cells (``text``), white
    (``ink``) on the darkest of them: one row per key, the off-diagonal cells hold no text."""
    text, ink = [], []
    for x in v.diagonal.tolist():
        text.append(cell_text(x))
        ink.append(INK_ON_DARK if x > 0.6 * core.JACOBIAN_BOUND else INK)
    return dict(text=text, ink=ink)


def sweep_data(state: core.State, rule) -> dict:
    """Values of the key x width heatmap of p(1 - p) under the active rule, row-major."""
    return dict(value=state.sweep(rule).ravel())


#: The gradient readout: a table with {field} slots (see text.fill); the variant the model
#: uses is highlighted through the table's data-active attribute ('@which' is filled in as a
#: plain attribute value, not a span).
READOUT = (
    "<div class='readout'><h3>How much gradient gets through</h3>"
    "<table data-active='@which'><thead><tr><th><span class='sr-only'>measure</span></th>"
    "<th class='s'>scaled</th><th class='u'>unscaled</th>"
    "<th class='l'>÷d<sub>k</sub></th></tr></thead><tbody>"
    "<tr><th>max weight</th><td class='s'>{s_max_w} on {s_top}</td>"
    "<td class='u'>{u_max_w} on {u_top}</td><td class='l'>{l_max_w} on {l_top}</td></tr>"
    "<tr><th>effective keys e<sup>H</sup></th><td class='s'>{s_eff}</td>"
    "<td class='u'>{u_eff}</td><td class='l'>{l_eff}</td></tr>"
    "<tr><th>largest p(1 − p)</th><td class='s'>{s_diag}</td><td class='u'>{u_diag}</td>"
    "<td class='l'>{l_diag}</td></tr>"
    "<tr><th title='the softmax Jacobian with respect to its own input u = z/T (the heat "
    "map)'>‖J‖<sub>F</sub> = ‖∂p/∂u‖<sub>F</sub></th><td class='s'>{s_frob}</td>"
    "<td class='u'>{u_frob}</td><td class='l'>{l_frob}</td></tr>"
    "<tr class='to-query'><th title='∂p/∂q = J K / (s T), s = √d_k scaled, 1 unscaled, d_k "
    "under ÷d_k: the gradient that reaches the query and W_Q'>‖∂p/∂q‖<sub>F</sub>, to the "
    "query</th><td class='s'>{s_grad}</td><td class='u'>{u_grad}</td>"
    "<td class='l'>{l_grad}</td></tr>"
    "</tbody></table>"
    "<p>p(1 − p) peaks at ¼ when a weight is ½ and tends to 0 as it nears 0 or 1; "
    "the highlighted column is the rule the model uses. "
    "J is the softmax's Jacobian with respect to its own input u = z/T, the same for any "
    "logits that give the same weights; ∂p/∂q = J K/(s T) is what reaches the query "
    "(s = √d_k scaled, 1 unscaled, d_k under ÷d_k), so it carries the 1/s and the 1/T.</p>"
    "</div>"
)


#: The bar charts as text for screen readers (assets/js/describe-bars.js fills it): visually
#: hidden, read in page order right after the charts.
BARS_TEXT = (
    "<div class='sr-only'><p data-now></p>"
    "<table><caption>The two bar charts as a table: each key's logit, attention weight and "
    "p(1 − p), divided by √d<sub>k</sub> and raw</caption><thead><tr><th scope='col'>key</th>"
    "<th scope='col'>logit ÷√d<sub>k</sub></th><th scope='col'>weight, scaled</th>"
    "<th scope='col'>p(1 − p), scaled</th><th scope='col'>logit, raw</th>"
    "<th scope='col'>weight, unscaled</th><th scope='col'>p(1 − p), unscaled</th></tr></thead>"
    "<tbody data-bars></tbody></table><p aria-live='polite' data-summary></p></div>"
)


#: The heat maps as text for screen readers (assets/js/describe-heatmaps.js fills it).
HEATMAPS_TEXT = (
    "<div class='sr-only'><p data-diagonal></p>"
    "<table><caption>The largest p(1 − p) at every head width, as the heat map of the "
    "diagonal shows it</caption><thead><tr><th scope='col'>d<sub>k</sub></th>"
    "<th scope='col'>largest p(1 − p)</th><th scope='col'>on key</th></tr></thead>"
    "<tbody data-sweep></tbody></table></div>"
)


class Charts:
    """The explorer's four Bokeh figures and their data sources, created once."""

    def __init__(self, caption_extra: str = "") -> None:
        #: The caption, the live explanation and the gradient readout: Divs whose HTML is
        #: written once; later changes send only ``text_source`` (field, value) and the browser
        #: fills the spans. ``caption_extra`` ends the caption (plain text).
        self.caption = Div(text="", sizing_mode="stretch_width", name="caption")
        self.explanation = Div(text="", sizing_mode="stretch_width", name="explanation")
        self.readout = Div(text="", sizing_mode="stretch_width", name="readout", min_width=320)
        self._caption_html = caption_html(caption_extra)
        self.text_source = ColumnDataSource(data=dict(field=[], value=[]), name="text-source")
        # so that it is part of the document with any of the Divs (an embed may hide the text)
        for div in self.texts:
            div.tags = [self.text_source]
        self.text_source.js_on_change("data", CustomJS(
            args=dict(source=self.text_source, divs=self.texts), code=script("fill-spans")))
        self.scaled_fig, self.scaled_source = _bars(
            "scaled-weights", "Scaled by 1/√d_k", SCALED_COLOR,
            "logits q·k/√d_k: unit variance at every d_k")
        self.unscaled_fig, self.unscaled_source = _bars(
            "unscaled-weights", "Unscaled", UNSCALED_COLOR,
            "logits q·k: their spread grows as √d_k")
        self.jacobian_fig, self.jacobian_source, self.jacobian_labels_source = self._jacobian()
        self.bars_text = Div(text=BARS_TEXT, name="bars-text", disable_math=True,
                             sizing_mode="stretch_width", margin=0)
        describe = CustomJS(args=dict(scaled=self.scaled_source, unscaled=self.unscaled_source,
                                      div=self.bars_text), code=script("describe-bars"))
        for source in (self.scaled_source, self.unscaled_source):
            source.js_on_change("data", describe)
        self.diagonal_fig, self.diagonal_source, self.marker_source = self._diagonal()
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
        self.ready = [describe, heatmaps]
        derived_glyph_looks(self.figures.values())
        self._sweep_key = None
        self._n = len(KEY_LABELS)               # the number of keys the charts show
        self._styled_for: str | None = None   # the rule the titles and outlines show

    @property
    def texts(self) -> list[Div]:
        """The Divs of text: caption, explanation, readout."""
        return [self.caption, self.explanation, self.readout]

    @property
    def figures(self) -> dict:
        return {
            "scaled-weights": self.scaled_fig,
            "unscaled-weights": self.unscaled_fig,
            "jacobian": self.jacobian_fig,
            "jacobian-diagonal": self.diagonal_fig,
        }

    @property
    def sources(self) -> list[ColumnDataSource]:
        return [self.scaled_source, self.unscaled_source, self.jacobian_source,
                self.jacobian_labels_source, self.diagonal_source, self.marker_source]

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
            name="jacobian", title="Jacobian ∂p_i/∂u_j",
            x_range=FactorRange(*KEY_LABELS), y_range=FactorRange(*reversed(KEY_LABELS)),
            height=360, sizing_mode="stretch_width", min_width=300, max_width=460, tools="",
            x_axis_location="above",
        )
        cells = fig.rect(x="col", y="row", width=1, height=1, source=source,
                         fill_color={"field": "value", "transform": mapper}, line_color=None)
        fig.rect(x="key", y="key", width=1, height=1, source=diagonal, fill_alpha=0,
                 line_color=INK, line_width=1.5)
        self._cell_text = fig.text(x="key", y="key", text="text", source=diagonal, text_align="center",
                 text_baseline="middle", text_font=value(FONT), text_font_size="11px",
                 text_color="ink")
        fig.add_tools(HoverTool(renderers=[cells], tooltips=[
            ("∂p", "@row"), ("∂u", "@col"), ("J = ∂p/∂u", "@value{%.4g}")],
            formatters={"@value": "printf"}))
        bar = ColorBar(color_mapper=mapper, width=12, title="J",
                       major_label_text_font=FONT, title_text_font=FONT)
        fig.add_layout(bar, "right")
        fig.xaxis.axis_label = "softmax input u_j = z_j / T"
        fig.yaxis.axis_label = "weight p_i"
        _style(fig)
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
            name="jacobian-diagonal", title="Diagonal p_i(1 − p_i)",
            x_range=FactorRange(*widths), y_range=FactorRange(*reversed(KEY_LABELS)),
            height=300, sizing_mode="stretch_width", min_width=300, tools="",
        )
        fig.rect(x="width", y="key", width=1, height=1, source=source,
                 fill_color={"field": "value", "transform": mapper}, line_color=None)
        fig.rect(x="width", y="y", width=1, height="h", source=marker, fill_alpha=0,
                 line_color="#00b3ff", line_width=3)
        fig.add_tools(HoverTool(tooltips=[
            ("key", "@key"), ("d_k", "@width"), ("p(1 − p)", "@value{custom}")],
            formatters={"@value": CustomJSHover(code=script("hover-positive"))},
            renderers=[fig.renderers[0]]))
        bar = ColorBar(color_mapper=mapper, width=12, title="p(1−p)",
                       major_label_text_font=FONT, title_text_font=FONT)
        fig.add_layout(bar, "right")
        fig.xaxis.axis_label = "head width d_k (log-spaced)"
        fig.yaxis.axis_label = "key"
        fig.xaxis.major_label_orientation = SWEEP_LABEL_ANGLE
        # every width labelled where there is room, the powers of four where there is not
        fig.xaxis.formatter = CustomJSTickFormatter(
            args=dict(fig=fig, angle=SWEEP_LABEL_ANGLE, every=SWEEP_LABEL_EVERY),
            code=script("sweep-ticks"))
        _style(fig)
        subtitle(fig, "as the head widens (outlined: this d_k)")
        fig.grid.grid_line_color = None
        fig.axis.axis_line_color = None
        return fig, source, marker

    @without_property_validation   # the values are ours and known good; saves ~60% of the time
    def update(self, state: core.State, rule, fields: dict[str, str] | None = None) -> None:
        """Replace the sources' changing columns (and the active-rule styling) from ``state``,
        the model using ``rule`` (core.RULES, or scaled: True / False); ``fields``
        (state.ExplorerState.text_fields) are the numbers of the text."""
        rule = core.as_rule(rule)
        self._resize(len(state.scaled.probs))
        self.scaled_source.data.update(bar_data(state.scaled))
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
        crowded = n > 16         # every 8th key labelled, cells too small for their numbers
        shown = {k for i, k in enumerate(labels) if not crowded or i == 0 or (i + 1) % 8 == 0}
        hidden_labels = {k: "" for k in labels if k not in shown}
        for axis in (self.scaled_fig.xaxis, self.unscaled_fig.xaxis, self.jacobian_fig.xaxis,
                     self.jacobian_fig.yaxis, self.diagonal_fig.yaxis):
            axis.major_label_overrides = hidden_labels
        self._cell_text.visible = not crowded
        self._sweep_key = None
        self._n = n

    def _style_variant(self, rule: str) -> None:
        """Titles and outlines that say which rule the model uses (the ÷d_k logits have no
        bar chart: neither is outlined). Set only when the rule changes: even setting an
        equal value costs Bokeh ~0.1 ms per property."""
        variant = {"sqrt": "scaled", "none": "unscaled", "linear": "÷d_k"}[rule]
        self.jacobian_fig.title.text = f"Jacobian ∂p_i/∂u_j, {variant} logits"
        self.diagonal_fig.title.text = f"Diagonal p_i(1 − p_i), {variant} logits"
        for fig, on in ((self.scaled_fig, rule == "sqrt"), (self.unscaled_fig, rule == "none")):
            fig.outline_line_color = "#1f2933" if on else None
            fig.outline_line_width = 3 if on else 1
            base = fig.title.text.removesuffix("  ◀ model uses this")
            fig.title.text = base + ("  ◀ model uses this" if on else "")
        self._styled_for = rule

    def update_text(self, fields: dict[str, str]) -> None:
        """The texts' numbers (state.ExplorerState.text_fields), written once as HTML, then
        sent as values only."""
        if not self.explanation.text:   # first time: the whole HTML, numbers filled in
            self.caption.text = fill(self._caption_html, fields)
            self.explanation.text = f"<div class='explanation'>{fill(EXPLANATION, fields)}</div>"
            self.readout.text = fill(READOUT, fields).replace(
                "@which", html.escape(fields["which"], quote=True))
        names, values = list(fields), list(fields.values())
        if self.text_source.data["field"] == names:
            # the same fields as before (the usual case): only the values go to the browser
            self.text_source.data.update(value=values)
        else:
            self.text_source.data = dict(field=names, value=values)


#: For a Bokeh Div whose content should span its width (Bokeh sets ``display: inline-block``
#: on the element that holds the HTML).
FULL_WIDTH_CSS = ":host > .bk-clearfix { display: block !important; }"


def position_slider(title: str, labels: list[str], position: int, name: str,
                    stylesheets=()) -> Slider:
    """A slider over positions 0 … len(labels) - 1 that shows ``labels[position]``."""
    return Slider(title=title, start=0, end=len(labels) - 1, step=1, value=position, name=name,
                  format=position_formatter(labels), sizing_mode="stretch_width",
                  margin=(5, 10), stylesheets=list(stylesheets))


#: The page's grid: controls and notes in a 300 px column beside the charts, or, on a screen
#: narrower than 900 px, the controls above the charts and the notes below them. Rows of
#: charts wrap on narrow screens.
LAYOUT_CSS = """
:host { display: grid !important; grid-template-columns: 300px minmax(0, 1fr);
        grid-template-rows: auto 1fr; grid-template-areas: "controls main" "notes main"; }
:host > .app-sidebar { grid-area: controls; }
:host > .app-main { grid-area: main; min-width: 0; }
:host > .app-notes { grid-area: notes; }
@media (max-width: 899px) {
  :host { grid-template-columns: minmax(0, 1fr); grid-template-rows: auto;
          grid-template-areas: "controls" "main" "notes"; }
}
@media print {
  :host { grid-template-columns: minmax(0, 1fr); grid-template-areas: "main"; }
  :host > .app-sidebar, :host > .app-notes { display: none !important; }
}
"""
#: The controls in two columns on a tablet, where they sit above the charts.
SIDEBAR_CSS = """
@media (min-width: 600px) and (max-width: 899px) {
  :host { display: grid !important; grid-template-columns: 1fr 1fr; column-gap: 12px;
          align-items: end; }
}
"""
#: Parts a printed page leaves out (with the controls): the download buttons.
NO_PRINT_CSS = " @media print { :host { display: none !important; } }"
#: For the rows of charts: wrap onto the next line where the screen is too narrow for both.
WRAP_CSS = ":host { flex-wrap: wrap !important; }"
#: A column as wide as its place and never wider, whatever its texts hold: a column that
#: follows its widest content resizes every chart in it when a number grows.
FIT_CSS = ":host { min-width: 0; max-width: 100%; }"

#: Bokeh's primary button at WCAG AA contrast (white on #1f5f99, 6.7:1), and a focus ring
#: that shows on every control reached by keyboard.
BUTTON_CSS = """
:host { --color: var(--as-theme-ink, #18191D); --background-color: var(--as-theme-panel, #fff);
        --border-color: var(--as-theme-line, #BBBBBD); --hover-color: var(--as-theme-card, #F9F9F9);
        --surface-background-color: var(--as-theme-card, #EBEBEB);
        --inactive-bg: var(--as-theme-card, #EBEBEB); --active-bg: var(--as-theme-highlight, #C3DBEB);
        color: var(--color); }
.bk-btn-default { color: var(--color); background-color: var(--background-color);
                  border-color: var(--border-color); }
.bk-btn-default:hover, .bk-btn-default.bk-active { background-color: var(--active-bg); }
.bk-btn-primary { background-color: #1f5f99; border-color: #1a4f80; }
.bk-btn-primary:hover, .bk-btn-primary.bk-active { background-color: #1a4f80; }
:focus-visible { outline: 3px solid #ffbf47 !important; outline-offset: 2px; }
"""

#: The tabs' titles wrap onto a second line on a narrow screen instead of running off it.
TABS_CSS = (":host { --color: var(--as-theme-ink, #18191D); color: var(--color); "
            "--background-color: var(--as-theme-panel, #fff); } "
            ".bk-tab { color: var(--color); } "
            ".bk-headers-wrapper { flex-wrap: wrap; } .bk-headers { flex-wrap: wrap; } "
            ".bk-tab { white-space: nowrap; } "
            ".bk-tab:focus-visible { outline: 3px solid #ffbf47; outline-offset: -3px; }")


def wrapping_row(*children):
    """A row of charts that wraps onto the next line where the screen is too narrow."""
    return row(*children, sizing_mode="stretch_width",
               stylesheets=[InlineStyleSheet(css=WRAP_CSS)])


#: The model width the head-budget tab splits into heads.
BUDGET_WIDTH = 512
#: Steps of a training run.
TRAINING_STEPS = 300
#: The one draw's CSV columns per bar chart: (source column, header before _scaled or
#: _unscaled), after the key.
DRAW_COLUMNS = (("logit", "logit"), ("weight", "weight"), ("pq", "p_1_minus_p"),
                ("gq", "grad_to_query"))
#: What each tab's downloads are named after: the controls its charts depend on, in order.
DOWNLOAD_NAMES = {
    "draw": ("d_k", "temperature", "seed", "keys", "rule"),
    "variance": ("d_k",),
    "saturation": ("d_k", "temperature", "seed", "keys", "align", "rule"),
    "gradient": ("d_k", "temperature", "seed", "keys", "align", "rule"),
    "training": ("d_k", "temperature", "seed", "keys"),
    "budget": ("temperature", "keys", "align", "rule"),
}

#: The explorer's tabs, in the order of the argument: (key, title).
TABS = (("draw", "One draw"), ("variance", "1 Variance"), ("saturation", "2 Saturation"),
        ("gradient", "3 Gradient"), ("training", "4 Training"), ("budget", "5 Heads"))


class View:
    """The whole explorer as Bokeh models, built once: the figures and texts of
    :class:`Charts`, the controls, the title bar, the guide. The served page, the offline copy
    and the notebook all show this layout; each adds only its way of updating it (Python
    callbacks on the server, one JavaScript program offline).

    ``values`` are the controls' starting values (``state.CONTROLS``: a slider over the
    positions of each ``choice`` row, buttons for each ``option`` row, in the table's order; a
    ``count`` row, the seed, is shown by ``seed_div`` and changed by the buttons).
    ``hidden`` leaves parts out (``state.VIEW_PARTS``), ``notice`` is HTML shown above the
    charts, ``buttons`` names the buttons the runtime wires (``resample``, ``fig3``, ``copy``);
    ``argument=False`` leaves out the tabs of the argument (the offline copy); ``presets``
    is HTML shown under the guide; ``controls`` names the controls to show (all by default).
    """

    def __init__(self, *, values: dict, subtitle: str = "", guide: str = "",
                 caption_extra: str = "", hidden=frozenset(), notice: str = "",
                 buttons=("resample", "fig3", "copy"), argument: bool = True,
                 presets: str = "", controls=None) -> None:
        css = [InlineStyleSheet(css=page_css())]
        wide = [*css, InlineStyleSheet(css=FULL_WIDTH_CSS)]
        self.charts = c = Charts(caption_extra=caption_extra)
        for div in c.texts:
            div.disable_math = True
            div.stylesheets = css
        #: The widget of each choice and option control, by the control's name.
        self.widgets: dict = {}
        self._controls_css = controls_css = [InlineStyleSheet(css=BUTTON_CSS)]
        rows, argument_rows = [], []
        for control in CONTROLS:
            if (control.group == "argument" and not argument) or (
                    controls is not None and control.name not in controls):
                continue
            if control.kind == "choice":
                widget = position_slider(control.label, [control.show(v) for v in control.values],
                                         control.values.index(values[control.name]),
                                         control.name, controls_css)
                shown = widget
            elif control.kind == "option":
                widget = RadioButtonGroup(
                    labels=[control.show(v) for v in control.values], name=control.name,
                    active=control.values.index(values[control.name]), margin=(5, 10),
                    sizing_mode="stretch_width", stylesheets=controls_css)
                shown = column(Div(text=f"{control.label}", disable_math=True,
                                   margin=(5, 10, 0, 10), stylesheets=css,
                                   css_classes=["control-label"]), widget,
                               sizing_mode="stretch_width")
            else:
                continue
            (argument_rows if control.group == "argument" else rows).append(shown)
            self.widgets[control.name] = widget
        if argument_rows:
            argument_rows.insert(0, Div(
                text="<h4 class='group'>Over many draws</h4><small>The alignment sets the "
                     "One draw, Saturation, Gradient and Heads tabs; the Variance and Training "
                     "tabs keep the keys independent of the query.</small>", stylesheets=css,
                disable_math=True, margin=(12, 10, 0, 10),
                sizing_mode="stretch_width"))
        self.seed_div = Div(text="", stylesheets=css, disable_math=True, name="seed",
                            margin=(4, 10))
        labels = {"resample": ("Resample q and k", "primary"),
                  "fig3": ("Reset to Fig. 3", "default"),
                  "copy": ("Copy link to this view", "default")}
        self.buttons = {key: Button(label=labels[key][0], button_type=labels[key][1],
                                    name=key, sizing_mode="stretch_width", margin=(5, 10),
                                    stylesheets=controls_css)
                        for key in buttons}
        guide_div = Div(text=guide, name="guide", stylesheets=css, disable_math=True,
                        sizing_mode="stretch_width", margin=(5, 10))
        #: The controls, and the notes under them (guide, presets): beside the charts on a
        #: wide screen, above and below them on a narrow one (assets/style.css, LAYOUT_CSS).
        self.sidebar = column(
            *rows, self.seed_div, *self.buttons.values(), *argument_rows,
            sizing_mode="stretch_width", css_classes=["app-sidebar"],
            stylesheets=[*css, InlineStyleSheet(css=SIDEBAR_CSS)], margin=0)
        #: Light, dark or the system's choice (assets/js/theme.js; URL key theme).
        self.theme_buttons = RadioButtonGroup(labels=["auto", "light", "dark"], active=0,
                                              name="theme", margin=(5, 10, 10, 10),
                                              stylesheets=controls_css)
        theme = CustomJS(args=dict(buttons=self.theme_buttons), code=script("theme"))
        self.theme_buttons.js_on_change("active", theme)
        self.notes = column(
            guide_div, Div(text="Theme", disable_math=True, margin=(5, 10, 0, 10),
                           stylesheets=css, css_classes=["control-label"]),
            self.theme_buttons,
            *([Div(text=presets, name="presets", stylesheets=css, disable_math=True,
                   sizing_mode="stretch_width", margin=(5, 10))] if presets else []),
            sizing_mode="stretch_width", css_classes=["app-notes"], stylesheets=css, margin=0)
        formulas = Div(text=FORMULAS, stylesheets=wide, disable_math=True,
                       sizing_mode="stretch_width")
        text = [] if "text" in hidden else [c.caption, formulas, c.explanation]
        notes = [Div(text=notice, stylesheets=css, disable_math=True, name="notice",
                     sizing_mode="stretch_width")] if notice else []
        c.bars_text.stylesheets = css
        c.heatmaps_text.stylesheets = css
        #: The choice and option controls as the download names show them: name -> [widget,
        #: the value at each position]; the others are named at their defaults.
        self._named = {ctl.name: [w, [ctl.show(v) for v in ctl.values] if ctl.kind == "choice"
                                  else list(ctl.values)]
                       for ctl in CONTROLS if (w := self.widgets.get(ctl.name)) is not None
                       and ctl.kind in ("choice", "option")}
        self._defaults = {ctl.name: ctl.show(ctl.default) for ctl in CONTROLS
                          if ctl.kind == "choice" and ctl.name not in self._named}
        #: Each tab's buttons to take it away: PNG, SVG and CSV (assets/js/download.js).
        self.downloads = {"draw": self._download_row("draw", [c.scaled_fig, c.unscaled_fig], [
            (src, [["key", "key"]] + [[k, f"{head}_{side}"] for k, head in DRAW_COLUMNS])
            for src, side in ((c.scaled_source, "scaled"), (c.unscaled_source, "unscaled"))],
            keyed=c.scaled_source)}
        downloads = self.downloads["draw"]
        one_draw = column(
            wrapping_row(c.scaled_fig, c.unscaled_fig), c.bars_text,
            downloads,
            *text,
            wrapping_row(c.jacobian_fig, c.readout),
            c.diagonal_fig, c.heatmaps_text, sizing_mode="stretch_width",
            stylesheets=[InlineStyleSheet(css=FIT_CSS)])
        #: The argument over many draws and through training, one tab per step in the
        #: order of the argument (:data:`TABS`): built by :meth:`build_argument` when first
        #: asked for, so that a page whose reader stays on the first tab costs a quarter of
        #: the models. Until then each tab holds a short "drawing" note.
        self.argument: Argument | None = None
        self._css, self._hide_text = css, "text" in hidden
        self.tabs = Tabs(tabs=[TabPanel(title=title, child=one_draw if key == "draw" else Div(
            text="<p class='status'>Drawing…</p>", stylesheets=css, disable_math=True))
            for key, title in TABS], sizing_mode="stretch_width", name="sections",
            stylesheets=[InlineStyleSheet(css=TABS_CSS)],
            active=[key for key, _ in TABS].index(values.get("tab", "draw")) if argument else 0)
        if argument:
            self.widgets["tab"] = self.tabs
        self.main = column(
            *notes, self.tabs if argument else one_draw,
            sizing_mode="stretch_width", css_classes=["app-main"], stylesheets=css,
            margin=(10, 12))
        body = row(*([] if "controls" in hidden else [self.sidebar]), self.main,
                   *([] if "controls" in hidden else [self.notes]),
                   sizing_mode="stretch_width", margin=0, css_classes=["app-body"],
                   stylesheets=[InlineStyleSheet(css=LAYOUT_CSS)])
        header = [] if "header" in hidden else [
            Div(text=header_html(subtitle), stylesheets=wide, disable_math=True,
                sizing_mode="stretch_width", margin=0)]
        #: The page: title bar over the controls (left) and the charts and text.
        self.root = column(*header, body, sizing_mode="stretch_width", margin=0)
        sliders = [[w, [c.show(v) for v in c.values]] for c in CONTROLS
                   if c.kind == "choice" and (w := self.widgets.get(c.name)) is not None]
        a11y = CustomJS(args=dict(
            sliders=sliders, tabs=self.tabs if argument else None,
            regions=[[self.main, "main", "Charts and explanation"],
                     *([[self.sidebar, "region", "Controls"], [self.notes, "region", "Guide"]]
                       if "controls" not in hidden else [])]), code=script("a11y"))
        for widget, _labels in sliders:
            widget.js_on_change("value", a11y)
        if argument:
            self.tabs.js_on_change("active", a11y)
            self.tabs.js_on_change("tabs", a11y)
        #: Browser programs to run once the document is shown (doc.js_on_event
        #: "document_ready"): names and keys for the controls, the bars' text.
        self.ready = [theme, a11y, *c.ready]

    def _download_row(self, tab: str, figures: list, tables: list, keyed=None, run=None):
        """A row of three buttons that take the tab ``tab`` away (assets/js/download.js):
        its ``figures`` as PNG and SVG, the columns of ``tables`` ((source, [[column,
        header], ...]) in order) as CSV, named after the controls of :data:`DOWNLOAD_NAMES`;
        ``keyed``, a source with a "key" column, gives the number of keys where no control
        does; ``run``, the training source, names the file after its run's setting (its
        tags)."""
        buttons = {}
        for kind in ("png", "svg", "csv"):
            name = f"download-{kind}" if tab == "draw" else f"download-{kind}-{tab}"
            buttons[kind] = button = Button(label=f"Download {kind.upper()}", name=name,
                                            margin=(5, 10), width=140,
                                            stylesheets=self._controls_css)
            button.js_on_event("button_click", CustomJS(args=dict(
                kind=kind, tab=tab, parts=list(DOWNLOAD_NAMES[tab]),
                controls={k: v for k, v in self._named.items() if k in DOWNLOAD_NAMES[tab]},
                defaults=self._defaults, text_source=self.charts.text_source,
                figures=figures, tables=[[src, cols] for src, cols in tables], keyed=keyed,
                run=run), code=script("download")))
        return row(*buttons.values(), css_classes=["no-print"], name=f"downloads-{tab}",
                   stylesheets=[InlineStyleSheet(css=WRAP_CSS + NO_PRINT_CSS)])

    def build_argument(self, wire=None) -> bool:
        """Build the argument's figures, texts and Train button and put them in their tabs;
        False if they were built already. ``wire(view)`` runs before they join the document:
        an event callback added to a model the browser already has would not reach it."""
        if self.argument is not None:
            return False
        css = self._css
        self.argument = a = Argument()
        self.section_texts = t = {
            key: Div(text="", name=f"{key}-text", stylesheets=css, disable_math=True,
                     sizing_mode="stretch_width", margin=(5, 10), css_classes=["section-text"])
            for key, _title in TABS[1:]}
        self.train_button = Button(label="Train", button_type="primary", name="train",
                                   stylesheets=self._controls_css,
                                   width=160, margin=(5, 10))
        self.training_status = Div(text="", name="training-status", stylesheets=css,
                                   disable_math=True, margin=(10, 10))

        def section(key, *body):
            return column(*([] if self._hide_text else [t[key]]), *body,
                          sizing_mode="stretch_width")

        f = a.figures
        wide_row = wrapping_row

        def take_away(key):
            return self._download_row(
                key, [f[n] for n in a.tab_figures[key]], a.tables[key],
                run=a.training_source if key == "training" else None)

        children = {
            "variance": section("variance", wide_row(f["logit-histogram"],
                                                     f["logit-histogram-scaled"]),
                                f["logit-std"], take_away("variance")),
            "saturation": section("saturation", wide_row(f["saturation-curves"],
                                                         f["saturation-eff-keys"]),
                                  take_away("saturation")),
            "gradient": section("gradient", f["saturation-gradient"], take_away("gradient")),
            "training": section("training", wrapping_row(self.train_button, self.training_status),
                                wide_row(f["training-loss"], f["training-gradients"]),
                                take_away("training")),
            "budget": section("budget", wide_row(f["head-budget"], f["head-budget-gradient"]),
                              take_away("budget")),
        }
        a.update_std(core.logit_std_curve())
        t["training"].text = TRAINING_INTRO
        if wire is not None:
            wire(self)
        # new panels, not new children: BokehJS redraws the tabs when their list changes,
        # not when a panel's child does
        self.tabs.tabs = [panel if key not in children else TabPanel(title=title,
                                                                      child=children[key])
                          for (key, title), panel in zip(TABS, self.tabs.tabs)]
        return True

    def draw_tab(self, key: str, d_k: int, temperature: float, seed: int, n_keys: int,
                 align: float, rule: str) -> None:
        """Draw the argument's tab ``key`` (any but the one draw and the training run) at a
        setting, from core: its charts, its text and the lines of ``rule`` highlighted."""
        a, texts, t, n, rho = self.argument, self.section_texts, temperature, n_keys, align
        a.highlight(rule)
        if key == "variance":
            dist = core.logit_distribution(d_k)
            a.update_logits(dist)
            a.show_width(d_k)
            texts[key].text = variance_html(d_k, dist, core.logit_std_curve(),
                                            core.LOGIT_DRAWS) + scaled_score_example()
        elif key in ("saturation", "gradient"):
            curves = core.saturation_curves(t, n, rho)
            draw = core.draw_metrics(d_k, t, seed, n, rho)
            a.update_curves(curves, d_k, draw)
            if key == "saturation":
                texts[key].text = (saturation_html(d_k, t, n, rho, curves, draw,
                                                   core.CURVE_DRAWS) + softmax_example())
            else:
                texts[key].text = gradient_html(d_k, t, n, rho, curves, draw, core.CURVE_DRAWS)
        elif key == "budget":
            budget = core.head_budget(BUDGET_WIDTH, t, n, rho)
            a.update_budget(budget)
            texts[key].text = budget_html(budget, BUDGET_WIDTH, t, n, rho)

    def show_training(self, runs: dict, d_k: int, temperature: float, n_keys: int) -> bool:
        """The training runs so far (rule -> core.TrainingRun) on their tab: the charts, the
        status beside the Train button and, once every run is done, what they showed. True
        when they are done."""
        self.argument.show_training(runs)
        done = all(run.done for run in runs.values())
        step = min(run.steps_done for run in runs.values())
        self.training_status.text = training_status_html(step, TRAINING_STEPS, d_k,
                                                         temperature, n_keys, done)
        if done:
            self.section_texts["training"].text = training_html(runs, d_k, temperature, n_keys)
        return done

    def show_seed(self, seed: int) -> None:
        text = f"<span class='seed'>seed <code>{int(seed)}</code></span>"
        if self.seed_div.text != text:
            self.seed_div.text = text


# ---- the argument across many draws and through training ---------------------------------

#: A colour per scaling rule (Okabe-Ito), and a dash per rule so that no line is told from
#: another by colour alone.
RULE_COLORS = {"none": UNSCALED_COLOR, "sqrt": SCALED_COLOR, "linear": LINEAR_COLOR}
#: (Bokeh's "solid", "dashed" and "dotdash" as tuples: by name, every line would hold one of
#: Bokeh's module-level lists.)
RULE_DASH = {"none": (), "sqrt": (6,), "linear": (2, 4, 6, 4)}
#: The dotted line of the current width and the dashed √d_k (Bokeh's "dotted", "dashed").
DOTTED, DASHED = (2, 4), (6,)
RULE_MARKER = {"none": "circle", "sqrt": "square", "linear": "triangle"}


def _log_figure(name: str, title: str, x_label: str, y_label: str, *, y_log=False,
                x_range=None, height=260) -> figure:
    fig = figure(name=name, title=title, height=height, sizing_mode="stretch_width",
                 min_width=260, tools="", x_axis_type="log", y_axis_type="log" if y_log else "linear",
                 **({"x_range": x_range} if x_range is not None else {}))
    fig.xaxis.axis_label = x_label
    fig.yaxis.axis_label = y_label
    fig.xaxis.ticker = FixedTicker(ticks=WIDTH_TICKS)
    fig.xaxis.formatter = BasicTickFormatter(use_scientific=False)
    _style(fig)
    return fig


#: Ticks of the d_k axes (log): the powers of four.
WIDTH_TICKS = (1, 4, 16, 64, 256, 1024, 4096)


#: The lowest gradient the log-scale charts draw (the texts print "<1e-300" there).
GRAD_FLOOR = 1e-300
#: The most decades a log axis spans: BokehJS's log scale divides the axis's end by its start,
#: which overflows float64 beyond ~308 decades (a data range's padding below 1e-300 would).
LOG_DECADES = 304


def fit_log_range(rng: Range1d, *values) -> None:
    """Span the log axis ``rng`` over the positive ``values`` with a little room on each
    side, over at most :data:`LOG_DECADES` decades."""
    v = np.concatenate([np.ravel(np.asarray(x, float)) for x in values])
    v = v[v > 0]
    if not len(v):
        return
    lo, hi = float(np.log10(v.min())), float(np.log10(v.max()))
    pad = min(max(0.06 * (hi - lo), 0.25), max((LOG_DECADES - (hi - lo)) / 2, 0.0))
    start, end = 10.0 ** (lo - pad), 10.0 ** (hi + pad)
    if (rng.start, rng.end) != (start, end):
        rng.start, rng.end = start, end


class Argument:
    """The charts of the argument over many draws and through training, built once: the
    logit histogram and its spread against d_k, the saturation curves, the head budget and
    the training run. Their data come from core (``update_*``); sources are named
    ``<figure name>-source``."""

    def __init__(self) -> None:
        self._curves_shown = None
        self._highlighted = None
        #: The lines of each rule, thicker for the rule the model uses (:meth:`highlight`).
        self.rule_lines: dict[str, list] = {r: [] for r in core.RULES}
        widths = [float(w) for w in core.D_K_VALUES]
        x_range = Range1d(0.8, 5200)
        # -- saturation curves: three panels over one source
        cols = {"d_k": widths}
        for r in core.RULES:
            for m in ("max_weight", "eff_keys", "grad_q"):
                for q in ("median", "q25", "q75"):
                    cols[f"{m}_{q}_{r}"] = [1.0] * len(widths)
        self.curves_source = ColumnDataSource(cols, name="saturation-curves-source")
        self.draw_source = ColumnDataSource(dict(
            d_k=[64.0] * 3, rule=list(core.RULES), max_weight=[0.5] * 3, eff_keys=[1.0] * 3,
            grad_q=[1.0] * 3, color=[RULE_COLORS[r] for r in core.RULES],
            marker=[RULE_MARKER[r] for r in core.RULES]), name="saturation-draw-source")
        panels = (("saturation-curves", "max_weight", "Max weight: median and middle half",
                   "max weight", False),
                  ("saturation-eff-keys", "eff_keys", "Effective number of keys e^H",
                   "effective keys", False),
                  ("saturation-gradient", "grad_q", "Gradient to the query ‖∂p/∂q‖_F",
                   "‖∂p/∂q‖_F (log)", True))
        self.curve_figs = {}
        for name, metric, title, label, y_log in panels:
            fig = _log_figure(name, title, "head width d_k (log)", label, y_log=y_log,
                              x_range=x_range)
            for r in core.RULES:
                color = RULE_COLORS[r]
                fig.varea(x="d_k", y1=f"{metric}_q25_{r}", y2=f"{metric}_q75_{r}",
                          source=self.curves_source, fill_color=color, fill_alpha=0.15)
                self.rule_lines[r].append(fig.line(
                    x="d_k", y=f"{metric}_median_{r}", source=self.curves_source,
                    line_color=color, line_width=2.5, line_dash=RULE_DASH[r],
                    legend_label=RULE_LABELS[r]))
            # the current width: a vertical line from the dots' own source (one message)
            fig.vspan(x="d_k", source=self.draw_source, line_color="#52606d",
                      line_dash=DOTTED, line_width=1.5)
            fig.scatter(x="d_k", y=metric, source=self.draw_source, size=11,
                        fill_color="color", line_color="#1f2933", marker="marker")
            # where the curves are not: the gradient falls on the right, the effective keys
            # of the unscaled rule fall to 1 on the right
            fig.legend.location = {"max_weight": "top_left", "eff_keys": "top_right",
                                   "grad_q": "bottom_left"}[metric]
            fig.legend.background_fill_alpha = 0.8
            fig.legend.label_text_font = FONT
            fig.legend.label_text_font_size = "12px"
            if metric == "max_weight":
                fig.y_range = Range1d(0, 1.04)
            elif y_log:
                fig.y_range = Range1d(1e-3, 10)      # fit_log_range sets it to the data
            self.curve_figs[name] = fig
        # -- the logits over many draws: raw and divided by sqrt(d_k), and their spread
        self.hist_source = ColumnDataSource(
            {f"{c}_{r}": [0.0] for r in ("none", "sqrt") for c in ("left", "right", "top")},
            name="logit-histogram-source")
        self.hist_figs = {}
        for name, rule, title, color in (
                ("logit-histogram", "none", "q·k over many draws", UNSCALED_COLOR),
                ("logit-histogram-scaled", "sqrt", "q·k / √d_k over many draws", SCALED_COLOR)):
            fig = figure(name=name, title=title, height=250, sizing_mode="stretch_width",
                         min_width=240, tools="")
            fig.quad(left=f"left_{rule}", right=f"right_{rule}", top=f"top_{rule}", bottom=0,
                     source=self.hist_source, fill_color=color, fill_alpha=0.7,
                     line_color="#ffffff")
            fig.xaxis.axis_label = "logit"
            fig.yaxis.axis_label = "density"
            _style(fig)
            self.hist_figs[name] = fig
        self.std_source = ColumnDataSource(dict(d_k=widths, std_raw=[1.0] * len(widths),
                                                sqrt_d_k=[w ** 0.5 for w in widths]),
                                           name="logit-std-source")
        fig = _log_figure("logit-std", "Spread of q·k against d_k", "head width d_k (log)",
                          "standard deviation (log)", y_log=True, x_range=x_range)
        fig.line(x="d_k", y="sqrt_d_k", source=self.std_source, line_color="#52606d",
                 line_dash=DASHED, legend_label="√d_k")
        fig.scatter(x="d_k", y="std_raw", source=self.std_source, size=7,
                    fill_color=UNSCALED_COLOR, line_color="#1f2933", legend_label="measured")
        fig.legend.location = "top_left"
        fig.legend.label_text_font = FONT
        fig.yaxis.ticker = FixedTicker(ticks=[1, 2, 4, 8, 16, 32, 64])
        fig.yaxis.formatter = BasicTickFormatter(use_scientific=False)
        self.width_source = ColumnDataSource(dict(d_k=[64.0]), name="logit-width-source")
        fig.vspan(x="d_k", source=self.width_source, line_color="#52606d", line_dash=DOTTED)
        self.std_fig = fig
        # -- the head budget: one model width split into h heads of d_k = width / h
        self.budget_source = ColumnDataSource(
            {"heads": [], "d_k": [], **{f"{m}_median_{r}": [] for m in ("max_weight", "grad_q")
                                        for r in core.RULES}}, name="head-budget-source")
        self.budget_figs = {}
        for name, metric, title, label, y_log in (
                ("head-budget", "max_weight", "Median max weight per head", "max weight",
                 False),
                ("head-budget-gradient", "grad_q", "Median ‖∂p/∂q‖_F per head",
                 "‖∂p/∂q‖_F (log)", True)):
            fig = figure(name=name, title=title, height=250, sizing_mode="stretch_width",
                         min_width=240, tools="", x_axis_type="log",
                         y_axis_type="log" if y_log else "linear",
                         **({"y_range": Range1d(1e-3, 10)} if y_log else {}))
            # the key under the plot, in a row: inside it, it covered a line on a phone
            fig.add_layout(Legend(orientation="horizontal", location="center",
                                  margin=0, padding=4, border_line_color=None), "below")
            for r in core.RULES:
                self.rule_lines[r].append(fig.line(
                    x="heads", y=f"{metric}_median_{r}", source=self.budget_source,
                    line_color=RULE_COLORS[r], line_width=2.5, line_dash=RULE_DASH[r],
                    legend_label=RULE_LABELS[r]))
                fig.scatter(x="heads", y=f"{metric}_median_{r}", source=self.budget_source,
                            marker=RULE_MARKER[r], size=8, fill_color=RULE_COLORS[r],
                            line_color="#1f2933")
            fig.xaxis.ticker = FixedTicker(ticks=[2 ** i for i in range(13)])
            fig.xaxis.formatter = BasicTickFormatter(use_scientific=False)
            fig.xaxis.axis_label = "number of heads h (d_k = width / h)"
            fig.yaxis.axis_label = label
            fig.legend.label_text_font = FONT
            fig.legend.label_text_font_size = "12px"
            _style(fig)
            self.budget_figs[name] = fig
        # -- the training run
        self.training_source = ColumnDataSource(
            {"step": [], **{f"{m}_{r}": [] for r in core.RULES
                            for m in ("loss", "grad_wq", "grad_wk")}},
            name="training-source")
        self.training_figs = {}
        fig = figure(name="training-loss", title="Training loss", height=260,
                     sizing_mode="stretch_width", min_width=260, tools="")
        for r in core.RULES:
            fig.line(x="step", y=f"loss_{r}", source=self.training_source, line_width=2.5,
                     line_color=RULE_COLORS[r], line_dash=RULE_DASH[r],
                     legend_label=RULE_LABELS[r])
        fig.x_range = Range1d(0, 1)
        fig.y_range = Range1d(0, 1)
        fig.xaxis.axis_label = "step"
        fig.yaxis.axis_label = "loss"
        self.training_figs["training-loss"] = fig
        fig = figure(name="training-gradients", title="Gradient reaching W_Q (W_K: thin)",
                     height=260, sizing_mode="stretch_width", min_width=260, tools="",
                     y_axis_type="log")
        for r in core.RULES:
            fig.line(x="step", y=f"grad_wq_{r}", source=self.training_source, line_width=2.5,
                     line_color=RULE_COLORS[r], line_dash=RULE_DASH[r],
                     legend_label=RULE_LABELS[r])
            fig.line(x="step", y=f"grad_wk_{r}", source=self.training_source, line_width=1,
                     line_color=RULE_COLORS[r], line_dash=RULE_DASH[r])
        fig.x_range = self.training_figs["training-loss"].x_range
        fig.y_range = Range1d(1e-3, 10)
        fig.xaxis.axis_label = "step"
        fig.yaxis.axis_label = "‖∂L/∂W‖_F (log)"
        self.training_figs["training-gradients"] = fig
        for name, fig in self.training_figs.items():
            _style(fig)
            fig.min_border_right = 24          # room for the last step's tick label
            fig.legend.location = "top_right" if name == "training-loss" else "bottom_left"
            fig.legend.label_text_font = FONT
            fig.legend.label_text_font_size = "12px"

        #: Each tab's figures, by name in page order, and the columns of its CSV: (source,
        #: [[column, header], ...]).
        self.tab_figures = {
            "variance": ["logit-histogram", "logit-histogram-scaled", "logit-std"],
            "saturation": ["saturation-curves", "saturation-eff-keys"],
            "gradient": ["saturation-gradient"], "training": list(self.training_figs),
            "budget": list(self.budget_figs)}

        def same(*names):
            return [[n, n] for n in names]

        def curves(*metrics):
            return [(self.curves_source, same("d_k", *(f"{m}_{q}_{r}" for m in metrics
                                                       for r in core.RULES
                                                       for q in ("median", "q25", "q75")))),
                    (self.draw_source, [[c, f"this_draw_{c}"] for c in ("rule", "d_k", *metrics)])]

        derived_glyph_looks(self.figures.values())
        self.tables = {
            "variance": [(self.hist_source, same(*self.hist_source.data)),
                         (self.std_source, same("d_k", "std_raw", "sqrt_d_k"))],
            "saturation": curves("max_weight", "eff_keys"),
            "gradient": curves("grad_q"),
            "training": [(self.training_source, same(*self.training_source.data))],
            "budget": [(self.budget_source, same(*self.budget_source.data))],
        }

    @property
    def figures(self) -> dict:
        return {**self.curve_figs, **self.hist_figs, "logit-std": self.std_fig,
                **self.budget_figs, **self.training_figs}

    def update_curves(self, curves: dict, d_k: int, draw: dict) -> None:
        """The saturation curves (core.saturation_curves) and where this draw (rule ->
        Variant, core.draw_metrics) sits on them, at width ``d_k``."""
        if self._curves_shown is not curves:
            # a log axis cannot draw 0: gradients below float64's range sit at its floor
            self.curves_source.data = {
                k: (np.maximum(v, GRAD_FLOOR) if k.startswith("grad_q") else np.asarray(v))
                .tolist() for k, v in curves.items()}
            self._curves_shown = curves
        variants = [draw[r] for r in core.RULES]
        grad_q = [max(v.query_gradient, GRAD_FLOOR) for v in variants]
        self.draw_source.data.update(
            d_k=[float(d_k)] * 3,
            max_weight=[v.max_weight for v in variants],
            eff_keys=[v.effective_keys for v in variants],
            grad_q=grad_q)
        fit_log_range(self.curve_figs["saturation-gradient"].y_range, grad_q,
                      *(np.maximum(v, GRAD_FLOOR) for k, v in curves.items()
                        if k.startswith("grad_q")))

    def update_logits(self, dist: dict) -> None:
        """The histograms of q·k, raw and divided by sqrt(d_k) (core.logit_distribution)."""
        data = {}
        for rule in ("none", "sqrt"):
            edges = np.asarray(dist[f"edges_{rule}"], float)
            data.update({f"left_{rule}": edges[:-1].tolist(), f"right_{rule}": edges[1:].tolist(),
                         f"top_{rule}": np.asarray(dist[f"counts_{rule}"], float).tolist()})
        self.hist_source.data = data

    def highlight(self, rule: str) -> None:
        """Draw the lines of ``rule`` (the rule the model uses) thicker than the others."""
        if rule == self._highlighted:
            return
        for r, lines in self.rule_lines.items():
            for line in lines:
                line.glyph.line_width = 4.5 if r == rule else 2.0
        self._highlighted = rule

    def show_width(self, d_k: int) -> None:
        """Mark the current width on the spread-against-d_k chart."""
        self.width_source.data = dict(d_k=[float(d_k)])

    def update_std(self, curve: dict) -> None:
        self.std_source.data = dict(d_k=np.asarray(curve["d_k"], float).tolist(),
                                    std_raw=np.asarray(curve["std_raw"]).tolist(),
                                    sqrt_d_k=np.sqrt(np.asarray(curve["d_k"], float)).tolist())

    def update_budget(self, budget: dict) -> None:
        self.budget_source.data = data = {
            k: (np.maximum(v, GRAD_FLOOR) if k.startswith("grad_q") else np.asarray(v, float))
            .tolist() for k, v in budget.items()}
        fit_log_range(self.budget_figs["head-budget-gradient"].y_range,
                      *(v for k, v in data.items() if k.startswith("grad_q")))

    def show_training(self, run_by_rule: dict) -> None:
        """The training runs so far (one per rule, core.start_training), replacing what is
        shown; the axes span the planned steps and the values so far."""
        n = min(len(run.loss) for run in run_by_rule.values())
        runs = run_by_rule.values()
        first = next(iter(runs))
        setting = [str(first.d_k), f"{first.temperature:g}", str(first.seed), str(first.n_keys)]
        if self.training_source.tags != setting:     # what the downloads are named after
            self.training_source.tags = setting
        steps = max(run.steps for run in runs)
        if self.training_figs["training-loss"].x_range.end != steps:
            self.training_figs["training-loss"].x_range.end = steps
        losses = [x for run in runs for x in run.loss[:n]]
        grads = [x for run in runs for m in ("grad_wq", "grad_wk") for x in getattr(run, m)[:n]
                 if x > 0]
        if losses:
            self.training_figs["training-loss"].y_range.end = 1.05 * max(losses)
        if grads:
            y = self.training_figs["training-gradients"].y_range
            y.start, y.end = min(grads) / 2, max(grads) * 2
        data = {"step": list(range(n))}
        for r, run in run_by_rule.items():
            data[f"loss_{r}"] = np.asarray(run.loss[:n]).tolist()
            for m in ("grad_wq", "grad_wk"):
                g = np.asarray(getattr(run, m)[:n], float)
                data[f"{m}_{r}"] = np.maximum(g, 1e-300).tolist()
        self.training_source.data = data
