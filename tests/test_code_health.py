"""The shape of src/attention_scaling: no dead code (vulture), no function too long or too
branched (radon), and layers that import one way."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from radon.complexity import cc_visit
from radon.visitors import Function

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "attention_scaling"
WHITELIST = Path(__file__).with_name("vulture_whitelist.py")
#: The code that uses the package (paths from ROOT): a definition used by none of it is dead.
USERS = ["tests", "benchmarks", "app",
         *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "scripts").glob("*.py"))]
SRC = "src/attention_scaling"


def _vulture(*args: str) -> list[str]:
    """vulture's findings, one a line, paths from ROOT."""
    r = subprocess.run([sys.executable, "-m", "vulture", *args], capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert r.returncode in (0, 3), r.stderr        # 3: vulture found unused code
    return r.stdout.splitlines()


def test_no_unused_import_variable_or_unreachable_code_in_src():
    """vulture's high-confidence findings (unused imports, variables and arguments,
    unreachable code) over src/ alone."""
    assert _vulture(SRC, "--min-confidence", "80") == []


def test_every_function_class_and_method_in_src_is_used():
    """vulture's findings at 60% confidence (unused functions, classes, methods, properties,
    variables) in src/, counting the uses in src/, the tests, the benchmarks, the app and
    the scripts, and in tests/vulture_whitelist.py the names a library calls. Its "unused
    attribute" findings are left out: they are the properties of Bokeh and param models,
    which the libraries read by name."""
    found = _vulture(SRC, *USERS, str(WHITELIST), "--min-confidence", "60")
    ours = [line for line in found if line.startswith(SRC + "/")]
    assert [line for line in ours if "unused attribute" not in line] == []


# ---- size and complexity ------------------------------------------------------------------

MAX_LINES = 60
MAX_COMPLEXITY = 15

def _functions():
    """(module.qualified name, lines from its def to its end, cyclomatic complexity) of every
    function and method in src/attention_scaling, nested functions included."""

    def walk(block, prefix):
        name = f"{prefix}.{block.name}"
        yield name, block.endline - block.lineno + 1, block.complexity
        for inner in block.closures:
            yield from walk(inner, name)

    for path in sorted(PACKAGE.rglob("*.py")):
        stem = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        for block in cc_visit(path.read_text(encoding="utf-8")):
            if isinstance(block, Function):
                owner = f"{stem}.{block.classname}" if block.is_method else stem
                yield from walk(block, owner)


def test_no_function_is_longer_or_more_branched_than_the_limits():
    offenders = {name: (lines, cc) for name, lines, cc in _functions()
                 if lines > MAX_LINES or cc > MAX_COMPLEXITY}
    assert offenders == {}, f"over {MAX_LINES} lines or complexity {MAX_COMPLEXITY} (lines, cc)"


def test_the_size_check_sees_a_long_function(tmp_path, monkeypatch):
    """Positive control: a function of 61 lines in the package is found."""
    body = "".join(f"    x{i} = {i}\n" for i in range(60))
    (tmp_path / "big.py").write_text(f"def big():\n{body}", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path)
    assert [(n, lines) for n, lines, _cc in _functions()] == [("big.big", 61)]


# ---- layers -------------------------------------------------------------------------------

#: What each module of src/attention_scaling may import of the package: core <- prose (a
#: package: the numbers as printed, the texts, leads and questions); core <- state (the
#: controls, no prose); and above them style <- figures, argument <- components <- layout <-
#: page / export
#: <- cli, and server (a
#: package) beside page and export; seams (the libraries' internals) and training (the served
#: runs' scheduler) and blas (BLAS's threads), which import none of the package, under page,
#: server, work and export; documents (a served document's changes as one message) and runner
#: (a session's training runs) under page; nothing imports cli. The package's __init__ imports page on first use of
#: `attention_scaling.Explorer` only.
_BOKEH = {"core", "prose", "state", "style", "figures", "argument", "components", "layout"}
LAYERS = {
    "__init__": {"page"},
    "core": set(),
    "seams": set(),
    "blas": set(),
    "prose": {"core"},
    "state": {"core"},
    "style": {"core"},
    "figures": {"core", "prose", "style"},
    "argument": {"core", "prose", "state", "style"},
    "work": {"blas", "core", "prose", "state", "style", "argument"},
    "components": {"core", "prose", "state", "style", "argument"},
    "layout": _BOKEH - {"layout"},
    "training": set(),
    "documents": set(),
    "runner": {"core", "prose", "state", "style", "argument", "training", "documents"},
    "page": _BOKEH | {"blas", "seams", "training", "work", "documents", "runner"},
    "export": _BOKEH | {"blas", "work"},
    "server": _BOKEH | {"blas", "page", "seams", "training", "work", "documents", "runner"},
    "cli": _BOKEH | {"blas", "page", "export", "server", "seams", "training", "work",
                     "documents", "runner"},
}
#: Libraries a module must not load (core: nothing but NumPy and the standard library).
NOT_LOADED = {
    "prose": {"panel", "bokeh", "param"},
    "state": {"panel", "bokeh"},
    **{m: {"panel"} for m in ("style", "figures", "argument", "components", "layout", "work")},
}


def _files(module: str) -> list[Path]:
    """The source files of a module of the package: one file, or a subpackage's files."""
    folder = PACKAGE / module
    return sorted(folder.glob("*.py")) if folder.is_dir() else [PACKAGE / f"{module}.py"]


def _package_imports(path: Path) -> set[str]:
    """The package's modules that ``path`` imports anywhere (in functions too); in a
    subpackage, its own modules are not counted."""
    found = set()
    top = len(path.relative_to(PACKAGE).parts)       # 1: a module, 2: in a subpackage
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == top:
            found |= ({node.module.split(".")[0]} if node.module
                      else {a.name for a in node.names})
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "attention_scaling"):
            parts = node.module.split(".")
            found |= {parts[1]} if len(parts) > 1 else {a.name for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names
                      if a.name.startswith("attention_scaling.")}
    return found


