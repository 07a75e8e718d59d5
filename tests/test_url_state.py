"""URL state: every control round-trips through the query string; hostile values are tamed."""

import math

import pytest

from attention_scaling import core
from attention_scaling.state import CONTROLS, MAX_SEED, TABS, ExplorerState, parse_query, to_query


def q(**kw):
    return {k: v if isinstance(v, list) else [v] for k, v in kw.items()}


def test_every_control_round_trips():
    for d_k in core.D_K_VALUES:
        for t in (core.TEMPERATURES[0], 1.0, core.TEMPERATURES[7], core.TEMPERATURES[-1]):
            for rule in core.RULES:
                st = ExplorerState(d_k=d_k, temperature=t, rule=rule, seed=12345)
                values, hidden, notices = parse_query(q(**to_query(st)))
                assert notices == [] and hidden == set()
                back = ExplorerState(**values)
                for k in ("d_k", "temperature", "rule", "seed"):
                    assert getattr(back, k) == getattr(st, k)


@pytest.mark.parametrize("key,raw,expected", [
    ("d_k", "65", 64), ("d_k", "-1", 1), ("d_k", "5000", 4096), ("d_k", "0.5", 1),
    ("temperature", "0.3", 0.32), ("temperature", "100", 10.0), ("temperature", "1e-9", 0.1),
    ("seed", "99999999999", MAX_SEED),
])
def test_out_of_range_values_are_clamped_with_a_notice(key, raw, expected):
    values, _, notices = parse_query(q(**{key: raw}))
    assert values[key] == expected
    assert len(notices) == 1 and raw in notices[0]


@pytest.mark.parametrize("key", ["d_k", "temperature", "seed", "scaled"])
@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "1e999", "", "abc", "<script>alert(1)</script>",
                                 "x" * 10_000, "²", "0x10", b"\xff\xfe"])
def test_unusable_values_are_ignored_with_a_notice(key, raw):
    values, _, notices = parse_query(q(**{key: raw}))
    assert key not in values
    assert len(notices) == 1
    assert len(notices[0]) < 200                 # long input is truncated in the notice


def test_negative_and_zero_temperature_are_ignored():
    for raw in ("0", "-2"):
        values, _, notices = parse_query(q(temperature=raw))
        assert "temperature" not in values and notices


def test_repeated_keys_use_the_last_value_and_say_so():
    values, _, notices = parse_query(q(d_k=["64", "128"]))
    assert values == {"d_k": 128} and "2 times" in notices[0]


def test_view_switches():
    assert parse_query(q(embed="1"))[1] == {"header"}
    assert parse_query(q(hide="controls,text"))[1] == {"controls", "text"}
    values, hidden, notices = parse_query(q(hide="controls,<b>x</b>"))
    assert hidden == {"controls"} and len(notices) == 1


def test_parameters_have_bounds_on_every_path():
    st = ExplorerState()
    for name, bad in (("d_k", 65), ("temperature", 0.3), ("seed", -5), ("seed", MAX_SEED + 1)):
        with pytest.raises(ValueError):
            setattr(st, name, bad)
    assert math.isfinite(st.temperature)


def test_the_tab_and_the_argument_controls_round_trip_and_bad_ones_are_named():
    from attention_scaling.state import ExplorerState, parse_query, to_query
    values, _, notices = parse_query({"tab": ["gradient"], "keys": ["13"], "align": ["0.26"]})
    assert values == {"tab": "gradient", "keys": 12, "align": 0.3} and len(notices) == 2
    assert to_query(ExplorerState(**values))["align"] == "0.3"
    values, _, notices = parse_query({"tab": ["<script>"], "align": ["-1"]})
    assert values == {"align": 0.0}
    assert notices[0] == "Ignored tab='<script>': use one of draw, variance, saturation, " \
        "gradient, training, budget."


#: Values the browser reads as state.parse_query reads them (assets/js/helpers.js
#: AS.position), for every kind of control: numbers in and between the choices, at and past
#: their ends, in other notations, and text.
RAW = ("64", "300", "1e3", "-5", "0", "nan", "inf", "-inf", "1e999", " 64 ", "1_000", "1__0",
       "_1", "0x10", "", "abc", "2.5", "0.125", ".5", "1.", "+8", "0.3", "0.55", "1e-9",
       "sqrt", "SQRT", " none ", "linear", "draw", "budget", "7", "007", "-1", "1.5",
       "99999999999999999999999", "2147483647", "2147483648", "１２")


@pytest.mark.browser
def test_the_browser_reads_every_control_as_parse_query_does(page):
    """The rows the served page hands the browser (layout.View.address, from state.CONTROLS)
    and AS.position agree with parse_query on every control and value of RAW: the same
    position (or seed), or both refuse it."""
    from attention_scaling.page import Explorer
    from conftest import HELPERS
    explorer = Explorer()
    rows = [{k: v for k, v in row.items() if k != "widget"}
            for row in explorer.view.address(explorer.seed_input)]
    by_key = {c.url_key: c for c in CONTROLS}
    assert sorted(row["key"] for row in rows) == sorted(by_key)
    page.set_content("<html><body></body></html>")
    page.add_script_tag(content=HELPERS)
    for row in rows:
        c = by_key[row["key"]]
        browser = page.evaluate("([row, raws]) => raws.map((raw) => window.__AS.position(row, raw))",
                                [row, list(RAW)])
        for raw, got in zip(RAW, browser):
            value = parse_query({c.url_key: [raw]})[0].get(c.name)
            want = None if value is None else (value if c.kind == "count"
                                               else list(c.values).index(value))
            assert got == want, (c.url_key, raw, got, want)


@pytest.mark.parametrize("tab", [t.key for t in TABS])
def test_a_page_opened_on_a_tab_arrives_with_that_tabs_unused_controls_set(tab):
    """The document a page at ?tab=<key> is sent has the controls of that tab's idle rows
    disabled with their note shown, and every other control enabled with no note: the
    browser's program (assets/js/idle.js) then has nothing to change, where each note it
    showed would lay the whole page out again."""
    from attention_scaling.page import Explorer
    view = Explorer(ExplorerState(tab=tab)).view
    unused = dict(next(t for t in TABS if t.key == tab).idle)
    widgets = {**{n: w for n, w in view.widgets.items() if n != "tab"},
               "seed": view.buttons["resample"]}
    assert {n for n, w in widgets.items() if w.disabled} == set(unused)
    shown = {n: note.text for n, note in view.idle_notes.items() if note.visible}
    assert set(shown) == set(unused)
    for name, why in unused.items():
        assert "Not used on this tab" in shown[name] and why.split()[0] in shown[name]
    assert all(note.text == "" for n, note in view.idle_notes.items() if n not in unused)
