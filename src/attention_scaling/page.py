"""The served page and the notebook's ``Explorer``: the shared :class:`layout.View`, bound to an
:class:`state.ExplorerState` by Python callbacks of plain Bokeh widgets; a change recomputes
once and leaves as one message (on an argument's tab, two: that tab first)."""

from __future__ import annotations

import base64
import logging
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import panel as pn
from bokeh.models import Button, CustomJS, RadioButtonGroup, Slider, Spinner, Tabs
from tornado.ioloop import IOLoop

from . import core, quiz, seams
from .argument import TRAINING_STEPS
from .layout import View
from .state import (CONTROLS, MAX_SEED, TABS, ExplorerState, Setting, parse_query, preset_links,
                    to_query)
from .style import ASSETS, script
from .text import TITLE, guide_html, notice_html, presets_html

log = logging.getLogger(__name__)

#: The presets' links (state.PRESETS), the same for every page.
PRESETS_HTML = presets_html(preset_links())

#: A served training run's slice (argument.TRAINING_STEPS steps in all): the steps the training
#: thread takes before the page shows them, as long as this (at least a step of each rule).
TRAINING_SLICE_S = 0.02

_training_thread: ThreadPoolExecutor | None = None


def training_thread() -> ThreadPoolExecutor:
    """The process's one thread for training runs. Every served session's run goes through it
    a slice at a time, in the order the slices were handed over: the runs of several sessions
    take turns, and the server's event loop only shows their results (NumPy lets go of the
    GIL in the large products, so the loop keeps answering meanwhile). One step at d_k = 4096
    with 64 keys takes ~70 ms and ~130 MB of temporaries: one thread bounds both."""
    global _training_thread
    if _training_thread is None:
        _training_thread = ThreadPoolExecutor(max_workers=1,
                                              thread_name_prefix="attention-scaling-training")
    return _training_thread


#: After each slice the training thread rests as long as the slice took: training takes at
#: most half a core, whatever the number of runs, and the class's changes keep the rest (with
#: six runs at the heaviest setting, a bystander's answer stayed under twice its quiet time
#: only with the rest: tests/test_fairness.py).
TRAINING_REST = 1.0


def train_slice(runs: dict, stop: threading.Event, budget_s: float) -> None:
    """A step of each rule's runs in turn (rule -> core.SeededTraining: a step of each of its
    seeds' runs), again while ``budget_s`` has
    not passed, until every run is done; no step once ``stop`` is set. Then a rest of
    TRAINING_REST times the slice's time (cut short by ``stop``)."""
    start = time.perf_counter()
    end = start + budget_s
    while not all(run.done for run in runs.values()):
        for run in runs.values():
            if stop.is_set():
                return
            run.advance(1)
        if time.perf_counter() >= end:
            break
    stop.wait(TRAINING_REST * (time.perf_counter() - start))


#: The tab icon, inline (no extra request): assets/favicon.svg drawn as a PNG
#: (scripts/favicon.py). Not the SVG itself: Chromium fetches and decodes the tab icon again
#: after every address update, and an SVG icon is a whole document to style, lay out and
#: paint on the page's main thread, once per slider step.
FAVICON = "data:image/png;base64," + base64.b64encode(
    (ASSETS / "favicon.png").read_bytes()).decode("ascii")


@contextmanager
def held(doc):
    """The events of a change leave as one message. In a served session Panel's
    ``pn.io.unlocked`` writes them to the websocket as one PATCH-DOC when the block ends
    (Bokeh's ``Document.hold`` would send a message per changed model, each one serialised
    against every model of the document); elsewhere Bokeh's ``Document.hold``."""
    if doc is None:
        yield
        return
    if doc.session_context is not None:
        with pn.io.unlocked():
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


def bind_index(widget, state, name: str) -> None:
    """Keep a widget's ``active`` index (tabs, radio buttons) and a Selector parameter of
    ``state`` (its options in the widget's order) in sync both ways; an index that is not one
    (a forged message) puts the widget back."""
    keys = list(state.param[name].objects)

    def from_browser(_attr, _old, new) -> None:
        position = _position(new, len(keys))
        if position is None:
            widget.active = keys.index(getattr(state, name))
        elif keys[position] != getattr(state, name):
            with held(widget.document):
                setattr(state, name, keys[position])

    def to_browser(event) -> None:
        if widget.active != keys.index(event.new):
            widget.active = keys.index(event.new)

    widget.on_change("active", from_browser)
    state.param.watch(to_browser, name)


