"""The served app in a real headless Chromium: load, named plots, keyboard, labels, toggle, network."""

import io
import json
import re
import urllib.parse
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest
from conftest import (INIT, PLOTS, UI_WAIT_MS, assert_plots_drawn, column, draw_svg, open_app,
                      eventually, wait_changed, wait_column, wait_still)
from PIL import Image

from attention_scaling.core import D_K_VALUES
from attention_scaling.state import TABS

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
def test_page_loads_with_named_plots_and_no_errors(page, server):
    """The page draws its plots with no error, its programs' library came from the served
    file (style.library_file), and the library set up BokehJS's layout seam (helpers.js:
    each document laid out once per task), which it can only do once BokehJS is loaded."""
    open_app(page, server)
    assert "√dₖ" in page.title()
    assert_plots_drawn(page)
    body = page.inner_text("body")
    assert "Traceback" not in body and "NaN" not in body
    wait_still(page)                  # the page has done what its first view asked of it
    assert page.console_errors == []
    assert page.failed_requests == []
    assert any("/as/static/programs-" in url for url in page.requests)
    assert page.evaluate("() => Bokeh.require('models/layouts/layout_dom').LayoutDOMView"
                         ".prototype.invalidate_layout.name") == "invalidateLayout"


def test_keyboard_moves_d_k_and_both_bar_charts_change(page, server):
    open_app(page, server)
    before_s = column(page, "scaled-weights-source", "weight")
    before_u = column(page, "unscaled-weights-source", "weight")
    handle = page.locator(".noUi-handle").first
    handle.focus()
    page.keyboard.press("ArrowRight")
    wait_changed(page, "unscaled-weights-source", "weight", before_u)
    assert column(page, "scaled-weights-source", "weight") != before_s
    # d_k went from 64 to the next width, 80, and the data is core's
    from attention_scaling import core
    st = core.compute_state(80, 1.0, 2288)
    wait_column(page, "jacobian-diagonal-marker", "width", ["80"])
    assert column(page, "unscaled-weights-source", "weight") == pytest.approx(st.unscaled.probs.tolist(), abs=1e-12)
    assert page.console_errors == []


def test_max_weight_labels_equal_the_bar_data(page, server):
    open_app(page, server)
    for name in ("scaled-weights", "unscaled-weights"):
        weights = column(page, f"{name}-source", "weight")
        labels = column(page, f"{name}-source", "label")
        top = weights.index(max(weights))
        assert labels == [f"max weight {round(100 * max(weights))}%" if k == top else ""
                          for k in range(len(weights))]
    assert [t for t in column(page, "scaled-weights-source", "label") if t] == ["max weight 27%"]
    assert [t for t in column(page, "unscaled-weights-source", "label") if t] == ["max weight 80%"]
    # the labels drawn on the canvas are in the DOM too: the readout names each top bar
    page.wait_for_function("() => Bokeh.documents.some(d => d.get_model_by_name('readout'))")
    readout = page.evaluate("""() => { for (const d of Bokeh.documents) {
        const m = d.get_model_by_name('readout');
        if (m) return window.__AS.view(m).markup_el.textContent; } }""")
    for name in ("scaled-weights", "unscaled-weights"):
        labels = column(page, f"{name}-source", "label")
        top = next(k for k, t in enumerate(labels) if t)
        assert f"{labels[top].removeprefix('max weight ')} on k{top + 1}" in readout, readout


def test_toggling_scaling_changes_the_heatmap(page, server):
    open_app(page, server)
    before = column(page, "jacobian-source", "value")
    page.get_by_role("button", name="unscaled", exact=True).click()
    wait_changed(page, "jacobian-source", "value", before)
    from attention_scaling import core
    st = core.compute_state(64, 1.0, 2288)
    assert column(page, "jacobian-source", "value") == pytest.approx(st.unscaled.jacobian.ravel().tolist(), abs=1e-15)


