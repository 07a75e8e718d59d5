"""For every learner, in Chromium against the served page: no sideways scrolling from a phone
to a wide screen, screenshots of every tab at four widths, light and dark (build/screenshots/;
the one draw's kept in assets/screenshots/), an iframe of 360 px, axe-core's
rules, names and keys for the controls, and the charts as text for screen readers."""

from pathlib import Path

import pytest
from conftest import INIT, LIVE, TRAINING_WAIT_MS, UI_WAIT_MS, column, open_app, open_at
from conftest import NO_TAB_TO_BUILD, eventually, wait_column, wait_still
from test_phone_layout import BLANK, FLAT, click_tab
from playwright.sync_api import expect

from attention_scaling import core, style
from attention_scaling.argument import gradient_window
from attention_scaling.state import TABS

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
#: The screenshots kept in the repository: the one draw, light, at each width.
SHOTS = ROOT / "assets" / "screenshots"
#: Every screenshot the tests take: each tab at each width, light and dark (build/ is the
#: tests' output, not kept).
ALL_SHOTS = ROOT / "build" / "screenshots"
WIDTHS = (375, 768, 1280, 1920)


def _open(browser, server, width, search="", height=900, init="", **context):
    """The served page at ``search`` in a window of ``width`` x ``height``, drawn and still;
    ``init``: a script run in it before the page's own (after conftest.INIT)."""
    ctx = browser.new_context(viewport={"width": width, "height": height}, **context)
    if init:
        ctx.add_init_script(init)
    page = ctx.new_page()
    page.console_errors = []
    page.on("pageerror", lambda e: page.console_errors.append(str(e)))
    page.on("console", lambda m: m.type == "error" and page.console_errors.append(m.text))
    if "controls" in search:                         # no slider to wait for
        page.add_init_script(INIT)
        page.goto(server.url + search)
        page.wait_for_function(LIVE, timeout=UI_WAIT_MS)
    else:
        open_at(page, server, search)
    wait_still(page)
    return ctx, page


def sideways(page):
    """How far the page scrolls sideways (0: not at all)."""
    return page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")


def test_no_sideways_scroll_on_the_narrowest_phone(browser, server):
    """At 320 px, the narrowest phone still sold: nothing scrolls sideways on the one draw
    nor on Saturation, and the controls stand above the charts. The four wider widths are
    the screenshot walks' (every tab, and where the controls stand)."""
    ctx, page = _open(browser, server, 320)
    try:
        _show_tab(page, "draw")
        assert sideways(page) <= 0
        assert_controls_placed(page, 320)
        page.locator(".bk-tab", has_text="2 Saturation").click()
        page.wait_for_function("() => { const m = Bokeh.documents[0].get_model_by_name("
                               "'saturation-curves'); return m && window.__AS.view(m); }",
                               timeout=UI_WAIT_MS)
        wait_still(page, "saturation-curves")
        assert sideways(page) <= 0
        assert page.console_errors == []
    finally:
        ctx.close()


def assert_controls_placed(page, width):
    """The controls stand above the charts on a narrow screen (below 900 px), beside them on
    a wide one: the d_k slider's box against the scaled bar chart's."""
    slider, chart = page.evaluate("""() => ['d_k', 'scaled-weights'].map((n) => {
        const b = window.__AS.view(Bokeh.documents[0].get_model_by_name(n)).el
                  .getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; })""")
    if width < 900:
        assert slider[3] <= chart[1], (width, slider, chart)
    else:
        assert slider[2] <= chart[0], (width, slider, chart)


#: A tab's chart drawn and still: its view as wide as a chart, its data in it (but the
#: training's, empty until Train), no busy note, and the page's height and the chart's box
#: the same over ten frames in a row.
SETTLED = """async ([name, empty]) => {
  const doc = Bokeh.documents[0];
  const look = () => {
    const m = doc.get_model_by_name(name), v = m && window.__AS.view(m);
    const busy = doc.get_model_by_name('busy');
    if (v == null || v.bbox.width <= 100 || (busy != null && busy.tags.includes('busy-on'))) return null;
    const filled = m.renderers.some((r) => (r.data_source?.get_length?.() ?? 0) > 0);
    if (!filled && !empty) return null;
    return JSON.stringify([document.documentElement.scrollHeight, v.bbox.width, v.bbox.height]);
  };
  for (let last = null, same = 0; same < 10;) {
    await new Promise((done) => { requestAnimationFrame(() => done()); });
    const now = look();
    same = now !== null && now === last ? same + 1 : 0;
    last = now;
  }
  return true; }"""


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_screenshots_of_every_tab_at_every_width_light_and_dark(browser, server, theme):
    """Each tab of state.TABS at each width, one page per theme walking through them (the
    window resized), drawn and photographed (build/screenshots/<tab>-<width>-<theme>.png:
    its first screen, what a reader sees on opening it): as wide as the screen, nothing
    sideways, its chart and its page to the bottom (photographed scrolled there) in the
    theme asked for, and on the one draw the controls above the charts or beside them
    (:func:`assert_controls_placed`); at 1280 px, axe-core finds no violation of any impact
    (minor and moderate too) on any tab. The one draw in light is kept in
    assets/screenshots/ (the whole page from 1280 px, the first screen below). Light walks
    the tabs in order, each opened through the tab list's model; dark walks them the other
    way, each opened by a click on its header, and there each tab ends within 100 px of its
    content's bottom (a tab left as tall as a taller one shown before it would not:
    test_phone_layout.BLANK). Over 20 s: 6 tabs at 4 widths, and axe over the whole page on
    six tabs. A full-page photograph of each took ten times a screen's (the page laid out
    again at its whole height, and back)."""
    import io

    from PIL import Image
    ALL_SHOTS.mkdir(parents=True, exist_ok=True)
    ctx, page = _open(browser, server, WIDTHS[0], f"?theme={theme}", init=FLAT)
    walk = list(enumerate(TABS)) if theme == "light" else list(reversed(list(enumerate(TABS))))
    try:
        found, blanks = {}, {}
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            wait_still(page)
            for i, tab in walk:
                if theme == "light":
                    page.evaluate("(i) => { Bokeh.documents[0].get_model_by_name('sections')"
                                  ".active = i; }", i)
                else:
                    click_tab(page, i, tab.title)
                    blanks[(width, tab.key)] = page.evaluate(BLANK)
                page.wait_for_function(DRAWN, arg=TAB_CHART[tab.key], timeout=UI_WAIT_MS)
                page.evaluate(SETTLED, [TAB_CHART[tab.key], tab.key == "training"])
                assert sideways(page) <= 0, (tab.key, width)
                page.screenshot(path=str(ALL_SHOTS / f"{tab.key}-{width}-{theme}.png"))
                height = page.evaluate("() => { window.scrollTo(0, document.documentElement"
                                       ".scrollHeight); return document.documentElement"
                                       ".scrollHeight; }")
                shot = Image.open(io.BytesIO(page.screenshot())).convert("RGB")
                page.evaluate("() => window.scrollTo(0, 0)")
                assert shot.width == width and height >= 500, (tab.key, shot.size, height)
                corner, chart = sum(shot.getpixel((1, shot.height - 2))), \
                    max(_plot_pixel(page, TAB_CHART[tab.key]))
                if theme == "dark":
                    assert corner < 3 * 60 and chart < 60, (tab.key, width, corner, chart)
                else:
                    assert corner > 3 * 230 and chart > 230, (tab.key, width, corner, chart)
                if tab.key == "draw":
                    assert_controls_placed(page, width)
                if tab.key == "draw" and theme == "light":
                    SHOTS.mkdir(exist_ok=True)
                    page.screenshot(path=str(SHOTS / f"explorer-{width}.png"),
                                    full_page=width >= 1280)
                if width == 1280:
                    found[tab.key] = violations(page)
        assert found == {tab.key: [] for tab in TABS}
        assert all(0 <= blank <= 100 for blank in blanks.values()), blanks
        assert len(blanks) == (len(WIDTHS) * len(TABS) if theme == "dark" else 0)
        assert page.console_errors == []
    finally:
        ctx.close()


@pytest.mark.parametrize("width", [375, 1400])
def test_the_charts_keep_their_place_while_a_slider_moves(browser, server, width):
    """Across d_k's values, every chart of the one draw keeps its width and the page never
    gets shorter: the texts keep the tallest height they have had, and no number in them
    widens the column (which resized every chart, and the page moved under the reader)."""
    ctx, page = _open(browser, server, width, height=812)
    try:
        sizes = []
        for index in (3, 17, 8, 22, 12, 5, 0, 24, 11):
            page.evaluate("(i) => { Bokeh.documents[0].get_model_by_name('d_k').value = i; }",
                          index)
            page.wait_for_function(
                "(w) => (window.__col('jacobian-diagonal-marker', 'width') || [])[0] === w",
                arg=str(core.D_K_VALUES[index]), timeout=UI_WAIT_MS)
            wait_still(page, "scaled-weights", "unscaled-weights", "jacobian",
                       "jacobian-diagonal")
            sizes.append(page.evaluate("""() => [
                ['scaled-weights', 'unscaled-weights', 'jacobian', 'jacobian-diagonal'].map(
                    (n) => window.__AS.view(Bokeh.documents[0].get_model_by_name(n))
                           .el.getBoundingClientRect().width),
                document.documentElement.scrollHeight]"""))
        widths = [w for w, _ in sizes]
        assert all(w == widths[0] for w in widths), widths
        heights = [h for _, h in sizes]
        assert heights == sorted(heights), heights
        assert sideways(page) <= 0
    finally:
        ctx.close()


