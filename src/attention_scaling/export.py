"""The offline copy: one self-contained HTML file (``attention-scaling export OUT.html``).

Every setting of the controls (seeds x widths x temperatures x the three rules) is computed by
:mod:`core` and turned into exactly the columns and texts the served page shows (the same
``charts.*_data`` functions, text fields and ``View.draw_tab`` / ``View.show_training``),
packed, and carried by the shared :class:`layout.View`, which one JavaScript program
(assets/js/offline-select.js) points at the chosen setting. No server, no network: every
script and style is inside the file.

Packing, as the payload's ``schema`` (:func:`schema`) names it: ``floats``, one float64 array
of the exact values (per record the 8 weights, the 8 gradients to the query and the
Jacobian's diagonal, whose other entries -p_i p_j the browser rebuilds bit for bit, as it
rebuilds the p(1 - p) sweep from the diagonals of the 25 widths; then the logits per seed,
width and rule; then the argument's data sources, one block per source and setting);
``ints``, per record indices into small tables of the distinct styles, labels and texts (a
text field with one value over the whole grid is stored once, in ``constant_fields``);
everything else as JSON. The three are gzipped (the float64s byte plane
by byte plane) and base64-encoded; the browser inflates them with ``DecompressionStream``.

Speed: core's computations of the records, the training runs and the sweeps run on a pool of
worker processes, one per core, started with "spawn" (a script that calls :func:`export` or
:func:`build_payload` guards its own code with ``if __name__ == "__main__":``), while this
process draws the argument's tabs, a setting at a time for all of them; the progress goes to
a stream (``attention-scaling export``: stderr).
"""

from __future__ import annotations

import base64
import concurrent.futures
import dataclasses
import gzip
import json
import multiprocessing
import re
import threading
import time
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from types import MappingProxyType

import numpy as np
import param
from bokeh.document import Document
from bokeh.embed import file_html
from bokeh.models import CustomJS, Div, Spinner
from bokeh.resources import INLINE

from . import blas, core, work
from .prose import quiz
from .argument import SWEEP_TITLE, TAB_VIEWS, TRAINING_STEPS
from .figures import Charts, bar_data, diagonal_label_data, jacobian_data, max_label, sweep_data
from .components import ask_html
from .layout import TAB, View, ViewOptions
from .style import KEY_LABELS, LABEL_ALPHA, programs, script
from .state import CONTROLS, FIG3_D_K, FIG3_SEED, ONE_DRAW, TABS, ExplorerState, Setting
from .prose.text import TITLE, fields_of, guide_html

#: Largest file the export may write: every state of 4 seeds, every step's question at every
#: setting and present mode fit in it (5.35 MB, docs/benchmarks.md); its formulas are HTML, so
#: it carries no MathJax (BokehJS's bokeh-mathjax bundle, 1.8 MB).
MAX_BYTES = 6_000_000
DEFAULT_SEEDS = 4
#: Each seed adds ~0.5 MB of exact data and texts, gzipped, on top of ~3.3 MB: BokehJS
#: (~1.7 MB), the argument's charts and the training runs (~0.5 MB of them).
MAX_SEEDS = 4
N = core.N_KEYS
#: The axes each flat index of the offline data runs over, slowest first: a record's, a row of
#: logits' and each kind of setting index the argument's tabs are held by.
_AXES = {"record": ("seed", "d_k", "temperature", "rule"), "logits": ("seed", "d_k", "rule"),
         "width": ("d_k",), "temperature": ("temperature",), "grid": ("d_k", "temperature"),
         "setting": ("seed", "d_k", "temperature")}


def _fields(*named: tuple[str, int]) -> dict[str, list[int]]:
    """Fields laid one after another: name -> [offset, length]."""
    out, offset = {}, 0
    for name, length in named:
        out[name], offset = [offset, length], offset + length
    return out


def schema(seeds: int, text_fields: int) -> dict:
    """The offline data's layout, carried in the payload and read by name in the browser
    (assets/js/offline-select.js, ``index`` and ``field``), so that nothing counts positions:
    ``axes`` (:data:`_AXES`) with their ``sizes`` for ``seeds`` seeds; a record's fields in
    ``floats`` (its weights, gradients to the query and Jacobian diagonal) and in ``ints``
    (its style, label and ink, the Jacobian's texts and ``text_fields`` text fields) as
    [offset, length], and each record's ``width`` in both."""
    floats = _fields(("weight", N), ("gq", N), ("pq", N))
    ints = _fields(("style", 1), ("label", 1), ("ink", 1), ("cell_text", N),
                   ("fields", text_fields))
    return dict(axes=_AXES, sizes=dict(seed=seeds, d_k=len(core.D_K_VALUES),
                                       temperature=len(core.TEMPERATURES),
                                       rule=len(core.RULES)),
                floats=floats, ints=ints,
                width={name: sum(length for _o, length in table.values())
                       for name, table in (("floats", floats), ("ints", ints))})


def flat(layout: dict, kind: str, **at: int) -> int:
    """The flat index of ``at`` (an index per axis) along the axes of ``kind`` in
    ``layout`` (:func:`schema`)."""
    index = 0
    for axis in layout["axes"][kind]:
        index = index * layout["sizes"][axis] + at[axis]
    return index