def test_no_request_leaves_the_serving_host(page, server):
    open_app(page, server)
    before = column(page, "jacobian-source", "value")
    page.locator(".noUi-handle").first.focus()
    page.keyboard.press("ArrowLeft")
    wait_changed(page, "jacobian-source", "value", before)    # the change has come back
    wait_still(page)
    host = urlparse(server.url).netloc
    foreign = [u for u in page.requests
               if not u.startswith(("data:", "blob:")) and urlparse(u).netloc != host]
    assert page.requests, "the page made no request at all?"
    assert foreign == []


#: The width one step right of 256 on the slider.
NEXT_AFTER_256 = D_K_VALUES[D_K_VALUES.index(256) + 1]

#: Records, frame by frame, each width the marker shows (window.__widths).
RECORD_WIDTHS = """() => { window.__widths = [];
  const look = () => { const v = (window.__col('jacobian-diagonal-marker', 'width') || [])[0];
    if (v !== undefined && window.__widths[window.__widths.length - 1] !== v) window.__widths.push(v);
    requestAnimationFrame(look); };
  look(); }"""


def test_fast_keyboard_input_ends_on_the_last_value_with_a_matching_label(page, server):
    open_app(page, server)
    page.evaluate(RECORD_WIDTHS)
    page.locator(".noUi-handle").first.focus()
    for _ in range(5):                       # 64 -> 80 -> 96 -> 128 -> 192 -> 256, quickly
        page.keyboard.press("ArrowRight")
    page.wait_for_function("() => JSON.stringify(window.__col('jacobian-diagonal-marker', 'width'))"
                           " === JSON.stringify(['256'])", timeout=UI_WAIT_MS)
    title = page.locator(".bk-slider-title").first.inner_text()
    assert title.replace("\xa0", " ").strip().endswith("256"), title
    from attention_scaling import core
    st = core.compute_state(256, 1.0, 2288)
    wait_column(page, "unscaled-weights-source", "weight", st.unscaled.probs.tolist(), rel=1e-12)
    # nothing older arrives after 256: one more step (a change the server answers after
    # every earlier one), and between the two the widths shown were 256 and that step only
    page.keyboard.press("ArrowRight")
    wait_column(page, "jacobian-diagonal-marker", "width", [str(NEXT_AFTER_256)])
    shown = page.evaluate("() => window.__widths")
    assert shown[shown.index("256"):] == ["256", str(NEXT_AFTER_256)], shown


def test_updates_replace_data_in_place_no_new_models(page, server):
    """No flicker: the figures and data sources keep their model ids across updates."""
    names = PLOTS + [f"{n}-source" for n in PLOTS] + ["jacobian-diagonal-marker", "text-source"]
    ids = """(names) => names.map(n => { for (const d of Bokeh.documents) {
                 const m = d.get_model_by_name(n); if (m) return m.id; } return null; })"""
    open_app(page, server)
    before = page.evaluate(ids, names)
    assert None not in before
    n_models = page.evaluate("() => Bokeh.documents[0].all_models.size")
    old = column(page, "jacobian-source", "value")
    page.locator(".noUi-handle").first.focus()
    page.keyboard.press("ArrowRight")
    page.get_by_role("button", name="unscaled", exact=True).click()
    wait_changed(page, "jacobian-source", "value", old)
    from attention_scaling import core
    wait_column(page, "jacobian-diagonal-marker", "width", ["80"])       # both changes in
    wait_column(page, "jacobian-source", "value",
                core.compute_state(80, 1.0, 2288).unscaled.jacobian.ravel().tolist(), rel=1e-12)
    wait_still(page)
    assert page.evaluate(ids, names) == before
    assert page.evaluate("() => Bokeh.documents[0].all_models.size") == n_models


