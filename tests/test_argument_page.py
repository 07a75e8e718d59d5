"""The argument's tabs in the served page, in Chromium: each view drawn with core's numbers,
following the controls, and a training run that grows while it runs and ends as core's."""

import numpy as np
import pytest
from conftest import TRAINING_WAIT_MS, UI_WAIT_MS, column, open_app, open_at, wait_column

from attention_scaling import argument, core
from attention_scaling.prose.lead import training_lead
from attention_scaling.argument import BUDGET_WIDTH, TRAINING_STEPS

pytestmark = pytest.mark.browser

TABS = {"1 Variance": ["logit-histogram", "logit-histogram-scaled", "logit-std"],
        "2 Saturation": ["saturation-curves", "saturation-eff-keys"],
        "3 Gradient": ["gradient-frozen-share", "saturation-gradient"],
        "4 Training": ["training-loss", "training-gradients"],
        "5 Heads": ["head-budget", "head-budget-gradient"]}

DRAWN = """(n) => { for (const d of Bokeh.documents) { const m = d.get_model_by_name(n);
  if (m) { const v = window.__AS.view(m); return v ? [v.bbox.width, v.bbox.height] : null; } }
  return null; }"""


def show_tab(page, title):
    page.locator(".bk-tab", has_text=title).click()


def slider_handle(page, title_start):
    """The handle of the slider whose title begins with ``title_start``."""
    return page.locator(".bk-Slider", has_text=title_start).locator(".noUi-handle")


def test_each_tab_draws_its_plots_with_cores_numbers(page, server):
    open_app(page, server)
    for title, plots in TABS.items():
        show_tab(page, title)
        for name in plots:
            page.wait_for_function(f"() => {{ const s = ({DRAWN})({name!r}); "
                                   "return s && s[0] > 200 && s[1] > 150; }", timeout=UI_WAIT_MS)
    curves = core.saturation_curves(1.0, core.N_KEYS, 0.0)
    assert column(page, "saturation-curves-source", "d_k") == list(map(float, core.D_K_VALUES))
    for rule in core.RULES:
        for metric in ("max_weight_median", "max_weight_q25", "max_weight_q75",
                       "eff_keys_median", "log10_grad_q_median", "frozen_share"):
            col = f"{metric}_{rule}"
            assert column(page, "saturation-curves-source", col) == pytest.approx(
                list(curves[col]), rel=1e-12)
    budget = core.head_budget(BUDGET_WIDTH, 1.0, core.N_KEYS, 0.0)
    for rule in core.RULES:
        assert column(page, "head-budget-source", f"max_weight_median_{rule}") == \
            pytest.approx(list(budget[f"max_weight_median_{rule}"]), rel=1e-12)
    assert page.get_by_text("A model width of 512 split into h heads").count() == 1
    assert page.console_errors == []


def test_the_visible_tab_follows_the_controls(page, server):
    open_app(page, server)
    show_tab(page, "1 Variance")
    wait_column(page, "logit-histogram-source", "top_none",
                core.logit_distribution(64)["counts_none"], rel=1e-9)
    handle = slider_handle(page, "Head width")
    handle.focus()
    page.keyboard.press("ArrowRight")                  # d_k 64 -> 80
    wait_column(page, "logit-histogram-source", "top_none",
                core.logit_distribution(80)["counts_none"], rel=1e-9)
    assert column(page, "logit-width-source", "d_k") == [80.0]
    show_tab(page, "2 Saturation")
    draw = core.draw_metrics(80, 1.0, 2288)
    wait_column(page, "saturation-draw-source", "max_weight",
                [draw[r].max_weight for r in core.RULES], rel=1e-9)
    assert column(page, "saturation-draw-source", "d_k") == [80.0] * 3
    # keys 8 -> 12 and alignment 0 -> 0.1: new curves, and the dots of that draw
    keys = slider_handle(page, "Number of keys")
    keys.focus()
    page.keyboard.press("ArrowRight")
    align = slider_handle(page, "Trained alignment")
    align.focus()
    page.keyboard.press("ArrowRight")
    curves = core.saturation_curves(1.0, 12, 0.1)
    wait_column(page, "saturation-curves-source", "max_weight_median_sqrt",
                curves["max_weight_median_sqrt"], rel=1e-9)
    draw = core.draw_metrics(80, 1.0, 2288, 12, 0.1)
    wait_column(page, "saturation-draw-source", "max_weight",
                [draw[r].max_weight for r in core.RULES], rel=1e-9)
    # the address follows the charts on a later message
    page.wait_for_url(lambda url: "keys=12" in url and "align=0.1" in url)
    page.get_by_text("12 keys, the first aligned with the query by ρ = 0.1").first.wait_for(
        state="attached")     # under "More detail", closed
    assert page.console_errors == []


LINE_WIDTHS = """(n) => { for (const d of Bokeh.documents) { const m = d.get_model_by_name(n);
  if (m) return m.renderers.filter((r) => r.glyph.type === 'Line').map((r) => {
    const w = r.glyph.line_width; return typeof w === 'object' ? w.value : w; }); } }"""


def test_the_rule_the_model_uses_is_highlighted_on_the_open_tab(page, server):
    """Changing the rule on an argument tab redraws its lines: the rule's thick, as
    Argument.highlight draws them (the setting of the curves is the same)."""
    open_app(page, server)
    show_tab(page, "2 Saturation")
    for label, rule in (("unscaled", "none"), ("÷dₖ", "linear")):
        page.get_by_role("button", name=label, exact=True).click()
        a = argument.Argument()
        a.shared.highlight(rule)
        want = [r.glyph.line_width for r in a.shared.curve_figs["saturation-curves"].renderers
                if type(r.glyph).__name__ == "Line"]
        page.wait_for_function(f"(w) => JSON.stringify(({LINE_WIDTHS})('saturation-curves')) "
                               "=== JSON.stringify(w)", arg=want, timeout=UI_WAIT_MS)
    assert page.console_errors == []


