"""The mathematics of scaled dot-product attention, in NumPy only.

Everything the explorer shows is computed here, once: the softmax and its
Jacobian, the attention logits, the gradient that reaches the query, the nested
random draws of a query and keys, the metrics printed on screen, and the seeded
Monte Carlo that places one draw among many. Higher layers (text, state, charts) call
these functions and never re-derive them. This module imports NumPy and the
standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache, lru_cache

import numpy as np

#: Widest head the explorer offers; the nested draws are made at this width.
MAX_D_K = 4096

#: Head widths on the d_k control: log-spaced from 1 to 4096, including the
#: widths real models use (64, 80, 96, 128, ...).
D_K_VALUES: tuple[int, ...] = (
    1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 80, 96, 128,
    192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096,
)

#: Softmax temperatures on the T control: log-spaced from 0.1 to 10
#: (ten steps per decade, rounded to two significant digits).
TEMPERATURES: tuple[float, ...] = tuple(
    float(f"{10 ** (k / 10):.2g}") for k in range(-10, 11)
)

#: Number of keys the query attends over (k1..k8, as in Fig. 3).
N_KEYS = 8

#: Scaling rules for the logits q . k, in the order shown: divide by 1 (none), by sqrt(d_k)
#: (the Transformer's rule) or by d_k (muP's rule, Tensor Programs V).
RULES: tuple[str, ...] = ("none", "sqrt", "linear")


def rule_divisor(rule: str, d_k: int) -> float:
    """What ``rule`` divides the logits q . k by at head width ``d_k``."""
    if rule == "none":
        return 1.0
    if rule == "sqrt":
        return math.sqrt(d_k)
    if rule == "linear":
        return float(d_k)
    raise ValueError(f"rule must be one of {RULES}, got {rule!r}")


#: Largest value any entry of a softmax Jacobian can take in absolute value:
#: the diagonal p(1 - p) peaks at 1/4 for p = 1/2, off-diagonals -p_i p_j >= -1/4.
JACOBIAN_BOUND = 0.25


def _check_temperature(temperature: float) -> float:
    try:
        t = float(temperature)
    except (TypeError, ValueError):
        raise ValueError(
            f"temperature must be a positive finite number, got {temperature!r}"
        ) from None
    if not math.isfinite(t) or t <= 0:
        raise ValueError(f"temperature must be a positive finite number, got {temperature!r}")
    return t


def softmax(logits, temperature: float = 1.0) -> np.ndarray:
    """Softmax of ``logits / temperature`` along the last axis.

    Numerically stable: the row maximum is subtracted before dividing by the
    temperature, so every exponent is <= 0 and nothing overflows, even for
    ``|logits|`` up to 1e6 and ``temperature`` down to 1e-3. Each row sums to 1.

    Raises ``ValueError`` if ``temperature`` is not a positive finite number,
    or if any logit is NaN or infinite.
    """
    t = _check_temperature(temperature)
    z = np.asarray(logits, dtype=np.float64)
    if z.size == 0:
        raise ValueError("logits must not be empty")
    if not np.all(np.isfinite(z)):
        raise ValueError("logits must be finite (no NaN or infinity)")
    shifted = (z - z.max(axis=-1, keepdims=True)) / t
    e = np.exp(shifted)
    return e / e.sum(axis=-1, keepdims=True)


def complement(probs) -> np.ndarray:
    """``1 - p_i`` for each weight of a probability vector, accurate when p_i is near 1.

    Where p_i > 1/2 it is the sum of the other weights (all positive, so no cancellation):
    ``1.0 - p_i`` would keep only the rounding of p_i, 0 for a weight within 1e-16 of 1.
    Elsewhere ``1.0 - p_i`` (at least 1/2) is correctly rounded. Works along the last axis.
    """
    p = np.asarray(probs, dtype=np.float64)
    c = 1.0 - p
    big = p > 0.5                       # at most one weight per vector
    if big.any():
        c = np.where(big, np.where(big, 0.0, p).sum(axis=-1, keepdims=True), c)
    return c


def softmax_jacobian(probs) -> np.ndarray:
    """Jacobian of the softmax with respect to its own input u: ``diag(p) - p p^T``.

    Entry (i, j) is dp_i/du_j = p_i (delta_ij - p_j) for p = softmax(u); the diagonal uses
    :func:`complement` for 1 - p_i. For p = softmax(z / T) the Jacobian with respect to
    z is this matrix divided by T.
    """
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"probs must be a 1-D probability vector, got shape {p.shape}")
    return _jacobian(p, complement(p))


def _jacobian(p: np.ndarray, c: np.ndarray) -> np.ndarray:
    jac = -np.outer(p, p)
    np.fill_diagonal(jac, p * c)
    return jac


def jacobian_diagonal(probs) -> np.ndarray:
    """The diagonal p (1 - p) of the softmax Jacobian, for probability vectors along the
    last axis (1 - p from :func:`complement`)."""
    p = np.asarray(probs, dtype=np.float64)
    return p * complement(p)


def frobenius(matrix) -> float:
    """Frobenius norm, scaled by the largest entry before squaring: entries of 1e-189
    (a saturated softmax) would square to 0 and give a norm of 0. Never below the
    largest |entry|."""
    a = np.abs(np.asarray(matrix, dtype=np.float64))
    m = float(a.max()) if a.size else 0.0
    if m == 0.0:
        return 0.0
    return m * math.sqrt(float(np.square(a / m).sum()))


def query_gradient_rows(probs, keys, scale: float, temperature: float = 1.0) -> np.ndarray:
    """||dp_i/dq|| for each weight of p = softmax(K q / (scale T)): the gradient that
    reaches the query (and through it W_Q).

    dp/dq = J K / (scale T) with J = diag(p) - p p^T, so row i is
    p_i (c_i k_i - sum_{j != i} p_j k_j) / (scale T) with c_i = 1 - p_i from
    :func:`complement` (no cancellation against p_i k_i as p_i nears 1). The weights of each
    row are divided by the largest other weight before the product and the squares, so a
    saturated softmax's 1e-189 survive.
    """
    p = np.asarray(probs, dtype=np.float64)
    return _query_rows(p, complement(p), np.asarray(keys, dtype=np.float64),
                       float(scale) * _check_temperature(temperature))


def _query_rows(p: np.ndarray, c: np.ndarray, k: np.ndarray, divisor: float) -> np.ndarray:
    mix = -np.outer(np.ones_like(p), p)                    # row i: -p_j for j != i ...
    np.fill_diagonal(mix, 0.0)
    peak = -mix.min(axis=1)                                # ... scaled by the largest of them
    mix /= np.where(peak > 0, peak, 1.0)[:, None]
    np.fill_diagonal(mix, c / np.where(peak > 0, peak, 1.0))
    rows = mix @ k                                         # row i: (c_i k_i - sum p_j k_j) / peak
    return p * peak * np.sqrt(np.einsum("ij,ij->i", rows, rows)) / divisor


def query_gradient(probs, keys, scale: float, temperature: float = 1.0) -> np.ndarray:
    """The full matrix dp/dq = J K / (scale T), shape (n, d_k) (for checks; the page shows
    the norms of :func:`query_gradient_rows`)."""
    return softmax_jacobian(probs) @ np.asarray(keys, dtype=np.float64) / (
        float(scale) * _check_temperature(temperature))


def attention_logits(query, keys, scaled: bool = True) -> np.ndarray:
    """Attention logits ``keys @ query``, divided by sqrt(d_k) when ``scaled``.

    ``query`` has shape (d_k,), ``keys`` has shape (n, d_k); the result has shape (n,).
    """
    q = np.asarray(query, dtype=np.float64)
    k = np.asarray(keys, dtype=np.float64)
    if q.ndim != 1 or k.ndim != 2 or k.shape[1] != q.shape[0]:
        raise ValueError(
            f"need query (d_k,) and keys (n, d_k); got {q.shape} and {k.shape}"
        )
    logits = k @ q
    if scaled:
        logits = logits / math.sqrt(q.shape[0])
    return logits


@lru_cache(maxsize=64)
def _full_draw(seed: int, n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    query = rng.standard_normal(MAX_D_K)
    keys = rng.standard_normal((n_keys, MAX_D_K))
    query.setflags(write=False)
    keys.setflags(write=False)
    return query, keys


def sample_qk(seed: int, d_k: int, n_keys: int = N_KEYS) -> tuple[np.ndarray, np.ndarray]:
    """A query (d_k,) and keys (n_keys, d_k) with i.i.d. N(0, 1) components.

    The draws are *nested*: the vectors at width d are the first d components
    of the vectors drawn at width 4096 from the same seed, so changing d_k
    extends the same underlying vectors instead of drawing new ones.
    Returned arrays are read-only views.
    """
    seed = int(seed)
    d_k = int(d_k)
    if not 1 <= d_k <= MAX_D_K:
        raise ValueError(f"d_k must be between 1 and {MAX_D_K}, got {d_k}")
    if seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed}")
    query, keys = _full_draw(seed, int(n_keys))
    return query[:d_k], keys[:, :d_k]


def entropy(probs) -> float:
    """Shannon entropy (in nats) of a probability vector; 0 * log 0 counts as 0. log p_i is
    log1p(-(1 - p_i)) for weights near 1, where log(p_i) would round to 0."""
    p = np.asarray(probs, dtype=np.float64)
    return _entropy(p, complement(p))


def _entropy(p: np.ndarray, c: np.ndarray) -> float:
    nz = p > 0
    logs = np.where(p > 0.5, np.log1p(-np.minimum(c, 0.5)), np.log(np.where(nz, p, 1.0)))
    return float(-(p[nz] * logs[nz]).sum())


def effective_keys(probs) -> float:
    """exp(entropy): how many keys the distribution effectively blends (1 to n)."""
    return math.exp(entropy(probs))


@dataclass(frozen=True)
class Variant:
    """One softmax over the keys: scaled or unscaled logits, with all metrics.

    With z the logits (q . k, divided by s = sqrt(d_k) when scaled) and u = z / T the
    softmax's own input: ``jacobian`` is dp/du; dp/dz is ``jacobian`` / T; the gradient that
    reaches the query is dp/dq = ``jacobian`` K / (s T)."""

    scaled: bool
    logits: np.ndarray          # z, the logits before temperature
    probs: np.ndarray           # softmax(z / T)
    jacobian: np.ndarray        # dp/du at u = z / T: diag(p) - p p^T
    diagonal: np.ndarray        # p (1 - p)
    max_weight: float
    argmax: int
    entropy: float
    effective_keys: float
    max_diagonal: float         # largest p (1 - p)
    frobenius: float            # ||dp/du||_F = ||J||_F
    logit_frobenius: float      # ||dp/dz||_F = ||J||_F / T
    rest: float                 # 1 - max weight (the sum of the other weights)
    query_rows: np.ndarray      # ||dp_i/dq|| per key
    query_gradient: float       # ||dp/dq||_F


def variant(logits, scaled: bool, temperature: float = 1.0, keys=None,
            divisor: float | None = None) -> Variant:
    """Softmax of ``logits`` at ``temperature`` and every metric shown about it. ``keys``
    (n, d_k), from which the logits came, give the gradient that reaches the query (NaN
    without them); ``divisor`` is what q . k was divided by to give ``logits`` (by default
    sqrt(d_k) when ``scaled``, else 1)."""
    z = np.asarray(logits, dtype=np.float64)
    p = softmax(z, temperature)
    c = complement(p)
    jac = _jacobian(p, c)
    diag = p * c
    top = int(p.argmax())
    h = _entropy(p, c)
    if keys is None:
        rows = np.full(len(p), np.nan)
    else:
        k = np.asarray(keys, dtype=np.float64)
        if divisor is None:
            divisor = math.sqrt(k.shape[1]) if scaled else 1.0
        rows = _query_rows(p, c, k, divisor * _check_temperature(temperature))
    return Variant(
        scaled=bool(scaled),
        logits=z,
        probs=p,
        jacobian=jac,
        diagonal=diag,
        max_weight=float(p[top]),
        argmax=top,
        entropy=h,
        effective_keys=math.exp(h),
        max_diagonal=float(diag.max()),
        frobenius=frobenius(jac),
        logit_frobenius=frobenius(jac) / _check_temperature(temperature),
        rest=float(c[top]),
        query_rows=rows,
        query_gradient=frobenius(rows),
    )


@dataclass(frozen=True)
class State:
    """Everything the explorer shows for one setting of the controls."""

    d_k: int
    temperature: float
    seed: int
    raw_logits: np.ndarray      # q . k, unscaled
    scaled: Variant
    unscaled: Variant
    widths: tuple[int, ...]     # the d_k values of the diagonal sweep (columns)
    scaled_sweep: np.ndarray    # p(1-p), shape (n_keys, len(widths)), scaled logits
    unscaled_sweep: np.ndarray  # the same for unscaled logits
    linear: Variant             # the logits divided by d_k (rule "linear")

    def by_rule(self, rule: str) -> Variant:
        """The variant of a scaling rule of :data:`RULES`."""
        return {"none": self.unscaled, "sqrt": self.scaled, "linear": self.linear}[rule]

    def active(self, scaled: bool) -> Variant:
        return self.scaled if scaled else self.unscaled

    def sweep(self, scaled: bool) -> np.ndarray:
        return self.scaled_sweep if scaled else self.unscaled_sweep


@lru_cache(maxsize=256)
def _sweep(seed: int, temperature: float, scaled: bool, widths: tuple[int, ...], n_keys: int) -> np.ndarray:
    cols = [
        softmax(attention_logits(*sample_qk(seed, w, n_keys), scaled=scaled), temperature)
        for w in widths
    ]
    out = np.ascontiguousarray(jacobian_diagonal(np.stack(cols)).T)
    out.setflags(write=False)
    return out


def diagonal_sweep(
    seed: int,
    temperature: float = 1.0,
    scaled: bool = True,
    widths=D_K_VALUES,
    n_keys: int = N_KEYS,
) -> np.ndarray:
    """p_i (1 - p_i) for every key (rows) at every width in ``widths`` (columns).

    Uses the nested draws of ``seed``, so column d is exactly the Jacobian
    diagonal the explorer shows at d_k = d. Read-only (cached per seed,
    temperature and variant).
    """
    return _sweep(int(seed), _check_temperature(temperature), bool(scaled),
                  tuple(int(w) for w in widths), int(n_keys))


#: States kept by :func:`compute_state` (a few KB each): a class exploring the same draw
#: asks for the same few hundred settings (25 widths x 21 temperatures per seed).
STATE_CACHE_SIZE = 2048


def compute_state_uncached(
    d_k: int, temperature: float = 1.0, seed: int = 0, n_keys: int = N_KEYS
) -> State:
    """One full recompute of everything shown, for a setting of the controls. Its arrays are
    read-only (states are shared, see :func:`compute_state`)."""
    query, keys = sample_qk(seed, d_k, n_keys)
    raw = attention_logits(query, keys, scaled=False)
    scaled_logits = attention_logits(query, keys, scaled=True)
    state = State(
        d_k=int(d_k),
        temperature=_check_temperature(temperature),
        seed=int(seed),
        raw_logits=raw,
        scaled=variant(scaled_logits, True, temperature, keys),
        unscaled=variant(raw, False, temperature, keys),
        widths=D_K_VALUES,
        scaled_sweep=diagonal_sweep(seed, temperature, True, D_K_VALUES, n_keys),
        unscaled_sweep=diagonal_sweep(seed, temperature, False, D_K_VALUES, n_keys),
        linear=variant(raw / d_k, True, temperature, keys, divisor=float(d_k)),
    )
    for v in (state.scaled, state.unscaled, state.linear):
        for a in (v.logits, v.probs, v.jacobian, v.diagonal, v.query_rows):
            a.setflags(write=False)
    raw.setflags(write=False)
    return state


@lru_cache(maxsize=STATE_CACHE_SIZE)
def _cached_state(d_k: int, temperature: float, seed: int, n_keys: int) -> State:
    return compute_state_uncached(d_k, temperature, seed, n_keys)


def compute_state(d_k: int, temperature: float = 1.0, seed: int = 0, n_keys: int = N_KEYS) -> State:
    """Everything shown for a setting of the controls: :func:`compute_state_uncached`, kept
    for the :data:`STATE_CACHE_SIZE` most recent settings. A state is a pure function of its
    arguments and read-only, so every session asking for the same setting shares one."""
    return _cached_state(int(d_k), _check_temperature(temperature), int(seed), int(n_keys))


def percent(x: float, below_one: bool = False) -> str:
    """A weight as the percentage printed on screen: whole numbers ("27%") except where
    rounding would print an extreme the weight does not reach: 99.5% to 99.95% gets one
    decimal ("99.9%"), above that ">99.9%"; "100%" only for exactly 1 and not
    ``below_one`` (a weight within 1e-16 of 1 is 1.0 in float64: pass ``below_one`` when it
    is known to be less, e.g. ``Variant.rest > 0``). Likewise a positive weight under 0.5% is
    "0.3%" or "<0.1%", never "0%"."""
    x = float(x)
    v = 100 * x
    whole = round(v)
    if x >= 1.0 and below_one:
        return ">99.9%"
    if x >= 1.0 or x <= 0.0 or 0 < whole < 100:
        return f"{whole}%"
    if whole >= 100:
        return ">99.9%" if v >= 99.95 else f"{v:.1f}%"
    return "<0.1%" if v < 0.05 else f"{v:.1f}%"


# ---- the distribution of draws ---------------------------------------------------------

#: Draws in the Monte Carlo behind the "typical draw" numbers, and its fixed seed.
MC_DRAWS = 20_000
MC_SEED = 20_000_016
#: Resolution of the stored distribution of the max weight: quantiles at every 0.1%.
_LEVELS = 1000


@cache
def _mc_draws(n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """The Monte Carlo's draws, without any d_k-dimensional vector: for one query q and keys
    with i.i.d. N(0, 1) components independent of q, the logits q . k_j are exactly |q| g_j
    with g_j i.i.d. N(0, 1) and |q|^2 ~ chi^2(d_k). Returns, per draw, the gaps max(g) - g_j
    of the other keys in increasing order (float32; the smallest, then each further one as
    its excess over the smallest), and |q| at every width of D_K_VALUES
    (rows), nested like the explorer's draws: |q|^2 at a width is |q|^2 at the previous one
    plus an independent chi^2 of the difference."""
    rng = np.random.default_rng(MC_SEED)
    g = rng.standard_normal((MC_DRAWS, n_keys))
    gaps = np.sort(g.max(axis=1, keepdims=True) - g, axis=1)[:, 1:].astype(np.float32)
    gaps[:, 1:] -= gaps[:, :1]          # each further gap as its excess over the smallest
    squares = np.empty((len(D_K_VALUES), MC_DRAWS))
    for row, df in zip(squares, np.diff(np.array(D_K_VALUES), prepend=0)):
        row[:] = rng.chisquare(int(df), MC_DRAWS)
    np.cumsum(squares, axis=0, out=squares)
    return gaps, np.sqrt(squares).astype(np.float32)


@dataclass(frozen=True)
class Typical:
    """The distribution of the max weight over :data:`MC_DRAWS` random draws of q and the
    keys at one (d_k, T), for each variant. Kept as quantiles (every 0.1%) of log(1 - max
    weight), which stays exact where the weight itself rounds to 1."""

    d_k: int
    temperature: float
    draws: int
    log_rest: dict              # scaled (bool) -> quantiles of log(1 - max weight), increasing
    median: dict                # scaled (bool) -> median max weight

    def percentile(self, scaled: bool, rest: float) -> float:
        """Share of the draws (in %) whose max weight is below that of a draw whose other
        weights sum to ``rest`` (1 - its max weight); ties count half. To the quantiles'
        0.1% resolution."""
        q = self.log_rest[bool(scaled)]
        x = np.float32(math.log(rest)) if rest > 0 else np.float32(-np.inf)
        left, right = np.searchsorted(q, x, side="left"), np.searchsorted(q, x, side="right")
        return float(100 * (2 * len(q) - left - right) / 2 / len(q))


@lru_cache(maxsize=None)         # at most len(D_K_VALUES) x len(TEMPERATURES), ~9 KB each
def _typical(d_k: int, temperature: float, n_keys: int) -> Typical:
    gaps, norms = _mc_draws(n_keys)
    row = norms[D_K_VALUES.index(d_k)]
    picks = np.round(np.linspace(0, MC_DRAWS - 1, _LEVELS + 1)).astype(int)
    log_rest, median = {}, {}
    for scaled in (True, False):
        c = row * np.float32(1 / ((math.sqrt(d_k) if scaled else 1.0) * temperature))
        # 1 - max weight = S / (1 + S) with S = sum_j exp(-c gap_j); log S factored around
        # the smallest gap, so that nothing underflows
        log_s = -c * gaps[:, 0] + np.log1p(np.exp(-c[:, None] * gaps[:, 1:]).sum(axis=1))
        values = np.sort(log_s - np.log1p(np.exp(log_s)))
        log_rest[scaled] = values[picks]
        log_rest[scaled].setflags(write=False)
        mid = MC_DRAWS // 2
        median[scaled] = 1 - (math.exp(float(values[mid - 1])) + math.exp(float(values[mid]))) / 2
    return Typical(d_k, temperature, MC_DRAWS, log_rest, median)


def typical(d_k: int, temperature: float = 1.0, n_keys: int = N_KEYS) -> Typical:
    """The max weight over many random draws at a width of :data:`D_K_VALUES` and a
    temperature, seeded (the same numbers every run) and computed once per setting
    (~3 ms the first time)."""
    d_k = int(d_k)
    if d_k not in D_K_VALUES:
        raise ValueError(f"d_k must be one of D_K_VALUES, got {d_k}")
    return _typical(d_k, _check_temperature(temperature), int(n_keys))