def test_embedded_in_a_360px_iframe_nothing_scrolls_sideways(browser, server):
    ctx = browser.new_context(viewport={"width": 400, "height": 900})
    try:
        page = ctx.new_page()
        page.goto(server.url + "liveness")          # the iframe's parent on the same host
        page.set_content(f"<iframe src='{server.url}?embed=1' width='360' height='800' "
                         "style='border:0' title='explorer'></iframe>")
        frame = page.frame_locator("iframe")
        frame.locator(".noUi-handle").first.wait_for(timeout=UI_WAIT_MS)
        inner = page.frames[1]
        inner.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0 && "
                                "Bokeh.documents[0].get_model_by_name('scaled-weights')")
        wait_still(inner)
        assert inner.evaluate("() => document.documentElement.scrollWidth") <= 360
        assert inner.evaluate("() => document.getElementById('header') === null")
    finally:
        ctx.close()


def test_the_readme_s_iframe_works_in_a_course_page_of_another_site(browser, server):
    """The README's iframe snippet, its host made the test server's, in a course page of
    another site (localhost, where the explorer is 127.0.0.1): the explorer opens at the
    snippet's d_k with no header and no text, goes live, and a key on its slider moves its
    charts."""
    import re as regex
    snippet = regex.search(r'<iframe src="https://explorer\.example\.edu/[^"]*"[^>]*></iframe>',
                           (ROOT / "README.md").read_text(encoding="utf-8"))[0]
    d_k = int(regex.search(r"d_k=(\d+)", snippet)[1])
    ctx = browser.new_context(viewport={"width": 1280, "height": 1000})
    ctx.add_init_script(INIT)                   # the test's helpers, in the iframe too
    try:
        page = ctx.new_page()
        page.goto(server.url.replace("127.0.0.1", "localhost") + "liveness")   # another site
        page.set_content(snippet.replace("https://explorer.example.edu/", server.url))
        page.frame_locator("iframe").locator(".noUi-handle").first.wait_for(timeout=UI_WAIT_MS)
        inner = page.frames[1]
        inner.wait_for_function(LIVE, timeout=UI_WAIT_MS)
        assert inner.evaluate("() => document.getElementById('header') === null")
        assert "Dividing by" not in inner.inner_text("body")
        weights = "() => window.__col('scaled-weights-source', 'weight')"
        assert inner.evaluate(weights) == pytest.approx(
            core.compute_state(d_k, 1.0, 2288).scaled.probs.tolist(), rel=1e-12)
        before = inner.evaluate(weights)
        page.frame_locator("iframe").locator(".noUi-handle").first.focus()
        page.keyboard.press("ArrowRight")
        inner.wait_for_function(f"(b) => JSON.stringify(({weights})()) !== JSON.stringify(b)",
                                arg=before, timeout=UI_WAIT_MS)
    finally:
        ctx.close()


#: No tab of the page is still to be built: every argument tab is built, or none is and the
#: one draw is open (a page opened there builds them only when a step is asked for).
def violations(page):
    """axe-core's violations on ``page``, of every impact: (rule, impact, first targets);
    once the page's tabs are all built (BokehJS draws the tab headers anew when the server
    puts the other steps in, and axe must not look at the page in the middle of that)."""
    from axe_playwright_python.sync_playwright import Axe
    page.wait_for_function(NO_TAB_TO_BUILD, timeout=UI_WAIT_MS)
    found = Axe().run(page).response["violations"]
    return [(v["id"], v["impact"], [n["target"][-1] for n in v["nodes"]][:3]) for v in found]


#: A chart of each tab of state.TABS, drawn once the tab is.
TAB_CHART = {"draw": "scaled-weights", "variance": "logit-std",
             "saturation": "saturation-curves", "gradient": "saturation-gradient",
             "training": "training-loss", "budget": "head-budget"}
DRAWN = ("(n) => { const m = Bokeh.documents[0].get_model_by_name(n); const v = m && "
         "window.__AS.view(m); return v != null && v.bbox.width > 100; }")


def _open_tab(browser, server, search):
    """The page at ``search`` at 1280 px, its open tab's chart drawn."""
    ctx, page = _open(browser, server, 1280, search)
    tab = dict(x.split("=") for x in search.lstrip("?").split("&") if x).get("tab", "draw")
    page.wait_for_function(DRAWN, arg=TAB_CHART[tab], timeout=UI_WAIT_MS)
    wait_still(page, TAB_CHART[tab])
    return ctx, page


def _show_tab(page, key):
    """Open the tab ``key`` on ``page`` (as its header's click does) and wait until its chart
    is drawn and the page keeps still."""
    page.evaluate("(i) => { Bokeh.documents[0].get_model_by_name('sections').active = i; }",
                  [t.key for t in TABS].index(key))
    page.wait_for_function(DRAWN, arg=TAB_CHART[key], timeout=UI_WAIT_MS)
    wait_still(page, TAB_CHART[key])


@pytest.mark.parametrize("search", [
    "?embed=1", "?embed=1&hide=text&theme=dark", "?hide=controls", "?embed=1&tab=training"])
def test_axe_finds_no_violation_embedded_or_with_parts_hidden(browser, server, search):
    """axe-core: no violation of any impact in the embed modes and with parts hidden."""
    ctx, page = _open_tab(browser, server, search)
    try:
        assert violations(page) == []
        assert page.console_errors == []
    finally:
        ctx.close()


#: The element that has the keyboard's focus, through the shadow roots BokehJS draws in.
FOCUSED = """() => { let e = document.activeElement;
  while (e && e.shadowRoot && e.shadowRoot.activeElement) e = e.shadowRoot.activeElement;
  return e; }"""
#: The name of the landmark (main, region) element ``el`` is in, across shadow roots; null
#: outside every landmark.
LANDMARK = """(el) => { for (let e = el; e != null; e = e.parentNode ?? e.host) {
    if (e.getAttribute && ['main', 'region'].includes(e.getAttribute('role')))
      return e.getAttribute('aria-label'); }
  return null; }"""


#: The tabs' list changed (new panels, as when the server puts in the steps it built), and
#: the headers' roles as the very next task finds them.
ROLES_AFTER_A_CHANGE = """() => new Promise((done) => {
  const tabs = Bokeh.documents[0].get_model_by_name('sections');
  tabs.tabs = tabs.tabs.map((p) => new p.constructor({title: p.title, child: p.child}));
  setTimeout(() => done([...window.__AS.root(tabs).querySelectorAll('.bk-tab')]
    .map((h) => h.getAttribute('role'))), 0);
})"""


def test_tab_headers_drawn_anew_have_their_roles_before_any_other_task_runs(browser, server):
    """BokehJS draws the tab headers anew, without roles, when the tabs' list changes (the
    server puts in the steps it built after the page is shown): the roles are back before any
    other task runs, so neither a screen reader nor axe meets a tablist without tabs."""
    ctx, page = _open(browser, server, 1280, "?tab=training")
    try:
        page.wait_for_function(NO_TAB_TO_BUILD, timeout=UI_WAIT_MS)
        assert page.evaluate(ROLES_AFTER_A_CHANGE) == ["tab"] * len(TABS)
        assert page.console_errors == []
    finally:
        ctx.close()


@pytest.mark.parametrize("search", ["", "?hide=controls"])
def test_the_tab_list_comes_before_the_tabs_content_and_each_tab_controls_its_panel(
        browser, server, search):
    """Pressing Tab from the top of the page reaches the tab list before anything in the
    tabs' panels (only the controls come first, where shown); the headers come before the
    panels in the document; each tab names its panel (aria-controls), a tabpanel labelled by
    it, shown only while its tab is selected."""
    ctx, page = _open(browser, server, 1280, search)
    try:
        before = []
        for _ in range(60):
            page.keyboard.press("Tab")
            focused = page.evaluate_handle(FOCUSED)
            if focused.evaluate("(e) => e.getAttribute('role')") == "tab":
                break
            before.append(focused)
        else:
            raise AssertionError("Tab never reached the tab list")
        assert focused.evaluate("(e) => e.getAttribute('aria-selected')") == "true"
        assert focused.evaluate(LANDMARK) == "Charts and explanation"
        # before it only the controls: four sliders, three rule buttons, four buttons
        assert [el.evaluate(LANDMARK) for el in before] == ([] if search else ["Controls"] * 11)
        tabs = page.evaluate("""() => {
          const tabs = Bokeh.documents[0].get_model_by_name('sections');
          const root = window.__AS.root(tabs);
          return [...root.querySelectorAll('[role="tab"]')].map((tab, i) => {
            const panel = root.getElementById(tab.getAttribute('aria-controls'));
            return {panel: panel != null && panel === window.__AS.view(tabs.tabs[i].child).el,
                    role: panel && panel.getAttribute('role'),
                    labelled: panel && panel.getAttribute('aria-labelledby') === tab.id
                              && root.getElementById(tab.id) === tab,
                    after: panel != null && Boolean(tab.compareDocumentPosition(panel)
                                                    & Node.DOCUMENT_POSITION_FOLLOWING),
                    shown: panel != null && getComputedStyle(panel).visibility !== 'hidden',
                    selected: tab.getAttribute('aria-selected') === 'true'}; }); }""")
        assert len(tabs) == len(TABS)
        for tab in tabs:
            assert tab["panel"] and tab["role"] == "tabpanel" and tab["labelled"], tab
            assert tab["after"] and tab["shown"] == tab["selected"], tab
    finally:
        ctx.close()


def _accessibility_tree(page) -> list:
    """Chromium's accessibility tree of ``page`` (what a screen reader reads): the nodes it
    does not ignore, as (role, name, focusable)."""
    cdp = page.context.new_cdp_session(page)
    try:
        nodes = cdp.send("Accessibility.getFullAXTree")["nodes"]
    finally:
        cdp.detach()
    return [(n.get("role", {}).get("value"), n.get("name", {}).get("value", ""),
             any(p["name"] == "focusable" and p["value"].get("value") for p in
                 n.get("properties", [])))
            for n in nodes if not n.get("ignored")]


