"""The page on a phone and on every width, in Chromium against the served page: the d_k
slider and a bar chart on one screen while the slider is dragged (a 375 x 812 phone, a
360 x 640 iframe), touch targets of at least 24 x 24 px, text of at least 14 px (13 px on
controls) and lines of prose of at most 80 characters. Each tab as tall as its content:
the dark walk of test_learners' screenshots, with this module's BLANK and click_tab."""

import json
from contextlib import contextmanager

import pytest
from conftest import INIT, LIVE, NO_TAB_TO_BUILD, UI_WAIT_MS, column, wait_still
from playwright.sync_api import expect

from attention_scaling.figures import LABEL_CAP

pytestmark = pytest.mark.browser

WIDTHS = (375, 768, 1280, 1920)

#: The elements of the page in the flat tree (every shadow root opened), as window.__flat(),
#: and an element's parent across shadow roots, as window.__up(el).
FLAT = """
window.__up = (el) => el.parentElement ?? (el.getRootNode() instanceof ShadowRoot
                                           ? el.getRootNode().host : null);
window.__flat = () => {
  const out = [];
  const visit = (root) => { for (const el of root.querySelectorAll('*')) {
    out.push(el); if (el.shadowRoot) visit(el.shadowRoot); } };
  visit(document);
  return out;
};
// An element or one of its ancestors (across shadow roots) matching `selector`.
window.__within = (el, selector) => {
  for (let e = el; e != null; e = window.__up(e)) if (e.matches(selector)) return e;
  return null;
};
// Shown to a sighted reader: drawn (not display: none, visibility: hidden, nor clipped to
// nothing as .sr-only is) and of some size.
window.__shown = (el) => {
  for (let e = el; e != null; e = window.__up(e)) {
    const cs = getComputedStyle(e);
    if (cs.display === 'none' || cs.visibility === 'hidden' || e.classList.contains('sr-only')
        || cs.clip === 'rect(0px, 0px, 0px, 0px)') return false;
  }
  const box = el.getBoundingClientRect();
  return box.width > 0 && box.height > 0;
};
"""

#: The boxes (viewport coordinates) of the d_k slider, of the controls' column and of the
#: plot area (the frame inside the axes) of the scaled bar chart; the window's height and
#: scroll position.
BOXES = """() => {
  const doc = Bokeh.documents[0];
  const box = (el) => { const b = el.getBoundingClientRect();
                        return {top: b.top, bottom: b.bottom, left: b.left, right: b.right}; };
  const slider = window.__AS.view(doc.get_model_by_name('d_k'));
  const plot = window.__AS.view(doc.get_model_by_name('scaled-weights'));
  const canvas = box(plot.el), frame = plot.frame.bbox;
  return {slider: box(slider.el), controls: box(window.__within(slider.el, '.app-sidebar')),
          plot: {top: canvas.top + frame.top, bottom: canvas.top + frame.bottom},
          height: innerHeight, scroll: scrollY};
}"""


def _in_view_together(boxes) -> list[str]:
    """What keeps the d_k slider and the top 60 % of the plot area from being on the screen
    together (nothing: an empty list); the controls' column must not cover that part."""
    slider, plot, controls = boxes["slider"], boxes["plot"], boxes["controls"]
    wrong = []
    if not (0 <= slider["top"] and slider["bottom"] <= boxes["height"]):
        wrong.append(f"slider at {slider['top']:.0f}-{slider['bottom']:.0f}")
    top, needed = plot["top"], plot["top"] + 0.6 * (plot["bottom"] - plot["top"])
    # the part of the screen that the controls (above the charts or beside them) leave
    free = controls["bottom"] if controls["right"] > plot.get("left", 0) and \
        controls["top"] < top else 0
    if not (max(0, free) <= top and needed <= boxes["height"]):
        wrong.append(f"plot's top 60% at {top:.0f}-{needed:.0f}, screen free from "
                     f"{max(0, free):.0f} to {boxes['height']}")
    return wrong


def _context(browser, width, height):
    ctx = browser.new_context(viewport={"width": width, "height": height})
    ctx.add_init_script(INIT + FLAT)
    return ctx


