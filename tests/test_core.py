"""core.py against independent truth: exact values, finite differences, statistics."""

import math
import warnings

import numpy as np
import pytest

from attention_scaling import core


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
    assert core.percent(st.scaled.max_weight) == "27%"
    assert core.percent(st.unscaled.max_weight) == "80%"


def test_controls_are_log_spaced_and_include_real_widths():
    d = core.D_K_VALUES
    assert d[0] == 1 and d[-1] == 4096 and {64, 80, 96, 128} <= set(d)
    assert list(d) == sorted(set(d))
    t = core.TEMPERATURES
    assert t[0] == 0.1 and t[-1] == 10 and 1.0 in t
    ratios = np.diff(np.log10(t))
    assert np.all(ratios > 0.05) and np.all(ratios < 0.15)
