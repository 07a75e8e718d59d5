"""The argument's numbers in core against independent truth: explicit d_k-dimensional vectors,
finite differences and the reference numbers of THE-ARGUMENT."""

import math

import numpy as np
import pytest

from attention_scaling import core


def _decompose(query, keys):
    """Keys split along the query and across it, with Bartlett's R from a QR of the part
    across (R^T R = K_perp K_perp^T), padded to n rows."""
    n = keys.shape[0]
    unit = query / np.linalg.norm(query)
    along = keys @ unit
    across = keys - np.outer(along, unit)
    r = np.linalg.qr(across.T, mode="r")
    pad = np.zeros((n, n))
    pad[:r.shape[0]] = r
    rows = np.arange(n) < r.shape[0]
    return along, np.triu(pad, 1), np.diag(pad).copy(), rows


CASES = [(1, 4, 1.0), (3, 5, 1.0), (8, 8, 0.5), (40, 8, 1.0), (40, 8, 0.1), (200, 3, 0.1),
         (64, 64, 1.0), (500, 16, 0.2)]


@pytest.mark.parametrize("d_k,n,t", CASES)
@pytest.mark.parametrize("rule", core.RULES)
def test_saturation_metrics_equal_the_explicit_vectors(d_k, n, t, rule):
    rng = np.random.default_rng(d_k * 1000 + n)
    query, keys = rng.standard_normal(d_k), rng.standard_normal((n, d_k))
    keys[0] = 0.6 * query + 0.8 * keys[0]          # an aligned key too
    s = core.rule_divisor(rule, d_k)
    direct = core.variant(keys @ query / s, t, keys, divisor=s)
    along, upper, diag, rows = _decompose(query, keys)
    u = (np.linalg.norm(query) * along / (s * t))[None, None]
    m = core.saturation_metrics(u, along[None, None], np.array([s * t]), upper[None],
                                diag[None, None], rows[None])
    assert m["max_weight"][0, 0] == pytest.approx(direct.max_weight, rel=1e-12)
    assert m["eff_keys"][0, 0] == pytest.approx(direct.effective_keys, rel=1e-9)
    if direct.query_gradient == 0:      # its weights underflow; the curves' log does not
        assert m["log10_grad_q"][0, 0] < -300
    else:
        assert m["log10_grad_q"][0, 0] == pytest.approx(math.log10(direct.query_gradient),
                                                        abs=1e-9)


def test_a_saturated_gradient_far_below_float64_is_still_measured():
    rng = np.random.default_rng(3)
    d_k, n, t = 4096, 8, 0.02
    query, keys = rng.standard_normal(d_k), rng.standard_normal((n, d_k))
    along, upper, diag, rows = _decompose(query, keys)
    u = (np.linalg.norm(query) * along / t)[None, None]
    m = core.saturation_metrics(u, along[None, None], np.array([t]), upper[None],
                                diag[None, None], rows[None])
    log_grad = m["log10_grad_q"][0, 0]
    assert log_grad < -400 and np.isfinite(log_grad)   # 10 ** log_grad is not a float64
    # against the exact exponent: ||dp/dq|| ~ eps * O(|k|), eps = second weight / top weight
    z = u[0, 0]
    gap = np.sort(z)[-1] - np.sort(z)[-2]
    assert abs(log_grad - (-gap / math.log(10))) < 6


def _explicit_curves(d_k, n, t, align, draws=2000, seed=99):
    rng = np.random.default_rng(seed)
    out = {r: ([], []) for r in core.RULES}
    for _ in range(draws):
        q, k = rng.standard_normal(d_k), rng.standard_normal((n, d_k))
        k[0] = align * q + math.sqrt(1 - align ** 2) * k[0]
        for r in core.RULES:
            s = core.rule_divisor(r, d_k)
            v = core.variant(k @ q / s, t, k, divisor=s)
            out[r][0].append(v.max_weight)
            out[r][1].append(math.log10(v.query_gradient))
    return out


@pytest.mark.parametrize("d_k,n,t,align", [(16, 8, 1.0, 0.0), (64, 4, 0.5, 0.5),
                                           (4, 12, 1.0, 0.3)])
def test_curves_match_a_monte_carlo_with_explicit_vectors(d_k, n, t, align):
    curves = core.saturation_curves(t, n, align)
    i = core.D_K_VALUES.index(d_k)
    explicit = _explicit_curves(d_k, n, t, align)
    for r in core.RULES:
        weights, grads = explicit[r]
        assert curves[f"max_weight_median_{r}"][i] == pytest.approx(np.median(weights), abs=0.03)
        for q, col in ((25, "q25"), (75, "q75")):
            assert curves[f"max_weight_{col}_{r}"][i] == pytest.approx(
                np.percentile(weights, q), abs=0.04)
        spread = np.subtract(*np.percentile(grads, [75, 25]))   # in decades
        assert math.log10(curves[f"grad_q_median_{r}"][i]) == pytest.approx(
            np.median(grads), abs=0.03 + 0.1 * spread)