def test_explanation_and_readout_numbers_follow_the_controls(page, server):
    """The text is filled in the browser from the text source: check what is displayed."""
    from attention_scaling.figures import readout_detail_html, readout_html
    from attention_scaling.state import ExplorerState
    from attention_scaling.prose.text import caption_html, explanation_of, fields_of, fill, plain
    open_app(page, server)
    shown = """(name) => { for (const d of Bokeh.documents) { const m = d.get_model_by_name(name);
                 if (m) return window.__AS.view(m).markup_el.textContent; } }"""
    assert "about ±8" in page.evaluate(shown, "explanation")
    before = column(page, "unscaled-weights-source", "weight")
    page.locator(".noUi-handle").first.focus()
    for _ in range(4):                       # 64 -> 80 -> 96 -> 128 -> 192
        page.keyboard.press("ArrowRight")
    page.wait_for_function("() => JSON.stringify(window.__col('jacobian-diagonal-marker', 'width'))"
                           " === JSON.stringify(['192'])", timeout=UI_WAIT_MS)
    state = ExplorerState(d_k=192)
    # the texts' numbers may come a frame after the charts' on a busy machine
    text = eventually(lambda: (lambda t: t if "192" in t else None)(
        page.evaluate(shown, "explanation")), "the explanation at d_k = 192")
    expected = fields_of(state)
    assert "sum of dk = 192 terms" in text and "√192 = 13.9" in text
    assert f"standard deviation {expected['raw_sd']} raw and {expected['scaled_sd']} scaled" in text
    assert f"max weight {expected['max_w']}, spread over {expected['eff']} effective keys" in text
    # every text as the Python side renders it, word for word
    assert text == plain(explanation_of(state))
    assert page.evaluate(shown, "caption") == plain(fill(caption_html(), expected))
    readout = page.evaluate(shown, "readout")
    assert readout == plain(fill(readout_html(), expected))
    detail = page.evaluate(shown, "readout-detail")
    assert detail == plain(fill(readout_detail_html(), expected))
    for key in ("sqrt_max_w", "none_max_w", "sqrt_grad", "none_grad"):
        assert expected[key] in readout
    for key in ("sqrt_frob", "none_frob"):
        assert expected[key] in detail
    assert "‖∂p/∂q‖F, to the query" in readout
    assert column(page, "unscaled-weights-source", "weight") != before


# Change a control's model from the page and time until the chart data it drives changes.
LATENCY_JS = """async ({n, gap, control}) => {
  const doc = Bokeh.documents[0];
  const models = [...doc.all_models];
  const slider = models.find(m => m.type === 'Slider' && m.title.startsWith('Head width'));
  const toggle = models.find(m => m.type === 'RadioButtonGroup' && m.name === 'rule');
  const watched = control === 'slider' ? 'unscaled-weights-source' : 'jacobian-source';
  const col = control === 'slider' ? 'weight' : 'value';
  const src = doc.get_model_by_name(watched);
  const out = [];
  for (let i = 0; i < n; i++) {
    const before = JSON.stringify(window.__col(watched, col));
    const t0 = performance.now();
    const changed = new Promise(resolve => {
      const check = () => { if (JSON.stringify(window.__col(watched, col)) !== before) resolve(performance.now() - t0); };
      src.properties.data.change.connect(check); src.change.connect(check);
      setTimeout(() => resolve(5000), 5000);
    });
    if (control === 'slider') slider.value = (slider.value + 7) % (slider.end + 1);
    else toggle.active = toggle.active === 0 ? 1 : 0;
    out.push(await changed);
    await new Promise(r => setTimeout(r, gap));
  }
  return out;
}"""


@pytest.mark.parametrize("control", ["slider", "switch"])
def test_every_change_of_a_control_reaches_the_charts(page, server, control):
    """Thirty changes of the head-width slider or the scaling switch, each made on the
    control's model as the browser does: every one changes the data it drives (a lost change
    would wait out the 5 s limit). How fast is `make bench`'s question, not this test's."""
    open_app(page, server)
    times = page.evaluate(LATENCY_JS, {"n": 30, "gap": 60, "control": control})
    assert len(times) == 30 and max(times) < 5000, times


