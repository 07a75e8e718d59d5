"""The served page and the notebook's ``Explorer``: the shared :class:`layout.View`, bound to an
:class:`state.ExplorerState` by Python callbacks of plain Bokeh widgets; a change recomputes
once and leaves as one message (on an argument's tab, two: that tab first)."""

from __future__ import annotations

import base64
import logging
import sys
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import panel as pn
import param
from bokeh.models import CustomJS, RadioButtonGroup, Spinner, Tabs
from tornado.ioloop import IOLoop

from . import core, seams, work
from .documents import held, on_click, served
from .argument import trains, with_page
from .layout import View, ViewOptions
from .runner import TrainingRunner
from .state import (CONTROLS, MAX_SEED, ExplorerState, Setting, parse_query,
                    preset_links, presenting, to_query)
from .style import ASSETS, script
from .prose.text import TITLE, fields_of, guide_html, notice_html, presets_html

log = logging.getLogger(__name__)

#: The presets' links (state.PRESETS), the same for every page.
PRESETS_HTML = presets_html(preset_links())

#: A wait for the worker pool or the build thread longer than this is said on the page.
BUSY_AFTER_MS = 300

_build_thread: ThreadPoolExecutor | None = None


def build_thread() -> ThreadPoolExecutor:
    """The process's one thread for building a session's argument tabs (View.new_argument:
    ~1 s of Bokeh models, in no document yet), so that a student's first click on a step
    does not hold the server's loop meanwhile; the loop only puts them in their panels."""
    global _build_thread
    if _build_thread is None:
        _build_thread = ThreadPoolExecutor(max_workers=1,
                                           thread_name_prefix="attention-scaling-build")
    return _build_thread


#: The tab icon, inline (no extra request): assets/favicon.svg drawn as a PNG
#: (scripts/favicon.py). Not the SVG itself: Chromium fetches and decodes the tab icon again
#: after every address update, and an SVG icon is a whole document to style, lay out and
#: paint on the page's main thread, once per slider step.
FAVICON = "data:image/png;base64," + base64.b64encode(
    (ASSETS / "favicon.png").read_bytes()).decode("ascii")


def _setter(state):
    """Apply a browser's change of controls ({name: value}) to ``state`` at once."""
    return lambda changes: state.param.update(
        **{k: v for k, v in changes.items() if getattr(state, k) != v})


def bind(widget, prop: str, state, name: str, apply=None) -> None:
    """Keep ``widget``'s property ``prop`` and the parameter ``name`` of ``state`` in sync
    both ways: a Selector parameter as its option's position (a slider's value, the active
    tab or button), an Integer as its value. A value from the browser that is not one (a
    forged message: 2.5, -1, NaN, past the bounds) puts the widget back where the state is.
    ``apply({name: value})`` applies a change from the browser (at once by default)."""
    shown, read = _codec(state.param[name])
    apply = apply or _setter(state)

    def from_browser(_attr, _old, new) -> None:
        value = read(new)
        if value is None:
            setattr(widget, prop, shown(getattr(state, name)))
            return
        with held(widget.document):
            apply({name: value})

    def to_browser(event) -> None:
        if getattr(widget, prop) != shown(event.new):   # not when the change came from here
            setattr(widget, prop, shown(event.new))

    widget.on_change(prop, from_browser)
    state.param.watch(to_browser, name)


