"""Present mode (present=1, assets/js/present.js) in Chromium, on the served page and the offline
copy: every step fits a 1920 x 1080 and a 1280 x 720 screen without scrolling with its lead large
and only its own controls, the keys move between steps and the address follows, Escape leaves,
a link opens the room on its step, axe-core finds nothing, and the printed handout has one page
per step in A4 and in Letter. Screenshots of each step at 1920 x 1080 go to
build/screenshots/present-*.png."""

import re
import time
from pathlib import Path

import pytest
from conftest import INIT, LIVE, TRAINING_WAIT_MS, UI_WAIT_MS, open_at

from attention_scaling.state import TABS

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "build" / "screenshots"

#: The model named ``n`` in the page's document (null without it).
MODEL = ("(n) => { for (const d of Bokeh.documents) { try { const m = d.get_model_by_name(n);"
         " if (m) return m; } catch { } } return null; }")
#: In present mode on the open step, once it is laid out: the page's height and the screen's,
#: the bottom of the lowest main chart's canvas, the lead's font size, the open tab's key,
#: whether the page has the class "present", the names of the controls shown and the text of
#: the step's question (null where it has none).
STEP = """(charts) => {
  const model = %s;
  const shown = (m) => { const v = m && window.__AS.view(m);
    return v != null && v.el.isConnected && v.el.checkVisibility({visibilityProperty: true})
      && v.el.getBoundingClientRect().height > 0; };
  const canvas = (el) => { if (el == null) return null;
    const root = el.shadowRoot; if (root == null) return null;
    const found = root.querySelector('canvas'); if (found) return found;
    for (const child of root.querySelectorAll('*')) { const c = canvas(child); if (c) return c; }
    return null; };
  const bottoms = charts.map((n) => { const v = window.__AS.view(model(n));
    const c = v && canvas(v.el);
    return c && c.getBoundingClientRect().height > 0 ? c.getBoundingClientRect().bottom : null; });
  const tabs = model('sections');
  const key = %s[tabs.active];
  const lead = window.__AS.view(model(key + '-lead'));
  const p = lead && lead.el.shadowRoot.querySelector('.lead');
  const doc = tabs.document;
  const asked = new Set();     // the step's question's own controls
  const add = (m) => { if (m == null) return; asked.add(m); (m.children || []).forEach(add);
                       if (m.child) add(m.child); };
  add(model(key + '-ask'));
  const controls = [...doc.all_models].filter((m) => ['Slider', 'RadioButtonGroup', 'Button',
      'Toggle', 'Spinner', 'TextInput', 'NumericInput'].includes(m.type) && m.name
      && !asked.has(m) && shown(m)).map((m) => m.name).sort();
  const question = model(key + '-ask-text');
  return {scroll: document.documentElement.scrollHeight, inner: window.innerHeight,
          question: question ? question.text : null,
          bottoms, lead: p ? parseFloat(getComputedStyle(p).fontSize) : null, key,
          present: model('sections').document.roots().length > 0
            && [...doc.all_models].some((m) => (m.css_classes || []).includes('present')),
          controls};
}""" % (MODEL, [t.key for t in TABS])
#: Laid out: every main chart drawn and the step's question asked (the server sends it once
#: the charts are out), the page no taller than the screen.
FITS = """(charts) => { const s = (%s)(charts);
  return s.bottoms.every((b) => b !== null && b <= s.inner + 1) && s.scroll <= s.inner
    && s.question !== ''; }""" % STEP


def _open(browser, url, width, height, offline=False):
    ctx = browser.new_context(viewport={"width": width, "height": height})
    page = ctx.new_page()
    page.console_errors = []
    page.on("pageerror", lambda e: page.console_errors.append(str(e)))
    page.on("console", lambda m: m.type == "error" and page.console_errors.append(m.text))
    page.add_init_script(INIT)
    page.goto(url)
    if offline:
        page.wait_for_function(f"() => ({MODEL})('sections') !== null", timeout=UI_WAIT_MS)
    else:
        page.wait_for_function(LIVE, timeout=UI_WAIT_MS)
    return ctx, page


def _until(page, script, arg, timeout, why=lambda: None):
    """Wait until ``script(arg)`` holds in the page, polled from here: after a print
    Chromium may hold back the page's animation frames and timers, by which
    wait_for_function polls."""
    deadline = time.monotonic() + timeout / 1000
    while not page.evaluate(script, arg):
        assert time.monotonic() < deadline, why()
        page.wait_for_timeout(200)


def _step(page, tab, timeout=UI_WAIT_MS):
    """The open step, once it fits the screen (the charts grow to fill it after they are
    drawn)."""
    _until(page, FITS, list(tab.charts), timeout, why=lambda: page.evaluate(STEP, list(tab.charts)))
    page.wait_for_timeout(400)
    return page.evaluate(STEP, list(tab.charts))


