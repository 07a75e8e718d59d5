"""`attention-scaling export`: one self-contained HTML file, exact core values, offline."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from conftest import HELPERS, UI_WAIT_MS, wait_still

from attention_scaling import argument, core, export, figures
from attention_scaling.prose import text as prose
from attention_scaling.state import FIG3_D_K, FIG3_SEED, ExplorerState, Setting
from attention_scaling.style import MARK
from attention_scaling.prose.lead import DRAW_LEAD, TRAINING_LEAD, training_lead
from attention_scaling.prose.text import fields_of, weight_label

CLI = str(Path(sys.executable).with_name("attention-scaling"))


def run(*args):
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=300)


@pytest.fixture
def exported(offline_export):
    """The session's offline copy (conftest.offline_export): its file and what was printed."""
    return offline_export.path, offline_export.stdout


class _Attrs(HTMLParser):
    """Every tag and its src/href attributes (script bodies are not parsed as tags)."""

    def __init__(self):
        super().__init__()
        self.tags, self.links = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.links += [v or "" for k, v in attrs if k in ("src", "href")]


# ---- the file ---------------------------------------------------------------------------

def test_export_writes_one_small_self_contained_file(exported):
    out, stdout = exported
    size = out.stat().st_size
    assert 0 < size <= export.MAX_BYTES == 6_000_000
    n_states = len(core.D_K_VALUES) * len(core.TEMPERATURES) * export.DEFAULT_SEEDS
    assert f"{n_states} states" in stdout and "MB" in stdout and " s" in stdout
    assert f"each under the {len(core.RULES)} scaling rules" in stdout
    text = out.read_text(encoding="utf-8")
    parser = _Attrs()
    parser.feed(text)
    assert "script" in parser.tags
    assert "link" not in parser.tags          # no external style sheets
    for link in parser.links:
        assert not link.strip().lower().startswith(("http://", "https://", "//")), link
    assert not [link for link in parser.links if link.strip()], parser.links
    assert "Why attention divides by √dₖ" in text


PROGRESS_LINE = re.compile(r"export: (\d+)% \((\d+) of (\d+) steps\)")