def test_curves_give_the_reference_numbers():
    """THE-ARGUMENT 9 and 11: median max weight and gradient to the query with 8 keys."""
    c = core.saturation_curves(1.0, 8, 0.0)
    at = {d: core.D_K_VALUES.index(d) for d in (16, 64, 512)}
    for d, none, sqrt, linear in ((16, 0.78, 0.33, 0.17), (64, 0.96, 0.33, 0.15),
                                  (512, 1.00, 0.34, 0.13)):
        assert c["max_weight_median_none"][at[d]] == pytest.approx(none, abs=0.015)
        assert c["max_weight_median_sqrt"][at[d]] == pytest.approx(sqrt, abs=0.02)
        assert c["max_weight_median_linear"][at[d]] == pytest.approx(linear, abs=0.015)
    assert c["grad_q_median_sqrt"][at[64]] == pytest.approx(0.364, rel=0.05)
    assert c["grad_q_median_sqrt"][at[512]] == pytest.approx(0.367, rel=0.05)
    assert c["grad_q_median_none"][at[512]] == pytest.approx(0.0022, rel=0.25)
    # quartiles bracket the median; 1/sqrt(d_k) holds the median near 1/3 at every width
    for r in core.RULES:
        for m in ("max_weight", "eff_keys", "grad_q"):
            assert np.all(c[f"{m}_q25_{r}"] <= c[f"{m}_median_{r}"])
            assert np.all(c[f"{m}_median_{r}"] <= c[f"{m}_q75_{r}"])
    assert np.ptp(c["max_weight_median_sqrt"][1:]) < 0.1


def test_an_aligned_key_saturates_sqrt_again_and_not_linear():
    c = core.saturation_curves(1.0, 8, 0.5)
    assert c["max_weight_median_sqrt"][-1] > 0.99
    assert c["max_weight_median_linear"][-1] < 0.3


def test_curve_arguments_are_checked():
    with pytest.raises(ValueError):
        core.saturation_curves(1.0, 7, 0.0)
    with pytest.raises(ValueError):
        core.saturation_curves(1.0, 8, 0.25)
    with pytest.raises(ValueError):
        core.saturation_curves(0.0, 8, 0.0)


def test_head_budget_reads_the_curves_at_width_over_heads():
    budget = core.head_budget(512, 1.0, 8, 0.0)
    curves = core.saturation_curves(1.0, 8, 0.0)
    assert list(budget["heads"]) == [2.0 ** i for i in range(10)]
    for h, d in zip(budget["heads"], budget["d_k"]):
        assert h * d == 512
        i = core.D_K_VALUES.index(int(d))
        for r in core.RULES:
            assert budget[f"max_weight_median_{r}"][list(budget["d_k"]).index(d)] == \
                curves[f"max_weight_median_{r}"][i]


@pytest.mark.parametrize("d_k", [1, 8, 64, 512, 4096])
def test_logit_spread_is_sqrt_d_k_raw_and_one_scaled(d_k):
    dist = core.logit_distribution(d_k)
    assert dist["std_none"] == pytest.approx(math.sqrt(d_k), rel=0.025)
    assert dist["std_sqrt"] == pytest.approx(1.0, rel=0.025)
    assert dist["std_linear"] == pytest.approx(1 / math.sqrt(d_k), rel=0.025)
    for r in ("none", "sqrt"):
        widths = np.diff(dist[f"edges_{r}"])
        assert (dist[f"counts_{r}"] * widths).sum() == pytest.approx(1.0, abs=1e-12)
    curve = core.logit_std_curve()
    assert curve["std_raw"][core.D_K_VALUES.index(d_k)] == pytest.approx(dist["std_none"])


def test_draw_metrics_are_the_states_variants_when_nothing_is_aligned():
    draw = core.draw_metrics(64, 1.0, 2288)
    state = core.compute_state(64, 1.0, 2288)
    for r in core.RULES:
        assert draw[r].probs.tolist() == state.variants[r].probs.tolist()
        assert draw[r].query_gradient == pytest.approx(state.variants[r].query_gradient,
                                                       rel=1e-12)
    aligned = core.draw_metrics(64, 1.0, 2288, 8, 0.9)
    q, k = core.sample_qk(2288, 64)
    assert aligned["none"].logits[0] == pytest.approx(
        0.9 * q @ q + math.sqrt(1 - 0.81) * k[0] @ q)
    assert aligned["none"].logits[1:].tolist() == pytest.approx((k[1:] @ q).tolist())


# ---- training ----------------------------------------------------------------------------

@pytest.mark.parametrize("rule,t", [("none", 1.0), ("sqrt", 1.0), ("linear", 0.5),
                                    ("sqrt", 0.2)])
def test_attention_gradients_equal_finite_differences(rule, t):
    rng = np.random.default_rng(5)
    d_k, m, b, n = 6, 4, 3, 5
    w_q, w_k = rng.standard_normal((d_k, m)) / 2, rng.standard_normal((d_k, m)) / 2
    tokens = rng.standard_normal((b, n, m))
    targets = rng.integers(0, n, b)
    query = tokens[np.arange(b), targets] + 0.3 * rng.standard_normal((b, m))
    _, g_q, g_k, _ = core.attention_loss(w_q, w_k, tokens, query, targets, rule, t)
    h = 1e-6
    for w, g, which in ((w_q, g_q, 0), (w_k, g_k, 1)):
        numeric = np.zeros_like(w)
        for idx in np.ndindex(w.shape):
            plus, minus = w.copy(), w.copy()
            plus[idx] += h
            minus[idx] -= h
            args = [(plus, w_k), (minus, w_k)] if which == 0 else [(w_q, plus), (w_q, minus)]
            lp = core.attention_loss(*args[0], tokens, query, targets, rule, t, grads=False)[0]
            lm = core.attention_loss(*args[1], tokens, query, targets, rule, t, grads=False)[0]
            numeric[idx] = (lp - lm) / (2 * h)
        assert np.abs(g - numeric).max() < 1e-7 * max(1.0, np.abs(numeric).max())


