"""URL state and embed mode in a real Chromium against the served app."""

from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect

from attention_scaling import core
from conftest import UI_WAIT_MS, column, open_at, wait_column, wait_still

pytestmark = pytest.mark.browser


def query(page):
    return {k: v[-1] for k, v in parse_qs(urlparse(page.url).query).items()}


def test_link_restores_every_control_and_the_url_follows_live(page, server):
    open_at(page, server, "?d_k=512&scaled=0&temperature=2.5&seed=7")
    st = core.compute_state(512, 2.5, 7)
    assert column(page, "unscaled-weights-source", "weight") == pytest.approx(st.unscaled.probs.tolist(), abs=1e-12)
    assert column(page, "jacobian-source", "value") == pytest.approx(st.unscaled.jacobian.ravel().tolist(), abs=1e-12)
    page.wait_for_function("() => window.location.search.includes('seed=7')", timeout=UI_WAIT_MS)
    assert query(page) == {"d_k": "512", "rule": "none", "temperature": "2.5", "seed": "7",
                           "tab": "draw", "keys": "8", "align": "0"}
    page.locator(".noUi-handle").first.focus()
    page.keyboard.press("ArrowRight")                     # 512 -> 768
    page.wait_for_function("() => window.location.search.includes('d_k=768')", timeout=UI_WAIT_MS)
    assert query(page)["seed"] == "7"
    assert page.locator(".notice").count() == 0


def test_a_bare_address_gets_the_full_state_and_keeps_other_parameters(page, server):
    """Written in the browser (assets/js/write-url.js): on first display the address gets every control,
    the seed included; parameters that are not controls stay; no Location model, so the
    address is never sent back to the server. With the text hidden (an embed) the readout
    still updates: the fields' source hangs on both Divs."""
    open_at(page, server, "?hide=text")
    page.wait_for_function("() => window.location.search.includes('seed=')", timeout=UI_WAIT_MS)
    assert query(page) == {"hide": "text", "d_k": "64", "rule": "sqrt", "temperature": "1",
                           "seed": "2288", "tab": "draw", "keys": "8", "align": "0"}
    assert page.evaluate("() => Bokeh.documents[0].get_model_by_name('location')") is None
    active = """() => { const div = Bokeh.documents[0].get_model_by_name('readout');
        const el = window.__AS.root(div).querySelector('[data-active]');
        return el.dataset.active; }"""
    assert page.evaluate(active) == "sqrt"
    page.get_by_role("button", name="unscaled", exact=True).click()
    page.wait_for_function("() => window.location.search.includes('rule=none')", timeout=UI_WAIT_MS)
    assert query(page)["hide"] == "text"
    # without the explanation the gradient readout still follows the controls
    assert page.evaluate(active) == "none"


@pytest.mark.parametrize("search", [
    "?d_k=nan&temperature=inf&seed=-1&scaled=maybe",
    "?d_k=%3Cscript%3Ewindow.__pwned%3D1%3C%2Fscript%3E&seed=%3Cimg%20src%3Dx%20onerror%3Dwindow.__pwned%3D1%3E",
    "?d_k=1e999&d_k=64&temperature=&seed=" + "9" * 5000,
    "?hide=%3Cb%3Ebold%3C%2Fb%3E&embed=yes%3Cscript%3E",
])
def test_hostile_urls_give_a_notice_and_a_working_page(page, server, search):
    open_at(page, server, search)
    notice = page.locator(".notice")
    assert notice.count() == 1
    text = notice.inner_text()
    assert "adjusted" in text
    assert page.evaluate("() => window.__pwned === undefined")
    # nothing from the URL became markup: no <b>, <script> or <img> inside the notice
    assert page.locator(".notice b").count() == 1          # only our own heading
    assert page.locator(".notice script, .notice img").count() == 0
    body = page.inner_text("body")
    assert "NaN" not in body and "Traceback" not in body
    # the page still works at its defaults for whatever was refused
    weights = column(page, "scaled-weights-source", "weight")
    assert len(weights) == 8 and abs(sum(weights) - 1) < 1e-12
    assert page.console_errors == []


def test_embed_mode_hides_header_controls_and_text(page, server):
    server_url = server.url
    server.url = server_url + "?embed=1&hide=controls,text"
    try:
        page.goto(server.url)
        page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0 && "
                               "Bokeh.documents[0].get_model_by_name('scaled-weights') !== null",
                               timeout=UI_WAIT_MS)
        wait_still(page)
    finally:
        server.url = server_url
    assert page.locator("#header").count() == 0
    assert page.locator(".noUi-handle").count() == 0
    assert "Dividing by" not in page.inner_text("body")
    assert page.evaluate("() => Bokeh.documents[0].get_model_by_name('jacobian') !== null")
    # no empty column where the controls would be: the tabs start at the page's left edge
    left = page.get_by_role("tab", name="One draw", exact=True).bounding_box()["x"]
    assert left < 40, left


