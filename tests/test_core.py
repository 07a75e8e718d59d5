"""core.py against independent truth: exact values, finite differences, statistics."""

import math
import warnings

import numpy as np
import pytest

from attention_scaling import core
from attention_scaling.prose.formatting import percent


def test_softmax_exact_reference_values():
    p = core.softmax([1.0, 5.0, 10.0])
    # exp(z) / sum(exp(z)), computed here independently
    e = np.array([math.exp(1), math.exp(5), math.exp(10)])
    np.testing.assert_allclose(p, e / e.sum(), rtol=1e-12)
    np.testing.assert_allclose(np.round(p, 6), [0.000123, 0.006692, 0.993185])


def test_softmax_rows_sum_to_one_and_last_axis():
    z = np.random.default_rng(0).normal(size=(5, 7)) * 30
    p = core.softmax(z, temperature=0.7)
    np.testing.assert_allclose(p.sum(axis=-1), 1.0, rtol=1e-12)
    for row, prow in zip(z, p):
        np.testing.assert_allclose(prow, core.softmax(row, 0.7), rtol=1e-12)


def test_softmax_invariant_to_adding_a_constant():
    z = np.array([0.3, -1.2, 2.5, 0.0])
    for c in (-1000.0, -3.0, 7.5, 1e5):
        np.testing.assert_allclose(core.softmax(z + c), core.softmax(z), rtol=1e-9, atol=1e-15)


def test_temperature_divides_the_logits():
    z = np.array([0.5, 1.5, -2.0])
    np.testing.assert_allclose(core.softmax(z, 2.5), core.softmax(z / 2.5), rtol=1e-12)


@pytest.mark.parametrize("logits,temperature", [
    ([1e6, -1e6, 0.0, 5e5], 1.0),
    ([-1e6, -1e6 + 1, -1e6 + 2], 1e-3),
    ([3.0, 2.0, 1.0], 1e-3),
])
def test_extremes_are_finite_one_hot_and_silent(logits, temperature):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = core.softmax(logits, temperature)
    assert np.all(np.isfinite(p))
    assert p.sum() == pytest.approx(1.0)
    assert p.max() == pytest.approx(1.0, abs=1e-12)
    assert int(np.argmax(p)) == int(np.argmax(logits))


@pytest.mark.parametrize("t", [0, -1, -0.5, float("nan"), float("inf"), "abc", None])
def test_bad_temperature_is_a_clear_error(t):
    with pytest.raises(ValueError, match="temperature must be a positive finite number"):
        core.softmax([1.0, 2.0], t)


@pytest.mark.parametrize("z", [[1.0, float("nan")], [float("inf"), 0.0], [0.0, -float("inf")]])
def test_non_finite_logits_are_a_clear_error(z):
    with pytest.raises(ValueError, match="finite"):
        core.softmax(z)


def test_jacobian_matches_central_finite_differences():
    rng = np.random.default_rng(1)
    for t in (0.5, 1.0, 3.0):
        z = rng.normal(size=8) * 2
        p = core.softmax(z, t)
        h = 1e-6
        numeric = np.empty((8, 8))
        for j in range(8):
            e = np.zeros(8)
            e[j] = h
            numeric[:, j] = (core.softmax(z + e, t) - core.softmax(z - e, t)) / (2 * h)
        # dp/dz for softmax(z / T) is the Jacobian at p divided by T
        np.testing.assert_allclose(core.softmax_jacobian(p) / t, numeric, atol=1e-8)


def test_jacobian_structure():
    p = core.softmax([0.0, 1.0, 2.0, 3.0])
    jac = core.softmax_jacobian(p)
    np.testing.assert_allclose(jac, jac.T)
    np.testing.assert_allclose(jac.sum(axis=0), 0, atol=1e-15)   # columns sum to 0
    np.testing.assert_allclose(np.diag(jac), p * (1 - p))
    np.testing.assert_allclose(core.jacobian_diagonal(p), p * (1 - p))
    assert np.abs(jac).max() <= core.JACOBIAN_BOUND
    assert core.jacobian_diagonal([0.5])[0] == 0.25