def test_a_saturated_softmax_passes_almost_no_gradient():
    """Logits 40 apart: the loss is far from 0 and yet dL/dW is ~e^-40 of it."""
    tokens = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    w_q, w_k = np.array([[1.0, 0.0]]), np.array([[40.0, 0.0]])
    loss, g_q, g_k, p = core.attention_loss(w_q, w_k, tokens, np.array([[1.0, 0.0]]),
                                            np.array([1]), "none")
    assert p[0, 0] > 1 - 1e-15 and loss == pytest.approx(0.5, rel=1e-12)
    assert 0 < core.frobenius(g_k) < 1e-15 and core.frobenius(g_q) < 1e-15


def test_training_is_deterministic_and_shares_its_start_across_rules():
    a = core.train(64, "sqrt", 7, steps=40)
    b = core.train(64, "sqrt", 7, steps=40)
    assert a.loss == b.loss and a.grad_wq == b.grad_wq
    assert len(a.loss) == 41 and a.done
    runs = {r: core.start_training(64, r, 7, steps=40) for r in core.RULES}
    assert all(np.array_equal(runs["sqrt"].w_q, run.w_q) for run in runs.values())
    first = [run._batch()[0] for run in runs.values()]
    assert all(np.array_equal(first[0], batch) for batch in first)
    c = core.start_training(64, "sqrt", 7, steps=40)
    c.advance(10)
    c.advance(100)
    assert c.loss == a.loss and c.steps_done == 40


def _plain_sgd(d_k, rule, seed, steps, temperature, n_keys, lr=None):
    """core.TrainingRun's task done the plain way: SGD on the (d_k, m) weights with
    attention_loss, from the same start and batches, at the rate giving every rule the same
    logit step (base 1 times s²/d_k, s = 1, √d_k or d_k), or ``lr``. (losses, |dW_Q|, |dW_K|)
    per step, and the weights after the last update."""
    if lr is None:
        lr = {"none": 1.0, "sqrt": d_k, "linear": d_k * d_k}[rule] / d_k
    m, b = core.TRAIN_D_MODEL, core.TRAIN_BATCH
    rng = np.random.default_rng([seed, d_k, 7])
    w_q = rng.standard_normal((d_k, m)) / math.sqrt(m)
    w_k = rng.standard_normal((d_k, m)) / math.sqrt(m)
    batches = np.random.default_rng([seed, d_k, 11])
    rows = []
    for step in range(steps + 1):
        tokens = batches.standard_normal((b, n_keys, m))
        targets = batches.integers(0, n_keys, b)
        query = tokens[np.arange(b), targets] + core.TRAIN_NOISE * batches.standard_normal((b, m))
        loss, g_q, g_k, _ = core.attention_loss(w_q, w_k, tokens, query, targets, rule,
                                                temperature)
        rows.append((loss, core.frobenius(g_q), core.frobenius(g_k)))
        if step < steps:
            w_q, w_k = w_q - lr * g_q, w_k - lr * g_k
    return np.array(rows), w_q, w_k


#: The unscaled run above d_k = 2m is chaotic: a rounding error of 1e-16 grows to 1e-9 in
#: 5 to 10 steps (in plain SGD too, started from a rotation of the same weights: the same
#: run in exact arithmetic), so it is compared over its first steps only.
_CHAOTIC_STEPS = 3


@pytest.mark.parametrize("d_k", [1, 16, 64, 256])
@pytest.mark.parametrize("rule", core.RULES)
@pytest.mark.parametrize("seed", [7, 2288])
def test_training_equals_plain_sgd_on_the_weights(d_k, rule, seed):
    steps = _CHAOTIC_STEPS if rule == "none" and d_k > 2 * core.TRAIN_D_MODEL else 50
    _check_against_plain_sgd(d_k, rule, seed, steps, 1.0, core.N_KEYS)


@pytest.mark.parametrize("d_k,rule,t,n_keys,steps", [(256, "sqrt", 0.5, 64, 50),
                                                      (64, "linear", 2.0, 64, 50),
                                                      (1024, "sqrt", 1.0, 8, 20),
                                                      (1024, "linear", 1.0, 8, 20),
                                                      (1024, "none", 1.0, 8, 2)])
def test_training_equals_plain_sgd_at_other_settings(d_k, rule, t, n_keys, steps):
    _check_against_plain_sgd(d_k, rule, 5, steps, t, n_keys)