def _expected_controls(tab):
    return sorted({*tab.present, "present-leave", "present-print",
                   *(["train"] if tab.key == "training" else [])})


def _check_step(page, tab, width):
    s = _step(page, tab)
    assert s["key"] == tab.key
    assert s["present"]
    assert s["scroll"] <= s["inner"], (tab.key, s)
    assert all(b <= s["inner"] + 1 for b in s["bottoms"]), (tab.key, s)
    if width >= 1920:
        assert s["lead"] >= 28, (tab.key, s["lead"])
    # only the step's own controls (and its question's, where it has one)
    assert s["controls"] == _expected_controls(tab), (tab.key, s["controls"])
    # the charts fill the screen: their bottom is near the screen's
    assert max(s["bottoms"]) > s["inner"] - 80, (tab.key, s)
    return s


def test_every_step_fits_the_screen_and_keys_move_between_steps(browser, server):
    """Each step of present mode at 1920 x 1080, then at 1280 x 720 (one page, its window
    resized), fits the screen, with only its own controls (:func:`_check_step`). At 1920
    Page Down moves on, each step shown for the first time; at 1280 Home, Page Down, the
    right and down arrows, Space and End move on, and the left arrow and Page Up back, and the
    address follows each. Then, on the one draw: axe-core finds no violation; R reveals the
    answer; an arrow on a slider moves the slider, not the step; Escape leaves present mode.
    Over 20 s: six steps at two sizes, each drawn and measured (and photographed at 1920),
    and axe over the page."""
    from test_learners import violations
    ctx, page = _open(browser, server.url + "?present=1", 1920, 1080)
    try:
        for i, tab in enumerate(TABS):
            if i:
                page.keyboard.press("PageDown")
            _check_step(page, tab, 1920)
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / f"present-{tab.key}.png"))
            page.wait_for_url(f"**tab={tab.key}**")
        page.set_viewport_size({"width": 1280, "height": 720})
        for key, tab in zip(("Home", "PageDown", "ArrowRight", "ArrowDown", "Space", "End"),
                            TABS):
            page.keyboard.press(key)
            _follows(page, tab.key)
            _check_step(page, tab, 1280)
        for key, expected in (("ArrowLeft", TABS[4].key), ("PageUp", TABS[3].key),
                              ("Home", TABS[0].key)):
            page.keyboard.press(key)
            _follows(page, expected)
        _step(page, TABS[0])
        assert violations(page) == []
        # R reveals the step's answer (which the server sends on that press)
        page.keyboard.press("r")
        page.wait_for_function("() => (%s)('draw-answer').text.includes('Answer:')" % MODEL,
                               timeout=UI_WAIT_MS)
        # an arrow key on a slider moves the slider, not the step; Page Down moves the step
        page.get_by_role("slider").first.focus()
        page.keyboard.press("ArrowRight")
        page.wait_for_function(
            "() => new URLSearchParams(window.location.search).get('d_k') !== '64'",
            timeout=UI_WAIT_MS)
        assert "tab=draw" in page.url
        page.keyboard.press("PageDown")
        _follows(page, TABS[1].key)
        # Escape leaves: the address drops present=1, the page is whole again
        page.keyboard.press("Escape")
        page.wait_for_function("() => !window.location.search.includes('present')",
                               timeout=UI_WAIT_MS)
        whole = ("(charts) => { const s = (%s)(charts); return !s.present && ['present', "
                 "'resample', 'temperature', 'rule', 'theme'].every((c) => "
                 "s.controls.includes(c)); }" % STEP)
        _until(page, whole, list(TABS[1].charts), UI_WAIT_MS,
               why=lambda: page.evaluate(STEP, list(TABS[1].charts)))
        s = page.evaluate(STEP, list(TABS[1].charts))
        assert not s["present"]
        assert {"present", "resample", "temperature", "rule", "theme"} <= set(s["controls"])
        assert not {"present-leave", "present-print"} & set(s["controls"])
        assert page.evaluate("() => document.documentElement.scrollHeight") > 720
        assert page.console_errors == []
    finally:
        ctx.close()


def _follows(page, key):
    """Wait until the address names the step ``key``, still in present mode."""
    page.wait_for_function("(k) => new URLSearchParams(window.location.search).get('tab') "
                           "=== k", arg=key, timeout=UI_WAIT_MS)
    assert "present=1" in page.url


