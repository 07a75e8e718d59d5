"""The Panel page: controls bound to the state's parameters, the charts, the text, the layout.

Thin by design: state lives in :mod:`model`, the figures in :mod:`charts`, the math in
:mod:`core`. The controls are plain Bokeh widgets with Python ``on_change`` callbacks, as in a
plain Bokeh app: a change recomputes once and, held by Bokeh's ``Document.hold``, leaves as
one message that replaces the charts' data in place. The URL is read and written through
model.parse_query / model.to_query.
"""

from __future__ import annotations

import base64
import html
import sys
import urllib.parse
from contextlib import contextmanager

import panel as pn
from bokeh.models import Button, CustomJS, Div, InlineStyleSheet, Slider, Switch

from . import core
from .charts import ASSETS, READ_FIELDS_JS, Charts, page_css, position_formatter
from .model import (FORMULAS, TITLE, ExplorerState, guide_html, header_html, parse_query,
                    to_query)

#: The tab icon, inline (no extra request): assets/favicon.svg drawn as a PNG
#: (scripts/favicon.py). Not the SVG itself: Chromium fetches and decodes the tab icon again
#: after every address update, and an SVG icon is a whole document to style, lay out and
#: paint on the page's main thread, once per slider step.
FAVICON = "data:image/png;base64," + base64.b64encode(
    (ASSETS / "favicon.png").read_bytes()).decode("ascii")

#: When the websocket to the server closes (server restarted, network blip, laptop asleep):
#: say so at the top of the page, poll the server's /liveness, and reload the page as soon as
#: it answers. The view survives the reload: every control is in the address (sync_url).
#: Text only (textContent), no markup from anywhere.
RECONNECT_JS = """
if (window.__attentionScalingLost) { return; }
window.__attentionScalingLost = true;
const bar = document.createElement('div');
bar.className = 'as-connection-lost';
bar.setAttribute('role', 'alert');
bar.style.cssText = 'position:fixed;top:0;left:0;right:0;z-index:10000;display:flex;gap:12px;' +
  'align-items:center;justify-content:center;padding:10px 16px;background:#fff8e1;' +
  'border-bottom:2px solid #f0c36d;color:#5f4b00;font:15px/1.4 "Segoe UI",Arial,sans-serif;' +
  'box-shadow:0 2px 6px rgba(0,0,0,0.15)';
const text = document.createElement('span');
const button = document.createElement('button');
button.textContent = 'Reload now';
button.style.cssText = 'font:inherit;padding:3px 12px;border:1px solid #b7950b;border-radius:4px;' +
  'background:#ffffff;color:#5f4b00;cursor:pointer';
button.addEventListener('click', () => window.location.reload());
bar.append(text, button);
const veil = document.createElement('div');   // the dead controls cannot be used meanwhile
veil.className = 'as-connection-veil';
veil.style.cssText = 'position:fixed;inset:0;z-index:9999;background:rgba(255,255,255,0.5)';
document.body.append(veil, bar);
const say = (message) => { text.textContent = 'Lost the connection to the server: the charts ' +
  'have stopped updating. ' + message; };
const liveness = new URL('liveness', window.location.origin + window.location.pathname);
let tries = 0;
const retry = () => {
  const wait = Math.min(10, 2 + tries);
  say(`Trying again in ${wait} s; your settings are kept in the address.`);
  setTimeout(attempt, wait * 1000);
};
const attempt = () => {
  tries += 1;
  say('Reconnecting…');
  fetch(liveness, {cache: 'no-store'}).then((response) => {
    if (response.ok) {
      text.textContent = 'The server is back: reloading this view…';
      window.location.reload();
    } else {
      retry();
    }
  }).catch(retry);
};
say('Reconnecting…');
setTimeout(attempt, 1000);
"""