def _check_against_plain_sgd(d_k, rule, seed, steps, t, n_keys):
    expected, w_q, w_k = _plain_sgd(d_k, rule, seed, steps, t, n_keys)
    run = core.start_training(d_k, rule, seed, temperature=t, steps=steps, n_keys=n_keys)
    run.advance(steps)
    for got, want in ((run.w_q, w_q), (run.w_k, w_k)):
        assert got.shape == want.shape
        assert np.abs(got - want).max() <= 1e-9 * np.abs(want).max()
    run.advance(1)
    assert run.done and run.w_q is None and run.w_k is None
    got = np.array([run.loss, run.grad_wq, run.grad_wk]).T
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=0)


@pytest.mark.parametrize("lr", [1.0, 0.25])
def test_training_at_a_given_rate_equals_plain_sgd_at_it(lr):
    expected, _, _ = _plain_sgd(64, "linear", 7, 30, 1.0, 8, lr=lr)
    run = core.train(64, "linear", 7, steps=30, n_keys=8, lr=lr)
    assert run.lr == lr
    np.testing.assert_allclose(np.array([run.loss, run.grad_wq, run.grad_wk]).T, expected,
                               rtol=1e-9, atol=0)


def test_scaled_training_learns_the_task():
    run = core.train(64, "sqrt", 2288)
    assert run.loss[-1] < 0.1 * run.loss[0]


# ---- the gradient's spread over draws (THE-ARGUMENT 13) -----------------------------------

def _full_vector_grads(d_k, draws, seed):
    """log10 ||dp/dq||_F per rule over ``draws`` draws of full d_k-dimensional q and 8 keys
    at T = 1: this test's own J K / s, J = diag(p) - p p^T (no draw here saturates below
    float64's range: the logits are at most a few hundred apart)."""
    rng = np.random.default_rng(seed)
    out = {r: np.empty(draws) for r in core.RULES}
    for i in range(draws):
        q, keys = rng.standard_normal(d_k), rng.standard_normal((8, d_k))
        raw = keys @ q
        for r, s in (("none", 1.0), ("sqrt", math.sqrt(d_k)), ("linear", float(d_k))):
            e = np.exp(raw / s - (raw / s).max())
            p = e / e.sum()
            out[r][i] = math.log10(np.linalg.norm((np.diag(p) - np.outer(p, p)) @ keys) / s)
    return out


@pytest.mark.parametrize("d_k", [16, 64, 256])
def test_frozen_shares_match_a_monte_carlo_of_full_vectors(d_k):
    """The shares of draws below a tenth / a hundredth of the ÷√d_k median, below a tenth of
    it in the logits' step at the equal-step rates, and below a tenth of the rule's own
    median, against 3,000 draws of full vectors: within four standard errors of the
    difference of two binomial shares."""
    curves = core.saturation_curves(1.0, 8, 0.0)
    i = core.D_K_VALUES.index(d_k)
    own = _full_vector_grads(d_k, 3000, 1300 + d_k)
    ref = np.median(own["sqrt"])
    # an SGD step on W_Q at rate lr moves a logit q.k/s by lr |x|^2 (dL/dq).k / s: at the
    # equal-step rates (1/d_k, 1, d_k) the gradient times lr sqrt(d_k) / s
    step = {r: own[r] + math.log10(lr * math.sqrt(d_k) / s) for r, lr, s in (
        ("none", 1 / d_k, 1.0), ("sqrt", 1.0, math.sqrt(d_k)), ("linear", d_k, d_k))}
    for r in core.RULES:
        median = np.median(own[r])
        for name, values, cut in (
                ("frozen_share", own[r], ref - 1), ("frozen100_share", own[r], ref - 2),
                ("spread_share", own[r], median - 1),
                ("equal_step_share", step[r], np.median(step["sqrt"]) - 1)):
            want = float(np.mean(values < cut))
            got = float(curves[f"{name}_{r}"][i])
            p = max((want + got) / 2, 1 / 3000)
            se = math.sqrt(p * (1 - p) * (1 / 3000 + 1 / core.CURVE_DRAWS))
            # ÷d_k at 128+ sits a few per cent below the cut: a share of 0 or 1, not between
            assert abs(got - want) <= 4 * se + 1e-9, (r, name, got, want)


@pytest.mark.parametrize("d_k", [16, 64, 512])
def test_the_median_max_weight_s_interval_holds_the_median_of_many_more_draws(d_k):
    """The 95% interval of the curves' median max weight (2,000 draws) holds the median of
    400,000 draws of this test's own (q.k_j = |q| g_j, |q|^2 ~ chi^2(d_k)), at T = 1 with 8
    keys: at d_k = 64, unscaled, 96.4%, which the 2,000 draws' median alone prints as 97%."""
    curves = core.saturation_curves(1.0, 8, 0.0)
    i = core.D_K_VALUES.index(d_k)
    rng = np.random.default_rng(77)
    truth = {}
    for r, s in (("none", 1.0), ("sqrt", math.sqrt(d_k)), ("linear", float(d_k))):
        parts = []
        for _ in range(4):
            z = np.sqrt(rng.chisquare(d_k, 100_000))[:, None] * rng.standard_normal((100_000, 8))
            z = z / s
            e = np.exp(z - z.max(axis=1, keepdims=True))
            parts.append(1 / e.sum(axis=1))
        truth[r] = float(np.median(np.concatenate(parts)))
        lo, hi = curves[f"max_weight_median_lo_{r}"][i], curves[f"max_weight_median_hi_{r}"][i]
        assert lo <= curves[f"max_weight_median_{r}"][i] <= hi
        assert lo <= truth[r] <= hi, (r, lo, truth[r], hi)
    if d_k == 64:
        assert round(100 * truth["none"], 1) == 96.4