def test_fast_drag_applies_values_in_order_and_the_last_one_wins(page, server):
    open_app(page, server)
    seen = page.evaluate("""async () => {
      const doc = Bokeh.documents[0];
      const slider = [...doc.all_models].find(m => m.type === 'Slider' && m.title.startsWith('Head width'));
      const marker = doc.get_model_by_name('jacobian-diagonal-marker');
      const seen = [];
      const record = () => seen.push(window.__col('jacobian-diagonal-marker', 'width')[0]);
      marker.properties.data.change.connect(record); marker.change.connect(record);
      slider.value = 0;
      await new Promise(r => setTimeout(r, 500));
      seen.length = 0;
      for (let v = 1; v <= 24; v++) { slider.value = v; await new Promise(r => setTimeout(r, 3)); }
      const t0 = performance.now();
      while (window.__col('jacobian-diagonal-marker', 'width')[0] !== '4096' && performance.now() - t0 < 5000)
        await new Promise(r => setTimeout(r, 10));
      await new Promise(r => setTimeout(r, 500));
      return seen;
    }""")
    from attention_scaling import core
    order = [core.D_K_VALUES.index(int(w)) for w in seen]
    assert order, "no update arrived"
    assert order == sorted(order), f"applied out of order: {seen}"
    assert seen[-1] == "4096"
    assert column(page, "jacobian-diagonal-marker", "width") == ["4096"]


#: The head-width slider's model in the served page (a JavaScript expression).
HEAD_WIDTH_JS = ("[...Bokeh.documents[0].all_models].find("
                 "m => m.type === 'Slider' && m.title.startsWith('Head width'))")


SVG_ICON = ROOT / "assets" / "favicon.svg"
PNG_ICON = ROOT / "assets" / "favicon.png"


def inserted_while(page, browser, steps: int) -> list[str]:
    """The nodes whose insertion made the browser recompute styles (a trace's style
    invalidations) while the head-width slider takes ``steps`` steps, each until the address
    has changed and a little after (the icon is fetched and decoded after the update)."""
    browser.start_tracing(page=page, categories=[
        "disabled-by-default-devtools.timeline.invalidationTracking"])
    try:
        for _ in range(steps):
            address = page.url
            page.evaluate(f"() => {{ const s = {HEAD_WIDTH_JS}; s.value = s.value === 0 ? 1 : 0; }}")
            page.wait_for_function("(a) => window.location.href !== a", arg=address)
            page.wait_for_timeout(400)
    finally:
        trace = json.loads(browser.stop_tracing())
    return [e["args"]["data"].get("nodeName", "") for e in trace["traceEvents"]
            if e.get("name") == "StyleRecalcInvalidationTracking"
            and e.get("args", {}).get("data", {}).get("reason") == "Node was inserted into tree"]


def svg_documents(names: list[str]) -> list[str]:
    return [name for name in names if name.lower() in ("svg", "html")]


def test_an_address_update_makes_the_browser_build_no_svg_document(page, server, browser):
    """Chromium fetches and decodes the tab icon again after every address
    update (one per slider step here); an SVG icon is a document of its own (an svg and its
    shapes inserted, styled, laid out and painted on the page's main thread), a PNG is not.
    First with the SVG icon put back into the page, to show that this browser does redraw its
    icon (Playwright's own headless shell may not: then there is nothing to check), then with
    the page's own icon."""
    open_app(page, server)
    icons = page.evaluate("() => [...document.querySelectorAll('link[rel~=icon]')].map(l => l.href)")
    assert icons and all(href.startswith("data:image/png;base64,") for href in icons), icons
    set_icon = "(href) => document.querySelectorAll('link[rel~=icon]').forEach(l => l.href = href)"
    page.evaluate(set_icon, "data:image/svg+xml," + urllib.parse.quote(SVG_ICON.read_text("utf-8")))
    page.wait_for_timeout(400)
    with_svg = inserted_while(page, browser, 2)
    if not svg_documents(with_svg):
        pytest.skip("this browser does not redraw the tab icon after an address update")
    page.evaluate(set_icon, icons[0])
    page.wait_for_timeout(400)
    with_png = inserted_while(page, browser, 4)
    # the trace sees each step's own insertions (the slider's value label, re-created)
    assert sum("bk-slider-value" in name for name in with_png) >= 4, with_png[:20]
    assert svg_documents(with_png) == [], with_png[:20]