#: A seed no other test trains at or computes runs for: the run this test watches grow is
#: computed from its first step on this test's click.
UNTRAINED_SEED = 97531


def test_training_grows_while_it_runs(page, server):
    """A run at a setting nobody has trained at shows its curves growing before it ends: the
    page itself records the length of the curves at every change of their data (a test that
    looked from outside could come too late on a busy machine and see only the end)."""
    open_at(page, server, f"?seed={UNTRAINED_SEED}")
    show_tab(page, "4 Training")
    page.wait_for_function("() => Bokeh.documents[0].get_model_by_name('training-source')",
                           timeout=UI_WAIT_MS)
    page.evaluate("""() => { const src = Bokeh.documents[0].get_model_by_name('training-source');
      window.__lengths = [];
      const note = () => window.__lengths.push((window.__col('training-source', 'step') || [])
                                               .length);
      src.change.connect(note); src.streaming.connect(note); src.patching.connect(note); }""")
    page.get_by_role("button", name="Train").click()
    page.wait_for_function(
        f"() => (window.__col('training-source', 'step') || []).length === {TRAINING_STEPS + 1}",
        timeout=TRAINING_WAIT_MS)
    lengths = page.evaluate("() => window.__lengths")
    assert any(1 < n < TRAINING_STEPS + 1 for n in lengths), lengths    # progress shown
    assert lengths[-1] == TRAINING_STEPS + 1
    assert page.console_errors == []


def test_training_ends_as_cores_run(page, server):
    open_app(page, server)
    show_tab(page, "4 Training")
    page.get_by_role("button", name="Train").click()
    page.wait_for_function(
        f"() => (window.__col('training-source', 'step') || []).length === {TRAINING_STEPS + 1}",
        timeout=TRAINING_WAIT_MS)
    seeded = {}
    for rule in core.RULES:    # core's runs from seeds 2288, 2289, 2290 at each rule's rate
        runs = [core.train(64, rule, 2288 + i, temperature=1.0, steps=TRAINING_STEPS,
                           lr=core.rule_learning_rate(rule, 64)) for i in range(3)]
        for metric, qs in (("loss", ("median", "min", "max")), ("log10_grad_wq", ("median",))):
            by_step = np.array([getattr(run, metric) for run in runs])
            for q, values in ((q, {"median": np.median(by_step, axis=0),
                                   "min": by_step.min(axis=0), "max": by_step.max(axis=0)}[q])
                              for q in qs):
                assert column(page, "training-source", f"{metric}_{q}_{rule}") == \
                    pytest.approx(values.tolist(), rel=1e-12), (metric, q, rule)
        seeded[rule] = core.train_seeds(64, rule, 2288)
    page.get_by_text("300 steps of plain SGD").wait_for(state="attached")   # in More detail
    lead = page.evaluate("() => { for (const d of Bokeh.documents) { const m = "
                         "d.get_model_by_name('training-lead'); if (m) return m.text; } }")
    # the runs' lead, or, once the learning-rate sweep that follows them has ended, the
    # sweep's best rates first
    sweep = core.learning_rate_sweep(64, 1.0, 2288)
    assert lead in (f"<p class='lead'>{training_lead(seeded)}</p>",
                    f"<p class='lead'>{training_lead(seeded, sweep)}</p>")
    assert "0.128, " in lead and "0.013, " in lead and "0.0115" in lead
    assert page.get_by_role("button", name="Train").is_enabled()
    assert page.console_errors == []


def test_a_preset_is_a_link_to_its_view(page, server):
    open_app(page, server)
    page.get_by_role("link", name="Trained keys (ρ = 0.5): ÷√dₖ sharpens as heads widen").click()
    page.wait_for_url(lambda url: "align=0.5" in url and "tab=saturation" in url)
    curves = core.saturation_curves(1.0, 8, 0.5)
    wait_column(page, "saturation-curves-source", "max_weight_median_sqrt",
                curves["max_weight_median_sqrt"], rel=1e-9)
    active = page.locator(".bk-tab.bk-active").inner_text()
    assert active == "2 Saturation"
    page.get_by_text("softmax([1, 5, 10]) = [0.000, 0.007, 0.993]").wait_for(state="attached")
    assert page.console_errors == []


def test_the_temperature_link_shows_the_unscaled_bars_on_the_scaled_chart(page, server):
    open_app(page, server)
    unscaled_at_one = column(page, "unscaled-weights-source", "weight")
    page.get_by_role("link", name="÷√dₖ at T = 1/√64 = 0.125: the same bars").click()
    page.wait_for_url("**temperature=0.125**")
    wait_column(page, "scaled-weights-source", "weight", unscaled_at_one, rel=0)
    assert unscaled_at_one == core.compute_state(64, 1.0, 2288).unscaled.probs.tolist()
    page.get_by_text("At T = 1/√64 the scaled chart is the unscaled chart at T = 1").wait_for(state="attached")
    page.get_by_role("link", name="Unscaled at dₖ = 64, T = 1").click()
    # a preset sets its controls one after another: the address ends with all of them
    page.wait_for_url(lambda url: "rule=none" in url and "temperature=1&" in url)
