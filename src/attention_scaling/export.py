"""A standalone, offline copy of the explorer: one self-contained HTML file.

``attention-scaling export OUT.html`` precomputes every state of the discrete
controls (each seed, head width d_k and temperature T, both variants) with
:mod:`core`, turns each into exactly the column values :class:`charts.Charts`
would set (through the same ``charts.*_data`` functions and
``ExplorerState.text_fields``), packs them compactly, and writes a plain Bokeh
page (``bokeh.embed.file_html`` with ``bokeh.resources.INLINE``) whose controls
pick a state in the browser with one ``CustomJS``. No server, no network: every
script and style sheet is inside the file, and it opens from ``file://``.

Packing (see :func:`decode`, the Python mirror of the browser's decoder):

* ``floats``: one float64 array (little-endian, base64) of the exact values. Per
  record (seed, d_k, T, variant) the 8 weights p, the 8 gradients ||dp_i/dq|| that reach
  the query, and the Jacobian's diagonal p_i (1 - p_i); its other entries are -p_i p_j,
  one IEEE multiplication that gives the same float64 in the browser as in NumPy (checked);
  then the logits per (seed, d_k, variant), which do not depend on T; then the p(1 - p)
  sweep per (seed, T, variant).
* ``ints``: a uint16 array, per record: the bar style, the max-weight label, the
  diagonal labels' inks, the 8 diagonal label texts and every text field, each an
  index into a small table of the distinct values actually produced.

Nothing is rounded: the browser shows the float64 values core computed.
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
from .charts import KEY_LABELS, INK, Charts, View, bar_data, jacobian_data, max_label, sweep_data
from .model import FIG3_D_K, FIG3_SEED, TITLE, ExplorerState, guide_html

#: Largest file the export may write; every state of 4 seeds fits in it.
MAX_BYTES = 5_000_000
DEFAULT_SEEDS = 4
#: Each seed adds ~0.5 MB of exact float64 data and texts on top of ~1.7 MB of BokehJS.
MAX_SEEDS = 4
N = core.N_KEYS
_RECORD_FLOATS = 3 * N                     # weights, ||dp_i/dq||, Jacobian diagonal
_INT_HEAD = 3                              # style, label, ink
_DIAG_TEXTS = N

#: The offline copy's last sentence of the caption.
OFFLINE_NOTE = "This offline copy holds every setting of the controls, precomputed."


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
    """Titles and outlines of the figures for each variant, as Charts.update sets them."""
    charts = Charts()
    out = {}
    state = core.compute_state(FIG3_D_K, 1.0, FIG3_SEED)
    for scaled in (True, False):
        charts.update(state, scaled)
        out["s" if scaled else "u"] = {
            name: dict(title=fig.title.text, outline_line_color=fig.outline_line_color,
                       outline_line_width=fig.outline_line_width)
            for name, fig in charts.figures.items()
        }
    return out


def build_payload(seeds: list[int]) -> dict:
    """Every state of the controls for ``seeds``, packed (see the module docstring)."""
    d_ks, temps = core.D_K_VALUES, core.TEMPERATURES
    nd, nt = len(d_ks), len(temps)
    n_rec = len(seeds) * nd * nt * 2
    explorer = ExplorerState()
    fields_order = list(explorer.text_fields())
    n_ints = _INT_HEAD + _DIAG_TEXTS + len(fields_order)
    rec_floats = np.empty((n_rec, _RECORD_FLOATS))
    logits = np.empty((len(seeds), nd, 2, N))
    sweeps = np.empty((len(seeds), nt, 2, N * nd))
    ints = np.empty((n_rec, n_ints), dtype=np.uint16)
    styles, labels, inks, strings = _Table(), _Table(), _Table(), _Table()
    diagonal = [i * N + i for i in range(N)]     # the diagonal cells, row-major
    for si, seed in enumerate(seeds):
        for di, d_k in enumerate(d_ks):
            for ti, temp in enumerate(temps):
                state = core.compute_state(d_k, temp, seed)
                with param.edit_constant(explorer):
                    explorer.result = state
                for var, scaled in enumerate((True, False)):
                    v = state.active(scaled)
                    rec = ((si * nd + di) * nt + ti) * 2 + var
                    bars = bar_data(v)
                    jd = jacobian_data(v)
                    jac = np.asarray(jd["value"]).reshape(N, N)
                    if (not np.array_equal(jac, _jacobian(bars["weight"], bars["pq"]))
                            or bars["pq"] != np.diag(jac).tolist()):
                        raise AssertionError("Jacobian is not diag(p(1-p)) - p_i p_j exactly")
                    rec_floats[rec, :N] = bars["weight"]
                    rec_floats[rec, N:2 * N] = bars["gq"]
                    rec_floats[rec, 2 * N:] = bars["pq"]
                    logits[si, di, var] = bars["logit"]
                    if di == 0:
                        sweeps[si, ti, var] = sweep_data(state, scaled)["value"]
                    text, align = max_label(v)
                    explorer.scaled = scaled
                    fields = explorer.text_fields()
                    ints[rec] = [
                        styles.add([bars["alpha"], bars["line"]]),
                        labels.add([int(v.argmax), align, text]),
                        inks.add([jd["ink"][k] for k in diagonal]),
                        *(strings.add(jd["text"][k]) for k in diagonal),
                        *(strings.add(fields[k]) for k in fields_order),
                    ]
    floats = np.concatenate([rec_floats.ravel(), logits.ravel(), sweeps.ravel()])
    return dict(
        seeds=seeds, d_k=list(d_ks), temperatures=list(temps), keys=KEY_LABELS,
        fields=fields_order, styles=styles.items, labels=labels.items, inks=inks.items, ink=INK,
        strings=strings.items, styling=_styling(),
        record_floats=_RECORD_FLOATS, record_ints=n_ints,
        logit_offset=rec_floats.size, sweep_offset=rec_floats.size + logits.size,
        states=n_rec // 2, records=n_rec,
        floats=_b64(floats, "<f8"), ints=_b64(ints.ravel(), "<u2"),
    )


def decode(payload: dict, seed: int, d_k: int, temperature: float, scaled: bool) -> dict:
    """The sources' data for one setting, unpacked from ``payload`` the way the browser does.

    Returns ``{source name: {column: values}}`` (plus ``"fields"``: the text fields and
    ``"styling"``: titles and outlines), for comparison with what Charts.update sets.
    """
    floats = np.frombuffer(base64.b64decode(payload["floats"]), dtype="<f8")
    ints = np.frombuffer(base64.b64decode(payload["ints"]), dtype="<u2")
    nd, nt = len(payload["d_k"]), len(payload["temperatures"])
    si, di = payload["seeds"].index(seed), payload["d_k"].index(d_k)
    ti = payload["temperatures"].index(temperature)
    n = len(payload["keys"])

    def record(var: int):
        rec = ((si * nd + di) * nt + ti) * 2 + var
        f = floats[rec * payload["record_floats"]:][:payload["record_floats"]]
        i = ints[rec * payload["record_ints"]:][:payload["record_ints"]]
        jac = _jacobian([float(x) for x in f[:n]], [float(x) for x in f[2 * n:3 * n]]).tolist()
        off = payload["logit_offset"] + ((si * nd + di) * 2 + var) * n
        alpha, line = payload["styles"][i[0]]
        top, align, text = payload["labels"][i[1]]
        weight = [float(x) for x in f[:n]]
        cell_text, cell_ink = [""] * (n * n), [payload["ink"]] * (n * n)
        for k in range(n):
            cell_text[k * n + k] = payload["strings"][i[3 + k]]
            cell_ink[k * n + k] = payload["inks"][i[2]][k]
        return dict(
            bars=dict(logit=[float(x) for x in floats[off:off + n]], weight=weight,
                      pq=[jac[k][k] for k in range(n)],
                      gq=[float(x) for x in f[n:2 * n]], alpha=alpha, line=line,
                      label=[text if k == top else "" for k in range(n)],
                      align=[align if k == top else "center" for k in range(n)]),
            jacobian=dict(value=[x for r in jac for x in r], text=cell_text, ink=cell_ink),
            fields={name: payload["strings"][k]
                    for name, k in zip(payload["fields"], i[3 + n:])},
        )

    s, u = record(0), record(1)
    act = s if scaled else u
    var = 0 if scaled else 1
    m = len(payload["d_k"]) * n
    off = payload["sweep_offset"] + ((si * nt + ti) * 2 + var) * m
    return {
        "scaled-weights-source": s["bars"],
        "unscaled-weights-source": u["bars"],
        "jacobian-source": act["jacobian"],
        "jacobian-diagonal-source": dict(value=floats[off:off + m].tolist()),
        "jacobian-diagonal-marker": dict(width=[str(d_k)]),
        "fields": act["fields"],
        "styling": payload["styling"]["s" if scaled else "u"],
    }


#: The browser's decoder and the one callback on every control. Decodes the payload once
#: (cached on the payload-holding model), then assigns each source's data in place.
_SELECT_JS = """
if (holder.__attn == null) {
  const bytes = (b64) => { const s = atob(b64), a = new Uint8Array(s.length);
                           for (let i = 0; i < s.length; i++) a[i] = s.charCodeAt(i);
                           return a.buffer; };
  const P = JSON.parse(holder.tags[0]);
  P.F = new Float64Array(bytes(P.floats));
  P.I = new Uint16Array(bytes(P.ints));
  delete P.floats; delete P.ints;
  holder.__attn = P;
}
const P = holder.__attn, F = P.F, I = P.I, n = P.keys.length;
const nd = P.d_k.length, nt = P.temperatures.length;
const si = seed.value, di = dk.value, ti = temp.value, scaled = toggle.active;
const assign = (src, obj) => {
  const old = src.data;
  if (old instanceof Map) {
    const m = new Map(old);
    for (const k in obj) m.set(k, obj[k]);
    src.data = m;
  } else {
    src.data = Object.assign({}, old, obj);
  }
};
const record = (v) => {
  const rec = ((si * nd + di) * nt + ti) * 2 + v;
  const f = F.subarray(rec * P.record_floats, (rec + 1) * P.record_floats);
  const i = I.subarray(rec * P.record_ints, (rec + 1) * P.record_ints);
  const jac = new Array(n * n);
  for (let a = 0; a < n; a++) {
    for (let b = 0; b < n; b++) jac[a * n + b] = a === b ? f[2 * n + a] : -(f[a] * f[b]);
  }
  const off = P.logit_offset + ((si * nd + di) * 2 + v) * n;
  const [alpha, line] = P.styles[i[0]];
  const [top, align, text] = P.labels[i[1]];
  const weight = Array.from(f.subarray(0, n));
  const fields = {};
  P.fields.forEach((name, k) => { fields[name] = P.strings[i[3 + n + k]]; });
  const cell_text = new Array(n * n).fill(''), cell_ink = new Array(n * n).fill(P.ink);
  for (let k = 0; k < n; k++) {
    cell_text[k * n + k] = P.strings[i[3 + k]];
    cell_ink[k * n + k] = P.inks[i[2]][k];
  }
  return {
    bars: {logit: Array.from(F.subarray(off, off + n)), weight: weight,
           pq: Array.from({length: n}, (_, k) => jac[k * n + k]),
           gq: Array.from(f.subarray(n, 2 * n)),
           alpha: alpha.slice(), line: line.slice(),
           label: Array.from({length: n}, (_, k) => k === top ? text : ''),
           align: Array.from({length: n}, (_, k) => k === top ? align : 'center')},
    jacobian: {value: jac, text: cell_text, ink: cell_ink},
    fields: fields,
  };
};
const s = record(0), u = record(1), act = scaled ? s : u, v = scaled ? 0 : 1;
const m = nd * n, off = P.sweep_offset + ((si * nt + ti) * 2 + v) * m;
assign(src.scaled_bars, s.bars);
assign(src.unscaled_bars, u.bars);
assign(src.jacobian, act.jacobian);
assign(src.sweep, {value: Array.from(F.subarray(off, off + m))});
assign(src.marker, {width: [String(P.d_k[di])]});
const styling = P.styling[scaled ? 's' : 'u'];
for (const name in styling) {
  const fig = figs[name], st = styling[name];
  if (fig.title.text !== st.title) fig.title.text = st.title;
  fig.outline_line_color = st.outline_line_color;
  fig.outline_line_width = st.outline_line_width;
}
const names = Object.keys(act.fields);
text_source.data = new Map([['field', names], ['value', names.map((k) => act.fields[k])]]);
seed_div.text = "<span class='seed'>seed <code>" + P.seeds[si] + "</code></span>";
"""

_RESAMPLE_JS = "seed.value = (seed.value + 1) % n;"
_FIG3_JS = ("dk.value = positions[0]; temp.value = positions[1]; toggle.active = true; "
            "seed.value = 0;")



def build_layout(payload: dict, seeds: list[int]):
    """The shared :class:`charts.View`, wired to ``payload`` by one JavaScript program."""
    d_ks, temps = core.D_K_VALUES, core.TEMPERATURES
    explorer = ExplorerState(d_k=FIG3_D_K, temperature=1.0, seed=seeds[0], scaled=True)
    view = View(
        positions={"d_k": d_ks.index(FIG3_D_K), "temperature": temps.index(1.0)}, scaled=True,
        subtitle="offline copy", caption_extra=OFFLINE_NOTE, buttons=("resample", "fig3"),
        guide=guide_html(f"<b>Resample</b> cycles through {len(seeds)} precomputed draws."))
    charts = view.charts
    charts.update(explorer.result, True, explorer.text_fields())
    view.show_seed(seeds[0])
    dk, temp, toggle = view.d_k_slider, view.temperature_slider, view.scaled_switch
    # The seed position lives in a hidden spinner so the one callback can watch it.
    seed = Spinner(low=0, high=len(seeds) - 1, step=1, value=0, visible=False, name="seed-index")
    view.sidebar.children.append(seed)
    view.buttons["resample"].js_on_event("button_click", CustomJS(
        args=dict(seed=seed, n=len(seeds)), code=_RESAMPLE_JS))
    view.buttons["fig3"].js_on_event("button_click", CustomJS(
        args=dict(seed=seed, dk=dk, temp=temp, toggle=toggle,
                  positions=[d_ks.index(FIG3_D_K), temps.index(1.0)]), code=_FIG3_JS))
    select = CustomJS(
        args=dict(
            holder=_PayloadHolder(payload), seed=seed, dk=dk, temp=temp, toggle=toggle,
            src=dict(scaled_bars=charts.scaled_source, unscaled_bars=charts.unscaled_source,
                     jacobian=charts.jacobian_source, sweep=charts.diagonal_source,
                     marker=charts.marker_source),
            figs=dict(charts.figures), text_source=charts.text_source, seed_div=view.seed_div,
        ),
        code=_SELECT_JS,
    )
    for widget, prop in ((dk, "value"), (temp, "value"), (seed, "value"), (toggle, "active")):
        widget.js_on_change(prop, select)
    return view.root


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
    doc.add_root(build_layout(payload, seeds))
    text = file_html(doc, INLINE, title=TITLE)
    data = text.encode("utf-8")
    if len(data) > MAX_BYTES:
        raise ValueError(f"export would be {len(data) / 1e6:.2f} MB, over the "
                         f"{MAX_BYTES / 1e6:.2f} MB budget")
    out.write_bytes(data)
    return dict(path=str(out), states=payload["states"], records=payload["records"],
                seeds=seeds, bytes=len(data), seconds=time.perf_counter() - start)


__all__ = ["export", "build_payload", "decode", "seed_list", "MAX_SEEDS", "DEFAULT_SEEDS",
           "MAX_BYTES", "TITLE"]
