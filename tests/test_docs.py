"""The README and docs/: every relative link reaches a file and, when it names one, a heading;
the README stays a front door (at most 150 lines, the two commands); every `attention-scaling`
flag and `ATTENTION_SCALING_*` variable they name exists; and measured figures stay in
docs/benchmarks.md and docs/deploy.md."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
#: Where measured figures (times, sizes, percentiles) may be quoted; security.md's sizes are
#: its limits (settings), and it quotes no measurement.
MEASURED = {"benchmarks.md", "deploy.md", "security.md"}

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def _prose(text: str) -> str:
    """The Markdown without code blocks and inline code (links there are not links)."""
    return _CODE.sub("", _FENCE.sub("", text))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text without markup, lower case, every
    character but letters, digits, `_`, `-` and spaces dropped, spaces made `-`."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)       # a link: its text
    text = re.sub(r"[`*]|(?<!\w)_|_(?!\w)", "", text)
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of ``path``, repeats numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    out = set()
    for heading in _HEADING.findall(_FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(heading)
        n = seen.get(base, 0)
        out.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return out


def links(path: Path) -> list[str]:
    return _LINK.findall(_prose(path.read_text(encoding="utf-8")))


def broken_links(path: Path) -> list[str]:
    """The relative links of ``path`` whose file or heading does not exist."""
    bad = []
    for target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):       # https:, mailto:, ...
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists() or not dest.resolve().is_relative_to(ROOT):
            bad.append(target)
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
            bad.append(target)
    return bad


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_every_relative_link_reaches_a_file_and_heading(path):
    assert broken_links(path) == []


def test_the_link_check_catches_a_broken_file_or_anchor(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    monkeypatch.setattr(sys.modules[__name__], "ROOT", root)
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.md").write_text("# A page\n\n## Run it: `serve` (one process)\n\n"
                                        "## Run it: `serve` (one process)\n")
    (tmp_path / "outside.md").write_text("# Outside\n")
    page = root / "README.md"
    good = ["docs/a.md", "docs/a.md#a-page", "docs/a.md#run-it-serve-one-process",
            "docs/a.md#run-it-serve-one-process-1", "#front", "https://example.org/x#y"]
    bad = ["docs/b.md", "docs/a.md#run-it", "docs/a.md#run-it-serve-one-process-2", "#back",
           "../outside.md"]
    page.write_text("# Front\n\n" + "\n".join(f"[{t}]({t})" for t in good + bad)
                    + "\n\n`[not a link](docs/none.md)`\n")
    assert broken_links(page) == bad


def test_the_readme_is_a_front_door():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    assert re.search(r"^make serve +# ", text, re.M) and re.search(r"^make test +# ", text, re.M)
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in links(README)}
    assert [d.name for d in DOCS if d.resolve() not in linked] == []


def _named_flags(text: str) -> list[tuple[str, str]]:
    """(command, --flag) for every flag written after `attention-scaling serve|export` on one
    line of a command (in code, or a code block's line)."""
    found = []
    text = re.sub(r"\\\n\s*|\n {8,}", " ", text)        # a command's continuation lines
    for command, rest in re.findall(r"(?:attention-scaling |`)(serve|export)\b([^`\n]*)", text):
        found += [(command, flag) for flag in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", rest)]
    return found


def test_every_flag_and_variable_named_exists():
    from attention_scaling import cli

    parser = cli.build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    options = {name: {s for a in sub._actions for s in a.option_strings}
               for name, sub in commands.items()}
    source = "\n".join(p.read_text(encoding="utf-8")
                       for p in (ROOT / "src" / "attention_scaling").glob("*.py"))
    for path in PAGES:
        text = path.read_text(encoding="utf-8")
        assert [(c, f) for c, f in _named_flags(text) if f not in options[c]] == [], path.name
        named = set(re.findall(r"ATTENTION_SCALING_[A-Z_]*[A-Z]", text))
        assert [v for v in sorted(named) if v not in source] == [], path.name


_FIGURE = re.compile(r"\b(?:p50|p95|p99)\b|\d(?:[\d.,]*\d)?\s?(?:ms|µs|KB|MB|GB|KiB|MiB|GiB)\b")


@pytest.mark.parametrize("path", [p for p in PAGES if p.name not in MEASURED],
                         ids=lambda p: p.name)
def test_measured_figures_live_in_benchmarks_and_deploy(path):
    """Times, sizes and percentiles go stale: README and the other docs link to
    docs/benchmarks.md and docs/deploy.md instead of quoting them."""
    assert _FIGURE.findall(path.read_text(encoding="utf-8")) == []
