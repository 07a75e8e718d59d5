"""The mathematics of scaled dot-product attention, in NumPy only.

Everything the explorer shows is computed here, once: the softmax and its
Jacobian, the attention logits, the nested random draws of a query and keys,
and the metrics printed on screen. Higher layers (model, charts, page) call
these functions and never re-derive them. This module imports NumPy and the
standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

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


def softmax_jacobian(probs) -> np.ndarray:
    """Jacobian of the softmax at probabilities ``p``: ``diag(p) - p p^T``.

    Entry (i, j) is dp_i/dz_j = p_i (delta_ij - p_j). For a softmax at
    temperature T the Jacobian with respect to the raw logits is this matrix
    divided by T.
    """
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"probs must be a 1-D probability vector, got shape {p.shape}")
    return np.diag(p) - np.outer(p, p)


def jacobian_diagonal(probs) -> np.ndarray:
    """The diagonal p (1 - p) of the softmax Jacobian, for any array of probabilities."""
    p = np.asarray(probs, dtype=np.float64)
    return p * (1.0 - p)


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
    """Shannon entropy (in nats) of a probability vector; 0 * log 0 counts as 0."""
    p = np.asarray(probs, dtype=np.float64)
    nz = p[p > 0]
    return float(-(nz * np.log(nz)).sum())


def effective_keys(probs) -> float:
    """exp(entropy): how many keys the distribution effectively blends (1 to n)."""
    return math.exp(entropy(probs))


@dataclass(frozen=True)
class Variant:
    """One softmax over the keys: scaled or unscaled logits, with all metrics."""

    scaled: bool
    logits: np.ndarray          # the logits before temperature
    probs: np.ndarray           # softmax(logits / T)
    jacobian: np.ndarray        # dp/dz at the softmax input: diag(p) - p p^T
    diagonal: np.ndarray        # p (1 - p)
    max_weight: float
    argmax: int
    entropy: float
    effective_keys: float
    max_diagonal: float         # largest p (1 - p)
    frobenius: float            # ||J||_F


def variant(logits, scaled: bool, temperature: float = 1.0) -> Variant:
    """Softmax of ``logits`` at ``temperature`` and every metric shown about it."""
    z = np.asarray(logits, dtype=np.float64)
    p = softmax(z, temperature)
    jac = softmax_jacobian(p)
    diag = np.diag(jac).copy()
    return Variant(
        scaled=bool(scaled),
        logits=z,
        probs=p,
        jacobian=jac,
        diagonal=diag,
        max_weight=float(p.max()),
        argmax=int(p.argmax()),
        entropy=entropy(p),
        effective_keys=effective_keys(p),
        max_diagonal=float(diag.max()),
        frobenius=float(np.linalg.norm(jac)),
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
    out = jacobian_diagonal(np.stack(cols, axis=1))
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
        scaled=variant(scaled_logits, True, temperature),
        unscaled=variant(raw, False, temperature),
        widths=D_K_VALUES,
        scaled_sweep=diagonal_sweep(seed, temperature, True, D_K_VALUES, n_keys),
        unscaled_sweep=diagonal_sweep(seed, temperature, False, D_K_VALUES, n_keys),
    )
    for v in (state.scaled, state.unscaled):
        for a in (v.logits, v.probs, v.jacobian, v.diagonal):
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


def percent(x: float) -> str:
    """A weight as the whole-number percentage printed on screen ("27%")."""
    return f"{round(100 * float(x))}%"
