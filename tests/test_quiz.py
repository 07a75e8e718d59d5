"""Each step's predict-then-reveal question (quiz): it asks about one move of a control (the
head 8 times wider or narrower, the temperature halved or doubled), its true value is what a
computation independent of the page gives (the softmax of the draw's own dot products, the
spread of q·k measured afresh, the exact reference figure), and the answer is nowhere in the
question."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from attention_scaling import core
from attention_scaling.prose import quiz
from attention_scaling.argument import BUDGET_HEADS, BUDGET_WIDTH
from attention_scaling.prose.formatting import fmt
from attention_scaling.prose.text import plain

SEED = 2288


def _asked_width(question) -> int:
    return int(re.search(r"d<sub>k</sub> = (\d+) instead of", question.ask)[1])


def test_a_move_is_a_different_value_about_eight_times_or_twice_away():
    for d in core.D_K_VALUES:
        t = quiz.width_move(d)
        assert t in core.D_K_VALUES and t != d
        assert 5.5 <= max(t / d, d / t) <= 11
    for temp in core.TEMPERATURES:
        t = quiz.temperature_move(temp)
        assert t in core.TEMPERATURES and t != temp
        assert 1.6 <= max(t / temp, temp / t) <= 2.5


def test_the_reference_draw_is_the_answer_at_d_k_8():
    """From d_k = 8 the question asks about d_k = 64: the reference figure's unscaled bars,
    80% on one key."""
    q = quiz.draw_question(8, 1.0, SEED)
    assert "d<sub>k</sub> = 64" in q.ask
    assert round(100 * q.value) == 80 and plain(q.answer).startswith("80% at dk = 64")


@pytest.mark.parametrize("d_k,temperature,seed", [(1, 1.0, SEED), (64, 1.0, SEED),
                                                  (512, 2.5, 7), (4096, 0.5, 11), (96, 1.0, 3)])
def test_the_draw_answer_is_the_softmax_of_the_draws_own_dot_products(d_k, temperature, seed):
    """The draw's largest weight at the other width, from its own dot products; where the draw
    moves against the median (at the defaults: 80% to 74% while the median rises towards
    100%), the question asks for the median instead, checked on 200,000 draws of another
    generator (q·k_j = |q| g_j, |q|² a χ² with d_k degrees)."""
    q = quiz.draw_question(d_k, temperature, seed)
    t = _asked_width(q)
    assert t in quiz.width_moves(d_k)

    def largest(width):
        query, keys = core.sample_qk(seed, width, core.N_KEYS)
        z = np.asarray(keys, float) @ np.asarray(query, float) / temperature
        p = np.exp(z - z.max())
        return float((p / p.sum()).max())

    rng = np.random.default_rng(11)

    def median(width):
        z = (np.sqrt(rng.chisquare(width, 200_000))[:, None]
             * rng.standard_normal((200_000, core.N_KEYS)) / temperature)
        return float(np.median(1 / np.exp(z - z.max(axis=1, keepdims=True)).sum(axis=1)))

    if plain(q.ask).startswith("Over many draws"):
        assert (largest(t) - largest(d_k)) * (median(t) - median(d_k)) < 0
        assert q.value == pytest.approx(median(t), abs=0.005)
    else:
        assert q.value == pytest.approx(largest(t), abs=1e-12)
    assert (d_k, seed) != (64, SEED) or plain(q.ask).startswith("Over many draws")


@pytest.mark.parametrize("d_k", [1, 8, 64, 768, 4096])
def test_the_spread_of_q_dot_k_over_d_k_is_about_one_over_root_d_k(d_k):
    """The answer is 1/√t's choice, and its number is q·k / t's spread measured afresh
    (another generator) to within 5%; no chart of the tab plots it."""
    q = quiz.variance_question(d_k)
    t = quiz.width_move(d_k)
    assert q.choices[q.value] == f"about 1/√{t}"
    shown = float(re.search(r"<b>([\d.]+)</b>", q.answer).group(1))
    rng = np.random.default_rng(5)
    dots = np.einsum("ij,ij->i", rng.standard_normal((4000, t)), rng.standard_normal((4000, t)))
    assert shown == pytest.approx(float((dots / t).std()), rel=0.05)
    assert shown == pytest.approx(1 / math.sqrt(t), rel=0.03)


def test_the_variance_choices_come_in_an_order_set_by_the_state():
    """The right choice (1/√t) is not always in one place, and a state always asks in the same
    order; the three sizes are always offered."""
    places = set()
    for d_k in core.D_K_VALUES:
        q = quiz.variance_question(d_k)
        t = quiz.width_move(d_k)
        assert sorted(q.choices) == sorted(["about 1", f"about 1/√{t}", f"about 1/{t}"])
        assert q == quiz.variance_question(d_k)
        places.add(q.value)
    assert places == {0, 1, 2}


def _asked_temperature(question) -> float:
    return float(re.match(r"At T = (\S+) instead of", question.ask)[1])


@pytest.mark.parametrize("d_k,temperature", [(64, 1.0), (512, 0.125), (1, 2.5), (4096, 10.0),
                                             (4096, 1.0)])
def test_the_argument_answers_are_cores_curves_at_the_moved_temperature(d_k, temperature):
    """Each temperature question's answer is core's curve at the temperature it asks about:
    temperature_move's where the answer prints apart from the value now, else the first of
    temperature_moves where it does (at d_k = 512, T = 0.125 the median prints >99.9% at
    0.25 and at 0.0625 alike, and 99% at T = 2)."""
    from attention_scaling.prose.formatting import distinct, percent
    i = core.D_K_VALUES.index(d_k)

    def curve(t, column):
        return core.saturation_curves(t, core.N_KEYS, 0.0)[column][i]

    def budget_weight(t):
        budget = core.head_budget(BUDGET_WIDTH, t, core.N_KEYS, 0.0)
        return budget["max_weight_median_none"][list(budget["heads"]).index(BUDGET_HEADS)]

    asked = {
        "saturation": (quiz.saturation_question(d_k, temperature, core.N_KEYS, 0.0),
                       lambda t: curve(t, "max_weight_median_none"), distinct),
        "gradient": (quiz.gradient_question(d_k, temperature, core.N_KEYS, 0.0),
                     lambda t: curve(t, "frozen_share_none"),
                     lambda a, b: (percent(a), percent(b))),
        "budget": (quiz.budget_question(BUDGET_WIDTH, BUDGET_HEADS, temperature, core.N_KEYS,
                                        0.0), budget_weight, distinct)}
    for key, (q, value, shown) in asked.items():
        t = _asked_temperature(q)
        moves = quiz.temperature_moves(temperature)
        assert q.value == value(t), key
        apart = [m for m in moves if shown(value(m), value(temperature))[0]
                 != shown(value(m), value(temperature))[1]]
        assert t == (apart[0] if apart else moves[0]), (key, t, moves)
    if (d_k, temperature) == (512, 0.125):      # further away, where halving changes nothing
        assert _asked_temperature(asked["saturation"][0]) == 2.0
    # the question's heads of BUDGET_WIDTH / BUDGET_HEADS: the saturation curve's point there
    t = _asked_temperature(asked["budget"][0])
    assert asked["budget"][0].value == core.saturation_curves(t, core.N_KEYS, 0.0)[
        "max_weight_median_none"][core.D_K_VALUES.index(BUDGET_WIDTH // BUDGET_HEADS)]


def test_the_temperatures_a_question_tries_are_core_s_each_once_nearest_first():
    for temp in core.TEMPERATURES:
        moves = quiz.temperature_moves(temp)
        assert moves[0] == quiz.temperature_move(temp)
        assert len(set(moves)) == len(moves) and temp not in moves
        assert set(moves) <= set(core.TEMPERATURES)
    assert quiz.temperature_moves(1.0) == [0.5, 2.0, 4.0, 7.9, 0.25, 0.125]


class _Run:
    def __init__(self, final):
        self.final, self.runs = {"median": final}, [0, 1, 2]


def test_the_training_answer_is_the_rule_with_the_lowest_final_loss():
    before = quiz.training_question(64, 1.0)
    assert before.value is None and "Train" in before.answer
    running = quiz.training_question(64, 1.0, running=True)
    assert running.value is None and "under way" in running.answer and "Train" not in running.answer
    q = quiz.training_question(64, 1.0, {"none": _Run(0.9), "sqrt": _Run(0.2), "linear": _Run(0.3)})
    assert q.choices[q.value] == "÷√dₖ" and plain(q.answer).startswith("÷√dk ends lowest.")
    assert "per unit of the loss's gradient at the logits, not the same step" in q.answer
    assert "saturates" in q.answer
    # at d_k = 1 every rule divides by one: the same model, so the question is whether they
    # end alike (its choices can differ), and no talk of saturation
    tie = quiz.training_question(1, 1.0, {r: _Run(0.5) for r in core.RULES})
    assert "apart or alike" in tie.ask and tie.choices[tie.value] == "They end alike"
    assert plain(tie.answer).startswith("They end alike.") and "saturat" not in tie.answer
    apart = quiz.training_question(1, 1.0, {"none": _Run(0.5), "sqrt": _Run(0.4),
                                            "linear": _Run(0.5)})
    assert apart.choices[apart.value] == "They end apart"
    assert quiz.training_question(1, 1.0).value is None


def _value(answer: str) -> str:
    return re.search(r"<b>(.*?)</b>", answer).group(1)


@pytest.mark.parametrize("d_k", [1, 16, 64, 512, 4096])
@pytest.mark.parametrize("temperature", [0.1, 1.0, 10.0])
def test_no_question_gives_its_answer_away(d_k, temperature):
    """The value revealed is not in the question, and each question is short."""
    questions = [quiz.draw_question(d_k, temperature, SEED), quiz.variance_question(d_k),
                 quiz.saturation_question(d_k, temperature, core.N_KEYS, 0.0),
                 quiz.gradient_question(d_k, temperature, core.N_KEYS, 0.0),
                 quiz.budget_question(BUDGET_WIDTH, BUDGET_HEADS, temperature, core.N_KEYS, 0.0)]
    for q in questions:
        assert _value(q.answer) not in q.ask
        assert len(plain(q.ask).split()) <= 33


@pytest.mark.parametrize("d_k", core.D_K_VALUES)
def test_the_draw_question_names_both_widths_and_the_way_it_moves(d_k):
    """It names the width it asks about: width_move's, or, where this draw's weight prints
    there as it does now (>99.9% at both), the first of width_moves where it does not."""
    from attention_scaling.prose.text import weight_label

    def shown(w):
        return weight_label(core.compute_state(w, 1.0, 0).unscaled)
    moves = quiz.width_moves(d_k)
    t = next((w for w in moves if shown(w) != shown(d_k)), moves[0])
    assert moves[0] == quiz.width_move(d_k)
    ask = plain(quiz.draw_question(d_k, 1.0, 0).ask)
    assert f"dk = {t} instead of {d_k}" in ask
    assert ("wider" if t > d_k else "narrower") in ask and "times" not in ask


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_a_typical_size_is_root_d_k_over_t_and_an_aligned_key_s_mean_is_rho_d_k_over_t(
        temperature):
    answer = plain(quiz.draw_question(64, temperature, 0, 8, 0.5).answer)
    sizes = [float(x) for x in re.findall(r"√\d+(?:/[\d.]+)? = ([\d.]+)", answer)]
    means = [float(x) for x in re.findall(r"mean 0\.5·\d+(?:/[\d.]+)? = ([\d.]+)", answer)]
    t = _asked_width(quiz.draw_question(64, temperature, 0, 8, 0.5))
    assert sizes == pytest.approx([8 / temperature, math.sqrt(t) / temperature], rel=0.01)
    assert means == pytest.approx([32 / temperature, 0.5 * t / temperature], rel=0.01)
    assert ("√dk/T" in answer) == (temperature != 1)
    # without an aligned key there is no aligned mean to speak of
    assert "aligned" not in quiz.saturation_question(64, temperature, 8, 0.0).answer


def test_the_training_answer_stays_while_its_runs_still_answer_the_setting():
    """A control the runs do not depend on (the alignment, the rule) keeps the finished runs'
    answer and lead; one they depend on (the width, the seed) asks for Train again."""
    from attention_scaling.page import Explorer
    from attention_scaling.state import ExplorerState

    explorer = Explorer(ExplorerState(tab="training", d_k=4, seed=SEED))
    view = explorer.view
    lead = view.leads["training"]

    def answer() -> str:       # as Reveal sends it
        view.reveal("training")
        return view.asks["training"]["reveal"].tags[0]

    assert "Press <b>Train</b>" in answer()
    explorer.start_training()          # no server: the runs at once
    answered, led = answer(), lead.text
    assert re.search(r"ends lowest|tie", answered) and led != ""
    explorer.state.align = 0.5
    explorer.state.rule = "none"
    assert (answer(), lead.text) == (answered, led)
    explorer.state.seed = SEED + 1
    assert "Press <b>Train</b>" in answer()


@pytest.mark.parametrize("align", [0.0, 1.0])
def test_temperature_is_called_the_same_knob_as_width_only_without_an_aligned_key(align):
    """Halving T doubles the unscaled logits' spread as a head 4 times wider does; with an
    aligned key it doubles that key's mean too, where the wider head quadruples it, and the
    two moves give different saturation."""
    d = 4
    half_t = core.saturation_curves(0.5, 8, align)["max_weight_median_none"]
    wider = core.saturation_curves(1.0, 8, align)["max_weight_median_none"]
    i, j = core.D_K_VALUES.index(d), core.D_K_VALUES.index(4 * d)
    same = abs(float(half_t[i]) - float(wider[j])) < 0.1
    answer = plain(quiz.saturation_question(d, 1.0, 8, align).answer)
    assert same == (align == 0)
    assert ("same knob" in answer) == same


def _strings(value) -> list[str]:
    """Every string in a property's value, however nested (lists, tuples, dicts)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def test_the_served_document_holds_each_answer_only_once_reveal_asks_for_it():
    """With Python behind the page (the served page, the notebook), no model of the document
    holds a step's answer (the string its Reveal shows) until that step's Reveal is clicked,
    which puts it in that Reveal's tags alone; the handout's request puts every answer in the
    tags of its own button, in one change."""
    from bokeh.document import Document
    from bokeh.events import ButtonClick

    from attention_scaling.page import Explorer
    from attention_scaling.state import TABS, ExplorerState

    explorer = Explorer(ExplorerState(tab="variance", d_k=64, seed=SEED))
    doc = Document()
    doc.add_root(explorer.view.root)
    for tab in (*TABS[2:], TABS[1]):     # every step opened once: each builds its tab
        explorer.state.tab = tab.key
    view = explorer.view
    answers = {key: q.answer for key, q in view.questions.items()}
    assert set(answers) == {t.key for t in TABS if t.ask}
    # the variance step's answer holds the spread core gives at the moved width
    spread = core.logit_distribution(quiz.width_move(64))["std_linear"]
    assert plain(answers["variance"]).startswith(f"{fmt(spread)} over")

    def holding(text: str) -> list[str]:
        return sorted(f"{m.name or type(m).__name__}.{prop}" for m in doc.models
                      for prop, value in m.properties_with_values().items()
                      if any(text in s for s in _strings(value)))

    assert {key: holding(a) for key, a in answers.items()} == {key: [] for key in answers}
    doc.callbacks.trigger_event(ButtonClick(view.asks["variance"]["reveal"]))
    assert {key: holding(a) for key, a in answers.items()} == {
        key: ["variance-reveal.tags"] if key == "variance" else [] for key in answers}
    # a new question puts the answer away again
    explorer.state.d_k = 128
    assert holding(answers["variance"]) == []
    new = {key: q.answer for key, q in view.questions.items()}
    assert new["variance"] != answers["variance"]
    doc.callbacks.trigger_event(ButtonClick(doc.get_model_by_name("present-answers")))
    assert {key: holding(a) for key, a in new.items()} == {
        key: ["present-answers.tags"] for key in new}


