"""Each step's predict-then-reveal question, worded from the state: what one control of the
step will do when it moves (the head about 8 times wider or narrower, the temperature halved
or doubled), so that its value is in no text of the page until Reveal (the training step asks
before Train, whose runs then show it); the reader can then move the control and see it. The
true value comes from core, and one sentence says why."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from .. import core
from .formatting import distinct, fmt, percent_range, share_of_draws
from .text import final_losses, rule_names, weight_label

_DK = "d<sub>k</sub>"
#: The width a question moves to: 8 times the head's (or an eighth, where that is past
#: the widest).
WIDTH_FACTOR = 8


@dataclass(frozen=True)
class Question:
    """A question: ``ask`` (HTML), ``choices`` (the labels of its buttons; empty: the answer
    is a percentage, guessed on a slider), ``answer`` (HTML: the true value and why, shown on
    Reveal) and ``value``, the true value (a weight in [0, 1], a share, or the index of the
    right choice; None where there is none yet)."""

    ask: str
    answer: str
    value: float | int | None
    choices: tuple[str, ...] = ()


def _nearest(values, goal: float):
    """Of ``values``, the nearest to ``goal`` on a log scale."""
    return min(values, key=lambda v: abs(math.log(v / goal)))


def width_move(d_k: int) -> int:
    """The width a question asks about: of core.D_K_VALUES, the nearest to 8 d_k, or to
    d_k / 8 where 8 d_k is past the widest."""
    goal = d_k * WIDTH_FACTOR if d_k * WIDTH_FACTOR <= core.D_K_VALUES[-1] else d_k / WIDTH_FACTOR
    return _nearest(core.D_K_VALUES, goal)


def width_moves(d_k: int) -> list[int]:
    """The widths the one draw's question may ask about, in the order it tries them:
    :func:`width_move`'s, then of core.D_K_VALUES the nearest to 8 times ``d_k`` the other
    way, then 64 times it, the first way and the other (each once, none of them ``d_k``)."""
    first = width_move(d_k)
    way = WIDTH_FACTOR if first > d_k else 1 / WIDTH_FACTOR
    moves = [first]
    for goal in (d_k / way, d_k * way ** 2, d_k / way ** 2):
        if core.D_K_VALUES[0] / 2 <= goal <= core.D_K_VALUES[-1] * 2:
            w = _nearest(core.D_K_VALUES, goal)
            if w != d_k and w not in moves:
                moves.append(w)
    return moves


def temperature_move(temperature: float) -> float:
    """The temperature a question asks about: of core.TEMPERATURES, the nearest to half of
    ``temperature``, or to twice it where half is below the lowest."""
    goal = temperature / 2 if temperature / 2 >= core.TEMPERATURES[0] else temperature * 2
    return _nearest(core.TEMPERATURES, goal)


def temperature_moves(temperature: float) -> list[float]:
    """The temperatures a question may ask about, in the order it tries them:
    :func:`temperature_move`'s, then of core.TEMPERATURES the nearest to twice
    ``temperature``, 4, 8, ... times it, then to half, a quarter, ... of it (each once, none
    of them ``temperature`` itself)."""
    up = [temperature * 2 ** k for k in range(1, 8)]
    down = [temperature / 2 ** k for k in range(1, 8)]
    moves = [temperature_move(temperature)]
    for goal in up + down:
        if core.TEMPERATURES[0] / 1.3 <= goal <= core.TEMPERATURES[-1] * 1.3:
            t = _nearest(core.TEMPERATURES, goal)
            if t != temperature and t not in moves:
                moves.append(t)
    return moves


def _moved(temperature: float, shown) -> float:
    """Of :func:`temperature_moves`, the first at which ``shown(t)`` (the answer as printed,
    against the value now) prints a value apart from the value now: a question whose
    answer would print as what the page shows already (">99.9%" at both, "all" at both) is
    asked about a temperature further away, or the other way."""
    moves = temperature_moves(temperature)
    return next((t for t in moves if len(set(shown(t))) == 2), moves[0])


def _t(temperature: float) -> str:
    return f"T = {temperature:g}"


def _size(d_k: int, temperature: float, align: float = 0.0) -> str:
    """The typical size of unscaled logits at (d_k, T): √d_k / T, as printed; with a key
    aligned with the query by ρ = ``align``, also that key's mean logit, ρ d_k / T."""
    over = "" if temperature == 1 else f"/{temperature:g}"
    size = f"√{d_k}{over} = {fmt(math.sqrt(d_k) / temperature)}"
    if not align:
        return size
    return (f"{size}, the aligned key's mean {align:g}·{d_k}{over} = "
            f"{fmt(align * d_k / temperature)}")


