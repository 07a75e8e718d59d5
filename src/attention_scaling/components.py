"""Parts of the explorer's layout that build their own models and programs, for
:class:`layout.View` to assemble."""

from __future__ import annotations

from bokeh.layouts import column, row
from bokeh.models import (Button, CustomJS, Div, InlineStyleSheet, RadioButtonGroup, Slider,
                          Tabs, Toggle)

from .argument import TAB_VIEWS, Argument, with_page
from .prose import quiz
from .prose.lead import try_html
from .prose.text import TITLE, idle_note_html
from .state import CONTROLS, TABS, Setting
from .style import percent_formatter, position_formatter, script

#: A question's block (QuestionPanel.block): a card; in present mode, where the page sets
#: ``--as-ask-order: -1``, the first thing of its step.
ASK_CSS = (":host { order: var(--as-ask-order, 0); border: 1px solid var(--as-theme-line, #BBBBBD); "
           "border-radius: 6px; background: var(--as-theme-card, #F5F7FA); padding: 4px 0; }")
#: The narrowest a question's three choices are laid out (CSS px): on a phone the Reveal
#: button goes below them.
CHOICES_MIN_WIDTH = 250
#: A choice's label may take two lines where the row is narrower still (a 320 px phone).
CHOICES_CSS = ":host .bk-btn { white-space: normal; }"
#: A question's guess of a percentage: the labels of its slider's positions.
PERCENTS = tuple(f"{p}%" for p in range(101))
#: For the rows of charts: wrap onto the next line where the screen is too narrow for both.
WRAP_CSS = ":host { flex-wrap: wrap !important; }"
#: "More detail" closed: the column takes no room and is hidden, from screen readers too;
#: printed, it is open.
MORE_CSS = (":host(:not(.open)) { max-height: 0; overflow: hidden; visibility: hidden; "
            "margin: 0 !important; } @media print { :host { max-height: none !important; "
            "overflow: visible !important; visibility: visible !important; } }")


def wrapping_row(*children):
    """A row of charts that wraps onto the next line where the screen is too narrow."""
    return row(*children, sizing_mode="stretch_width",
               stylesheets=[InlineStyleSheet(css=WRAP_CSS)])


def more_detail(key: str, button_css: list, *children):
    """A "More detail" disclosure holding ``children``: a toggle over a column, closed
    (assets/js/disclosure.js, MORE_CSS)."""
    body = column(*children, name=f"{key}-more", css_classes=["more"],
                  sizing_mode="stretch_width", stylesheets=[InlineStyleSheet(css=MORE_CSS)])
    toggle = Toggle(label="More detail", active=False, name=f"{key}-more-toggle",
                    margin=(10, 10, 5, 10), width=160,
                    stylesheets=[*button_css, InlineStyleSheet(css=NO_PRINT_CSS)])
    toggle.js_on_change("active", CustomJS(args=dict(toggle=toggle, body=body),
                                           code=script("disclosure")))
    return column(toggle, body, sizing_mode="stretch_width")


def position_slider(title: str, labels: list[str], position: int, name: str,
                    stylesheets=()) -> Slider:
    """A slider over positions 0 … len(labels) - 1 that shows ``labels[position]``."""
    return Slider(title=title, start=0, end=len(labels) - 1, step=1, value=position, name=name,
                  format=position_formatter(labels), sizing_mode="stretch_width",
                  margin=(5, 10), stylesheets=list(stylesheets))


