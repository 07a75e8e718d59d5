"""Parts of the explorer's layout that build their own models and programs, for
:class:`layout.View` to assemble."""

from __future__ import annotations

from bokeh.layouts import column
from bokeh.models import Button, CustomJS

from .argument import TAB_VIEWS
from .state import TABS
from .style import script


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