def bind_count(widget: Spinner, state, name: str) -> None:
    """Keep a number widget and an Integer parameter of ``state`` in sync both ways; a value
    outside the parameter's bounds (a forged message) puts the widget back."""
    low, high = state.param[name].bounds

    def from_browser(_attr, _old, new) -> None:
        value = _position(new, high + 1)
        if value is None or value < low:
            widget.value = getattr(state, name)
        elif value != getattr(state, name):
            with held(widget.document):
                setattr(state, name, value)

    def to_browser(event) -> None:
        if widget.value != event.new:
            widget.value = event.new

    widget.on_change("value", from_browser)
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
    """The attention-scaling explorer: the shared :class:`layout.View`, bound to an
    :class:`ExplorerState` by Python callbacks. ``hidden`` and ``notices``: see View."""

    def __init__(self, state: ExplorerState | None = None, hidden=frozenset(), notices=(),
                 **params):
        _load_extension_in_notebook()
        super().__init__(**params)
        self.state = s = state or ExplorerState()
        self.view = View(values={c.name: getattr(s, c.name) for c in CONTROLS},
                         guide=guide_html(), hidden=hidden, notice=notice_html(list(notices)),
                         presets=PRESETS_HTML)
        self.charts = self.view.charts
        for name, widget in self.view.widgets.items():
            if isinstance(widget, (Tabs, RadioButtonGroup)):
                bind_index(widget, s, name)
            else:
                bind_slider(widget, s, name)
        self.d_k_slider = self.view.widgets["d_k"]
        self.temperature_slider = self.view.widgets["temperature"]
        self.rule_buttons = self.view.widgets["rule"]
        #: The seed, for the presets (assets/js/presets.js sets it as it sets the others).
        self.seed_input = Spinner(low=0, high=MAX_SEED, step=1, value=s.seed, visible=False,
                                  name="seed-value")
        bind_count(self.seed_input, s, "seed")
        self.view.sidebar.children.append(self.seed_input)
        if "controls" not in hidden:
            self.view.ready.append(CustomJS(args=dict(
                presets=self.view.presets, rows=self.view.address(self.seed_input)),
                code=script("presets")))
        buttons = self.view.buttons
        on_click(buttons["resample"], s.draw_new_seed)
        on_click(buttons["fig3"], s.reset_to_fig3)
        # In the browser: the page's own URL (kept equal to the controls) to the clipboard,
        # with a fallback for pages served over plain http to other machines.
        buttons["copy"].js_on_event("button_click", CustomJS(
            args=dict(button=buttons["copy"]), code=script("copy-link")))
        # the argument's tabs: built when one is first shown, then drawn when shown (a
        # change redraws only the visible one)
        self._shown: dict = {}     # per tab: the setting it was drawn at
        self._training = None
        self._sweep = None          # the learning-rate sweep at the runs' setting, or None
        self._slice = None          # a served run's slice: (job, stop, show callback or None)
        self._stops_with = None     # the document whose end stops a served run
        self._page_pending = False
        self._asks_pending: set = set()    # the tabs whose question waits for the next turn
        self._refresh()
        # the number of keys and the alignment change the result; the tab leaves the one
        # draw as it is and changes only the address and the argument's tabs
        s.param.watch(self._refresh, ["result", "rule"])
        s.param.watch(self._refresh_address, ["tab"])

    def _fields(self) -> dict[str, str]:
        fields = self.state.text_fields()
        fields["query"] = urllib.parse.urlencode(to_query(self.state))   # for write-url.js
        return fields

    def _refresh(self, *_events) -> None:
        """On the one draw's tab, the whole page in one message. On an argument's tab, that
        tab now and the rest of the page in a message of its own on the server's next turn
        (at once where there is no server loop), so that its new curves do not wait for the
        one draw's texts; changes that come first share that second message. (Splitting the
        one draw's change, the bars first, costs the browser a second frame per change and
        answers a drag later.)"""
        if self.state.tab == "draw":
            self._refresh_page()
            return
        self._refresh_argument()
        doc = self.view.root.document
        if doc is None or doc.session_context is None:
            self._refresh_page()
        elif not self._page_pending:
            self._page_pending = True
            doc.add_next_tick_callback(self._refresh_page_held)

    def _refresh_page_held(self) -> None:
        self._page_pending = False
        with held(self.view.root.document):
            self._refresh_page()

    def _refresh_page(self) -> None:
        """Everything the controls set: the one draw's charts and texts, the seed, the
        visible argument tab (left as it is when drawn already)."""
        r = self.state.result
        self.charts.update(r, self.state.rule, self._fields())
        self.view.show_seed(r.seed)
        self._ask_later("draw")
        self._refresh_argument()

    def _refresh_address(self, *_events) -> None:
        self.charts.update_text(self._fields())
        self._refresh_argument()

    def argument_setting(self) -> Setting:
        """What the argument's tabs depend on: the controls as a state.Setting."""
        return Setting.of(self.state)

    def _refresh_argument(self, *_events) -> None:
        """Bring the visible tab of the argument up to date with the controls (the others
        when they are shown)."""
        key = self.state.tab
        if key == "draw":
            return
        with held(self.view.root.document):
            if self.view.build_argument(self._wire_argument):
                for other in TABS[1:]:     # drawn once, each: no empty chart
                    if other.key != key:
                        self._draw(other.key)
            if self._shown.get(key) != self.argument_setting():
                self._draw(key)

    def _wire_argument(self, view) -> None:
        on_click(view.train_button, self.start_training)

    def _draw(self, key: str) -> None:
        setting = self.argument_setting()
        self.view.draw_tab(key, setting)
        self._shown[key] = setting      # the setting's rule's lines are highlighted
        runs = self._runs_at(setting) if key == "training" else None
        if runs is not None and all(run.done for run in runs.values()):
            self._show_training()       # a control the runs do not depend on: they still answer
        else:
            self._ask_later(key)

    def _runs_at(self, s: Setting) -> dict | None:
        """The training runs on show, done or under way, where they are trained at ``s`` (its
        width, temperature, keys and seed: the rule and the alignment do not change them)."""
        if self._training is None:
            return None
        runs, at = self._training
        same = at == (s.d_k, s.temperature, s.keys) and all(
            run.seed == s.seed for run in runs.values())
        return runs if same else None

    def _ask_later(self, key: str) -> None:
        """Show tab ``key``'s question for the controls as they are once what they changed
        has gone to the browser: served, on the server's next turn, once however many
        changes come before it (a question looks at a width or temperature no chart
        shows, which may cost a first computation there). Training's costs nothing and
        is shown at once, before any run's answer to it."""
        doc = self.view.root.document
        if key == "training" or doc is None or doc.session_context is None:
            self._ask(key)
            return
        if not self._asks_pending:
            doc.add_next_tick_callback(self._ask_pending)
        self._asks_pending.add(key)

    def _ask_pending(self) -> None:
        if self._page_pending:      # the page's own refresh (its address, the one draw) first
            self.view.root.document.add_next_tick_callback(self._ask_pending)
            return
        keys, self._asks_pending = self._asks_pending, set()
        with held(self.view.root.document):
            for key in sorted(keys):
                self._ask(key)

    def _ask(self, key: str) -> None:
        if key == "draw":
            r = self.state.result
            question = quiz.draw_question(r.d_k, r.temperature, r.seed, len(r.raw_logits),
                                          r.align)
        elif key == "training":
            s = self._shown[key]
            question = quiz.training_question(s.d_k, s.temperature,
                                              running=self._runs_at(s) is not None)
        else:
            question = self.view.argument.tabs[key].question(self._shown[key])
        self.view.show_question(key, question)

    def start_training(self) -> None:
        """Train one head under each rule at the current d_k, T and keys, from the state's
        seed and the next (core.TRAIN_SEEDS seeds), each rule at its own learning rate
        (core.rule_learning_rate). Served, the steps run in slices on the process's training thread
        (:func:`training_thread`) while the page's curves grow, each slice shown on the
        server's loop, until the runs end or :meth:`stop_training`; then, the same way, the
        learning-rate sweep at their setting (core.LearningRateSweep), its points shown as they
        arrive. A sweep kept from before shows at once. Elsewhere (a notebook, a document
        with no session) the runs all at once, and the sweep only if one is kept."""
        if self._slice is not None:
            if self._sweep is None or self._sweep.done:
                return       # one run at a time (the button is disabled meanwhile)
            self._end_slice()            # a sweep under way: Train again ends it
        s = self.argument_setting()
        d_k, t, n = s.d_k, s.temperature, s.keys
        runs = {rule: core.start_seeds(d_k, rule, s.seed, temperature=t,
                                       steps=TRAINING_STEPS, n_keys=n)
                for rule in core.RULES}
        self._training = (runs, (d_k, t, n))
        self._sweep = core.cached_sweep(d_k, t, s.seed, n, steps=TRAINING_STEPS)
        self.view.train_button.disabled = True
        doc = self.view.root.document
        if doc is None or doc.session_context is None:
            for run in runs.values():
                run.advance(TRAINING_STEPS + 1)
            self._show_training()
            return
        if doc is not self._stops_with:
            self._stops_with = doc
            doc.on_event("connection_lost", lambda event: self.stop_training())
            doc.on_session_destroyed(lambda session_context: self.stop_training(doc=False))
        self._show_training()
        self.view.show_question("training", quiz.training_question(d_k, t, running=True))
        self._next_slice(runs, threading.Event())

    def _next_slice(self, runs: dict, stop: threading.Event) -> None:
        """Hand the next slice of ``runs`` to the training thread; once it is done, show it
        on the server's loop (Tornado runs the done callback there)."""
        job = training_thread().submit(train_slice, runs, stop, TRAINING_SLICE_S)
        self._slice = (job, stop, None)
        IOLoop.current().add_future(job, lambda job: self._slice_done(job, runs, stop))

    def _slice_done(self, job, runs: dict, stop: threading.Event) -> None:
        if stop.is_set():
            return
        if job.exception() is not None:
            log.error("A training run failed: %r", job.exception())
            self.stop_training()
            return
        shown = self.view.root.document.add_next_tick_callback(
            lambda: self._show_slice(runs, stop))
        self._slice = (job, stop, shown)

    def _show_slice(self, runs: dict, stop: threading.Event) -> None:
        if stop.is_set():
            return
        self._slice = None
        if all(run.done for run in runs.values()) and self._sweep is None:
            first = next(iter(runs.values()))
            self._sweep = core.start_sweep(first.d_k, first.temperature, first.seed,
                                           first.n_keys, steps=TRAINING_STEPS)
        with held(self.view.root.document):
            self._show_training()
        if not all(run.done for run in runs.values()):
            self._next_slice(runs, stop)
        elif not self._sweep.done:
            self._next_slice({"sweep": self._sweep}, stop)

    def stop_training(self, doc: bool = True) -> None:
        """End a served run where it is: no step after the one under way, no slice left to
        show, and the Train button usable again on the server's next turn (Bokeh lets a
        served document change only in its callbacks); ``doc=False``: the session is gone,
        its document is left as it is."""
        if self._slice is None:
            return
        self._end_slice(doc)
        document = self.view.root.document
        if doc and document is not None:
            document.add_next_tick_callback(self._enable_train)

    def _end_slice(self, doc: bool = True) -> None:
        """No step after the one under way and no slice left to show (``doc``: its show
        callback taken off the document)."""
        job, stop, shown = self._slice
        self._slice = None
        stop.set()
        job.cancel()
        document = self.view.root.document
        if (doc and document is not None and shown is not None
                and shown in document.session_callbacks):
            document.remove_next_tick_callback(shown)

    def _enable_train(self) -> None:
        if self._slice is None:
            self.view.train_button.disabled = False

    def _show_training(self) -> None:
        runs, (d_k, t, n) = self._training
        if self.view.show_training(runs, d_k, t, n, self._sweep):
            self.view.train_button.disabled = False

    def __panel__(self):
        return pn.pane.Bokeh(self.view.root, sizing_mode="stretch_width")

    def page(self):
        """The page as Panel serves it (the View's Bokeh layout in a pane)."""
        return self.__panel__()

    def sync_url(self, doc=None) -> None:
        """Keep the browser's query string equal to the controls (all of them, live): from the
        document's first display (the full state, seed included) and on every change. Written
        in the browser (assets/js/write-url.js) from the text fields' "query": Panel's
        Location would do it from the server, and the browser would then send the address
        back after every change, a second message each way."""
        write = CustomJS(args=dict(source=self.charts.text_source), code=script("write-url"))
        self.charts.text_source.js_on_change("data", write)
        if doc is not None:
            doc.js_on_event("document_ready", write, *self.view.ready)