@pytest.mark.parametrize("tab", ["draw", "saturation", "training"])
def test_every_focusable_element_has_a_name_and_the_summary_is_read_once(browser, server, tab):
    """In Chromium's accessibility tree, every focusable element (the charts too) has a
    name; the bars' summary sentence is in it once."""
    ctx, page = _open_tab(browser, server, f"?tab={tab}")
    try:
        tree = _accessibility_tree(page)
        focusable = [(role, name) for role, name, focus in tree if focus]
        assert len(focusable) > 20
        assert [(role, name) for role, name in focusable if not name.strip()] == []
        charts = [name for role, name in focusable if role == "image"]
        assert len(charts) >= 2 and all(n.startswith("Chart: ") for n in charts), charts
        if tab == "draw":
            page.wait_for_function("() => { const root = window.__AS.root(Bokeh.documents[0]"
                                   ".get_model_by_name('bars-text')); const el = root && root"
                                   ".querySelector('[data-summary]'); return el && el"
                                   ".textContent !== ''; }", timeout=UI_WAIT_MS)
            tree = _accessibility_tree(page)
            summary = [name for role, name, _ in tree if role == "StaticText"
                       and name.startswith("Scaled: max weight")]
            assert len(summary) == 1, summary
    finally:
        ctx.close()


def test_every_control_has_a_name_and_works_by_keyboard(page, server):
    open_app(page, server)
    handles = page.locator("[role='slider']")
    expect(handles.last).to_have_attribute("aria-label", "Your guess", timeout=UI_WAIT_MS)
    names = [handles.nth(i).get_attribute("aria-label") for i in range(handles.count())]
    assert names == ["Head width dₖ", "Temperature T", "Number of keys n",
                     "Trained alignment ρ", "Your guess"]
    guess = handles.nth(4)
    assert guess.get_attribute("aria-valuetext") == "50%"
    first = handles.first
    assert first.get_attribute("aria-valuetext") == "64"
    first.focus()
    page.keyboard.press("ArrowRight")
    expect(first).to_have_attribute("aria-valuetext", "80", timeout=UI_WAIT_MS)
    # a change made on the model (a reset, a preset, the server) relabels the handle by the
    # next task, and the slider's own drawing does not overwrite it
    now, later = page.evaluate("""async () => {
      const slider = Bokeh.documents[0].get_model_by_name('d_k');
      const handle = () => window.__AS.root(slider)
        .querySelector('[role="slider"]').getAttribute('aria-valuetext');
      slider.value = 6;
      await new Promise((r) => setTimeout(r, 0));
      const now = handle();
      await new Promise((r) => setTimeout(r, 300));
      return [now, handle()];
    }""")
    assert now == later == "12"
    assert page.get_by_role("button", name="unscaled", exact=True).count() == 1
    # the tabs: a tablist reached with Tab, moved through with the arrow keys
    tabs = page.get_by_role("tab")
    assert tabs.count() == 6 and tabs.first.get_attribute("aria-selected") == "true"
    tabs.first.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => Bokeh.documents[0].get_model_by_name('sections').active === 1")
    page.wait_for_function("() => Bokeh.documents[0].get_model_by_name('logit-histogram')",
                           timeout=UI_WAIT_MS)
    selected = page.locator("[role='tab'][aria-selected='true']")
    expect(selected).to_have_text("1 Variance", timeout=UI_WAIT_MS)
    page.keyboard.press("End")
    page.wait_for_function("() => Bokeh.documents[0].get_model_by_name('sections').active === 5")
    page.wait_for_url("**tab=budget**")
    # the groups of buttons: named, each button saying whether it is pressed, following clicks
    for group, pressed in (("Scaling of the logits", "÷√dₖ"), ("Theme", "auto")):
        buttons = page.get_by_role("group", name=group).get_by_role("button")
        assert [buttons.nth(i).get_attribute("aria-pressed") == "true"
                for i in range(buttons.count())] == [
            buttons.nth(i).inner_text() == pressed for i in range(buttons.count())], group
    rule = page.get_by_role("group", name="Scaling of the logits")
    rule.get_by_role("button", name="unscaled", exact=True).click()
    expect(rule.get_by_role("button", name="unscaled", exact=True)).to_have_attribute(
        "aria-pressed", "true")
    expect(rule.get_by_role("button", name="÷√dₖ", exact=True)).to_have_attribute(
        "aria-pressed", "false")
    assert page.console_errors == []


#: Record, on the page's clock, each change of the bars' data (window.__changed) and each
#: summary the live region announces (window.__said: [time, text]).
RECORD_ANNOUNCEMENTS = """() => {
  const d = Bokeh.documents[0];
  const live = window.__AS.root(d.get_model_by_name('bars-text')).querySelector('[data-summary]');
  window.__said = []; window.__changed = [];
  new MutationObserver(() => window.__said.push([performance.now(), live.textContent]))
    .observe(live, {childList: true, characterData: true, subtree: true});
  for (const name of ['scaled-weights-source', 'unscaled-weights-source']) {
    const source = d.get_model_by_name(name);
    source.connect(source.properties.data.change, () => window.__changed.push(performance.now()));
  }
}"""


def test_the_charts_are_text_too_and_changes_are_announced_once_still(page, server):
    open_app(page, server)
    st = core.compute_state(64, 1.0, 2288)
    now = "[aria-live='polite'][data-summary]"
    page.locator(now).wait_for(state="attached")
    # written once the charts have been still for a moment
    page.wait_for_function("() => { for (const d of Bokeh.documents) { const root = window.__AS"
                           ".root(d.get_model_by_name('bars-text')); const el = root && root"
                           ".querySelector('[data-summary]'); if (el) return el.textContent !== '';"
                           " } return false; }", timeout=UI_WAIT_MS)
    text = page.locator(now).text_content()
    assert text == "Scaled: max weight 27% on k6; unscaled: max weight 80% on k6."
    rows = page.locator("[data-bars] tr")
    assert rows.count() == 8
    for i in range(8):
        cells = [rows.nth(i).locator("th, td").nth(j).text_content() for j in range(7)]
        assert cells[0] == f"k{i + 1}"
        assert float(cells[1]) == pytest.approx(st.scaled.logits[i], abs=5e-4)
        assert float(cells[4]) == pytest.approx(st.unscaled.logits[i], abs=5e-4)
        for cell, w in ((cells[2], st.scaled.probs[i]), (cells[5], st.unscaled.probs[i])):
            if cell.startswith("<"):
                assert w < 0.0005
            elif cell.startswith(">"):
                assert w >= 0.9995
            else:
                assert float(cell.rstrip("%")) == pytest.approx(100 * w, abs=0.05)
        assert float(cells[3]) == pytest.approx(st.scaled.diagonal[i], rel=1e-3)
        assert float(cells[6]) == pytest.approx(st.unscaled.diagonal[i], rel=1e-3)
    page.evaluate(RECORD_ANNOUNCEMENTS)
    handle = page.locator("[role='slider']").first
    handle.focus()
    # a drag, 64 -> 1024, that pauses after its first step (the table is written then) and
    # goes on briskly for over the summary's 0.7 s
    page.keyboard.press("ArrowRight")
    page.wait_for_timeout(400)
    for _ in range(8):
        page.keyboard.press("ArrowRight")
        page.wait_for_timeout(100)
    wide = core.compute_state(1024, 1.0, 2288)
    from attention_scaling.prose.text import weight_label
    expected = (f"Scaled: max weight {weight_label(wide.scaled)} on k{wide.scaled.argmax + 1}; "
                f"unscaled: max weight {weight_label(wide.unscaled)} on "
                f"k{wide.unscaled.argmax + 1}.")
    page.wait_for_function("(e) => { for (const d of Bokeh.documents) { const root = window.__AS"
                           ".root(d.get_model_by_name('bars-text')); const el = root && root"
                           ".querySelector('[data-summary]'); if (el) return el.textContent === e; }"
                           " return false; }", arg=expected, timeout=UI_WAIT_MS)
    assert column(page, "scaled-weights-source", "weight") == pytest.approx(
        wide.scaled.probs.tolist(), abs=1e-12)
    # not announced mid-drag: each announcement came once the bars had been still for the
    # table's 0.25 s and the summary's 0.7 s (on the page's own clock: a busy machine moves
    # both)
    said, changed = page.evaluate("() => [window.__said, window.__changed]")
    assert said and said[-1][1] == expected and len(changed) >= 2, (said, changed)
    for at, sentence in said:
        last = max(c for c in changed if c <= at)
        assert at - last >= 900, (sentence, at - last, said, changed)


def _download(page, name):
    """The file the button ``name`` downloads: its name and bytes. A download that does not
    come fails with the page's errors and the button's state (enabled, in view)."""
    from playwright.sync_api import TimeoutError as Timeout
    button = page.get_by_role("button", name=name)
    try:
        with page.expect_download(timeout=UI_WAIT_MS) as info:
            button.click()
        download = info.value
    except Timeout:
        state = button.evaluate("(b) => [b.disabled, b.getBoundingClientRect().toJSON()]")
        raise AssertionError(f"no download from {name!r}: page errors "
                             f"{getattr(page, 'console_errors', None)}, button {state}") from None
    return download.suggested_filename, Path(download.path()).read_bytes()


