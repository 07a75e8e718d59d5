// The offline copy's one update program, on every control: decodes the packed states once
// (cached on the payload-holding model), then assigns each source's data in place.
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
const nd = P.d_k.length, nt = P.temperatures.length, nr = P.rules.length;
const si = seed.value, di = dk.value, ti = temp.value, v = rule.active;
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
  const rec = ((si * nd + di) * nt + ti) * nr + v;
  const f = F.subarray(rec * P.record_floats, (rec + 1) * P.record_floats);
  const i = I.subarray(rec * P.record_ints, (rec + 1) * P.record_ints);
  const jac = new Array(n * n);
  for (let a = 0; a < n; a++) {
    for (let b = 0; b < n; b++) jac[a * n + b] = a === b ? f[2 * n + a] : -(f[a] * f[b]);
  }
  const off = P.logit_offset + ((si * nd + di) * nr + v) * n;
  const [alpha, line] = P.styles[i[0]];
  const [top, align, text] = P.labels[i[1]];
  const weight = Array.from(f.subarray(0, n));
  const varying = {};
  P.fields.forEach((name, k) => { varying[name] = P.strings[i[3 + n + k]]; });
  const fields = {};      // in the served page's order
  for (const name of P.field_order) fields[name] = name in varying ? varying[name] : P.constant_fields[name];
  const cell_text = Array.from({length: n}, (_, k) => P.strings[i[3 + k]]);
  return {
    bars: {logit: Array.from(F.subarray(off, off + n)), weight: weight,
           pq: Array.from({length: n}, (_, k) => jac[k * n + k]),
           gq: Array.from(f.subarray(n, 2 * n)),
           alpha: alpha.slice(), line: line.slice(),
           label: Array.from({length: n}, (_, k) => k === top ? text : ''),
           align: Array.from({length: n}, (_, k) => k === top ? align : 'center'),
           label_alpha: Array.from({length: n}, (_, k) => k === top ? P.label_alpha : 0)},
    jacobian: {value: jac},
    labels: {text: cell_text, ink: P.inks[i[2]].slice()},
    fields: fields,
  };
};
const s = record(P.rules.indexOf('sqrt')), u = record(P.rules.indexOf('none'));
const act = record(v);
const m = nd * n, off = P.sweep_offset + ((si * nt + ti) * nr + v) * m;
assign(src.scaled_bars, s.bars);
assign(src.unscaled_bars, u.bars);
assign(src.jacobian, act.jacobian);
assign(src.labels, act.labels);
assign(src.sweep, {value: Array.from(F.subarray(off, off + m))});
assign(src.marker, {width: [String(P.d_k[di])]});
const styling = P.styling[P.rules[v]];
for (const name in styling) {
  const fig = figs[name], st = styling[name];
  if (fig.title.text !== st.title) fig.title.text = st.title;
  fig.outline_line_color = st.outline_line_color;
  fig.outline_line_width = st.outline_line_width;
}
const names = Object.keys(act.fields);
text_source.data = new Map([['field', names], ['value', names.map((k) => act.fields[k])]]);
seed_div.text = "<span class='seed'>seed <code>" + P.seeds[si] + "</code></span>";