#: The controls in two columns on a tablet, where they sit above the charts.
SIDEBAR_CSS = """
@media screen and (min-width: 600px) and (max-width: 899px) {
  :host { display: grid !important; grid-template-columns: 1fr 1fr; column-gap: 12px;
          align-items: end; }
}
"""
#: The controls of the phone's bar (``BAR``): on a screen narrower than 900 px they stay at
#: the top of the screen while the page scrolls under them, so that the charts are in view
#: while a slider moves; the other controls fold behind "More controls" (MORE_CONTROLS_CSS),
#: and open they scroll inside the bar, which leaves the lower part of the screen to the
#: charts.
STICKY_CSS = """
@media screen and (max-width: 899px) {
  :host { position: sticky !important; top: 0; z-index: 10; max-height: 70vh;
          overflow-y: auto; box-shadow: 0 2px 4px rgba(16, 42, 67, 0.2);
          padding-top: 4px !important; }
}
"""
#: The controls behind "More controls": shown beside the charts on a wide screen; on a
#: narrow one, shown only open (assets/js/disclosure.js), closed they take no room and are
#: hidden from screen readers too.
MORE_CONTROLS_CSS = """
:host { grid-column: 1 / -1; }
@media (max-width: 899px) { :host(:not(.open)) { display: none !important; } }
"""
#: The "More controls" button: on a narrow screen only, never printed.
NARROW_ONLY_CSS = """
:host { grid-column: 1 / -1; }
@media (min-width: 900px) { :host { display: none !important; } }
@media print { :host { display: none !important; } }
"""
#: The controls on the phone's bar, by name (state.CONTROLS): the head width and the rule.
BAR = ("d_k", "rule")
#: Parts a printed page leaves out (with the controls): the download buttons.
NO_PRINT_CSS = " @media print { :host { display: none !important; } }"
#: The tabs, by key (rows of state.TABS).
TAB = {t.key: t for t in TABS}


def ask_html(question: quiz.Question) -> str:
    """A question as its step shows it (the served page and the offline copy)."""
    return f"<p class='ask-text'><b>Predict.</b> {question.ask}</p>"


class PresentMode:
    """Present mode (assets/js/present.js; URL key present=1): one step of the argument per
    screen, each tab of state.TABS with its lead, its main charts (the row's ``charts``)
    filling the screen, its question if it has one and only the controls of its row's
    ``present`` (and the models its class's ``present_extra`` names); keys move between
    steps. ``button`` enters it; its actions, once placed (:meth:`place`), leave it
    ("present-leave") and print the handout ("present-print"), one page per step."""

    def __init__(self, button_css) -> None:
        self._button_css = button_css
        self.button = self._button("Present", "present")

    def _button(self, label: str, name: str) -> Button:
        return Button(label=label, name=name, sizing_mode="stretch_width", margin=(5, 10),
                      stylesheets=self._button_css)

    @staticmethod
    def steps() -> dict:
        """Each step's charts, controls and other models shown, by tab key."""
        return {t.key: dict(charts=list(t.charts), controls=list(t.present),
                            extra=list(getattr(TAB_VIEWS.get(t.key), "present_extra", ())))
                for t in TABS}

    def place(self, *, tabs, root, body, host, answers: Button, at_top: bool) -> CustomJS:
        """Put its actions (leave, print, and the handout's hidden request for every answer,
        ``answers``) in ``host`` (at its top where ``at_top``: a page without its controls)
        and wire its buttons and the tabs to the program. Returns the program that opens it
        from the address, once the page is shown."""
        leave = self._button("Leave present mode (Esc)", "present-leave")
        handout = self._button("Print handout", "present-print")
        actions = column(leave, handout, answers, name="present-actions", visible=False,
                         sizing_mode="stretch_width", margin=(10, 0, 0, 0))
        (host.children.insert(0, actions) if at_top else host.children.append(actions))
        args = dict(tabs=tabs, keys=[t.key for t in TABS], root=root, body=body,
                    actions=actions, steps=self.steps())
        for action, button in (("enter", self.button), ("leave", leave),
                               ("print", handout)):
            button.js_on_event("button_click", CustomJS(args=dict(args, action=action),
                                                        code=script("present")))
        step = CustomJS(args=dict(args, action="step"), code=script("present"))
        tabs.js_on_change("active", step)
        tabs.js_on_change("tabs", step)
        return CustomJS(args=dict(args, action="ready"), code=script("present"))


