"""`attention-scaling export`: one self-contained HTML file, exact core values, offline."""

from __future__ import annotations

import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from attention_scaling import charts, core, export
from attention_scaling import text as prose
from attention_scaling.state import ExplorerState
from attention_scaling.text import weight_label

CLI = str(Path(sys.executable).with_name("attention-scaling"))


def run(*args):
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "explorer.html"
    r = run("export", str(out))
    assert r.returncode == 0, r.stderr
    return out, r.stdout


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
    assert 0 < size <= 5_000_000
    n_states = len(core.D_K_VALUES) * len(core.TEMPERATURES) * export.DEFAULT_SEEDS
    assert f"{n_states} states" in stdout and "MB" in stdout and " s" in stdout
    text = out.read_text(encoding="utf-8")
    parser = _Attrs()
    parser.feed(text)
    assert "script" in parser.tags
    assert "link" not in parser.tags          # no external style sheets
    for link in parser.links:
        assert not link.strip().lower().startswith(("http://", "https://", "//")), link
    assert not [link for link in parser.links if link.strip()], parser.links
    assert "Why attention divides by √d_k" in text


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

INIT = """window.__model = (name) => {
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
  const view = Bokeh.index.find_one(window.__model(name)); const out = {};
  if (!view) return null;
  for (const el of view.shadow_el.querySelectorAll('[data-k]')) out[el.dataset.k] = el.textContent;
  const t = view.shadow_el.querySelector('[data-active]');
  if (t) out.__active = t.dataset.active;
  return out;
};"""


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
                         timeout=30_000)
    pg.requests, pg.console_errors = requests, errors
    yield pg
    context.close()


#: The text each named Div shows (its textContent), as a list.
TEXT = """(names) => names.map((n) => {
  const view = Bokeh.index.find_one(window.__model(n));
  return view ? view.markup_el.textContent : null; })"""

SET = """([dk, t, s, rule]) => {
  const m = window.__model;
  m('d_k').value = dk; m('temperature').value = t; m('seed-index').value = s;
  m('rule').active = rule;
}"""


def show(page, seed, d_k, temperature, rule):
    seeds = export.seed_list(export.DEFAULT_SEEDS)
    page.evaluate(SET, [core.D_K_VALUES.index(d_k), core.TEMPERATURES.index(temperature),
                        seeds.index(seed), core.RULES.index(rule)])
    page.wait_for_function(
        "([d, s]) => JSON.stringify(window.__col('jacobian-diagonal-marker', 'width')) === "
        "JSON.stringify([d]) && window.__spans('explanation').d === d"
        " && window.__model('seed').text.includes('<code>' + s + '</code>')",
        arg=[str(d_k), str(seed)], timeout=10_000)
    page.wait_for_timeout(100)


def col(page, name, column):
    return page.evaluate("([n, c]) => window.__col(n, c)", [name, column])


CASES = [
    (prose.FIG3_SEED, 64, 1.0, "sqrt"),      # default: Fig. 3
    (prose.FIG3_SEED, 4096, 1.0, "none"),    # wide head, unscaled
    (prose.FIG3_SEED, 16, 0.1, "sqrt"),      # sharp
    (1, 256, 10.0, "none"),                  # flat, second seed
    (3, 1, 1.0, "sqrt"),                     # last seed, narrowest head
    (2, 512, 0.5, "linear"),                 # the 1/d_k rule
]