def test_the_default_s_spread_is_the_issue_s_reference():
    """d_k = 64, 8 keys, T = 1: about a quarter of unscaled draws get under a tenth of the
    ÷√d_k median, no ÷√d_k draw does (issue 30: about 0.27, 0, 0)."""
    g = core.gradient_spread(64)
    assert g["frozen_share_none"] == pytest.approx(0.26, abs=0.03)
    assert g["frozen_share_sqrt"] == 0 and g["frozen_share_linear"] <= 0.01
    assert g["spread_share_sqrt"] == g["spread_share_linear"] == 0
    curves = core.saturation_curves(1.0, 8, 0.0)
    i = core.D_K_VALUES.index(64)
    for r in core.RULES:
        counts = g[f"counts_{r}"]
        assert counts.shape == (core.GRAD_BINS,) and counts.sum() == core.CURVE_DRAWS
        assert g[f"median_{r}"] == pytest.approx(curves[f"log10_grad_q_median_{r}"][i])
        assert 10 ** g[f"median_{r}"] == pytest.approx(curves[f"grad_q_median_{r}"][i])
        qs = [g[f"{q}_{r}"] for q in ("q05", "q25", "median", "q75", "q95")]
        assert qs == sorted(qs) and g["edges"][0] <= qs[0] and qs[-1] <= g["edges"][-1]
        for name in ("frozen_share", "frozen100_share", "spread_share", "equal_step_share"):
            assert g[f"{name}_{r}"] == curves[f"{name}_{r}"][i]
    assert g["edges"].shape == (core.GRAD_BINS + 1,) and not g["edges"].flags.writeable
    assert core.gradient_spread(64)["counts_none"] is g["counts_none"]     # cached
    with pytest.raises(ValueError):
        core.gradient_spread(65)


def test_the_median_s_standard_error_is_a_bootstrap_of_the_draws():
    """The bootstrap standard error of the log10 median against this test's own bootstrap
    of core's own per-draw values (another seed, 400 resamples): within 25%."""
    j = core.D_K_VALUES.index(4096)
    res = core._curve_batch(range(j, j + 1), slice(0, core.CURVE_DRAWS), 1.0, 8, 0.0)
    lg = res["grad_q"].reshape(3, -1).astype(float)
    curves = core.saturation_curves(1.0, 8, 0.0)
    rng = np.random.default_rng(7)
    for k, r in enumerate(core.RULES):
        boots = [np.median(lg[k][rng.integers(0, lg.shape[1], lg.shape[1])]) for _ in range(400)]
        assert curves[f"log10_grad_q_median_se_{r}"][-1] == pytest.approx(np.std(boots), rel=0.25)
    assert 0.1 < curves["log10_grad_q_median_se_none"][-1] < 1     # "about 10^10 times"


def test_log10_columns_draw_what_underflows():
    """Where the unscaled median is below float64's range (T = 0.1, 2 keys, rho = 1) the
    power-of-ten column is 0 and the log10 column is the true value."""
    c = core.saturation_curves(0.1, 2, 1.0)
    assert c["grad_q_median_none"][-1] == 0 and c["log10_grad_q_median_none"][-1] < -1000
    ok = c["log10_grad_q_median_none"] > -300
    np.testing.assert_allclose(10 ** c["log10_grad_q_median_none"][ok],
                               c["grad_q_median_none"][ok], rtol=1e-12)
    b = core.head_budget(512, 0.1, 2, 1.0)
    assert b["log10_grad_q_median_none"][0] == c["log10_grad_q_median_none"][
        core.D_K_VALUES.index(512)]


@pytest.mark.parametrize("d_k", [1, 4, 64, 1024])
def test_each_rule_s_rate_gives_the_same_logit_step(d_k):
    """base · s²/d_k: unscaled base/d_k, ÷√d_k base, ÷d_k base·d_k; then lr·d_k/s², the
    logit step of THE-ARGUMENT.md point 14, is base under every rule."""
    assert core.rule_learning_rate("none", d_k) == 1 / d_k
    assert core.rule_learning_rate("sqrt", d_k) == 1.0
    assert core.rule_learning_rate("linear", d_k) == d_k
    assert core.rule_learning_rate("linear", d_k, base=0.5) == d_k / 2
    for r in core.RULES:
        step = core.rule_learning_rate(r, d_k, base=3.0) * d_k / core.rule_divisor(r, d_k) ** 2
        assert step == pytest.approx(3.0, rel=1e-12)
        assert core.start_training(d_k, r, 7, steps=1).lr == core.rule_learning_rate(r, d_k)


def test_a_run_s_final_loss_is_the_mean_of_its_last_50_steps():
    run = core.start_training(16, "sqrt", 3, steps=80)
    run.advance(80)
    assert math.isnan(run.final_loss)                  # not done: no result yet
    run.advance(1)
    assert core.TRAIN_TAIL == 50 and len(run.loss) == 81
    assert run.final_loss == pytest.approx(sum(run.loss[31:]) / 50, rel=1e-14)
    short = core.train(16, "sqrt", 3, steps=20)
    assert short.final_loss == pytest.approx(np.mean(short.loss), rel=1e-14)


