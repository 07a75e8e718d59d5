"""The page's notation, in a real Chromium, served and offline: d_k and the other indices are
subscripts wherever the page draws text itself (chart titles, axis labels, legends, colour
bars, hover labels, buttons, sliders, tabs, presets), never an ASCII ``_k``, ``_F`` or ``^H``;
the formulas are drawn by Bokeh's own MathJax as SVG glyph paths (no MathML, no font of the
browser's), and nothing is fetched from anywhere but the page's own server (or file)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect
from conftest import UI_WAIT_MS, open_at

pytestmark = pytest.mark.browser

#: Every text the Bokeh models of the page draw themselves, as [model type, text].
MODEL_TEXTS = """() => {
  const out = [];
  const push = (type, v) => {
    if (v != null && typeof v === 'object' && 'value' in v) v = v.value;
    if (typeof v === 'string' && v !== '') out.push([type, v]);
  };
  for (const doc of Bokeh.documents) for (const m of doc.all_models) {
    const t = m.type;
    if (['Title', 'TabPanel', 'ColorBar'].includes(t)) push(t, t === 'Title' ? m.text : m.title);
    if (['Button', 'Toggle', 'LegendItem'].includes(t)) push(t, m.label);
    if (t === 'Slider') push(t, m.title);
    if (t === 'RadioButtonGroup') m.labels.forEach(v => push(t, v));
    if (t === 'HoverTool' && Array.isArray(m.tooltips)) m.tooltips.forEach(r => push(t, r[0]));
    if (t.endsWith('Axis')) {
      push(t, m.axis_label);
      const o = m.major_label_overrides;
      for (const v of (o instanceof Map ? o.values() : Object.values(o || {}))) push(t, v);
    }
  }
  return out;
}"""

#: The formulas as the browser shows them: per MathJax container (in any shadow root) its
#: glyph paths and uses, the <math> elements anywhere, and the containers' drawn sizes.
FORMULAS = """() => {
  const containers = [], maths = [];
  const walk = (root) => root.querySelectorAll('*').forEach(e => {
    if (e.shadowRoot) walk(e.shadowRoot);
    if (e.tagName === 'MJX-CONTAINER' && e.closest('.formulas')) containers.push(e);
    if (e.tagName.toLowerCase() === 'math') maths.push(e);
  });
  walk(document);
  return {maths: maths.length, containers: containers.map(c => {
    const r = c.getBoundingClientRect();
    return {paths: c.querySelectorAll('svg path[d]').length,
            uses: c.querySelectorAll('svg use').length,
            text: c.querySelectorAll('svg text').length,
            hidden: c.closest('[aria-hidden="true"]') !== null,
            label: c.closest('[aria-hidden]')?.previousElementSibling?.textContent ?? '',
            width: r.width, height: r.height};
  })};
}"""

#: ASCII notation the page must not show: an underscore or caret before a letter (d_k, _F,
#: e^H, p_i, W_Q).
ASCII_INDEX = re.compile(r"[_^][A-Za-z]")
DK = "d\u2096"      # d with Unicode's subscript k


def _drawn_texts(page) -> list[list[str]]:
    """The models' texts and the DOM's tab, button and link names."""
    texts = page.evaluate(MODEL_TEXTS)
    for role in ("tab", "button", "link"):
        texts += [[role, t] for t in page.get_by_role(role).all_inner_texts()]
    return texts


def _assert_real_notation(texts: list[list[str]], presets: bool = True) -> None:
    """No ASCII index in ``texts``; ``presets``: the page has the presets' links."""
    wrong = [t for t in texts if ASCII_INDEX.search(t[1])]
    assert not wrong, wrong
    # what the assertion above read: the slider, the rule's buttons, a chart's title (and
    # what it says of the model), a preset, with the subscript k
    expected = [("Slider", f"Head width {DK}"), ("RadioButtonGroup", f"÷√{DK}"),
                ("Title", f"Scaled by 1/√{DK}")] + [("link", f"Unscaled at {DK} = 64")] * presets
    for kind, start in expected:
        assert any(t[0] == kind and t[1].startswith(start) for t in texts), (kind, start)