def test_the_view_downloads_as_png_svg_and_csv_named_after_the_state(page, server):
    import csv
    import io
    import struct
    import xml.etree.ElementTree as ET
    open_at(page, server, "?d_k=128&rule=none&temperature=2&seed=7")
    st = core.compute_state(128, 2.0, 7)
    stem = "attention-draw-dk128-T2-seed7-keys8-none"
    name, data = _download(page, "Download CSV")
    assert name == stem + ".csv"
    table = list(csv.reader(io.StringIO(data.decode())))
    assert len(set(table[0])) == len(table[0]), table[0]          # no column twice
    rows = list(csv.DictReader(io.StringIO(data.decode())))
    assert [r["key"] for r in rows] == [f"k{i + 1}" for i in range(8)]
    # the gradient over many draws at this setting, and this draw in it: one row
    spread = core.gradient_spread(128, 2.0)
    for r in core.RULES:
        assert float(rows[0][f"log10_grad_q_median_{r}"]) == spread[f"median_{r}"]
        assert float(rows[0][f"frozen_share_{r}"]) == spread[f"frozen_share_{r}"]
        assert float(rows[0][f"this_draw_log10_grad_q_{r}"]) == \
            st.variants[r].log10_query_gradient
        assert rows[1][f"frozen_share_{r}"] == ""
    for i, r in enumerate(rows):
        for v, side in ((st.scaled, "scaled"), (st.unscaled, "unscaled")):
            assert float(r[f"weight_{side}"]) == v.probs[i]
            assert float(r[f"logit_{side}"]) == v.logits[i]
            assert float(r[f"p_1_minus_p_{side}"]) == v.diagonal[i]
            assert float(r[f"grad_to_query_{side}"]) == v.query_rows[i]
    # the SVG: the two bar charts as BokehJS exports them, each bar where core's weight puts it
    from attention_scaling.style import SCALED_COLOR, UNSCALED_COLOR
    name, data = _download(page, "Download SVG")
    assert name == stem + ".svg"
    svg = ET.fromstring(data)
    top = _heading(svg, "draw", {"d_k": "128", "rule": "none", "temperature": "2", "seed": "7",
                                 "keys": "8"})
    charts = _charts(svg)
    assert list(charts) == ["scaled-weights", "unscaled-weights", "gradient-spread"]
    scales = []
    for chart, title, v, color in (("scaled-weights", "Scaled by 1/√dₖ", st.scaled, SCALED_COLOR),
                                   ("unscaled-weights", "Unscaled", st.unscaled, UNSCALED_COLOR)):
        texts = [t.text or "" for t in charts[chart].iter("{http://www.w3.org/2000/svg}text")]
        assert any(t.startswith(title) for t in texts), texts
        bars = _filled(charts[chart], color)
        assert len(bars) == 8
        lefts = [min(x for x, _ in b) for b in bars]
        assert lefts == sorted(lefts)                      # k1 ... k8, left to right
        bottoms = [max(y for _, y in b) for b in bars]
        assert max(bottoms) - min(bottoms) < 0.05          # on one baseline
        heights = [b - min(y for _, y in bar) for b, bar in zip(bottoms, bars)]
        k = max(heights) / max(v.probs)
        assert heights == pytest.approx([k * p for p in v.probs], abs=0.05)
        scales.append(k)
    assert scales[0] == pytest.approx(scales[1], rel=1e-3)  # both charts on one scale
    width, height = int(svg.get("width")), int(svg.get("height"))
    name, data = _download(page, "Download PNG")
    assert name == stem + ".png"
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (2 * width, 2 * height)
    assert _decoded_size(page, data) == [2 * width, 2 * height]
    assert _inked_rows(page, data, 2 * top) > 20
    assert page.console_errors == []


def _decoded_size(page, png: bytes) -> list:
    """[width, height] of ``png`` as the browser decodes it."""
    import base64
    return page.evaluate("""async (b64) => { const img = new Image(); img.src = b64;
        await img.decode(); return [img.naturalWidth, img.naturalHeight]; }""",
                         "data:image/png;base64," + base64.b64encode(png).decode())


def _hex(color: str) -> str:
    """An SVG colour, "#D55E00" or "rgb(213,94,0)", as lower-case hex."""
    if color and color.startswith("rgb("):
        return "#%02x%02x%02x" % tuple(int(x) for x in color[4:-1].split(","))
    return (color or "").lower()


def _points(path) -> list:
    """The (x, y) points of an SVG path's M and L commands."""
    import re
    nums = [float(x) for x in re.findall(r"[-+]?\d*\.?\d+(?:e[-+]?\d+)?",
                                          " ".join(re.findall(r"[ML][^MLZAC]*", path.get("d"))))]
    return list(zip(nums[::2], nums[1::2]))


def _affine(pixels, values) -> float:
    """The largest distance in pixels of ``pixels`` from the best line a + b * values."""
    import numpy as np
    x, y = np.asarray(values, float), np.asarray(pixels, float)
    a = np.vstack([np.ones_like(x), x]).T
    fit, *_ = np.linalg.lstsq(a, y, rcond=None)
    return float(np.abs(a @ fit - y).max())


def _charts(svg) -> dict:
    """The nested chart SVGs of a tab's download, by figure name, in page order."""
    ns = "{http://www.w3.org/2000/svg}"
    return {c.get("data-chart"): c for c in svg.findall(f"{ns}svg")}


def _lines(chart, color) -> list:
    """The point lists of the unfilled paths stroked in ``color`` (the glyphs' lines)."""
    ns = "{http://www.w3.org/2000/svg}"
    return [_points(p) for p in chart.iter(f"{ns}path")
            if _hex(p.get("stroke")) == color.lower() and p.get("fill") == "none"]


def _filled(chart, color) -> list:
    ns = "{http://www.w3.org/2000/svg}"
    return [_points(p) for p in chart.iter(f"{ns}path") if _hex(p.get("fill")) == color.lower()]


def _check_curves(chart, xs, by_rule, log_y=False):
    """Each rule's line in ``chart`` is its values: every point on one straight line through
    (log10 x, value) or (log10 x, log10 value), as the figure's scales place them."""
    import numpy as np
    from attention_scaling.style import RULE_COLORS
    for rule, values in by_rule.items():
        lines = _lines(chart, RULE_COLORS[rule])
        assert lines, rule
        pts = lines[0]
        assert len(pts) == len(xs), (rule, len(pts))
        assert _affine([p[0] for p in pts], np.log10(xs)) < 0.05
        v = np.log10(values) if log_y else np.asarray(values)
        assert _affine([p[1] for p in pts], v) < 0.05, rule


#: A state for each tab, its URL, and its downloads' name.
TAB_CASES = {
    "variance": ("?tab=variance&d_k=256&temperature=2&seed=7&keys=16&align=0.5&rule=none",
                 "attention-variance-dk256"),
    "saturation": ("?tab=saturation&d_k=128&temperature=2&seed=7&keys=16&align=0.5&rule=none",
                   "attention-saturation-dk128-T2-seed7-keys16-align0.5-none"),
    "gradient": ("?tab=gradient&d_k=32&temperature=2&seed=3&keys=4&align=0.2&rule=linear",
                 "attention-gradient-dk32-T2-seed3-keys4-align0.2-linear"),
    "training": ("?tab=training&d_k=16&temperature=1&seed=5&keys=8&align=0.5&rule=sqrt",
                 "attention-training-dk16-T1-seed5-keys8"),
    "budget": ("?tab=budget&d_k=64&temperature=2&seed=7&keys=16&align=0.3&rule=none",
               "attention-budget-T2-keys16-align0.3-none"),
}