def test_seeded_training_is_its_seeds_runs_with_median_and_range():
    seeded = core.train_seeds(16, "none", 7, steps=60, n_keys=8)
    assert core.TRAIN_SEEDS == 3 and seeded.seeds == [7, 8, 9] and seeded.done
    runs = [core.train(16, "none", s, steps=60, n_keys=8) for s in (7, 8, 9)]
    for got, want in zip(seeded.runs, runs):
        assert got.loss == want.loss and got.grad_wq == want.grad_wq
    finals = sorted(run.final_loss for run in runs)
    assert seeded.final == {"median": finals[1], "min": finals[0], "max": finals[2]}
    curve = seeded.curve("loss")
    by_step = np.array([run.loss for run in runs])
    assert curve["median"].tolist() == np.median(by_step, axis=0).tolist()
    assert curve["min"].tolist() == by_step.min(axis=0).tolist()
    assert curve["max"].tolist() == by_step.max(axis=0).tolist()
    partial = core.start_seeds(16, "none", 7, steps=60, n_keys=8)
    partial.advance(5)
    assert partial.steps_done == 4 and len(partial.curve("grad_wq")["median"]) == 5


def test_at_1024_with_equal_logit_steps_unscaled_does_not_learn_and_the_scaled_rules_do():
    """THE-ARGUMENT.md point 14 at d_k = 1024, seeds 7, 8, 9: unscaled's median final loss is
    above its median first loss; ÷√d_k and ÷d_k end far below theirs. Seed 7's numbers are
    THE-ARGUMENT's (0.789 / 0.0113 / 0.0083, from an independent trainer); its first steps
    equal plain SGD on the full weights at these rates (the 1024 cases of
    test_training_equals_plain_sgd_at_other_settings)."""
    seeded = {r: core.train_seeds(1024, r, 7) for r in core.RULES}
    start = {r: float(np.median([run.loss[0] for run in s.runs])) for r, s in seeded.items()}
    assert seeded["none"].final["median"] > start["none"]
    for r in ("sqrt", "linear"):
        assert seeded[r].final["max"] < 0.05 * start[r]
    mine = {r: s.runs[0].final_loss for r, s in seeded.items()}
    assert mine == pytest.approx({"none": 0.789, "sqrt": 0.0113, "linear": 0.0083}, rel=0.01)


# ---- the learning-rate sweep -------------------------------------------------------------

SWEEP_SEED = 2288       # the page's default seed


def test_a_sweep_point_is_a_direct_run_at_its_rate():
    """Each (rule, rate, seed) of the sweep is core.TrainingRun at that rate: the same final
    loss, exactly; the median and range are those of the seeds' losses."""
    sweep = core.learning_rate_sweep(64, 1.0, SWEEP_SEED)
    for rule in core.RULES:
        s = sweep[rule]
        j = int(np.argmax(s.rates))                     # the largest rate: the least benign
        for i, seed in enumerate(range(SWEEP_SEED, SWEEP_SEED + core.TRAIN_SEEDS)):
            run = core.train(64, rule, seed, lr=float(s.rates[j]))
            assert s.losses[j, i] == run.final_loss
        own = sorted(s.losses[j])
        assert (s.low[j], s.median[j], s.high[j]) == (own[0], own[1], own[2])
        assert s.equal_step == core.rule_learning_rate(rule, 64)
        assert np.allclose(s.rates / s.equal_step,
                           4.0 ** np.arange(-core.SWEEP_START, -core.SWEEP_START + len(s.rates)))


@pytest.mark.parametrize("d_k", [64, 1024])
def test_each_best_rate_has_a_swept_rate_on_either_side(d_k):
    """Each rule's best rate lies strictly inside the rates swept, is the one of lowest
    median loss, and the sweep's arrays are read-only. Over 20 s at 1024: a whole sweep at
    that width (three rules, every rate, three seeds)."""
    for rule, s in core.learning_rate_sweep(d_k, 1.0, SWEEP_SEED).items():
        assert s.rates[0] < s.best < s.rates[-1], rule
        assert s.best == s.rates[int(np.argmin(s.median))]
        assert not s.rates.flags.writeable and not s.median.flags.writeable


def test_the_best_rate_stays_put_for_sqrt_and_grows_like_d_k_for_linear():
    """At the page's default setting (T = 1, 8 keys, seeds 2288 to 2290): ÷√d_k's best rate is
    4 at 64 and at 1024; ÷d_k's is d_k (its best logit step stays at the equal step);
    unscaled's best rate is well above its equal step, 1/d_k."""
    a, b = (core.learning_rate_sweep(d, 1.0, SWEEP_SEED) for d in (64, 1024))
    assert a["sqrt"].best == b["sqrt"].best == 4.0
    assert (a["linear"].best, b["linear"].best) == (64.0, 1024.0)
    assert a["linear"].best_logit_step == b["linear"].best_logit_step == 1.0
    assert a["none"].best >= 16 / 64 and b["none"].best >= 64 / 1024


