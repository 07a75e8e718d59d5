"""The one draw with a key aligned with the query (the alignment control rho): core's draw
against its definition, the Monte Carlo behind the caption against the curves' independent
one, the sentences against explicit draws, and the served page following the control."""

import math

import numpy as np
import pytest
from conftest import column, open_at, wait_column

from attention_scaling import core
from attention_scaling.state import ExplorerState
from attention_scaling.prose.formatting import percent_range
from attention_scaling.prose.text import EXPLANATION, caption_html, fields_of, fill, plain


@pytest.mark.parametrize("rho", [0.3, 1.0])
def test_the_first_key_is_rho_q_plus_the_rest_of_the_unaligned_key(rho):
    q, k = core.sample_qk(7, 256, 8)
    qa, ka = core.sample_qk(7, 256, 8, rho)
    assert np.array_equal(q, qa) and np.array_equal(k[1:], ka[1:])
    assert np.allclose(ka[0], rho * q + math.sqrt(1 - rho * rho) * k[0], rtol=0, atol=1e-15)
    s = core.compute_state(256, 1.0, 7, 8, rho)
    assert s.raw_logits[0] == pytest.approx(float(ka[0] @ qa), rel=1e-12)
    assert s.scaled.logits[0] == pytest.approx(float(ka[0] @ qa) / 16, rel=1e-12)
    if rho == 1.0:
        assert s.raw_logits[0] == pytest.approx(float(q @ q), rel=1e-12)     # k1 = q
    # nested across widths, as without alignment
    narrow = core.compute_state(64, 1.0, 7, 8, rho)
    assert narrow.raw_logits[0] == pytest.approx(float(ka[0, :64] @ qa[:64]), rel=1e-12)


def test_no_alignment_is_the_reference_draw():
    s = core.compute_state(64, 1.0, 2288, 8, 0.0)
    assert s is core.compute_state(64, 1.0, 2288)
    assert round(100 * s.scaled.max_weight) == 27 and round(100 * s.unscaled.max_weight) == 80


@pytest.mark.parametrize("d_k,t,rho", [(64, 1.0, 0.5), (16, 1.0, 0.3), (512, 2.5, 0.2)])
def test_the_captions_monte_carlo_agrees_with_the_curves_own(d_k, t, rho):
    """Two Monte Carlos from different draws (20,000 gaps and 2,000 Bartlett draws)."""
    typ = core.typical(d_k, t, 8, rho)
    curves = core.saturation_curves(t, 8, rho)
    i = core.D_K_VALUES.index(d_k)
    assert typ.median[True] == pytest.approx(curves["max_weight_median_sqrt"][i], abs=0.03)
    assert typ.median[False] == pytest.approx(curves["max_weight_median_none"][i], abs=0.03)


def test_the_aligned_sentences_hold_over_explicit_draws():
    d_k, rho = 256, 0.5
    f = fields_of(ExplorerState(d_k=d_k, align=rho))
    text = plain(fill(EXPLANATION, f)) + plain(fill(caption_html(), f))
    s = core.compute_state(d_k, 1.0, ExplorerState().seed, 8, rho)
    assert f"its logit is {s.raw_logits[0]:.3g} raw" in text
    assert "average of ρ·dₖ = 128 raw and ρ√dₖ = 8 scaled" in text
    assert "only ÷dₖ keeps its average fixed, at ρ" in text
    assert ", with k1 aligned at ρ = 0.5, the median" in text
    # the averages the text states, against q . k1 over explicit vectors
    rng = np.random.default_rng(5)
    q = rng.standard_normal((4000, d_k))
    k1 = rho * q + math.sqrt(1 - rho * rho) * rng.standard_normal((4000, d_k))
    dots = (q * k1).sum(axis=1)
    assert dots.mean() == pytest.approx(rho * d_k, rel=0.02)
    assert (dots / d_k).mean() == pytest.approx(rho, rel=0.02)
    typ = core.typical(d_k, 1.0, 8, rho)        # the median to the digits its draws support
    assert f"{percent_range(*typ.median_range[True])} ÷√dk" in text
    assert typ.median_range[True][0] <= typ.median[True] <= typ.median_range[True][1]
    # with no alignment none of it is said
    plain_text = plain(fill(EXPLANATION, fields_of(ExplorerState(d_k=d_k))))
    assert "aligned" not in plain_text


@pytest.mark.browser
def test_the_one_draw_follows_the_alignment_control(page, server):
    open_at(page, server, "?align=1&d_k=64")
    q, k = core.sample_qk(2288, 64, 8, 1.0)
    wait_column(page, "scaled-weights-source", "logit",
                core.compute_state(64, 1.0, 2288, 8, 1.0).scaled.logits.tolist())
    assert column(page, "scaled-weights-source", "logit")[0] == pytest.approx(float(q @ q) / 8)
    page.get_by_text("k1 among them aligned with the query (ρ = 1)").first.wait_for(state="attached")
    handle = page.locator(".bk-Slider", has_text="Trained alignment").locator(".noUi-handle")
    handle.focus()
    page.keyboard.press("Home")                                         # rho 1 -> 0
    wait_column(page, "scaled-weights-source", "logit",
                core.compute_state(64, 1.0, 2288).scaled.logits.tolist())
    page.wait_for_function("() => location.search.includes('align=0')")
    assert page.get_by_text("k1 among them aligned").count() == 0
    assert page.console_errors == []
