"""A served session's document: the changes of one callback leave as one message
(:func:`held`), and a button's action runs that way (:func:`on_click`)."""

from __future__ import annotations

from contextlib import contextmanager, nullcontext

import panel as pn


@contextmanager
def held(doc, placing: bool = False):
    """The events of a change leave as one message. In a served session Panel's
    ``pn.io.unlocked`` writes them to the websocket as one PATCH-DOC when the block ends
    (Bokeh's ``Document.hold`` would send a message per changed model, each one serialised
    against every model of the document); elsewhere Bokeh's ``Document.hold``.
    ``placing``: the block puts models into the document (a tab's figures), and the document
    finds its models once, when it ends (Bokeh's ``doc.models.freeze``), instead of walking
    the whole document again at each property set that adds one, which building a tab does
    hundreds of times. Not for other changes: the walk at the end of a freeze comes whether
    or not a model was added, and a slider's change adds none."""
    if doc is None:
        yield
        return
    frozen = doc.models.freeze() if placing else nullcontext()
    if doc.session_context is not None:
        with pn.io.unlocked(), frozen:
            yield
        return
    doc.hold("combine")
    try:
        with frozen:
            yield
    finally:
        doc.unhold()


def on_click(button, action) -> None:
    """Run ``action()`` (held: one message) when ``button`` is clicked."""

    def clicked(_event) -> None:
        with held(button.document):
            action()

    button.on_event("button_click", clicked)


def served(doc) -> bool:
    """Whether ``doc`` is a served session's document (not a notebook's or a script's)."""
    return doc is not None and doc.session_context is not None