def _assert_formulas_by_mathjax(page) -> None:
    page.get_by_role("button", name="More detail").first.click()
    page.wait_for_function(f"() => ({FORMULAS})().containers.length === 5", timeout=UI_WAIT_MS)
    found = page.evaluate(FORMULAS)
    assert found["maths"] == 0                       # no MathML, typeset by the browser
    for c in found["containers"]:
        # every glyph a path of MathJax's own fonts (none drawn as text in a browser font)
        assert c["paths"] > 0 and c["uses"] > 0 and c["text"] == 0, c
        assert c["width"] > 40 and c["height"] > 10, c
        # a screen reader reads the formula's words beside it, not its drawing
        assert c["hidden"] and c["label"], c
    labels = [c["label"] for c in found["containers"]]
    assert labels[0] == f"Var(q·k) = {DK}" and f"√{DK}" in labels[4], labels
    from axe_playwright_python.sync_playwright import Axe
    violations = Axe().run(page).response["violations"]
    assert not [v for v in violations if v["id"] in ("svg-img-alt", "role-img-alt")]


def _only_from(requests: list[str], origin: str) -> list[str]:
    """The requests that went anywhere but ``origin`` (data: and blob: URLs stay in the page)."""
    return [u for u in requests if not u.startswith(origin)
            and urlsplit(u).scheme not in ("data", "blob")]


def test_served_page_shows_subscripts_and_mathjax_formulas(page, server):
    open_at(page, server, "?tab=draw")
    _assert_formulas_by_mathjax(page)
    # the argument's tabs are built when first shown: show each, then read every model
    for name in ("1 Variance", "2 Saturation", "3 Gradient", "4 Training", "5 Heads"):
        page.get_by_role("tab", name=name).click()
    page.wait_for_function("() => Bokeh.documents.some(d => d.get_model_by_name('head-budget'))"
                           " && Bokeh.documents.some(d => d.get_model_by_name('training-loss'))",
                           timeout=60_000)
    texts = _drawn_texts(page)
    _assert_real_notation(texts)
    titles = {t[1] for t in texts if t[0] == "Title"}
    assert {"Effective keys eᴴ (H: entropy)", "Jacobian ∂pᵢ/∂uⱼ, scaled logits",
            f"Spread of q·k against {DK}"} <= titles, sorted(titles)
    origin = f"http://127.0.0.1:{server.port}/"
    assert page.requests and not _only_from(page.requests, origin)
    assert any("bokeh-mathjax" in u for u in page.requests)   # from this server's own files


def test_offline_copy_shows_subscripts_and_html_formulas_without_mathjax(browser,
                                                                        offline_export):
    """The offline copy's formulas are HTML (italic symbols, real subscripts: no MathJax
    bundle in the file), the same five, each reading as the served page's words."""
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    requests = []
    context.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file://")
                  else r.abort())
    try:
        pg = context.new_page()
        pg.on("request", lambda r: requests.append(r.url))
        pg.goto(offline_export.path.resolve().as_uri())
        pg.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0 && "
                             "Bokeh.documents[0].get_model_by_name('scaled-weights')",
                             timeout=UI_WAIT_MS)
        pg.get_by_role("button", name="More detail").first.click()
        formulas = pg.locator(".formulas .formula")
        expect(formulas.first).to_be_visible(timeout=UI_WAIT_MS)
        shown = formulas.all_inner_texts()         # d<sub>k</sub> reads as "dk"
        assert len(shown) == 5 and shown[0] == "Var(q·k) = dk", shown
        assert shown[4].endswith("s = √dk, 1 or dk"), shown
        assert pg.locator(".formulas sub").count() >= 8
        assert "bokeh-mathjax" not in offline_export.path.read_text(encoding="utf-8")
        _assert_real_notation(_drawn_texts(pg), presets=False)      # it has no presets
        assert not _only_from(requests, "file://")
    finally:
        context.close()
