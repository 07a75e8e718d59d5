"""The latency adaptations (attention_scaling.latency) are in place and keep their promises."""

import panel as pn
import panel.io.document as pdoc
from bokeh.server.views.ws import WSHandler

from attention_scaling import latency
from attention_scaling.page import Explorer, create_page


def test_install_patches_panel_dispatch_and_bokeh_websocket_once():
    first = latency.install()
    again = latency.install()
    assert first == again == {"dispatch": True, "nodelay": True, "validation": True,
                              "defaults": True}
    assert getattr(pdoc._dispatch_msgs, "_attention_scaling", False)
    assert getattr(WSHandler.open, "_attention_scaling", False)
    # installed once: the wrapper wraps Panel's original, not itself
    assert not getattr(pdoc._dispatch_msgs.__wrapped__, "_attention_scaling", False)


def test_page_installs_them():
    create_page()
    assert getattr(pdoc._dispatch_msgs, "_attention_scaling", False)


def test_fast_widgets_have_no_debounce_and_no_busy_bookkeeping():
    w = latency.fast(pn.widgets.Switch())
    assert w._debounce == 0
    assert "value" in w._busy__ignore
    assert pn.widgets.Switch._debounce > 0          # the class itself is untouched
    ex = Explorer()
    assert ex.scaled_switch._debounce == 0


def test_sliders_are_bokeh_models_synced_both_ways():
    ex = Explorer()
    ex.state.d_k = 128
    assert ex.d_k_slider.value == list(ex.state.param.d_k.objects).index(128)
    ex.d_k_slider.value = 0          # as if from the browser (no document: applied directly)
    assert ex.state.d_k == 1
    ex.temperature_slider.value = len(ex.state.param.temperature.objects) - 1
    assert ex.state.temperature == 10


def test_session_hold_without_a_document_is_a_plain_block():
    with latency.session_hold(None):
        x = 1
    assert x == 1


def test_the_page_document_passes_bokehs_validation_that_sessions_skip(caplog):
    """Sessions skip Bokeh's per-session document check (latency 6); the check runs here."""
    import logging
    import os

    from bokeh.core.validation.check import check_integrity
    from bokeh.document import Document
    from bokeh.settings import settings

    latency.install()
    if "BOKEH_VALIDATE_DOC" not in os.environ:
        assert settings.perform_document_validation() is False
    for hidden in (set(), {"header", "controls", "text"}):
        doc = Document()
        Explorer().page(hidden=hidden).server_doc(doc)
        with caplog.at_level(logging.WARNING):
            issues = check_integrity(list(doc.models))
        assert not issues.error and not issues.warning, issues


def test_cached_overridden_defaults_equal_bokehs_own_for_every_model_class():
    """The per-class cache (latency 7) returns exactly what Bokeh computes, for every class."""
    from bokeh.core.has_props import HasProps
    from bokeh.model import Model

    latency.install()
    original = HasProps._overridden_defaults.__func__.__wrapped__
    classes = list(Model.model_class_reverse_map.values())
    assert len(classes) > 300
    for cls in classes:
        assert HasProps._overridden_defaults.__func__(cls) == original(cls), cls
    # and a model built afterwards still gets its class's overrides
    from bokeh.plotting import figure
    fig = figure()
    assert fig.toolbar.logo == original(type(fig.toolbar)).get("logo", "normal")
