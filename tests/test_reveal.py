"""Predict, then reveal, in Chromium on the served page and the offline copy: each step's
question is worded from the state, its true value is nowhere in the page's text before Reveal
(every text node of the document and its shadow roots, scripts aside), and Reveal shows the
guess beside that value, which equals what core computes in this process, here, for several
states; a change of the state asks anew."""

from __future__ import annotations

import json
import re
import urllib.request

import numpy as np
import pytest

from attention_scaling import core
from attention_scaling.argument import BUDGET_HEADS, BUDGET_WIDTH
from attention_scaling.prose import quiz
from attention_scaling.state import ExplorerState
from attention_scaling.prose.formatting import fmt, percent, share_of_draws
from attention_scaling.prose.text import plain
from conftest import INIT, UI_WAIT_MS, open_at, wait_still

pytestmark = pytest.mark.browser

#: Every text of the page: the text nodes of the document and of every shadow root in it,
#: scripts and style sheets left out, without white space (compare :func:`_bare` text).
PAGE_TEXT = r"""() => {
  const out = [];
  const walk = (node) => {
    for (const n of node.childNodes) {
      if (n.nodeType === 3) out.push(n.textContent);
      else if (n.nodeType === 1 && !['SCRIPT', 'STYLE'].includes(n.tagName)) {
        if (n.shadowRoot) walk(n.shadowRoot);
        walk(n);
      }
    }
  };
  walk(document.documentElement);
  return out.join('').replace(/\s+/g, '');
}"""

MODEL_TEXT = """(n) => { for (const d of Bokeh.documents) { const m = d.get_model_by_name(n);
  if (m) return window.__AS.root(m)?.querySelector('.bk-clearfix')?.textContent ?? ''; }
  return null; }"""


def _draw_truth(d_k, temperature, seed):
    """This draw's largest unscaled weight at the moved width (the first of width_moves
    where it prints apart from its weight now): the softmax of its own dot products."""
    def largest(width):
        query, keys = core.sample_qk(seed, width, core.N_KEYS)
        z = np.asarray(keys, float) @ np.asarray(query, float) / temperature
        p = np.exp(z - z.max())
        return percent(float((p / p.sum()).max()), below_one=True)
    moves = quiz.width_moves(d_k)
    return next((largest(w) for w in moves if largest(w) != largest(d_k)), largest(moves[0]))


def _curve_truth(metric):
    """At d_k, the curve ``metric`` at temperature_move's temperature (the cases' states are
    where the answer there prints apart from the value now)."""
    def truth(d_k, temperature, _seed):
        t = quiz.temperature_move(temperature)
        value = core.saturation_curves(t, core.N_KEYS, 0.0)[metric][core.D_K_VALUES.index(d_k)]
        # a share as the page words it ("89% of draws"): its first word, as the test reads
        return (share_of_draws(value, core.CURVE_DRAWS).split()[0]
                if metric.startswith("frozen") else percent(value, below_one=True))
    return truth


def _variance_truth(d_k, _temperature, _seed):
    t = quiz.width_move(d_k)
    return fmt(core.logit_distribution(t)["std_linear"])