@pytest.mark.browser
def test_offline_page_shows_core_values_exactly(offline_page):
    page = offline_page
    assert "√d_k" in page.title()
    for seed, d_k, temperature, rule in CASES:
        show(page, seed, d_k, temperature, rule)
        st = core.compute_state(d_k, temperature, seed)
        act = st.active(rule)
        case = (seed, d_k, temperature, rule)
        for name, v in (("scaled-weights", st.scaled), ("unscaled-weights", st.unscaled)):
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
        fields = ExplorerState(d_k=d_k, temperature=temperature, seed=seed,
                               rule=rule).text_fields()
        shown = page.evaluate(TEXT, ["caption", "explanation", "readout"])
        assert shown[0] == prose.plain(prose.fill(prose.caption_html(export.OFFLINE_NOTE), fields))
        assert shown[1] == prose.plain(prose.fill(prose.EXPLANATION, fields))
        assert shown[2] == prose.plain(prose.fill(charts.READOUT, fields))
        readout = page.evaluate("() => window.__spans('readout')")
        assert readout["s_max_w"] == weight_label(st.scaled)
        assert readout["u_max_w"] == weight_label(st.unscaled)
        assert readout["__active"] == prose.WHICH[rule]
        outline = page.evaluate("""() => ['scaled-weights', 'unscaled-weights'].map(n => {
            const f = window.__model(n); return [f.outline_line_color, f.title.text]; })""")
        outlined = {"sqrt": [True, False], "none": [False, True], "linear": [False, False]}[rule]
        for (color, title), on in zip(outline, outlined):
            assert (color == "#1f2933") == on and (color is None) != on, case
            assert title.endswith("◀ model uses this") == on, case
    page.wait_for_timeout(300)
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
            "JSON.stringify(b)", arg=before, timeout=10_000)
    assert [s for s in seeds if f"<code>{s}</code>" in shown[0]] == [seeds[0]]
    for i, s in enumerate(seeds):
        assert f"<code>{s}</code>" in shown[i]
    assert shown[-1] == shown[0]                       # wrapped around
    st = core.compute_state(prose.FIG3_D_K, 1.0, seeds[(len(seeds) + 1) % len(seeds)])
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
    outlines are exactly what Charts.update sets for the same state (floats bit for bit)."""
    page = offline_page
    for seed in (prose.FIG3_SEED, 1):
        for d_k in (1, 4, 64, 4096):
            for temperature in (0.1, 1.0, 10.0):
                for rule in core.RULES:
                    show(page, seed, d_k, temperature, rule)
                    c = charts.Charts()
                    explorer = ExplorerState(d_k=d_k, temperature=temperature, seed=seed,
                                             rule=rule)
                    fields = explorer.text_fields()
                    c.update(explorer.result, rule, fields)
                    case = (seed, d_k, temperature, rule)
                    for source in c.sources:
                        for column, values in source.data.items():
                            if isinstance(values, np.ndarray):
                                values = values.tolist()
                            assert col(page, source.name, column) == values, (case, column)
                    shown = page.evaluate("""() => { const d = window.__model('text-source').data;
                        const g = (k) => Array.from(d instanceof Map ? d.get(k) : d[k]);
                        return Object.fromEntries(g('field').map((f, i) => [f, g('value')[i]])); }""")
                    assert shown == fields, case
                    styling = page.evaluate("""(names) => names.map((n) => {
                        const f = window.__model(n);
                        return [f.title.text, f.outline_line_color, f.outline_line_width]; })""",
                                            list(c.figures))
                    assert styling == [[f.title.text, f.outline_line_color, f.outline_line_width]
                                       for f in c.figures.values()], case


@pytest.mark.browser
def test_the_offline_copy_downloads_and_passes_axe(offline_page):
    import csv
    import io
    from pathlib import Path

    from axe_playwright_python.sync_playwright import Axe
    page = offline_page
    show(page, 1, 512, 0.5, "linear")
    with page.expect_download() as info:
        page.get_by_role("button", name="Download CSV").click()
    assert info.value.suggested_filename == "attention-draw-dk512-T0.5-seed1-keys8-linear.csv"
    rows = list(csv.DictReader(io.StringIO(Path(info.value.path()).read_text())))
    st = core.compute_state(512, 0.5, 1)
    assert [float(r["weight_unscaled"]) for r in rows] == st.unscaled.probs.tolist()
    assert [float(r["p_1_minus_p_scaled"]) for r in rows] == st.scaled.diagonal.tolist()
    found = Axe().run(page).response["violations"]
    assert [(v["id"], v["impact"]) for v in found if v["impact"] in ("serious", "critical")] == []
    assert page.console_errors == []