@contextmanager
def _opened(browser, server, width, height=900):
    """The served page, drawn, in a window of ``width`` x ``height``."""
    ctx = _context(browser, width, height)
    try:
        page = ctx.new_page()
        page.goto(server.url)
        page.wait_for_function(LIVE, timeout=UI_WAIT_MS)
        wait_still(page)
        yield page
    finally:
        ctx.close()


def _frame(browser, server, where):
    """The explorer's frame and its page: the page itself at 375 x 812, or an iframe of
    360 x 640 (embed=1) in a page."""
    if where == "page":
        ctx = _context(browser, 375, 812)
        page = ctx.new_page()
        page.goto(server.url)
        frame = page.main_frame
    else:
        ctx = _context(browser, 400, 700)
        page = ctx.new_page()
        page.goto(server.url + "liveness")          # the iframe's parent on the same host
        page.set_content(f"<iframe src='{server.url}?embed=1' width='360' height='640' "
                         "style='border:0' title='explorer'></iframe>")
        page.wait_for_function("() => window.frames.length === 1")
        frame = page.frames[1]
    frame.wait_for_function(LIVE, timeout=UI_WAIT_MS)
    frame.wait_for_selector(".noUi-handle", timeout=UI_WAIT_MS)
    wait_still(frame)
    return ctx, page, frame


def _drag_d_k(page, frame, dx):
    """Drag the d_k slider's handle ``dx`` px with the mouse; wait for the new width's data."""
    before = column(frame, "jacobian-diagonal-marker", "width")
    handle = frame.locator(".noUi-handle").first
    box = handle.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    for step in range(1, 9):
        page.mouse.move(x + dx * step / 8, y)
        page.wait_for_timeout(60)
    page.mouse.up()
    frame.wait_for_function(
        "(b) => JSON.stringify(window.__col('jacobian-diagonal-marker', 'width')) !== b",
        arg=json.dumps(before), timeout=UI_WAIT_MS)
    wait_still(frame)


@pytest.mark.parametrize("where", ["page", "iframe"])
def test_the_d_k_slider_and_a_bar_chart_share_the_screen_while_the_slider_moves(
        browser, server, where):
    ctx, page, frame = _frame(browser, server, where)
    try:
        first = frame.evaluate(BOXES)
        assert _in_view_together(first) == [], first
        _drag_d_k(page, frame, 60)
        dragged = frame.evaluate(BOXES)
        assert dragged["scroll"] == first["scroll"]
        assert _in_view_together(dragged) == [], dragged
        # further down the page, at the Jacobian's heat map, the slider is still in view
        frame.evaluate("() => window.__AS.view(Bokeh.documents[0].get_model_by_name("
                       "'jacobian')).el.scrollIntoView({block: 'end'})")
        wait_still(frame)
        lower = frame.evaluate(BOXES)
        assert lower["scroll"] > first["scroll"] + 200, lower
        slider = lower["slider"]
        assert 0 <= slider["top"] and slider["bottom"] <= lower["height"], lower
        _drag_d_k(page, frame, -120)
        assert frame.evaluate(BOXES)["slider"] == slider
    finally:
        ctx.close()


#: The top and bottom (viewport coordinates) of the controls' column and of each bar chart.
PAIR = """() => {
  const doc = Bokeh.documents[0], box = (el) => el.getBoundingClientRect();
  const el = (n) => window.__AS.view(doc.get_model_by_name(n)).el;
  const controls = box(window.__within(el('d_k'), '.app-sidebar'));
  return {controls: [controls.top, controls.bottom], height: innerHeight,
          charts: ['scaled-weights', 'unscaled-weights'].map((n) => [box(el(n)).top,
                                                                     box(el(n)).bottom])};
}"""