def test_the_tab_icon_is_the_svg_drawn(browser):
    """assets/favicon.png is assets/favicon.svg as Chromium draws it (scripts/favicon.py makes
    it): an edit of the SVG without drawing it again fails here."""
    page = browser.new_page()
    try:
        drawn = Image.open(io.BytesIO(draw_svg(page, SVG_ICON.read_text("utf-8"), 64)))
    finally:
        page.close()
    kept = Image.open(PNG_ICON)
    assert kept.size == drawn.size == (64, 64)
    a = np.asarray(kept.convert("RGBA"), dtype=int)
    b = np.asarray(drawn.convert("RGBA"), dtype=int)
    # the same drawing: another Chromium build may shade a few edge pixels differently; a
    # shape moved, resized or recoloured changes dozens
    differ = int((np.abs(a - b).max(axis=2) > 24).sum())
    assert differ <= 8, f"{differ} of 4096 pixels differ: run scripts/favicon.py"
    assert a[0, 0, 3] == 0 and a[32, 32, 3] == 255       # transparent corner, opaque inside


def test_resample_reset_and_copy_link_buttons(page, server):
    """The buttons, clicked as a user would: a new draw (new seed in the address and new bars),
    back to the Fig. 3 setting, and the link button's feedback."""
    open_app(page, server)
    fig3 = column(page, "unscaled-weights-source", "weight")
    page.get_by_role("button", name="Resample q and k").click()
    wait_changed(page, "unscaled-weights-source", "weight", fig3)
    page.wait_for_function("() => !location.search.includes('seed=2288')", timeout=UI_WAIT_MS)
    assert "seed=" in page.evaluate("() => location.search")
    page.locator(".noUi-handle").first.focus()
    page.keyboard.press("ArrowRight")
    page.get_by_role("button", name="Reset to the reference draw").click()
    page.wait_for_function("() => location.search.includes('seed=2288') && "
                           "location.search.includes('d_k=64')", timeout=UI_WAIT_MS)
    page.wait_for_function("(b) => JSON.stringify(window.__col('unscaled-weights-source', "
                           "'weight')) === JSON.stringify(b)", arg=fig3, timeout=UI_WAIT_MS)
    page.get_by_role("button", name="Copy link to this view").click()
    page.get_by_role("button", name=re.compile("Link copied|Not copied")).wait_for(
        timeout=UI_WAIT_MS)


def test_the_weight_hover_never_rounds_to_a_lie(page):
    """The hovers format in the browser (assets/js/hover-*.js): a weight
    below 1 never reads 1.0000, a positive weight or p(1 - p) never 0."""
    from attention_scaling.style import script
    WEIGHT_HOVER_JS, POSITIVE_HOVER_JS = script("hover-weight"), script("hover-positive")
    shown = page.evaluate("""([code, values]) => values.map((v) => new Function('value', code)(v))""",
                          [WEIGHT_HOVER_JS, [1.0, 0.99996, 0.99994, 0.5, 0.27, 3e-5, 1e-300, 0.0]])
    assert shown == [">0.9999", ">0.9999", "0.9999", "0.5000", "0.2700", "3.00e-5", "1.00e-300",
                     "<1e-308"]
    positive = page.evaluate(
        """([code, values]) => values.map((v) => new Function('value', code)(v))""",
        [POSITIVE_HOVER_JS, [0.25, 0.1234567, 2.7e-189, 0.0]])
    assert positive == ["0.2500", "0.1235", "2.700e-189", "<1e-308"]