def _load_extension_in_notebook() -> None:
    """In Jupyter, load Panel's JavaScript once, so ``Explorer()`` just renders."""
    in_kernel = "ipykernel" in sys.modules and pn.state.curdoc is None
    if in_kernel and not seams.panel_extension_loaded():
        pn.extension("mathjax")


def create_page():
    """A fresh explorer page for one browser session, set up from the URL's query string.

    Controls (state.CONTROLS) are read with state.parse_query (bad values are
    clamped or ignored, with a visible notice) and written back to the URL on every change.
    ``?embed=1`` or ``?hide=header,controls,text`` gives a bare layout for an iframe.
    """
    # No BrowserInfo model: the page never asks for the browser's settings, and Panel's
    # would send seven messages back to the server while the page is being drawn. "mathjax":
    # the page loads BokehJS's own MathJax bundle, from this server, for the formulas (Panel
    # looks for math in the document's roots only, not in the Divs inside them).
    pn.extension("mathjax", notifications=False, browser_info=False)
    doc = pn.state.curdoc
    if doc is not None:
        doc.template_variables["app_favicon"] = FAVICON
        doc.js_on_event("connection_lost", CustomJS(code=script("reconnect")))
    args = pn.state.session_args or {}
    values, hidden, notices = parse_query(args)
    explorer = Explorer(ExplorerState(**values), hidden=hidden, notices=notices)
    explorer.sync_url(doc)
    return explorer.page()


__all__ = ["Explorer", "create_page", "TITLE"]