COPY_LINK_JS = """
const url = window.location.href;
const done = (ok) => { button.label = ok ? 'Link copied' : 'Copy failed: use the address bar';
                       setTimeout(() => { button.label = 'Copy link to this view'; }, 1800); };
if (navigator.clipboard && window.isSecureContext) {
  navigator.clipboard.writeText(url).then(() => done(true), () => done(false));
} else {
  const ta = document.createElement('textarea'); ta.value = url; document.body.appendChild(ta);
  ta.select(); let ok = false; try { ok = document.execCommand('copy'); } catch (e) {}
  ta.remove(); done(ok);
}
"""

#: The address bar follows the controls, written in the browser: the query string of the
#: controls travels with the text fields (field "query", see Explorer._refresh) and is put
#: into the address with history.replaceState, keeping any other parameter (hide, embed).
#: Panel's Location would do it from the server, and the browser would then send the new
#: address back to the server after every change: a second message each way per change.
URL_JS = READ_FIELDS_JS + """
if (values.query !== undefined) {
  const url = new URL(window.location.href);
  for (const [k, v] of new URLSearchParams(values.query)) url.searchParams.set(k, v);
  if (url.href !== window.location.href) window.history.replaceState(window.history.state, '', url.href);
}
"""


@contextmanager
def held(doc):
    """Bokeh's ``Document.hold``: the events of a change leave as one message on release."""
    if doc is None:
        yield
        return
    doc.hold("combine")
    try:
        yield
    finally:
        doc.unhold()


def index_slider(state, name: str, label: str, labels: list[str]) -> Slider:
    """A slider over the positions of a Selector parameter's values, kept in sync both ways.

    The browser shows ``labels[position]`` through a client-side tick formatter, so the
    label always matches the handle however fast it is dragged. A position that is not one
    (a forged message) puts the handle back where the state is.
    """
    values = list(state.param[name].objects)
    slider = Slider(
        title=label, start=0, end=len(values) - 1, step=1,
        value=values.index(getattr(state, name)),
        format=position_formatter(labels),
        sizing_mode="stretch_width", margin=(5, 10),
    )

    def from_browser(_attr, _old, new) -> None:
        position = _position(new, len(values))
        if position is None:
            slider.value = values.index(getattr(state, name))
            return
        if values[position] == getattr(state, name):
            return      # the echo of a change made on the state (reset, URL): nothing to do
        with held(slider.document):
            setattr(state, name, values[position])

    def to_browser(event) -> None:
        position = values.index(event.new)
        if slider.value != position:   # not when the change came from this slider
            slider.value = position

    slider.on_change("value", from_browser)
    state.param.watch(to_browser, name)
    return slider


def state_switch(state, name: str) -> Switch:
    """A Bokeh switch bound both ways to a Boolean parameter of ``state``."""
    switch = Switch(active=getattr(state, name), margin=(5, 5))

    def from_browser(_attr, _old, new) -> None:
        if isinstance(new, bool) and new != getattr(state, name):
            with held(switch.document):
                setattr(state, name, new)

    def to_browser(event) -> None:
        if switch.active != event.new:
            switch.active = event.new

    switch.on_change("active", from_browser)
    state.param.watch(to_browser, name)
    return switch


def action_button(label: str, action, button_type: str = "default") -> Button:
    """A Bokeh button that runs ``action()`` (held: one message) when clicked."""
    button = Button(label=label, button_type=button_type, sizing_mode="stretch_width",
                    margin=(5, 10))

    def clicked(_event) -> None:
        with held(button.document):
            action()

    button.on_event("button_click", clicked)
    return button