#: The controls the offline copy holds every setting of (eight keys, as in Fig. 3).
OFFLINE_CONTROLS = ("d_k", "rule", "temperature", "seed")
#: The argument's settings the offline copy has no control for: eight keys, no alignment.
OFFLINE_ALIGN = 0.0
#: The training runs it holds: every width at this temperature, from the first seed.
TRAINING_TEMPERATURE = 1.0
#: The widths it holds the learning-rate sweep at (core.LearningRateSweep, with the runs).
SWEEP_WIDTHS = (16, 64, 256, 1024)
#: The learning-rate chart's title offline at a width it holds no sweep at, and the status
#: line's last sentence there.
OFFLINE_NO_SWEEP_TITLE = f"No sweep at this {core.DK} offline"
OFFLINE_NO_SWEEP = (" This offline copy holds the learning-rate sweep at d<sub>k</sub> = "
                    + ", ".join(str(d) for d in SWEEP_WIDTHS[:-1])
                    + f" and {SWEEP_WIDTHS[-1]} only; the served explorer sweeps at any "
                    "setting.")

#: The offline copy's last sentences of the caption.
OFFLINE_NOTE = ("This offline copy holds every setting of its controls, precomputed, with "
                "eight keys and, in every tab, keys independent of the query (alignment ρ = 0). "
                f"Its training runs are precomputed for every {core.DK} at T = 1 with the first "
                "seed. "
                "The number of keys, the alignment and training at other settings are in the "
                "served explorer: this file stores every setting it shows, and each of those "
                "controls would multiply its size.")

#: The line beside the Train button offline: before a run, and at a setting it has none of.
OFFLINE_TRAINING = ("<span class='status' role='status'>Offline, Train shows a run "
                    "precomputed by the same code: one for every d<sub>k</sub> at T = 1 from "
                    f"{core.TRAIN_SEEDS} seeds, the first {{seed}}.</span>")
#: The training step's answer offline where it holds no run.
OFFLINE_NO_ANSWER = ("This offline copy holds training runs at T = 1 with seed {seed} only; "
                     "the served explorer trains at any setting.")
OFFLINE_NO_RUN = ("<span class='status' role='status'>No run at this setting: this offline "
                  "copy holds training runs at T = 1 with seed {seed} only (every "
                  "d<sub>k</sub>). The served explorer trains at any setting.</span>")


def seed_list(n: int) -> list[int]:
    """The seeds exported: the reference figure's seed first, then 1, 2, 3, ..."""
    if not 1 <= n <= MAX_SEEDS:
        raise ValueError(f"--seeds must be between 1 and {MAX_SEEDS} (the file must stay "
                         f"under {MAX_BYTES / 1e6:g} MB), got {n}")
    return [FIG3_SEED] + list(range(1, n))


class _Table:
    """Distinct values (compared by their JSON), each stored once; ``add`` gives the index."""

    def __init__(self) -> None:
        self.items: list = []
        self._index: dict[str, int] = {}

    def add(self, item) -> int:
        key = json.dumps(item)
        if key not in self._index:
            self._index[key] = len(self.items)
            self.items.append(item)
            if len(self.items) > 65535:
                raise OverflowError("too many distinct values for uint16 indices")
        return self._index[key]


def _packed(data: bytes) -> str:
    """``data`` gzipped (no timestamp: the same file every run) and base64-encoded."""
    return base64.b64encode(gzip.compress(data, 9, mtime=0)).decode("ascii")


def _planes(array: np.ndarray) -> bytes:
    """Little-endian float64s as 8 byte planes (every value's first byte, then every second
    byte, ...): the signs and exponents side by side, which gzip packs far better."""
    raw = np.ascontiguousarray(array, dtype="<f8").view(np.uint8).reshape(-1, 8)
    return np.ascontiguousarray(raw.T).tobytes()


class _Blocks:
    """The numeric columns of data sources, one block per source: for each setting, in order,
    the columns set by the served page's own drawing code."""

    def __init__(self) -> None:
        self.rows: dict[str, list[np.ndarray]] = {}
        self.shape: dict[str, tuple[list[str], list[int]]] = {}

    def add(self, source) -> None:
        columns = {k: v for k, v in source.data.items()
                   if len(v) and not isinstance(v[0], str)}
        shape = (list(columns), [len(v) for v in columns.values()])
        if self.shape.setdefault(source.name, shape) != shape:
            raise AssertionError(f"{source.name}: columns changed between settings")
        self.rows.setdefault(source.name, []).append(
            np.concatenate([np.asarray(v, dtype=float) for v in columns.values()]))

    def add_range(self, name: str, rng) -> None:
        """A figure's axis range (``<figure>:<x_range|y_range>``), as a block of its own."""
        self.rows.setdefault(name, []).append(np.array([rng.start, rng.end], dtype=float))
        self.shape[name] = (["start", "end"], [1, 1])

    def pack(self, start: int) -> tuple[np.ndarray, dict]:
        """The blocks as one array, and where each one starts (counted from ``start``)."""
        arrays, meta = [], {}
        for name, rows in self.rows.items():
            columns, lengths = self.shape[name]
            meta[name] = dict(columns=columns, lengths=lengths, width=sum(lengths),
                              offset=start + sum(a.size for a in arrays))
            arrays.append(np.concatenate(rows))
        return np.concatenate(arrays), meta


#: A training run and a sweep (each rule's rates, three seeds each) in the export's progress:
#: as many steps as settings drawn or computed in about the same time.
RUN_STEPS, SWEEP_STEPS = 90, 1000


