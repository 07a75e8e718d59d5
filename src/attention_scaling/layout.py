"""The whole explorer as Bokeh models (:class:`View`), built once: one layout for the served
page, the offline copy and the notebook. The controls are built from ``state.CONTROLS``,
the tabs from ``state.TABS`` (the one draw from :mod:`figures`, the argument's from
:mod:`argument`), and each tab's downloads from its row."""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from dataclasses import dataclass

from bokeh.layouts import column, row
from bokeh.models import (Button, CustomJS, Div, InlineStyleSheet, RadioButtonGroup, TabPanel,
                          Tabs)

from . import core
from .prose import quiz
from .argument import Argument, OneDrawTab, with_page
from .components import (NO_PRINT_CSS, TAB, ArgumentTabs, Downloads, PresentMode, QuestionPanel,
                         Sidebar, more_detail, wrapping_row)
from .figures import Charts
from .state import CONTROLS, ONE_DRAW, TABS, Setting
from .style import CHART_THEMES, page_css, programs, script, theme_css
from .prose.text import (BUSY_HTML, FORMULAS, FORMULAS_HTML, GLOSSARY_HTML, TITLE,
                         header_html)

#: For a Bokeh Div whose content should span its width (Bokeh sets ``display: inline-block``
#: on the element that holds the HTML).
FULL_WIDTH_CSS = ":host > .bk-clearfix { display: block !important; }"


#: The page's grid: controls and notes in a 300 px column beside the charts, or, on a screen
#: narrower than 900 px, one column of controls, charts and notes (the controls' bar stays at
#: the top of the screen over all of it, STICKY_CSS). Rows of charts wrap on narrow screens.
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
:host(.no-controls) { grid-template-columns: minmax(0, 1fr); grid-template-rows: auto;
                      grid-template-areas: "main"; }