def test_a_sweep_does_not_depend_on_its_slices_and_is_kept():
    whole = core.start_sweep(4, 0.5, 3, steps=20, seeds=2).run()
    sliced = core.LearningRateSweep(4, 0.5, 3, steps=20, seeds=2)      # not the kept one
    seen = 0
    while not sliced.done:
        sliced.advance(7)
        assert sliced.points_done >= seen
        seen = sliced.points_done
    for rule in core.RULES:
        assert np.array_equal(whole[rule].losses, sliced.result()[rule].losses)
    kept = core.cached_sweep(4, 0.5, 3, steps=20, seeds=2)
    assert kept is not None and kept.done
    assert core.start_sweep(4, 0.5, 3, steps=20, seeds=2) is kept
    assert core.learning_rate_sweep(4, 0.5, 3, steps=20, seeds=2) is kept.result()
    assert core.cached_sweep(4, 0.5, 4, steps=20, seeds=2) is None


def test_a_sweep_takes_the_train_runs_as_its_equal_step_points_and_nothing_else():
    """Given Train's finished runs (each rule at its equal-step rate, the same setting), a
    sweep takes them as those points without a step of its own, and ends exactly where one
    that ran them itself ends; a run at another rate or setting is not taken."""
    setting = dict(d_k=4, temperature=0.5, seed=3, steps=20, seeds=2)
    alone = core.LearningRateSweep(4, 0.5, 3, steps=20, seeds=2).run()
    runs = {r: core.train_seeds(4, r, 3, 0.5, steps=20, seeds=2) for r in core.RULES}
    given = core.LearningRateSweep(**setting, runs=runs)
    given.advance(1)                     # one step would not finish a point of 20 steps
    assert given.points_done == 1
    assert given.run() is not None
    for rule in core.RULES:
        assert np.array_equal(alone[rule].losses, given.result()[rule].losses)
    others = {"none": core.train_seeds(4, "none", 3, 0.5, steps=20, seeds=2, lr=2.0),
              "sqrt": core.train_seeds(4, "sqrt", 4, 0.5, steps=20, seeds=2),
              "linear": core.train_seeds(4, "none", 3, 0.5, steps=20, seeds=2)}
    refused = core.LearningRateSweep(**setting, runs=others)
    for _ in core.RULES:
        refused.advance(1)
    assert refused.points_done == 0


def test_runs_on_shared_batches_are_the_runs_that_draw_their_own_and_draw_each_once(
        monkeypatch):
    """The three rules' runs and a sweep's points on one set of core.shared_batches end
    exactly where runs drawing their own batches end, and each batch is drawn once."""
    alone = core.LearningRateSweep(4, 0.5, 3, steps=20, seeds=2).run()
    own = {r: core.train_seeds(4, r, 3, 0.5, steps=20, seeds=2) for r in core.RULES}
    drawn = []
    real = core._draw_batch
    monkeypatch.setattr(core, "_draw_batch", lambda *a: drawn.append(1) or real(*a))
    batches = core.shared_batches(4, 3, seeds=2)
    shared = {r: core.train_seeds(4, r, 3, 0.5, steps=20, seeds=2, batches=batches)
              for r in core.RULES}
    sweep = core.LearningRateSweep(4, 0.5, 3, steps=20, seeds=2, batches=batches).run()
    assert len(drawn) == 2 * 21                     # two seeds, 21 batches each
    for rule in core.RULES:
        for mine, theirs in zip(shared[rule].runs, own[rule].runs):
            assert (mine.loss, mine.grad_wq) == (theirs.loss, theirs.grad_wq)
        assert np.array_equal(sweep[rule].losses, alone[rule].losses)
    with pytest.raises(ValueError, match="not this run's"):
        core.TrainingRun(8, "sqrt", 3, steps=20, batches=batches[0])


def _step_where_the_gradient_rounds_to_zero():
    """The first step of core's unscaled run at d_k = 4096, T = 0.1, 2 keys, seed 1 whose
    float64 gradient norm is 0: its weights (in the run's span basis, whose norms are the
    weights') and its batch."""
    run = core.TrainingRun(4096, "none", 1, temperature=0.1, steps=300, n_keys=2)
    while not run.done:
        a, b, state = run._a.copy(), run._b.copy(), run._rng.bit_generator.state
        run.advance(1)
        if run.grad_wq[-1] == 0:
            run._rng.bit_generator.state = state
            return run, len(run.loss) - 1, a, b, run._batch()
    raise AssertionError("no step rounds to 0 here")