class _Progress:
    """The export's progress on ``stream``, counted in steps (a state's records, a tab, the
    spread or a question drawn at a setting; a training run :data:`RUN_STEPS`, a sweep
    :data:`SWEEP_STEPS`) from any thread: on a terminal a bar redrawn in place, otherwise a plain line ("export: 40% (120
    of 300 steps)") when the percentage moves, at most every ``interval`` seconds, and
    always at 100%. Nothing without a stream."""

    def __init__(self, stream, total: int, interval: float | None = None) -> None:
        self.stream, self.total, self.done = stream, total, 0
        self.tty = stream is not None and stream.isatty()
        self.interval = (0.1 if self.tty else 0.5) if interval is None else interval
        self._lock = threading.Lock()
        self._percent, self._at = -1, float("-inf")

    def advance(self, steps: int = 1) -> None:
        with self._lock:
            self.done = min(self.total, self.done + steps)
            percent, now = 100 * self.done // self.total, time.monotonic()
            if (self.stream is None or percent == self._percent
                    or (self.done < self.total and now - self._at < self.interval)):
                return
            self._percent, self._at = percent, now
            counted = f"{percent}% ({self.done} of {self.total} steps)"
            if self.tty:
                bar = "#" * (30 * self.done // self.total)
                self.stream.write(f"\rexport [{bar:.<30}] {counted}"
                                  + ("\n" if self.done == self.total else ""))
            else:
                self.stream.write(f"export: {counted}\n")
            self.stream.flush()


def _questions_index() -> dict[str, str]:
    """Each step's question's index (argument.TabView.asked), for the steps with one."""
    index = {key: cls.asked for key, cls in TAB_VIEWS.items()}
    return {key: index[key] for key in index if TAB[key].ask}


def _steps(seeds: list[int], runs: bool) -> int:
    """The steps :func:`build_payload` counts for ``seeds`` (see :class:`_Progress`); the
    training runs among them if ``runs``."""
    count = lambda kind: sum(1 for _ in _settings(kind, seeds))  # noqa: E731
    d_ks = core.D_K_VALUES
    return (2 * count("setting")                               # records, the spread
            + sum(count(cls.offline) for cls in TAB_VIEWS.values() if cls.offline)
            + len(d_ks)                                        # the training tab
            + sum(count(kind) for kind in _questions_index().values())
            + (len(d_ks) * len(core.RULES) * RUN_STEPS if runs else 0)
            + len(SWEEP_WIDTHS) * SWEEP_STEPS)


def _paragraphs(markup: str, table: _Table) -> list[int]:
    """A text as indices of its paragraphs (many settings share some) into ``table``."""
    return [table.add(p) for p in re.split(r"(?<=</p>)", markup) if p]


def _width_runs(d_k: int, seed: int, batches=None) -> dict[str, core.SeededTraining]:
    """The runs :func:`training_runs` holds at ``d_k``, rule -> core.SeededTraining (a job of
    the export's pool), the three rules' on the same batches, each drawn once
    (core.shared_batches, or ``batches``)."""
    batches = core.shared_batches(d_k, seed, N) if batches is None else batches
    return {rule: core.train_seeds(d_k, rule, seed, temperature=TRAINING_TEMPERATURE,
                                   steps=TRAINING_STEPS, batches=batches)
            for rule in core.RULES}


def _sweep(d_k: int, seed: int, runs: dict | None = None,
           batches=None) -> core.LearningRateSweep:
    """One sweep :func:`sweeps` holds, taken to its end, its equal-step points ``runs`` (the
    Train runs at ``d_k``, rule -> core.SeededTraining) where given, every point on the same
    batches (core.shared_batches, or ``batches``)."""
    sweep = core.start_sweep(d_k, TRAINING_TEMPERATURE, seed, N, steps=TRAINING_STEPS,
                             runs=runs, batches=(core.shared_batches(d_k, seed, N)
                                                 if batches is None else batches))
    sweep.run()
    return sweep


def _swept_runs(d_k: int, seed: int) -> tuple[dict, core.LearningRateSweep]:
    """The training runs at ``d_k`` (rule -> core.SeededTraining) and the sweep there, which
    takes them as its equal-step points, all on the same batches (a job of the export's
    pool)."""
    batches = core.shared_batches(d_k, seed, N)
    runs = _width_runs(d_k, seed, batches)
    return runs, _sweep(d_k, seed, runs, batches)


#: :func:`training_runs`' runs by seed, computed once per process (:func:`build_payload`
#: computes them on its pool of workers and keeps them here for :func:`build_view`).
_RUNS: dict[int, dict[int, dict]] = {}


def training_runs(seed: int) -> dict[int, dict]:
    """The runs the offline copy holds, as the served page's Train button runs them:
    d_k -> rule -> core.SeededTraining taken to its end (core.TRAIN_SEEDS seeds from
    ``seed``, each rule at its own learning rate), at TRAINING_TEMPERATURE."""
    if seed not in _RUNS:
        _RUNS[seed] = {d_k: _width_runs(d_k, seed) for d_k in core.D_K_VALUES}
    return _RUNS[seed]


def sweeps(seed: int) -> dict[int, core.LearningRateSweep]:
    """The learning-rate sweeps the offline copy holds, as the served page runs them after
    Train: d_k -> core.LearningRateSweep taken to its end, at SWEEP_WIDTHS, from ``seed``,
    at TRAINING_TEMPERATURE."""
    return {d_k: _sweep(d_k, seed, training_runs(seed)[d_k]) for d_k in SWEEP_WIDTHS}


def _settings(kind: str, seeds: list[int]):
    """The settings the offline copy holds a tab at, in the order of their index of ``kind``:
    ``width`` (T = 1), ``temperature`` (the first width), ``grid`` (every width and
    temperature, the first seed) or ``setting`` (every seed, width and temperature), each at
    the offline alignment and keys, the rule ÷√d_k."""
    d_ks, temps = core.D_K_VALUES, core.TEMPERATURES
    grid = {"width": [(seeds[0], d, 1.0) for d in d_ks],
            "temperature": [(seeds[0], d_ks[0], t) for t in temps],
            "grid": [(seeds[0], d, t) for d in d_ks for t in temps],
            "setting": [(s, d, t) for s in seeds for d in d_ks for t in temps]}[kind]
    for seed, d_k, t in grid:
        yield Setting(d_k=d_k, rule="sqrt", temperature=t, seed=seed, keys=N, align=OFFLINE_ALIGN)


def _index(kind: str, s: Setting, seeds: list[int]) -> int:
    """A setting's index of ``kind``: ``width``, ``temperature``, ``grid`` (width and
    temperature) or ``setting`` (seed, width and temperature), by the payload's
    :func:`schema` (the browser reads it by the same)."""
    return flat(schema(len(seeds), 0), kind, seed=seeds.index(s.seed),
                d_k=core.D_K_VALUES.index(s.d_k),
                temperature=core.TEMPERATURES.index(s.temperature))


def _argument(seeds: list[int], table: _Table, progress: _Progress,
              computed, before) -> tuple[_Blocks, dict]:
    """The argument's tabs at every setting, as the served page draws them
    (View.draw_tab, View.show_training on a View of its own): their sources' blocks and,
    as JSON, their texts, which source each tab sets at which index, the highlighted lines'
    widths per rule and the training runs' index, ranges and status lines. Each tab is held
    as its class in argument.TAB_VIEWS says (``offline``, ``stores``). ``computed()`` gives
    the training runs and sweeps (:func:`training_runs`, :func:`sweeps`), called once the
    tabs drawn from the controls are; ``before(setting)`` is called before each setting is
    drawn."""
    view = View(ViewOptions(values={c.name: c.default for c in CONTROLS}))
    view.build_argument()
    a = view.argument
    blocks = _Blocks()
    text: dict[str, list] = {tab.key: [] for tab in TABS[1:]}
    leads: dict[str, list] = {tab.key: [] for tab in TABS[1:]}
    drawn = {key: tab for key, tab in a.tabs.items() if tab.offline}
    draw_questions: list[quiz.Question] = []
    # beside the tabs at each setting (its state in core's cache for all of them): the one
    # draw's spread chart and question
    beside = {"setting": [
        lambda s: _spread_block(view.charts.spread, s, seeds, blocks, progress),
        lambda s: draw_questions.append(
            quiz.draw_question(s.d_k, s.temperature, s.seed, N, OFFLINE_ALIGN))]}
    _drawn_tabs(view, drawn, seeds, blocks, table, text, leads, progress, beside, before)
    runs, swept = computed()
    lines = [line for r in core.RULES for line in a.rule_lines[r]]
    widths = {}
    for rule in core.RULES:
        a.shared.highlight(rule)
        widths[rule] = [line.glyph.line_width for line in lines]
    return blocks, dict(
        texts=text, leads=leads, widths=widths,
        sources={ONE_DRAW: [list(store) for store in SPREAD_STORES],
                 **{key: [list(store) for store in tab.stores] for key, tab in drawn.items()}},
        text_index={key: tab.offline for key, tab in drawn.items()},
        **_training(view, seeds[0], runs, swept, blocks, table, text, leads, progress),
        **_questions(view, seeds, runs, draw_questions, table, progress),
        tabs=[tab.key for tab in TABS])


def _questions(view: View, seeds: list[int], runs: dict, draw_questions: list,
               table: _Table, progress: _Progress) -> dict:
    """Every step's question (quiz) at every setting the offline copy holds it at, by the
    index its tab's ``asked`` names (the one draw's: ``setting``), as indices into ``table``
    of its text as the step shows it (components.ask_html), its choices (one line each) and its
    answer's sentences (many settings share some); the training's answered by the run where
    the copy holds one (T = 1, ``runs``)."""
    def stored(q: quiz.Question) -> list[int]:
        progress.advance()
        return [table.add(ask_html(q)), table.add("\n".join(q.choices)),
                *(table.add(part) for part in re.split(r"(?<=\.) (?=[A-Z<])", q.answer))]

    tabs = view.argument.tabs
    asked_draws = iter(draw_questions)
    training = view.training_tab()
    ask = {ONE_DRAW: lambda s: next(asked_draws),
           training.key: lambda s: (
               quiz.training_question(s.d_k, s.temperature, runs[s.d_k])
               if (s.temperature, s.seed) == (TRAINING_TEMPERATURE, seeds[0])
               else dataclasses.replace(quiz.training_question(s.d_k, s.temperature),
                                        answer=OFFLINE_NO_ANSWER.format(seed=seeds[0]))),
           **{key: tab.question for key, tab in tabs.items() if tab.offline}}
    index = _questions_index()
    return {"questions": {key: [stored(ask[key](s)) for s in _settings(kind, seeds)]
                          for key, kind in index.items()},
            "question_index": index}


#: The one draw's models that come from many draws, as an argument tab's stores: the spread
#: of the gradient (per width and temperature), this draw in it and its axis (per setting).
SPREAD_STORES = (("gradient-spread-source", "grid"), ("gradient-this-draw-source", "setting"),
                 ("gradient-spread:x_range", "setting"))


def _spread_block(spread, setting: Setting, seeds: list[int], blocks: _Blocks,
                  progress: _Progress) -> None:
    """The one draw's spread chart (figures.SpreadChart) at ``setting``, as the served page
    draws it: its blocks of :data:`SPREAD_STORES` (called at every setting in order, each at
    its index)."""
    state = core.compute_state(setting.d_k, setting.temperature, setting.seed, N,
                               OFFLINE_ALIGN)
    spread.update(core.gradient_spread(setting.d_k, setting.temperature, N, OFFLINE_ALIGN),
                  {r: v.log10_query_gradient for r, v in state.variants.items()})
    if setting.seed == seeds[0]:
        blocks.add(spread.source)
    blocks.add(spread.this_draw_source)
    blocks.add_range("gradient-spread:x_range", spread.fig.x_range)
    progress.advance()


def _drawn_tabs(view: View, drawn: dict, seeds: list[int], blocks: _Blocks, table: _Table,
                text: dict, leads: dict, progress: _Progress, beside: dict, before) -> None:
    """Each tab drawn from the controls at every setting of its ``offline`` index: its text
    and lead (into ``text`` and ``leads``) and, the first time each index of theirs comes
    up, its stores' blocks. The tabs of one index are drawn side by side, a setting at a
    time (each tab's settings in order), after ``before(setting)`` and ``beside[index]``'s
    calls at that setting."""
    stored: dict[str, int] = {}              # models' blocks so far, by name
    models = {name: view.argument.model(name)        # looked up once: a search of the figures
              for tab in drawn.values() for name, _kind in tab.stores}
    for kind in dict.fromkeys([*(tab.offline for tab in drawn.values()), *beside]):
        tabs = {key: tab for key, tab in drawn.items() if tab.offline == kind}
        for setting in _settings(kind, seeds):
            before(setting)
            for call in beside.get(kind, ()):
                call(setting)
            for key, tab in tabs.items():
                view.draw_tab(key, setting)
                text[key].append(_paragraphs(view.section_texts[key].text, table))
                leads[key].append(table.add(view.leads[key].text))
                for name, by in tab.stores:
                    if _index(by, setting, seeds) == stored.get(name, 0):
                        model = models[name]
                        (blocks.add_range(name, model) if ":" in name else blocks.add(model))
                        stored[name] = stored.get(name, 0) + 1
                progress.advance()


def _training(view: View, seed: int, runs: dict, swept: dict, blocks: _Blocks,
              table: _Table, text: dict, leads: dict, progress: _Progress) -> dict:
    """The training runs the offline copy holds (one per width, ``runs`` of
    :func:`training_runs`, with ``swept`` of :func:`sweeps`, from ``seed``): their source's
    blocks, texts (into ``text``), and as JSON their index, ranges and status."""
    d_ks, temps = core.D_K_VALUES, core.TEMPERATURES
    ranges, status, tags, ti = [], [], [], temps.index(TRAINING_TEMPERATURE)
    training = view.training_tab()
    key = training.key
    # what the tab shows before a run (View.build_argument): shown again where Train finds
    # no run, so that the charts, texts and question all describe the setting
    idle = dict(idle_text=_paragraphs(view.section_texts[key].text, table),
                idle_lead=table.add(view.leads[key].text),
                training_columns=list(training.source.data))
    training.sweep_rows = max(len(s.result()[r].rates) for s in swept.values()
                              for r in core.RULES)     # one block shape at every width
    sweep_index = {}
    for di, d_k in enumerate(d_ks):
        view.show_training(runs[d_k], d_k, TRAINING_TEMPERATURE, N, swept.get(d_k))
        blocks.add(training.source)
        if d_k in swept:
            sweep_index[di] = len(sweep_index)
            blocks.add(training.sweep_source)
        text[key].append(_paragraphs(view.section_texts[key].text, table))
        leads[key].append(table.add(view.leads[key].text))
        status.append(training.status.text if d_k in swept else
                      training.status.text.replace("</span>", OFFLINE_NO_SWEEP + "</span>"))
        tags.append(list(training.source.tags))      # what the downloads are named after
        ranges.append({name: {r: [getattr(fig, r).start, getattr(fig, r).end]
                              for r in ("x_range", "y_range")}
                       for name, fig in training.figures.items()})
        progress.advance()
    training.sweep_rows = None
    return dict(training={f"0,{di},{ti}": di for di in range(len(d_ks))},
                training_ranges=ranges, training_status=status, training_tags=tags,
                no_run=OFFLINE_NO_RUN.format(seed=seed), training_sweep=sweep_index,
                sweep_columns=list(training.sweep_source.data), sweep_title=SWEEP_TITLE,
                no_sweep=OFFLINE_NO_SWEEP_TITLE, **idle)


def _jacobian(weights: list[float], diagonal: list[float]) -> np.ndarray:
    """The Jacobian from its diagonal and the weights: off the diagonal -(p_i p_j), the
    product the browser forms too."""
    n = len(weights)
    return np.array([[diagonal[i] if i == j else -(weights[i] * weights[j]) for j in range(n)]
                     for i in range(n)])


def _styling() -> dict:
    """Titles, outlines and the bar charts' fills and second lines for each rule, as
    Charts.update sets them."""
    charts = Charts()
    out = {}
    state = core.compute_state(FIG3_D_K, 1.0, FIG3_SEED)
    for rule in core.RULES:
        charts.update(state, rule)
        out[rule] = {
            name: dict(title=fig.title.text, outline_line_color=fig.outline_line_color,
                       outline_line_width=fig.outline_line_width,
                       **_bar_styling(fig, name))
            for name, fig in charts.figures.items()
        }
    return out


def _bar_styling(fig, name: str) -> dict:
    """A bar chart's fill and second line (``<name>-bars``, ``<name>-subtitle``), where it
    has them: the left one's follow the rule."""
    bars, line = fig.select_one({"name": f"{name}-bars"}), fig.select_one(
        {"name": f"{name}-subtitle"})
    return ({} if bars is None else {"fill": bars.glyph.fill_color}) | (
        {} if line is None else {"subtitle": line.text})


def _record(v: core.Variant, state: core.State, rule: str, di: int) -> tuple[dict, dict]:
    """One record's columns (the one draw's bars, the Jacobian's cells) under ``rule``,
    checked against what the browser rebuilds from them: the Jacobian from its diagonal and
    the weights, the sweep from every width's diagonal."""
    bars = bar_data(v)
    cells = diagonal_label_data(v)
    jac = np.asarray(jacobian_data(v)["value"]).reshape(N, N)
    if (not np.array_equal(jac, _jacobian(bars["weight"], bars["pq"]))
            or bars["pq"] != np.diag(jac).tolist()):
        raise AssertionError("Jacobian is not diag(p(1-p)) - p_i p_j exactly")
    sweep = np.asarray(sweep_data(state, rule)["value"]).reshape(N, len(core.D_K_VALUES))
    if not np.array_equal(sweep[:, di], bars["pq"]):
        raise AssertionError("the sweep is not the diagonals of its widths")
    return bars, cells


def _state_records(seeds: list[int], d_k: int) -> tuple[list[list[tuple]], list]:
    """The records of each of ``seeds`` at width ``d_k`` (a job of the export's pool: the
    seeds of one width together, so that what the texts take from many draws, the same for
    every seed, is computed once in one process), per seed every temperature and rule in
    order: per record its floats (by name, :func:`schema`), logits, and the values
    :func:`build_payload` stores in its tables (style, label, ink, the Jacobian's texts, the
    text fields); and core's cached results computed for them (the states among them), for
    :class:`_Primer`."""
    with core.recording() as recorded:
        records = [_seed_records(seed, d_k) for seed in seeds]
    return records, recorded


def _seed_records(seed: int, d_k: int) -> list[tuple]:
    """:func:`_state_records` of one seed."""
    explorer, di, out = ExplorerState(), core.D_K_VALUES.index(d_k), []
    for temp in core.TEMPERATURES:
        state = core.compute_state(d_k, temp, seed)
        with param.edit_constant(explorer):
            explorer.result = state
        for rule in core.RULES:
            v = state.active(rule)
            bars, cells = _record(v, state, rule, di)
            text, align = max_label(v)
            explorer.rule = rule
            out.append(({name: bars[name] for name in ("weight", "gq", "pq")}, bars["logit"],
                        [bars["alpha"], bars["line"]], [int(v.argmax), align, text],
                        cells["ink"], cells["text"], fields_of(explorer)))
    return out


class _Primer:
    """This process's caches filled, just before a setting is drawn, with what the pool's
    records jobs computed for it (:func:`_state_records`): the states of the setting's seed
    and temperature at its width and at the one draw's question's other width
    (quiz.width_move), and once per width the rest (what the texts take from many draws).
    Core's cache holds the last few hundred states and a pass over the settings asks for
    thousands, so each is put in as it is needed; nothing is computed twice."""

    def __init__(self, jobs: list) -> None:
        self.jobs = dict(zip(core.D_K_VALUES, jobs))
        self.states: dict[tuple, tuple] = {}     # (d_k, T, seed) -> a state's record

    def _width(self, d_k: int) -> None:
        if d_k in self.jobs:
            _by_seed, recorded = self.jobs.pop(d_k).result()
            rest = []
            for record in recorded:
                _name, args, value = record
                if isinstance(value, core.State):
                    self.states[(value.d_k, value.temperature, value.seed)] = record
                else:
                    rest.append(record)
            core.prime(rest)

    def __call__(self, setting: Setting) -> None:
        for d_k in (setting.d_k, quiz.width_move(setting.d_k)):
            self._width(d_k)
            record = self.states.get((d_k, setting.temperature, setting.seed))
            if record is not None:
                core.prime([record])


def _mapping_proxy(items: dict) -> MappingProxyType:
    return MappingProxyType(items)


# core's read-only mappings (a sweep's result) as the pool's workers send them back
ForkingPickler.register(MappingProxyType, lambda proxy: (_mapping_proxy, (dict(proxy),)))


def _pool() -> concurrent.futures.ProcessPoolExecutor:
    """Worker processes for core's computations, one per core, each a fresh interpreter
    ("spawn": nothing of this process's threads or state is copied into it) running BLAS on
    one thread (:func:`blas.one_thread`)."""
    blas.one_thread()
    return concurrent.futures.ProcessPoolExecutor(
        max_workers=work.workers(), mp_context=multiprocessing.get_context("spawn"))


def _submit(pool, progress: _Progress, steps: int, fn, *args) -> concurrent.futures.Future:
    """``fn(*args)`` on ``pool``, counted as ``steps`` of ``progress`` when it is done."""
    job = pool.submit(fn, *args)
    job.add_done_callback(lambda _job: progress.advance(steps))
    return job


def _start(pool, progress: _Progress, seeds: list[int]):
    """The pool's jobs in the order this process needs their results: the records of each
    width in order, every seed's (:func:`_state_records`), which the drawing of the
    argument's tabs starts from (:class:`_Primer`); then the sweeps with the training
    runs at their widths, and the other training runs from the first seed (none if
    this process holds them). Returns ``computed()``, which waits for the runs and sweeps
    (:func:`_argument`'s), and the records' jobs."""
    seed, d_ks = seeds[0], core.D_K_VALUES
    jobs = [_submit(pool, progress, len(seeds) * len(core.TEMPERATURES), _state_records,
                    seeds, d_k) for d_k in d_ks]
    held = seed in _RUNS
    swept = {d_k: (_submit(pool, progress, SWEEP_STEPS, _sweep, d_k, seed, _RUNS[seed][d_k])
                   if held else _submit(pool, progress, SWEEP_STEPS + len(core.RULES)
                                        * RUN_STEPS, _swept_runs, d_k, seed))
             for d_k in SWEEP_WIDTHS}
    runs = {} if held else {
        d_k: _submit(pool, progress, len(core.RULES) * RUN_STEPS, _width_runs, d_k, seed)
        for d_k in d_ks if d_k not in swept}

    def computed() -> tuple[dict, dict]:
        if held:
            return _RUNS[seed], {d_k: job.result() for d_k, job in swept.items()}
        both = {d_k: job.result() for d_k, job in swept.items()}
        _RUNS[seed] = {d_k: both[d_k][0] if d_k in both else runs[d_k].result()
                       for d_k in d_ks}
        return _RUNS[seed], {d_k: sweep for d_k, (_runs, sweep) in both.items()}

    return computed, jobs


def _put(fields: dict, row: np.ndarray, values: dict) -> None:
    """Write ``values`` (by field name) into a record's ``row`` where ``fields`` (a table of
    :func:`schema`) places them."""
    for name, (offset, length) in fields.items():
        row[offset:offset + length] = values[name]


def _constant_fields(ints: np.ndarray, full: dict, names: list[str],
                     strings: _Table) -> tuple[np.ndarray, dict]:
    """The records' ints without the text fields that have one value over the whole grid
    (``full``: their :func:`schema` with every field of ``names``), and those fields'
    values by name: each is stored once, not per record."""
    first = full["ints"]["fields"][0]
    same = [k for k in range(len(names)) if (ints[:, first + k] == ints[0, first + k]).all()]
    constants = {names[k]: strings.items[ints[0, first + k]] for k in same}
    return np.delete(ints, [first + k for k in same], axis=1), constants


def build_payload(seeds: list[int], progress=None) -> dict:
    """Every state of the controls for ``seeds``, packed (see the module docstring). Core's
    computations run on a pool of worker processes (the records, then the training runs and
    sweeps: :func:`_start`) while this process draws the argument's tabs from the states the
    records' jobs computed; the progress goes to the stream ``progress`` (see
    :class:`_Progress`)."""
    d_ks, temps = core.D_K_VALUES, core.TEMPERATURES
    nd, nr = len(d_ks), len(core.RULES)
    fields_order = list(fields_of(ExplorerState()))
    full = schema(len(seeds), len(fields_order))
    n_rec = int(np.prod([full["sizes"][axis] for axis in _AXES["record"]]))
    rec_floats = np.empty((n_rec, full["width"]["floats"]))
    logits = np.empty((*(full["sizes"][axis] for axis in _AXES["logits"]), N))
    ints = np.empty((n_rec, full["width"]["ints"]), dtype=np.uint16)
    styles, labels, inks, strings = _Table(), _Table(), _Table(), _Table()
    progress = _Progress(progress, _steps(seeds, seeds[0] not in _RUNS))
    with _pool() as pool:
        computed, jobs = _start(pool, progress, seeds)
        paragraphs = _Table()
        blocks, argument = _argument(seeds, paragraphs, progress, computed, _Primer(jobs))
        by_width = [job.result()[0] for job in jobs]     # per width, per seed
        for si, di in ((si, di) for si in range(len(seeds)) for di in range(nd)):
            for k, (floats, logit, style, label, ink, cell_texts, fields) in enumerate(
                    by_width[di][si]):
                ti, var = divmod(k, nr)
                rec = flat(full, "record", seed=si, d_k=di, temperature=ti, rule=var)
                logits[si, di, var] = logit
                _put(full["floats"], rec_floats[rec], floats)
                _put(full["ints"], ints[rec], dict(
                    style=[styles.add(style)], label=[labels.add(label)], ink=[inks.add(ink)],
                    cell_text=[strings.add(t) for t in cell_texts],
                    fields=[strings.add(fields[f]) for f in fields_order]))
    ints, constants = _constant_fields(ints, full, fields_order, strings)
    layout = schema(len(seeds), len(fields_order) - len(constants))
    start = rec_floats.size + logits.size
    argument_floats, argument["blocks"] = blocks.pack(start)
    floats = np.concatenate([rec_floats.ravel(), logits.ravel(), argument_floats])
    return dict(
        seeds=seeds, d_k=list(d_ks), temperatures=list(temps), keys=list(KEY_LABELS),
        fields=[f for f in fields_order if f not in constants], constant_fields=constants,
        field_order=fields_order, styles=styles.items, labels=labels.items, inks=inks.items,
        strings=strings.items, styling=_styling(),
        paired={r: core.paired_rule(r) for r in core.RULES},
        schema=layout, logit_offset=rec_floats.size,
        rules=list(core.RULES), states=n_rec // nr, records=n_rec, label_alpha=LABEL_ALPHA,
        argument=argument, paragraphs=paragraphs.items, align=OFFLINE_ALIGN,
        training_temperature=TRAINING_TEMPERATURE,
        floats=floats, ints=ints.ravel(),
    )


def build_layout(payload: dict, seeds: list[int]):
    """The offline page's layout: :func:`build_view`'s root."""
    return build_view(payload, seeds).root


def build_view(payload: dict, seeds: list[int]) -> View:
    """The shared :class:`layout.View`, wired to ``payload`` by one JavaScript program."""
    d_ks, temps = core.D_K_VALUES, core.TEMPERATURES
    explorer = ExplorerState(d_k=FIG3_D_K, temperature=1.0, seed=seeds[0], rule="sqrt")
    view = View(ViewOptions(
        values={c.name: getattr(explorer, c.name) for c in CONTROLS},
        subtitle="offline copy", caption_extra=OFFLINE_NOTE, buttons=("resample", "fig3"),
        tex=False, controls=OFFLINE_CONTROLS,
        guide=guide_html(f"<b>Resample</b> cycles through {len(seeds)} precomputed draws.")))
    view.root.tags = [programs(offline=True)]     # the library with the offline programs
    charts = view.charts
    charts.update(explorer.result, "sqrt", fields_of(explorer))
    view.show_seed(seeds[0])
    # the argument's panels join the tabs when a reader first opens one of them (as on the
    # served page): until then the page draws only the one draw
    waiting = list(view.tabs.tabs)
    view.build_argument()
    panels, view.tabs.tabs = list(view.tabs.tabs), waiting
    first = Setting(d_k=FIG3_D_K, rule="sqrt", temperature=1.0, seed=seeds[0], keys=N,
                    align=OFFLINE_ALIGN)
    _first_view(view, first)
    dk, temp, rule = (view.widgets[name] for name in ("d_k", "temperature", "rule"))
    # The seed position lives in a hidden spinner so the one callback can watch it.
    seed = Spinner(low=0, high=len(seeds) - 1, step=1, value=0, visible=False, name="seed-index")
    view.sidebar.children.append(seed)
    view.buttons["resample"].js_on_event("button_click", CustomJS(
        args=dict(seed=seed, n=len(seeds)), code=script("offline-resample")))
    view.buttons["fig3"].js_on_event("button_click", CustomJS(
        args=dict(seed=seed, dk=dk, temp=temp, rule=rule, tabs=view.tabs,
                  positions=[d_ks.index(FIG3_D_K), temps.index(1.0), core.RULES.index("sqrt")]),
        code=script("offline-fig3")))
    a = view.argument
    args = dict(
        holder=_PayloadHolder(payload), seed=seed, dk=dk, temp=temp, rule=rule,
        src=dict(scaled_bars=charts.scaled_source, unscaled_bars=charts.unscaled_source,
                 jacobian=charts.jacobian_source, labels=charts.jacobian_labels_source,
                 sweep=charts.diagonal_source, marker=charts.marker_source),
        figs=dict(charts.figures), text_source=charts.text_source, seed_div=view.seed_div,
        tabs=view.tabs, panels=panels, train=view.train_button, asks=view.asks,
        training_status=view.training_status,
        **_stored_models(view),
        texts=view.section_texts, leads=view.leads, training_figs=dict(view.training_tab().figures),
        lines=[line for r in core.RULES for line in a.rule_lines[r]],
        shown=[d_ks.index(FIG3_D_K), temps.index(1.0), 0, core.RULES.index("sqrt")])
    select = CustomJS(args=dict(args, action="change"), code=script("offline-select"))
    for widget, prop in ((dk, "value"), (temp, "value"), (seed, "value"), (rule, "active"),
                         (view.tabs, "active")):
        widget.js_on_change(prop, select)
    view.train_button.js_on_event("button_click", select)
    # inflate the payload as soon as the page is shown, before the first change
    view.ready.append(CustomJS(args=dict(args, action="ready"), code=script("offline-select")))
    # the address: read once the page is shown, written with every change
    rows = view.address(seed, seeds)
    write = CustomJS(args=dict(rows=rows, action="change"), code=script("offline-address"))
    for row in rows:
        row["widget"].js_on_change(row["prop"], write)
    view.ready.append(CustomJS(args=dict(rows=rows, action="ready"), code=script("offline-address")))
    return view


def _first_view(view: View, first: Setting) -> None:
    """The argument's tabs as the page opens at ``first`` (the reference draw's setting):
    their charts and texts, the training's status line, and every step's question (for
    training, the run the copy holds at that width), as :func:`_questions` stores them."""
    for key, tab in view.argument.tabs.items():
        if tab.offline:
            view.draw_tab(key, first)
            view.show_question(key, tab.question(first))
    view.training_status.text = OFFLINE_TRAINING.format(seed=first.seed)
    view.show_question(ONE_DRAW, quiz.draw_question(first.d_k, first.temperature, first.seed,
                                                  first.keys, first.align))
    view.show_question(view.training_tab().key, quiz.training_question(
        first.d_k, TRAINING_TEMPERATURE, training_runs(first.seed)[first.d_k]))


def _stored_models(view: View) -> dict:
    """The models the offline program assigns blocks to: ``sources`` by name (the argument's
    stores, the training run's and sweep's sources, the one draw's spread) and
    ``argument_figs``, the figures whose axis ranges are stored."""
    a, spread = view.argument, view.charts.spread
    stores = [name for tab in a.tabs.values() for name, _by in tab.stores]
    training = view.training_tab()
    return dict(
        sources={name: a.model(name) for name in stores if ":" not in name} | {
            "training-source": training.source, "training-lr-sweep-source": training.sweep_source,
            "gradient-spread-source": spread.source,
            "gradient-this-draw-source": spread.this_draw_source},
        argument_figs={name.split(":")[0]: a.figures[name.split(":")[0]] for name in stores
                       if ":" in name} | {"gradient-spread": spread.fig})


def _PayloadHolder(payload: dict) -> Div:
    """A hidden model carrying the packed states (see the module docstring): gzipped JSON,
    float64s and uint16s, each base64-encoded, in its tags."""
    holder = Div(text="", visible=False, name="export-payload", disable_math=True)
    meta = {k: v for k, v in payload.items() if k not in ("floats", "ints")}
    holder.tags = [_packed(json.dumps(meta, separators=(",", ":"), allow_nan=False).encode()),
                   _packed(_planes(payload["floats"])),
                   _packed(np.ascontiguousarray(payload["ints"], dtype="<u2").tobytes())]
    return holder


def export(out, n_seeds: int = DEFAULT_SEEDS, progress=None) -> dict:
    """Write the offline explorer to ``out``, its progress to the stream ``progress`` (see
    :class:`_Progress`); returns states, bytes and seconds taken."""
    start = time.perf_counter()
    seeds = seed_list(n_seeds)
    out = Path(out)
    payload = build_payload(seeds, progress)
    doc = Document()
    view = build_view(payload, seeds)
    doc.add_root(view.root)
    doc.js_on_event("document_ready", *view.ready)
    text = file_html(doc, INLINE, title=TITLE)
    data = text.encode("utf-8")
    if len(data) > MAX_BYTES:
        raise ValueError(f"export would be {len(data) / 1e6:.2f} MB, over the "
                         f"{MAX_BYTES / 1e6:.2f} MB budget")
    out.write_bytes(data)
    return dict(path=str(out), states=payload["states"], records=payload["records"],
                seeds=seeds, bytes=len(data), seconds=time.perf_counter() - start)


__all__ = ["export", "build_payload", "seed_list", "MAX_SEEDS", "DEFAULT_SEEDS",
           "MAX_BYTES", "TITLE"]
