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
from bokeh.models import Button, CustomJS, Slider, Switch

from .charts import ASSETS, READ_FIELDS_JS, View
from .model import TITLE, ExplorerState, guide_html, parse_query, to_query

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


def bind_slider(slider: Slider, state, name: str) -> None:
    """Keep a position slider and a Selector parameter of ``state`` in sync both ways. A
    position that is not one (a forged message) puts the handle back where the state is."""
    values = list(state.param[name].objects)

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


def bind_switch(switch: Switch, state, name: str) -> None:
    """Keep a Bokeh switch and a Boolean parameter of ``state`` in sync both ways."""

    def from_browser(_attr, _old, new) -> None:
        if isinstance(new, bool) and new != getattr(state, name):
            with held(switch.document):
                setattr(state, name, new)

    def to_browser(event) -> None:
        if switch.active != event.new:
            switch.active = event.new

    switch.on_change("active", from_browser)
    state.param.watch(to_browser, name)


def on_click(button: Button, action) -> None:
    """Run ``action()`` (held: one message) when ``button`` is clicked."""

    def clicked(_event) -> None:
        with held(button.document):
            action()

    button.on_event("button_click", clicked)


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
    """The attention-scaling explorer: the shared :class:`charts.View`, bound to an
    :class:`ExplorerState` by Python callbacks. ``hidden`` and ``notices``: see View."""

    def __init__(self, state: ExplorerState | None = None, hidden=frozenset(), notices=(),
                 **params):
        _load_extension_in_notebook()
        super().__init__(**params)
        self.state = s = state or ExplorerState()
        self.view = View(
            positions={name: list(s.param[name].objects).index(getattr(s, name))
                       for name in ("d_k", "temperature")},
            scaled=s.scaled, guide=guide_html(), hidden=hidden,
            notice=notice_html(list(notices)))
        self.charts = self.view.charts
        self.d_k_slider = self.view.d_k_slider
        self.temperature_slider = self.view.temperature_slider
        self.scaled_switch = self.view.scaled_switch
        bind_slider(self.d_k_slider, s, "d_k")
        bind_slider(self.temperature_slider, s, "temperature")
        bind_switch(self.scaled_switch, s, "scaled")
        buttons = self.view.buttons
        on_click(buttons["resample"], s.draw_new_seed)
        on_click(buttons["fig3"], s.reset_to_fig3)
        # In the browser: the page's own URL (kept equal to the controls) to the clipboard,
        # with a fallback for pages served over plain http to other machines.
        buttons["copy"].js_on_event("button_click", CustomJS(
            args=dict(button=buttons["copy"]), code=COPY_LINK_JS))
        self._refresh()
        s.param.watch(self._refresh, ["result", "scaled"])

    def _refresh(self, *_events) -> None:
        r = self.state.result
        fields = self.state.text_fields()
        fields["query"] = urllib.parse.urlencode(to_query(self.state))   # for URL_JS
        self.charts.update(r, self.state.scaled, fields)
        self.view.show_seed(r.seed)

    def __panel__(self):
        return pn.pane.Bokeh(self.view.root, sizing_mode="stretch_width")

    def page(self):
        """The page as Panel serves it (the View's Bokeh layout in a pane)."""
        return self.__panel__()

    def sync_url(self, doc=None) -> None:
        """Keep the browser's query string equal to the controls (all of them, live): from the
        document's first display (the full state, seed included) and on every change."""
        write = CustomJS(args=dict(source=self.charts.text_source), code=URL_JS)
        self.charts.text_source.js_on_change("data", write)
        if doc is not None:
            doc.js_on_event("document_ready", write)


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
    explorer = Explorer(ExplorerState(**values), hidden=hidden, notices=notices)
    explorer.sync_url(doc)
    return explorer.page()


__all__ = ["Explorer", "create_page", "TITLE"]
