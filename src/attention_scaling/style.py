"""The explorer's look: its colours (each rule's from core.RULE_TABLE), colour maps, fonts and
figure styling, and its assets (the style sheet with each rule's CSS, the browser programs of
assets/js). Imports Bokeh for models and palettes only; builds no layout."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from pathlib import Path

import numpy as np
from bokeh.models import (BasicTicker, CategoricalAxis, ColorBar, CustomJS,
                          CustomJSTickFormatter, GlyphRenderer, InlineStyleSheet, Title)
from bokeh.palettes import Inferno256

from . import core

# Okabe-Ito colours: distinguishable with every common colour-vision deficiency.
#: The colours of the reference figure's two bar charts: their rules' (core.Rule.color).
SCALED_COLOR = core.RULE["sqrt"].color
UNSCALED_COLOR = core.RULE["none"].color
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


def luminance(color: str) -> float:
    """WCAG's relative luminance of a "#rrggbb" colour."""
    c = np.array([int(color[i:i + 2], 16) for i in (1, 3, 5)]) / 255
    c = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return float(c @ [0.2126, 0.7152, 0.0722])


def contrast(a: str, b: str) -> float:
    """WCAG's contrast ratio of two "#rrggbb" colours, 1 to 21."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


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
    """The page's style sheet: assets/style.css and each rule's colours (:func:`rule_css`)."""
    return (ASSETS / "style.css").read_text(encoding="utf-8") + rule_css()


def script_globals(code: str) -> list[str]:
    """The names a browser program takes from outside, as its ``/* global a, b */`` line
    declares them (the names eslint checks it against): its CustomJS args, Bokeh's own
    (cb_obj; value for a hover; tick, ticks for a tick formatter) and AS."""
    found = re.search(r"^/\* global ([^*]*)\*/", code, re.MULTILINE)
    return [n.strip() for n in found.group(1).split(",") if n.strip()] if found else []


#: The name of the model holding the browser programs' library (:func:`programs`).
LIBRARY = "as-programs"
#: Where a page keeps the library once compiled (one compilation per page).
_LIBRARY_KEY = "Symbol.for('attention-scaling.programs')"


@functools.cache
def _read(name: str) -> str:
    return (ASSETS / "js" / f"{name}.js").read_text(encoding="utf-8")


def uses_helpers(name: str) -> bool:
    """Whether program ``name`` declares AS (assets/js/helpers.js) in its ``/* global */``
    line, and so runs from the library (:func:`programs`)."""
    return "AS" in script_globals(_read(name))


def _params(name: str) -> list[str]:
    return [n for n in script_globals(_read(name)) if n != "AS"]


def compact(code: str) -> str:
    """``code`` without its whole-line comments, blank lines and indentation, outside
    template literals that span lines (whose text is kept as it is)."""
    out, inside = [], False
    for line in code.splitlines():
        if inside:
            out.append(line)
        elif line.strip() and not line.lstrip().startswith("//"):
            out.append(line.strip())
        if line.count("`") % 2 and not line.lstrip().startswith("//"):
            inside = not inside
    return "\n".join(out)


@functools.cache
def _library_names(offline: bool) -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in (ASSETS / "js").glob("*.js")
                        if p.stem != "helpers" and uses_helpers(p.stem)
                        and (offline or not p.stem.startswith("offline-"))))


@functools.cache
def library_code(offline: bool = False) -> str:
    """The code of the library: assets/js/helpers.js, then every program that declares AS
    (the offline copy's own, offline-*.js, only with ``offline``) as a function of its args,
    by name; run as a function body, it returns those functions. Compiled once per page,
    whichever program runs first (:func:`script`)."""
    functions = ",\n".join(
        f"{json.dumps(name)}: function ({', '.join(_params(name))}) {{\n'use strict';\n"
        f"{compact(_read(name))}\n}}" for name in _library_names(offline))
    return f"{compact(_read('helpers'))}\nreturn {{\n{functions}\n}};"


def programs(offline: bool = False) -> CustomJS:
    """The model holding the library (:func:`library_code`), one per document: a page's
    programs that declare AS find it by its name, :data:`LIBRARY`. It is never run as a
    callback."""
    return CustomJS(code=library_code(offline), name=LIBRARY)


@functools.cache
def library_file() -> tuple[str, bytes]:
    """The served page's library as a script file of its own: (its file name, named by its
    content's hash, and its bytes). Loaded before any document of the page, it puts the
    library where :func:`script`'s calls look first, so that a session's document needs no
    :func:`programs` model: the browser fetches the library once and keeps it in its cache,
    instead of receiving it in every session's document. The library runs when the first
    program asks for it, as from the model: once BokehJS is loaded (helpers.js reads it)."""
    body = ("(() => {\n"
            f"const key = {_LIBRARY_KEY};\n"
            "if (Object.hasOwn(globalThis, key)) return;\n"
            "Object.defineProperty(globalThis, key, {configurable: true, get() {\n"
            f"const library = (function () {{\n{library_code()}\n}})();\n"
            "Object.defineProperty(globalThis, key, {value: library, writable: true, "
            "configurable: true});\n"
            "return library;\n"
            "}});\n"
            "})();\n").encode("utf-8")
    return f"programs-{hashlib.sha256(body).hexdigest()[:16]}.js", body


@functools.cache
def script(name: str) -> str:
    """The JavaScript of ``assets/js/<name>.js``: the code of a CustomJS, CustomJSHover or
    CustomJSTickFormatter, or a page's script (:func:`compact`). A program whose ``/* global */`` line names
    AS is a call into the library instead (:func:`library_code`, compiled from the
    document's :func:`programs` model the first time a program of the page runs): each
    program's code reaches the browser once per document, whatever the number of models
    that run it."""
    if not uses_helpers(name):
        return compact(_read(name))
    return (f"return (globalThis[{_LIBRARY_KEY}] ??= new Function(Bokeh.documents.map((d) => "
            f"d.get_model_by_name('{LIBRARY}')).find((m) => m != null).code)())"
            f"[{json.dumps(name)}]({', '.join(_params(name))});")


#: A slider's position as a percentage (positions 0 to 100): its label, computed.
PERCENT_POSITIONS = "return Number.isInteger(tick) ? tick + '%' : '';"


def position_formatter(labels: list[str]) -> CustomJSTickFormatter:
    """Show ``labels[position]`` for a slider over positions, formatted in the browser."""
    return CustomJSTickFormatter(code=f"return {json.dumps(labels)}[tick] ?? '';")


def percent_formatter() -> CustomJSTickFormatter:
    """Show a slider's position (0 to 100) as a percentage, formatted in the browser."""
    return CustomJSTickFormatter(code=PERCENT_POSITIONS)
FONT = "'Inter', 'Segoe UI', 'Helvetica Neue', Arial, sans-serif"

#: The charts' colours that differ between the light and the dark theme, by the name of the
#: CSS variable (``--bk-<name>``) through which BokehJS draws them: a chart's visual property
#: ``<prefix>_<attr>`` (an axis's ``major_label_text_color``, a legend's
#: ``background_fill_color``) takes the colour of ``--bk-<prefix>-<attr>`` where the page
#: defines it. :func:`style_figure` gives the models the light theme's; assets/js/theme.js
#: defines the dark theme's as those variables. Text is at least 4.5:1 against its
#: background in both (tests/test_learners.py measures it in the page).
CHART_THEMES = {
    "light": {
        "background-fill-color": "#ffffff",    # plots, legends and colour bars
        "border-fill-color": "#ffffff",        # around the plot: titles, axes, colour bars
        "text-color": "#1f2933",               # titles
        "axis-label-text-color": "#52606d",
        "major-label-text-color": "#52606d",   # axes' and colour bars' tick labels
        "title-text-color": "#52606d",         # colour bars' titles
        "label-text-color": "#1f2933",         # legends' entries
        "group-text-color": "#52606d",
        "subgroup-text-color": "#52606d",
        "grid-line-color": "#e4e7eb",
    },
    "dark": {
        "background-fill-color": "#1a2027",
        "border-fill-color": "#1a2027",
        "text-color": "#e4e7eb",
        "axis-label-text-color": "#bcc6d0",
        "major-label-text-color": "#bcc6d0",
        "title-text-color": "#bcc6d0",
        "label-text-color": "#e4e7eb",
        "group-text-color": "#bcc6d0",
        "subgroup-text-color": "#bcc6d0",
        "grid-line-color": "#323f4b",
    },
}
#: The lines that mark something on a chart (the frame of the chart the model uses, the
#: highest bar's outline, the dots' outlines, the current width, the axes): one grey at least
#: 3:1 against the light and the dark theme's backgrounds (4.0:1 and 4.1:1), so a line drawn
#: as a glyph (which no CSS variable reaches) reads in both.
MARK = "#72808e"


def theme_css(theme: str) -> str:
    """The CSS variables of ``theme``'s chart colours (:data:`CHART_THEMES`)."""
    return " ".join(f"--bk-{name}: {color};" for name, color in CHART_THEMES[theme].items())


def style_figure(fig) -> None:
    """The explorer's look on a figure: no toolbar, no outline, its fonts and the light
    theme's colours (:data:`CHART_THEMES`)."""
    light = CHART_THEMES["light"]
    fig.toolbar.logo = None
    fig.toolbar_location = None
    fig.outline_line_color = None
    fig.background_fill_color = light["background-fill-color"]
    fig.border_fill_color = light["border-fill-color"]
    fig.title.text_font = FONT
    fig.title.text_font_size = "15px"
    fig.title.text_color = light["text-color"]
    fig.min_border_left = 10
    for axis in (fig.xaxis, fig.yaxis):
        axis.axis_label_text_font = FONT
        axis.axis_label_text_font_style = "normal"
        axis.axis_label_text_color = light["axis-label-text-color"]
        axis.major_label_text_font = FONT
        axis.major_label_text_color = light["major-label-text-color"]
        axis.axis_line_color = MARK
        axis.major_tick_line_color = MARK
        axis.minor_tick_line_color = None
    # the figure's own lists, not fig.select: a search walks every model the figure refers
    # to (its data included), an eighth of the CPU a new session's page took
    for axis in (*fig.xaxis, *fig.yaxis):
        if isinstance(axis, CategoricalAxis):               # labels of nested factors
            axis.group_text_color = light["group-text-color"]
            axis.subgroup_text_color = light["subgroup-text-color"]
    fig.grid.grid_line_color = light["grid-line-color"]
    for bar in (m for side in ("left", "right", "above", "below", "center")
                for m in getattr(fig, side) if isinstance(m, ColorBar)):
        bar.major_label_text_color = light["major-label-text-color"]
        bar.title_text_color = light["title-text-color"]
        bar.title_text_font_style = "normal"
        bar.background_fill_color = light["background-fill-color"]


def legend_css() -> str:
    """A legend's colours from the theme's variables (:data:`CHART_THEMES`; the light
    theme's where the page defines none). BokehJS draws a legend as HTML and writes the
    colours it resolves into the legend's own style sheet once, when it renders it (before
    the page's theme applies to a chart built later, or to a theme chosen later): this
    style sheet, read by the browser whenever the theme's variables change, takes over."""
    light = CHART_THEMES["light"]
    return (":host { background-color: var(--bk-background-fill-color, "
            f"{light['background-fill-color']}) !important; }}\n"
            ".bk-item .bk-label { color: var(--bk-label-text-color, "
            f"{light['label-text-color']}) !important; }}\n")


def style_legend(legend) -> None:
    """A legend in the explorer's look: a row of entries with room between them, in the
    theme's colours (:func:`legend_css`), no border (it sits outside the plot:
    :func:`legend_below`)."""
    light = CHART_THEMES["light"]
    legend.stylesheets = [InlineStyleSheet(css=legend_css())]
    legend.label_text_font = FONT
    legend.label_text_font_size = "12px"
    legend.label_text_color = light["label-text-color"]
    legend.background_fill_color = light["background-fill-color"]
    legend.border_line_color = None
    legend.item_background_fill_color = None
    legend.spacing = 18
    legend.glyph_width = 26
    legend.label_standoff = 6


def legend_below(fig) -> None:
    """The figure's legend under its plot, its entries in a row, in the explorer's look
    (:func:`style_legend`): outside the data at every state."""
    legend = fig.legend[0]
    fig.center.remove(legend)
    legend.orientation = "horizontal"
    legend.location = "center"
    legend.margin = 0
    legend.padding = 4
    fig.add_layout(legend, "below")
    style_legend(legend)


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


def log10_axis(axis) -> None:
    """An axis in log10 units, labelled as powers of ten (assets/js/power-ticks.js) at whole
    decades only: a chart of log10 values draws every value, however far below float64's
    range (log10 ||dp/dq||_F reaches -17,000 at d_k = 4096, T = 0.1), where a log axis would
    need a floor."""
    axis.ticker = BasicTicker(min_interval=1, mantissas=[1, 2, 5], desired_num_ticks=6)
    axis.formatter = CustomJSTickFormatter(code=script("power-ticks"))


def subtitle(fig, text: str) -> Title:
    """A second, smaller line under the figure's title: what does not fit on the title's own
    line on a phone; the Title, for a chart that changes it."""
    line = Title(text=text, text_font=FONT, text_font_size="13px", text_font_style="normal",
                  text_color=CHART_THEMES["light"]["axis-label-text-color"])
    fig.add_layout(line, "above")
    return line



def rule_css() -> str:
    """Each rule's colour in the page's own CSS, from core.RULE_TABLE: its name in the
    readout's header (--as-text-<rule>, at WCAG AA contrast on the page's backgrounds; the
    dark page's by assets/js/theme.js) and its highlighted column."""
    return "".join(
        f":host {{ --as-text-{r.key}: var(--as-theme-text-{r.key}, {r.ink}); }}\n"
        f".readout thead [data-rule='{r.key}'] {{ color: var(--as-text-{r.key}); }}\n"
        f".readout table[data-active='{r.key}'] td[data-rule='{r.key}'] "
        "{ background: var(--as-highlight); font-weight: 700; }\n" for r in core.RULE_TABLE)


#: A colour per scaling rule (Okabe-Ito), and a dash and marker per rule so that no line or
#: dot is told from another by colour alone (core.RULE_TABLE; dashes as tuples: Bokeh's
#: named dashes are module-level lists every line would hold).
RULE_COLORS = {r.key: r.color for r in core.RULE_TABLE}
RULE_DASH = {r.key: r.dash for r in core.RULE_TABLE}
RULE_MARKER = {r.key: r.marker for r in core.RULE_TABLE}