def _position(value, count: int) -> int | None:
    """``value`` as a slider position in [0, count), or None: the browser may send any
    number (a forged message: 2.5, -1, 1e308, NaN), and a whole float such as 3.0 is 3."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    position = int(value)
    return position if 0 <= position < count else None


class Explorer(pn.viewable.Viewer):
    """The attention-scaling explorer: controls, Fig. 3 bars, Jacobian heatmaps, text."""

    def __init__(self, state: ExplorerState | None = None, **params):
        _load_extension_in_notebook()
        super().__init__(**params)
        self.state = state or ExplorerState()
        self.charts = Charts()
        # The text Divs are Bokeh models in their own shadow roots: they carry the page CSS.
        for div in self.charts.texts:
            div.stylesheets = [InlineStyleSheet(css=page_css())]
        self._build_widgets()
        self._seed_text = Div(text="", margin=(0, 10), stylesheets=[InlineStyleSheet(
            css=page_css())])
        self._refresh()
        self.state.param.watch(self._refresh, ["result", "scaled"])

    # ---- widgets ---------------------------------------------------------------------

    def _build_widgets(self) -> None:
        s = self.state
        self.d_k_slider = index_slider(s, "d_k", "Head width d_k", [str(v) for v in core.D_K_VALUES])
        self.temperature_slider = index_slider(
            s, "temperature", "Temperature T", [f"{v:g}" for v in core.TEMPERATURES])
        self.scaled_switch = state_switch(s, "scaled")
        self.resample_button = action_button("Resample q and k", s.draw_new_seed, "primary")
        self.fig3_button = action_button("Reset to Fig. 3", s.reset_to_fig3)
        self.copy_button = Button(label="Copy link to this view", sizing_mode="stretch_width",
                                  margin=(5, 10))
        # In the browser: the page's own URL (kept equal to the controls) to the clipboard,
        # with a fallback for pages served over plain http to other machines.
        self.copy_button.js_on_event("button_click", CustomJS(
            args=dict(button=self.copy_button), code=COPY_LINK_JS))

    def controls(self) -> pn.Column:
        return pn.Column(
            pn.pane.Bokeh(self.d_k_slider, sizing_mode="stretch_width"),
            pn.Row(pn.pane.Bokeh(self.scaled_switch),
                   pn.pane.HTML("<b>Divide logits by √d_k</b><br>"
                                "<small>the variant the model uses</small>", margin=(0, 5)),
                   margin=(8, 10)),
            pn.pane.Bokeh(self.temperature_slider, sizing_mode="stretch_width"),
            pn.Row(pn.pane.Bokeh(self._seed_text), margin=(4, 0)),
            pn.pane.Bokeh(self.resample_button, sizing_mode="stretch_width"),
            pn.pane.Bokeh(self.fig3_button, sizing_mode="stretch_width"),
            pn.pane.Bokeh(self.copy_button, sizing_mode="stretch_width"),
            pn.pane.HTML(guide_html(), stylesheets=[page_css()], sizing_mode="stretch_width"),
            sizing_mode="stretch_width",
        )

    # ---- updates ---------------------------------------------------------------------

    def _refresh(self, *_events) -> None:
        r = self.state.result
        fields = self.state.text_fields()
        fields["query"] = urllib.parse.urlencode(to_query(self.state))   # for URL_JS
        self.charts.update(r, self.state.scaled, fields)
        seed = f"<span class='seed'>seed <code>{int(r.seed)}</code></span>"
        if self._seed_text.text != seed:
            self._seed_text.text = seed

    # ---- layout ----------------------------------------------------------------------

    def main(self, show_text: bool = True) -> pn.Column:
        c = self.charts
        bars = pn.Row(
            pn.pane.Bokeh(c.scaled_fig, sizing_mode="stretch_width"),
            pn.pane.Bokeh(c.unscaled_fig, sizing_mode="stretch_width"),
            sizing_mode="stretch_width",
        )
        caption = pn.pane.Bokeh(c.caption, sizing_mode="stretch_width", stylesheets=[page_css()])
        jac = pn.Row(pn.pane.Bokeh(c.jacobian_fig),
                     pn.pane.Bokeh(c.readout, sizing_mode="stretch_width",
                                   stylesheets=[page_css()]),
                     sizing_mode="stretch_width")
        # MathML, typeset by the browser itself; the live text below it is plain HTML.
        formulas = pn.pane.HTML(FORMULAS, sizing_mode="stretch_width", stylesheets=[page_css()])
        text = [caption, formulas,
                pn.pane.Bokeh(c.explanation, sizing_mode="stretch_width", stylesheets=[page_css()])]
        return pn.Column(
            bars, *(text if show_text else []), jac,
            pn.pane.Bokeh(c.diagonal_fig, sizing_mode="stretch_width"),
            sizing_mode="stretch_width",
        )

    def __panel__(self):
        return pn.Row(pn.Column(self.controls(), width=280), self.main(),
                      sizing_mode="stretch_width")

    def sync_url(self, doc=None) -> None:
        """Keep the browser's query string equal to the controls (all of them, live): from the
        document's first display (the full state, seed included) and on every change."""
        write = CustomJS(args=dict(source=self.charts.text_source), code=URL_JS)
        self.charts.text_source.js_on_change("data", write)
        if doc is not None:
            doc.js_on_event("document_ready", write)

    def page(self, hidden: set[str] = frozenset(), notices: list[str] = ()):
        """The full page: a title bar over the controls (left) and the charts and text.

        ``hidden`` (header, controls, text) leaves parts out, for an iframe in a course page.
        ``notices`` are shown above the charts. A plain Panel layout under our own style sheet,
        not a Panel template: a template roughly doubles the server's work to open a session
        (its document is built per browser tab) and adds 0.9 MB of web components to load.
        """
        main = [self.main(show_text="text" not in hidden)]
        if notices:
            main.insert(0, pn.pane.HTML(notice_html(list(notices)), stylesheets=[page_css()],
                                        sizing_mode="stretch_width", name="notice"))
        body = pn.Row(css_classes=["app-body"], sizing_mode="stretch_width", margin=0)
        if "controls" not in hidden:
            body.append(pn.Column(self.controls(), width=300, css_classes=["app-sidebar"],
                                  margin=0, stylesheets=[page_css()]))
        body.append(pn.Column(*main, sizing_mode="stretch_width", css_classes=["app-main"],
                              margin=(10, 12), stylesheets=[page_css()],
                              styles={"flex": "1 1 0"}))   # fill the row, with or without text
        parts = [] if "header" in hidden else [
            pn.pane.HTML(header_html(), sizing_mode="stretch_width", margin=0,
                         stylesheets=[page_css()])]
        return pn.Column(*parts, body, sizing_mode="stretch_width", margin=0)