def test_the_reference_pair_fits_one_phone_screen_under_the_controls(browser, server):
    """At 375 x 812, the scaled chart scrolled up to the sticky controls: the unscaled one is
    on the same screen, whole, so that 27% is compared with 80% without scrolling; at 1280
    the charts keep their own height."""
    with _opened(browser, server, 375, 812) as page:
        page.evaluate("() => { const d = Bokeh.documents[0], v = (n) => window.__AS.view("
                      "d.get_model_by_name(n)).el; const top = v('scaled-weights')"
                      ".getBoundingClientRect().top, bar = window.__within(v('d_k'), "
                      "'.app-sidebar').getBoundingClientRect().bottom; "
                      "window.scrollBy(0, top - bar); }")
        wait_still(page)
        found = page.evaluate(PAIR)
        (scaled_top, _), (_, unscaled_bottom) = found["charts"]
        assert found["controls"][1] <= scaled_top + 1, found
        assert unscaled_bottom <= found["height"], found
        page.set_viewport_size({"width": 1280, "height": 900})
        page.wait_for_function("() => Bokeh.documents[0].get_model_by_name('scaled-weights')"
                               ".height === 330", timeout=UI_WAIT_MS)


def test_more_controls_opens_by_keyboard_and_says_so(browser, server):
    """On a phone the controls other than d_k and the rule fold behind "More controls", a
    button that says whether it is open and opens by keyboard."""
    with _opened(browser, server, 375, 812) as page:
        temperature = page.locator("[role='slider']").nth(1)
        assert not temperature.is_visible()
        button = page.get_by_role("button", name="More controls")
        assert button.get_attribute("aria-expanded") == "false"
        button.focus()
        page.keyboard.press("Enter")
        page.wait_for_function("() => window.__flat().some((e) => e.getAttribute("
                               "'aria-expanded') === 'true')", timeout=UI_WAIT_MS)
        assert temperature.is_visible()
        assert button.get_attribute("aria-expanded") == "true"
        page.keyboard.press("Space")
        expect(button).to_have_attribute("aria-expanded", "false", timeout=UI_WAIT_MS)
        expect(temperature).to_be_hidden(timeout=UI_WAIT_MS)


def test_what_the_keyboard_reaches_is_not_under_the_controls_bar(browser, server):
    """On a phone, an element reached by the keyboard above the screen scrolls into view
    below the controls that stay at the top, not under them (WCAG 2.2, focus not
    obscured). Chromium centres what focus scrolls to; a browser that scrolls it to the
    nearest edge, a link to an anchor and find-in-page scroll as scrollIntoView's
    "nearest" does, which is what this scrolls."""
    with _opened(browser, server, 375, 812) as page:
        button = page.get_by_role("button", name="Download PNG").first
        # the button just above the screen
        button.evaluate("(el) => window.scrollTo(0, scrollY + el.getBoundingClientRect().bottom"
                        " + 50)")
        wait_still(page)
        assert button.bounding_box()["y"] < 0
        button.evaluate("(el) => { el.scrollIntoView({block: 'nearest'}); "
                        "el.focus({preventScroll: true}); }")
        wait_still(page)
        bar = page.evaluate(
            "() => window.__flat().find((e) => e.classList.contains('app-sidebar'))"
            ".getBoundingClientRect().bottom")
        top = button.bounding_box()["y"]
        assert top >= bar, f"focused button at {top:.0f} under the controls' bar (to {bar:.0f})"


def _open_more_controls(page):
    """Show every control: open "More controls" where the page folds them behind it."""
    more = page.get_by_role("button", name="More controls").locator("visible=true")
    if more.count():
        more.click()
        expect(page.get_by_role("button", name="More controls").locator("visible=true")
               ).to_have_attribute("aria-expanded", "true", timeout=UI_WAIT_MS)
        wait_still(page)


#: The boxes of the controls a finger presses at this width: slider handles, buttons, tabs.
TARGETS = """() => window.__flat().filter((e) => e.matches('.noUi-handle, button, .bk-tab')
  && window.__shown(e)).map((e) => { const b = e.getBoundingClientRect();
    return [e.className || e.tagName, (e.textContent || '').trim().slice(0, 30),
            Math.round(b.width * 10) / 10, Math.round(b.height * 10) / 10]; })"""


