"""The offline copy: one self-contained HTML file (``attention-scaling export OUT.html``).

Every setting of the controls (seeds x widths x temperatures x the three rules) is computed by
:mod:`core` and turned into exactly the columns and texts the served page shows (the same
``charts.*_data`` functions and text fields), packed, and carried by the shared
:class:`charts.View`, which one JavaScript program (assets/js/offline-select.js) points at the
chosen setting. No server, no network: every script and style is inside the file.

Packing: ``floats``, one float64 array of the exact values (per record the 8 weights, the 8
gradients to the query and the Jacobian's diagonal, whose other entries -p_i p_j the browser
rebuilds bit for bit; then the logits per seed, width and rule; then the p(1 - p) sweeps);
``ints``, per record indices into small tables of the distinct styles, labels and texts (a
text field with one value over the whole grid is stored once, in ``constant_fields``).
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import numpy as np
import param
from bokeh.document import Document
from bokeh.embed import file_html
from bokeh.models import CustomJS, Div, Spinner
from bokeh.resources import INLINE

from . import core
from .charts import (KEY_LABELS, LABEL_ALPHA, Charts, View, bar_data, diagonal_label_data,
                     jacobian_data, max_label, script, sweep_data)
from .state import CONTROLS, ExplorerState
from .text import FIG3_D_K, FIG3_SEED, TITLE, guide_html

#: Largest file the export may write; every state of 4 seeds fits in it.
MAX_BYTES = 5_000_000
DEFAULT_SEEDS = 4
#: Each seed adds ~0.5 MB of exact float64 data and texts on top of ~1.7 MB of BokehJS.
MAX_SEEDS = 4
N = core.N_KEYS
_RECORD_FLOATS = 3 * N                     # weights, ||dp_i/dq||, Jacobian diagonal
_INT_HEAD = 3                              # style, label, ink
_DIAG_TEXTS = N

#: The controls the offline copy holds every setting of (eight keys, as in Fig. 3).
OFFLINE_CONTROLS = ("d_k", "rule", "temperature", "seed")

#: The offline copy's last sentence of the caption.
OFFLINE_NOTE = ("This offline copy holds every setting of its controls, precomputed, with "
                "eight keys. It has the one-draw view only: the tabs over many draws and the "
                "training run are in the served explorer.")


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


def _b64(array: np.ndarray, dtype: str) -> str:
    return base64.b64encode(np.ascontiguousarray(array, dtype=dtype).tobytes()).decode("ascii")


def _jacobian(weights: list[float], diagonal: list[float]) -> np.ndarray:
    """The Jacobian from its diagonal and the weights: off the diagonal -(p_i p_j), the
    product the browser forms too."""
    n = len(weights)
    return np.array([[diagonal[i] if i == j else -(weights[i] * weights[j]) for j in range(n)]
                     for i in range(n)])


def _styling() -> dict:
    """Titles and outlines of the figures for each rule, as Charts.update sets them."""
    charts = Charts()
    out = {}
    state = core.compute_state(FIG3_D_K, 1.0, FIG3_SEED)
    for rule in core.RULES:
        charts.update(state, rule)
        out[rule] = {
            name: dict(title=fig.title.text, outline_line_color=fig.outline_line_color,
                       outline_line_width=fig.outline_line_width)
            for name, fig in charts.figures.items()
        }
    return out


def build_payload(seeds: list[int]) -> dict:
    """Every state of the controls for ``seeds``, packed (see the module docstring)."""
    d_ks, temps = core.D_K_VALUES, core.TEMPERATURES
    nd, nt = len(d_ks), len(temps)
    nr = len(core.RULES)
    n_rec = len(seeds) * nd * nt * nr
    explorer = ExplorerState()
    fields_order = list(explorer.text_fields())
    n_head = _INT_HEAD + _DIAG_TEXTS
    n_ints = n_head + len(fields_order)
    rec_floats = np.empty((n_rec, _RECORD_FLOATS))
    logits = np.empty((len(seeds), nd, nr, N))
    sweeps = np.empty((len(seeds), nt, nr, N * nd))
    ints = np.empty((n_rec, n_ints), dtype=np.uint16)
    styles, labels, inks, strings = _Table(), _Table(), _Table(), _Table()
    for si, seed in enumerate(seeds):
        for di, d_k in enumerate(d_ks):
            for ti, temp in enumerate(temps):
                state = core.compute_state(d_k, temp, seed)
                with param.edit_constant(explorer):
                    explorer.result = state
                for var, rule in enumerate(core.RULES):
                    v = state.active(rule)
                    rec = ((si * nd + di) * nt + ti) * nr + var
                    bars = bar_data(v)
                    jd = jacobian_data(v)
                    cells = diagonal_label_data(v)
                    jac = np.asarray(jd["value"]).reshape(N, N)
                    if (not np.array_equal(jac, _jacobian(bars["weight"], bars["pq"]))
                            or bars["pq"] != np.diag(jac).tolist()):
                        raise AssertionError("Jacobian is not diag(p(1-p)) - p_i p_j exactly")
                    rec_floats[rec, :N] = bars["weight"]
                    rec_floats[rec, N:2 * N] = bars["gq"]
                    rec_floats[rec, 2 * N:] = bars["pq"]
                    logits[si, di, var] = bars["logit"]
                    if di == 0:
                        sweeps[si, ti, var] = sweep_data(state, rule)["value"]
                    text, align = max_label(v)
                    explorer.rule = rule
                    fields = explorer.text_fields()
                    ints[rec] = [
                        styles.add([bars["alpha"], bars["line"]]),
                        labels.add([int(v.argmax), align, text]),
                        inks.add(cells["ink"]),
                        *(strings.add(t) for t in cells["text"]),
                        *(strings.add(fields[k]) for k in fields_order),
                    ]
    floats = np.concatenate([rec_floats.ravel(), logits.ravel(), sweeps.ravel()])
    # a text field with one value over the whole grid is stored once, not per record
    same = [k for k in range(len(fields_order))
            if (ints[:, n_head + k] == ints[0, n_head + k]).all()]
    constants = {fields_order[k]: strings.items[ints[0, n_head + k]] for k in same}
    keep = [c for c in range(n_ints) if c - n_head not in same]
    ints = ints[:, keep]
    return dict(
        seeds=seeds, d_k=list(d_ks), temperatures=list(temps), keys=KEY_LABELS,
        fields=[f for f in fields_order if f not in constants], constant_fields=constants,
        field_order=fields_order, styles=styles.items, labels=labels.items, inks=inks.items,
        strings=strings.items, styling=_styling(),
        record_floats=_RECORD_FLOATS, record_ints=len(keep),
        logit_offset=rec_floats.size, sweep_offset=rec_floats.size + logits.size,
        rules=list(core.RULES), states=n_rec // nr, records=n_rec, label_alpha=LABEL_ALPHA,
        floats=_b64(floats, "<f8"), ints=_b64(ints.ravel(), "<u2"),
    )


def build_layout(payload: dict, seeds: list[int]):
    """The offline page's layout: :func:`build_view`'s root."""
    return build_view(payload, seeds).root


def build_view(payload: dict, seeds: list[int]) -> View:
    """The shared :class:`charts.View`, wired to ``payload`` by one JavaScript program."""
    d_ks, temps = core.D_K_VALUES, core.TEMPERATURES
    explorer = ExplorerState(d_k=FIG3_D_K, temperature=1.0, seed=seeds[0], rule="sqrt")
    view = View(
        values={c.name: getattr(explorer, c.name) for c in CONTROLS},
        subtitle="offline copy", caption_extra=OFFLINE_NOTE, buttons=("resample", "fig3"),
        argument=False, controls=OFFLINE_CONTROLS,
        guide=guide_html(f"<b>Resample</b> cycles through {len(seeds)} precomputed draws."))
    charts = view.charts
    charts.update(explorer.result, "sqrt", explorer.text_fields())
    view.show_seed(seeds[0])
    dk, temp, rule = (view.widgets[name] for name in ("d_k", "temperature", "rule"))
    # The seed position lives in a hidden spinner so the one callback can watch it.
    seed = Spinner(low=0, high=len(seeds) - 1, step=1, value=0, visible=False, name="seed-index")
    view.sidebar.children.append(seed)
    view.buttons["resample"].js_on_event("button_click", CustomJS(
        args=dict(seed=seed, n=len(seeds)), code=script("offline-resample")))
    view.buttons["fig3"].js_on_event("button_click", CustomJS(
        args=dict(seed=seed, dk=dk, temp=temp, rule=rule,
                  positions=[d_ks.index(FIG3_D_K), temps.index(1.0), core.RULES.index("sqrt")]),
        code=script("offline-fig3")))
    select = CustomJS(
        args=dict(
            holder=_PayloadHolder(payload), seed=seed, dk=dk, temp=temp, rule=rule,
            src=dict(scaled_bars=charts.scaled_source, unscaled_bars=charts.unscaled_source,
                     jacobian=charts.jacobian_source, labels=charts.jacobian_labels_source,
                     sweep=charts.diagonal_source, marker=charts.marker_source),
            figs=dict(charts.figures), text_source=charts.text_source, seed_div=view.seed_div,
        ),
        code=script("offline-select"),
    )
    for widget, prop in ((dk, "value"), (temp, "value"), (seed, "value"), (rule, "active")):
        widget.js_on_change(prop, select)
    return view


def _PayloadHolder(payload: dict) -> Div:
    """A hidden model carrying the packed states as one JSON string (``text_payload`` in JS)."""
    holder = Div(text="", visible=False, name="export-payload", disable_math=True)
    holder.tags = [json.dumps(payload, separators=(",", ":"), allow_nan=False)]
    return holder


def export(out, n_seeds: int = DEFAULT_SEEDS) -> dict:
    """Write the offline explorer to ``out``; returns states, bytes and seconds taken."""
    start = time.perf_counter()
    seeds = seed_list(n_seeds)
    out = Path(out)
    payload = build_payload(seeds)
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