def test_dark_and_embedded_steps_fit_too(browser, server):
    ctx, page = _open(browser, server.url + "?present=1&theme=dark&tab=saturation", 1920, 1080)
    try:
        _check_step(page, TABS[2], 1920)
        page.screenshot(path=str(SHOTS / "present-saturation-dark.png"))
    finally:
        ctx.close()
    ctx, page = _open(browser, server.url + "?present=1&embed=1&tab=draw", 1280, 720)
    try:
        _check_step(page, TABS[0], 1280)
    finally:
        ctx.close()


#: Per step of the argument: its panel built and its lead written (the server drew it).
STEPS_DRAWN = """(keys) => { const d = Bokeh.documents[0];
  const tabs = d.get_model_by_name('sections');
  return keys.map((k, i) => tabs.tabs[i + 1].child.type !== 'Div'
                            && d.get_model_by_name(`${k}-lead`)?.text !== ''); }"""


@pytest.mark.parametrize("setting", ["", "&d_k=1536&temperature=0.63&keys=24&align=0.3"])
def test_present_mode_on_the_one_draw_has_every_step_drawn_before_any_click(browser, server,
                                                                             setting):
    """A page opened in present mode on the one draw (a lecturer's link) gets every step
    built and drawn once it is shown, with no click (the walk and the handout find them
    ready), at the defaults and at a setting no test asks for elsewhere (computed in the
    pool first); the same page outside present mode builds none until a step is asked for,
    and gets them when one is."""
    keys = [t.key for t in TABS[1:]]
    ctx, page = _open(browser, server.url + "?present=1" + setting, 1280, 720)
    plain, other = _open(browser, server.url + "?" + setting, 1280, 720)
    try:
        page.wait_for_function(f"(keys) => ({STEPS_DRAWN})(keys).every(Boolean)", arg=keys,
                               timeout=UI_WAIT_MS)
        # the plain page, shown too, has none of them
        assert other.evaluate(STEPS_DRAWN, keys) == [False] * len(keys)
        other.get_by_role("tab", name=TABS[2].title).click()
        other.wait_for_function(f"(keys) => ({STEPS_DRAWN})(keys)[1]", arg=keys,
                                timeout=UI_WAIT_MS)
        assert page.console_errors == [] and other.console_errors == []
    finally:
        ctx.close()
        plain.close()


def test_present_mode_on_a_phone_puts_the_controls_above_a_step_as_wide_as_the_screen(
        browser, server):
    """At 375 px present mode stacks like the page outside it: the controls above, and the
    step's charts as wide as the screen (not squeezed beside a 260 px column of controls)."""
    ctx, page = _open(browser, server.url + "?present=1", 375, 812)
    try:
        box = "(n) => window.__AS.view(Bokeh.documents[0].get_model_by_name(n)).el" \
              ".getBoundingClientRect().toJSON()"
        page.wait_for_function(f"(n) => ({box})(n).width > 300", arg="scaled-weights",
                               timeout=UI_WAIT_MS)
        chart, controls = (page.evaluate(box, n) for n in ("scaled-weights", "d_k"))
        assert chart["right"] <= 375 and controls["bottom"] <= chart["top"], (chart, controls)
        assert page.console_errors == []
    finally:
        ctx.close()


def test_the_present_button_and_a_link_open_present_mode_on_its_step(browser, server, page):
    """The Present button opens present mode on the tab that was open, and its address opened
    in a new window shows the same step. Over 20 s: two pages, each opened at the gradient
    tab, whose curves the server draws for each new session."""
    open_at(page, server, "?tab=gradient")
    page.get_by_role("button", name="Present", exact=True).click()
    page.wait_for_function("() => window.location.search.includes('present=1')")
    s = _step(page, TABS[3])
    assert s["present"] and s["key"] == "gradient"
    link = page.url
    ctx, other = _open(browser, link, 1280, 720)
    try:
        s = _step(other, TABS[3])
        assert s["present"] and s["key"] == "gradient"
        other.get_by_role("button", name="Leave present mode (Esc)").click()
        other.wait_for_function("() => !window.location.search.includes('present')")
    finally:
        ctx.close()


@pytest.mark.parametrize("search", ["?present=1&tab=training&theme=dark",
                                    "?present=1&tab=budget&embed=1"])
def test_axe_finds_no_violation_in_present_mode(browser, server, search):
    from test_learners import violations
    tab = next(t for t in TABS if f"tab={t.key}" in search)
    ctx, page = _open(browser, server.url + search, 1280, 720)
    try:
        _step(page, tab)
        assert violations(page) == []
        assert page.console_errors == []
    finally:
        ctx.close()


def _pdf_pages(pdf: bytes) -> int:
    """The pages of a PDF Chromium wrote (its page objects)."""
    return len(re.findall(rb"/Type\s*/Page(?![s\w])", pdf))