def draw_question(d_k: int, temperature: float, seed: int, n_keys: int = core.N_KEYS,
                  align: float = 0.0) -> Question:
    """The one draw: this draw's largest unscaled weight at the width :func:`width_move` (or,
    where it prints there as it does now, >99.9% at both, the first of :func:`width_moves`
    where it does not); or, where this draw moves against the distribution (its largest
    weight falls while the median's rises, or the other way), the median's, which is what
    the lesson predicts."""
    now = core.compute_state(d_k, temperature, seed, n_keys, align).unscaled

    def apart(w: int) -> bool:
        return weight_label(core.compute_state(w, temperature, seed, n_keys, align)
                            .unscaled) != weight_label(now)
    moves = width_moves(d_k)
    t = next((w for w in moves if apart(w)), moves[0])
    at = "" if temperature == 1 else f", {_t(temperature)}"
    after = core.compute_state(t, temperature, seed, n_keys, align).unscaled
    typical = [core.typical(w, temperature, n_keys, align) for w in (d_k, t)]
    med_d, med_t = (typ.median[False] for typ in typical)
    # the medians to the digits the Monte Carlo's draws support
    m_d, m_t = (percent_range(*typ.median_range[False]) for typ in typical)
    sizes = (f"Unscaled logits have typical size √{_DK}{'' if temperature == 1 else '/T'} ("
             f"{_size(d_k, temperature, align)}; {_size(t, temperature, align)})")
    head = f"{'wider' if t > d_k else 'narrower'} head, {_DK} = {t} instead of {d_k}{at}"
    if m_d != m_t and (after.max_weight - now.max_weight) * (med_t - med_d) < 0:
        return Question(
            ask=(f"Over many draws with a {head}: how much weight will the largest key get, "
                 "unscaled, in a typical draw (the median)?"),
            answer=(f"<b>{m_t}</b> over {core.MC_DRAWS:,} draws at {_DK} = {t}, against "
                    f"{m_d} at {d_k}. {sizes}. This draw goes the other way, from "
                    f"{weight_label(now)} to {weight_label(after)}: one draw is not the "
                    "distribution."),
            value=med_t)
    medians = (f"is {m_d} at both widths" if m_d == m_t
               else f"goes from {m_d} at {_DK} = {d_k} to {m_t} at {t}")
    return Question(
        ask=(f"This draw with a {head}: how much weight will the largest key get, unscaled?"),
        answer=(f"<b>{weight_label(after)}</b> at {_DK} = {t}, against {weight_label(now)} "
                f"at {d_k}. {sizes}; over {core.MC_DRAWS:,} draws the median largest weight "
                f"{medians}."),
        value=after.max_weight)


VARIANCE_CHOICES = ("about 1", "about 1/√{t}", "about 1/{t}")