def test_attention_logits():
    q = np.array([1.0, 2.0, 3.0, 4.0])
    k = np.array([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    np.testing.assert_allclose(core.attention_logits(q, k, scaled=False), [1.0, 10.0])
    np.testing.assert_allclose(core.attention_logits(q, k, scaled=True), [0.5, 5.0])
    with pytest.raises(ValueError):
        core.attention_logits(q, k[:, :3])


def test_nested_sampling_extends_the_same_vectors():
    q_big, k_big = core.sample_qk(7, 4096)
    for d in (1, 3, 64, 80, 1000):
        q, k = core.sample_qk(7, d)
        assert q.shape == (d,) and k.shape == (core.N_KEYS, d)
        np.testing.assert_array_equal(q, q_big[:d])
        np.testing.assert_array_equal(k, k_big[:, :d])
    q2, _ = core.sample_qk(8, 64)
    assert not np.allclose(q2, q_big[:64])
    with pytest.raises(ValueError):
        core.sample_qk(1, 0)
    with pytest.raises(ValueError):
        core.sample_qk(1, 4097)


@pytest.mark.parametrize("d_k", [4, 64, 512])
def test_variance_of_qk_is_d_k_and_one_after_scaling(d_k):
    rng = np.random.default_rng(1234 + d_k)
    n = 40_000
    q = rng.standard_normal((n, d_k))
    k = rng.standard_normal((n, d_k))
    raw = np.einsum("ij,ij->i", q, k)
    scaled = raw / math.sqrt(d_k)
    # For unit Gaussians Var(q.k) = d_k and Var((q.k)^2)... the sample variance of n
    # draws has relative standard error sqrt((kurtosis - 1) / n) with kurtosis 3 + 6/d_k;
    # allow 5 standard errors.
    rel_se = math.sqrt((2 + 6 / d_k) / n)
    assert abs(raw.var() / d_k - 1) < 5 * rel_se
    assert abs(scaled.var() - 1) < 5 * rel_se
    assert abs(raw.mean()) < 5 * math.sqrt(d_k / n)


def test_entropy_and_effective_keys():
    assert core.entropy([0.25] * 4) == pytest.approx(math.log(4))
    assert core.effective_keys([0.25] * 4) == pytest.approx(4)
    assert core.effective_keys([1.0, 0.0, 0.0]) == pytest.approx(1.0)


def test_compute_state_is_consistent_with_the_primitives():
    st = core.compute_state(64, 1.0, 2288)
    q, k = core.sample_qk(2288, 64)
    np.testing.assert_allclose(st.raw_logits, k @ q)
    np.testing.assert_allclose(st.scaled.logits, k @ q / 8)
    np.testing.assert_allclose(st.unscaled.probs, core.softmax(k @ q))
    assert st.scaled.max_weight == st.scaled.probs.max()
    col = st.widths.index(64)
    np.testing.assert_allclose(st.sweep(True)[:, col], st.scaled.diagonal)
    np.testing.assert_allclose(st.sweep(False)[:, col], st.unscaled.diagonal)
    assert st.scaled.frobenius == pytest.approx(np.linalg.norm(st.scaled.jacobian))


def test_states_are_shared_read_only_and_equal_to_a_fresh_recompute():
    """compute_state keeps recent states: the same setting gives the same object, whose
    arrays cannot be changed by one session under another's feet, and equal to a recompute."""
    a = core.compute_state(128, 2.5, 7)
    assert core.compute_state(128.0, "2.5", np.int64(7)) is a      # the same setting
    fresh = core.compute_state_uncached(128, 2.5, 7)
    assert fresh is not a
    for v, w in ((a.scaled, fresh.scaled), (a.unscaled, fresh.unscaled)):
        for name in ("logits", "probs", "jacobian", "diagonal"):
            np.testing.assert_array_equal(getattr(v, name), getattr(w, name))
            with pytest.raises(ValueError, match="read-only"):
                getattr(v, name)[0] = 1.0
        assert (v.max_weight, v.entropy, v.frobenius) == (w.max_weight, w.entropy, w.frobenius)
    with pytest.raises(ValueError, match="read-only"):
        a.raw_logits[0] = 1.0
    assert core.compute_state(128, 2.5, 8) is not a                 # another setting
    assert core._cached_state.cache_info().maxsize == core.STATE_CACHE_SIZE
    for bad in ((0, 1.0, 1), (64, 0.0, 1), (64, 1.0, -1)):      # errors are not cached
        for _ in range(2):
            with pytest.raises(ValueError):
                core.compute_state(*bad)


def test_fig3_reference_numbers():
    st = core.compute_state(64, 1.0, 2288)
    assert percent(st.scaled.max_weight) == "27%"
    assert percent(st.unscaled.max_weight) == "80%"


def test_controls_are_log_spaced_and_include_real_widths():
    d = core.D_K_VALUES
    assert d[0] == 1 and d[-1] == 4096 and {64, 80, 96, 128} <= set(d)
    assert list(d) == sorted(set(d))
    t = core.TEMPERATURES
    assert t[0] == 0.1 and t[-1] == 10 and 1.0 in t
    ratios = np.diff(np.log10(t))
    assert np.all(ratios > 0.05) and np.all(ratios < 0.15)


# ---- the gradient that reaches the query, through the whole chain q -> z -> p ------------

def _p_of_q(q, keys, scaled, t):
    """The explorer's chain, from primitives: z = K q (/ sqrt(d_k)), p = softmax(z / T)."""
    return core.softmax(core.attention_logits(q, keys, scaled=scaled), t)


@pytest.mark.parametrize("d_k,t,scaled", [(1, 1.0, True), (4, 0.5, False), (64, 1.0, True),
                                          (64, 1.0, False), (64, 2.5, True), (512, 0.4, True),
                                          (512, 10.0, False)])
def test_query_gradient_matches_finite_differences_through_q_z_p(d_k, t, scaled):
    q, keys = core.sample_qk(2288, d_k)
    v = core.compute_state(d_k, t, 2288).active(scaled)
    s = math.sqrt(d_k) if scaled else 1.0
    analytic = core.query_gradient(v.probs, keys, s, t)
    h = 1e-6
    cols = range(d_k) if d_k <= 64 else range(0, d_k, 37)      # a spread of components
    for m in cols:
        e = np.zeros(d_k)
        e[m] = h
        numeric = (_p_of_q(q + e, keys, scaled, t) - _p_of_q(q - e, keys, scaled, t)) / (2 * h)
        np.testing.assert_allclose(analytic[:, m], numeric, atol=1e-8, rtol=1e-6)
    # the norms shown: per key and overall, equal to the full matrix's
    np.testing.assert_allclose(v.query_rows, np.linalg.norm(analytic, axis=1), rtol=1e-12)
    assert v.query_gradient == pytest.approx(np.linalg.norm(analytic), rel=1e-12)


def test_jacobian_with_respect_to_u_and_to_z_by_finite_differences():
    """The heat map is dp/du with u = z / T (the softmax's own input); dp/dz is that over T."""
    z = core.sample_qk(5, 16)[1] @ core.sample_qk(5, 16)[0] / 4
    t, h = 0.2, 1e-7
    v = core.variant(z, t)
    numeric_z = np.empty((len(z), len(z)))
    for j in range(len(z)):
        e = np.zeros(len(z))
        e[j] = h
        du = (core.softmax((z / t) + e) - core.softmax((z / t) - e)) / (2 * h)
        dz = (core.softmax(z + e, t) - core.softmax(z - e, t)) / (2 * h)
        np.testing.assert_allclose(v.jacobian[:, j], du, atol=1e-8)
        np.testing.assert_allclose(v.jacobian[:, j] / t, dz, atol=1e-7)
        numeric_z[:, j] = dz
    assert v.logit_frobenius == pytest.approx(np.linalg.norm(numeric_z), rel=1e-6)


def test_default_draw_gradient_numbers():
    """THE-ARGUMENT 9 and the issue: at the Fig. 3 draw ||J||_F favours unscaled (0.385 vs
    0.248) but the gradient reaching the query is 0.373 scaled vs 1.98 unscaled."""
    st = core.compute_state(64, 1.0, 2288)
    assert (round(st.scaled.frobenius, 3), round(st.unscaled.frobenius, 3)) == (0.385, 0.248)
    assert (round(st.scaled.query_gradient, 3), round(st.unscaled.query_gradient, 2)) == (0.373, 1.98)


# ---- numerics that survive saturation ----------------------------------------------------

def test_complement_is_the_sum_of_the_other_weights():
    p = core.softmax([0.0, -50.0, -60.0, -700.0])
    c = core.complement(p)
    # 1 - p_0 = e^-50 + e^-60 + e^-700 over the sum; in float64, 1.0 - p[0] is 0
    assert 1.0 - p[0] == 0.0
    expected = (math.exp(-50) + math.exp(-60) + math.exp(-700)) / (1 + math.exp(-50) + math.exp(-60))
    assert c[0] == pytest.approx(expected, rel=1e-14)
    np.testing.assert_array_equal(c[1:], 1.0 - p[1:])
    two_d = core.complement(np.stack([p, p[::-1]]))
    np.testing.assert_array_equal(two_d, np.stack([c, c[::-1]]))


def test_the_issue_s_underflow_state_is_right():
    """d_k = 4096, T = 0.1, unscaled: largest p(1 - p) ~ 2.7e-189 and ||J||_F ~ 5.4e-189,
    not 0 (entries of 1e-189 square to 0 in float64)."""
    v = core.compute_state(4096, 0.1, 2288).unscaled
    assert v.max_diagonal == pytest.approx(2.6956e-189, rel=1e-4)
    assert v.frobenius == pytest.approx(5.3912e-189, rel=1e-4)
    assert v.frobenius >= np.abs(np.diag(v.jacobian)).max() > 0
    assert v.query_gradient > 0 and v.rest > 0


def _mp_reference(logits, t, keys, scale):
    """Values of what the page shows to 50 digits, from the state's float64 logits and keys:
    the working precision is 50 digits plus as many as 1 - p can lose to cancellation (a
    weight within e^-600 of 1)."""
    mpmath = pytest.importorskip("mpmath")
    spread = (max(logits) - min(logits)) / t
    with mpmath.workdps(50 + int(spread / math.log(10)) + 10):
        return _mp_values(mpmath.mp, logits, t, keys, scale)


def _mp_values(mp, logits, t, keys, scale):
    z = [mp.mpf(float(x)) / mp.mpf(float(t)) for x in logits]
    top = max(z)
    e = [mp.exp(x - top) for x in z]
    total = mp.fsum(e)
    p = [x / total for x in e]
    n = len(p)
    jac = [[p[i] * ((1 if i == j else 0) - p[j]) for j in range(n)] for i in range(n)]
    frob = mp.sqrt(mp.fsum(x * x for row in jac for x in row))
    a = max(range(n), key=lambda i: p[i])
    eff = mp.exp(-mp.fsum(x * mp.log(x) for x in p if x > 0))
    rows = None
    if keys is not None:
        g = keys
        jg = [[mp.fsum(jac[i][l] * g[l][j] for l in range(n)) for j in range(n)] for i in range(n)]
        rows = [mp.sqrt(max(mp.fsum(jg[i][l] * jac[l][i] for l in range(n)), 0))
                / (mp.mpf(scale) * mp.mpf(float(t))) for i in range(n)]
    return dict(p=p, max_weight=p[a], rest=1 - p[a],
                max_diagonal=max(jac[i][i] for i in range(n)), frobenius=frob,
                effective_keys=eff, rows=rows,
                query_gradient=mp.sqrt(mp.fsum(r * r for r in rows)) if rows else None)


def _stratified_grid(seed: int = 20_240_529) -> list[tuple[int, int, float, str]]:
    """The sample of the export grid the 50-digit check visits, (seed, d_k, T, rule), drawn
    from a fixed seed: every width under every rule, each (width, rule) at one temperature,
    every temperature under every rule, one of the export's seeds per width."""
    from attention_scaling import export

    rng = np.random.default_rng(seed)
    seeds = export.seed_list(export.MAX_SEEDS)
    widths = core.D_K_VALUES
    picks = {}
    for r in core.RULES:
        extra = len(widths) - len(core.TEMPERATURES)
        temps = [*core.TEMPERATURES, *rng.choice(core.TEMPERATURES, extra)]
        picks[r] = [float(t) for t in rng.permutation(temps)]
    return [(int(seeds[rng.integers(len(seeds))]), d_k, picks[r][i], r)
            for i, d_k in enumerate(widths) for r in core.RULES]


def test_a_stratified_sample_of_the_export_grid_against_50_digits():
    """Relative error <= 1e-12 for every number the page shows, against mpmath at 50 digits
    starting from the state's float64 logits and keys, on a fixed stratified sample of the
    export grid (4 seeds x 25 widths x 21 temperatures x 3 rules): every rule at every width
    and every temperature; ||J||_F >= largest |J_ii| always."""
    mpmath = pytest.importorskip("mpmath")
    from attention_scaling import export

    mp = mpmath.mp
    mp.dps = 50
    grid = _stratified_grid()
    assert {(d, r) for _, d, _, r in grid} == {(d, r) for d in core.D_K_VALUES
                                               for r in core.RULES}
    assert {(t, r) for _, _, t, r in grid} == {(t, r) for t in core.TEMPERATURES
                                               for r in core.RULES}
    assert {s for s, *_ in grid} == set(export.seed_list(export.MAX_SEEDS))
    grams = {}
    for seed, d_k, t, rule in grid:
        if (seed, d_k) not in grams:
            _, keys = core.sample_qk(seed, d_k)
            # the Gram matrix K K^T at 50 digits (every product of two doubles is exact there)
            kl = [[mp.mpf(float(x)) for x in row] for row in keys]
            grams[seed, d_k] = [[mpmath.fdot(kl[i], kl[j]) for j in range(len(kl))]
                                for i in range(len(kl))]
        v = core.compute_state(d_k, t, seed).variants[rule]
        ref = _mp_reference(v.logits, t, grams[seed, d_k], core.rule_divisor(rule, d_k))
        where = (seed, d_k, t, rule)
        for name in ("max_weight", "rest", "max_diagonal", "frobenius", "effective_keys",
                     "query_gradient"):
            got, want = getattr(v, name), ref[name]
            assert abs(got - want) <= 1e-12 * abs(want), (where, name, got, want)
        for got, want in zip(v.probs, ref["p"]):
            if want > 1e-290:        # float64's normal range, with room
                assert abs(got - want) <= 1e-12 * want, (where, "p", got, want)
        for got, want in zip(v.query_rows, ref["rows"]):
            if want > 1e-290:
                assert abs(got - want) <= 1e-12 * want, (where, "rows", got, want)
        assert v.frobenius >= np.abs(np.diag(v.jacobian)).max(), where
        assert v.frobenius > 0 and v.max_diagonal > 0 and v.rest > 0, where
    assert len(grid) == len(core.D_K_VALUES) * len(core.RULES)


# ---- labels that never round to a lie ----------------------------------------------------

def test_percent_never_rounds_to_an_extreme_the_weight_does_not_reach():
    xs = np.concatenate([np.linspace(0, 1, 200_001), [1e-300, 4.9e-4, 5e-4, 0.00499, 0.995,
                                                       0.99499, 0.9995, 0.99887, 1 - 1e-16]])
    for x in xs:
        text = percent(x)
        if 0 < x < 1:
            assert text not in ("0%", "100%", "0.0%", "100.0%"), (x, text)
        if text == ">99.9%":
            assert 0.999 < x < 1
        elif text == "<0.1%":
            assert 0 < x < 0.001
        else:
            shown = float(text.rstrip("%"))
            half = 0.05 if "." in text else 0.5
            assert abs(shown - 100 * x) <= half + 1e-9, (x, text)
    assert percent(0.99887) == "99.9%"
    assert percent(1.0) == "100%" and percent(0.0) == "0%"
    assert percent(1.0, below_one=True) == ">99.9%"


# ---- the distribution of draws -----------------------------------------------------------

@pytest.mark.parametrize("d_k,t", [(64, 1.0), (4, 0.5), (512, 2.5)])
def test_typical_draw_agrees_with_an_independent_monte_carlo_of_full_vectors(d_k, t):
    """Core's median max weight (from |q| g, no vectors) against 8,000 draws of full
    d_k-dimensional q and keys: about half of those fall below it. The tolerance is five
    standard errors of the two medians' quantile levels."""
    rng = np.random.default_rng(99 + d_k)
    n = 8_000
    typ = core.typical(d_k, t)
    for scaled in (True, False):
        weights = np.empty(n)
        for start in range(0, n, 1000):
            q = rng.standard_normal((1000, d_k))
            k = rng.standard_normal((1000, core.N_KEYS, d_k))
            z = np.einsum("nkd,nd->nk", k, q) / (math.sqrt(d_k) if scaled else 1.0)
            weights[start:start + 1000] = core.softmax(z, t).max(axis=1)
        below = np.mean(weights < typ.median[scaled])
        se = math.sqrt(0.25 / n + 0.25 / typ.draws)
        assert abs(below - 0.5) < 5 * se, (scaled, below)
        # and the draw's percentile: the share of the independent draws below a weight
        x = float(np.quantile(weights, 0.3))
        assert abs(typ.percentile(scaled, math.log10(1 - x)) - 30) < 100 * 5 * math.sqrt(0.21 / n) + 0.2


def test_typical_reference_numbers_and_is_seeded_and_cached():
    """THE-ARGUMENT 8: median max weight at d_k = 64 about 33% scaled and 96.6% unscaled;
    the Fig. 3 draw's 27% and 80% near the 24th and 26th percentiles."""
    typ = core.typical(64, 1.0)
    assert typ.median[True] == pytest.approx(0.334, abs=0.01)
    assert typ.median[False] == pytest.approx(0.966, abs=0.005)
    st = core.compute_state(64, 1.0, 2288)
    assert typ.percentile(True, st.scaled.log10_rest) == pytest.approx(24, abs=2)
    assert typ.percentile(False, st.unscaled.log10_rest) == pytest.approx(26, abs=2)
    assert core.typical(64, 1.0) is typ
    core._typical.cache_clear()
    again = core.typical(64, 1.0)
    assert again is not typ and again.median == typ.median
    with pytest.raises(ValueError):
        core.typical(65, 1.0)


def test_unscaled_median_climbs_with_width_at_every_temperature():
    """What the guide says ("the unscaled median max weight climbs"): never falls as d_k
    grows at any T, and with 8 keys it is over 90% at the widest head."""
    for t in core.TEMPERATURES:
        medians = [core.typical(d, t).median[False] for d in core.D_K_VALUES]
        assert all(b >= a for a, b in zip(medians, medians[1:])), t
        assert medians[-1] > 0.9, t


def test_nested_draws_correlate_by_the_root_of_the_width_ratio():
    """The caption: scaled logits of the same nested draw at widths d and d' correlate by
    sqrt(d / d') (0.25 for 4 and 64)."""
    rng = np.random.default_rng(3)
    n = 20_000
    q = rng.standard_normal((n, 64))
    k = rng.standard_normal((n, 64))
    small = (q[:, :4] * k[:, :4]).sum(axis=1) / 2
    large = (q * k).sum(axis=1) / 8
    rho = np.corrcoef(small, large)[0, 1]
    assert abs(rho - 0.25) < 5 * (1 - 0.25 ** 2) / math.sqrt(n)


def test_temperature_one_over_root_d_k_turns_scaled_into_unscaled():
    """The guide: at T = 1/sqrt(d_k) the scaled chart equals the unscaled one at T = 1."""
    for d_k in (4, 64, 1024):
        st = core.compute_state(d_k, 1.0, 7)
        np.testing.assert_allclose(core.softmax(st.scaled.logits, 1 / math.sqrt(d_k)),
                                   st.unscaled.probs, rtol=1e-9, atol=1e-300)


def test_frobenius_never_below_the_largest_diagonal_entry_even_at_extremes():
    """Logits spread up to ~700 / T apart (weights down to ~1e-300): the norm never underflows
    below its largest entry, and is positive whenever an entry is."""
    rng = np.random.default_rng(11)
    for _ in range(2000):
        n = int(rng.integers(2, 9))
        z = rng.normal(size=n) * rng.choice([1.0, 30.0, 300.0])
        t = float(rng.choice([0.1, 0.5, 1.0, 4.0]))
        v = core.variant(z, t)
        top = np.abs(v.jacobian).max()
        assert v.frobenius >= np.abs(np.diag(v.jacobian)).max()
        assert v.frobenius >= top and (v.frobenius > 0) == (top > 0)
        assert v.frobenius <= top * n          # ||A||_F <= n max|a_ij| for an n x n matrix


@pytest.mark.parametrize("d_k,t", [(4, 1.0), (64, 0.5), (512, 2.0)])
def test_linear_rule_variant_divides_by_d_k_and_its_gradient_matches_finite_differences(d_k, t):
    q, keys = core.sample_qk(2288, d_k)
    state = core.compute_state(d_k, t, 2288)
    v = state.variants["linear"]
    np.testing.assert_allclose(v.logits, keys @ q / d_k, rtol=1e-12)
    assert state.variants["sqrt"] is state.scaled and state.variants["none"] is state.unscaled

    def p_of_q(x):
        return core.softmax(keys @ x / d_k, t)

    h = 1e-6
    numeric = np.stack([(p_of_q(q + h * e) - p_of_q(q - h * e)) / (2 * h)
                        for e in np.eye(d_k)[:: max(1, d_k // 16)]], axis=1)
    analytic = core.query_gradient(v.probs, keys, d_k, t)[:, :: max(1, d_k // 16)]
    np.testing.assert_allclose(analytic, numeric, atol=1e-9, rtol=1e-6)
    np.testing.assert_allclose(v.query_rows, np.linalg.norm(
        core.query_gradient(v.probs, keys, d_k, t), axis=1), rtol=1e-10)


# ---- log-domain values (issue 30: underflow must not print certainties) -------------------

def _mp_logs(logits, t, keys, scale):
    """log10 of 1 - max weight, the largest p (1 - p), ||J||_F and ||J K||_F / (s T), at 60
    digits plus as many as 1 - p can lose to cancellation."""
    mpmath = pytest.importorskip("mpmath")
    spread = (max(logits) - min(logits)) / t
    with mpmath.workdps(60 + int(spread / math.log(10))):
        mp = mpmath.mp
        z = [mp.mpf(float(x)) / mp.mpf(float(t)) for x in logits]
        top = max(z)
        e = [mp.exp(x - top) for x in z]
        total = mp.fsum(e)
        p = [x / total for x in e]
        a = max(range(len(p)), key=lambda i: p[i])
        rest = mp.fsum(p[i] for i in range(len(p)) if i != a)
        n = len(p)
        jac = [[p[i] * ((1 if i == j else 0) - p[j]) for j in range(n)] for i in range(n)]
        kl = [[mp.mpf(float(x)) for x in row] for row in keys]
        gram = [[mpmath.fdot(kl[i], kl[j]) for j in range(n)] for i in range(n)]
        jg = [[mp.fsum(jac[i][l] * gram[l][c] for l in range(n)) for c in range(n)]
              for i in range(n)]                  # ||J K||_F^2 = tr(J G J), G = K K^T
        log10 = lambda x: float(mpmath.log10(x))              # noqa: E731
        return dict(
            log10_rest=log10(rest),
            log10_max_diagonal=log10(max(p[i] * (1 - p[i]) for i in range(n))),
            log10_frobenius=log10(mp.sqrt(mp.fsum(x * x for row in jac for x in row))),
            log10_query_gradient=log10(mp.sqrt(mp.fsum(jg[i][l] * jac[l][i] for i in range(n)
                                                       for l in range(n)))
                                       / (mp.mpf(float(scale)) * mp.mpf(float(t)))))


@pytest.mark.parametrize("d_k,t,seed,n,rho", [(4096, 0.1, 99, 2, 0.0), (2048, 1.0, 31337, 8, 1.0),
                                              (4096, 0.1, 2288, 8, 0.0), (64, 1.0, 2288, 8, 0.0)])
def test_log_domain_values_match_mpmath_where_float64_gives_0(d_k, t, seed, n, rho):
    """The issue's states: p (1 - p) near 10^-621 and 10^-828 unscaled (0 in float64) has its
    true exponent, within 1e-9 decades of mpmath from the same logits and keys."""
    st = core.compute_state(d_k, t, seed, n, rho)
    _, keys = core.sample_qk(seed, d_k, n, rho)
    for rule, v in st.variants.items():
        want = _mp_logs(v.logits, t, keys, core.rule_divisor(rule, d_k))
        for name, value in want.items():
            assert getattr(v, name) == pytest.approx(value, abs=1e-9), (rule, name)
    if (d_k, seed) == (4096, 99):
        assert st.unscaled.rest == 0 and st.unscaled.log10_rest == pytest.approx(-620.39, abs=0.01)
    if (d_k, seed) == (2048, 31337):
        assert st.unscaled.log10_rest == pytest.approx(-827.94, abs=0.01)


def test_percentiles_rank_by_the_log_domain_rest():
    """Issue 30 (a), (b): with 2 keys both rules' draws rank alike (88th), and the aligned
    unscaled draw at 2048 is at the 12th percentile, not "above the 99th"."""
    from attention_scaling.prose.text import percentile_phrase

    st = core.compute_state(4096, 0.1, 99, 2)
    typ = core.typical(4096, 0.1, 2)
    pcts = [typ.percentile(s, st.active(s).log10_rest) for s in (True, False)]
    assert [percentile_phrase(p) for p in pcts] == ["88th percentile"] * 2
    st = core.compute_state(2048, 1.0, 31337, 8, 1.0)
    typ = core.typical(2048, 1.0, 8, 1.0)
    assert percentile_phrase(typ.percentile(False, st.unscaled.log10_rest)) == "12th percentile"


def test_weights_print_one_decimal_below_20_percent_and_an_even_eighth_as_12_5():
    from attention_scaling.figures import max_label
    from attention_scaling.prose.text import weight_label

    assert weight_label(core.variant(np.zeros(8))) == "12.5%"
    assert max_label(core.compute_state(1, 10.0, 2288).scaled)[0] == "max weight 12.6%"
    v = core.compute_state(4096, 0.1, 99, 2).unscaled
    assert v.max_weight == 1.0 and weight_label(v) == ">99.9%"
    assert percent(0.1996) == "20%" and percent(0.0182) == "1.8%"
