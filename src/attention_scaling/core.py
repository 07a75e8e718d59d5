"""The mathematics of scaled dot-product attention, in NumPy only.

Everything the explorer shows is computed here, once: the softmax and its
Jacobian, the attention logits, the gradient that reaches the query, the nested
random draws of a query and keys, the metrics printed on screen, and the seeded
Monte Carlo that places one draw among many. Higher layers (text, state, charts) call
these functions and never re-derive them. This module imports NumPy and the
standard library only.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, lru_cache
from types import MappingProxyType
from typing import Mapping, NamedTuple, Sequence

import numpy as np

# ---- the results worth keeping: caches another process can fill ---------------------------

class NotCached(LookupError):
    """A computation that :func:`cached_only` forbids: its result is not cached here yet."""


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    maxsize: int
    currsize: int


_CALLS = threading.local()      # per thread: memo depth, cached_only, the recording list
#: Every :func:`memo` by its qualified name: what :func:`prime` fills.
MEMOS: dict[str, "Memo"] = {}
_MISSING = object()


class Memo:
    """A function's results for its ``maxsize`` most recently used arguments (positional,
    hashable), like ``functools.lru_cache``, and also filled from outside
    (:func:`prime`): a result computed in a worker process joins this process's cache.
    The outermost memoised call of a thread is what :func:`recording` records and what
    :func:`cached_only` refuses to compute."""

    def __init__(self, fn, maxsize: int) -> None:
        functools.update_wrapper(self, fn)
        self.fn, self.maxsize = fn, maxsize
        self._data: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()
        self._hits = self._misses = 0
        MEMOS[fn.__qualname__] = self

    def __call__(self, *args):
        with self._lock:
            value = self._data.get(args, _MISSING)
            if value is not _MISSING:
                self._data.move_to_end(args)
                self._hits += 1
        depth = getattr(_CALLS, "depth", 0)
        if value is _MISSING:
            if depth == 0 and getattr(_CALLS, "only", False):
                raise NotCached(self.__qualname__, args)
            _CALLS.depth = depth + 1
            try:
                value = self.fn(*args)
            finally:
                _CALLS.depth = depth
            self.put(args, value)
            with self._lock:
                self._misses += 1
        records = getattr(_CALLS, "records", None)
        if depth == 0 and records is not None:
            records.append((self.__qualname__, args, value))
        return value

    def has(self, *args) -> bool:
        with self._lock:
            return args in self._data

    def put(self, args: tuple, value) -> None:
        with self._lock:
            self._data[args] = value
            self._data.move_to_end(args)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def cache_clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._hits = self._misses = 0

    def cache_info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._misses, self.maxsize, len(self._data))


def memo(maxsize: int):
    """Decorator: the function as a :class:`Memo` of ``maxsize`` results."""
    return lambda fn: Memo(fn, maxsize)


@contextmanager
def cached_only():
    """Within the block, this thread's outermost memoised calls answer from the cache or
    raise :class:`NotCached` instead of computing (nothing heavy runs)."""
    before = getattr(_CALLS, "only", False)
    _CALLS.only = True
    try:
        yield
    finally:
        _CALLS.only = before


@contextmanager
def recording():
    """Within the block, this thread's outermost memoised calls are recorded, with their
    results: the list yielded, of (name, arguments, result), for :func:`prime`."""
    before = getattr(_CALLS, "records", None)
    _CALLS.records = records = []
    try:
        yield records
    finally:
        _CALLS.records = before


def _read_only(value):
    """``value`` with every array inside it read-only (a result unpickled from a worker
    process comes back writeable; cached results are shared by every session)."""
    if isinstance(value, np.ndarray):
        value.setflags(write=False)
    elif isinstance(value, (dict, MappingProxyType)):
        for v in value.values():
            _read_only(v)
    elif isinstance(value, (tuple, list)):
        for v in value:
            _read_only(v)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            _read_only(getattr(value, field.name))
    return value


def prime(records) -> None:
    """Put results recorded elsewhere (:func:`recording`, pickled across processes) into
    this process's caches, read-only."""
    for name, args, value in records:
        MEMOS[name].put(tuple(args), _read_only(value))


#: d_k as the page writes it where HTML cannot go (chart titles, axis labels, legends, buttons,
#: tabs, slider titles, presets, escaped text): d with Unicode's subscript k (U+2096). Prose in
#: HTML writes d<sub>k</sub>; links, CSV columns and file names keep the ASCII ``d_k``.
DK = "d\u2096"

#: Widest head the explorer offers; the nested draws are made at this width.
MAX_D_K = 4096

#: Head widths on the d_k control: log-spaced from 1 to 4096, including the
#: widths real models use (64, 80, 96, 128, ...).
D_K_VALUES: tuple[int, ...] = (
    1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 80, 96, 128,
    192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096,
)

#: Softmax temperatures on the T control: log-spaced from 0.1 to 10 (ten steps per decade,
#: rounded to two significant digits), with 1/sqrt(64) = 0.125 in place of 0.13, so that
#: the scaled chart at T = 1/sqrt(d_k) can be the unscaled one at T = 1 for d_k = 64 (as it
#: is for 1, 4 and 16).
TEMPERATURES: tuple[float, ...] = tuple(
    0.125 if k == -9 else float(f"{10 ** (k / 10):.2g}") for k in range(-10, 11)
)

#: Number of keys the query attends over (k1..k8, as in Fig. 3).
N_KEYS = 8

@dataclass(frozen=True)
class Rule:
    """A scaling rule of the logits: what it divides q . k by and how the page names and draws
    it. Every rule-dependent thing (states, curves, texts, charts, readout, downloads, the
    offline copy, the CSS of the highlighted column) is derived from :data:`RULE_TABLE`."""

    key: str                  # its value in links (?rule=) and its name in columns and fields
    exponent: float           # q . k is divided by d_k ** exponent
    label: str                # on charts, buttons and in plain text
    html: str                 # in the page's prose and table headers
    word: str                 # what the prose calls the logits the model uses under it
    color: str                # its lines, dots and bands (Okabe-Ito)
    ink: str                  # its name as text on the light page (>= 4.5:1 on white)
    ink_dark: str             # the same on the dark page
    dash: tuple[int, ...]     # its lines' dash, so that no line is told apart by colour alone
    marker: str               # its dots' marker

    def divisor(self, d_k: int) -> float:
        """What this rule divides q . k by at head width ``d_k`` (exactly sqrt for 1/2)."""
        if self.exponent == 0:
            return 1.0
        if self.exponent == 0.5:
            return math.sqrt(d_k)
        return float(d_k) ** self.exponent


#: The scaling rules, in the order shown: divide by 1 (none), by sqrt(d_k) (the Transformer's
#: rule) or by d_k (muP's rule, Tensor Programs V). A new rule is a new row.
RULE_TABLE: tuple[Rule, ...] = (
    Rule("none", 0.0, "unscaled", "unscaled", "unscaled", "#D55E00", "#B34700", "#F08A4B",
         (), "circle"),
    Rule("sqrt", 0.5, f"÷√{DK}", "÷√d<sub>k</sub>", "scaled", "#0072B2", "#0072B2", "#56B4E9",
         (6,), "square"),
    Rule("linear", 1.0, f"÷{DK}", "÷d<sub>k</sub>", f"÷{DK}", "#009E73", "#00785A", "#3FD0A0",
         (2, 4, 6, 4), "triangle"),
)
#: The rules by key, and their keys in order.
RULE = {r.key: r for r in RULE_TABLE}
RULES: tuple[str, ...] = tuple(RULE)
#: How each rule is named on the charts (:attr:`Rule.label`).
RULE_LABELS: dict[str, str] = {r.key: r.label for r in RULE_TABLE}


def as_rule(rule) -> str:
    """A rule of :data:`RULES`; ``True`` and ``False`` (scaled or not) stand for "sqrt" and
    "none"."""
    if rule is True or rule is False:
        return "sqrt" if rule else "none"
    if rule not in RULE:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    return rule


def rule_divisor(rule: str, d_k: int) -> float:
    """What ``rule`` divides the logits q . k by at head width ``d_k``."""
    return RULE[as_rule(rule)].divisor(d_k)


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


def _check_align(align: float) -> float:
    """A key's correlation with the query: a number in [0, 1] (as a float)."""
    try:
        rho = float(align)
    except (TypeError, ValueError):
        raise ValueError(f"align must be a number in [0, 1], got {align!r}") from None
    if not 0.0 <= rho <= 1.0:
        raise ValueError(f"align must be a number in [0, 1], got {align!r}")
    return rho


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


def _query_rows(p: np.ndarray, c: np.ndarray, k: np.ndarray, divisor: float) -> np.ndarray:
    """||dp_i/dq|| for each weight of p = softmax(K q / divisor): the gradient that reaches
    the query (and through it W_Q).

    dp/dq = J K / divisor with J = diag(p) - p p^T, so row i is
    p_i (c_i k_i - sum_{j != i} p_j k_j) / divisor with c_i = 1 - p_i from
    :func:`complement` (no cancellation against p_i k_i as p_i nears 1). The weights of each
    row are divided by the largest other weight before the product and the squares, so a
    saturated softmax's 1e-189 survive.
    """
    mix = -np.outer(np.ones_like(p), p)                    # row i: -p_j for j != i ...
    np.fill_diagonal(mix, 0.0)
    peak = -mix.min(axis=1)                                # ... scaled by the largest of them
    mix /= np.where(peak > 0, peak, 1.0)[:, None]
    np.fill_diagonal(mix, c / np.where(peak > 0, peak, 1.0))
    rows = mix @ k                                         # row i: (c_i k_i - sum p_j k_j) / peak
    return p * peak * np.sqrt(np.einsum("ij,ij->i", rows, rows)) / divisor


def query_gradient(probs, keys, scale: float, temperature: float = 1.0) -> np.ndarray:
    """The full matrix dp/dq = J K / (scale T), shape (n, d_k) (for checks; the page shows
    its rows' norms, :attr:`Variant.query_rows`)."""
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