@media print {
  :host { grid-template-columns: minmax(0, 1fr); grid-template-areas: "main"; }
  :host > .app-sidebar, :host > .app-notes { display: none !important; }
}
"""
#: A column as wide as its place and never wider, whatever its texts hold: a column that
#: follows its widest content resizes every chart in it when a number grows.
FIT_CSS = ":host { min-width: 0; max-width: 100%; }"

#: Bokeh's primary button at WCAG AA contrast (white on #1f5f99, 6.7:1), a disabled button's
#: label in the theme's muted ink on its card (5.5:1 light, 9:1 dark), a focus ring
#: that shows on every control reached by keyboard, text of 13 px, and slider handles of
#: 24 x 24 px (WCAG 2.2's target size).
BUTTON_CSS = """
:host { --bokeh-font-size: var(--as-control-size, 13px);
        --handle-width: var(--as-handle-size, 24px); --handle-height: var(--as-handle-size, 24px);
        --color: var(--as-theme-ink, #18191D); --background-color: var(--as-theme-panel, #fff);
        --border-color: var(--as-theme-line, #BBBBBD); --hover-color: var(--as-theme-card, #F9F9F9);
        --surface-background-color: var(--as-theme-card, #EBEBEB);
        --inactive-bg: var(--as-theme-card, #EBEBEB); --active-bg: var(--as-theme-highlight, #C3DBEB);
        color: var(--color); }
.bk-btn-default { color: var(--color); background-color: var(--background-color);
                  border-color: var(--border-color); }
.bk-btn-default:hover, .bk-btn-default.bk-active { background-color: var(--active-bg); }
.bk-btn-primary { background-color: #1f5f99; border-color: #1a4f80; }
.bk-btn-primary:hover, .bk-btn-primary.bk-active { background-color: #1a4f80; }
.bk-btn[disabled], .bk-btn[disabled]:hover, .bk-active.bk-btn[disabled] {
  opacity: 1; color: var(--as-theme-muted, #52606d); background-color: var(--as-theme-card, #EBEBEB);
  border-color: var(--as-theme-line, #BBBBBD); }
:focus-visible { outline: 3px solid #ffbf47 !important; outline-offset: 2px; }
"""

#: The tabs' titles wrap onto a second line on a narrow screen instead of running off it.
#: Each tab is as tall as its own content: BokehJS stacks the panels in one grid cell and
#: hides the inactive ones with ``visibility: hidden``, which keeps their height in the cell
#: (the page would end in a blank stretch as tall as the tallest tab); an inactive panel
#: keeps its width (its charts stay laid out) and takes no height.
TABS_CSS = (":host { --bokeh-font-size: var(--as-tabs-size, 13px); "
            "--color: var(--as-theme-ink, #18191D); "
            "color: var(--color); "
            "--background-color: var(--as-theme-panel, #fff); } "
            "[style*='visibility: hidden'] { height: 0 !important; min-height: 0 !important; "
            "overflow: hidden !important; } "
            ".bk-tab { color: var(--color); } "
            ".bk-headers-wrapper { flex-wrap: wrap; } .bk-headers { flex-wrap: wrap; } "
            ".bk-tab { white-space: nowrap; } "
            ".bk-tab:focus-visible { outline: 3px solid #ffbf47; outline-offset: -3px; }")


#: Present mode (assets/js/present.js: class "present" on the body row): the step's controls in
#: a column beside its charts, in sizes read from the back of a hall (the lead 24 to 46 px,
#: 36 px on a 1920 px screen; the question 29 px and its answer 23 px there; controls' text 16
#: to 22 px; slider handles of 36 px and more; above it below 900 px, as outside present mode),
#: and each step's question first (ASK_CSS). The handout (class "handout", printed): one column as wide as an A4 or Letter page.
PRESENT_LAYOUT_CSS = """
:host(.present) { grid-template-columns: clamp(260px, 19vw, 380px) minmax(0, 1fr);
  grid-template-rows: auto; grid-template-areas: "controls main";
  --as-lead-size: clamp(24px, 1.9vw, 46px); --as-control-size: clamp(16px, 1.1vw, 22px);
  --as-handle-size: clamp(36px, 2.2vw, 48px); --as-tabs-size: clamp(16px, 1.1vw, 22px);
  --bk-text-font-size: clamp(15px, 1.15vw, 24px);
  --bk-axis-label-text-font-size: clamp(14px, 1vw, 20px);
  --bk-major-label-text-font-size: clamp(13px, 0.9vw, 18px);
  --bk-label-text-font-size: clamp(13px, 0.95vw, 19px); --as-ask-order: -1;
  --as-ask-size: clamp(19px, 1.5vw, 36px); --as-answer-size: clamp(17px, 1.2vw, 29px); }
:host(.present) > .app-notes { display: none !important; }
@media (max-width: 899px) {
  :host(.present) { grid-template-columns: minmax(0, 1fr); grid-template-areas: "controls" "main"; }
}
:host(.handout) { grid-template-columns: minmax(0, 1fr); grid-template-areas: "main";
  width: 680px; max-width: 680px; --as-lead-size: 18px; --as-ask-size: 16px;
  --as-answer-size: 15px; }
:host(.handout) > .app-sidebar, :host(.handout) > .app-notes { display: none !important; }
"""
#: The handout's tabs: every step's panel, one under the other, one printed page each, under
#: its tab's title instead of the tabs' bar.
HANDOUT_TABS_CSS = (" :host(.handout) { display: block !important; } "
                    ":host(.handout) > .bk-header { display: none !important; } "
                    ":host(.handout) > :not(.bk-header) { visibility: visible !important; "
                    "height: auto !important; min-height: 0 !important; "
                    "overflow: visible !important; break-after: page; } "
                    ":host(.handout) > :not(.bk-header):last-child { break-after: auto; } "
                    + " ".join(f":host(.handout) > div:nth-of-type({i + 2})::before {{ "
                               f"content: {json.dumps(tab.title, ensure_ascii=False)}; "
                               "display: block; order: -2; "
                               "font-size: 20px; font-weight: 600; margin: 0 10px 4px; }"
                               for i, tab in enumerate(TABS)))



#: The busy note's class, and its tag and class while it is shown (assets/js/busy.js,
#: assets/style.css).
BUSY_CLASS, BUSY_ON = "busy-note", "busy-on"


@dataclass(frozen=True)
class ViewOptions:
    """What a :class:`View` shows and how it is driven, in one value.

    ``values`` are the controls' starting values (``state.CONTROLS``: a slider over the
    positions of each ``choice`` row, buttons for each ``option`` row, in the table's order; a
    ``count`` row, the seed, is shown by ``seed_div`` and changed by the buttons).
    ``hidden`` leaves parts out (``state.VIEW_PARTS``), ``notice`` is HTML shown above the
    charts, ``buttons`` names the buttons the runtime wires (``resample``, ``fig3``, ``copy``);
    ``presets`` is HTML shown under the guide; ``controls`` names the controls to show (all by default);
    ``subtitle`` is shown in the title bar, ``caption_extra`` ends the caption, ``tex``: the
    formulas by MathJax, or in HTML (the offline copy: no MathJax). ``library``: the
    document holds the browser programs' library (style.programs); without it, the page
    loads it first as a file of its own (style.library_file: the served page).
    ``on_click(button, action)`` has ``action()`` run in Python when ``button`` is clicked
    (documents.on_click), on a page with Python behind it: there each step's answer stays in
    Python until its Reveal, or the handout, asks for it (View.reveal); without it (the
    offline copy) the answers wait in the page, in their Reveal buttons' tags."""

    values: dict
    subtitle: str = ""
    guide: str = ""
    caption_extra: str = ""
    hidden: frozenset = frozenset()
    notice: str = ""
    buttons: tuple = ("resample", "fig3", "copy")
    presets: str = ""
    controls: tuple | None = None
    on_click: Callable | None = None
    tex: bool = True
    library: bool = True


class View:
    """The whole explorer as Bokeh models, built once from one :class:`ViewOptions`: the
    figures and texts of :class:`figures.Charts`, the controls, the title bar, the guide, the
    tabs of ``state.TABS``, and the components it assembles (components.PresentMode,
    QuestionPanel, Downloads). The served page, the offline copy and the notebook all show
    this layout; each adds only its way of updating it (Python callbacks on the server, one
    JavaScript program offline)."""

    def __init__(self, options: ViewOptions) -> None:
        o = options
        values, hidden, on_click = o.values, o.hidden, o.on_click
        self._tex, self._on_click = o.tex, on_click
        self._css = css = [InlineStyleSheet(css=page_css())]
        self._controls_css = [InlineStyleSheet(css=BUTTON_CSS)]
        self._hide_text = "text" in hidden
        self.charts = c = Charts(caption_extra=o.caption_extra)
        for div in (*c.texts, c.bars_text, c.heatmaps_text):
            div.disable_math = True
            div.stylesheets = css
        self.seed_div = Div(text="", stylesheets=css, disable_math=True, name="seed", margin=(4, 10))
        self.buttons = self._buttons(o.buttons)
        #: The controls (components.Sidebar): widgets by name, notes under them, the column.
        self.controls = Sidebar(values, o.controls, self.buttons, self.seed_div, css,
                                self._controls_css, self._hide_text)
        self.widgets, self.idle_notes = self.controls.widgets, self.controls.idle_notes
        self.sidebar = self.controls.column
        theme = self._notes(o.presets)
        self._guide = o.guide
        #: The steps' predict-then-reveal questions (components.QuestionPanel); each tab's
        #: question's models and question shown (quiz.Question), by key.
        self.ask = QuestionPanel(css, self._controls_css, on_click)
        self.asks, self.questions = self.ask.asks, self.ask.questions
        #: Each tab's buttons to take it away (components.Downloads).
        self.download = Downloads(self.widgets, c.text_source, self._controls_css)
        one_draw = self._one_draw()
        self._tabs(values, one_draw)
        busy = self._busy_note()
        self.main = column(
            # without its title bar the page keeps its title as its heading, for screen
            # readers
            *([Div(text=f"<h1 class='sr-only'>{html.escape(TITLE)}</h1>", stylesheets=css,
                   disable_math=True, margin=0, name="title")] if "header" in hidden else []),
            *([Div(text=o.notice, stylesheets=css, disable_math=True, name="notice",
                   sizing_mode="stretch_width")] if o.notice else []),
            self.busy,
            self.tabs,
            sizing_mode="stretch_width", css_classes=["app-main"], stylesheets=css,
            margin=(10, 12))
        body = row(*([] if "controls" in hidden else [self.sidebar]), self.main,
                   *([] if "controls" in hidden else [self.notes]),
                   sizing_mode="stretch_width", margin=0,
                   css_classes=["app-body", *(["no-controls"] if "controls" in hidden else [])],
                   stylesheets=[InlineStyleSheet(css=LAYOUT_CSS + PRESENT_LAYOUT_CSS)])
        header = [] if "header" in hidden else [
            Div(text=header_html(o.subtitle), stylesheets=[*css, InlineStyleSheet(
                css=FULL_WIDTH_CSS)], disable_math=True, sizing_mode="stretch_width",
                margin=0)]
        #: The page: title bar over the controls (left) and the charts and text; its tags
        #: hold the browser programs' library (style.programs), once per document, unless
        #: the page loads it as a file (``library``).
        self.root = column(*header, body, sizing_mode="stretch_width", margin=0,
                           tags=[programs()] if o.library else [])
        #: Browser programs to run once the document is shown (doc.js_on_event
        #: "document_ready"): names and keys for the controls, "More controls" saying it is
        #: closed, the bars' text.
        self.ready = [theme, self.controls.unfold, self._a11y("controls" in hidden), *c.ready,
                      busy, self._phone_pair(), self.controls.idle(self.tabs),
                      self._place_present(body, "controls" in hidden)]

    def _place_present(self, body, no_controls: bool) -> CustomJS:
        """Present mode's actions under the controls (at the top of the charts without
        them); the program that opens it from the address."""
        return self.present.place(
            tabs=self.tabs, root=self.root, body=body, answers=self.ask.answers_button(),
            host=self.main if no_controls else self.sidebar, at_top=no_controls)

    def _phone_pair(self) -> CustomJS:
        """The scaled and the unscaled bars drawn lower on a phone, both on one screen
        (assets/js/phone-pair.js)."""
        return CustomJS(args=dict(figures=[self.charts.scaled_fig, self.charts.unscaled_fig],
                                  tabs=self.tabs), code=script("phone-pair"))

    def _busy_note(self) -> CustomJS:
        """Make :attr:`busy`, said while the worker pool computes a setting
        (:meth:`show_busy`): always in the layout and no taller than nothing, shown by its
        tags (assets/js/busy.js). Returns the program that shows it."""
        #: The busy note.
        self.busy = Div(text=BUSY_HTML, name="busy", stylesheets=self._css,
                        css_classes=[BUSY_CLASS], disable_math=True,
                        sizing_mode="stretch_width", height=0, margin=0)
        busy = CustomJS(args=dict(busy=self.busy), code=script("busy"))
        self.busy.js_on_change("tags", busy)
        return busy

    def _buttons(self, keys) -> dict:
        """The sidebar's buttons ``keys`` (of resample, fig3, copy), by key, and ``present``:
        :attr:`present`'s."""
        #: Present mode (components.PresentMode).
        self.present = PresentMode(self._controls_css)
        labels = {"resample": ("Resample q and k", "primary"),
                  "fig3": ("Reset to the reference draw", "default"),
                  "copy": ("Copy link to this view", "default")}
        return {**{key: Button(label=labels[key][0], button_type=labels[key][1], name=key,
                               sizing_mode="stretch_width", margin=(5, 10),
                               stylesheets=self._controls_css)
                   for key in keys},
                "present": self.present.button}

    def address(self, seed, seeds=None) -> list[dict]:
        """The controls this page reads from its address and writes to it
        (:meth:`components.Sidebar.address`)."""
        return self.controls.address(seed, seeds)

    def _text(self, *parts) -> list:
        """Of ``parts``, the page's prose (a tab's lead, "Try this", "More detail", a
        control's idle note), those that are not None; none with ?hide=text. What "text"
        hides is what passes through here."""
        return [] if self._hide_text else [part for part in parts if part is not None]

    def _notes(self, presets: str) -> CustomJS:
        """The notes beside the charts (theme, presets) as ``self.notes``; the theme's
        browser program."""
        css = self._css
        #: Light, dark or the system's choice (assets/js/theme.js; URL key theme).
        self.theme_buttons = RadioButtonGroup(labels=["auto", "light", "dark"], active=0,
                                              name="theme", margin=(5, 10, 10, 10),
                                              stylesheets=self._controls_css)
        theme = CustomJS(args=dict(buttons=self.theme_buttons, rule_inks=" ".join(
            f"--as-theme-text-{r.key}: {r.ink_dark};" for r in core.RULE_TABLE),
            chart_colors=theme_css("dark"), bar_colors={
                theme: {"title": CHART_THEMES[theme]["title-text-color"],
                        "label": CHART_THEMES[theme]["major-label-text-color"]}
                for theme in CHART_THEMES}),
            code=script("theme"))
        self.theme_buttons.js_on_change("active", theme)
        #: The presets' links (assets/js/presets.js), or None.
        self.presets = Div(text=presets, name="presets", stylesheets=css, disable_math=True,
                           sizing_mode="stretch_width", margin=(5, 10)) if presets else None
        self.notes = column(
            Div(text="Theme", disable_math=True, margin=(5, 10, 0, 10),
                stylesheets=css, css_classes=["control-label"]),
            self.theme_buttons,
            *([self.presets] if presets else []),
            sizing_mode="stretch_width", css_classes=["app-notes"], stylesheets=css, margin=0)
        return theme

    def _one_draw(self):
        """The one draw's tab: its lead, its bars, the gradient's spread over many draws beside
        the readout, "Try this" (the guide), the heat maps, its downloads, and "More detail" (caption, formulas, explanation, the
        readout's other rows)."""
        c = self.charts
        #: The tabs built and drawn with the page (argument.TabView.with_page), by key.
        tab = OneDrawTab(c)
        self.page_tabs = {tab.key: tab}
        css = self._css
        formulas = Div(text=FORMULAS if self._tex else FORMULAS_HTML, stylesheets=[
            *css, InlineStyleSheet(css=FULL_WIDTH_CSS)], disable_math=not self._tex,
            sizing_mode="stretch_width")
        #: The one draw's buttons to take it away, by key: PNG, SVG and CSV
        #: (assets/js/download.js).
        self._page_downloads = {tab.key: self.download.row(
            tab.key, [c.scaled_fig, c.unscaled_fig, c.spread.fig], tab.tables,
            keyed=c.scaled_source)}
        guide = Div(text=self._guide, name="guide", disable_math=True, margin=(5, 10),
                    stylesheets=[*css, InlineStyleSheet(css=NO_PRINT_CSS)],
                    sizing_mode="stretch_width") if self._guide else None
        return column(
            *self._text(c.lead),
            wrapping_row(c.scaled_fig, c.unscaled_fig), c.bars_text,
            *self._text(*self.ask.block(tab.key)),
            wrapping_row(c.spread.fig, c.readout),
            self._page_downloads[tab.key],
            *self._text(guide),
            wrapping_row(c.jacobian_fig, c.diagonal_fig), c.heatmaps_text,
            *self._text(more_detail(tab.key, self._controls_css, c.caption, formulas,
                                    c.explanation, c.readout_detail, self._glossary())),
            sizing_mode="stretch_width", stylesheets=[InlineStyleSheet(css=FIT_CSS)])

    def _glossary(self) -> Div:
        """The words of the first screens in plain words (prose.text.GLOSSARY)."""
        return Div(text=GLOSSARY_HTML, name="glossary", stylesheets=self._css,
                   disable_math=True, sizing_mode="stretch_width", margin=(5, 10))

    def _tabs(self, values: dict, one_draw) -> None:
        """The tabs of state.TABS (``self.tabs``): the one draw, and each argument tab holding
        a short "drawing" note until :meth:`build_argument` builds them when first asked for,
        so that a page whose reader stays on the first tab costs a quarter of the models."""
        #: The argument over many draws and through training (components.ArgumentTabs).
        self.arguments = ArgumentTabs(self._css, self._controls_css, self.widgets, self.ask,
                                      self.download, self._text)
        self.tabs = Tabs(tabs=[TabPanel(title=tab.title, child=one_draw if with_page(tab.key)
                                        else Div(text="<p class='status'>Drawing…</p>",
                                                 stylesheets=self._css, disable_math=True))
                               for tab in TABS], sizing_mode="stretch_width", name="sections",
                         stylesheets=[InlineStyleSheet(css=TABS_CSS + HANDOUT_TABS_CSS)],
                         active=list(TAB).index(values.get("tab", ONE_DRAW)))
        self.widgets["tab"] = self.tabs

    def _a11y(self, no_controls: bool) -> CustomJS:
        """Names and keys for the sliders, tabs and regions, and the state of the groups of
        buttons (assets/js/a11y.js); the page's scroll padding under the controls where they
        stay at the top of a phone's screen."""
        sliders = [[w, [c.show(v) for v in c.values]] for c in CONTROLS
                   if c.kind == "choice" and (w := self.widgets.get(c.name)) is not None]
        groups = [] if no_controls else [
            *([w, c.label] for c in CONTROLS
              if c.kind == "option" and (w := self.widgets.get(c.name)) is not None),
            [self.theme_buttons, "Theme"]]
        guess_sliders, guess_groups = QuestionPanel.guesses(self.asks)
        sliders += guess_sliders
        groups += guess_groups
        c = self.charts
        a11y = CustomJS(args=dict(
            sliders=sliders, groups=groups, tabs=self.tabs,
            charts=[c.scaled_fig, c.unscaled_fig, c.spread.fig, c.jacobian_fig, c.diagonal_fig],
            regions=[[self.main, "main", "Charts and explanation"],
                     *([[self.sidebar, "region", "Controls", True],
                        [self.notes, "region", "Guide"]] if not no_controls else [])]),
            code=script("a11y"))
        for widget, _labels in sliders:
            widget.js_on_change("value", a11y)
        for widget, _label in groups:
            widget.js_on_change("active", a11y)
        self.tabs.js_on_change("active", a11y)
        self.tabs.js_on_change("tabs", a11y)
        #: The browser program that names the controls, tabs and charts (its charts grow
        #: by the argument's when :meth:`build_argument` builds them).
        self._a11y_js = a11y
        return a11y

    def _a11y_argument(self, keys: list, figures: list) -> None:
        """The a11y program's charts and guesses grown by the argument's (``figures``, the
        questions of tabs ``keys``)."""
        args = self._a11y_js.args
        sliders, groups = QuestionPanel.guesses({k: self.asks[k] for k in keys})
        self._a11y_js.args = {**args, "sliders": [*args["sliders"], *sliders],
                              "groups": [*args["groups"], *groups],
                              "charts": [*args["charts"], *figures]}
        for widget, _ in sliders:
            widget.js_on_change("value", self._a11y_js)
        for widget, _ in groups:
            widget.js_on_change("active", self._a11y_js)

    @property
    def argument(self) -> Argument | None:
        """The argument's tabs built so far (argument.Argument), or None."""
        return self.arguments.argument

    @property
    def leads(self) -> dict:
        """Each built argument tab's lead sentence (a Div), by key."""
        return self.arguments.leads

    @property
    def section_texts(self) -> dict:
        """Each built argument tab's "More detail" text (a Div), by key."""
        return self.arguments.section_texts

    @property
    def downloads(self) -> dict:
        """Each built tab's row of downloads, by key."""
        return {**self._page_downloads, **self.arguments.downloads}

    def unbuilt(self) -> list[str]:
        """The argument's tabs not built yet, by key, in order."""
        return self.arguments.unbuilt()

    def new_argument(self, keys: list) -> Argument:
        """The argument's tabs ``keys`` (components.ArgumentTabs.new), in no document yet: the
        bulk of :meth:`build_argument`, which a served page does on a thread of its own."""
        return self.arguments.new(keys)

    def build_argument(self, wire=None, built: Argument | None = None, keys=None) -> bool:
        """Build the argument's tabs ``keys`` (by default every one not built yet) or take
        ``built``, :meth:`new_argument`'s (components.ArgumentTabs.build), and put them in
        their panels; False if there was none to put in. ``wire(view, keys)`` runs before
        they join the document: an event callback added to a model the browser already has
        would not reach it."""
        children = self.arguments.build(built, keys)
        if children is None:
            return False
        tabs = {key: self.argument.tabs[key] for key in children}
        for training in (tab for tab in tabs.values() if tab.trains):
            self.train_button, self.training_status = training.button, training.status
        if wire is not None:
            wire(self, list(children))
        self._a11y_argument([k for k in self.asks if k in children],
                            [f for tab in tabs.values() for f in tab.figures.values()])
        # new panels, not new children: BokehJS redraws the tabs when their list changes,
        # not when a panel's child does
        self.tabs.tabs = [panel if tab.key not in children else TabPanel(
            title=tab.title, child=children[tab.key]) for tab, panel in zip(TABS, self.tabs.tabs)]
        return True

    def draw_tab(self, key: str, setting: Setting) -> None:
        """Draw the argument's tab ``key`` (any but the training's) at ``setting``
        (components.ArgumentTabs.draw; its question: :meth:`show_question`)."""
        self.arguments.draw(key, setting)

    def tab_view(self, key: str):
        """Tab ``key``'s TabView (argument.TabView): built with the page, or built by now
        among the argument's tabs."""
        return self.page_tabs.get(key) or self.argument.tabs[key]

    def show_question(self, key: str, question: quiz.Question | None) -> None:
        """Tab ``key``'s question (:meth:`components.QuestionPanel.show`)."""
        self.ask.show(key, question)

    def reveal(self, key: str) -> None:
        """Tab ``key``'s answer (:meth:`components.QuestionPanel.reveal`)."""
        self.ask.reveal(key)

    def show_busy(self, waiting: bool) -> None:
        """Say that a setting is being computed, or no longer say it."""
        tags = [BUSY_ON] if waiting else []
        if list(self.busy.tags) != tags:
            self.busy.tags = tags

    def busy_shown(self) -> bool:
        """Whether the page says that a setting is being computed."""
        return BUSY_ON in self.busy.tags

    def show_training(self, runs: dict, d_k: int, temperature: float, n_keys: int,
                      sweep=None) -> bool:
        """The training runs so far and the sweep on their tab
        (components.ArgumentTabs.show_training); True when they are done."""
        return self.arguments.show_training(runs, d_k, temperature, n_keys, sweep)

    def training_tab(self):
        """The built argument tab that training runs draw (argument.TabView.trains)."""
        return self.arguments.training_tab()

    def show_seed(self, seed: int) -> None:
        text = f"<span class='seed'>seed <code>{int(seed)}</code></span>"
        if self.seed_div.text != text:
            self.seed_div.text = text