def _load_extension_in_notebook() -> None:
    """In Jupyter, load Panel's JavaScript once, so ``Explorer()`` just renders."""
    in_kernel = "ipykernel" in sys.modules and pn.state.curdoc is None
    if in_kernel and not pn.extension._loaded:
        pn.extension()


def notice_html(notices: list[str]) -> str:
    """The notice about adjusted URL values: plain text, escaped, never markup."""
    if not notices:
        return ""
    items = "".join(f"<li>{html.escape(n)}</li>" for n in notices[:8])
    more = f"<li>… and {len(notices) - 8} more.</li>" if len(notices) > 8 else ""
    return (f"<div class='notice' role='status'><b>Some link settings were adjusted:</b>"
            f"<ul>{items}{more}</ul></div>")


def create_page():
    """A fresh explorer page for one browser session, set up from the URL's query string.

    Controls (d_k, scaled, temperature, seed) are read with model.parse_query (bad values are
    clamped or ignored, with a visible notice) and written back to the URL on every change.
    ``?embed=1`` or ``?hide=header,controls,text`` gives a bare layout for an iframe.
    """
    # No BrowserInfo model: the page never asks for the browser's settings, and Panel's
    # would send seven messages back to the server while the page is being drawn.
    pn.extension(notifications=False, browser_info=False)
    doc = pn.state.curdoc
    if doc is not None:
        doc.template_variables["app_favicon"] = FAVICON
        doc.js_on_event("connection_lost", CustomJS(code=RECONNECT_JS))
    args = pn.state.session_args or {}
    values, hidden, notices = parse_query(args)
    explorer = Explorer(ExplorerState(**values))
    explorer.sync_url(doc)
    return explorer.page(hidden=hidden, notices=notices)


__all__ = ["Explorer", "create_page", "TITLE"]