def test_a_preset_changes_the_controls_in_place_and_keeps_the_embed(page, server):
    """assets/js/presets.js: in an embed with the text hidden and the dark theme, a click on
    a preset sets the controls without loading the page again (the window's marker and its
    one navigation survive); embed, hide, theme and the open tab stay, the address follows,
    and the charts show core's values at the preset."""
    open_at(page, server, "?embed=1&hide=text&theme=dark&d_k=128&seed=7&tab=gradient")
    page.evaluate("() => { window.__marker = 'still here'; }")
    link = page.get_by_role("link", name="Temperature 2")
    link.hover()            # the link's address: the preset's controls and the kept keys
    href = dict(parse_qs(link.get_attribute("href")[1:]))
    assert {k: v[-1] for k, v in href.items()} == {
        "d_k": "64", "rule": "sqrt", "temperature": "2", "seed": "2288", "tab": "gradient",
        "keys": "8", "align": "0", "embed": "1", "hide": "text", "theme": "dark"}
    link.click()
    expected = core.compute_state(64, 2.0, 2288).scaled.probs.tolist()
    wait_column(page, "scaled-weights-source", "weight", expected)
    page.wait_for_function("() => window.location.search.includes('temperature=2&')",
                           timeout=UI_WAIT_MS)
    assert query(page) == {k: v[-1] for k, v in href.items()}
    assert page.evaluate("() => [window.__marker, "
                         "performance.getEntriesByType('navigation').length, "
                         "document.documentElement.dataset.theme]") == ["still here", 1, "dark"]
    assert page.locator("#header").count() == 0
    assert page.locator(".bk-tab.bk-active").inner_text() == "3 Gradient"
    # a preset that names a tab opens it, still in place
    page.get_by_role("link", name="softmax([1, 5, 10])").click()
    page.wait_for_function("() => window.location.search.includes('tab=saturation')",
                           timeout=UI_WAIT_MS)
    wait_column(page, "scaled-weights-source", "weight",
                core.compute_state(64, 1.0, 2288).scaled.probs.tolist())
    assert page.locator(".bk-tab.bk-active").inner_text() == "2 Saturation"
    assert query(page)["embed"] == "1" and query(page)["theme"] == "dark"
    assert page.evaluate("() => window.__marker") == "still here"
    assert page.console_errors == []


def test_a_preset_that_names_a_worked_example_shows_it(page, server):
    """"softmax([1, 5, 10])" and "112 / √64 = 14" open their tab and its "More detail", where
    the example is worked out, in view; a preset that only sets controls opens nothing."""
    open_at(page, server, "")
    for label, tab, shown in (("softmax([1, 5, 10])", "saturation", "softmax([1, 5, 10]) = ["),
                              ("112 / √64 = 14", "variance", "112")):
        page.get_by_role("link", name=label).click()
        page.wait_for_function(f"() => window.location.search.includes('tab={tab}')",
                               timeout=UI_WAIT_MS)
        toggle = page.get_by_role("button", name="More detail").locator("visible=true")
        expect(toggle).to_have_attribute("aria-expanded", "true", timeout=UI_WAIT_MS)
        example = page.locator(f"[name='{tab}-more'], .more").get_by_text(shown).first
        expect(example).to_be_visible(timeout=UI_WAIT_MS)
    assert page.get_by_role("link", name="Temperature 2").get_attribute("data-open") is None
    assert page.console_errors == []


ARGUMENT_TABS = ("variance", "saturation", "gradient", "training", "budget")
#: Every element of prose on the page, by name: the one draw's lead, "Try this" (the guide),
#: "More detail" (caption, explanation, the readout's other rows), each argument tab's lead,
#: "Try this" and "More detail", and the notes under the controls saying why a tab does not
#: use them.
PROSE = ("draw-lead", "guide", "draw-more-toggle", "caption", "explanation", "readout-detail",
         *(f"{key}-{part}" for key in ARGUMENT_TABS
           for part in ("lead", "try", "more-toggle", "text")),
         *(f"{name}-idle" for name in ("d_k", "rule", "temperature", "seed", "keys", "align")))

#: The names of PROSE drawn on the page (a view in it: shown, or in a tab not shown), and
#: the text of the Divs drawn.
IN_PAGE = """(names) => {
  const drawn = (m) => { const v = window.__AS.view(m); return v != null && v.el != null && v.el.isConnected; };
  const models = Bokeh.documents.flatMap((d) => [...d.all_models]).filter(drawn);
  const held = names.filter((n) => models.some((m) => m.name === n));
  const texts = models.filter((m) => m.type === 'Div').map((m) => m.text);
  return [held, texts.join(' ')]; }"""


def open_every_tab(page):
    """Show each tab (the argument's are built when first shown), the variance tab last;
    each until its downloads are drawn."""
    for key in ("draw", "saturation", "gradient", "training", "budget", "variance"):
        page.evaluate("(k) => { const tabs = Bokeh.documents[0].get_model_by_name('sections');"
                      " tabs.active = ['draw', 'variance', 'saturation', 'gradient', 'training',"
                      " 'budget'].indexOf(k); }", key)
        page.wait_for_function(
            "(k) => { const m = Bokeh.documents[0].get_model_by_name('downloads-' + k);"
            " const v = m && window.__AS.view(m); return v != null && v.el.isConnected &&"
            " v.el.getBoundingClientRect().height > 0; }", arg=key, timeout=60_000)


def test_hide_text_leaves_out_every_sentence_of_prose(page, server):
    """state.VIEW_PARTS' "text" (layout.View._text): with hide=text none of the prose is
    drawn, on any tab (the argument's tabs built and shown); the same page without it draws
    every one, so the list names real elements."""
    open_at(page, server, "")
    open_every_tab(page)
    held, text = page.evaluate(IN_PAGE, list(PROSE))
    assert held == list(PROSE)
    assert "Not used on this tab" in text and "Try this" in text
    open_at(page, server, "?hide=text")
    page.wait_for_function("() => window.location.search.includes('seed=')", timeout=UI_WAIT_MS)
    open_every_tab(page)
    held, text = page.evaluate(IN_PAGE, list(PROSE))
    assert held == []
    for words in ("Not used on this tab", "Try this", "More detail", "At d"):
        assert words not in text
    # the controls still follow the tab: the variance tab disables those it does not use
    page.wait_for_function("() => Bokeh.documents[0].get_model_by_name('temperature').disabled",
                           timeout=UI_WAIT_MS)
    assert page.console_errors == []