def test_the_handout_prints_one_page_per_step_in_a4_and_letter(browser, server):
    """The handout prints one page per step, in A4 and in Letter, and says what it gathers
    meanwhile. Over 20 s: every step built and asked, a whole training run with its sweep,
    and the page laid out for print twice."""
    ctx, page = _open(browser, server.url + "?present=1", 1280, 720)
    page.set_default_timeout(TRAINING_WAIT_MS)     # the handout trains, then lays out every step
    try:
        _step(page, TABS[0])
        # what the page says while the handout gathers, and whether it still says it at print
        page.evaluate("""() => {
            window.__printed = 0; window.__said = []; window.__saidAtPrint = [];
            new MutationObserver(() => {
              const el = document.querySelector('.handout-progress');
              const text = el ? el.textContent : null;
              if (text !== null && window.__said.at(-1) !== text) window.__said.push(text);
            }).observe(document.body, {childList: true, subtree: true, characterData: true});
            window.print = () => {
              window.__printed += 1;
              window.__saidAtPrint.push(document.querySelector('.handout-progress') !== null);
              window.__answersAtPrint = Object.fromEntries(
                [...Bokeh.documents[0].all_models].filter((m) => m.name?.endsWith('-answer'))
                  .map((m) => [m.name, m.text]));
            };
        }""")
        for n, fmt in enumerate(("A4", "Letter"), start=1):
            page.get_by_role("button", name="Print handout").click()
            _until(page, "(n) => window.__printed === n", n, TRAINING_WAIT_MS)
            said = page.evaluate("() => window.__said.splice(0)")
            # the steps counted up as they are gathered (the first time: the argument's are
            # built then), then the answers, then the layout
            steps = [int(text.split()[2]) for text in said if text.startswith("Gathering step")]
            assert said[:len(steps)] == [f"Gathering step {k} of {len(TABS)}…" for k in steps]
            assert steps == sorted(steps) and (n > 1 or steps), said
            assert said[len(steps):] == ["Gathering the answers…", "Laying out the handout…"]
            assert page.evaluate("() => window.__saidAtPrint.at(-1)") is False   # gone by then
            # every step's lead and main charts, in tab order
            leads = page.evaluate("""(keys) => keys.map((k) => { const m = (%s)(k + '-lead');
                const v = m && window.__AS.view(m); return v ? [v.el.checkVisibility(),
                v.el.getBoundingClientRect().top, m.text] : null; })""" % MODEL,
                                  [t.key for t in TABS])
            assert all(lead is not None and lead[0] and lead[2] for lead in leads), leads
            tops = [lead[1] for lead in leads]
            assert tops == sorted(tops), tops
            # each question with its answer and no guess as printed (on paper nobody guessed;
            # a run that ends after the print may put the training's away), and the training
            # step's chart with the run so far in it, though nobody pressed Train
            printed = page.evaluate("() => window.__answersAtPrint")
            answers = [printed[f"{t.key}-answer"] for t in TABS if t.ask]
            assert all("Answer:" in a and "Your guess" not in a for a in answers), answers
            assert page.evaluate("() => window.__col('training-source', 'step').length") > 0
            if n == 1:
                page.emulate_media(media="print")
                page.screenshot(path=str(SHOTS / "present-handout.png"), full_page=True)
                page.emulate_media(media="null")     # no emulation: page.pdf prints as print
            # Chromium prints (and says afterprint, which puts the page back as it was)
            pdf = page.pdf(format=fmt, print_background=False)
            assert _pdf_pages(pdf) == len(TABS), fmt
            # the page again in front (after printing, headless Chromium may slow the page's
            # timers, which refit the charts) and given time on a busy machine
            page.bring_to_front()
            s = _step(page, TABS[0], timeout=60_000)
            assert s["present"] and s["key"] == "draw"
            # and back on screen, the questions wait for Reveal again
            assert page.evaluate("(keys) => keys.map((k) => (%s)(k + '-answer').text)" % MODEL,
                                 [t.key for t in TABS if t.ask]) == [""] * len(answers)
        assert page.console_errors == []
    finally:
        ctx.close()


def test_present_mode_in_the_offline_copy(browser, offline_export):
    url = offline_export.path.resolve().as_uri() + "?present=1"
    ctx, page = _open(browser, url, 1280, 720, offline=True)
    try:
        _check_step(page, TABS[0], 1280)
        page.keyboard.press("PageDown")
        page.wait_for_function("() => window.location.search.includes('tab=variance')",
                               timeout=UI_WAIT_MS)
        _check_step(page, TABS[1], 1280)
        page.keyboard.press("Escape")
        page.wait_for_function("() => !window.location.search.includes('present')")
        assert page.console_errors == []
    finally:
        ctx.close()
