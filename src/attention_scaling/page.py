"""The Panel page: widgets from the state's parameters, the charts, the text, a template.

Thin by design: state lives in :mod:`model`, the figures in :mod:`charts`, the
math in :mod:`core`. On every control change the page recomputes once and
sends one message (``pn.io.hold``) that replaces the charts' data in place.
"""

from __future__ import annotations

import functools
import html
import json
from pathlib import Path

import panel as pn
from bokeh.models import CustomJSTickFormatter, Div

from . import core, latency
from .charts import SCALED_COLOR, Charts
from .model import FORMULAS, ExplorerState

_HERE = Path(__file__).resolve().parent
#: CSS and favicon: inside the package when installed from a wheel, the repository's
#: assets/ folder in a source checkout (editable install).
ASSETS = next((p for p in (_HERE / "assets", _HERE.parents[1] / "assets") if p.is_dir()),
              _HERE / "assets")
TITLE = "Why attention divides by √d_k"

GUIDE = (
    "<div class='guide'><h4>Try this</h4><ol>"
    "<li>Drag <b>d<sub>k</sub></b> to the right: the unscaled bars collapse onto one key, "
    "the scaled ones barely move.</li>"
    "<li>Switch <b>scaling</b> off: the Jacobian fades and the gradient readout drops.</li>"
    "<li>Lower <b>T</b> below 1: temperature sharpens the softmax the same way.</li>"
    "<li><b>Resample</b> to see it is not one lucky draw.</li></ol></div>"
)

CAPTION = (
    "Both charts show the same query–key dot products over eight keys. When the "
    "components of q and k have unit variance, those products spread out like √d_k: "
    "the wider the head, the larger the raw logits, and the softmax piles almost all "
    "weight onto one key. Dividing by √d_k cancels that growth at every width, so "
    "the left chart looks the same whether d_k is 4 or 4096."
)


@functools.lru_cache(maxsize=1)
def _css() -> str:
    return (ASSETS / "style.css").read_text(encoding="utf-8")


def index_slider(state, name: str, label: str, labels: list[str]) -> pn.widgets.IntSlider:
    """A slider over the positions of a Selector parameter's values, kept in sync both ways.

    The browser shows ``labels[position]`` through a client-side tick formatter, so the
    label always matches the handle, however fast it is dragged. (Panel's DiscreteSlider
    sets its label from the server as well, and under fast keyboard input an older label
    can arrive last.)
    """
    values = list(state.param[name].objects)
    slider = latency.fast(pn.widgets.IntSlider(
        name=label, start=0, end=len(values) - 1, value=values.index(getattr(state, name)),
        format=CustomJSTickFormatter(code=f"return {json.dumps(labels)}[tick] ?? '';"),
        sizing_mode="stretch_width",
    ))
    slider.param.watch(lambda e: setattr(state, name, values[e.new]), "value")
    state.param.watch(lambda e: setattr(slider, "value", values.index(e.new)), name)
    return slider


class Fast(pn.theme.Fast):
    """Panel's Fast design without its Google Fonts link: the page loads nothing off-host.

    Named ``Fast`` on purpose: Panel finds a design's bundled files by its class name.
    """

    _resources = {**pn.theme.Fast._resources, "font": {}}