class QuestionPanel:
    """The steps' predict-then-reveal questions, one program for all (assets/js/reveal.js):
    each step's block (:meth:`block`), the question shown in it (:meth:`show`) and its answer
    put away until Reveal. ``on_click(button, action)`` (documents.on_click), on a page with
    Python behind it: there each answer stays in Python until its Reveal, or the handout,
    asks for it (:meth:`reveal`, :meth:`reveal_all`); without it (the offline copy) the answers
    wait in the page, in their Reveal buttons' tags. ``asks``: each step's models by tab key;
    ``questions``: each step's question shown (quiz.Question)."""

    def __init__(self, css, button_css, on_click=None) -> None:
        self._css, self._button_css, self._on_click = css, button_css, on_click
        self.asks: dict = {}
        self.questions: dict = {}
        self._program = CustomJS(args=dict(asks={}, answers=None), code=script("reveal"))

    def block(self, key: str) -> list:
        """Tab ``key``'s block, if its row of state.TABS has a question: the question, a
        guess (a slider of percentages or buttons, the row's ``ask``), Reveal, and the
        answer, empty until Reveal; the answer waits in Reveal's tags, out of the page's
        text, put there by :meth:`show` or, with Python behind the page, only on Reveal."""
        kind = TAB[key].ask
        if not kind:
            return []
        css, buttons = self._css, self._button_css
        text = Div(text="", name=f"{key}-ask-text", stylesheets=css, disable_math=True,
                   sizing_mode="stretch_width", margin=(5, 10, 0, 10))
        if kind == "percent":
            guess = Slider(title="Your guess", start=0, end=100, step=1, value=50,
                           name=f"{key}-guess", sizing_mode="stretch_width", margin=(5, 10),
                           format=percent_formatter(), stylesheets=buttons)
        else:
            # at least as wide as three choices need: on a phone, Reveal wraps below them
            guess = RadioButtonGroup(labels=["", "", ""], active=None, name=f"{key}-guess",
                                     margin=(5, 10), sizing_mode="stretch_width",
                                     min_width=CHOICES_MIN_WIDTH,
                                     stylesheets=[*buttons, InlineStyleSheet(css=CHOICES_CSS)])
        reveal = Button(label="Reveal", button_type="primary", name=f"{key}-reveal", width=120,
                        margin=(5, 10), stylesheets=buttons)
        answer = Div(text="", name=f"{key}-answer", stylesheets=css, disable_math=True,
                     sizing_mode="stretch_width", margin=(0, 10))
        self.asks[key] = dict(text=text, guess=guess, reveal=reveal, answer=answer)
        self._program.args = {**self._program.args, "asks": {
            **self._program.args["asks"], key: {**self.asks[key], "kind": kind}}}
        reveal.js_on_event("button_click", self._program)
        reveal.js_on_change("tags", self._program)
        if self._on_click is not None:
            self._on_click(reveal, lambda: self.reveal(key))
        return [column(text, row(guess, reveal, sizing_mode="stretch_width",
                                 stylesheets=[InlineStyleSheet(css=WRAP_CSS)]),
                       answer, name=f"{key}-ask", css_classes=["ask"], margin=(8, 10),
                       sizing_mode="stretch_width",
                       stylesheets=[*css, InlineStyleSheet(css=ASK_CSS)])]

    def answers_button(self) -> Button:
        """The handout's request for every step's answer (assets/js/present.js clicks it once
        the steps are gathered): hidden; with Python behind the page, one click has
        :meth:`reveal_all` send them all in one message; then, or at once where they wait in
        the page, assets/js/reveal.js shows each without a guess."""
        answers = Button(label="Every answer", name="present-answers", visible=False)
        self._program.args = {**self._program.args, "answers": answers}
        answers.js_on_event("button_click", self._program)
        answers.js_on_change("tags", self._program)
        if self._on_click is not None:
            self._on_click(answers, self.reveal_all)
        return answers

    def show(self, key: str, question: quiz.Question | None) -> None:
        """Tab ``key``'s question (quiz.Question, or None: it has none), its answer put away
        until Reveal (kept here with Python behind the page, :meth:`reveal`; else in Reveal's
        tags): the answer shown and the guess are left as they are while the question stays
        the same."""
        parts = self.asks.get(key)
        if parts is None or question is None or self.questions.get(key) == question:
            return
        self.questions[key] = question
        parts["text"].text = ask_html(question)
        if question.choices and list(question.choices) != parts["guess"].labels:
            parts["guess"].labels = list(question.choices)
        parts["reveal"].tags = [] if self._on_click is not None else [question.answer]
        if parts["answer"].text:
            parts["answer"].text = ""

    def reveal(self, key: str) -> None:
        """Tab ``key``'s answer to the question shown, into its Reveal button's tags: on a
        page with Python behind it, the one way an answer reaches the browser (on Reveal);
        assets/js/reveal.js then shows it."""
        question, parts = self.questions.get(key), self.asks.get(key)
        if question is not None and parts is not None:
            parts["reveal"].tags = [question.answer]

    def reveal_all(self) -> None:
        """Every step's answer to the question shown, for the handout, into the tags of its
        request's button (:meth:`answers_button`): [the request's number (each request is
        answered by a change), [[key, answer], ...]]."""
        answers = self._program.args["answers"]
        number = answers.tags[0] + 1 if answers.tags else 1
        answers.tags = [number, [[key, question.answer] for key, question in self.questions.items()
                                 if key in self.asks]]

    @staticmethod
    def guesses(asks: dict) -> tuple[list, list]:
        """The questions' guesses (``asks``: :meth:`block`'s models by tab) for
        assets/js/a11y.js: the sliders with their labels, the groups of buttons with their
        name."""
        sliders, groups = [], []
        for parts in asks.values():
            guess = parts["guess"]
            if isinstance(guess, Slider):
                sliders.append([guess, list(PERCENTS)])
            else:
                groups.append([guess, "Your guess"])
        return sliders, groups