def _codec(parameter):
    """(what a widget shows for a value, the value a widget's number stands for or None) of
    a Selector (positions in its options) or an Integer parameter (its bounds)."""
    if isinstance(parameter, param.Selector):
        options = list(parameter.objects)

        def option(new):
            position = _position(new, len(options))
            return None if position is None else options[position]
        return options.index, option
    low, high = parameter.bounds

    def count(new):
        value = _position(new, high + 1)
        return None if value is None or value < low else value
    return (lambda value: value), count


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
    :class:`ExplorerState` by Python callbacks. ``hidden`` and ``notices``: see View;
    ``library``: ViewOptions.library."""

    def __init__(self, state: ExplorerState | None = None, hidden=frozenset(), notices=(),
                 library: bool = True, **params):
        _load_extension_in_notebook()
        super().__init__(**params)
        self.state = s = state or ExplorerState()
        self.view = View(ViewOptions(
            values={c.name: getattr(s, c.name) for c in CONTROLS}, guide=guide_html(),
            hidden=frozenset(hidden), notice=notice_html(list(notices)), presets=PRESETS_HTML,
            on_click=on_click, library=library))
        self.charts = self.view.charts
        for name, widget in self.view.widgets.items():
            bind(widget, "active" if isinstance(widget, (Tabs, RadioButtonGroup)) else "value",
                 s, name, self.change)
        self.d_k_slider = self.view.widgets["d_k"]
        self.temperature_slider = self.view.widgets["temperature"]
        self.rule_buttons = self.view.widgets["rule"]
        #: The seed, for the presets (assets/js/presets.js sets it as it sets the others).
        self.seed_input = Spinner(low=0, high=MAX_SEED, step=1, value=s.seed, visible=False,
                                  name="seed-value")
        bind(self.seed_input, "value", s, "seed", self.change)
        self.view.sidebar.children.append(self.seed_input)
        if "controls" not in hidden:
            self.view.ready.append(CustomJS(args=dict(
                presets=self.view.presets, rows=self.view.address(self.seed_input)),
                code=script("presets")))
        buttons = self.view.buttons
        on_click(buttons["resample"], lambda: self.change({"seed": s.new_seed()}))
        on_click(buttons["fig3"], lambda: self.change(work.defaults()))
        # In the browser: the page's own URL (kept equal to the controls) to the clipboard,
        # with a fallback for pages served over plain http to other machines.
        buttons["copy"].js_on_event("button_click", CustomJS(
            args=dict(button=buttons["copy"]), code=script("copy-link")))
        # the argument's tabs: built when one is first shown, then drawn when shown (a
        # change redraws only the visible one)
        self._shown: dict = {}     # per tab: the setting it was drawn at
        self.training = TrainingRunner(self.view)   # the Training tab's runs and sweep
        self._page_pending = False
        self._asks_pending: set = set()    # the tabs whose question waits for the next turn
        self._pending: dict | None = None  # controls waiting for the worker pool (newest)
        self._computing = None             # the pool's job for this session, or None
        self._building = None              # the argument's tabs being built, or None
        self._building_busy = False        # whether the page says it waits for them
        self._built = None                 # the argument's tabs built, not yet in place
        self._steps_prepared = False       # present mode's steps computed in the pool
        self._busy_timer = None            # the callback that will say the page is waiting
        self._refresh()
        # the number of keys and the alignment change the result; the tab leaves the one
        # draw as it is and changes only the address and the argument's tabs
        s.param.watch(self._refresh, ["result", "rule"])
        s.param.watch(self._refresh_address, ["tab"])

    def _fields(self) -> dict[str, str]:
        fields = fields_of(self.state)
        fields["query"] = urllib.parse.urlencode(to_query(self.state))   # for write-url.js
        return fields

    def _refresh(self, *_events) -> None:
        """On the one draw's tab, the whole page in one message. On an argument's tab, that
        tab now and the rest of the page in a message of its own on the server's next turn
        (at once where there is no server loop), so that its new curves do not wait for the
        one draw's texts; changes that come first share that second message. (Splitting the
        one draw's change, the bars first, costs the browser a second frame per change and
        answers a drag later.)"""
        if with_page(self.state.tab):
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
        setting, fields = self.argument_setting(), self._fields()
        for key, tab in self.view.page_tabs.items():
            tab.draw(setting, fields)
            self._ask_later(key)
        self.view.show_seed(setting.seed)
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
        if with_page(key):
            return
        if self._served():
            if self._pending is not None:
                return          # drawn when the change waiting for the pool is applied
            if not work.ready(self.controls()):
                self._wait_for(self.controls())     # drawn once the pool has computed it
                return
            if key in self.view.unbuilt() and self._built is None:
                self._build_later([key])
                return
        with held(self.view.root.document, placing=True):
            if self.view.build_argument(self._wire_argument, self._built, [key]):
                self._built = None
                self._draw_unshown(key)
            if key in self.view.unbuilt():      # what was built was another tab
                self._build_later([key])
            elif self._shown.get(key) != self.argument_setting():
                self._draw(key)

    def _draw_unshown(self, key: str) -> None:
        """Draw each built tab but ``key`` that was never drawn, where the caches hold what it
        shows (once each: no empty chart)."""
        controls = self.controls()
        for other in self.view.argument.tabs:
            if other != key and other not in self._shown and (
                    not self._served() or work.ready({**controls, "tab": other})):
                self._draw(other)

    def _build_later(self, keys: list, busy: bool = True) -> None:
        """Build the argument's tabs ``keys`` on the build thread, then put them in place and
        draw the open one on the session's next turn (``busy``: the page says it is busy
        meanwhile). One build at a time: a tab asked for meanwhile waits for it."""
        if self._building is not None:
            if busy and not self._building_busy:
                self._building_busy = True
                self._busy(True)
            return
        self._building_busy = busy
        if busy:
            self._busy(True)
        self._building = job = build_thread().submit(self.view.new_argument, keys)
        doc = self.view.root.document

        def built(job) -> None:
            if doc.session_context.destroyed:
                return
            if job.exception() is None:
                doc.add_next_tick_callback(lambda: self._place_argument(job.result()))
            else:       # the next step asked for builds again
                log.error("Building the argument's tabs %s failed: %r", keys, job.exception())
                doc.add_next_tick_callback(self._build_failed)

        IOLoop.current().add_future(job, built)

    def build_rest(self, presenting: bool = False) -> None:
        """Once the page is shown with an argument's tab built, or in present mode
        (``presenting``: its steps are what a presenter walks through and prints) where the
        caches hold what every step shows: build the argument's other tabs on the build
        thread (the handout and a click on another step find them built and drawn). Any
        other page that opens on the one draw builds none until a step is asked for."""
        rest = self.view.unbuilt()
        if not (self._served() and rest and self._building is None and self._built is None):
            return
        if self.view.argument is None and presenting and not self._steps_prepared:
            controls = self.controls()
            missing = [k for k in rest if not work.ready({**controls, "tab": k})]
            if missing:
                self._prepare_steps([{**controls, "tab": k} for k in missing])
                return
        if self.view.argument is not None or presenting:
            self._build_later(rest, busy=False)

    def _prepare_steps(self, targets: list) -> None:
        """Compute in the pool what the steps ``targets`` (controls, each with its tab) show,
        then build them (:meth:`build_rest`: once, whatever the caches hold by then)."""
        jobs = [work.submit(target) for target in targets]
        doc = self.view.root.document

        def done(_job) -> None:
            if (not all(job.done() for job in jobs) or doc.session_context.destroyed
                    or self._steps_prepared):
                return
            self._steps_prepared = True
            for job in jobs:
                if job.exception() is None:
                    core.prime(job.result())
                else:
                    log.error("A computation in the worker pool failed: %r", job.exception())
            self.build_rest(True)

        for job in jobs:
            IOLoop.current().add_future(job, done)

    def _build_failed(self) -> None:
        self._building = None
        with held(self.view.root.document):
            if self._pending is None:
                self._busy(False)

    def _place_argument(self, argument) -> None:
        self._building, self._built = None, argument
        with held(self.view.root.document, placing=True):
            if self._pending is None:
                self._busy(False)
            self._refresh_argument()
            if self._built is not None:    # the open tab is the one draw or waits for the pool
                self.view.build_argument(self._wire_argument, self._built)
                self._built = None
                if with_page(self.state.tab):
                    self._draw_unshown(self.state.tab)
        self.build_rest()

    def _wire_argument(self, view, keys: list) -> None:
        if any(trains(key) for key in keys):
            on_click(view.train_button, self.start_training)

    def start_training(self) -> None:
        """Train at the controls' setting (:meth:`runner.TrainingRunner.start`)."""
        self.training.start(self.argument_setting())

    def _draw(self, key: str) -> None:
        setting = self.argument_setting()
        self.view.draw_tab(key, setting)
        self._shown[key] = setting      # the setting's rule's lines are highlighted
        if trains(key) and self.training.done_at(setting):
            self.training.show()        # a control the runs do not depend on: they still answer
        else:
            self._ask_later(key)

    def _ask_later(self, key: str) -> None:
        """Show tab ``key``'s question for the controls as they are once what they changed
        has gone to the browser: served, on the server's next turn, once however many
        changes come before it (a question looks at a width or temperature no chart
        shows, which may cost a first computation there). Training's costs nothing and
        is shown at once, before any run's answer to it."""
        doc = self.view.root.document
        if trains(key) or not served(doc):
            self._ask(key)
            return
        if not self._asks_pending:
            doc.add_next_tick_callback(self._ask_pending)
        self._asks_pending.add(key)

    def _ask_pending(self) -> None:
        if self._page_pending:      # the page's own refresh (its address, the one draw) first
            self.view.root.document.add_next_tick_callback(self._ask_pending)
            return
        if self._computing is not None:   # asked once the pool's job is applied
            return
        keys, self._asks_pending = self._asks_pending, set()
        controls = self.controls()
        with held(self.view.root.document):
            for key in sorted(keys):
                if trains(key) or not self._served() or work.ready(
                        {**controls, "tab": key}):
                    self._ask(key)
                elif with_page(key) or key == self.state.tab:
                    self._asks_pending.add(key)     # asked once the pool has computed it
                    self._wait_for(controls)
                else:
                    self._shown.pop(key, None)      # a hidden tab: drawn again when shown

    def _ask(self, key: str) -> None:
        tab = self.view.tab_view(key)
        s = self.argument_setting() if tab.with_page else self._shown[key]
        question = (tab.question(s, running=self.training.runs_at(s) is not None)
                    if tab.trains else tab.question(s))
        self.view.show_question(key, question)

    def _served(self) -> bool:
        return served(self.view.root.document)

    def controls(self) -> dict:
        """Every control's value (state.CONTROLS) as the state holds it."""
        return {c.name: getattr(self.state, c.name) for c in CONTROLS}

    def change(self, changes: dict) -> None:
        """Controls changed from the browser ({name: value}). Applied at once where
        everything they show is in the caches (work.ready) or where no server runs; else the
        worker pool computes it first (work.submit) while the page says so
        (View.show_busy), and it is applied when done. A change that comes meanwhile joins
        the one waiting: the newest controls win, and a job not yet started is for them."""
        target = {**self.controls(), **(self._pending or {}), **changes}
        if self._pending is None and target == self.controls():
            return      # the echo of a change made on the state (reset, URL): nothing to do
        if not self._served() or work.ready(target):
            if self._pending is not None:
                self._pending = None
                self._busy(False)
            self._apply(target)
            return
        self._wait_for(target)

    def _apply(self, target: dict) -> None:
        self.state.param.update(**{k: v for k, v in target.items()
                                   if getattr(self.state, k) != v})

    def _wait_for(self, target: dict) -> None:
        self._pending = target
        self._busy(True)
        if self._computing is None:
            self._computing = job = work.submit(target)
            job.target = dict(target)
            IOLoop.current().add_future(job, self._computed)

    def _busy(self, waiting: bool) -> None:
        """Say, BUSY_AFTER_MS after it began, that the page waits for the pool or the build
        thread (a wait shorter than that says nothing: no note flashing over the charts at
        every new seed); stop saying it."""
        doc = self.view.root.document
        if waiting and self._busy_timer is None and not self.view.busy_shown():
            self._busy_timer = doc.add_timeout_callback(self._busy_if_waiting, BUSY_AFTER_MS)
        elif not waiting:
            if self._busy_timer is not None and self._busy_timer in doc.session_callbacks:
                doc.remove_timeout_callback(self._busy_timer)
            self._busy_timer = None
            self.view.show_busy(False)

    def _busy_if_waiting(self) -> None:
        self._busy_timer = None
        if self._pending is not None or (self._building is not None and self._building_busy):
            self.view.show_busy(True)

    def _computed(self, job) -> None:
        """The pool's job is done (on the server's loop): its results join the caches, then
        the newest controls are applied on the document's next turn (or computed next)."""
        if job.exception() is None:
            core.prime(job.result())
        else:
            log.error("A computation in the worker pool failed: %r", job.exception())
        doc = self.view.root.document
        if doc is None or doc.session_context is None or doc.session_context.destroyed:
            self._computing = None
            return
        doc.add_next_tick_callback(lambda: self._after_computing(job))

    def _after_computing(self, job) -> None:
        self._computing = None
        target, self._pending = self._pending, None
        if target is None:
            self._ask_again()
            return
        failed = job.exception() is not None
        ready = not failed and work.ready(target)
        if not failed and not ready and target == job.target:
            # the pool computed these very controls and the caches still miss some of it (a
            # cache the worker's records do not reach): computed here, not asked for again
            log.warning("The worker pool's results for %s left the caches short: "
                        "computing on the server's loop", target)
            work.needs(target)
            ready = True
        if failed or ready:
            # (a failed job: drawn here, on the loop, rather than never)
            with held(self.view.root.document):
                self._busy(False)
                if target == self.controls():
                    self._refresh()     # the first view, waiting since the page was built
                else:
                    self._apply(target)
            self._ask_again()
        else:
            self._wait_for(target)

    def _ask_again(self) -> None:
        """The questions that waited for the pool's job, on the next turn."""
        if self._asks_pending and self._computing is None:
            self.view.root.document.add_next_tick_callback(self._ask_pending)

    def __panel__(self):
        return pn.pane.Bokeh(self.view.root, sizing_mode="stretch_width")

    def page(self):
        """The page in Panel's Bokeh pane: for a notebook, ``.servable()`` and
        ``pn.serve(create_page)``."""
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