@pytest.mark.parametrize("temperature", [0.1, 0.4, 1.0, 10.0])
def test_no_answer_sets_a_value_against_itself(temperature):
    """Where the value asked for and the value now print alike (">99.9%" twice at saturated
    states), the answer says that the change is below what a percent shows (or, for a share
    of draws, that it is the same or within sampling noise) instead of "X against X";
    elsewhere it names both, and they differ."""
    for d_k in core.D_K_VALUES[::4]:
        asked = [(quiz.saturation_question(d_k, temperature, core.N_KEYS, 0.0), False),
                 (quiz.gradient_question(d_k, temperature, core.N_KEYS, 0.0), True),
                 (quiz.budget_question(BUDGET_WIDTH, BUDGET_HEADS, temperature, core.N_KEYS,
                                       0.0), False)]
        for q, counted in asked:
            head = plain(q.answer).split(". ")[0]
            shown = _value(q.answer)
            m = re.search(r", against (.+?) at T = ", head)
            if m:
                assert m[1] != plain(shown), head
                continue
            assert f"as at T = {temperature:g}: " in head, head
            same = "the same" in head
            assert same or head.endswith(
                "the difference is within the sampling noise of 2,000 draws" if counted
                else "the change is below what a percent shows"), head
            # "the same" only for an equal share of draws, never for a weight
            assert not same or (counted and q.value == core.saturation_curves(
                temperature, core.N_KEYS, 0.0)["frozen_share_none"][
                    core.D_K_VALUES.index(d_k)]), (d_k, head)


def test_a_share_question_asks_where_the_share_moves_beyond_sampling_noise():
    """At d_k = 128, T = 0.5, 8 keys, ρ = 0.5 the unscaled share is all 2,000 draws and at
    T = 1 one draw fewer: sampling noise. The question asks about a temperature where the
    share moves by more than two standard errors of the difference."""
    q = quiz.gradient_question(128, 0.5, core.N_KEYS, 0.5)
    t = _asked_temperature(q)
    i = core.D_K_VALUES.index(128)
    a, b = (core.saturation_curves(x, core.N_KEYS, 0.5)["frozen_share_none"][i] for x in (t, 0.5))
    assert t != 1.0 and abs(a - b) > 2 * math.sqrt((a * (1 - a) + b * (1 - b)) / core.CURVE_DRAWS)