class Downloads:
    """Each tab's row of three buttons that take it away (assets/js/download.js), named after
    the controls of its row of state.TABS as ``widgets`` (name -> widget) show them (the
    choice and option controls shown; the others at their defaults) and the text fields of
    ``text_source``."""

    def __init__(self, widgets: dict, text_source, button_css) -> None:
        self._text_source, self._button_css = text_source, button_css
        #: name -> [widget, the value shown at each position]
        self._named = {ctl.name: [w, [ctl.show(v) for v in ctl.values] if ctl.kind == "choice"
                                  else list(ctl.values)]
                       for ctl in CONTROLS if (w := widgets.get(ctl.name)) is not None
                       and ctl.kind in ("choice", "option")}
        self._defaults = {ctl.name: ctl.show(ctl.default) for ctl in CONTROLS
                          if ctl.kind == "choice" and ctl.name not in self._named}

    def row(self, tab: str, figures: list, tables: list, keyed=None, run=None):
        """The row of tab ``tab``: its ``figures`` as PNG and SVG under the page's and the
        tab's titles and the setting they show, the columns of ``tables`` ((source, [[column,
        header], ...]) in order) as CSV; ``keyed``, a source with a "key" column, gives the
        number of keys where no control does; ``run``, the training source, names the file
        after its run's setting (its tags)."""
        names = TAB[tab].names
        buttons = {}
        for kind in ("png", "svg", "csv"):
            name = f"download-{kind}" if with_page(tab) else f"download-{kind}-{tab}"
            buttons[kind] = button = Button(label=f"Download {kind.upper()}", name=name,
                                            margin=(5, 10), width=140,
                                            stylesheets=self._button_css)
            button.js_on_event("button_click", CustomJS(args=dict(
                kind=kind, tab=tab, parts=list(names),
                controls={k: v for k, v in self._named.items() if k in names},
                defaults=self._defaults, text_source=self._text_source,
                figures=figures, tables=[[src, cols] for src, cols in tables], keyed=keyed,
                run=run, heading=f"{TITLE}: {TAB[tab].title}", labels={
                    ctl.name: [ctl.label, {str(v): ctl.show(v) for v in ctl.values}
                               if ctl.kind == "option" else {}]
                    for ctl in CONTROLS if ctl.name in names}),
                code=script("download")))
        return row(*buttons.values(), css_classes=["no-print"], name=f"downloads-{tab}",
                   stylesheets=[InlineStyleSheet(css=WRAP_CSS + NO_PRINT_CSS)])