def test_every_module_has_a_layer():
    modules = {p.stem for p in PACKAGE.glob("*.py")} | {
        p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert modules == set(LAYERS)


@pytest.mark.parametrize("module", sorted(LAYERS))
def test_each_module_imports_only_the_layers_below_it(module):
    """Every import statement of the module, those inside functions too."""
    imported = set().union(*map(_package_imports, _files(module))) - {module}
    assert imported <= LAYERS[module], sorted(imported - LAYERS[module])


#: Inside prose/: what each of its modules may import of the others (numbers as printed, then
#: the texts, then the leads and questions that quote them).
PROSE_LAYERS = {"formatting": set(), "text": {"formatting"}, "lead": {"formatting", "text"},
                "quiz": {"formatting", "text"}, "__init__": set()}


@pytest.mark.parametrize("module", sorted(PROSE_LAYERS))
def test_each_prose_module_imports_only_the_prose_below_it(module):
    path = PACKAGE / "prose" / f"{module}.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "attention_scaling.prose."):
            found.add(node.module.split(".")[2])
    assert set(PROSE_LAYERS) - {"__init__"} == {p.stem for p in (PACKAGE / "prose").glob("*.py")
                                                 if p.stem != "__init__"}
    assert found <= PROSE_LAYERS[module], sorted(found - PROSE_LAYERS[module])


def test_no_module_imports_another_s_private_name():
    """Each module of the package uses the others through their public names: no
    ``from .text import _fmt``, no ``core._helper`` (a private name is its module's own)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (
                    node.level or (node.module or "").startswith("attention_scaling")):
                found += [f"{path.name}:{node.lineno} {a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
            elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and node.value.id in LAYERS and node.attr.startswith("_")
                  and not node.attr.startswith("__")):
                found.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
    assert found == []


def _tab_keys_asked(tree: ast.AST, keys: set) -> list[int]:
    """The lines of ``tree`` that compare with a tab's key or look one up by it (a literal
    ``"training"`` in ``key == "training"``, ``tabs["training"]``, ``key in ("draw", ...)``;
    the first tab's key by its name, ``key == ONE_DRAW``)."""
    def literal(node) -> bool:
        return isinstance(node, ast.Constant) and node.value in keys

    def named(node) -> bool:
        return isinstance(node, ast.Name) and node.id == "ONE_DRAW"

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            operands += [e for o in operands if isinstance(o, (ast.Tuple, ast.List, ast.Set))
                         for e in o.elts]
            if any(literal(o) or named(o) for o in operands):
                lines.append(node.lineno)
        elif isinstance(node, ast.Subscript) and literal(node.slice):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and any(literal(a) for a in node.args):
            lines.append(node.lineno)
    return lines


def test_no_module_but_state_asks_for_a_tab_by_its_key():
    """A tab is a row of state.TABS and its class in argument.TAB_VIEWS: elsewhere a tab is
    found by what its class says it is (TabView.with_page, TabView.trains), never by comparing
    with its key (state.ONE_DRAW's included) or looking it up by a literal one."""
    from attention_scaling.state import TABS
    keys = {t.key for t in TABS}
    found = [f"{path.name}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
             if path.name != "state.py"
             for line in _tab_keys_asked(ast.parse(path.read_text(encoding="utf-8")), keys)]
    assert found == []
    probe = ast.parse('tabs["training"]; key == "draw"; k in ("x", "budget"); f("gradient")\n'
                      'k != ONE_DRAW; k in (ONE_DRAW, t); {ONE_DRAW: 1}')
    assert _tab_keys_asked(probe, keys) == [1, 1, 1, 1, 2, 2]


def test_tests_and_benchmarks_import_no_private_name_of_the_package():
    """The tests, testkit/ and the benchmarks use the package through its public names too:
    no ``from attention_scaling.prose.text import _helper``."""
    root = PACKAGE.parents[1]
    found = [f"{path.relative_to(root)}:{node.lineno} {a.name}"
             for folder in ("tests", "testkit", "benchmarks")
             for path in sorted((root / folder).glob("*.py"))
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.ImportFrom)
             and (node.module or "").startswith("attention_scaling")
             for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    assert found == []


@pytest.mark.parametrize("module", sorted(LAYERS))
def test_importing_a_module_loads_only_the_layers_below_it(module):
    """In a fresh process: the package's modules that importing it loads (at import time;
    a subpackage, each of its modules), and for core, that nothing but NumPy and the
    standard library is loaded."""
    names = (["attention_scaling"] if module == "__init__" else
             [f"attention_scaling.{module}"
              + ("" if p.stem in (module, "__init__") else f".{p.stem}") for p in _files(module)])
    code = (f"import sys; before = set(sys.modules); import {', '.join(names)}; "
            "new = set(sys.modules) - before; "
            "print(sorted({m.split('.')[1] for m in new if m.startswith('attention_scaling.')}));"
            "print(sorted({m.split('.')[0] for m in new} - set(sys.stdlib_module_names)))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, check=True)
    ours, libraries = (set(ast.literal_eval(line)) for line in r.stdout.splitlines()[-2:])
    ours.discard(module)
    if module == "__init__":
        assert ours == set()             # Explorer (page, Panel) only when asked for
    assert ours <= LAYERS[module], sorted(ours - LAYERS[module])
    if module == "core":
        assert libraries <= {"attention_scaling", "numpy"}, libraries
    assert not libraries & NOT_LOADED.get(module, set()), libraries & NOT_LOADED[module]
