"""Each tab leads with one idea, in the browser at 1280 px: its lead sentence (at most 30
words) at its top, its chart, a "Try this", and the rest under a "More detail" that is closed
by default, opens on a click and is open when printed; at most 120 words of prose shown per
tab with it closed (the controls and notes beside the charts left out; the step's question,
a prompt to predict rather than prose of the idea, is counted on its own: at most 35 words).
The controls a tab does not use are disabled and say why."""

from __future__ import annotations

import re

import pytest

from attention_scaling.prose.lead import LEAD_WORDS
from attention_scaling.state import TABS
from conftest import UI_WAIT_MS, eventually, open_app

pytestmark = pytest.mark.browser

#: The prose a reader sees in the open tab: the rendered text (innerText: sub- and
#: superscripts joined to their word) of every Bokeh Div in the main column that is shown
#: (not in a closed "More detail", whose column is hidden), without the screen readers' text
#: (.sr-only, clipped to 1 px); the sidebar and the notes beside the charts are other columns,
#: and buttons, tab titles and the charts' canvas text are not Divs. With ``ask``: the text of
#: the step's question block (.ask) instead, which is otherwise left out.
MAIN_WORDS = """(ask = false) => {
  const out = [];
  const within = (el) => {
    for (let e = el; e; e = e.parentNode instanceof ShadowRoot ? e.parentNode.host : e.parentNode) {
      if (e.classList && (e.classList.contains('app-sidebar') || e.classList.contains('app-notes')))
        return false;
      if (e.classList && e.classList.contains('ask') && !ask) return false;
      if (e.classList && e.classList.contains('app-main')) return !ask;
      if (e.classList && e.classList.contains('ask')) return true;
    }
    return false;
  };
  const walk = (root) => {
    for (const el of root.querySelectorAll('*')) {
      if (el.shadowRoot) walk(el.shadowRoot);
      if (!el.classList.contains('bk-clearfix') || !within(el)) continue;
      const style = getComputedStyle(el);
      const box = el.getBoundingClientRect();
      if (style.visibility !== 'visible' || box.width <= 2 || box.height <= 2) continue;
      let text = el.innerText;
      for (const hidden of el.querySelectorAll('.sr-only')) text = text.replace(hidden.innerText, ' ');
      out.push(text);
    }
  };
  walk(document.body);
  return out.join(' ');
}"""


def words(text: str) -> int:
    return len(re.findall(r"\S+", text))


def _model_text(page, name):
    return page.evaluate("""(n) => { for (const d of Bokeh.documents) {
        const m = d.get_model_by_name(n); if (m) return window.__AS.root(m)?.querySelector('.bk-clearfix')?.textContent ?? null; }
        return null; }""", name)


def _open(page, title):
    page.locator(".bk-tab", has_text=title).click()


def test_each_tab_shows_one_idea_in_at_most_120_words(page, server):
    """Each tab in turn, in one page: its lead, "Try this" and question in at most 120 words
    shown, "More detail" closed until its toggle opens it. Over 20 s: six tabs, each drawn
    and asked by the server the first time it is shown."""
    page.set_viewport_size({"width": 1280, "height": 900})
    open_app(page, server)
    for tab in TABS:
        _one_idea(page, tab)
    assert page.console_errors == []


def _one_idea(page, tab):
    lead_name = "draw-lead" if tab.key == "draw" else f"{tab.key}-lead"
    if tab.key != "draw":
        _open(page, tab.title)
    page.wait_for_function("(n) => { for (const d of Bokeh.documents) { const m = "
                           "d.get_model_by_name(n); if (m && m.text) return true; } "
                           "return false; }", arg=lead_name, timeout=UI_WAIT_MS)
    # the step's question is written by a message of its own, after the lead
    page.wait_for_function(f"() => ({MAIN_WORDS})(true).startsWith('Predict.')",
                           timeout=UI_WAIT_MS)
    lead = _model_text(page, lead_name)
    assert 5 <= words(lead) <= LEAD_WORDS, (tab.key, lead)
    shown = page.evaluate(MAIN_WORDS)
    assert words(shown) <= 120, (tab.key, words(shown), shown)
    assert "Try this" in shown and "".join(lead.split()) in "".join(shown.split()), tab.key
    question = page.evaluate(MAIN_WORDS, True)
    assert question.startswith("Predict.") and 8 <= words(question) <= 35, (tab.key, question)
    # "More detail" is closed: its text is not shown, until the toggle opens it
    detail = _model_text(page, "explanation" if tab.key == "draw" else f"{tab.key}-text")
    assert detail and detail.split()[0] not in ("",), tab.key
    toggle = page.get_by_role("button", name="More detail").locator("visible=true")
    assert toggle.count() == 1, tab.key
    assert toggle.get_attribute("aria-expanded") in (None, "false"), tab.key
    toggle.click()
    page.wait_for_function(f"(n) => ({MAIN_WORDS})().split(/\\s+/).length > n",
                           arg=words(shown) + 20, timeout=UI_WAIT_MS)
    opened = page.evaluate(MAIN_WORDS)
    assert words(opened) > words(shown), tab.key
    assert toggle.get_attribute("aria-expanded") == "true", tab.key


def test_more_detail_prints_open(page, server):

    open_app(page, server)
    closed = words(page.evaluate(MAIN_WORDS))
    page.emulate_media(media="print")
    printed = eventually(lambda: (lambda n: n if n > closed + 150 else None)(
        words(page.evaluate(MAIN_WORDS))), f"over {closed + 150} words printed")
    assert printed > closed + 150, (closed, printed)


def test_the_controls_a_tab_does_not_use_are_disabled_and_say_why(page, server):

    open_app(page, server)
    rule = page.get_by_role("button", name="unscaled", exact=True)
    assert rule.is_enabled()
    _open(page, "1 Variance")
    page.wait_for_function("() => { for (const d of Bokeh.documents) { const m = "
                           "d.get_model_by_name('rule'); if (m) return m.disabled; } }",
                           timeout=UI_WAIT_MS)
    assert not rule.is_enabled()
    note = _model_text(page, "rule-idle")
    assert "Not used on this tab" in note and "histograms" in note
    assert _model_text(page, "temperature-idle") and _model_text(page, "seed-idle")
    assert page.get_by_role("button", name="Resample q and k").is_disabled()
    _open(page, "5 Heads")
    page.wait_for_function("() => { for (const d of Bokeh.documents) { const m = "
                           "d.get_model_by_name('rule'); if (m) return !m.disabled; } }",
                           timeout=UI_WAIT_MS)
    assert rule.is_enabled()
    assert "512" in _model_text(page, "d_k-idle")
    _open(page, "One draw")
    page.wait_for_function("() => { for (const d of Bokeh.documents) { const m = "
                           "d.get_model_by_name('d_k'); if (m) return !m.disabled; } }",
                           timeout=UI_WAIT_MS)
    assert page.console_errors == []