class Sidebar:
    """The controls: a widget per choice and option row of state.CONTROLS (``widgets``, by
    name; ``controls`` names those shown, all by default) at ``values``, under each the note
    that says why the open tab does not use it (``idle_notes``; none where ``hide_text``),
    the seed (``seed_div``) and the sidebar's ``buttons``, in one column (``column``) whose
    controls other than BAR's fold behind "More controls" (``more_controls``) on a narrow
    screen; ``unfold`` is the fold's browser program."""

    def __init__(self, values: dict, controls, buttons: dict, seed_div, css, button_css,
                 hide_text: bool = False) -> None:
        self._css, self._button_css, self._hide_text = css, button_css, hide_text
        self._buttons = buttons
        #: The widget of each choice and option control, by the control's name.
        self.widgets: dict = {}
        #: Under each control, why the open tab does not use it (assets/js/idle.js).
        self.idle_notes: dict = {}
        bar_rows, rows, argument_rows = self._controls(values, controls)
        self.unfold = self._place(bar_rows, rows, argument_rows, buttons, seed_div)

    def _place(self, bar_rows: list, rows: list, argument_rows: list, buttons: dict,
               seed_div) -> CustomJS:
        """The sidebar (``self.column``): beside the charts on a wide screen, above them on a
        narrow one (assets/style.css, layout.LAYOUT_CSS), where the controls of BAR stay in
        view and the others fold behind "More controls" (STICKY_CSS). Returns the fold's
        browser program."""
        css = self._css
        more = column(
            *rows, seed_div, *(self._with_note(button, "seed") if key == "resample"
                               else button for key, button in buttons.items()),
            *argument_rows, name="more-controls", css_classes=["app-more-controls"],
            sizing_mode="stretch_width", margin=0, stylesheets=[
                *css, InlineStyleSheet(css=SIDEBAR_CSS + MORE_CONTROLS_CSS)])
        #: On a narrow screen, opens and closes the controls other than BAR's.
        self.more_controls = Toggle(
            label="More controls", active=False, name="more-controls-toggle",
            sizing_mode="stretch_width", margin=(5, 10), stylesheets=[
                *self._button_css, InlineStyleSheet(css=NARROW_ONLY_CSS)])
        unfold = CustomJS(args=dict(toggle=self.more_controls, body=more),
                          code=script("disclosure"))
        self.more_controls.js_on_change("active", unfold)
        self.column = column(
            *bar_rows, self.more_controls, more,
            sizing_mode="stretch_width", css_classes=["app-sidebar"],
            stylesheets=[*css, InlineStyleSheet(css=SIDEBAR_CSS + STICKY_CSS)], margin=0)
        return unfold

    def _controls(self, values: dict, controls) -> tuple[list, list, list]:
        """A widget per choice and option row of CONTROLS (``self.widgets``): the rows of
        the controls of BAR, of the one draw's other controls, and of the argument's (under
        their heading)."""
        css, controls_css = self._css, self._button_css
        bar_rows, rows, argument_rows = [], [], []
        for control in CONTROLS:
            if control.kind not in ("choice", "option") or (
                    controls is not None and control.name not in controls):
                continue
            position = control.values.index(values[control.name])
            labels = [control.show(v) for v in control.values]
            if control.kind == "choice":
                widget = shown = position_slider(control.label, labels, position, control.name,
                                                 controls_css)
            else:
                widget = RadioButtonGroup(labels=labels, name=control.name, active=position,
                                          margin=(5, 10), sizing_mode="stretch_width",
                                          stylesheets=controls_css)
                shown = column(Div(text=f"{control.label}", disable_math=True,
                                   margin=(5, 10, 0, 10), stylesheets=css,
                                   css_classes=["control-label"]), widget,
                               sizing_mode="stretch_width", name=f"{control.name}-control")
            (argument_rows if control.group == "argument" else
             bar_rows if control.name in BAR else rows).append(
                self._with_note(shown, control.name))
            self.widgets[control.name] = widget
        if argument_rows:
            argument_rows.insert(0, Div(
                text="<h2 class='group'>Trained keys</h2>", stylesheets=css,
                disable_math=True, margin=(12, 10, 0, 10),
                sizing_mode="stretch_width"))
        return bar_rows, rows, argument_rows

    def address(self, seed, seeds=None) -> list[dict]:
        """The controls this page reads from its address and writes to it, as rows for the
        browser (assets/js/helpers.js: AS.apply, AS.query), one per row of state.CONTROLS
        with a widget here: its URL key, widget and property, and the values it allows, from
        the row itself (so that the browser reads a value as state.parse_query does).
        ``seed`` is the seed's widget: its value the seed, or with ``seeds`` its position in
        them."""
        rows = []
        for c in CONTROLS:
            widget = seed if c.kind == "count" else self.widgets.get(c.name)
            if widget is None:
                continue
            row = dict(key=c.url_key, widget=widget,
                       prop="active" if isinstance(widget, (Tabs, RadioButtonGroup)) else "value")
            if c.kind == "count":
                row.update(kind="count", values=list(c.values),
                           positions=None if seeds is None else list(seeds))
            elif c.kind == "choice":
                row.update(kind="choice", values=list(c.values),
                           shown=[c.show(v) for v in c.values], linear=c.linear,
                           positive=c.positive)
            else:
                row.update(kind="word", values=list(c.values), shown=list(c.values))
            rows.append(row)
        return rows

    def _with_note(self, shown, name: str):
        """``shown`` (a control) with the note under it of control ``name`` (:meth:`_idle_note`)
        as one item, so that the note stays under its control where the controls stand in two
        columns (SIDEBAR_CSS)."""
        note = self._idle_note(name)
        return column(shown, *note, sizing_mode="stretch_width", margin=0) if note else shown

    def _idle_note(self, name: str) -> list:
        """The note under control ``name`` saying why the open tab does not use it (none
        with ?hide=text: the control is disabled all the same)."""
        if self._hide_text:
            return []
        note = Div(text="", name=f"{name}-idle", visible=False, stylesheets=self._css,
                   disable_math=True, margin=(0, 10), sizing_mode="stretch_width")
        self.idle_notes[name] = note
        return [note]

    def idle(self, tabs) -> CustomJS:
        """Disables the controls the open tab of ``tabs`` does not use (state.TABS' idle
        rows) and says why (assets/js/idle.js); the seed's control is the Resample button."""
        widgets = {name: w for name, w in self.widgets.items() if name != "tab"}
        if "resample" in self._buttons:
            widgets["seed"] = self._buttons["resample"]
        notes = {t.key: {name: idle_note_html(why) for name, why in t.idle} for t in TABS}
        # as the program leaves them for the tab the page opens on: each note it shows
        # there would lay the whole page out again in the browser (~0.3 s each at 1,000
        # models)
        unused = notes[TABS[tabs.active].key]
        for name, widget in widgets.items():
            widget.disabled = name in unused
            if (note := self.idle_notes.get(name)) is not None:
                note.text, note.visible = unused.get(name, ""), name in unused
        idle = CustomJS(args=dict(
            tabs=tabs, keys=list(TAB), notes=self.idle_notes, widgets=widgets,
            idle={key: by_name for key, by_name in notes.items() if by_name}),
            code=script("idle"))
        tabs.js_on_change("active", idle)
        return idle


