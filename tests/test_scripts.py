"""The browser programs of assets/js and what the pages give them: every CustomJS,
CustomJSHover, CustomJSTickFormatter and CustomJSTransform of the served page and of the offline copy runs the
code of one file, given as args exactly the names that file declares in its ``/* global */``
line (eslint checks the file uses nothing else; tests/js runs the files themselves), with
assets/js/helpers.js before it exactly when it declares AS."""
import re

import numpy as np
from bokeh.document import Document
from bokeh.models import CustomJS, CustomJSHover, CustomJSTickFormatter, CustomJSTransform

from attention_scaling import export
from attention_scaling.style import (ASSETS, LIBRARY, compact, library_code, script,
                                     script_globals)
from attention_scaling.page import Explorer
from attention_scaling.state import ExplorerState

#: What BokehJS itself passes to each kind of program, after its args.
BOKEH_NAMES = {CustomJS: {"cb_obj", "cb_data", "cb_context"},
               CustomJSHover: {"value", "format", "special_vars"},
               CustomJSTickFormatter: {"tick", "index", "ticks"},
               CustomJSTransform: {"x", "xs"}}
FILES = {p.stem: p.read_text(encoding="utf-8") for p in (ASSETS / "js").glob("*.js")}
HELPERS = FILES["helpers.js".removesuffix(".js")]
#: A slider's own labels, written inline (style.position_formatter): listed, or percentages.
POSITIONS = re.compile(r"return \[.*\]\[tick\] \?\? '';|"
                       + re.escape("return Number.isInteger(tick) ? tick + '%' : '';"))


def _code(program) -> str:
    """A program's code: a CustomJSTransform's is its v_func (it has no scalar func)."""
    return program.v_func if isinstance(program, CustomJSTransform) else program.code


def _programs(doc: Document) -> list:
    found = [m for m in doc.models if type(m) in BOKEH_NAMES]
    for callbacks in doc.callbacks.js_event_callbacks.values():
        found.extend(callbacks)
    return found


def _served() -> Document:
    explorer = Explorer(ExplorerState(tab="saturation"))
    doc = Document()
    doc.add_root(explorer.page().get_root(doc))
    for tab in ("variance", "gradient", "training", "budget"):     # every tab built
        explorer.state.tab = tab
    explorer.sync_url(doc)
    return doc


def _offline() -> Document:
    payload = {"floats": np.zeros(8), "ints": np.zeros(2, dtype="<u2")}   # not read here
    view = export.build_view(payload, export.seed_list(export.DEFAULT_SEEDS))
    doc = Document()
    doc.add_root(view.root)
    doc.js_on_event("document_ready", *view.ready)
    return doc


def test_programs_that_declare_AS_are_calls_into_the_library_that_holds_their_code():
    """A program that declares AS is a call into the library (style.library_code), given its
    declared names in order; the library holds helpers.js and each such program once, as a
    function of those names (the offline copy's own only in the offline library). Any other
    program is its file's code, compacted."""
    served, offline = library_code(), library_code(offline=True)
    for name, code in FILES.items():
        if name == "helpers":
            continue
        if "AS" in script_globals(code):
            names = [n for n in script_globals(code) if n != "AS"]
            call = f'["{name}"]({", ".join(names)});'
            assert script(name).startswith("return ") and script(name).endswith(call), name
            assert LIBRARY in script(name) and compact(code) not in script(name), name
            function = f'"{name}": function ({", ".join(names)}) {{\n\'use strict\';\n'
            assert offline.count(function + compact(code) + "\n}") == 1, name
            assert served.count(function) == (0 if name.startswith("offline-") else 1), name
        else:
            assert script(name) == compact(code), name
    assert served.startswith(compact(HELPERS)) and offline.startswith(compact(HELPERS))
    assert script_globals(FILES["offline-select"])[-2:] == ["action", "cb_obj"]   # two lines


def test_compact_drops_comments_and_indentation_but_not_a_template_literal_s_text():
    code = ("// a comment\nconst a = 1;  // kept: not a whole line\n\n    if (a) {\n"
            "      const css = `x {\n  // inside: text\n    y: 1;`;\n    }\n")
    assert compact(code) == ("const a = 1;  // kept: not a whole line\nif (a) {\n"
                             "const css = `x {\n  // inside: text\n    y: 1;`;\n}")


def test_every_program_is_given_exactly_the_names_its_file_declares(monkeypatch):
    """Every browser program (CustomJS) in the served and the offline documents is given
    exactly the names its file declares, and no name BokehJS gives it itself. The offline
    document's first view is drawn from training runs of two steps, in a cache of their own
    (what programs it holds does not depend on how long its runs are; its 75 runs of 300
    steps took 12 of this test's 20 s)."""
    monkeypatch.setattr(export, "TRAINING_STEPS", 2)
    monkeypatch.setattr(export, "_RUNS", {})
    by_code = {script(name): name for name in FILES if name != "helpers"}
    used = set()
    for doc, offline in ((_served(), False), (_offline(), True)):
        found = [m for m in _programs(doc) if m.name == LIBRARY]
        assert len(found) == 1 and found[0].code == library_code(offline)
        for program in _programs(doc):
            if program.name == LIBRARY:
                continue
            code = _code(program)
            if code not in by_code:
                assert type(program) is CustomJSTickFormatter and POSITIONS.fullmatch(code), code
                continue
            name = by_code[code]
            used.add(name)
            declared = set(script_globals(FILES[name])) - {"AS"}
            bokeh = BOKEH_NAMES[type(program)]
            assert set(program.args) == declared - bokeh, name
            assert not set(program.args) & bokeh, name
    # every program but the page-level ones (first-view: a <script>; reconnect: on the
    # session's connection_lost, added by create_page) is in one of the two pages
    assert used == set(FILES) - {"helpers", "first-view", "reconnect"}


def test_a_session_s_document_carries_at_most_60_kb_of_program_code():
    """Every tab built: each program's code once (the library), and a short call per model
    that runs one."""
    programs = {id(p): p for p in _programs(_served())}.values()
    assert sum(len(_code(p).encode()) for p in programs) <= 60_000