def create_page(library: bool = True):
    """A fresh explorer page for one browser session, set up from the URL's query string, in
    Panel's Bokeh pane (for ``pn.serve``, ``.servable()`` and a notebook). ``library``:
    ViewOptions.library.

    Controls (state.CONTROLS) are read with state.parse_query (bad values are
    clamped or ignored, with a visible notice) and written back to the URL on every change.
    ``?embed=1`` or ``?hide=header,controls,text`` gives a bare layout for an iframe.
    """
    return _session_explorer(library).page()


def serve_session() -> None:
    """The page of one session of `attention-scaling serve`: :func:`create_page`'s explorer,
    without the programs' library (the page loads it as a file of its own), its layout put in
    the session's document (``pn.state.curdoc``) as it is (seams.add_root). For ``pn.serve``
    as the function it calls per session (it returns None)."""
    explorer = _session_explorer(library=False)
    seams.add_root(pn.state.curdoc, explorer.view.root, TITLE)


def _session_explorer(library: bool) -> Explorer:
    """The explorer of one session, from the URL's query string (see :func:`create_page`)."""
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
    explorer = Explorer(ExplorerState(**values), hidden=hidden, notices=notices,
                        library=library)
    explorer.sync_url(doc)
    if doc is not None:
        steps = presenting(args)
        doc.on_event("document_ready", lambda _event: explorer.build_rest(steps))
    return explorer


__all__ = ["Explorer", "create_page", "serve_session", "TITLE"]