@pytest.mark.parametrize("tab", list(TAB_CASES))
def test_each_tab_downloads_its_charts_and_numbers(page, server, tab):
    """The visible tab's buttons: a CSV whose columns are core's numbers for the state, an
    SVG that holds each of the tab's charts with its glyphs where core's numbers put them, a
    PNG of it at twice its size; named after the tab and the controls it depends on.
    Over 20 s for training: a whole training run and its sweep before the downloads."""
    import csv
    import io
    import struct
    import xml.etree.ElementTree as ET
    import numpy as np
    from attention_scaling.style import SCALED_COLOR, UNSCALED_COLOR
    search, stem = TAB_CASES[tab]
    open_at(page, server, search)
    q = dict(x.split("=") for x in search[1:].split("&"))
    d_k, t, seed, n = int(q["d_k"]), float(q["temperature"]), int(q["seed"]), int(q["keys"])
    rho = float(q["align"])
    # the numbers the tab must hold, from core; the page waited for until it shows them
    if tab == "variance":
        dist, std = core.logit_distribution(d_k), core.logit_std_curve()
        expected = {f"{c}_{r}": (dist[f"edges_{r}"][:-1] if c == "left" else
                                 dist[f"edges_{r}"][1:] if c == "right" else dist[f"counts_{r}"])
                    for r in ("none", "sqrt") for c in ("left", "right", "top")}
        expected.update(d_k=std["d_k"], std_raw=std["std_raw"], sqrt_d_k=np.sqrt(std["d_k"]))
        shown = ("logit-histogram-source", "top_none")
    elif tab in ("saturation", "gradient"):
        curves = core.saturation_curves(t, n, rho)
        draw = core.draw_metrics(d_k, t, seed, n, rho)
        metrics = ("max_weight", "eff_keys") if tab == "saturation" else ("log10_grad_q",)
        expected = {"d_k": curves["d_k"], **{f"{m}_{q}_{r}": curves[f"{m}_{q}_{r}"]
                                             for m in metrics for q in ("median", "q25", "q75")
                                             for r in core.RULES}}
        expected.update(this_draw_rule=list(core.RULES), this_draw_d_k=[d_k] * 3)
        attr = {"max_weight": "max_weight", "eff_keys": "effective_keys",
                "log10_grad_q": "log10_query_gradient"}
        for m in metrics:
            expected[f"this_draw_{m}"] = [getattr(draw[r], attr[m]) for r in core.RULES]
        shown = ("saturation-curves-source", f"{metrics[0]}_median_none")
        if tab == "gradient":      # the share of draws under a tenth of the scaled median
            expected.update({f"frozen_share_{r}": curves[f"frozen_share_{r}"]
                             for r in core.RULES})
    elif tab == "training":
        page.get_by_role("button", name="Train").click()
        page.wait_for_function("() => { const m = Bokeh.documents[0].get_model_by_name('train');"
                               " return m && !m.disabled && (window.__col('training-source', "
                               "'step') || []).length === 301; }", timeout=TRAINING_WAIT_MS)
        # then the learning-rate sweep at the run's setting, to its end
        page.wait_for_function("() => Bokeh.documents[0].get_model_by_name('training-status')"
                               ".text.includes('Learning-rate sweep: ')", timeout=TRAINING_WAIT_MS)
        from attention_scaling import argument
        swept = argument.TrainingTab(argument.Shared())
        swept.show_sweep(core.learning_rate_sweep(d_k, t, seed, n, steps=300))
        expected = {"step": list(range(301)), **swept.sweep_source.data}
        runs = {}
        for r in core.RULES:     # core's runs, one seed at a time, at the rule's own rate
            one = [core.train(d_k, r, seed + i, temperature=t, steps=300, n_keys=n,
                              lr=core.rule_learning_rate(r, d_k)) for i in range(3)]
            for m in ("loss", "log10_grad_wq", "log10_grad_wk"):
                by_step = np.array([getattr(run, m) for run in one])
                expected[f"{m}_median_{r}"] = np.median(by_step, axis=0).tolist()
            by_step = np.array([run.loss for run in one])
            expected[f"loss_min_{r}"] = by_step.min(axis=0).tolist()
            expected[f"loss_max_{r}"] = by_step.max(axis=0).tolist()
            runs[r] = expected[f"loss_median_{r}"]
        shown = ("training-source", "loss_median_none")
    else:
        # the chart's columns: the gradient in log10 (drawn on an axis of log10 values); the
        # medians' interval ends and standard errors are the text's, not the chart's
        expected = {k: v for k, v in core.head_budget(512, t, n, rho).items()
                    if not k.startswith("grad_q") and not any(
                        part in k for part in ("_median_lo_", "_median_hi_", "_median_se_"))}
        shown = ("head-budget-source", "max_weight_median_none")
    wait_column(page, *shown, [float(x) for x in expected[shown[1]]], timeout=UI_WAIT_MS)
    # the CSV: core's columns, every number read back as core's float64
    name, data = _download(page, "Download CSV")
    assert name == stem + ".csv"
    table = list(csv.reader(io.StringIO(data.decode())))
    head, rows = table[0], table[1:]
    assert sorted(head) == sorted(expected) and len(set(head)) == len(head)
    for j, k in enumerate(head):
        cells = [r[j] for r in rows if j < len(r) and r[j] != ""]
        want = list(expected[k])
        assert len(cells) == len(want), k
        if k == "this_draw_rule":
            assert cells == want
        else:
            assert np.array_equal([float(c) for c in cells], np.asarray(want, float),
                                  equal_nan=True), k
    # the SVG: each chart of the tab, holding its glyphs where core's numbers put them
    name, data = _download(page, "Download SVG")
    assert name == stem + ".svg"
    svg = ET.fromstring(data)
    charts = _charts(svg)
    titles = {c: [x.text for x in el.iter("{http://www.w3.org/2000/svg}text")]
              for c, el in charts.items()}
    top = _heading(svg, tab, q)
    if tab == "variance":
        assert list(charts) == ["logit-histogram", "logit-histogram-scaled", "logit-std"]
        for chart, rule, color in (("logit-histogram", "none", UNSCALED_COLOR),
                                   ("logit-histogram-scaled", "sqrt", SCALED_COLOR)):
            bars = _filled(charts[chart], color)
            assert len(bars) == core.LOGIT_BINS
            heights = [max(y for _, y in b) - min(y for _, y in b) for b in bars]
            k = max(heights) / max(expected[f"top_{rule}"])
            assert heights == pytest.approx(k * np.asarray(expected[f"top_{rule}"]), abs=0.05)
        assert len(_filled(charts["logit-std"], UNSCALED_COLOR)) == len(core.D_K_VALUES)
        assert "Spread of q·k against dₖ" in titles["logit-std"]
    elif tab in ("saturation", "gradient"):
        names = (["saturation-curves", "saturation-eff-keys"] if tab == "saturation"
                 else ["gradient-frozen-share", "saturation-gradient"])
        assert list(charts) == names
        for chart, m in zip(names[-len(metrics):], metrics):
            _check_curves(charts[chart], curves["d_k"],
                          {r: curves[f"{m}_median_{r}"] for r in core.RULES})
        if tab == "gradient":
            _check_curves(charts["gradient-frozen-share"], curves["d_k"],
                          {r: curves[f"frozen_share_{r}"] for r in core.RULES})
    elif tab == "training":
        assert list(charts) == ["training-loss", "training-gradients", "training-lr-sweep"]
        from attention_scaling.style import RULE_COLORS
        for rule in core.RULES:
            pts = _lines(charts["training-loss"], RULE_COLORS[rule])[0]
            assert len(pts) == 301
            assert _affine([p[0] for p in pts], range(301)) < 0.05
            assert _affine([p[1] for p in pts], runs[rule]) < 0.05        # the median
            assert len(_filled(charts["training-loss"], RULE_COLORS[rule])) == 1   # its band
    else:
        assert list(charts) == ["head-budget", "head-budget-gradient"]
        for chart, m in (("head-budget", "max_weight"),
                         ("head-budget-gradient", "log10_grad_q")):
            _check_curves(charts[chart], expected["heads"],
                          {r: expected[f"{m}_median_{r}"] for r in core.RULES})
    width, height = int(svg.get("width")), int(svg.get("height"))
    name, data = _download(page, "Download PNG")
    assert name == stem + ".png"
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (2 * width, 2 * height)
    assert _decoded_size(page, data) == [2 * width, 2 * height]
    # the PNG draws the heading: the band above the charts holds ink, not only background
    assert _inked_rows(page, data, 2 * top) > 20
    assert page.console_errors == []


def _heading(svg, tab, query) -> float:
    """Checks that a tab's SVG download opens with its title (the page's and the tab's) and
    the setting it shows (each control of its row of state.TABS with the value ``query``
    gives it, as the control shows it), above every chart; the height of that heading."""
    from attention_scaling.state import CONTROLS, TABS
    from attention_scaling.prose.text import TITLE
    ns = "{http://www.w3.org/2000/svg}"
    tab_row = next(t for t in TABS if t.key == tab)
    lines = [t.text for t in svg.findall(f"{ns}text")]
    assert lines[0] == f"{TITLE}: {tab_row.title}"
    assert svg.find(f"{ns}title").text == lines[0]
    shown = " · ".join(lines[1:]).split(" · ")
    controls = {c.name: c for c in CONTROLS}
    assert shown == [f"{controls[n].label}: " + (controls[n].show(query[controls[n].url_key])
                                                 if controls[n].kind == "option"
                                                 else query[controls[n].url_key])
                     for n in tab_row.names]
    baseline = max(float(t.get("y")) for t in svg.findall(f"{ns}text"))
    charts = _charts(svg).values()
    top = min(float(c.get("y")) for c in charts)
    assert top > baseline                              # the charts below the heading
    assert float(svg.get("height")) >= top + max(float(c.get("height")) for c in charts)
    return top


def _inked_rows(page, png: bytes, rows: float) -> int:
    """How many of the first ``rows`` pixel rows of ``png`` hold a pixel unlike its top-left
    corner's (the background), as the browser decodes it."""
    import base64
    return page.evaluate("""async ([b64, rows]) => { const img = new Image(); img.src = b64;
        await img.decode(); const c = document.createElement('canvas');
        c.width = img.naturalWidth; c.height = img.naturalHeight;
        const g = c.getContext('2d'); g.drawImage(img, 0, 0);
        const d = g.getImageData(0, 0, c.width, Math.floor(rows)).data, w = c.width;
        let inked = 0;
        for (let y = 0; y < Math.floor(rows); y++) {
          for (let x = 0; x < w; x++) { const i = 4 * (y * w + x);
            if (Math.abs(d[i] - d[0]) + Math.abs(d[i + 1] - d[1]) + Math.abs(d[i + 2] - d[2]) > 96) {
              inked += 1; break; } } }
        return inked; }""", ["data:image/png;base64," + base64.b64encode(png).decode(), rows])


def _plot_pixel(page, name="scaled-weights"):
    """The colour the plot's canvas has near its top left corner, inside the frame."""
    return page.evaluate("""(n) => { const v = window.__AS.view(Bokeh.documents[0]
        .get_model_by_name(n)); const c = v.canvas_view.primary.canvas;
        const ctx = c.getContext('2d'); const r = window.devicePixelRatio || 1;
        const f = v.frame.bbox; return Array.from(ctx.getImageData(
          Math.round((f.left + 4) * r), Math.round((f.top + 4) * r), 1, 1).data).slice(0, 3); }""",
                         name)


def test_dark_mode_follows_the_system_and_the_toggle_and_passes_axe(browser, server):
    ctx, page = _open(browser, server, 1280, color_scheme="dark")
    try:
        # drawn dark by Bokeh, no filter
        eventually(lambda: max(_plot_pixel(page)) < 60, "the chart drawn dark")
        assert page.evaluate("() => getComputedStyle(document.documentElement).filter") == "none"
        assert violations(page) == []
        page.get_by_role("button", name="light", exact=True).click()
        page.wait_for_url("**theme=light**")
        eventually(lambda: min(_plot_pixel(page)) > 240, "the chart drawn light")
        assert violations(page) == []
    finally:
        ctx.close()
    ctx, page = _open(browser, server, 1280, "?theme=dark")   # a light system, dark asked for
    try:
        eventually(lambda: max(_plot_pixel(page)) < 60, "the chart drawn dark")
        assert page.get_by_role("button", name="dark", exact=True).get_attribute("class") \
            .count("bk-active") == 1
    finally:
        ctx.close()