class Explorer(pn.viewable.Viewer):
    """The attention-scaling explorer: controls, Fig. 3 bars, Jacobian heatmaps, text."""

    def __init__(self, state: ExplorerState | None = None, **params):
        super().__init__(**params)
        self.state = state or ExplorerState()
        self.charts = Charts()
        self._build_widgets()
        self._seed_text = pn.pane.HTML("", margin=(0, 10), stylesheets=[_css()])
        self._refresh()
        self.state.param.watch(self._on_change, ["result", "scaled"])

    # ---- widgets ---------------------------------------------------------------------

    def _build_widgets(self) -> None:
        s = self.state
        self.d_k_slider = index_slider(s, "d_k", "Head width d_k", [str(v) for v in core.D_K_VALUES])
        self.temperature_slider = index_slider(
            s, "temperature", "Temperature T", [f"{v:g}" for v in core.TEMPERATURES])
        self.scaled_switch = latency.fast(
            pn.widgets.Switch.from_param(s.param.scaled, name="", width=50))
        self.resample_button = pn.widgets.Button.from_param(
            s.param.resample, name="Resample q and k", button_type="primary",
            sizing_mode="stretch_width")
        self.fig3_button = pn.widgets.Button(
            name="Reset to Fig. 3", button_type="default", sizing_mode="stretch_width")
        self.fig3_button.on_click(lambda _event: s.reset_to_fig3())

    def controls(self) -> pn.Column:
        return pn.Column(
            self.d_k_slider,
            pn.Row(self.scaled_switch,
                   pn.pane.HTML("<b>Divide logits by √d_k</b><br>"
                                "<small>the variant the model uses</small>", margin=(0, 5)),
                   margin=(8, 10)),
            self.temperature_slider,
            pn.Row(self._seed_text, margin=(4, 0)),
            self.resample_button,
            self.fig3_button,
            pn.pane.HTML(GUIDE, stylesheets=[_css()], sizing_mode="stretch_width"),
            sizing_mode="stretch_width",
        )

    # ---- updates ---------------------------------------------------------------------

    def _on_change(self, *_events) -> None:
        with pn.io.hold():
            self._refresh()

    def _refresh(self) -> None:
        r = self.state.result
        self.charts.update(r, self.state.scaled, self.state.text_fields())
        seed = f"<span class='seed'>seed <code>{int(r.seed)}</code></span>"
        if self._seed_text.object != seed:
            self._seed_text.object = seed

    # ---- layout ----------------------------------------------------------------------

    def main(self) -> pn.Column:
        c = self.charts
        bars = pn.Row(
            pn.pane.Bokeh(c.scaled_fig, sizing_mode="stretch_width"),
            pn.pane.Bokeh(c.unscaled_fig, sizing_mode="stretch_width"),
            sizing_mode="stretch_width",
        )
        caption = pn.pane.HTML(f"<p class='caption'>{html.escape(CAPTION)}</p>",
                               sizing_mode="stretch_width", stylesheets=[_css()])
        jac = pn.Row(pn.pane.Bokeh(c.jacobian_fig),
                     pn.pane.Bokeh(c.readout, sizing_mode="stretch_width",
                                   stylesheets=[_css()]),
                     sizing_mode="stretch_width")
        # Typeset once by Bokeh's bundled MathJax; the live text below it is plain HTML.
        formulas = pn.pane.Bokeh(
            Div(text=f"<div class='formulas'>{FORMULAS}</div>", disable_math=False,
                sizing_mode="stretch_width"), sizing_mode="stretch_width", stylesheets=[_css()])
        return pn.Column(
            bars, caption, formulas,
            pn.pane.Bokeh(c.explanation, sizing_mode="stretch_width", stylesheets=[_css()]),
            jac,
            pn.pane.Bokeh(c.diagonal_fig, sizing_mode="stretch_width"),
            sizing_mode="stretch_width",
        )

    def __panel__(self):
        return pn.Row(pn.Column(self.controls(), width=280), self.main(),
                      sizing_mode="stretch_width")

    def page(self) -> pn.template.BaseTemplate:
        """The full page: a Panel template with header, sidebar controls and the charts."""
        template = pn.template.FastListTemplate(
            title=TITLE,
            sidebar=[self.controls()],
            main=[self.main()],
            favicon=str(ASSETS / "favicon.svg"),
            accent_base_color=SCALED_COLOR,
            header_background="#102a43",
            design=Fast,
            theme_toggle=False,
            # No busy spinner: updates take milliseconds, and toggling it on every change
            # costs two extra model updates (and messages) per change.
            busy_indicator=None,
            sidebar_width=300,
            raw_css=[_css()],
        )
        return template


def create_page() -> pn.template.BaseTemplate:
    """A fresh explorer page for one browser session."""
    pn.extension("mathjax", notifications=False)
    latency.install()
    return Explorer().page()


__all__ = ["Explorer", "create_page", "TITLE"]