def test_touch_targets_are_at_least_24_px_on_a_phone(browser, server):
    with _opened(browser, server, 375, 812) as page:
        _open_more_controls(page)
        targets = page.evaluate(TARGETS)
        kinds = {kind.split()[0] for kind, *_ in targets}
        assert {"noUi-handle", "bk-btn", "bk-tab"} <= kinds, kinds
        # the four sliders of the controls and the guess of the open step's question
        assert sum(kind.startswith("noUi-handle") for kind, *_ in targets) == 5, targets
        small = [t for t in targets if t[2] < 24 or t[3] < 24]
        assert small == [], small


#: Per tab: the blank stretch between the bottom of the last element shown in the open tab
#: and the bottom of the tabs.
BLANK = """() => {
  const tabs = window.__AS.view(Bokeh.documents[0].get_model_by_name('sections'));
  const panel = tabs.child_views[tabs.model.active].el;
  const inside = (e) => { for (let x = window.__up(e); x; x = window.__up(x))
                            if (x === panel) return true;
                          return false; };
  let last = panel.getBoundingClientRect().top;
  // a chart counts by its own box: inside it BokehJS keeps boxes of its renderers, clipped
  // to the plot's frame, that reach as far as their data (a line that leaves the axis)
  for (const el of window.__flat())
    if (inside(el) && window.__shown(el) && !window.__within(el, '.bk-Canvas'))
      last = Math.max(last, el.getBoundingClientRect().bottom);
  return tabs.el.getBoundingClientRect().bottom - last;
}"""


def click_tab(page, index, title):
    """Open the tab ``index`` by a click on its header ``title``, once the headers are drawn
    for good (conftest.NO_TAB_TO_BUILD); wait until it is shown, its busy notes gone, and the
    page keeps still."""
    page.wait_for_function(NO_TAB_TO_BUILD, timeout=UI_WAIT_MS)
    page.locator(".bk-tab", has_text=title).click()
    page.wait_for_function("(i) => { const t = Bokeh.documents[0].get_model_by_name('sections');"
                           " const v = window.__AS.view(t); return t.active === i && v && "
                           "v.child_views[i] && !v.child_views[i].el.style.visibility && "
                           "!window.__flat().some((e) => e.matches('p.status') && "
                           "window.__shown(e)); }", arg=index, timeout=UI_WAIT_MS)
    wait_still(page)


#: Every text shown: its font size, whether it is on a control (a button, a tab, a slider's
#: title and value, a control's label), and its start. The letters of a subscript or a
#: superscript count at the size of the text around them; the charts' own texts (legends,
#: drawn on the charts' layers) are not part of the page's text.
SIZES = """() => {
  const out = [];
  for (const el of window.__flat()) {
    if (el.closest('style, script, math, sub, sup') || window.__within(el, '.bk-layer')) continue;
    const text = [...el.childNodes].filter((n) => n.nodeType === 3)
                 .map((n) => n.textContent).join('').trim();
    if (!text || !window.__shown(el)) continue;
    const control = window.__within(el, 'button, .bk-tab, .bk-slider-title, ' +
      '.bk-slider-value, .control-label, .bk-input-group, label') != null;
    out.push([parseFloat(getComputedStyle(el).fontSize), control, text.slice(0, 40)]);
  }
  return out;
}"""


#: Every line of prose shown: its length in characters (the letters of a text node laid out
#: on one line of its block, counted with Range rects), and its start.
LINES = """() => {
  const lines = [];
  for (const el of window.__flat()) {
    if (el.closest('style, script, math, table, button, .bk-tab')) continue;
    const cs = getComputedStyle(el);
    if (!['block', 'list-item', 'flow-root'].includes(cs.display) || !window.__shown(el)) continue;
    // this block's own text: text nodes whose nearest block is this one
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    let node, line = '', top = null, bottom = null;
    const range = document.createRange();
    while ((node = walker.nextNode())) {
      let up = node.parentElement, mine = true;
      for (; up && up !== el; up = up.parentElement)
        if (!['inline', 'inline-block'].includes(getComputedStyle(up).display)
            || up.tagName === 'MATH') { mine = false; break; }
      if (!mine) continue;
      for (let i = 0; i < node.length; i++) {
        range.setStart(node, i); range.setEnd(node, i + 1);
        const r = range.getBoundingClientRect();
        if (r.width === 0 && r.height === 0) continue;
        if (top !== null && r.top >= bottom - 2) {
          lines.push([line.length, line.trim().slice(0, 40)]); line = '';
          top = null;
        }
        if (top === null) { top = r.top; bottom = r.bottom; }
        bottom = Math.max(bottom, Math.min(r.bottom, top + r.height));
        line += node.data[i];
      }
    }
    if (line.trim()) lines.push([line.trim().length, line.trim().slice(0, 40)]);
  }
  return lines;
}"""