def test_print_leaves_out_the_controls_and_reduced_motion_animates_nothing(browser, server):
    ctx, page = _open(browser, server, 1280, reduced_motion="reduce")
    try:
        page.emulate_media(media="print")
        # as wide as the desktop's window, and as an A4 page's printed width (186 mm: 703 px)
        for width in (1280, 703):
            page.set_viewport_size({"width": width, "height": 900})
            wait_still(page)
            shown = page.evaluate("""() => ['d_k', 'guide', 'download-csv', 'scaled-weights']
                .map((n) => { const v = window.__AS.view(Bokeh.documents[0]
                  .get_model_by_name(n)); let e = v.el; while (e) { if (getComputedStyle(e)
                  .display === 'none') return false; e = e.parentNode && e.parentNode.host
                  ? e.parentNode.host : e.parentElement; } return true; })""")
            assert shown == [False, False, False, True], width
        page.set_viewport_size({"width": 1280, "height": 900})
        pdf = page.pdf(format="A4")
        assert pdf[:5] == b"%PDF-" and len(pdf) > 10_000
        page.emulate_media(media="screen")
        moving = page.evaluate("""() => { const out = []; const walk = (root) => {
            for (const e of root.querySelectorAll('*')) { if (e.shadowRoot) walk(e.shadowRoot);
              const s = getComputedStyle(e); if (s.animationName !== 'none' ||
                parseFloat(s.transitionDuration) > 0) out.push(e.className); } };
            walk(document); return out; }""")
        assert moving == []
    finally:
        ctx.close()