def test_export_shows_its_progress_in_plain_lines_up_to_100_percent(offline_export):
    """stderr not a terminal (the session's export writes it to a file): plain lines, no bar,
    each further on than the one before, the last at every step."""
    assert "\r" not in offline_export.stderr
    lines = [line for line in offline_export.stderr.splitlines() if line.startswith("export")]
    found = [PROGRESS_LINE.fullmatch(line) for line in lines]
    assert len(lines) >= 2 and all(found), lines
    percent, done, total = ([int(m[i]) for m in found] for i in (1, 2, 3))
    assert len(set(total)) == 1 and total[0] >= 2 * len(offline_export.payload["d_k"]) * len(
        offline_export.payload["temperatures"]) * len(offline_export.seeds)
    assert all(a < b for a, b in zip(done, done[1:]))
    assert all(a < b for a, b in zip(percent, percent[1:]))
    assert percent == [100 * d // total[0] for d in done]
    assert (percent[-1], done[-1]) == (100, total[0])


class _Stream(io.StringIO):
    def __init__(self, terminal: bool) -> None:
        super().__init__()
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal


def test_progress_is_a_bar_redrawn_in_place_on_a_terminal():
    stream = _Stream(terminal=True)
    progress = export._Progress(stream, 4, interval=0)
    for _ in range(4):
        progress.advance()
    drawn = stream.getvalue()
    assert drawn.endswith("] 100% (4 of 4 steps)\n") and drawn.count("\n") == 1
    bars = drawn.split("\r")[1:]
    assert [bar.count("#") for bar in bars] == [7, 15, 22, 30]
    assert [bar.split("] ")[1].split("%")[0] for bar in bars] == ["25", "50", "75", "100"]


def test_progress_lines_wait_their_interval_but_the_last_is_always_written():
    stream = _Stream(terminal=False)
    progress = export._Progress(stream, 1000, interval=3600)
    for _ in range(1000):
        progress.advance()
    assert stream.getvalue().splitlines() == ["export: 0% (1 of 1000 steps)",
                                              "export: 100% (1000 of 1000 steps)"]


@pytest.mark.parametrize("args,message", [
    (["export", "{tmp}/missing-dir/out.html"], "does not exist"),
    (["export", "{tmp}/a-file.txt/out.html"], "does not exist"),
    (["export", "{tmp}"], "is a directory"),
    (["export", "{tmp}/out.html", "--seeds", "0"], "--seeds must be between 1 and"),
    (["export", "{tmp}/out.html", "--seeds", "100000000"], "--seeds must be between 1 and"),
    (["export", "{tmp}/out.html", "--seeds", "many"], "--seeds must be an integer"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    (tmp_path / "a-file.txt").write_text("x")
    r = run(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert r.returncode == 2
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    assert not (tmp_path / "out.html").exists()


# ---- the packing is lossless ----------------------------------------------------------------

# ---- in a real browser, offline --------------------------------------------------------------

INIT = HELPERS + """window.__model = (name) => {
  for (const doc of (window.Bokeh ? Bokeh.documents : [])) {
    const m = doc.get_model_by_name(name); if (m) return m; }
  return null;
};
window.__col = (name, col) => {
  const m = window.__model(name); if (!m) return null;
  const d = m.data; const v = d instanceof Map ? d.get(col) : d[col];
  return v ? Array.from(v) : null;
};
window.__spans = (name) => {
  const root = window.__AS.root(window.__model(name)); const out = {};
  if (!root) return null;
  for (const el of root.querySelectorAll('[data-k]')) out[el.dataset.k] = el.textContent;
  const t = root.querySelector('[data-active]');
  if (t) out.__active = t.dataset.active;
  return out;
};"""


@contextmanager
def page_of_its_own(browser, width, height, scheme="light"):
    """A page in a browser context of its own, for the offline copy (``console_errors``: its
    errors), in the system theme ``scheme``, closed after."""
    context = browser.new_context(viewport={"width": width, "height": height},
                                  color_scheme=scheme)
    try:
        page = context.new_page()
        page.console_errors = []
        page.on("pageerror", lambda e: page.console_errors.append(str(e)))
        page.on("console", lambda m: m.type == "error" and page.console_errors.append(m.text))
        page.add_init_script(INIT)
        yield page
    finally:
        context.close()


@pytest.fixture
def offline_page(browser, exported):
    out, _ = exported
    context = browser.new_context(viewport={"width": 1440, "height": 1200})
    requests, errors = [], []

    def route(r):
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            r.abort()

    context.route("**/*", route)
    pg = context.new_page()
    pg.on("request", lambda r: requests.append(r.url))
    pg.on("console", lambda m: m.type == "error" and errors.append(m.text))
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.add_init_script(INIT)
    pg.goto(out.resolve().as_uri())
    pg.wait_for_function("() => (window.__col('jacobian-diagonal-source', 'value') || []).length > 0"
                         " && window.__spans('explanation') !== null"
                         " && Object.keys(window.__spans('explanation')).length > 0",
                         timeout=UI_WAIT_MS)
    pg.requests, pg.console_errors = requests, errors
    yield pg
    context.close()


#: The text each named Div shows (its textContent), as a list.
TEXT = """(names) => names.map((n) => {
  const view = window.__AS.view(window.__model(n));
  return view ? view.markup_el.textContent : null; })"""

SET = """([dk, t, s, rule]) => {
  const m = window.__model;
  m('d_k').value = dk; m('temperature').value = t; m('seed-index').value = s;
  m('rule').active = rule;
}"""


def show(page, seed, d_k, temperature, rule, settle=True):
    """The offline page at a state; ``settle``: then a tenth of a second more, for the
    columns that reach the page a frame later (False: the caller waits for them)."""
    seeds = export.seed_list(export.DEFAULT_SEEDS)
    page.evaluate(SET, [core.D_K_VALUES.index(d_k), core.TEMPERATURES.index(temperature),
                        seeds.index(seed), core.RULES.index(rule)])
    page.wait_for_function(
        "([d, s]) => JSON.stringify(window.__col('jacobian-diagonal-marker', 'width')) === "
        "JSON.stringify([d]) && window.__spans('explanation').d === d"
        " && window.__model('seed').text.includes('<code>' + s + '</code>')",
        arg=[str(d_k), str(seed)], timeout=UI_WAIT_MS)
    if settle:
        wait_still(page)


def col(page, name, column):
    return page.evaluate("([n, c]) => window.__col(n, c)", [name, column])


CASES = [
    (FIG3_SEED, 64, 1.0, "sqrt"),      # default: Fig. 3
    (FIG3_SEED, 4096, 1.0, "none"),    # wide head, unscaled
    (FIG3_SEED, 16, 0.1, "sqrt"),      # sharp
    (1, 256, 10.0, "none"),                  # flat, second seed
    (3, 1, 1.0, "sqrt"),                     # last seed, narrowest head
    (2, 512, 0.5, "linear"),                 # the 1/d_k rule
]


@pytest.mark.browser
def test_offline_page_shows_core_values_exactly(offline_page):
    page = offline_page
    assert "√dₖ" in page.title()
    for seed, d_k, temperature, rule in CASES:
        show(page, seed, d_k, temperature, rule)
        st = core.compute_state(d_k, temperature, seed)
        act = st.active(rule)
        case = (seed, d_k, temperature, rule)
        # the left chart: the rule's logits where it divides them, ÷√d_k where it is unscaled
        left = st.variants["sqrt" if rule == "none" else rule]
        for name, v in (("scaled-weights", left), ("unscaled-weights", st.unscaled)):
            assert col(page, f"{name}-source", "weight") == pytest.approx(v.probs.tolist(), abs=1e-12), case
            assert col(page, f"{name}-source", "logit") == pytest.approx(v.logits.tolist(), abs=1e-12), case
            label = f"max weight {weight_label(v)}"
            assert col(page, f"{name}-source", "label") == [
                label if k == v.argmax else "" for k in range(len(v.probs))], case
            # the shown value is the float64 core computed, bit for bit
            assert col(page, f"{name}-source", "weight") == v.probs.tolist(), case
            assert col(page, f"{name}-source", "gq") == v.query_rows.tolist(), case
        assert col(page, "jacobian-source", "value") == pytest.approx(act.jacobian.ravel().tolist(), abs=1e-12), case
        # rebuilt in the browser from the weights and the diagonal: the same float64s
        assert col(page, "jacobian-source", "value") == act.jacobian.ravel().tolist(), case
        assert col(page, "jacobian-diagonal-source", "value") == pytest.approx(st.sweep(rule).ravel().tolist(), abs=1e-12), case
        assert col(page, "jacobian-diagonal-cells", "text") == [
            "<0.001" if x < 0.0005 else f"{x:.3f}" for x in act.diagonal]
        spans = page.evaluate("() => window.__spans('explanation')")
        assert spans["d"] == str(d_k)
        assert spans["which"] == prose.WHICH[rule]
        assert spans["max_w"] == weight_label(act)
        # the texts read word for word as the served page's for the same state
        fields = fields_of(ExplorerState(d_k=d_k, temperature=temperature, seed=seed,
                               rule=rule))
        # the gradient over many draws at this width and temperature, this draw among them,
        # and its axis: as the served page draws them
        spread = core.gradient_spread(d_k, temperature)
        for r in core.RULES:
            for c in figures.SPREAD_COLUMNS:
                assert col(page, "gradient-spread-source", f"{c}_{r}") == \
                    [spread[f"{c}_{r}"]], (case, c, r)
            assert col(page, "gradient-this-draw-source", f"this_draw_{r}") == \
                [st.variants[r].log10_query_gradient], case
        served = figures.SpreadChart()
        served.update(spread, {r: v.log10_query_gradient for r, v in st.variants.items()})
        assert page.evaluate("() => { const r = window.__model('gradient-spread').x_range; "
                             "return [r.start, r.end]; }") == [served.fig.x_range.start,
                                                               served.fig.x_range.end], case
        shown = page.evaluate(TEXT, ["draw-lead", "caption", "explanation", "readout"])
        assert shown.pop(0) == prose.plain(f"<p class='lead'>{prose.fill(DRAW_LEAD, fields)}</p>")
        assert shown[0] == prose.plain(prose.fill(prose.caption_html(export.OFFLINE_NOTE), fields))
        assert shown[1] == prose.plain(prose.fill(prose.EXPLANATION, fields))
        assert shown[2] == prose.plain(prose.fill(figures.readout_html(), fields))
        readout = page.evaluate("() => window.__spans('readout')")
        assert readout["sqrt_max_w"] == weight_label(st.scaled)
        assert readout["none_max_w"] == weight_label(st.unscaled)
        assert readout["__active"] == rule
        outline = page.evaluate("""() => ['scaled-weights', 'unscaled-weights'].map(n => {
            const f = window.__model(n); return [f.outline_line_color, f.title.text]; })""")
        outlined = {"sqrt": [True, False], "none": [False, True], "linear": [True, False]}[rule]
        for (color, title), on in zip(outline, outlined):
            assert (color == MARK) == on and (color is None) != on, case
            assert title.endswith("◀ model uses this") == on, case
        # the left chart's title, bars' colour and second line follow the rule it shows
        left_rule = "linear" if rule == "linear" else "sqrt"
        assert outline[0][1].startswith("Scaled by 1/dₖ" if rule == "linear" else
                                        "Scaled by 1/√dₖ"), case
        fill, line = page.evaluate("""() => { const f = window.__model('scaled-weights');
            return [f.renderers.find((r) => r.name === 'scaled-weights-bars').glyph.fill_color.value,
                    f.above.find((m) => m.name === 'scaled-weights-subtitle').text]; }""")
        assert fill == core.RULE[left_rule].color, case
        assert line == ("logits q·k/dₖ: their spread shrinks as 1/√dₖ" if rule == "linear"
                        else "logits q·k/√dₖ: unit variance at every dₖ"), case
    wait_still(page)
    assert page.console_errors == []
    assert [u for u in page.requests if not u.startswith("file://")] == []


@pytest.mark.browser
def test_resample_button_cycles_the_seeds(offline_page):
    page = offline_page
    seeds = export.seed_list(export.DEFAULT_SEEDS)
    shown = []
    for _ in range(len(seeds) + 1):
        shown.append(page.evaluate("() => window.__model('seed').text"))
        before = col(page, "scaled-weights-source", "weight")
        page.get_by_role("button", name="Resample q and k").click()
        page.wait_for_function(
            "(b) => JSON.stringify(window.__col('scaled-weights-source', 'weight')) !== "
            "JSON.stringify(b)", arg=before, timeout=UI_WAIT_MS)
    assert [s for s in seeds if f"<code>{s}</code>" in shown[0]] == [seeds[0]]
    for i, s in enumerate(seeds):
        assert f"<code>{s}</code>" in shown[i]
    assert shown[-1] == shown[0]                       # wrapped around
    st = core.compute_state(FIG3_D_K, 1.0, seeds[(len(seeds) + 1) % len(seeds)])
    assert col(page, "scaled-weights-source", "weight") == pytest.approx(st.scaled.probs.tolist(), abs=1e-12)
    assert page.console_errors == []
    assert [u for u in page.requests if not u.startswith("file://")] == []


@pytest.mark.browser
def test_title_bar_and_formulas_span_the_page(offline_page):
    """Bokeh's Div shrinks its HTML to fit; the offline copy's title bar and formula line
    span the page as in the served app (export.FULL_WIDTH_CSS)."""
    width = offline_page.evaluate("() => document.documentElement.clientWidth")
    for selector in ("header#header", ".formulas"):
        box = offline_page.locator(selector).first.bounding_box()
        assert box is not None, selector
        share = box["width"] / width
        assert share > (0.95 if selector.startswith("header") else 0.6), (selector, share)



@pytest.mark.browser
def test_every_column_in_the_browser_is_what_charts_update_sets(offline_page):
    """The offline copy's JavaScript against the served page's Python, in Chromium: for 72
    settings every column of every data source, the text fields and the figures' titles and
    outlines are exactly what Charts.update sets for the same state (floats bit for
    bit). Over 20 s: 72 settings, each set in the page and compared column by column
    with the charts built in Python, once, and updated to each setting as a session's are."""
    page = offline_page
    c = figures.Charts()
    for seed in (FIG3_SEED, 1):
        for d_k in (1, 4, 64, 4096):
            for temperature in (0.1, 1.0, 10.0):
                for rule in core.RULES:
                    show(page, seed, d_k, temperature, rule, settle=False)
                    explorer = ExplorerState(d_k=d_k, temperature=temperature, seed=seed,
                                             rule=rule)
                    fields = fields_of(explorer)
                    c.update(explorer.result, rule, fields)
                    case = (seed, d_k, temperature, rule)
                    names = {"columns": {source.name: list(source.data) for source in c.sources},
                             "figures": list(c.figures)}
                    expected = {
                        "columns": {source.name: {column: values.tolist() if isinstance(
                            values, np.ndarray) else values for column, values in
                            source.data.items()} for source in c.sources},
                        "fields": fields,
                        "styling": [[f.title.text, f.outline_line_color, f.outline_line_width]
                                    for f in c.figures.values()]}
                    # every column, field and style as Charts.update sets them (some reach the
                    # page a frame after the others), then each compared
                    page.wait_for_function(f"([w, e]) => ({SAME})(({SHOWN})(w), e)",
                                           arg=[names, expected], timeout=UI_WAIT_MS)
                    shown = page.evaluate(SHOWN, names)
                    for source in c.sources:
                        for column, values in expected["columns"][source.name].items():
                            assert shown["columns"][source.name][column] == values, (case,
                                                                                    column)
                    assert shown["fields"] == fields, case
                    assert shown["styling"] == expected["styling"], case


#: What the offline page shows of ``names``: the data sources' columns, the text fields, and
#: the figures' titles and outlines.
SHOWN = """(names) => {
  const columns = Object.fromEntries(Object.entries(names.columns).map(([n, cols]) =>
    [n, Object.fromEntries(cols.map((k) => [k, window.__col(n, k)]))]));
  const d = window.__model('text-source').data;
  const g = (k) => Array.from(d instanceof Map ? d.get(k) : d[k]);
  const fields = Object.fromEntries(g('field').map((f, i) => [f, g('value')[i]]));
  const styling = names.figures.map((n) => { const f = window.__model(n);
    return [f.title.text, f.outline_line_color, f.outline_line_width]; });
  return {columns, fields, styling}; }"""

#: Whether two JSON values are equal (objects whatever the order of their keys).
SAME = """(a, b) => { const sorted = (k, v) => v && typeof v === 'object' && !Array.isArray(v)
  ? Object.fromEntries(Object.entries(v).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))) : v;
  return JSON.stringify(a, sorted) === JSON.stringify(b, sorted); }"""


@pytest.mark.browser
def test_the_offline_copy_downloads_and_passes_axe(offline_page):
    import csv
    import io
    from pathlib import Path

    from axe_playwright_python.sync_playwright import Axe
    page = offline_page
    show(page, 1, 512, 0.5, "linear")
    with page.expect_download(timeout=UI_WAIT_MS) as info:
        page.get_by_role("button", name="Download CSV").click()
    assert info.value.suggested_filename == "attention-draw-dk512-T0.5-seed1-keys8-linear.csv"
    rows = list(csv.DictReader(io.StringIO(Path(info.value.path()).read_text())))
    st = core.compute_state(512, 0.5, 1)
    assert [float(r["weight_unscaled"]) for r in rows] == st.unscaled.probs.tolist()
    # the left chart's column, ÷d_k's under ÷d_k
    assert [float(r["p_1_minus_p_scaled"]) for r in rows] == \
        st.variants["linear"].diagonal.tolist()
    found = Axe().run(page).response["violations"]
    assert [(v["id"], v["impact"]) for v in found] == []          # of any impact
    assert page.console_errors == []


# ---- the argument's tabs, offline -----------------------------------------------------------

def open_tab(page, title):
    page.locator(".bk-tab", has_text=title).click()


def wait_text(page, name, expected):
    page.wait_for_function(f"(e) => ({TEXT})([{name!r}])[0] === e", arg=expected,
                           timeout=UI_WAIT_MS)


#: The widths of the lines of each rule, as the served page's Argument.highlight sets them.
LINE_WIDTHS = """() => { const out = {};
  for (const n of ['saturation-curves', 'saturation-eff-keys', 'saturation-gradient',
                   'head-budget', 'head-budget-gradient']) {
    out[n] = window.__model(n).renderers.filter((r) => r.glyph.type === 'Line')
      .map((r) => { const w = r.glyph.line_width;       // {value: w} until first set
                    return typeof w === 'object' ? w.value : w; }); }
  return out; }"""


def served_line_widths(rule):
    a = argument.Argument()
    a.shared.highlight(rule)
    return {name: [r.glyph.line_width for r in fig.renderers if type(r.glyph).__name__ == "Line"]
            for name, fig in a.figures.items()
            if name in ("saturation-curves", "saturation-eff-keys", "saturation-gradient",
                        "head-budget", "head-budget-gradient")}


Y_RANGE = "(n) => { const r = window.__model(n).y_range; return [r.start, r.end]; }"

ARGUMENT_CASES = [
    (FIG3_SEED, 64, 1.0, "sqrt"),      # the page as it opens
    (1, 512, 0.5, "linear"),                 # second seed, the 1/d_k rule
    (3, 4096, 10.0, "none"),                 # last seed, widest head, flat
]


@pytest.mark.browser
def test_offline_tabs_show_core_values_and_the_served_page_s_texts(offline_page):
    """Each tab of the argument, for three settings: its sources hold core's numbers at 8
    keys and alignment 0 (exactly), its text is text.py's for that setting, and the lines
    of the rule the model uses are drawn as the served page draws them. Over 20 s: every
    tab at each setting, compared with core's curves and text.py's prose computed
    here."""
    page = offline_page
    for seed, d_k, t, rule in ARGUMENT_CASES:
        case = (seed, d_k, t, rule)
        show(page, seed, d_k, t, rule)
        n, rho = core.N_KEYS, 0.0
        open_tab(page, "1 Variance")
        dist = core.logit_distribution(d_k)
        wait_text(page, "variance-text", prose.plain(
            prose.variance_html(d_k, dist, core.logit_std_curve(), core.LOGIT_DRAWS)
            + prose.scaled_score_example()))
        for r in ("none", "sqrt"):
            edges = np.asarray(dist[f"edges_{r}"])
            assert col(page, "logit-histogram-source", f"top_{r}") == dist[f"counts_{r}"].tolist(), case
            assert col(page, "logit-histogram-source", f"left_{r}") == edges[:-1].tolist(), case
            assert col(page, "logit-histogram-source", f"right_{r}") == edges[1:].tolist(), case
        assert col(page, "logit-width-source", "d_k") == [float(d_k)], case
        assert col(page, "logit-std-source", "std_raw") == core.logit_std_curve()["std_raw"].tolist()

        open_tab(page, "2 Saturation")
        curves = core.saturation_curves(t, n, rho)
        draw = core.draw_metrics(d_k, t, seed, n, rho)
        wait_text(page, "saturation-text", prose.plain(
            prose.saturation_html(d_k, t, n, rho, curves, draw, core.CURVE_DRAWS)
            + prose.softmax_example()))
        for name in ("d_k", *argument.CURVE_COLUMNS):
            assert col(page, "saturation-curves-source", name) == \
                np.asarray(curves[name], float).tolist(), (case, name)
        assert col(page, "saturation-draw-source", "max_weight") == [
            draw[r].max_weight for r in core.RULES], case
        assert col(page, "saturation-draw-source", "eff_keys") == [
            draw[r].effective_keys for r in core.RULES], case
        assert col(page, "saturation-draw-source", "log10_grad_q") == [
            draw[r].log10_query_gradient for r in core.RULES], case
        assert col(page, "saturation-draw-source", "d_k") == [float(d_k)] * 3, case
        served = argument.Argument()            # the axes as the served page fits them
        served.shared.update_curves(curves, d_k, draw)
        rng = served.figures["saturation-gradient"].y_range
        assert page.evaluate(Y_RANGE, "saturation-gradient") == [rng.start, rng.end], case

        open_tab(page, "3 Gradient")
        wait_text(page, "gradient-text", prose.plain(
            prose.gradient_html(d_k, t, n, rho, curves, draw, core.CURVE_DRAWS)))

        open_tab(page, "5 Heads")
        budget = core.head_budget(argument.BUDGET_WIDTH, t, n, rho)
        wait_text(page, "budget-text", prose.plain(
            prose.budget_html(budget, argument.BUDGET_WIDTH, t, n, rho)))
        for name, values in budget.items():
            # grad_q is drawn in log10; the medians' interval ends and standard errors are
            # in the text only
            if not name.startswith("grad_q") and not any(
                    part in name for part in ("_median_lo_", "_median_hi_", "_median_se_")):
                assert col(page, "head-budget-source", name) == \
                    np.asarray(values, float).tolist(), (case, name)
        served.tabs["budget"].draw(Setting(d_k=d_k, rule=rule, temperature=t, seed=0, keys=n,
                                            align=rho))
        rng = served.figures["head-budget-gradient"].y_range
        assert page.evaluate(Y_RANGE, "head-budget-gradient") == [rng.start, rng.end], case
        assert page.evaluate(LINE_WIDTHS) == served_line_widths(rule), case
        open_tab(page, "One draw")
    # Reset to Fig. 3, from a tab: the reference setting on the one-draw tab
    open_tab(page, "2 Saturation")
    page.get_by_role("button", name="Reset to the reference draw").click()
    page.wait_for_function("() => window.__model('sections').active === 0", timeout=UI_WAIT_MS)
    st = core.compute_state(FIG3_D_K, 1.0, FIG3_SEED)
    page.wait_for_function("(w) => JSON.stringify(window.__col('scaled-weights-source', "
                           "'weight')) === JSON.stringify(w)", arg=st.scaled.probs.tolist(),
                           timeout=UI_WAIT_MS)
    assert page.console_errors == []
    assert [u for u in page.requests if not u.startswith("file://")] == []


TRAINING_RANGES = """() => ['training-loss', 'training-gradients', 'training-lr-sweep'].map((n) => {
  const f = window.__model(n); return [f.x_range.start, f.x_range.end, f.y_range.start,
                                       f.y_range.end]; })"""


SWEEP_TITLE = "() => window.__model('training-lr-sweep').title.text"


@pytest.mark.browser
def test_train_shows_core_s_run_where_the_copy_holds_one_and_says_so_elsewhere(offline_page):
    """The copy's Train shows core's runs and sweep at its first seed and says elsewhere that
    it holds none. Over 20 s: core's runs (three rules, one seed at a time too) and sweep at
    two widths, computed here at full length to compare with what the copy holds."""
    page = offline_page
    open_tab(page, "4 Training")
    status = "() => window.__model('training-status').text"
    seeds = export.seed_list(export.DEFAULT_SEEDS)
    assert page.evaluate(status) == export.OFFLINE_TRAINING.format(seed=seeds[0])
    page.get_by_text("Train runs every rule 300 steps").wait_for()
    for d_k in (16, 64):
        show(page, seeds[0], d_k, 1.0, "sqrt")
        page.get_by_role("button", name="Train").click()
        runs = {r: core.train_seeds(d_k, r, seeds[0], temperature=1.0,
                                    steps=argument.TRAINING_STEPS) for r in core.RULES}
        sweep = core.start_sweep(d_k, 1.0, seeds[0], steps=argument.TRAINING_STEPS)
        swept = sweep.run()
        wait_text(page, "training-text", prose.plain(prose.training_html(runs, d_k, 1.0, 8)
                                                     + prose.training_sweep_html(swept, d_k)))
        assert page.evaluate("() => window.__model('training-lead').text") == (
            f"<p class='lead'>{training_lead(runs, swept)}</p>")
        assert col(page, "training-source", "step") == list(range(argument.TRAINING_STEPS + 1))
        for r in core.RULES:       # core's runs one seed at a time, at the rule's rate
            one = [core.train(d_k, r, seeds[0] + i, temperature=1.0,
                              steps=argument.TRAINING_STEPS, lr=core.rule_learning_rate(r, d_k))
                   for i in range(core.TRAIN_SEEDS)]
            for metric, qs in argument.TRAINING_COLUMNS:
                by_step = np.array([getattr(run, metric) for run in one])
                for q in qs:
                    want = {"median": np.median(by_step, axis=0), "min": by_step.min(axis=0),
                            "max": by_step.max(axis=0)}[q].tolist()
                    got = col(page, "training-source", f"{metric}_{q}_{r}")
                    assert got == want, (d_k, r, q)
        assert page.evaluate(status) == prose.training_status_html(
            argument.TRAINING_STEPS, argument.TRAINING_STEPS, d_k, 1.0, 8, True, sweep)
        # the learning-rate sweep: each point the median of core's runs at its rate
        for r in core.RULES:
            rates = [x for x in col(page, "training-lr-sweep-source", f"lr_{r}") if x == x]
            medians = col(page, "training-lr-sweep-source", f"final_median_{r}")[:len(rates)]
            assert rates == swept[r].rates.tolist() and medians == swept[r].median.tolist()
            top = len(rates) - 1
            assert medians[top] == np.median([
                core.train(d_k, r, seeds[0] + i, lr=rates[top]).final_loss for i in range(3)])
        assert page.evaluate(SWEEP_TITLE) == argument.SWEEP_TITLE
        # the axes as the served page sets them for this run
        a = argument.Argument()
        a.tabs["training"].sweep_rows = max(
            len(s.result()[r].rates) for s in export.sweeps(seeds[0]).values() for r in core.RULES)
        a.tabs["training"].show(runs, d_k, 1.0, 8, sweep)
        assert page.evaluate(TRAINING_RANGES) == [
            [f.x_range.start, f.x_range.end, f.y_range.start, f.y_range.end]
            for f in a.tabs["training"].figures.values()]
    # its CSV is named after the run's own setting, as on the served page
    with page.expect_download(timeout=UI_WAIT_MS) as info:
        page.get_by_role("button", name="Download CSV").click()
    assert info.value.suggested_filename == f"attention-training-dk64-T1-seed{seeds[0]}-keys8.csv"
    show(page, seeds[0], 32, 1.0, "sqrt")        # a width it holds no sweep at
    page.get_by_role("button", name="Train").click()
    page.wait_for_function(f"() => ({SWEEP_TITLE})() === {export.OFFLINE_NO_SWEEP_TITLE!r}",
                           timeout=UI_WAIT_MS)
    assert col(page, "training-lr-sweep-source", "lr_sqrt") == []
    assert page.evaluate(status).endswith(
        " This offline copy holds the learning-rate sweep at d<sub>k</sub> = 16, 64, 256 and "
        "1024 only; the served explorer sweeps at any setting.</span>")
    for seed, t in ((seeds[0], 0.5), (seeds[1], 1.0)):       # settings it holds no run of
        show(page, seed, 64, t, "sqrt")
        assert col(page, "training-source", "loss_median_none") != []
        page.get_by_role("button", name="Train").click()
        page.wait_for_function(f"() => ({status})().startsWith(\"<span class='status' role='status'>No run\")",
                               timeout=UI_WAIT_MS)
        assert page.evaluate(status) == export.OFFLINE_NO_RUN.format(seed=seeds[0])
        # the charts and texts show no run either: the tab as before its first run
        assert col(page, "training-source", "loss_median_none") == []
        assert col(page, "training-lr-sweep-source", "lr_sqrt") == []
        assert page.evaluate(SWEEP_TITLE) == argument.SWEEP_TITLE
        assert page.evaluate("() => window.__model('training-lead').text") == (
            f"<p class='lead'>{TRAINING_LEAD}</p>")
        wait_text(page, "training-text", prose.plain(prose.TRAINING_INTRO))
        show(page, seeds[0], 64, 1.0, "sqrt")                 # where it holds one, again
        page.get_by_role("button", name="Train").click()
        wait_text(page, "training-text", prose.plain(prose.training_html(runs, 64, 1.0, 8)
                                                     + prose.training_sweep_html(swept, 64)))
    assert page.console_errors == []


@pytest.mark.browser
@pytest.mark.parametrize("width, scheme", [(375, "light"), (1440, "dark")])
def test_the_offline_tabs_fit_the_screen_and_pass_axe(browser, exported, width, scheme):
    """Every tab of the offline copy at a phone's and a desktop's width, in a light and a
    dark system theme: drawn, nothing scrolls sideways, and axe-core finds no violation of
    any impact with it open. Over 20 s: the copy (every state of its grid) opened, and
    axe-core over the whole page on each of five tabs."""
    from axe_playwright_python.sync_playwright import Axe

    out, _ = exported
    with page_of_its_own(browser, width, 900, scheme) as page:
        page.goto(out.resolve().as_uri())
        page.wait_for_function("() => window.__model('sections') !== null", timeout=UI_WAIT_MS)
        for title, name in (("1 Variance", "logit-std"), ("2 Saturation", "saturation-curves"),
                            ("3 Gradient", "saturation-gradient"),
                            ("4 Training", "training-loss"), ("5 Heads", "head-budget")):
            open_tab(page, title)
            page.wait_for_function(
                "(n) => { const m = window.__model(n); const v = m && window.__AS.view(m);"
                " return v && v.bbox.width > 200 && v.bbox.height > 150; }", arg=name,
                timeout=UI_WAIT_MS)
            if title == "4 Training":
                page.get_by_role("button", name="Train").click()
                page.get_by_text("300 steps of plain SGD").wait_for(state="attached")
            wait_still(page, name)
            assert page.evaluate(
                "() => document.documentElement.scrollWidth - window.innerWidth") <= 0, title
            found = Axe().run(page).response["violations"]
            assert [(v["id"], v["impact"]) for v in found] == [], title
        assert page.console_errors == []


@pytest.mark.browser
def test_the_offline_copy_reads_and_writes_its_address(browser, exported):
    """assets/js/offline-address.js: the offline copy opens at the controls its address names
    (read as state.parse_query reads them: d_k=300 is the nearest width, 256; a temperature
    of -1 and a seed it holds no draw of are ignored), writes them back as the served page
    does, and the address follows a control moved with the keyboard."""
    from urllib.parse import parse_qs, urlparse

    out, _ = exported
    seeds = export.seed_list(export.DEFAULT_SEEDS)
    with page_of_its_own(browser, 1440, 1000) as page:
        def address():
            return {k: v[-1] for k, v in parse_qs(urlparse(page.url).query).items()}

        def shows(d_k, temperature, seed):
            state = core.compute_state(d_k, temperature, seed)
            page.wait_for_function(
                "([s, u]) => JSON.stringify(window.__col('scaled-weights-source', 'weight')) "
                "=== JSON.stringify(s) && JSON.stringify(window.__col("
                "'unscaled-weights-source', 'weight')) === JSON.stringify(u)",
                arg=[state.scaled.probs.tolist(), state.unscaled.probs.tolist()],
                timeout=UI_WAIT_MS)

        page.goto(out.resolve().as_uri() + f"?d_k=300&temperature=2&seed={seeds[1]}"
                  "&rule=none&tab=saturation&embed=1")
        shows(256, 2.0, seeds[1])
        page.wait_for_function("() => window.location.search.includes('tab=')", timeout=UI_WAIT_MS)
        assert address() == {"d_k": "256", "rule": "none", "temperature": "2",
                             "seed": str(seeds[1]), "tab": "saturation", "embed": "1"}
        assert page.locator(".bk-tab.bk-active").inner_text() == "2 Saturation"
        assert page.evaluate("() => window.__model('rule').active") == core.RULES.index("none")
        page.locator(".noUi-handle").first.focus()
        page.keyboard.press("ArrowRight")                      # 256 -> 384
        page.wait_for_function("() => window.location.search.includes('d_k=384')",
                               timeout=UI_WAIT_MS)
        shows(384, 2.0, seeds[1])
        assert address()["seed"] == str(seeds[1]) and address()["tab"] == "saturation"
        # what the copy cannot show is ignored: its defaults, and the address says so
        page.goto(out.resolve().as_uri() + "?d_k=abc&temperature=-1&seed=999&tab=nowhere")
        shows(64, 1.0, seeds[0])
        page.wait_for_function("() => window.location.search.includes('d_k=64')",
                               timeout=UI_WAIT_MS)
        assert address() == {"d_k": "64", "rule": "sqrt", "temperature": "1",
                             "seed": str(seeds[0]), "tab": "draw"}
        assert page.console_errors == []