def _every_tab_open_in_detail(page):
    """Each tab in turn with its "More detail" open, yielding its index."""
    from attention_scaling.state import TABS
    for index, tab in enumerate(TABS):
        click_tab(page, index, tab.title)
        more = page.get_by_role("button", name="More detail").locator("visible=true")
        if more.count() and more.get_attribute("aria-expanded") != "true":
            more.click()
            wait_still(page)
        yield index


def _every_tab_in_detail_at(page, widths):
    """Each tab in detail (:func:`_every_tab_open_in_detail`) at each of ``widths`` in turn,
    the window resized from the first, yielding the width."""
    for i, width in enumerate(widths):
        if i:
            page.set_viewport_size({"width": width, "height": 900})
            wait_still(page)
        for _ in _every_tab_open_in_detail(page):
            yield width


#: Of each question shown, the box around its choices' buttons, its Reveal button's box, and
#: the choices whose label does not fit its button ([name, [l, t, r, b], [l, t, r, b], [clipped labels]]).
QUESTION_ROWS = """() => {
  const doc = Bokeh.documents[0], out = [];
  const box = (m) => { const v = m && window.__AS.view(m);
    if (v == null || !window.__shown(v.el)) return null;
    const r = v.el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  for (const m of doc.all_models) {
    if (m.type !== 'RadioButtonGroup' || !(m.name || '').endsWith('-guess')) continue;
    const key = m.name.slice(0, -'-guess'.length);
    const reveal = box(doc.get_model_by_name(key + '-reveal'));
    if (box(m) == null || reveal == null) continue;
    const buttons = [...window.__AS.root(m).querySelectorAll('.bk-btn')];
    const rects = buttons.map((b) => b.getBoundingClientRect());
    const guess = [Math.min(...rects.map((r) => r.left)), Math.min(...rects.map((r) => r.top)),
                   Math.max(...rects.map((r) => r.right)), Math.max(...rects.map((r) => r.bottom))];
    const clipped = buttons.filter((b) => b.scrollWidth > b.clientWidth + 1)
      .map((b) => b.textContent);
    out.push([key, guess, reveal, clipped]);
  }
  return out; }"""


#: Of each bar chart shown: its name, how high its "max weight" label reaches at the highest
#: it is placed (figures.LABEL_CAP, on a bar of weight 1), and the top of its y range, in
#: weights: the label's text (1.2 lines of its font), its padding and offset over the chart's
#: inner height (Plot.inner_height).
LABEL_ROOM = """(cap) => ['scaled-weights', 'unscaled-weights'].map((name) => {
  const fig = Bokeh.documents[0].get_model_by_name(name);
  const label = fig.renderers.map((r) => r.glyph).find((g) => g.type === 'Text');
  const px = 1.2 * parseFloat(label.text_font_size.value ?? label.text_font_size)
    + 2 * label.padding + Math.abs(label.y_offset.value ?? label.y_offset);
  const span = fig.y_range.end - fig.y_range.start;
  return [name, cap + px / fig.inner_height * span, fig.y_range.end]; })"""


def _apart(a, b) -> bool:
    return a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]