def test_hovering_a_saturated_bar_shows_honest_numbers(page, server):
    """At d_k = 4096, T = 0.1 the unscaled top weight is 1 - 5.4e-189: hovering its bar shows
    >0.9999 (not 1.0000), its p(1 - p) and its gradient to the query in significant digits."""
    from attention_scaling import core
    v = core.compute_state(4096, 0.1, 2288).unscaled
    page.add_init_script(INIT)
    page.goto(server.url + "?d_k=4096&temperature=0.1&seed=2288&scaled=0")
    page.wait_for_function("() => (window.__col('unscaled-weights-source', 'weight') || [])"
                           ".some((w) => w > 0.999)", timeout=UI_WAIT_MS)
    box = page.evaluate("""(k) => { for (const d of Bokeh.documents) {
        const m = d.get_model_by_name('unscaled-weights'); if (!m) continue;
        const view = window.__AS.view(m), f = view.frame.bbox;
        const r = view.el.getBoundingClientRect();
        return [r.left + f.x0 + (k + 0.5) / 8 * f.width, r.top + f.y1 - 0.3 * f.height]; } }""",
                        v.argmax)
    page.mouse.move(box[0], box[1])
    tip = page.locator(".bk-tooltip-content").filter(has_text="weight").first
    tip.wait_for(timeout=UI_WAIT_MS)
    text = tip.inner_text()
    assert f"k{v.argmax + 1}" in text and ">0.9999" in text, text
    assert "1.0000" not in text
    assert f"{v.diagonal[v.argmax]:.3e}" in text, text
    assert f"{v.query_rows[v.argmax]:.3e}" in text, text


# Every PATCH-DOC message the page receives, as the ids of the models its events change (a
# Bokeh message is a header, a metadata and a content frame, then its buffers).
RECORD_PATCHES = """(() => {
  const Socket = window.WebSocket;
  window.__patches = [];
  window.WebSocket = function (...args) {
    const ws = new Socket(...args);
    let frame = 0, type = null;
    ws.addEventListener('message', (event) => {
      if (typeof event.data !== 'string') return;
      const json = JSON.parse(event.data);
      if (json.msgtype !== undefined) { type = json.msgtype; frame = 1; return; }
      frame += 1;
      if (frame === 3 && type === 'PATCH-DOC') {
        window.__patches.push(json.events.map((e) => e.model && e.model.id).filter(Boolean));
      }
    });
    return ws;
  };
  window.WebSocket.prototype = Socket.prototype;
  Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
})();"""


#: The names of the models each recorded PATCH-DOC changed.
PATCHED = """() => window.__patches.map((ids) => [...new Set(ids.map((id) => {
    const m = Bokeh.documents[0].get_model_by_id(id); return m ? m.name : null;
}).filter(Boolean))])"""


def patches_after(page, slider: str, position: int) -> list[set[str]]:
    """The named models each PATCH-DOC changed after setting ``slider`` to ``position`` in
    the page, in the order they arrived, up to the step's new question (the last thing the
    server sends) and 1.5 s more; the note saying that the worker pool computes a new
    setting ("busy") left out, alone or beside what it waited for."""
    page.evaluate("() => { window.__patches = []; }")
    page.evaluate("([n, p]) => { Bokeh.documents[0].get_model_by_name(n).value = p; }",
                  [slider, position])
    page.wait_for_function(f"() => ({PATCHED})().some((names) => names.some("
                           "(n) => n.endsWith('-ask-text')))", timeout=UI_WAIT_MS)
    page.wait_for_timeout(1500)       # anything else the change sends
    return [names for names in ([n for n in names if n != "busy"]
                                for names in page.evaluate(PATCHED)) if names]


#: The models of the steps' questions (layout.View._ask), which the server sends on its next
#: turn, after the charts.
QUESTION_PARTS = ("-ask-text", "-reveal", "-answer", "-guess")