#: (tab, its address, the state, the true value as shown, computed here from core)
CASES = [
    ("draw", "?d_k=8", (8, 1.0, 2288), _draw_truth),
    ("draw", "?d_k=512&temperature=2.5&seed=7", (512, 2.5, 7), _draw_truth),
    ("variance", "?tab=variance&d_k=64", (64, 1.0, 2288), _variance_truth),
    ("saturation", "?tab=saturation&d_k=64", (64, 1.0, 2288),
     _curve_truth("max_weight_median_none")),
    ("gradient", "?tab=gradient&d_k=512&temperature=0.5", (512, 0.5, 2288),
     _curve_truth("frozen_share_none")),
    ("budget", "?tab=budget&temperature=2", (BUDGET_WIDTH // BUDGET_HEADS, 2.0, 2288),
     _curve_truth("max_weight_median_none")),
]


def _bare(text: str) -> str:
    return "".join(text.split())


def _reveal(page, key):
    page.wait_for_function(f"() => ({MODEL_TEXT})('{key}-ask-text')?.startsWith('Predict.')",
                           timeout=UI_WAIT_MS)
    wait_still(page)
    before = page.evaluate(PAGE_TEXT)
    page.locator(".bk-btn", has_text="Reveal").locator("visible=true").first.click()
    page.wait_for_function(f"() => ({MODEL_TEXT})('{key}-answer')?.includes('Answer:')",
                           timeout=UI_WAIT_MS)
    return before, page.evaluate(MODEL_TEXT, f"{key}-answer"), page.evaluate(PAGE_TEXT)


@pytest.mark.parametrize("key,search,state,truth", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_reveal_shows_cores_value_which_the_page_held_back(page, server, key, search, state,
                                                          truth):
    open_at(page, server, search)
    before, answer, after = _reveal(page, key)
    value = truth(*state)
    shown = answer.split("Answer:")[1].split()[0]
    assert shown == value, answer
    sentence = _bare(plain(answer.split("Answer:")[1]))
    assert sentence not in before
    assert sentence in after
    assert _bare(f"Answer: {value}") not in before
    assert answer.startswith("Your guess:")
    assert page.console_errors == []


def _sent_strings(frames) -> list[str]:
    """Every string in the server's websocket messages (each a JSON text; binary buffers
    hold numbers)."""
    out: list[str] = []

    def walk(value) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(k)
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for frame in frames:
        if isinstance(frame, str):
            try:
                walk(json.loads(frame))
            except ValueError:
                out.append(frame)
    return out


def test_the_served_page_is_sent_the_answer_only_on_reveal(page, server):
    """The answer (as quiz words it for this state) is in neither the page's HTML nor any
    message the server sent before Reveal; Reveal's click brings it, and the page shows it."""
    search = "?d_k=8&seed=7"
    r = ExplorerState(d_k=8, seed=7).result
    answer = quiz.draw_question(r.d_k, r.temperature, r.seed, len(r.raw_logits), r.align).answer
    frames: list = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda frame: frames.append(frame)))
    open_at(page, server, search)
    page.wait_for_function(f"() => ({MODEL_TEXT})('draw-ask-text')?.startsWith('Predict.')",
                           timeout=UI_WAIT_MS)
    with urllib.request.urlopen(server.url + search, timeout=60) as response:
        html = response.read().decode("utf-8")
    before = len(frames)
    assert before > 0
    assert not any(answer in s for s in _sent_strings(frames[:before]))
    assert answer not in html and json.dumps(answer)[1:-1] not in html
    page.locator(".bk-btn", has_text="Reveal").locator("visible=true").first.click()
    page.wait_for_function(f"() => ({MODEL_TEXT})('draw-answer')?.includes('Answer:')",
                           timeout=UI_WAIT_MS)
    assert any(answer in s for s in _sent_strings(frames[before:]))
    assert _bare(plain(answer)) in _bare(page.evaluate(MODEL_TEXT, "draw-answer"))
    assert page.console_errors == []


def test_a_new_state_asks_anew_and_puts_the_answer_away(page, server):
    open_at(page, server, "?d_k=64")
    _reveal(page, "draw")
    ask = page.evaluate(MODEL_TEXT, "draw-ask-text")
    assert "512" in ask
    page.locator(".bk-btn", has_text="÷dₖ").first.click()     # the rule: the same question
    # the server has applied the rule once the left chart shows ÷dₖ's logits
    page.wait_for_function("() => Bokeh.documents[0].get_model_by_name('scaled-weights')"
                           ".title.text.startsWith('Scaled by 1/dₖ')", timeout=UI_WAIT_MS)
    assert "Answer:" in page.evaluate(MODEL_TEXT, "draw-answer")
    page.evaluate("""() => { const m = Bokeh.documents[0].get_model_by_name('d_k');
                             m.value = m.value + 3; }""")    # three widths wider: 128
    page.wait_for_function(f"() => !({MODEL_TEXT})('draw-answer').includes('Answer:')",
                           timeout=UI_WAIT_MS)
    assert page.evaluate(MODEL_TEXT, "draw-ask-text") != ask
    assert "1024" in page.evaluate(MODEL_TEXT, "draw-ask-text")


def test_the_choice_is_a_button_and_the_guess_is_shown(page, server):
    open_at(page, server, "?tab=variance&d_k=16")
    page.wait_for_function(f"() => ({MODEL_TEXT})('variance-ask-text')?.startsWith('Predict.')",
                           timeout=UI_WAIT_MS)
    page.locator(".bk-btn", has_text="about 1/√128").first.click()
    _before, answer, _after = _reveal(page, "variance")
    assert answer.startswith("Your guess: about 1/√128.") and "about 1/√128 = 0.0884" in answer


def test_the_offline_copy_reveals_the_same_values(page, offline_export):
    """The offline copy's Reveal shows core's values as the served page does. Over 20 s: the
    copy's whole page opened four times (it holds every state of its grid)."""
    seeds = offline_export.seeds
    page.add_init_script(INIT)
    for search, key, state in (("?d_k=8", "draw", (8, 1.0, seeds[0])),
                               ("?tab=saturation&d_k=64", "saturation", (64, 1.0, seeds[0]))):
        page.goto(offline_export.path.resolve().as_uri() + search)
        before, answer, _after = _reveal(page, key)
        truth = _draw_truth if key == "draw" else _curve_truth("max_weight_median_none")
        value = truth(*state)
        assert answer.split("Answer:")[1].split()[0] == value
        assert _bare(f"Answer: {value}") not in before
        assert _bare(plain(answer.split("Answer:")[1])) not in before
    # the training step is answered by the copy's runs: at T = 1 with its first seed only
    for seed, told in ((seeds[0], r"(ends lowest|tie)\."), (seeds[1], rf"seed {seeds[0]} only")):
        page.goto(offline_export.path.resolve().as_uri() + f"?tab=training&d_k=64&seed={seed}")
        _before, answer, _after = _reveal(page, "training")
        assert re.search(told, answer), (seed, answer)
    assert page.console_errors == []