def test_text_is_at_least_14_px_and_lines_of_prose_at_most_80_characters(browser, server):
    """One page, its window resized from a phone to a wide screen, every tab with "More
    detail" open and every control shown: on the phone (375 px) and the wide screen (1920),
    text of at least 14 px, on controls 13 px; on desktops (1280 and 1920), every line of
    prose holds at most 80 characters (counted letter by letter); at every width, each
    question's Reveal button clear of its choices, and every choice's label inside its
    button; on the phone, the bar charts' "max weight" label inside the chart even on a bar
    of weight 1. Over 20 s: six tabs at three widths, each drawn, opened in detail and
    measured."""
    with _opened(browser, server, 375) as page:
        _open_more_controls(page)
        small, long, crowded, asked = set(), set(), [], set()
        for width in _every_tab_in_detail_at(page, (375, 1280, 1920)):
            if width == 375:
                for name, reach, top in page.evaluate(LABEL_ROOM, LABEL_CAP):
                    if reach > top:
                        crowded.append((width, name, "max weight label", reach, top))
            for key, guess, reveal, clipped in page.evaluate(QUESTION_ROWS):
                asked.add((width, key))
                if not _apart(guess, reveal) or clipped:
                    crowded.append((width, key, guess, reveal, clipped))
            if width in (375, 1920):
                sizes = page.evaluate(SIZES)
                assert any(control for _, control, _ in sizes)
                assert any(not control for _, control, _ in sizes)
                small |= {(width, size, control, text) for size, control, text in sizes
                          if size < (13 if control else 14)}
            if width >= 1280:
                lines = page.evaluate(LINES)
                assert max(n for n, _ in lines) > 40, lines
                long |= {(width, n, text) for n, text in lines if n > 80}
        assert sorted(small) == [], "\n".join(map(str, sorted(small)))
        assert sorted(long) == []
        assert crowded == []
        assert {key for width, key in asked if width == 375} >= {"variance", "training"}, asked


@pytest.mark.parametrize("width", (768, 1280))
def test_each_idle_note_sits_under_its_control(browser, server, width):
    """Where the open tab does not use a control, the sentence saying so sits right under
    that control, in its column, whether the controls stand in one column or two."""
    with _opened(browser, server, width) as page:
        click_tab(page, 1, "1 Variance")
        _open_more_controls(page)
        pairs = page.evaluate("""() => {
          const doc = Bokeh.documents[0];
          const box = (m) => { const v = window.__AS.view(m);
                               return v && window.__shown(v.el) ? v.el.getBoundingClientRect()
                                                                : null; };
          const out = [];
          for (const name of ['d_k', 'rule', 'temperature', 'keys', 'align', 'seed']) {
            const note = doc.get_model_by_name(`${name}-idle`);
            const control = name === 'seed' ? doc.get_model_by_name('resample')
                                            : doc.get_model_by_name(name);
            const n = note && box(note), c = control && box(control);
            if (n && c) out.push([name, c.left, c.right, c.bottom, n.left, n.right, n.top]);
          }
          return out;
        }""")
        assert len(pairs) >= 4, pairs
        for name, c_left, c_right, c_bottom, n_left, n_right, n_top in pairs:
            assert c_bottom - 1 <= n_top <= c_bottom + 30, (name, c_bottom, n_top)
            assert n_left < c_right and c_left < n_right, (name, c_left, c_right, n_left, n_right)


@pytest.mark.parametrize("theme", ("light", "dark"))
def test_a_disabled_buttons_label_reads(browser, server, theme):
    """The buttons of a control the open tab does not use are disabled, and their labels
    still read (4.5:1 against their background): the rule's on the Training tab."""
    from attention_scaling.style import contrast

    ctx = _context(browser, 1280, 900)
    try:
        page = ctx.new_page()
        page.goto(f"{server.url}?tab=training&theme={theme}")
        page.wait_for_function(LIVE, timeout=UI_WAIT_MS)
        page.wait_for_function("() => window.__flat().some((e) => e.matches("
                               "'button[disabled]') && window.__shown(e))", timeout=UI_WAIT_MS)
        colours = page.evaluate("""() => window.__flat().filter((e) => e.matches(
            'button[disabled]') && window.__shown(e)).map((e) => {
              const cs = getComputedStyle(e);
              const hex = (c) => '#' + c.match(/\\d+/g).slice(0, 3).map(
                (v) => Number(v).toString(16).padStart(2, '0')).join('');
              return [e.textContent.trim(), hex(cs.color), hex(cs.backgroundColor),
                      cs.opacity];
            })""")
        assert len(colours) >= 3, colours
        for label, ink, paper, opacity in colours:
            assert opacity == "1" and contrast(ink, paper) >= 4.5, (label, ink, paper, opacity)
    finally:
        ctx.close()