@lru_cache(maxsize=16)         # per (seed, keys, alignment): up to 2.1 MB (64 keys)
def _full_draw(seed: int, n_keys: int, align: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    query = rng.standard_normal(MAX_D_K)
    keys = rng.standard_normal((n_keys, MAX_D_K))
    if align:
        keys[0] = align * query + math.sqrt(1.0 - align * align) * keys[0]
    query.setflags(write=False)
    keys.setflags(write=False)
    return query, keys


def sample_qk(seed: int, d_k: int, n_keys: int = N_KEYS,
              align: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """A query (d_k,) and keys (n_keys, d_k) with i.i.d. N(0, 1) components, except that
    with ``align`` = rho > 0 the first key is k_1 = rho q + sqrt(1 - rho^2) eps (eps the
    key drawn without alignment): still N(0, 1) per component, correlated rho with q's.

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
    query, keys = _full_draw(seed, int(n_keys), float(align))
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
    """One softmax over the keys, of the logits under one scaling rule, with all metrics.

    With z the logits (q . k divided by the rule's s: 1, sqrt(d_k) or d_k) and u = z / T the
    softmax's own input: ``jacobian`` is dp/du; dp/dz is ``jacobian`` / T; the gradient that
    reaches the query is dp/dq = ``jacobian`` K / (s T)."""

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
    # the same in log10, computed from the logits (never from p), exact far below float64's
    # range (a saturated softmax's p (1 - p) of 1e-621): see :func:`log10_metrics`
    log10_rest: float = math.nan            # log10(1 - max weight); -inf with one key
    log10_max_diagonal: float = math.nan    # log10 of the largest p (1 - p)
    log10_frobenius: float = math.nan       # log10 ||J||_F
    log10_query_gradient: float = math.nan  # log10 ||dp/dq||_F (NaN without keys)


def variant(logits, temperature: float = 1.0, keys=None, divisor: float = 1.0) -> Variant:
    """Softmax of ``logits`` at ``temperature`` and every metric shown about it. ``keys``
    (n, d_k), from which the logits came, give the gradient that reaches the query (NaN
    without them); ``divisor`` is what q . k was divided by to give ``logits`` (the rule's
    :func:`rule_divisor`)."""
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
        rows = _query_rows(p, c, np.asarray(keys, dtype=np.float64),
                           float(divisor) * _check_temperature(temperature))
    return Variant(
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
        **log10_metrics(z, temperature, keys, divisor),
    )


def log10_metrics(logits, temperature: float = 1.0, keys=None, divisor: float = 1.0) -> dict:
    """log10 of 1 - max weight, of the largest p (1 - p), of ||J||_F and of ||dp/dq||_F
    for p = softmax(``logits`` / T), from the logits relative to eps, the second-largest
    weight (as :func:`saturation_metrics`): 1 - p_top = eps sum_j w_j; p_j (1 - p_j) =
    eps w_j (1 - eps w_j) off the top; and J = eps M with M = diag(w) - eps w w^T off the
    top, M_top,j = -p_top w_j and M_top,top = p_top sum_j w_j, every entry finite, so that
    ||J||_F = eps ||M||_F and ||J K||_F = eps ||M K||_F (M K's entries are of order |K| at
    the second-largest weight's row, so their squares neither overflow nor lose it). Keys (n, d_k) as for
    :func:`variant` (the gradient is NaN without them)."""
    u = np.asarray(logits, dtype=np.float64)[None, :] / _check_temperature(temperature)
    ln10 = math.log(10)
    if u.shape[-1] == 1:
        return dict(log10_rest=-math.inf, log10_max_diagonal=-math.inf,
                    log10_frobenius=-math.inf,
                    log10_query_gradient=-math.inf if keys is not None else math.nan)
    t = _RelativeToEps(u)
    log_eps, top, eps, p_top = float(t.log_eps[0]), int(t.top[0]), float(t.eps[0, 0]), float(t.p_top[0])
    w = t.w[0]
    log_rest = log_eps + math.log(float(w.sum()))
    others = log_eps + t.log_w[0] + np.log1p(-eps * w)               # p_j (1 - p_j), j != top
    log_diag = max(float(others.max()), log_rest - float(t.log_total[0]))
    m = np.diag(w) - eps * np.outer(w, w)
    m[top, :] = m[:, top] = -p_top * w
    m[top, top] = p_top * float(w.sum())
    grad = math.nan
    if keys is not None:
        mk = m @ np.asarray(keys, dtype=np.float64)
        grad = (log_eps + 0.5 * math.log(float(np.square(mk).sum()))
                - math.log(float(divisor) * _check_temperature(temperature))) / ln10
    return dict(log10_rest=log_rest / ln10, log10_max_diagonal=log_diag / ln10,
                log10_frobenius=(log_eps + math.log(frobenius(m))) / ln10,
                log10_query_gradient=grad)


@dataclass(frozen=True)
class State:
    """Everything the explorer shows for one setting of the controls: per rule of
    :data:`RULES`, its :class:`Variant` and its sweep of p(1 - p) across widths (read-only
    mappings: states are shared between sessions)."""

    d_k: int
    temperature: float
    seed: int
    raw_logits: np.ndarray      # q . k, unscaled
    variants: Mapping[str, Variant]
    widths: tuple[int, ...]     # the d_k values of the diagonal sweeps (columns)
    sweeps: Mapping[str, np.ndarray]   # p(1-p), shape (n_keys, len(widths)), per rule
    align: float = 0.0          # rho: the first key's correlation with the query

    @property
    def scaled(self) -> Variant:
        """The ÷√d_k variant: the left bar chart of the reference figure."""
        return self.variants["sqrt"]

    @property
    def unscaled(self) -> Variant:
        """The unscaled variant: the right bar chart of the reference figure."""
        return self.variants["none"]

    def paired(self, rule) -> Variant:
        """The variant the left bar chart shows beside the unscaled one under ``rule``
        (:func:`paired_rule`)."""
        return self.variants[paired_rule(rule)]

    def active(self, rule) -> Variant:
        """The variant the model uses under ``rule`` (or scaled: True / False)."""
        return self.variants[as_rule(rule)]

    def sweep(self, rule) -> np.ndarray:
        """The p(1 - p) sweep under ``rule`` (or scaled: True / False)."""
        return self.sweeps[as_rule(rule)]

    def __reduce__(self):
        # pickled (a worker process's result) with plain dicts for its read-only mappings
        return (_state_from, (self.d_k, self.temperature, self.seed, self.raw_logits,
                              dict(self.variants), self.widths, dict(self.sweeps), self.align))


def _state_from(d_k, temperature, seed, raw_logits, variants, widths, sweeps, align) -> State:
    return State(d_k, temperature, seed, raw_logits, MappingProxyType(variants), widths,
                 MappingProxyType(sweeps), align)


def _rule_logits(query, keys, rule: str) -> np.ndarray:
    """q . k under ``rule``: the raw logits divided by :func:`rule_divisor`."""
    return attention_logits(query, keys, scaled=False) / rule_divisor(rule, query.shape[0])


@lru_cache(maxsize=384)
def _sweep(seed: int, temperature: float, rule: str, widths: tuple[int, ...], n_keys: int,
           align: float) -> np.ndarray:
    cols = [
        softmax(_rule_logits(*sample_qk(seed, w, n_keys, align), rule), temperature)
        for w in widths
    ]
    out = np.ascontiguousarray(jacobian_diagonal(np.stack(cols)).T)
    out.setflags(write=False)
    return out


def diagonal_sweep(
    seed: int,
    temperature: float = 1.0,
    scaled=True,
    widths=D_K_VALUES,
    n_keys: int = N_KEYS,
    align: float = 0.0,
) -> np.ndarray:
    """p_i (1 - p_i) for every key (rows) at every width in ``widths`` (columns), under the
    rule ``scaled`` (a rule of RULES, or True / False for "sqrt" / "none").

    Uses the nested draws of ``seed``, so column d is exactly the Jacobian
    diagonal the explorer shows at d_k = d. Read-only (cached per seed,
    temperature and rule).
    """
    return _sweep(int(seed), _check_temperature(temperature), as_rule(scaled),
                  tuple(int(w) for w in widths), int(n_keys), _check_align(align))


#: States kept by :func:`compute_state` (7 KB each with 8 keys, 0.15 MB with 64): a class
#: exploring the same draw asks for the same few hundred settings (25 widths x 21
#: temperatures per seed); 512 of them are at most 77 MB (server.CACHES_MIB).
STATE_CACHE_SIZE = 512


def compute_state_uncached(
    d_k: int, temperature: float = 1.0, seed: int = 0, n_keys: int = N_KEYS,
    align: float = 0.0,
) -> State:
    """One full recompute of everything shown, for a setting of the controls (the first key
    ``align``-correlated with the query, see :func:`sample_qk`). Its arrays are read-only
    (states are shared, see :func:`compute_state`)."""
    align = _check_align(align)
    query, keys = sample_qk(seed, d_k, n_keys, align)
    raw = attention_logits(query, keys, scaled=False)
    variants = {r: variant(_rule_logits(query, keys, r), temperature, keys,
                           rule_divisor(r, int(d_k))) for r in RULES}
    state = State(
        d_k=int(d_k),
        temperature=_check_temperature(temperature),
        seed=int(seed),
        raw_logits=raw,
        variants=MappingProxyType(variants),
        widths=D_K_VALUES,
        sweeps=MappingProxyType({r: diagonal_sweep(seed, temperature, r, D_K_VALUES, n_keys,
                                                   align) for r in RULES}),
        align=align,
    )
    for v in variants.values():
        for a in (v.logits, v.probs, v.jacobian, v.diagonal, v.query_rows):
            a.setflags(write=False)
    raw.setflags(write=False)
    return state


@memo(maxsize=STATE_CACHE_SIZE)
def _cached_state(d_k: int, temperature: float, seed: int, n_keys: int, align: float) -> State:
    return compute_state_uncached(d_k, temperature, seed, n_keys, align)


def compute_state(d_k: int, temperature: float = 1.0, seed: int = 0, n_keys: int = N_KEYS,
                  align: float = 0.0) -> State:
    """Everything shown for a setting of the controls: :func:`compute_state_uncached`, kept
    for the :data:`STATE_CACHE_SIZE` most recent settings. A state is a pure function of its
    arguments and read-only, so every session asking for the same setting shares one."""
    return _cached_state(int(d_k), _check_temperature(temperature), int(seed), int(n_keys),
                         _check_align(align))


# ---- the distribution of draws ---------------------------------------------------------

#: Draws in the Monte Carlo behind the "typical draw" numbers, and its fixed seed.
MC_DRAWS = 20_000
MC_SEED = 20_000_016
#: Resolution of the stored distribution of the max weight: quantiles at every 0.1%.
_LEVELS = 1000


def _nested_norms(rng: np.random.Generator, draws: int) -> np.ndarray:
    """|q| for ``draws`` random queries at every width of D_K_VALUES (rows), nested: |q|^2
    at a width is |q|^2 at the previous one plus an independent chi^2 of the difference."""
    squares = np.empty((len(D_K_VALUES), draws))
    for row, df in zip(squares, np.diff(np.array(D_K_VALUES), prepend=0)):
        row[:] = rng.chisquare(int(df), draws)
    np.cumsum(squares, axis=0, out=squares)
    return np.sqrt(squares)


@cache
def _mc_draws(n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """The Monte Carlo's draws, without any d_k-dimensional vector: for one query q and keys
    with i.i.d. N(0, 1) components independent of q, the logits q . k_j are exactly |q| g_j
    with g_j i.i.d. N(0, 1) and |q|^2 ~ chi^2(d_k). Returns, per draw, the gaps max(g) - g_j
    of the other keys in increasing order (float32; the smallest, then each further one as
    its excess over the smallest), and |q| at every width of D_K_VALUES (rows, float32),
    nested like the explorer's draws (:func:`_nested_norms`)."""
    rng = np.random.default_rng(MC_SEED)
    g = rng.standard_normal((MC_DRAWS, n_keys))
    gaps = np.sort(g.max(axis=1, keepdims=True) - g, axis=1)[:, 1:].astype(np.float32)
    gaps[:, 1:] -= gaps[:, :1]          # each further gap as its excess over the smallest
    return gaps, _nested_norms(rng, MC_DRAWS).astype(np.float32)


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
    #: scaled (bool) -> (low, high): the median max weight's 95% interval, from the order
    #: statistics the binomial puts 1.96 standard deviations either side of the middle
    median_range: dict

    def percentile(self, scaled: bool, log10_rest: float) -> float:
        """Share of the draws (in %) whose max weight is below that of a draw whose other
        weights sum to 10 ** ``log10_rest`` (:attr:`Variant.log10_rest`: exact where 1 - its
        max weight is below float64's range); ties count half. To the quantiles' 0.1%
        resolution."""
        q = self.log_rest[bool(scaled)]
        x = np.float32(float(log10_rest) * math.log(10))
        left, right = np.searchsorted(q, x, side="left"), np.searchsorted(q, x, side="right")
        return float(100 * (2 * len(q) - left - right) / 2 / len(q))


@cache
def _mc_aligned_draws(n_keys: int) -> np.ndarray:
    """The Monte Carlo's g (draws, n_keys), float32, keys in order: the same normals whose
    gaps :func:`_mc_draws` keeps, for draws whose first key is aligned with q."""
    g = np.random.default_rng(MC_SEED).standard_normal((MC_DRAWS, n_keys)).astype(np.float32)
    g.setflags(write=False)
    return g


def _log_rest(d_k: int, scale: float, n_keys: int, align: float) -> np.ndarray:
    """log(1 - max weight) of every Monte Carlo draw, sorted, the softmax inputs being
    ``scale`` q . k_j (q . k_j = |q| g_j; with ``align`` = rho, q . k_1 = |q| (rho |q| +
    sqrt(1 - rho^2) g_1))."""
    gaps, norms = _mc_draws(n_keys)
    row = norms[D_K_VALUES.index(d_k)]
    c = row * np.float32(scale)
    if not align:
        # 1 - max weight = S / (1 + S) with S = sum_j exp(-c gap_j); log S factored around
        # the smallest gap, so that nothing underflows
        log_s = -c * gaps[:, 0] + np.log1p(np.exp(-c[:, None] * gaps[:, 1:]).sum(axis=1))
    else:
        along = np.array(_mc_aligned_draws(n_keys))
        along[:, 0] = np.float32(align) * row + np.float32(math.sqrt(1 - align * align)) * along[:, 0]
        u = c[:, None] * along
        top = u.argmax(axis=1)
        u_top = np.take_along_axis(u, top[:, None], 1)
        others = np.where(np.arange(n_keys) == top[:, None], -np.inf, u)
        u_second = others.max(axis=1, keepdims=True)
        log_s = ((u_second - u_top)[:, 0]
                 + np.log(np.exp(others - u_second).sum(axis=1)))
    return np.sort(log_s - np.log1p(np.exp(log_s)))


@memo(maxsize=4096)         # per (d_k, T, keys, alignment), ~9 KB each
def _typical(d_k: int, temperature: float, n_keys: int, align: float = 0.0) -> Typical:
    picks = np.round(np.linspace(0, MC_DRAWS - 1, _LEVELS + 1)).astype(int)
    log_rest, median, median_range = {}, {}, {}
    mid, (lo, hi) = MC_DRAWS // 2, median_ranks(MC_DRAWS)
    for scaled in (True, False):
        values = _log_rest(d_k, 1 / ((math.sqrt(d_k) if scaled else 1.0) * temperature),
                           n_keys, align)
        log_rest[scaled] = values[picks]
        log_rest[scaled].setflags(write=False)
        median[scaled] = 1 - (math.exp(float(values[mid - 1])) + math.exp(float(values[mid]))) / 2
        # log(1 - w) increases as the weight w falls
        median_range[scaled] = (1 - math.exp(float(values[hi])),
                                1 - math.exp(float(values[lo])))
    return Typical(d_k, temperature, MC_DRAWS, log_rest, median, median_range)


def typical(d_k: int, temperature: float = 1.0, n_keys: int = N_KEYS,
            align: float = 0.0) -> Typical:
    """The max weight over many random draws at a width of :data:`D_K_VALUES` and a
    temperature (the first key ``align``-correlated with the query), seeded (the same
    numbers every run) and computed once per setting (~3 ms the first time)."""
    d_k = int(d_k)
    if d_k not in D_K_VALUES:
        raise ValueError(f"d_k must be one of D_K_VALUES, got {d_k}")
    return _typical(d_k, _check_temperature(temperature), int(n_keys), _check_align(align))


# ---- the argument over many draws: saturation curves, logits, head budget ---------------

#: Draws per width behind the saturation curves and the head budget, and their fixed seed.
CURVE_DRAWS = 2_000
CURVE_SEED = 20_000_018
#: Key counts and alignments the argument's controls offer.
KEY_COUNTS: tuple[int, ...] = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
ALIGNMENTS: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(11))


#: The widths whose R has fewer rows than keys (d_k - 1 < n), and so a partial column sum.
def _partial_rows(n_keys: int) -> tuple[int, ...]:
    return tuple(sorted({d - 1 for d in D_K_VALUES if d - 1 < n_keys}))


@lru_cache(maxsize=2)
def _curve_draws(n_keys: int) -> tuple[np.ndarray, ...]:
    """The draws behind the curves, with no d_k-dimensional vector (THE-ARGUMENT 12).

    Write each key as k_j = a_j q/|q| + k_j^perp. For keys independent of q, a_j ~ N(0, 1)
    and the logit is q . k_j = |q| a_j. The gradient to the query, J K / (s T), splits into
    the part along q, J a, and the part across it, J K^perp, with ||J K^perp||_F^2 =
    tr(J S J) for S = K^perp K^perp^T ~ Wishart(d_k - 1, I_n). Bartlett's decomposition
    S = R^T R has R with rows k < d_k - 1 only, R_kk^2 ~ chi^2(d_k - 1 - k), N(0, 1) right of
    the diagonal, 0 left of it, all independent; so ||J K^perp||_F^2 = sum_k ||J r_k||^2.

    Returns, in float32 (the curves' medians move by < 1e-4 in log10 of the gradient and
    < 1e-6 in weight against float64): a (draws, n); |q| (widths, draws); R's diagonal at
    every width (widths, draws, n; 0 for the rows a width does not have); the normals right
    of R's diagonal, transposed (draws, j, k: nonzero for k < j); and their column sums of
    squares over the first m rows for each m of :func:`_partial_rows` and m = n (m, draws,
    j). All nested across widths."""
    rng = np.random.default_rng(CURVE_SEED + n_keys)
    a = rng.standard_normal((CURVE_DRAWS, n_keys))
    norms = _nested_norms(rng, CURVE_DRAWS)
    upper_t = rng.standard_normal((CURVE_DRAWS, n_keys, n_keys), dtype=np.float32)
    upper_t *= np.tri(n_keys, k=-1, dtype=np.float32)
    diag = np.empty((len(D_K_VALUES), CURVE_DRAWS, n_keys), dtype=np.float32)
    prev = np.zeros(n_keys, dtype=int)
    acc = np.zeros((CURVE_DRAWS, n_keys))
    for w, d in enumerate(D_K_VALUES):
        df = np.maximum(d - 1 - np.arange(n_keys), 0)
        for k in np.flatnonzero(df > prev):
            acc[:, k] += rng.chisquare(int(df[k] - prev[k]), CURVE_DRAWS)
        diag[w] = np.sqrt(acc)
        prev = df
    squares = np.square(upper_t)
    counts = (*_partial_rows(n_keys), n_keys)
    col_sq = np.zeros((len(counts), CURVE_DRAWS, n_keys), dtype=np.float32)
    for i, (start, stop) in enumerate(zip((0, *counts), counts)):
        col_sq[i] = (col_sq[i - 1] if i else 0) + squares[:, :, start:stop].sum(axis=2)
    out = (a.astype(np.float32), norms.astype(np.float32), diag, upper_t, col_sq)
    for arr in out:
        arr.setflags(write=False)
    return out


class _RelativeToEps:
    """A softmax p = softmax(u) along the last axis, seen relative to eps, its second-largest
    weight, so that nothing underflows where it saturates: p_top, log eps (exact from the
    inputs), w_j = p_j / eps off the top (0 at the top), w_top = -(sum of the others) in
    ``w_hat``, omega = w^2 and c = sum omega; also the entropy."""

    def __init__(self, u: np.ndarray) -> None:
        n = u.shape[-1]
        self.top = top = u.argmax(axis=-1)
        self.is_top = is_top = np.arange(n) == top[..., None]
        u_top = np.take_along_axis(u, top[..., None], -1)
        shifted = u - u_top                                    # <= 0, 0 at the top
        e = np.exp(shifted)
        total = e.sum(axis=-1)
        self.log_total = np.log(total)
        self.p_top = 1.0 / total
        self.entropy = self.log_total - (e * shifted).sum(axis=-1) / total
        masked = np.where(is_top, -np.inf, u)
        u_second = masked.max(axis=-1, keepdims=True)
        self.log_eps = (u_second - u_top)[..., 0] - self.log_total
        self.log_w = masked - u_second                         # log(p_j / eps), -inf at the top
        self.w = w = np.exp(self.log_w)
        self.w_hat = np.where(is_top, -w.sum(axis=-1, keepdims=True), w)
        self.eps = np.exp(self.log_eps)[..., None]
        self.omega = w * w
        self.c = self.omega.sum(axis=-1, keepdims=True)

    def along_sq(self, x: np.ndarray) -> np.ndarray:
        """||J x||^2 / eps^2 for vectors x along the last axis (J = diag(p) - p p^T, kept
        dimension): (J x)_top = eps p_top y and (J x)_j = eps w_j (x_j - b), with
        y = -w_hat . x and b = x_top - eps y."""
        omega = self.omega
        y = -(self.w_hat * x).sum(-1, keepdims=True)
        b = np.take_along_axis(x, self.top[..., None], -1) - self.eps * y
        return self.p_top[..., None] ** 2 * y * y + np.maximum(
            (omega * x * x).sum(-1, keepdims=True) - 2 * b * (omega * x).sum(-1, keepdims=True)
            + b * b * self.c, 0.0)



def saturation_metrics(u: np.ndarray, along: np.ndarray, divisor: np.ndarray,
                       upper: np.ndarray | None = None, diag: np.ndarray | None = None,
                       rows: np.ndarray | None = None, col_sq: np.ndarray | None = None,
                       upper_t: np.ndarray | None = None) -> dict:
    """Max weight, effective keys and log10 ||dp/dq||_F for groups of draws.

    ``u`` (groups, draws, n) are the softmax inputs z / T; ``along`` (same shape) the keys'
    components along the query; ``divisor`` (groups,) is s T. Across the query the keys are
    given by Bartlett's R = ``upper`` (draws, n, n) + diag(``diag`` (groups, draws, n)), of
    which only the ``rows`` (groups, n) exist (None: nothing across); ``col_sq`` (groups,
    draws, n) and ``upper_t`` (``upper`` transposed, contiguous), if at hand, are the sums of
    squares of ``upper``'s columns over those rows and the transposed matrix. Any float
    dtype: the arithmetic stays in the inputs' precision.

    Computed relative to eps, the second-largest weight, so that nothing underflows where
    the softmax saturates: with w_j = p_j / eps off the top and w_top = -(sum of the others),
    (J x)_top = eps p_top y and (J x)_j = eps w_j (x_j - x_top + eps y), y = -w . x. Summed
    over R's rows x = r_k this needs only R w, R w^2, R's column at the top and R's column
    sums of squares: sum_k ||J r_k||^2 / eps^2 = p_top^2 |R w|^2 + sum_j w_j^2 |R_j|^2
    - 2 (R v) . (R w^2) + (sum_j w_j^2) |R v|^2, with v = e_top + eps w."""
    t = _RelativeToEps(u)
    total_sq = t.along_sq(along)[..., 0]
    if rows is not None and rows.any():
        total_sq = total_sq + _across_query(u, t.top, t.is_top, t.w_hat, t.omega, t.eps,
                                            t.p_top, t.c, upper, diag, rows, col_sq, upper_t)
    log_grad = t.log_eps + 0.5 * np.log(total_sq) - np.log(np.asarray(divisor))[:, None]
    return dict(max_weight=t.p_top, eff_keys=np.exp(t.entropy),
                log10_grad_q=log_grad / math.log(10))


def _across_query(u, top, is_top, w_hat, omega, eps, p_top, c, upper, diag, rows, col_sq,
                  upper_t) -> np.ndarray:
    """:func:`saturation_metrics`' sum over R's rows of ||J r_k||^2 / eps^2 (see there), never
    below 0."""
    d = u.shape[1]
    if upper_t is None:
        upper_t = np.ascontiguousarray(upper.transpose(0, 2, 1))  # (draws, j, k)
    present = rows[:, None, :].astype(u.dtype)
    if col_sq is None:
        col_sq = np.einsum("djk,gk->gdj", upper_t * upper_t, present[:, 0])

    # (R v)_k over the rows that exist for v = w and w^2: one vector-matrix product per group
    # and draw, so that a group's numbers do not depend on how many groups share the job (a
    # BLAS product of many rows at once may add in another order as their count changes; one
    # width's spread is then the curves' bit for bit on every CPU)
    g = u.shape[0]
    v = np.concatenate([w_hat, omega])
    r_both = (np.matmul(v[:, :, None, :], upper_t)[:, :, 0]
              + np.concatenate([diag, diag]) * v) * np.concatenate([present, present])
    r_w, r_omega = r_both[:g], r_both[g:]                          # -y_k, (R w^2)_k
    r_top = (upper_t[np.arange(d)[None, :], top] + np.where(is_top, diag, 0.0)) * present
    r_v = r_top + eps * r_w                                        # b_k = (R v)_k

    def dot(p, q):
        return np.einsum("gdn,gdn->gd", p, q)

    across = (p_top ** 2 * dot(r_w, r_w) + dot(omega, col_sq + diag * diag)
              - 2 * dot(r_v, r_omega) + c[..., 0] * dot(r_v, r_v))
    return np.maximum(across, 0.0)


#: The Monte Carlo runs in jobs of a few widths and a slice of the draws, each job's arrays
#: about _JOB_ELEMENTS floats (~1 MB in float32), so that its ~30 element-wise passes stay in
#: the CPU's cache (at 64 keys 1.6x faster than six jobs of all the draws); the jobs share
#: threads (NumPy's array work runs outside Python's lock).
_WIDTH_BATCHES = 3
_JOB_ELEMENTS = 1 << 18
_CURVE_THREADS = 2


def _curve_batch(batch: range, draws: slice, temperature: float, n_keys: int,
                 align: float) -> dict:
    """:func:`saturation_metrics` at the widths ``batch`` (indices into D_K_VALUES) for the
    ``draws`` of the curves' draws, every rule: metric -> (widths * rules, draws), the
    gradient's as log10."""
    a_all, norms, diag_all, upper_all, col_sq_all = _curve_draws(n_keys)
    a, upper_t = a_all[draws], upper_all[draws]
    partial = _partial_rows(n_keys)
    rest = math.sqrt(max(0.0, 1.0 - align * align))
    n_rules = len(RULES)
    widths = np.array([D_K_VALUES[w] for w in batch])
    norm = norms[batch.start:batch.stop, draws][:, :, None]           # (widths, draws, 1)
    along = np.broadcast_to(a, norm.shape[:2] + (n_keys,)).copy()
    # the aligned key k_1 = rho q + sqrt(1 - rho^2) eps: along q, rho |q| + sqrt(.) eps
    along[:, :, 0] = align * norm[:, :, 0] + rest * a[:, 0]
    divisors = (np.array([[rule_divisor(r, int(d)) for r in RULES] for d in widths])
                * temperature).ravel().astype(np.float32)            # (widths * rules,)
    u = np.repeat(norm * along, n_rules, axis=0) / divisors[:, None, None]
    diag_b = np.repeat(diag_all[batch.start:batch.stop, draws], n_rules, axis=0)
    diag_b[:, :, 0] *= rest                       # the aligned key's part across q
    n_rows = np.minimum(np.maximum(widths - 1, 0), n_keys)             # rows of R per width
    col_sq = np.repeat(col_sq_all[[partial.index(m) if m < n_keys else len(partial)
                                   for m in n_rows]][:, draws], n_rules, axis=0)
    present = np.repeat(np.arange(n_keys)[None, :] < n_rows[:, None], n_rules, axis=0)
    m = saturation_metrics(u, np.repeat(along, n_rules, axis=0), divisors, diag=diag_b,
                           rows=present, col_sq=col_sq, upper_t=upper_t)
    return {"max_weight": m["max_weight"], "eff_keys": m["eff_keys"],
            "grad_q": m["log10_grad_q"]}


#: Resamples of the bootstrap behind the standard error of the gradient's median, its seed,
#: and the log10 bins of :func:`gradient_spread`'s histograms.
BOOTSTRAP_RESAMPLES = 200
BOOTSTRAP_SEED = 20_000_020
GRAD_BINS = 48
#: The quantiles :func:`gradient_spread` reports, by name.
SPREAD_QUANTILES = {"q05": 0.05, "q25": 0.25, "median": 0.5, "q75": 0.75, "q95": 0.95}


@cache
def _bootstrap_ranks() -> np.ndarray:
    """For each bootstrap resample of the :data:`CURVE_DRAWS` draws, the ranks (in the sorted
    draws) of the two middle values of the resample, whose mean is its median: the same for
    every width and rule, since a resample's order statistics are those of the sorted draws
    at its sorted indices."""
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    picks = np.sort(rng.integers(0, CURVE_DRAWS, (BOOTSTRAP_RESAMPLES, CURVE_DRAWS)), axis=1)
    ranks = picks[:, [(CURVE_DRAWS - 1) // 2, CURVE_DRAWS // 2]]
    ranks.setflags(write=False)
    return ranks


def _spread(grad: np.ndarray, d_k: int) -> dict:
    """From log10 ||dp/dq||_F (rules, draws) at width ``d_k``: per rule the quantiles of
    :data:`SPREAD_QUANTILES`, the bootstrap standard error of the median, the shares of the
    draws below a tenth and a hundredth of the ÷√d_k median, below a tenth of it in the
    logits' step at the equal-step rates (``equal_step_share``: an SGD step on W_Q at the
    rule's :func:`rule_learning_rate` moves a logit by the gradient to the query times
    lr·√d_k/s, against ÷√d_k's median's step) and below a tenth of the rule's own median,
    and histograms over shared edges."""
    values = np.sort(grad, axis=1)
    q = np.quantile(values, list(SPREAD_QUANTILES.values()), axis=1)     # (quantiles, rules)
    ranks = _bootstrap_ranks()
    boot = values[:, ranks].mean(axis=2)                                   # (rules, resamples)
    ref = q[2, RULES.index("sqrt")]
    lo, hi = float(values[:, 0].min()), float(values[:, -1].max())
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    edges = np.linspace(lo, hi, GRAD_BINS + 1)
    out = {"edges": edges}
    for k, r in enumerate(RULES):
        for i, name in enumerate(SPREAD_QUANTILES):
            out[f"{name}_{r}"] = float(q[i, k])
        out[f"median_se_{r}"] = float(boot[k].std())
        out[f"frozen_share_{r}"] = float(np.mean(values[k] < ref - 1))
        out[f"frozen100_share_{r}"] = float(np.mean(values[k] < ref - 2))
        out[f"spread_share_{r}"] = float(np.mean(values[k] < q[2, k] - 1))
        # a logit's step from an SGD step on W_Q: lr·|x|²·(dL/dq)·k/s, so at the equal-step
        # rates the gradient to the query times lr·√d_k/s = d_k^(e - 1/2) against ÷√d_k's
        shift = 0.5 * math.log10(rule_learning_rate(r, d_k) / rule_learning_rate("sqrt", d_k))
        out[f"equal_step_share_{r}"] = float(np.mean(values[k] + shift < ref - 1))
        out[f"counts_{r}"] = np.histogram(values[k], bins=edges)[0].astype(float)
    for v in out.values():
        if isinstance(v, np.ndarray):
            v.setflags(write=False)
    return out


def median_ranks(n: int) -> tuple[int, int]:
    """The ranks (0-based, in increasing order) of the order statistics that bound the median
    of ``n`` draws with 95% confidence: those the binomial puts 1.96 standard deviations
    either side of the middle."""
    mid, k = n // 2, math.ceil(1.96 * math.sqrt(n) / 2)
    return mid - 1 - k, mid + k


def median_bounds(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The median's 95% interval of each row of ``values`` (groups, draws), by
    :func:`median_ranks`."""
    lo, hi = median_ranks(values.shape[1])
    ordered = np.partition(values, (lo, hi), axis=1)
    return ordered[:, lo], ordered[:, hi]


def _quartiles(parts: list[dict], batch: range, stats: dict, spreads: dict) -> None:
    """Into ``stats``: per group (width of ``batch`` x rule) the quartiles over all the draws
    of the jobs ``parts`` (:func:`_curve_batch`), in float64, the gradient's also in log10;
    into ``spreads``, per width of ``batch``, the gradient's :func:`_spread`."""
    for metric in parts[0]:
        values = np.concatenate([p[metric] for p in parts], axis=1).astype(np.float64)
        q = np.quantile(values, [0.25, 0.5, 0.75], axis=1)
        names = [metric]
        if metric == "max_weight":
            lo, hi = median_bounds(values)
            for g, (w, r) in enumerate((w, r) for w in batch for r in RULES):
                stats[f"max_weight_median_lo_{r}"][w] = lo[g]
                stats[f"max_weight_median_hi_{r}"][w] = hi[g]
        if metric == "grad_q":
            names.append("log10_grad_q")
            for i, w in enumerate(batch):
                spreads[w] = _spread(values[i * len(RULES):(i + 1) * len(RULES)], D_K_VALUES[w])
        for name in names:
            shown = 10.0 ** q if name == "grad_q" else q
            for g, (w, r) in enumerate((w, r) for w in batch for r in RULES):
                stats[f"{name}_q25_{r}"][w], stats[f"{name}_median_{r}"][w], \
                    stats[f"{name}_q75_{r}"][w] = shown[:, g]


#: The per-width columns :func:`saturation_curves` takes from :func:`_spread`.
_SPREAD_COLUMNS = ("frozen_share", "frozen100_share", "spread_share", "equal_step_share")


def _spread_columns(spreads: dict) -> dict:
    """Per width (``spreads``: width index -> :func:`_spread`), the columns of
    :func:`saturation_curves` taken from the gradient's spread."""
    names = {f"log10_grad_q_median_se_{r}": f"median_se_{r}" for r in RULES}
    names.update({f"{name}_{r}": f"{name}_{r}" for name in _SPREAD_COLUMNS for r in RULES})
    return {col: np.array([spreads[w][key] for w in range(len(D_K_VALUES))])
            for col, key in names.items()}


@memo(maxsize=256)      # per (T, keys, alignment): ~60 KB each
def _saturation_curves(temperature: float, n_keys: int, align: float) -> tuple[dict, tuple]:
    stats = {f"{m}_{q}_{r}": np.empty(len(D_K_VALUES)) for m in ("max_weight", "eff_keys",
             "grad_q", "log10_grad_q") for q in ("median", "q25", "q75") for r in RULES}
    stats.update({f"max_weight_{q}_{r}": np.empty(len(D_K_VALUES))
                  for q in ("median_lo", "median_hi") for r in RULES})
    batches = [range(int(b[0]), int(b[-1]) + 1)
               for b in np.array_split(np.arange(len(D_K_VALUES)), _WIDTH_BATCHES)]
    per_draw = max(len(b) for b in batches) * len(RULES) * n_keys
    chunks = [slice(int(c[0]), int(c[-1]) + 1) for c in np.array_split(
        np.arange(CURVE_DRAWS), max(1, math.ceil(per_draw * CURVE_DRAWS / _JOB_ELEMENTS)))]
    jobs = [(b, c) for b in batches for c in chunks]
    with ThreadPoolExecutor(_CURVE_THREADS) as pool:
        results = list(pool.map(lambda j: _curve_batch(*j, temperature, n_keys, align), jobs))
    spreads: dict = {}
    for i, batch in enumerate(batches):
        _quartiles(results[i * len(chunks):(i + 1) * len(chunks)], batch, stats, spreads)
    stats.update(_spread_columns(spreads))
    cols = {"d_k": np.array(D_K_VALUES, dtype=float), **stats}
    for v in cols.values():
        v.setflags(write=False)
    return cols, tuple(spreads[w] for w in range(len(D_K_VALUES)))


def _check_choice(name: str, value, options) -> None:
    if value not in options:
        raise ValueError(f"{name} must be one of {options}, got {value!r}")


def paired_rule(rule) -> str:
    """The rule the reference figure's left bar chart shows beside the unscaled one (the
    right): the model's rule where it divides q . k by a power of d_k, ÷√d_k where the model
    is unscaled."""
    rule = as_rule(rule)
    return "sqrt" if RULE[rule].exponent == 0 else rule


def unscaled_below_from(curves: dict) -> int | None:
    """The index in :data:`D_K_VALUES` of the first width from which on, to the widest, the
    unscaled median gradient to the query is below the ÷√d_k one (``curves``:
    :func:`saturation_curves`); None if it is not below at the widest. The search starts at
    d_k = 2: at 1 every rule divides by 1."""
    below = (np.asarray(curves["log10_grad_q_median_none"], float)
             < np.asarray(curves["log10_grad_q_median_sqrt"], float))
    return next((k for k in range(1, len(below)) if below[k:].all()), None)


def saturation_curves(temperature: float = 1.0, n_keys: int = N_KEYS, align: float = 0.0) -> dict:
    """Median and quartiles, over :data:`CURVE_DRAWS` random draws at every width of
    :data:`D_K_VALUES`, of the max weight, the effective number of keys and the gradient
    reaching the query ||dp/dq||_F, under each scaling rule of :data:`RULES`: columns ``d_k``
    and ``<metric>_<median|q25|q75>_<rule>`` for metric ``max_weight``, ``eff_keys``,
    ``grad_q`` and ``log10_grad_q`` (the gradient in log10: exact where ``grad_q``, a power
    of ten, underflows to 0); the max weight's median's 95% interval
    (``max_weight_median_lo_<rule>``, ``max_weight_median_hi_<rule>``, :func:`median_bounds`);
    per width the gradient median's bootstrap standard error in
    decades (``log10_grad_q_median_se_<rule>``) and the shares of the draws below a tenth
    (``frozen_share_<rule>``) and a hundredth (``frozen100_share_<rule>``) of the ÷√d_k
    median, below a tenth of it in the logits' step at the equal-step rates
    (``equal_step_share_<rule>``: the gradient times lr·√d_k/s at the rule's
    :func:`rule_learning_rate`, against ÷√d_k's median's) and below a tenth of the rule's own median (``spread_share_<rule>``), see
    :func:`gradient_spread`. The first key is correlated with the query by ``align`` (rho: k_1 = rho q +
    sqrt(1 - rho^2) eps), the others are independent. Seeded and cached per setting; the
    gradient is exact without d_k-dimensional vectors (see ``_curve_draws``)."""
    _check_choice("n_keys", int(n_keys), KEY_COUNTS)
    _check_choice("align", float(align), ALIGNMENTS)
    return _saturation_curves(_check_temperature(temperature), int(n_keys), float(align))[0]


def gradient_spread(d_k: int, temperature: float = 1.0, n_keys: int = N_KEYS,
                    align: float = 0.0) -> dict:
    """The distribution of log10 ||dp/dq||_F over the :data:`CURVE_DRAWS` draws of
    :func:`saturation_curves` at one width of :data:`D_K_VALUES`, per rule: ``edges``
    (:data:`GRAD_BINS` + 1, log10, shared by the rules) and ``counts_<rule>`` (a histogram
    of every draw); ``q05|q25|median|q75|q95_<rule>`` (log10) and ``median_se_<rule>`` (the
    median's bootstrap standard error, in decades); the shares of the draws below a tenth
    (``frozen_share_<rule>``) and a hundredth (``frozen100_share_<rule>``) of the ÷√d_k
    median, below a tenth of it at the equal-step rates (``equal_step_share_<rule>``), and
    below a tenth of the rule's own median (``spread_share_<rule>``). Cached
    with the curves; arrays read-only."""
    _check_choice("d_k", int(d_k), D_K_VALUES)
    _check_choice("n_keys", int(n_keys), KEY_COUNTS)
    _check_choice("align", float(align), ALIGNMENTS)
    return dict(_width_spread(int(d_k), _check_temperature(temperature), int(n_keys),
                              float(align)))


@memo(maxsize=1024)     # per (width, T, keys, alignment): ~4 KB each
def _width_spread(d_k: int, temperature: float, n_keys: int, align: float) -> dict:
    """:func:`gradient_spread` at one width from that width's draws alone (the values of
    :func:`saturation_curves` at it, bit for bit, at ~1/25 of their cost: the one draw's tab
    shows it at every change of T, n or rho)."""
    i = D_K_VALUES.index(d_k)
    chunks = [slice(int(c[0]), int(c[-1]) + 1) for c in np.array_split(
        np.arange(CURVE_DRAWS), max(1, math.ceil(len(RULES) * n_keys * CURVE_DRAWS
                                                 / _JOB_ELEMENTS)))]
    grad = np.concatenate([_curve_batch(range(i, i + 1), c, temperature, n_keys, align)["grad_q"]
                           for c in chunks], axis=1).astype(np.float64)
    return _spread(grad, d_k)


def head_budget(width: int = 512, temperature: float = 1.0, n_keys: int = N_KEYS,
                align: float = 0.0) -> dict:
    """One model width split into h = 1, 2, 4, ... heads of d_k = width / h: per rule, the
    median max weight (and its 95% interval) and gradient to the query of one head (from
    :func:`saturation_curves`). Columns ``heads``, ``d_k``, ``max_weight_median_<rule>``,
    ``max_weight_median_lo|hi_<rule>``, ``grad_q_median_<rule>``,
    ``log10_grad_q_median_<rule>`` (the same in log10, where the other underflows to 0) and
    ``log10_grad_q_median_se_<rule>`` (its standard error)."""
    width = int(width)
    curves = saturation_curves(temperature, n_keys, align)
    heads = [h for h in (2 ** i for i in range(13)) if width % h == 0
             and width // h in D_K_VALUES]
    if not heads:
        raise ValueError(f"width must be a power-of-two multiple of a width in D_K_VALUES, got {width}")
    idx = [D_K_VALUES.index(width // h) for h in heads]
    out = {"heads": np.array(heads, dtype=float),
           "d_k": np.array([width // h for h in heads], dtype=float)}
    for r in RULES:
        for m in ("max_weight_median", "max_weight_median_lo", "max_weight_median_hi",
                  "grad_q_median", "log10_grad_q_median", "log10_grad_q_median_se"):
            out[f"{m}_{r}"] = curves[f"{m}_{r}"][idx]
    return out


# ---- the logits over many draws -------------------------------------------------------

#: Draws behind the logit histogram and the spread of q . k against d_k.
LOGIT_DRAWS = 20_000
LOGIT_SEED = 20_000_019
#: Bins of the logit histograms.
LOGIT_BINS = 40


@cache
def _logit_draws() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(LOGIT_SEED)
    g = rng.standard_normal(LOGIT_DRAWS)
    norms = _nested_norms(rng, LOGIT_DRAWS)
    g.setflags(write=False)
    norms.setflags(write=False)
    return g, norms


@memo(maxsize=len(D_K_VALUES))
def _logit_distribution(d_k: int) -> dict:
    g, norms = _logit_draws()
    raw = norms[D_K_VALUES.index(d_k)] * g                 # q . k = |q| g, exactly
    out: dict = {}
    for r in RULES:
        z = raw / rule_divisor(r, d_k)
        out[f"std_{r}"] = float(z.std())
        lim = float(np.quantile(np.abs(z), 0.999))
        counts, edges = np.histogram(z, bins=LOGIT_BINS, range=(-lim, lim), density=True)
        out[f"counts_{r}"], out[f"edges_{r}"] = counts, edges
    return out


def logit_distribution(d_k: int) -> dict:
    """q . k for :data:`LOGIT_DRAWS` random draws of a query and a key with i.i.d. N(0, 1)
    components at width ``d_k`` (as |q| g): the measured standard deviation under each rule
    (``std_<rule>``) and histograms (density, :data:`LOGIT_BINS` bins over the middle 99.9%)
    of the logits under each rule (``counts_<rule>``, ``edges_<rule>``). Seeded: the same numbers every run."""
    _check_choice("d_k", int(d_k), D_K_VALUES)
    return _logit_distribution(int(d_k))


@memo(maxsize=1)
def logit_std_curve() -> dict:
    """The measured standard deviation of q . k at every width (``d_k``, ``std_raw``), from
    the draws of :func:`logit_distribution`."""
    g, norms = _logit_draws()
    return {"d_k": np.array(D_K_VALUES, dtype=float),
            "std_raw": np.array([float((row * g).std()) for row in norms])}


def draw_metrics(d_k: int, temperature: float, seed: int, n_keys: int = N_KEYS,
                 align: float = 0.0) -> dict:
    """One draw (the explorer's nested q and keys of ``seed``; the first key made
    ``align``-correlated with q) under each rule: rule -> :class:`Variant`, the variants of
    :func:`compute_state` at this setting."""
    state = compute_state(d_k, temperature, seed, n_keys, align)
    return dict(state.variants)


# ---- training: one attention head, plain NumPy --------------------------------------------

#: The toy task: width of the tokens, batch size, noise on the query, and plain SGD's base
#: rate (the rate of ÷√d_k; each rule trains at rule_learning_rate of it).
TRAIN_D_MODEL = 16
TRAIN_BATCH = 32
TRAIN_NOISE = 0.5
TRAIN_LR = 1.0
#: A run's result: the mean loss of its last TRAIN_TAIL steps (one batch's loss is noise),
#: over TRAIN_SEEDS seeds (seed, seed + 1, ...).
TRAIN_TAIL = 50
TRAIN_SEEDS = 3


def rule_learning_rate(rule: str, d_k: int, base: float = TRAIN_LR) -> float:
    """base · s²/d_k (s the rule's divisor at ``d_k``): the rate that gives every rule the same
    logit step. One SGD step on W_Q moves a logit q·k/s by about lr·|x|²(k·k)/s², in
    proportion to lr·d_k/s², so at this rate every rule's step is base's (THE-ARGUMENT.md,
    point 14): unscaled base/d_k, ÷√d_k base, ÷d_k base·d_k."""
    exponent = RULE[as_rule(rule)].exponent        # s = d_k ** exponent, s²/d_k exactly:
    return float(base) * float(int(d_k)) ** (2 * exponent - 1)


def attention_loss(w_q, w_k, tokens, query_tokens, targets, rule: str,
                   temperature: float = 1.0, grads: bool = True):
    """One attention head on a batch, and the gradients reaching W_Q and W_K.

    tokens x (batch, n, m), query tokens (batch, m), targets y (batch,): q = W_Q x_q,
    k_j = W_K x_j (W (d_k, m)), z_j = q . k_j / s (s the rule's divisor), p = softmax(z / T),
    output o = sum_j p_j x_j (the values are the tokens) and loss = mean over the batch of
    ||o - x_y||^2 / (2 m). The loss sits after the softmax, so its gradient to z passes
    through the Jacobian: dL/du = J dL/dp, computed as p_i sum_j p_j (g_i - g_j) (no
    cancellation where p saturates). Returns (loss, dL/dW_Q, dL/dW_K, p)."""
    return _head_loss(w_q, w_k, tokens, query_tokens, targets,
                      rule_divisor(rule, w_q.shape[0]), temperature, grads)


def _head_loss(w_q, w_k, tokens, query_tokens, targets, s: float, temperature: float,
               grads: bool = True):
    """:func:`attention_loss` with the logits divided by ``s`` whatever the rows of W."""
    q, z, p, loss, g_p = _head_forward(w_q, w_k, tokens, query_tokens, targets, s,
                                       temperature)
    if not grads:
        return loss, None, None, p
    g_u = p * np.einsum("bj,bij->bi", p, g_p[:, :, None] - g_p[:, None, :])
    return (loss, *_weight_grads(g_u, q, w_k, tokens, query_tokens, s, temperature), p)


def _head_forward(w_q, w_k, tokens, query_tokens, targets, s: float, temperature: float):
    """The head's forward pass: q, the logits z, p, the loss and dL/dp. The keys are never
    formed: q . k_j = q . (W_K x_j) = (W_K^T q) . x_j, (m) products per logit, not (d_k)."""
    b, n, m = tokens.shape
    q = query_tokens @ w_q.T                              # (b, d_k)
    z = np.einsum("bnm,bm->bn", tokens, q @ w_k) / s
    p = softmax(z, temperature)
    target = tokens[np.arange(b), targets]                # (b, m)
    diff = np.einsum("bn,bnm->bm", p, tokens) - target
    loss = float((diff * diff).sum() / (2 * m * b))
    return q, z, p, loss, np.einsum("bm,bnm->bn", diff, tokens) / (m * b)


def _weight_grads(g_u, q, w_k, tokens, query_tokens, s: float, temperature: float):
    """dL/dW_Q and dL/dW_K from dL/du (u = z / T), the head's q and W_K: with
    v_b = sum_j dL/dz_bj x_bj, dL/dq_b = W_K v_b and dL/dW_K = sum_b q_b v_b^T."""
    g_z = g_u / (s * _check_temperature(temperature))
    v = np.einsum("bn,bnm->bm", g_z, tokens)              # (b, m)
    return (v @ w_k.T).T @ query_tokens, q.T @ v


#: Below this a gradient norm is taken again in the log domain (it may have lost digits to
#: subnormals or be an underflowed 0).
_LOG_GRAD_BELOW = 1e-280


def _log10_grad_norms(w_q, w_k, tokens, query_tokens, targets, s: float,
                      temperature: float) -> tuple[float, float]:
    """log10 of ||dL/dW_Q||_F and ||dL/dW_K||_F, also where they underflow float64 or the
    forward pass rounds them to 0. In a batch row b with target t, o - x_t = sum_(j != t)
    p_j (x_j - x_t) (p sums to 1: a p_t rounded to 1 loses nothing), so dL/dp_j is
    exp(d_b) h_bj with d_b = max_(j != t) log p_j; and dL/du_i = sum_j p_i p_j (g_i - g_j).
    Every weight is exp of a log from the log-softmax, and every row's terms are taken
    relative to the largest exp(log p_i + log p_j + d_b) of the batch (i != j), so the sums
    are formed at scale 1 and the scale is added back as a log. -inf only where the
    gradient is exactly 0 (one key, or every key alike)."""
    b, n, m = tokens.shape
    q = query_tokens @ w_q.T
    u = np.einsum("bnm,bm->bn", tokens, q @ w_k) / (s * _check_temperature(temperature))
    log_p = u - np.logaddexp.reduce(u, axis=-1, keepdims=True)
    rows = np.arange(b)
    others = log_p.copy()
    others[rows, targets] = -math.inf
    d = others.max(axis=-1)                                # (b,)
    if n == 1 or not np.isfinite(d).any():
        return -math.inf, -math.inf
    d_fin = np.where(np.isfinite(d), d, 0.0)
    away = tokens - tokens[rows, targets][:, None, :]      # x_j - x_t
    h = np.einsum("bn,bnm->bm", np.exp(others - d_fin[:, None]), away)
    h_p = np.einsum("bm,bnm->bn", h, tokens) / (m * b)     # dL/dp / exp(d_b)
    pair = log_p[:, :, None] + log_p[:, None, :] + np.where(np.isfinite(d), d, -math.inf)[
        :, None, None]
    pair[:, np.arange(n), np.arange(n)] = -math.inf
    top = float(pair.max())
    if top == -math.inf:
        return -math.inf, -math.inf
    g_u = np.einsum("bij,bij->bi", np.exp(pair - top), h_p[:, :, None] - h_p[:, None, :])
    shift = top / math.log(10)
    return tuple(math.log10(x) + shift if x > 0 else -math.inf
                 for x in map(frobenius, _weight_grads(g_u, q, w_k, tokens, query_tokens, s,
                                                       temperature)))


def _draw_batch(rng: np.random.Generator, n_keys: int):
    """One batch of the toy task from ``rng``: tokens (b, n, m), the noisy query tokens
    (b, m) and the targets (b,)."""
    b, m = TRAIN_BATCH, TRAIN_D_MODEL
    tokens = rng.standard_normal((b, n_keys, m))
    targets = rng.integers(0, n_keys, b)
    query = tokens[np.arange(b), targets] + TRAIN_NOISE * rng.standard_normal((b, m))
    return tokens, query, targets


class Batches:
    """The batches a run from ``seed`` at ``d_k`` with ``n_keys`` keys trains on, step by step:
    the same under every rule and rate. Drawn once and kept (about 37 KB a step with 8 keys,
    8 times that with 64), so that runs sharing them (the three rules' runs, a sweep's
    rates) draw each batch once: a third of a step's time."""

    def __init__(self, d_k: int, seed: int, n_keys: int = N_KEYS) -> None:
        self.key = (int(d_k), int(seed), int(n_keys))
        self._rng = np.random.default_rng([int(seed), int(d_k), 11])
        self._drawn: list[tuple] = []

    def __getitem__(self, step: int) -> tuple:
        while len(self._drawn) <= step:
            self._drawn.append(_draw_batch(self._rng, self.key[2]))
        return self._drawn[step]


def shared_batches(d_k: int, seed: int, n_keys: int = N_KEYS,
                   seeds: int = TRAIN_SEEDS) -> list[Batches]:
    """:class:`Batches` for each of ``seeds`` seeds from ``seed``, as a
    :class:`SeededTraining` takes them."""
    return [Batches(d_k, int(seed) + i, n_keys) for i in range(int(seeds))]


class TrainingRun:
    """A single attention head learning the toy task of :func:`attention_loss` (copy the
    token of the key that matches a noisy query) by plain SGD, under one scaling rule, from a
    start and batches fixed by ``seed``: the same for every rule. ``advance`` runs steps;
    ``loss``, ``grad_wq``, ``grad_wk`` hold one value per step taken, the first at the start
    (before any update), ||dL/dW||_F for the gradients.

    A step costs the same at every d_k above 2m (m = TRAIN_D_MODEL): the head is trained in
    the span of its start. The loss depends on W_Q, W_K (d_k, m) only through
    W_Q^T W_K, and its gradients are dL/dW_Q = W_K G and dL/dW_K = W_Q G^T for an (m, m)
    matrix G (the sum over the batch of g_z x_j x_q^T), so every step keeps the columns of
    both matrices in the span of the columns of [W_Q0 W_K0], the start (d_k, 2m). With its
    thin QR factorization [W_Q0 W_K0] = U R (U (d_k, r) with orthonormal columns,
    r = min(d_k, 2m)), W_Q = U A and W_K = U B at every step, where (A, B) are (r, m) and
    start at R's two halves; then W_Q^T W_K = A^T B (the same logits, loss and G),
    dL/dW_Q = U (B G) and dL/dW_K = U (A G^T), and ||U X||_F = ||X||_F. So SGD on (A, B)
    with the head's divisor at d_k takes exactly the steps of SGD on (W_Q, W_K), with the
    same losses and gradient norms: equal up to floating-point rounding (the QR's and that
    of sums taken in another basis), which a chaotic run (the unscaled one at large d_k)
    amplifies as it would any rounding. Up to d_k = 2m, A and B are W_Q and W_K (U = I).
    Only the start is d_k-dimensional: the draw of W_Q0 and W_K0 from ``seed`` and its QR,
    O(d_k m^2) once.

    ``w_q`` and ``w_k`` are the current weights U A and U B, computed when read (U drawn and
    factorized again: a run keeps only A and B, not U's 1 MiB at d_k = 4096); None once the
    last step is taken.

    ``lr``: SGD's learning rate, by default :func:`rule_learning_rate` (the same logit step
    under every rule). ``batches``: its :class:`Batches`, shared with other runs (by default
    it draws its own, keeping none); let go once the run is done."""

    def __init__(self, d_k: int, rule: str, seed: int, temperature: float = 1.0,
                 steps: int = 300, n_keys: int = N_KEYS, lr: float | None = None,
                 batches: Batches | None = None) -> None:
        rule_divisor(rule, 1)
        self.d_k, self.rule, self.seed, self.steps = int(d_k), rule, int(seed), int(steps)
        self.lr = rule_learning_rate(rule, self.d_k) if lr is None else float(lr)
        self.temperature = _check_temperature(temperature)
        self.n_keys = int(n_keys)
        _, self._a, self._b = _span_of(*self._start())
        self._divisor = rule_divisor(rule, self.d_k)
        if batches is not None and batches.key != (self.d_k, self.seed, self.n_keys):
            raise ValueError(f"batches {batches.key} are not this run's "
                             f"{(self.d_k, self.seed, self.n_keys)}")
        self._batches = batches
        self._rng = np.random.default_rng([self.seed, self.d_k, 11])
        self.loss: list[float] = []
        self.grad_wq: list[float] = []
        self.grad_wk: list[float] = []
        #: log10 of the gradient norms, taken in the log domain where they underflow.
        self.log10_grad_wq: list[float] = []
        self.log10_grad_wk: list[float] = []

    def _start(self) -> tuple[np.ndarray, np.ndarray]:
        """W_Q0 and W_K0 (d_k, m), drawn from the seed."""
        rng = np.random.default_rng([self.seed, self.d_k, 7])
        m = TRAIN_D_MODEL
        w_q = rng.standard_normal((self.d_k, m)) / math.sqrt(m)
        return w_q, rng.standard_normal((self.d_k, m)) / math.sqrt(m)

    def _basis(self):
        """U, drawn and factorized again (the same bits): a run keeps no d_k-sized array."""
        return None if self._a is None else _span_of(*self._start())[0]

    @property
    def w_q(self) -> np.ndarray | None:
        """W_Q (d_k, m) now; None once the run is done."""
        return _in_basis(self._basis(), self._a)

    @property
    def w_k(self) -> np.ndarray | None:
        """W_K (d_k, m) now; None once the run is done."""
        return _in_basis(self._basis(), self._b)

    @property
    def steps_done(self) -> int:
        return max(len(self.loss) - 1, 0)

    @property
    def recorded(self) -> int:
        """The steps whose every metric is recorded: a step appends its loss first and its
        log10 gradient to W_K last, so a reader while another thread advances the run sees
        at least this many of each."""
        return len(self.log10_grad_wk)

    @property
    def done(self) -> bool:
        return self.steps_done >= self.steps

    @property
    def final_loss(self) -> float:
        """The mean loss of the last TRAIN_TAIL of the planned steps (of them all, if fewer);
        NaN until the run is done."""
        if not self.done:
            return math.nan
        return float(np.mean(self.loss[-TRAIN_TAIL:]))

    def _batch(self):
        """The next step's batch."""
        if self._batches is not None:
            return self._batches[len(self.loss)]
        return _draw_batch(self._rng, self.n_keys)

    def advance(self, count: int) -> None:
        """Take up to ``count`` more steps (the first call also records the start)."""
        for _ in range(int(count)):
            if len(self.loss) > self.steps:
                return
            tokens, query, targets = self._batch()
            loss, g_a, g_b, _ = _head_loss(self._a, self._b, tokens, query, targets,
                                           self._divisor, self.temperature)
            self.loss.append(loss)
            norms = frobenius(g_a), frobenius(g_b)
            self.grad_wq.append(norms[0])
            self.grad_wk.append(norms[1])
            logs = (_log10_grad_norms(self._a, self._b, tokens, query, targets, self._divisor,
                                      self.temperature) if min(norms) < _LOG_GRAD_BELOW
                    else tuple(map(math.log10, norms)))
            self.log10_grad_wq.append(logs[0])
            self.log10_grad_wk.append(logs[1])
            if len(self.loss) <= self.steps:
                self._a -= self.lr * g_a
                self._b -= self.lr * g_b
            else:
                self._a = self._b = self._batches = None


def _span_of(w_q: np.ndarray, w_k: np.ndarray):
    """(U, A, B) with W_Q = U A and W_K = U B, U's columns orthonormal and as few as
    2m: U None (the identity) where d_k <= 2m, else the thin QR factorization of [W_Q W_K]."""
    d_k, m = w_q.shape
    if d_k <= 2 * m:
        return None, w_q, w_k
    u, r = np.linalg.qr(np.hstack([w_q, w_k]))
    return u, r[:, :m].copy(), r[:, m:].copy()


def _in_basis(basis, coords):
    """U X (X itself where U is the identity, None for None)."""
    if coords is None or basis is None:
        return coords
    return basis @ coords


def start_training(d_k: int, rule: str, seed: int, temperature: float = 1.0,
                   steps: int = 300, n_keys: int = N_KEYS,
                   lr: float | None = None) -> TrainingRun:
    """A :class:`TrainingRun` not yet advanced."""
    return TrainingRun(d_k, rule, seed, temperature, steps, n_keys, lr)


def train(d_k: int, rule: str, seed: int, temperature: float = 1.0, steps: int = 300,
          n_keys: int = N_KEYS, lr: float | None = None) -> TrainingRun:
    """A :class:`TrainingRun` taken to its end: ``steps + 1`` losses and gradient norms."""
    run = TrainingRun(d_k, rule, seed, temperature, steps, n_keys, lr)
    run.advance(steps + 1)
    return run


class SeededTraining:
    """One rule's runs from ``seeds`` seeds (seed, seed + 1, ...), otherwise alike: what a
    Train shows of a rule (``batches``: the seeds' :func:`shared_batches`, if shared).
    ``advance`` steps each run; per step, :meth:`curve` is the median over the seeds and its
    range, and :attr:`final` the median, min and max of the runs' ``final_loss``."""

    def __init__(self, d_k: int, rule: str, seed: int, temperature: float = 1.0,
                 steps: int = 300, n_keys: int = N_KEYS, lr: float | None = None,
                 seeds: int = TRAIN_SEEDS, batches: Sequence[Batches] | None = None) -> None:
        self.runs = [TrainingRun(d_k, rule, seed + i, temperature, steps, n_keys, lr,
                                 None if batches is None else batches[i])
                     for i in range(int(seeds))]
        first = self.runs[0]
        self.d_k, self.rule, self.seed, self.steps = first.d_k, rule, first.seed, first.steps
        self.temperature, self.n_keys, self.lr = first.temperature, first.n_keys, first.lr

    @property
    def seeds(self) -> list[int]:
        return [run.seed for run in self.runs]

    @property
    def steps_done(self) -> int:
        return min(run.steps_done for run in self.runs)

    @property
    def done(self) -> bool:
        return all(run.done for run in self.runs)

    def advance(self, count: int) -> None:
        """Up to ``count`` more steps of each run."""
        for run in self.runs:
            run.advance(count)

    def curve(self, metric: str) -> dict:
        """``metric`` ("loss", "grad_wq", "grad_wk", "log10_grad_wq" or "log10_grad_wk") per step
        over the steps every run has recorded (:attr:`TrainingRun.recorded`, also while
        another thread advances them): {"median", "min", "max"} over the seeds, each an
        array."""
        n = min(run.recorded for run in self.runs)
        values = np.array([getattr(run, metric)[:n] for run in self.runs], float).reshape(
            len(self.runs), n)
        return {"median": np.median(values, axis=0), "min": values.min(axis=0),
                "max": values.max(axis=0)}

    @property
    def final(self) -> dict:
        """The runs' final_loss: {"median", "min", "max"} over the seeds (NaN until done)."""
        values = np.array([run.final_loss for run in self.runs])
        return {"median": float(np.median(values)), "min": float(values.min()),
                "max": float(values.max())}


def start_seeds(d_k: int, rule: str, seed: int, temperature: float = 1.0, steps: int = 300,
                n_keys: int = N_KEYS, lr: float | None = None,
                seeds: int = TRAIN_SEEDS) -> SeededTraining:
    """A :class:`SeededTraining` not yet advanced."""
    return SeededTraining(d_k, rule, seed, temperature, steps, n_keys, lr, seeds)


def train_seeds(d_k: int, rule: str, seed: int, temperature: float = 1.0, steps: int = 300,
                n_keys: int = N_KEYS, lr: float | None = None,
                seeds: int = TRAIN_SEEDS,
                batches: Sequence[Batches] | None = None) -> SeededTraining:
    """A :class:`SeededTraining` taken to its end."""
    runs = SeededTraining(d_k, rule, seed, temperature, steps, n_keys, lr, seeds, batches)
    runs.advance(steps + 1)
    return runs


# ---- the learning-rate sweep: each rule's final loss against SGD's rate ------------------

#: The sweep's rates: each rule's equal-step rate (rule_learning_rate) times powers of
#: SWEEP_FACTOR, from SWEEP_FACTOR**-SWEEP_START to SWEEP_FACTOR**SWEEP_START, widened a power
#: at a time on the side where the lowest median loss sits at the edge (so that every best
#: rate has a rate on each side), up to SWEEP_REACH powers either way.
SWEEP_FACTOR = 4
SWEEP_START = 2
SWEEP_REACH = 8
#: Finished sweeps kept, per (d_k, T, seed, keys, steps, seeds); ~3 KB each.
SWEEP_CACHE_SIZE = 32


@dataclass(frozen=True)
class RuleSweep:
    """One rule's sweep: its rates (ascending), the runs' final_loss per rate and seed
    (``losses`` (rates, seeds); +inf where a run diverged), per rate their median, min and
    max, the rate of the lowest median (``best``, NaN if none is finite), the rule's
    equal-step rate (``equal_step``, the Train runs') and the median first loss over the
    seeds (``start``: before any step, the same at every rate; NaN before a point is done)."""

    rates: np.ndarray
    losses: np.ndarray
    median: np.ndarray
    low: np.ndarray
    high: np.ndarray
    best: float
    equal_step: float
    start: float

    @property
    def best_logit_step(self) -> float:
        """The best rate's logit step lr·d_k/s², in units of the equal step: best/equal_step."""
        return self.best / self.equal_step


def _rule_sweep(rule: str, d_k: int, powers, losses: dict, start: float,
                seeds: int) -> RuleSweep:
    equal = rule_learning_rate(rule, d_k)
    ks = sorted(k for k in powers if k in losses)
    rates = np.array([equal * float(SWEEP_FACTOR) ** k for k in ks])
    values = np.array([losses[k] for k in ks], float).reshape(len(ks), seeds)
    values = np.where(np.isfinite(values), values, math.inf)
    median = np.median(values, axis=1) if len(ks) else np.zeros(0)
    low = values.min(axis=1) if len(ks) else np.zeros(0)
    high = values.max(axis=1) if len(ks) else np.zeros(0)
    finite = np.isfinite(median)
    best = float(rates[int(np.argmin(np.where(finite, median, math.inf)))]) if finite.any() \
        else math.nan
    for a in (rates, values, median, low, high):
        a.setflags(write=False)
    return RuleSweep(rates, values, median, low, high, best, equal, start)


class LearningRateSweep:
    """Each rule's final loss (:attr:`TrainingRun.final_loss`, ``seeds`` seeds from ``seed`` as
    Train runs them) against SGD's learning rate at one setting: per rule the rates
    ``rule_learning_rate · SWEEP_FACTOR**k``, k from -SWEEP_START to SWEEP_START, widened
    while the lowest median sits at an edge (see SWEEP_REACH). Built a point (rule, rate) at
    a time: ``advance(count)`` takes up to ``count`` steps of the point under way (each of
    its seeds' runs), and :meth:`rule` is what the points done so far show. The result does
    not depend on how the steps were sliced; a finished sweep is kept
    (:func:`learning_rate_sweep` and :func:`cached_sweep` find it).

    ``runs``: finished runs at this setting at the equal-step rates (rule ->
    :class:`SeededTraining`, as Train runs them), taken as those points instead of running
    them again. ``batches``: the seeds' :func:`shared_batches`, which every point then
    trains on (each batch drawn once; kept until the sweep is done), or None: each run
    draws its own."""

    def __init__(self, d_k: int, temperature: float = 1.0, seed: int = 0,
                 n_keys: int = N_KEYS, steps: int = 300, seeds: int = TRAIN_SEEDS,
                 runs: Mapping[str, SeededTraining] | None = None,
                 batches: Sequence[Batches] | None = None) -> None:
        self.d_k, self.seed, self.n_keys = int(d_k), int(seed), int(n_keys)
        self.temperature = _check_temperature(temperature)
        self.steps, self.seeds = int(steps), int(seeds)
        self._batches = batches
        self._given = {rule: run for rule, run in (runs or {}).items()
                       if self._is_equal_step_point(rule, run)}
        self.powers = {r: list(range(-SWEEP_START, SWEEP_START + 1)) for r in RULES}
        self._losses: dict[str, dict[int, tuple]] = {r: {} for r in RULES}
        self._starts = {r: math.nan for r in RULES}
        # the equal-step rates first, then outwards: every rule's points arrive together
        self._queue = [(r, k) for j in range(SWEEP_START + 1) for k in sorted({-j, j})
                       for r in RULES]
        self._current: SeededTraining | None = None
        self._point = None
        self._diverged: set[int] = set()     # the point's runs whose weights overflowed
        self._result = None

    @property
    def key(self) -> tuple:
        return (self.d_k, self.temperature, self.seed, self.n_keys, self.steps, self.seeds)

    def _is_equal_step_point(self, rule: str, run: SeededTraining) -> bool:
        """Whether ``run`` is this sweep's point at ``rule``'s equal-step rate, finished."""
        return (run.done and run.rule == rule
                and (run.d_k, run.temperature, run.seed, run.n_keys, run.steps, len(run.runs))
                == (self.d_k, self.temperature, self.seed, self.n_keys, self.steps, self.seeds)
                and run.lr == rule_learning_rate(rule, self.d_k))

    @property
    def done(self) -> bool:
        return self._current is None and not self._queue

    @property
    def points_done(self) -> int:
        return sum(len(v) for v in self._losses.values())

    @property
    def points_planned(self) -> int:
        """The points done, under way and queued (a widening adds more)."""
        return self.points_done + len(self._queue) + (self._current is not None)

    def advance(self, count: int) -> None:
        """Up to ``count`` steps of the point under way (the next one's, if none is)."""
        if self._current is None:
            if not self._queue:
                return
            self._point = rule, k = self._queue.pop(0)
            self._diverged = set()
            if k == 0 and rule in self._given:
                self._current = self._given.pop(rule)
                self._finish_point()
                return
            rate = rule_learning_rate(rule, self.d_k) * float(SWEEP_FACTOR) ** k
            self._current = SeededTraining(self.d_k, rule, self.seed, self.temperature,
                                           self.steps, self.n_keys, rate, self.seeds,
                                           self._batches)
        for i, run in enumerate(self._current.runs):
            if i in self._diverged:
                continue
            try:
                with np.errstate(all="ignore"):
                    run.advance(count)
            except ValueError:          # its logits overflowed (softmax refuses them)
                self._diverged.add(i)
        if all(run.done or i in self._diverged for i, run in enumerate(self._current.runs)):
            self._finish_point()

    def _finish_point(self) -> None:
        """Record the point under way (a diverged run's loss +inf), widen its rule's rates if
        its best sits at an edge, and keep the sweep once it is done."""
        rule, k = self._point
        runs = self._current.runs
        self._losses[rule][k] = tuple(math.inf if i in self._diverged else run.final_loss
                                      for i, run in enumerate(runs))
        firsts = [run.loss[0] for run in runs if run.loss]
        if len(firsts) == self.seeds:      # the same at every rate: one point with all will do
            self._starts[rule] = float(np.median(firsts))
        self._current = self._point = None
        if not any(r == rule for r, _ in self._queue):
            self._widen(rule)
        if self.done:
            self._result = self.result()
            self._batches = None
            _keep_sweep(self.key, self)

    def _widen(self, rule: str) -> None:
        """Queue the next power on the side where ``rule``'s lowest median sits at the edge."""
        swept = self.rule(rule)
        ks = self.powers[rule]
        best = float(np.argmin(np.where(np.isfinite(swept.median), swept.median, math.inf)))
        if best == 0 and ks[0] > -SWEEP_REACH:
            ks.insert(0, ks[0] - 1)
            self._queue.append((rule, ks[0]))
        elif best == len(ks) - 1 and ks[-1] < SWEEP_REACH:
            ks.append(ks[-1] + 1)
            self._queue.append((rule, ks[-1]))

    def rule(self, rule: str) -> RuleSweep:
        """``rule``'s points done so far."""
        return _rule_sweep(rule, self.d_k, self.powers[rule], self._losses[rule],
                           self._starts[rule], self.seeds)

    def result(self) -> Mapping[str, RuleSweep]:
        """rule -> :class:`RuleSweep` of the points done so far (all of them once done: then
        the same object at every call)."""
        if self._result is not None:
            return self._result
        return MappingProxyType({r: self.rule(r) for r in RULES})

    def run(self) -> Mapping[str, RuleSweep]:
        """Take the sweep to its end; its result."""
        while not self.done:
            self.advance(self.steps + 1)
        return self.result()


_SWEEPS: dict = {}
_SWEEPS_LOCK = threading.Lock()


def _sweep_key(d_k, temperature, seed, n_keys, steps, seeds) -> tuple:
    return (int(d_k), _check_temperature(temperature), int(seed), int(n_keys), int(steps),
            int(seeds))


def _keep_sweep(key: tuple, sweep: LearningRateSweep) -> None:
    with _SWEEPS_LOCK:
        _SWEEPS.pop(key, None)
        _SWEEPS[key] = sweep
        while len(_SWEEPS) > SWEEP_CACHE_SIZE:
            del _SWEEPS[next(iter(_SWEEPS))]


def cached_sweep(d_k: int, temperature: float = 1.0, seed: int = 0, n_keys: int = N_KEYS,
                 steps: int = 300, seeds: int = TRAIN_SEEDS) -> LearningRateSweep | None:
    """The finished :class:`LearningRateSweep` at this setting if one is kept (whichever
    thread finished it), else None."""
    key = _sweep_key(d_k, temperature, seed, n_keys, steps, seeds)
    with _SWEEPS_LOCK:
        return _SWEEPS.get(key)


def start_sweep(d_k: int, temperature: float = 1.0, seed: int = 0, n_keys: int = N_KEYS,
                steps: int = 300, seeds: int = TRAIN_SEEDS,
                runs: Mapping[str, SeededTraining] | None = None,
                batches: Sequence[Batches] | None = None) -> LearningRateSweep:
    """The kept :class:`LearningRateSweep` at this setting (done), else a new one (taking
    ``runs``, Train's at this setting, as its equal-step points, and ``batches``)."""
    kept = cached_sweep(d_k, temperature, seed, n_keys, steps, seeds)
    return kept if kept is not None else LearningRateSweep(d_k, temperature, seed, n_keys,
                                                           steps, seeds, runs, batches)


def learning_rate_sweep(d_k: int, temperature: float = 1.0, seed: int = 0,
                        n_keys: int = N_KEYS, steps: int = 300,
                        seeds: int = TRAIN_SEEDS) -> Mapping[str, RuleSweep]:
    """The finished :class:`LearningRateSweep` at this setting: rule -> :class:`RuleSweep`,
    kept (the last SWEEP_CACHE_SIZE settings) and computed at most once while kept."""
    return start_sweep(d_k, temperature, seed, n_keys, steps, seeds).run()