def test_a_gradient_float64_rounds_to_zero_is_measured_in_the_log_domain():
    """Where the float64 gradient of a saturated run is exactly 0, the run's log10 norms are
    the exact ones: this test's own gradient at 400 digits (mpmath) from the same weights
    and batch; elsewhere they are log10 of the float64 norms."""
    mp = pytest.importorskip("mpmath").mp
    run, step, a, b, (tokens, query, targets) = _step_where_the_gradient_rounds_to_zero()
    with mp.workdps(400):
        s, t = mp.mpf(run._divisor), mp.mpf(run.temperature)
        n_b, n, m = tokens.shape
        gq = [[mp.mpf(0)] * m for _ in range(a.shape[0])]       # dL/dA = B G, row-major
        gk = [[mp.mpf(0)] * m for _ in range(a.shape[0])]
        A, B = mp.matrix(a.tolist()), mp.matrix(b.tolist())
        for r in range(n_b):
            xq = mp.matrix(query[r].tolist())
            xs = [mp.matrix(tokens[r, j].tolist()) for j in range(n)]
            q, ks = A * xq, [B * x for x in xs]
            z = [(q.T * k)[0] / s for k in ks]
            e = [mp.exp((zj - max(z)) / t) for zj in z]
            p = [x / sum(e) for x in e]
            diff = sum((p[j] * xs[j] for j in range(n)), mp.matrix(m, 1)) - xs[targets[r]]
            g = [(diff.T * xs[j])[0] / (m * n_b) for j in range(n)]
            gz = [p[i] * sum(p[j] * (g[i] - g[j]) for j in range(n)) / (s * t)
                  for i in range(n)]
            dq = sum((gz[i] * ks[i] for i in range(n)), mp.matrix(a.shape[0], 1))
            for i in range(a.shape[0]):
                for c in range(m):
                    gq[i][c] += dq[i] * xq[c]
                    gk[i][c] += sum(gz[j] * q[i] * xs[j][c] for j in range(n))
        own = [float(mp.log10(mp.sqrt(sum(x * x for row in g for x in row)))) for g in (gq, gk)]
    assert run.grad_wq[step] == 0 and run.grad_wk[step] == 0
    assert run.log10_grad_wq[step] == pytest.approx(own[0], abs=1e-9)
    assert run.log10_grad_wk[step] == pytest.approx(own[1], abs=1e-9)
    fine = [i for i, x in enumerate(run.grad_wq) if x > 1e-250]
    assert len(fine) > 100
    assert np.allclose([run.log10_grad_wq[i] for i in fine],
                       np.log10([run.grad_wq[i] for i in fine]), rtol=0, atol=1e-12)


def test_a_run_that_diverges_is_an_infinite_loss_and_drawn_as_a_cross(monkeypatch):
    """A run whose logits overflow (softmax refuses them) counts as an infinite final loss;
    a rate whose median is infinite leaves the line and is drawn as a cross at the top."""
    from attention_scaling import argument
    advance = core.TrainingRun.advance

    def overflowing(run, count):
        if run.lr > 3 * core.rule_learning_rate(run.rule, run.d_k) and run.seed != 9:
            raise ValueError("logits must be finite (no NaN or infinity)")
        return advance(run, count)

    monkeypatch.setattr(core.TrainingRun, "advance", overflowing)
    sweep = core.LearningRateSweep(4, 1.0, 8, steps=10, seeds=3).run()   # seeds 8, 9, 10
    for rule, s in sweep.items():
        high = s.rates > 3 * s.equal_step
        assert np.isinf(s.median[high]).all() and np.isfinite(s.median[~high]).all()
        assert np.isinf(s.losses[high][:, [0, 2]]).all() and np.isfinite(s.losses[high][:, 1]).all()
        assert np.isfinite(s.low[high]).all() and s.best < s.rates[high].min()
    tab = argument.TrainingTab(argument.Shared())
    tab.show_sweep(sweep)
    data, top = tab.sweep_source.data, tab.figures["training-lr-sweep"].y_range.end
    for rule, s in sweep.items():
        high = s.rates > 3 * s.equal_step
        n = len(s.rates)
        assert np.isnan(np.array(data[f"final_median_{rule}"][:n])[high]).all()
        assert np.array(data[f"diverged_{rule}"][:n])[high].tolist() == [top / 1.5] * high.sum()
        assert np.isnan(np.array(data[f"diverged_{rule}"][:n])[~high]).all()


@pytest.mark.parametrize("d_k, t, n, rho", [(64, 1.0, 8, 0.0), (512, 0.5, 16, 0.5),
                                            (4096, 0.1, 2, 1.0), (1, 10.0, 3, 0.3)])
def test_one_width_s_spread_is_the_curves_own_bit_for_bit(d_k, t, n, rho):
    """gradient_spread computes its width alone (what the one draw's tab shows at every
    change); its every number is the one the curves (the Gradient tab) computed there."""
    core._width_spread.cache_clear()
    spread = core.gradient_spread(d_k, t, n, rho)
    full = core._saturation_curves(t, n, rho)[1][core.D_K_VALUES.index(d_k)]
    assert spread.keys() == full.keys()
    for k, v in full.items():
        assert np.array_equal(np.asarray(spread[k]), np.asarray(v)), k


def test_a_run_read_mid_step_gives_every_metric_over_the_same_steps():
    """What the event loop sees while the training thread is inside a step: the last seed's
    run has appended its loss, not yet its gradients. Every metric's curve covers the steps
    each run has recorded in full; reading the loss's length instead makes numpy raise
    ("inhomogeneous shape") and the server answer the Train click with an error."""
    seeded = core.start_seeds(16, "none", 7, steps=60, n_keys=8)
    seeded.advance(5)
    for run in seeded.runs[:-1]:
        run.advance(1)
    seeded.runs[-1].loss.append(0.5)                 # inside its sixth step
    for metric in ("loss", "grad_wq", "grad_wk", "log10_grad_wq", "log10_grad_wk"):
        curve = seeded.curve(metric)
        assert len(curve["median"]) == 5, metric
        assert curve["median"].tolist() == np.median(
            [getattr(run, metric)[:5] for run in seeded.runs], axis=0).tolist()