def _lab(hex_color):
    """sRGB hex to CIELAB L* (D65), the test's own conversion."""
    rgb = [int(hex_color[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    y = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    return 116 * (y ** (1 / 3) if y > 216 / 24389 else (24389 / 27 * y + 16) / 116) - 16


def test_the_jacobian_map_is_perceptually_uniform():
    from attention_scaling.style import DIVERGING, SEQUENTIAL
    for palette in (DIVERGING[:128], DIVERGING[127:][::-1], SEQUENTIAL):
        lightness = [_lab(c) for c in palette]
        steps = [b - a for a, b in zip(lightness, lightness[1:])]
        assert all(s > 0 for s in steps)                  # lighter all the way, no bands
        mean = (lightness[-1] - lightness[0]) / len(steps)
        assert max(abs(s - mean) for s in steps) < 0.6 * mean + 0.35


def test_the_heat_maps_are_text_too(page, server):
    open_app(page, server)
    st = core.compute_state(64, 1.0, 2288)
    page.locator("[data-diagonal]").wait_for(state="attached")
    # written once the charts have been still for a moment
    page.wait_for_function("() => { for (const d of Bokeh.documents) { const root = window.__AS"
                           ".root(d.get_model_by_name('heatmaps-text')); const el = root && root"
                           ".querySelector('[data-sweep] tr'); if (el) return true; }"
                           " return false; }", timeout=UI_WAIT_MS)
    text = page.locator("[data-diagonal]").text_content()
    assert text.startswith("Jacobian diagonal p(1 − p) at this width: k1 0.165, k2 0.161")
    rows = page.locator("[data-sweep] tr")
    assert rows.count() == len(core.D_K_VALUES)
    sweep = st.sweep("sqrt")
    for j, d in enumerate(core.D_K_VALUES):
        cells = [rows.nth(j).locator("th, td").nth(k).text_content() for k in range(3)]
        assert cells[0] == str(d) + (" (current)" if d == 64 else "")
        i = int(sweep[:, j].argmax())
        assert float(cells[1]) == pytest.approx(sweep[i, j], rel=1e-3) and cells[2] == f"k{i + 1}"


#: In the page: for every figure shown, each title line's right end and the canvas's width,
#: and each x axis's labels as drawn: [text, centre, width] and the slant.
LAYOUT = """() => { const out = []; const ctx = document.createElement('canvas').getContext('2d');
  const font = (v) => `${v.text_font_style} ${v.text_font_size} ${v.text_font}`;
  for (const m of Bokeh.documents[0].all_models) {
    if (m.type !== 'Figure') continue;
    const v = window.__AS.view(m);
    if (v == null || !v.el.checkVisibility({checkVisibilityCSS: true})) continue;
    const titles = [m.title, ...m.above.filter((x) => x.type === 'Title')].map((t) => {
      ctx.font = font(t);
      return [t.text, v.renderer_views.get(t).bbox.left + ctx.measureText(t.text).width]; });
    const axes = [...m.above, ...m.below].filter((a) => a.type.endsWith('Axis')).map((a) => {
      const av = v.renderer_views.get(a);
      let texts, xs;
      if (a.type === 'CategoricalAxis') {
        texts = a.formatter.doFormat(m.x_range.factors, {loc: 0});
        xs = m.x_range.factors.map((f) => v.frame.x_scale.compute(f));
      } else {
        const coords = av.tick_coords.major;
        texts = av.compute_labels(coords[0]).items.map((l) => l.text);
        xs = Array.from(av.scoords(coords)[0]);
      }
      ctx.font = `${a.major_label_text_font_style} ${a.major_label_text_font_size} ${a.major_label_text_font}`;
      const metrics = ctx.measureText('0');
      const orient = a.major_label_orientation;
      return {labels: texts.map((t, i) => [t, xs[i], ctx.measureText(t).width]),
              angle: typeof orient === 'number' ? orient : 0,
              line: metrics.fontBoundingBoxAscent + metrics.fontBoundingBoxDescent}; });
    out.push({name: m.name, width: v.bbox.width, titles, axes});
  }
  return out; }"""

#: The figures of each tab, all of which must be laid out before the measures are read.
TAB_FIGURES = {"draw": ["scaled-weights", "unscaled-weights", "gradient-spread", "jacobian",
                        "jacobian-diagonal"],
               "variance": ["logit-histogram", "logit-histogram-scaled", "logit-std"],
               "saturation": ["saturation-curves", "saturation-eff-keys"],
               "gradient": ["gradient-frozen-share", "saturation-gradient"],
               "training": ["training-loss", "training-gradients", "training-lr-sweep"],
               "budget": ["head-budget", "head-budget-gradient"]}


def _titles_and_labels(page, tab, width):
    """What keeps a title or an x axis's labels of the open tab ``tab`` from fitting."""
    import math
    shown = page.evaluate(LAYOUT)
    assert sorted(f["name"] for f in shown) == sorted(TAB_FIGURES[tab])
    for fig in shown:
        for text, right in fig["titles"]:
            assert right <= fig["width"] - 2, (fig["name"], text, right, fig["width"])
        for axis in fig["axes"]:
            drawn = [lab for lab in axis["labels"] if lab[0]]
            assert len(drawn) >= 4, (fig["name"], axis["labels"])
            for (t0, x0, w0), (t1, x1, w1) in zip(drawn, drawn[1:]):
                if axis["angle"]:      # parallel slanted labels: apart by a line at least
                    assert abs(x1 - x0) * math.sin(axis["angle"]) >= axis["line"], \
                        (fig["name"], t0, t1, x1 - x0)
                else:
                    assert abs(x1 - x0) >= (w0 + w1) / 2 + 2, (fig["name"], t0, t1)
    if tab == "draw":
        sweep = next(f for f in shown if f["name"] == "jacobian-diagonal")["axes"][0]
        labelled = [lab[0] for lab in sweep["labels"] if lab[0]]
        expected = ([str(d) for d in core.D_K_VALUES] if width >= 1280
                    else ["1", "4", "16", "64", "256", "1024", "4096"])
        assert labelled == expected


@pytest.mark.parametrize("width", [375, 1440])
def test_every_title_fits_its_chart_and_no_two_axis_labels_overlap(browser, server, width):
    """On a phone and a wide screen, under the rule with the longest titles, one page per
    width walking through the tabs: no title line runs past its chart's right edge, and the
    labels along each x axis (the sweep's 25 widths slanted) keep clear of each other.
    Over 20 s: six tabs drawn and measured, and a whole training run with its sweep."""
    ctx, page = _open(browser, server, width, "?rule=none&keys=8")
    try:
        for tab in TAB_FIGURES:
            _show_tab(page, tab)
            page.wait_for_function("(names) => names.every((n) => { const m = Bokeh"
                                   ".documents[0].get_model_by_name(n); const v = m && "
                                   "window.__AS.view(m); return v && v.el.checkVisibility("
                                   "{checkVisibilityCSS: true}); })",
                                   arg=TAB_FIGURES[tab], timeout=UI_WAIT_MS)
            if tab == "training":
                page.get_by_role("button", name="Train").click()
                page.wait_for_function("() => (window.__col('training-source', 'step') || [])"
                                       ".length === 301", timeout=TRAINING_WAIT_MS)
            wait_still(page, *TAB_FIGURES[tab])
            _titles_and_labels(page, tab, width)
        assert page.console_errors == []
    finally:
        ctx.close()


def test_a_gradient_of_hundreds_of_decades_still_has_a_usable_log_axis(page, server):
    """With the first key aligned (ρ = 0.5) the unscaled gradient falls below float64 at the
    widest heads: the curves, in log10 on the axis, span hundreds of decades. The axis spans
    the widths the tab's sentence compares (argument.gradient_window): their every value is
    drawn inside the frame, the highest near its top and the lowest near its bottom, and the
    chart's second line says up to which width."""
    open_at(page, server, "?tab=gradient&align=0.5")
    curves = core.saturation_curves(1.0, 8, 0.5)
    n = gradient_window(curves)
    assert 0 < n <= len(core.D_K_VALUES)
    page.wait_for_function("() => { const m = Bokeh.documents[0].get_model_by_name("
                           "'saturation-gradient'); return m && window.__AS.view(m); }",
                           timeout=UI_WAIT_MS)
    wait_column(page, "saturation-curves-source", "max_weight_median_none",
                curves["max_weight_median_none"].tolist(), timeout=UI_WAIT_MS)
    wait_still(page, "saturation-gradient")
    ys = page.evaluate("""(n) => { const m = Bokeh.documents[0].get_model_by_name(
        'saturation-gradient'); const v = window.__AS.view(m); const d = Bokeh.documents[0]
        .get_model_by_name('saturation-curves-source').data; const get = (k) => Array.from(
        d instanceof Map ? d.get(k) : d[k]); const f = v.frame.bbox; const out = [];
        for (const r of ['none', 'sqrt', 'linear']) for (const q of ['q25', 'q75'])
          for (const x of get(`log10_grad_q_${q}_${r}`).slice(0, n))
            out.push(v.frame.y_scale.compute(x));
        return [f.top, f.bottom, out, m.above.map((t) => t.text)]; }""", n)
    top, bottom, pixels, lines = ys
    assert (f"y axis fitted to {core.DK} ≤ {core.D_K_VALUES[n - 1]} (wider {core.DK} run off"
            if n < len(core.D_K_VALUES) else "y axis fitted to every") in " ".join(lines)
    assert min(curves["log10_grad_q_q25_none"]) < -300          # below float64's range
    assert len(pixels) == 6 * n
    assert all(top <= y <= bottom for y in pixels)
    assert min(pixels) - top < 0.1 * (bottom - top)
    assert bottom - max(pixels) < 0.1 * (bottom - top)


# ---- dark mode that reads, and legends and labels that leave the data alone

def _wcag(rgb) -> float:
    c = [x / 255 for x in rgb]
    c = [x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]


def _ratio(a, b) -> float:
    hi, lo = sorted((_wcag(a), _wcag(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _over(layers):
    """The colour of [r, g, b, alpha] layers painted bottom first (the first one opaque)."""
    out = list(layers[0][:3])
    for r, g, b, a in layers[1:]:
        out = [a * x + (1 - a) * y for x, y in zip((r, g, b), out)]
    return out


#: In the page: every figure drawn, walked generically. Each text BokehJS draws on a chart
#: (a visual with a text colour, of every title, axis, colour bar, legend, label, and every
#: text glyph on a background of its own) with the colours as BokehJS resolves them for this
#: theme (its CSS variables or the model's value) and what lies under it, bottom first: the
#: plot's border fill (for what sits in a side panel) or its background fill, then the
#: renderer's own background and, for a legend, its items' background. Each line that marks
#: something: the plot's outline and every glyph line on a plot without a colour map (on a
#: heat map the lines lie on the cells). Colours as [r, g, b, alpha].
CHART_COLOURS = """() => {
  const ctx = document.createElement('canvas').getContext('2d');
  const rgba = (color, alpha) => {
    if (color == null || alpha === 0) return null;
    if (typeof color === 'number') {      // a glyph's colour: packed RGBA (BokehJS's uint32)
      const a = ((color & 255) / 255) * (alpha ?? 1);
      return a > 0 ? [color >>> 24, (color >>> 16) & 255, (color >>> 8) & 255, a] : null;
    }
    ctx.clearRect(0, 0, 1, 1); ctx.fillStyle = '#000'; ctx.fillStyle = String(color);
    ctx.fillRect(0, 0, 1, 1);
    const [r, g, b, a] = ctx.getImageData(0, 0, 1, 1).data;
    return [r, g, b, (a / 255) * (alpha ?? 1)];
  };
  const fill = (v) => v && v.get_fill_color ? rgba(v.get_fill_color(), v.get_fill_alpha()) : null;
  const texts = [], lines = [], boxes = [];
  for (const doc of Bokeh.documents) for (const m of doc.all_models) {
    if (m.type !== 'Figure' && m.type !== 'Plot') continue;
    const v = window.__AS.view(m);
    if (v == null || !v.el.checkVisibility()) continue;
    const border = fill(v.visuals.border_fill), background = fill(v.visuals.background_fill);
    const side = new Set([...m.above, ...m.below, ...m.left, ...m.right]);
    const mapped = m.renderers.length > 0 && [...side, ...m.center].some(
      (r) => r.type === 'ColorBar');
    const outline = v.visuals.outline_line;
    const line = rgba(outline.get_line_color(), outline.get_line_alpha());
    if (line) lines.push({where: `${m.name} outline`, color: line, under: [border]});
    for (const rv of v.renderer_views.values()) {
      const r = rv.model;
      if (!r.visible) continue;
      const where = `${m.name} ${r.type}`;
      if (r.type === 'GlyphRenderer') {
        const g = rv.glyph, gv = g.visuals;
        if (g.model.type === 'Text' && gv.background_fill.doit) {
          const shown = Array.from(g.text ?? [], (t, i) => [t, i]).filter(([t]) => t);
          for (const [t, i] of shown) {
            texts.push({where: `${where} "${t}"`,
                        color: rgba(gv.text.text_color.get(i), gv.text.text_alpha.get(i)),
                        under: [background, rgba(gv.background_fill.fill_color.get(i),
                                                 gv.background_fill.fill_alpha.get(i))]});
          }
        } else if (!mapped && gv.line) {
          const n = Math.max(1, g.data_size ?? 1);
          for (let i = 0; i < n; i++) {
            const c = rgba(gv.line.line_color.get(i), gv.line.line_alpha.get(i));
            if (gv.line.line_width.get(i) > 0 && c != null) {
              lines.push({where: `${where} ${g.model.type}`, color: c, under: [background]});
            }
          }
        }
        continue;
      }
      const base = side.has(r) ? border : background;
      if (r.type === 'Legend') {      // drawn as HTML: its colours as the browser shows them
        const css = (el, key) => rgba(getComputedStyle(el)[key]);
        boxes.push({where, color: css(rv.el, 'backgroundColor'), under: [base]});
        for (const {el, label_el, label} of rv.entries) {
          texts.push({where: `${where} "${label}"`, color: css(label_el, 'color'),
                      under: [base, css(rv.el, 'backgroundColor'),
                              css(el, 'backgroundColor')].filter((x) => x)});
        }
        continue;
      }
      const own = [fill(rv.visuals.background_fill)];
      for (const [name, vis] of Object.entries(rv.visuals)) {
        if (!vis.get_text_color) continue;
        // a colour bar draws its title and labels through parts of its own, which the CSS
        // variables do not reach: with its properties' colours
        const color = r.type === 'ColorBar' ? rgba(r[`${name}_color`], r[`${name}_alpha`])
          : rgba(vis.get_text_color(), vis.get_text_alpha());
        if (color) texts.push({where: `${where} ${name}`, color,
                               under: [base, ...own.filter((x) => x)]});
      }
    }
  }
  return {texts, lines, boxes};
}"""


def _chart_contrasts(page):
    """Every text on the charts shown, every marking line and every legend's box, each
    with its contrast ratio against what lies under it."""
    found = page.evaluate(CHART_COLOURS)
    return [[(x["where"], _ratio(_over([*x["under"], x["color"]]) if x["color"] else
                                 _over(x["under"]), _over(x["under"])))
             for x in found[kind]] for kind in ("texts", "lines", "boxes")]


def test_every_text_and_mark_on_the_charts_reads_in_both_themes(browser, server):
    """WCAG AA in the light and the dark theme, from the colours BokehJS draws with, on every
    tab in turn (one page, the theme toggled on each): every text drawn on a chart (titles,
    axis labels, colour bars, legends, labels) at least 4.5:1 against what lies under it, the
    frame of the chart the model uses, the highest bar's outline and every other line that
    marks something at least 3:1; every legend in the chart's own colours. Over 20 s: six
    tabs, each drawn and read twice."""
    ctx, page = _open(browser, server, 1280, "?theme=dark&rule=none")
    try:
        theme = "dark"
        for tab in TAB_FIGURES:
            _show_tab(page, tab)
            page.wait_for_function("(names) => names.every((n) => { const m = Bokeh"
                                   ".documents[0].get_model_by_name(n); return m && "
                                   "window.__AS.view(m); })",
                                   arg=TAB_FIGURES[tab], timeout=UI_WAIT_MS)
            for _ in range(2):
                _contrasts_hold(page, tab, theme)
                theme = "light" if theme == "dark" else "dark"
                page.get_by_role("button", name=theme, exact=True).click()
                page.wait_for_url(f"**theme={theme}**")
        assert page.console_errors == []
    finally:
        ctx.close()


#: The background colour BokehJS paints each chart shown with ("#rrggbb").
BACKGROUNDS = """() => {
  const ctx = document.createElement('canvas').getContext('2d'), out = [];
  for (const doc of Bokeh.documents) for (const m of doc.all_models) {
    if (m.type !== 'Figure' && m.type !== 'Plot') continue;
    const v = window.__AS.view(m);
    if (v == null || !v.el.checkVisibility()) continue;
    ctx.fillStyle = '#000'; ctx.fillStyle = String(v.visuals.background_fill.get_fill_color());
    out.push(ctx.fillStyle);
  }
  return out; }"""


def _contrasts_hold(page, tab, theme):
    # the theme's colours reach every chart shown before they are read
    want = style.CHART_THEMES[theme]["background-fill-color"]
    eventually(lambda: (found := page.evaluate(BACKGROUNDS)) and set(found) == {want},
               f"every chart of {tab} painted on the {theme} theme's background")
    texts, lines, boxes = _chart_contrasts(page)
    kinds = {w.split(" ")[1] for w, _ in texts}
    assert {"Title", "LinearAxis"} <= kinds or {"Title", "CategoricalAxis"} <= kinds, tab
    if tab == "draw":
        assert {"ColorBar", "GlyphRenderer"} <= kinds, tab          # the max weight label
        assert any("outline" in w for w, _ in lines), tab           # the model uses this
    else:
        assert "Legend" in kinds, tab
    low = [(w, round(c, 2)) for w, c in texts if c < 4.5]
    assert low == [], (tab, theme, low)
    faint = [(w, round(c, 2)) for w, c in lines if c < 3]
    assert faint == [], (tab, theme, faint)
    # a legend's box is the chart's own colour: no light box on a dark chart
    boxed = [(w, round(c, 2)) for w, c in boxes if c > 1.1]
    assert boxed == [], (tab, theme, boxed)


#: Records every text the page draws on a canvas: [text, x, y, width] in the canvas's CSS
#: pixels (its transform applied, the device pixel ratio taken out), per canvas, in
#: window.__drawn (a Map the test clears before it has the charts painted again).
RECORD_TEXT = """window.__drawn = new Map();
const fillText = CanvasRenderingContext2D.prototype.fillText;
CanvasRenderingContext2D.prototype.fillText = function (text, x, y, ...rest) {
  const t = this.getTransform(), r = window.devicePixelRatio || 1;
  const list = window.__drawn.get(this.canvas) ?? [];
  list.push([String(text), (t.a * x + t.c * y + t.e) / r, (t.b * x + t.d * y + t.f) / r,
             this.measureText(String(text)).width, t.b !== 0 || t.c !== 0]);
  window.__drawn.set(this.canvas, list);
  return fillText.call(this, text, x, y, ...rest);
};"""

#: The texts drawn by each named figure when it is painted next, and its frame's size.
DRAWN_TEXTS = """async (names) => {
  window.__drawn.clear();
  const views = names.map((n) => window.__AS.view(Bokeh.documents[0].get_model_by_name(n)));
  views.forEach((v) => v.request_paint());
  await new Promise((done) => setTimeout(done, 400));
  return views.map((v) => ({texts: window.__drawn.get(v.canvas_view.primary.canvas) ?? [],
                            width: v.frame.bbox.width, height: v.frame.bbox.height})); }"""


@pytest.mark.parametrize("keys", [8, 64])
def test_key_labels_and_cell_numbers_fit_where_they_are_drawn(browser, server, keys):
    """As drawn on the canvas: the labels k1 … kn along each key axis of the bars, the
    Jacobian and the diagonal map at least 14 px apart and clear of each other (thinned to
    every 2nd, 4th, 8th … key where the chart is narrow), and the numbers in the Jacobian's
    diagonal cells only where each fits inside its cell; on a phone and then a wide screen
    (one page, its window resized)."""
    ctx = browser.new_context(viewport={"width": 375, "height": 900})
    page = ctx.new_page()
    page.add_init_script(RECORD_TEXT)
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        open_at(page, server, f"?keys={keys}")
        for width in (375, 1280):
            page.set_viewport_size({"width": width, "height": 900})
            _key_labels_fit(page, width, keys)
        assert errors == []
    finally:
        ctx.close()


def _key_labels_fit(page, width, keys):
    names = ["scaled-weights", "unscaled-weights", "jacobian", "jacobian-diagonal"]
    wait_still(page, *names)
    import re
    for name, drawn in zip(names, page.evaluate(DRAWN_TEXTS, names)):
        labels = [t for t in drawn["texts"] if re.fullmatch(r"k\d+", t[0])]
        assert {"k1", f"k{keys}"} & {t[0] for t in labels}, name
        for along, axis in ((1, "x"), (2, "y")):     # x: labels on one line; y: a column
            row = {}
            for t in labels:
                row.setdefault(round(t[3 - along]), []).append(t)
            for line in row.values():
                if len(line) < 2:
                    continue
                line.sort(key=lambda t: t[along])
                for a, b in zip(line, line[1:]):
                    gap = b[along] - a[along]
                    need = max(14, (a[3] + b[3]) / 2 + 2) if axis == "x" else 14
                    assert gap >= need, (name, width, keys, a[0], b[0], gap)
        drawn_keys = {int(t[0][1:]) for t in labels}
        assert len(drawn_keys) >= min(keys, 4), (name, sorted(drawn_keys))
        if name == "jacobian":
            numbers = [t for t in drawn["texts"] if re.fullmatch(r"<0\.001|\d\.\d{3}", t[0])]
            cell_w, cell_h = drawn["width"] / keys, drawn["height"] / keys
            assert all(t[3] <= cell_w - 2 for t in numbers) and (not numbers or cell_h >= 14), \
                (width, keys, cell_w, cell_h, numbers[:2])
            if width >= 1280 and keys == 8:
                assert len(numbers) == keys           # shown where they fit


#: In the page, for every legend of a figure drawn: its box, the plot's frame and canvas, and
#: the data its figure draws, in the canvas's pixels: every glyph's points (x, y) and the x of
#: every vertical span; its entries (drawn as HTML): label, the left and right of the label
#: and the left and top of the entry (its line's sample, then its label).
LEGENDS = """() => {
  const figures = [];
  for (const m of Bokeh.documents[0].all_models) {
    if (m.type !== 'Figure') continue;
    const v = window.__AS.view(m);
    // the open tab's charts: the others are hidden (visibility) in panels of no height
    if (v != null && v.el.checkVisibility({visibilityProperty: true}) && v.bbox.height > 0
        && m.select({type: 'Legend'}).length) figures.push([m, v]);
  }
  const box = (b) => [b.left, b.top, b.right, b.bottom];
  const out = [];
  for (const [m, v] of figures) {
    const points = [], spans = [];
    for (const rv of v.renderer_views.values()) {
      if (rv.model.type !== 'GlyphRenderer' || !rv.model.visible) continue;
      const g = rv.glyph;
      if (g.model.type === 'VSpan') { spans.push(...Array.from(g.sx ?? [])); continue; }
      for (const ys of ['sy', 'sy1', 'sy2']) {
        if (g.sx == null || g[ys] == null) continue;
        const xs = Array.from(g.sx), yv = Array.from(g[ys]);
        xs.forEach((x, i) => { if (Number.isFinite(x) && Number.isFinite(yv[i])) points.push([x, yv[i]]); });
      }
    }
    for (const legend of m.select({type: 'Legend'})) {
      const lv = v.renderer_views.get(legend);
      const origin = v.canvas_view.primary.canvas.getBoundingClientRect();
      const entries = lv.entries.map(({el, label_el, label}) => {
        const l = label_el.getBoundingClientRect(), e = el.getBoundingClientRect();
        return [label, l.left - origin.left, l.right - origin.left, e.left - origin.left,
                e.top - origin.top]; });
      out.push({name: m.name, legend: box(lv.bbox), frame: box(v.frame.bbox),
                canvas: [0, 0, v.bbox.width, v.bbox.height], points, spans, entries,
                labels: legend.items.map((item) => item.label?.value ?? '')});
    }
  }
  return out; }"""

#: The controls' corners (d_k 1 and 4096, T 0.1 and 10, keys 2 and 64; each value twice),
#: each on a phone or a wide screen (each twice).
CORNERS = ((375, "d_k=1&temperature=0.1&keys=2"), (1280, "d_k=4096&temperature=10&keys=64"),
           (1280, "d_k=1&temperature=10&keys=64"), (375, "d_k=4096&temperature=0.1&keys=2"))


def _inside(point, box, pad=0) -> bool:
    return box[0] - pad <= point[0] <= box[2] + pad and box[1] - pad <= point[1] <= box[3] + pad


@pytest.mark.parametrize("width, corner", CORNERS)
def test_legends_leave_the_data_alone_at_every_corner(browser, server, width, corner):
    """At the corners of the controls, on a phone and a wide screen: every legend of every
    argument tab lies inside its chart's canvas and covers none of the data (outside the
    plot's frame, or clear of every glyph's points and spans), and its entries, in a row,
    keep 10 px or more between one's label and the next one's line."""
    ctx, page = browser.new_context(viewport={"width": width, "height": 900}), None
    try:
        page = ctx.new_page()
        page.console_errors = []
        page.on("pageerror", lambda e: page.console_errors.append(str(e)))
        seen = set()
        open_at(page, server, f"?{corner}")
        for tab in ("variance", "saturation", "gradient", "training", "budget"):
            label = next(t.title for t in TABS if t.key == tab)
            page.get_by_role("tab", name=label, exact=True).click()
            page.wait_for_url(f"**tab={tab}**")
            page.wait_for_function("(names) => names.every((n) => { const m = Bokeh.documents[0]"
                                   ".get_model_by_name(n); const v = m && window.__AS.view(m);"
                                   " return v && v.el.checkVisibility(); })",
                                   arg=TAB_FIGURES[tab], timeout=UI_WAIT_MS)
            wait_still(page, *TAB_FIGURES[tab])
            for found in page.evaluate(LEGENDS):
                name, legend, frame = found["name"], found["legend"], found["frame"]
                seen.add(name)
                assert all(_inside(p, found["canvas"], 0.5) for p in
                           (legend[:2], legend[2:])), (name, legend, found["canvas"])
                overlaps = not (legend[2] <= frame[0] or legend[0] >= frame[2]
                                or legend[3] <= frame[1] or legend[1] >= frame[3])
                if overlaps:
                    covered = [p for p in found["points"] if _inside(p, legend)]
                    crossed = [x for x in found["spans"] if legend[0] <= x <= legend[2]]
                    assert covered == [] and crossed == [], (name, corner, legend, covered[:3])
                entries = sorted(found["entries"], key=lambda e: e[3])
                assert [e[0] for e in found["entries"]] == found["labels"], name
                assert all(_inside(e[3:5], legend, 1) for e in entries), (name, legend, entries)
                if len({round(e[4]) for e in entries}) == 1:       # a row
                    for a, b in zip(entries, entries[1:]):
                        assert b[3] - a[2] >= 10, (name, a[0], b[0], b[3] - a[2])
        assert seen >= {"logit-std", "saturation-curves", "saturation-eff-keys",
                        "gradient-frozen-share", "saturation-gradient", "training-loss",
                        "head-budget", "head-budget-gradient"}
        assert page.console_errors == []
    finally:
        ctx.close()