class ArgumentTabs:
    """The argument's tabs (every row of state.TABS after the one draw), each built when first
    asked for (argument.Argument, on a thread of its own in a served page) and placed as its
    lead, first charts, question (``ask``, a QuestionPanel), other charts, "Try this" (for
    the controls among ``widgets``), "More detail" and downloads (``download``, Downloads);
    drawn at a state.Setting, the training tab by its runs. ``shown(*parts)`` keeps the
    parts of prose the page shows (none with ?hide=text)."""

    def __init__(self, css: list, button_css: list, widgets: dict, ask: QuestionPanel,
                 download: Downloads, shown) -> None:
        self._css, self._button_css, self._widgets = css, button_css, widgets
        self._ask, self._download, self._shown = ask, download, shown
        #: The tabs built so far (argument.Argument), or None.
        self.argument: Argument | None = None
        #: Each built tab's lead sentence and its "More detail" text, by key.
        self.leads, self.section_texts = {}, {}
        #: Each built tab's row of downloads, by key.
        self.downloads: dict = {}

    def unbuilt(self) -> list[str]:
        """The tabs not built yet, by key, in order."""
        return [tab.key for tab in TABS if not with_page(tab.key)
                and (self.argument is None or tab.key not in self.argument.tabs)]

    def new(self, keys: list) -> Argument:
        """The tabs ``keys``: their figures and sources (on the built tabs' ``shared`` once
        there are some), in no document yet: the bulk of :meth:`build`."""
        return Argument(keys, self._css, self._button_css,
                        None if self.argument is None else self.argument.shared)

    def build(self, built: Argument | None, keys=None) -> dict | None:
        """Take ``built`` (:meth:`new`'s), or build the tabs of ``keys`` not built yet (all
        by default); each one's panel content, by key (None if there was none to build)."""
        if built is None:
            keys = [k for k in self.unbuilt() if keys is None or k in keys]
            built = self.new(keys) if keys else None
        if built is None:
            return None
        if self.argument is None:
            self.argument = built
        else:
            self.argument.adopt(built)
        for key in built.tabs:
            self.leads[key] = Div(text="", name=f"{key}-lead", stylesheets=self._css,
                                  disable_math=True, sizing_mode="stretch_width", margin=(5, 10))
            self.section_texts[key] = Div(text="", name=f"{key}-text", stylesheets=self._css,
                                          disable_math=True, sizing_mode="stretch_width",
                                          margin=(5, 10), css_classes=["section-text"])
        children = {key: self._panel(key, tab) for key, tab in built.tabs.items()}
        for training in (tab for tab in built.tabs.values() if tab.trains):
            self.show_texts(training.key, training.draw(None))
        return children

    def _panel(self, key: str, tab):
        """A tab's content: its lead, charts, question, "Try this", "More detail" and
        downloads."""
        body = [wrapping_row(*part) if isinstance(part, list) else part for part in tab.body()]
        self.downloads[key] = self._download.row(
            key, list(tab.figures.values()), tab.tables, run=tab.source if tab.trains else None)
        steps = try_html(key, self._widgets)
        guide = Div(text=steps, name=f"{key}-try", disable_math=True, margin=(5, 10),
                    stylesheets=[*self._css, InlineStyleSheet(css=NO_PRINT_CSS)],
                    sizing_mode="stretch_width") if steps else None
        return column(*self._shown(self.leads[key]), *body[:1],
                      *self._shown(*self._ask.block(key)), *body[1:],
                      *self._shown(guide, more_detail(key, self._button_css,
                                                      self.section_texts[key])),
                      self.downloads[key], sizing_mode="stretch_width")

    def draw(self, key: str, setting: Setting) -> None:
        """Draw tab ``key`` (any but the training's) at ``setting``, from core: its charts and
        texts, the setting's rule's lines highlighted."""
        self.show_texts(key, self.argument.draw(key, setting))

    def training_tab(self):
        """The built tab that training runs draw (argument.TabView.trains)."""
        return next(tab for tab in self.argument.tabs.values() if tab.trains)

    def show_training(self, runs: dict, d_k: int, temperature: float, n_keys: int,
                      sweep=None) -> bool:
        """The training runs so far (rule -> core.SeededTraining) and the learning-rate sweep
        (core.LearningRateSweep or None): the charts, the status beside the Train button
        and, once every run is done, what they showed and the tab's question. True when they
        are done."""
        training = self.training_tab()
        texts = training.show(runs, d_k, temperature, n_keys, sweep)
        if texts is not None:
            self.show_texts(training.key, texts)
            self._ask.show(training.key, quiz.training_question(d_k, temperature, runs))
        return texts is not None

    def show_texts(self, key: str, texts: tuple[str, str]) -> None:
        """Tab ``key``'s lead sentence and "More detail" text."""
        lead, detail = texts
        self.leads[key].text = f"<p class='lead'>{lead}</p>"
        self.section_texts[key].text = detail