def shuffled(n: int, seed: int) -> list[int]:
    """An order of ``n`` choices, the same for the same ``seed`` (the state the question is
    asked at): where the right choice sits tells nothing."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


def variance_question(d_k: int) -> Question:
    """1 Variance: the spread of q·k / d_k (÷d_k's logits, which no chart of the tab shows)
    at the width :func:`width_move`, as one of three sizes, in an order set by that width
    (:func:`shuffled`)."""
    t = width_move(d_k)
    std = core.logit_distribution(t)["std_linear"]
    order = shuffled(3, t)
    sizes = tuple((1.0, 1 / math.sqrt(t), 1 / t)[i] for i in order)
    right = min(range(3), key=lambda i: abs(math.log(std / sizes[i])))
    choices = tuple(VARIANCE_CHOICES[i].format(t=t) for i in order)
    return Question(
        ask=(f"At {_DK} = {t}, divided by {_DK} instead of √{_DK}, what standard deviation "
             "will q·k / d<sub>k</sub> have over many draws?"),
        answer=(f"<b>{fmt(std)}</b> over {core.LOGIT_DRAWS:,} draws: {choices[right]} = "
                f"{fmt(sizes[right])}. q·k adds {t} products of unit variance, so its "
                f"variance is {t} and its typical size √{t}; divided by {t} it is "
                f"√{t}/{t} = 1/√{t}, smaller the wider the head, where ÷√{_DK} keeps it at 1."),
        value=right, choices=choices)


def _against(values: tuple[float, float], shown: tuple[str, str], temperature: float,
             draws: str = "", counted: bool = False) -> str:
    """The revealed value (``values[0]``, printed ``shown[0]``, over ``draws``) beside the
    value at ``temperature`` (``values[1]``, ``shown[1]``); where both print the same
    (">99.9%" twice), why instead of the same number twice: for a share of draws
    (``counted``), that it is the same or within sampling noise; for a weight, that the
    change is below what a percent shows (never "the same": float64 may round two saturated
    weights to one 1.0)."""
    over = f" {draws}" if draws else ""
    if shown[0] != shown[1]:
        return f"<b>{shown[0]}</b>{over}, against {shown[1]} at {_t(temperature)}"
    how = ("the same" if counted and values[0] == values[1] else
           f"the difference is within the sampling noise of {core.CURVE_DRAWS:,} draws"
           if counted else "the change is below what a percent shows")
    return f"<b>{shown[0]}</b>{over}, as at {_t(temperature)}: {how}"


def _curve_move(column: str, d_k: int, temperature: float, n_keys: int,
                align: float, show) -> tuple[float, float, float]:
    """The temperature :func:`_moved` picks (``show(after, now)``: the two values as
    printed), and the saturation curves' ``column`` at ``d_k`` there and at ``temperature``
    (core.saturation_curves)."""
    i = core.D_K_VALUES.index(d_k)

    def at(t: float) -> float:
        return float(core.saturation_curves(t, n_keys, align)[column][i])

    now = at(temperature)
    t = _moved(temperature, lambda t: show(at(t), now))
    return t, at(t), now


def saturation_question(d_k: int, temperature: float, n_keys: int, align: float) -> Question:
    """2 Saturation: the unscaled median max weight at this width and the temperature
    :func:`_moved` picks."""
    t, after, now = _curve_move("max_weight_median_none", d_k, temperature, n_keys, align,
                                distinct)
    return Question(
        ask=(f"At {_t(t)} instead of {temperature:g}, {_DK} = {d_k}: what will the unscaled "
             "median max weight be over many draws?"),
        answer=(_against((after, now), distinct(after, now), temperature,
                         f"over {core.CURVE_DRAWS:,} draws") + f". Dividing by T = {t:g} gives "
                f"unscaled logits of typical size {_size(d_k, t, align)}, against "
                f"{_size(d_k, temperature, align)} at {_t(temperature)}: "
                + ("temperature and width are the same knob." if align == 0 else
                   "T scales the aligned key's mean and the spread alike; a wider head grows "
                   "the mean as d<sub>k</sub> and the spread only as √d<sub>k</sub>.")),
        value=after)


def _shares(a: float, b: float) -> tuple[str, str]:
    """Two shares of the curves' draws as the page words them (share_of_draws); the same
    words for both where they differ by no more than two standard errors of their
    difference (sampling noise, not an effect)."""
    n = core.CURVE_DRAWS
    wa, wb = share_of_draws(a, n), share_of_draws(b, n)
    noise = 2 * math.sqrt((a * (1 - a) + b * (1 - b)) / n)
    return (wa, wa) if abs(a - b) <= noise else (wa, wb)


def gradient_question(d_k: int, temperature: float, n_keys: int, align: float) -> Question:
    """3 Gradient: at this width and the temperature :func:`_moved` picks (where the share
    there differs from the share now by more than sampling noise, :func:`_shares`), the share
    of unscaled draws under a tenth of the ÷√d_k median gradient to the query."""
    t, after, now = _curve_move("frozen_share_none", d_k, temperature, n_keys, align, _shares)
    return Question(
        ask=(f"At {_t(t)} instead of {temperature:g}, {_DK} = {d_k}: what share of unscaled "
             f"draws will get under a tenth of ÷√{_DK}'s median gradient to the query?"),
        answer=(_against((after, now), _shares(after, now), temperature, counted=True)
                + ". A draw gets almost no gradient "
                "where its softmax is nearly one-hot and p(1 − p) vanishes; at "
                f"{_t(t)} the unscaled logits' typical size is {_size(d_k, t, align)}."),
        value=after)


def training_question(d_k: int, temperature: float, runs: dict | None = None,
                      running: bool = False) -> Question:
    """4 Training: which rule ends with the lowest loss (the median over the seeds of the mean
    loss of the last core.TRAIN_TAIL steps) at this setting; ``runs`` (rule ->
    core.SeededTraining, done) answer it, and before them there is no answer yet
    (``running``: they are under way)."""
    at = "" if temperature == 1 else f", {_t(temperature)}"
    if d_k == 1:
        return _one_model_question(at, runs, running)
    ask = (f"Trained at {_DK} = {d_k}{at}, each rule at a learning rate that gives its logits "
           "the same step per unit of gradient: which will end with the lowest loss?")
    choices = tuple(core.RULE_LABELS[r] for r in core.RULES)
    if runs is None:
        return _before_runs(ask, choices, running)
    final, shown = final_losses(runs)
    best = min(core.RULES, key=lambda r: final[r])
    tied = [r for r in core.RULES if fmt(final[r]) == fmt(final[best])]
    why = ("These rates give every rule's logits the same step per unit of the loss's gradient "
           "at the logits, not the same step: that gradient passes through the softmax's "
           "Jacobian, which shrinks it where the softmax saturates (unscaled logits have "
           f"typical size {_size(d_k, temperature)}). The learning-rate sweep gives each rule "
           "its own best rate.")
    head = f"<b>{rule_names(tied)}</b> " + ("ends lowest" if len(tied) == 1 else "tie")
    return Question(
        ask=ask,
        answer=f"{head}. {shown}. {why}",
        value=core.RULES.index(best), choices=choices)


def _before_runs(ask: str, choices: tuple, running: bool) -> Question:
    """A training question before its runs answer it (``running``: they are under way)."""
    return Question(ask=ask, value=None, choices=choices, answer=(
        "The runs under way answer it: Reveal again once they end." if running else
        "Press <b>Train</b> first: the runs answer it."))


#: The choices of the training question at d_k = 1, where no rule can end lower than another.
ONE_MODEL_CHOICES = ("They end apart", "They end alike")


def _one_model_question(at: str, runs: dict | None, running: bool) -> Question:
    """4 Training at d_k = 1: every rule divides by 1 and trains at the same rate, so the
    question is whether the three end alike, not which ends lowest."""
    ask = (f"Trained at {_DK} = 1{at}, where every rule divides its logits by 1: will the "
           "three rules end apart or alike?")
    if runs is None:
        return _before_runs(ask, ONE_MODEL_CHOICES, running)
    final, shown = final_losses(runs)
    alike = len({fmt(final[r]) for r in core.RULES}) == 1
    return Question(
        ask=ask, value=int(alike), choices=ONE_MODEL_CHOICES,
        answer=(f"<b>{ONE_MODEL_CHOICES[int(alike)]}</b>. {shown}. At {_DK} = 1 every rule "
                "divides by 1 and trains at the same rate (s²/" + _DK + " = 1): the three runs "
                "are one model."))


def budget_question(width: int, heads: int, temperature: float, n_keys: int,
                    align: float) -> Question:
    """5 Heads: at the temperature :func:`_moved` picks, the unscaled median max weight
    of ``heads`` heads of ``width`` / ``heads`` (core.head_budget)."""
    def weight(temp: float) -> float:
        budget = core.head_budget(width, temp, n_keys, align)
        return float(budget["max_weight_median_none"][
            [int(h) for h in budget["heads"]].index(heads)])

    now = weight(temperature)
    t = _moved(temperature, lambda t: distinct(weight(t), now))
    after = weight(t)
    d = width // heads
    return Question(
        ask=(f"At {_t(t)} instead of {temperature:g}: what will the unscaled median max "
             f"weight of one of {heads} heads of {d} be?"),
        answer=(_against((after, now), distinct(after, now), temperature,
                         f"over {core.CURVE_DRAWS:,} draws") + f". A head of {d} at {_t(t)} has "
                f"unscaled logits of typical size {_size(d, t, align)}; a single head of "
                f"{width}, {_size(width, t, align)}."),
        value=after)