def _questions_only(names) -> bool:
    return all(n.endswith(QUESTION_PARTS) for n in names)


def test_a_change_of_the_one_draw_reaches_the_page_as_one_message(page, server):
    page.add_init_script(RECORD_PATCHES)
    open_app(page, server)
    patches = patches_after(page, "d_k", 12)
    # the charts and texts in one message, then the new question in one of its own
    assert len(patches) == 2 and _questions_only(patches[1]), patches
    assert "draw-ask-text" in patches[1]
    assert {"scaled-weights-source", "unscaled-weights-source", "jacobian-source",
            "jacobian-diagonal-marker", "text-source"} <= set(patches[0])
    assert not any(n.endswith(QUESTION_PARTS) for n in patches[0])


def test_on_an_argument_tab_its_new_curves_come_before_the_one_draw(page, server):
    page.add_init_script(RECORD_PATCHES)
    server_url = server.url
    server.url = server_url + "?tab=saturation"
    try:
        open_app(page, server)
    finally:
        server.url = server_url
    # every tab in place with its question (the others are built once the page is shown):
    # their messages are not the change's
    page.wait_for_function(
        "(keys) => { const d = Bokeh.documents[0]; return d.get_model_by_name('sections').tabs"
        ".every((p) => p.child.type !== 'Div') && keys.every((k) => "
        "d.get_model_by_name(`${k}-ask-text`).text !== ''); }",
        arg=[t.key for t in TABS if t.ask], timeout=UI_WAIT_MS)
    from attention_scaling import core
    position = core.TEMPERATURES.index(1.0) + 1
    first, *rest, asked = patches_after(page, "temperature", position)
    assert "saturation-curves-source" in first
    assert "scaled-weights-source" not in first and "text-source" not in first
    assert len(rest) == 1 and {"scaled-weights-source", "text-source"} <= set(rest[0])
    # the questions last, in one message: the open tab's and the one draw's
    assert _questions_only(asked) and {"saturation-ask-text", "draw-ask-text"} <= set(asked)


#: The busy note's element, whether it is shown, and the box of the tabs below it.
BUSY_NOTE = """() => { const doc = Bokeh.documents[0];
  const note = window.__AS.view(doc.get_model_by_name('busy'));
  const p = window.__AS.root(doc.get_model_by_name('busy')).querySelector('.busy');
  const tabs = window.__AS.view(doc.get_model_by_name('sections')).el.getBoundingClientRect();
  return {on: note.el.classList.contains('busy-on'), shown: p.checkVisibility(),
          text: p.textContent, height: note.el.getBoundingClientRect().height,
          tabs: [tabs.top, tabs.height]}; }"""


def test_the_busy_note_follows_its_tags_and_moves_nothing(page, server):
    """What the server sets while the worker pool computes a setting (the note's tags,
    layout.View.show_busy; tests/test_work.py asserts when) shows the note over the page and
    takes it away, laying nothing out: the tabs below stay where they were."""
    open_app(page, server)
    before = page.evaluate(BUSY_NOTE)
    assert not before["on"] and not before["shown"] and before["height"] == 0
    page.evaluate("() => { Bokeh.documents[0].get_model_by_name('busy').tags = ['busy-on']; }")
    page.wait_for_function(f"() => ({BUSY_NOTE})().shown", timeout=UI_WAIT_MS)
    shown = page.evaluate(BUSY_NOTE)
    assert shown["on"] and shown["text"].startswith("Computing this setting")
    assert shown["height"] == 0 and shown["tabs"] == before["tabs"]
    page.evaluate("() => { Bokeh.documents[0].get_model_by_name('busy').tags = []; }")
    page.wait_for_function(f"() => !({BUSY_NOTE})().shown", timeout=UI_WAIT_MS)
    assert page.evaluate(BUSY_NOTE)["tabs"] == before["tabs"]
