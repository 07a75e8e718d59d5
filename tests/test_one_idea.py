"""Each tab leads with one idea, in the browser at 1280 px: its lead sentence (at most 30
words) at its top, its chart, a "Try this", and the rest under a "More detail" that is closed
by default, opens on a click and is open when printed; at most 120 words of prose shown per
tab with it closed (the controls and notes beside the charts left out). The controls a tab
does not use are disabled and say why."""

from __future__ import annotations

import re

import pytest

from attention_scaling.lead import LEAD_WORDS
from attention_scaling.state import TABS
from conftest import open_app

pytestmark = pytest.mark.browser

#: The prose of the open tab's panel, as above, within the main column (the sidebar and
#: the notes beside the charts are other columns).
MAIN_WORDS = """() => {
  const out = [];
  const within = (el) => {
    for (let e = el; e; e = e.parentNode instanceof ShadowRoot ? e.parentNode.host : e.parentNode) {
      if (e.classList && (e.classList.contains('app-sidebar') || e.classList.contains('app-notes')))
        return false;
      if (e.classList && e.classList.contains('app-main')) return true;
    }
    return false;
  };
  const walk = (root) => {
    const it = document.createTreeWalker(root, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT);
    for (let n = it.currentNode; n; n = it.nextNode()) {
      if (n.nodeType === 1 && n.shadowRoot) walk(n.shadowRoot);
      if (n.nodeType !== 3 || !n.textContent.trim()) continue;
      const el = n.parentElement;
      if (el.closest('button, .bk-tab, .bk-tabs-header, .bk-btn-group')) continue;
      const style = getComputedStyle(el);
      if (style.visibility !== 'visible' || style.display === 'none') continue;
      const box = el.getBoundingClientRect();
      if (box.width <= 2 || box.height <= 2 || box.bottom < 0) continue;
      if (!within(el)) continue;
      out.push(n.textContent);
    }
  };
  walk(document.body);
  return out.join(' ');
}"""


def words(text: str) -> int:
    return len(re.findall(r"\S+", text))


def _model_text(page, name):
    return page.evaluate("""(n) => { for (const d of Bokeh.documents) {
        const m = d.get_model_by_name(n); if (m) return window.__AS.root(m)?.textContent ?? null; }
        return null; }""", name)


def _open(page, title):
    page.locator(".bk-tab", has_text=title).click()


@pytest.mark.parametrize("tab", TABS, ids=[t.key for t in TABS])
def test_each_tab_shows_one_idea_in_at_most_120_words(page, server, tab):

    page.set_viewport_size({"width": 1280, "height": 900})
    open_app(page, server)
    lead_name = "draw-lead" if tab.key == "draw" else f"{tab.key}-lead"
    if tab.key != "draw":
        _open(page, tab.title)
    page.wait_for_function("(n) => { for (const d of Bokeh.documents) { const m = "
                           "d.get_model_by_name(n); if (m && m.text) return true; } "
                           "return false; }", arg=lead_name, timeout=30_000)
    page.wait_for_timeout(300)
    lead = _model_text(page, lead_name)
    assert 5 <= words(lead) <= LEAD_WORDS, lead
    shown = page.evaluate(MAIN_WORDS)
    assert words(shown) <= 120, (words(shown), shown)
    assert "Try this" in shown and lead.strip() in " ".join(shown.split())
    # "More detail" is closed: its text is not shown, until the toggle opens it
    detail = _model_text(page, "explanation" if tab.key == "draw" else f"{tab.key}-text")
    assert detail and detail.split()[0] not in ("",)
    toggle = page.get_by_role("button", name="More detail").locator("visible=true")
    assert toggle.count() == 1
    assert toggle.get_attribute("aria-expanded") in (None, "false")
    toggle.click()
    page.wait_for_function(MAIN_WORDS.replace("return out.join(' ');",
                                              "return out.join(' ').length;") + "() > 0")
    page.wait_for_timeout(300)
    opened = page.evaluate(MAIN_WORDS)
    assert words(opened) > words(shown)
    assert toggle.get_attribute("aria-expanded") == "true"
    assert page.console_errors == []


def test_more_detail_prints_open(page, server):

    open_app(page, server)
    closed = words(page.evaluate(MAIN_WORDS))
    page.emulate_media(media="print")
    page.wait_for_timeout(300)
    printed = words(page.evaluate(MAIN_WORDS))
    assert printed > closed + 150, (closed, printed)


def test_the_controls_a_tab_does_not_use_are_disabled_and_say_why(page, server):

    open_app(page, server)
    rule = page.get_by_role("button", name="unscaled", exact=True)
    assert rule.is_enabled()
    _open(page, "1 Variance")
    page.wait_for_function("() => { for (const d of Bokeh.documents) { const m = "
                           "d.get_model_by_name('rule'); if (m) return m.disabled; } }",
                           timeout=10_000)
    assert not rule.is_enabled()
    note = _model_text(page, "rule-idle")
    assert "Not used on this tab" in note and "histograms" in note
    assert _model_text(page, "temperature-idle") and _model_text(page, "seed-idle")
    assert page.get_by_role("button", name="Resample q and k").is_disabled()
    _open(page, "5 Heads")
    page.wait_for_function("() => { for (const d of Bokeh.documents) { const m = "
                           "d.get_model_by_name('rule'); if (m) return !m.disabled; } }",
                           timeout=10_000)
    assert rule.is_enabled()
    assert "512" in _model_text(page, "d_k-idle")
    _open(page, "One draw")
    page.wait_for_function("() => { for (const d of Bokeh.documents) { const m = "
                           "d.get_model_by_name('d_k'); if (m) return !m.disabled; } }",
                           timeout=10_000)
    assert page.console_errors == []
