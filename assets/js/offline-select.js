// The offline copy's one update program: on every control, the tabs and the Train button
// (action "change"), and once when the page is shown (action "ready"). Inflates the packed
// states once (gzip, the browser's DecompressionStream; noted for the payload-holding model),
// then assigns the data of the sources of the one draw and of the tab shown, in place.
/* global AS, holder, seed, dk, temp, rule, src, figs, text_source, seed_div, tabs, panels, train,
   training_status, sources, texts, leads, asks, training_figs, argument_figs, lines, shown, action,
   cb_obj */
if (AS.noted(holder, 'attn') == null) {
  const inflate = (b64) => {
    const s = atob(b64), a = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) a[i] = s.charCodeAt(i);
    return new Response(new Blob([a]).stream().pipeThrough(new DecompressionStream('gzip')))
      .arrayBuffer();
  };
  AS.note(holder, 'attn', Promise.all(holder.tags.map(inflate)).then(([json, planes, ints]) => {
    const P = JSON.parse(new TextDecoder().decode(json));
    // the float64s come as 8 byte planes: byte k of value i at k * n + i
    const b = new Uint8Array(planes), n = b.length / 8, f = new Uint8Array(b.length);
    for (let k = 0; k < 8; k++) {
      for (let i = 0, j = k * n; i < n; i++) f[8 * i + k] = b[j + i];
    }
    P.F = new Float64Array(f.buffer);
    P.I = new Uint16Array(ints);
    // the setting each tab of the argument shows: the one the page was written with
    const [di, ti, si, v] = shown;
    P.shown = {};
    for (const key of P.argument.tabs) P.shown[key] = [si, di, ti, v].join();
    return P;
  }));
}
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

// The offline data's one accessor, by the payload's schema (export.schema): the flat index
// of `at` (an index per axis) along the axes of `kind`, and a record's field by name.
const index = (P, kind, at) =>
  P.schema.axes[kind].reduce((i, axis) => i * P.schema.sizes[axis] + at[axis], 0);
const field = (P, table, rec, name) => {
  const [offset, length] = P.schema[table][name];
  const start = rec * P.schema.width[table] + offset;
  return (table === 'floats' ? P.F : P.I).subarray(start, start + length);
};
// The controls' setting, as an index per axis and as the index of each kind of setting.
const controls = () => ({seed: seed.value, d_k: dk.value, temperature: temp.value});
const settingIndex = (P) => {
  const at = controls(), out = {};
  for (const kind of ['width', 'temperature', 'grid', 'setting']) out[kind] = index(P, kind, at);
  return out;
};

// A step's question at the setting shown (export._questions: stored by the index its
// question_index names), its answer put away in Reveal's tags until Reveal, as
// layout.View.show_question does on the served page.
const ask = (P, key) => {
  const at = settingIndex(P)[P.argument.question_index[key]];
  const [text, choices, ...sentences] = P.argument.questions[key][at].map((k) => P.paragraphs[k]);
  const answer = sentences.join(' ');
  const parts = asks[key];
  if (parts.text.text === text && parts.reveal.tags[0] === answer) return;
  parts.text.text = text;
  if (choices) parts.guess.labels = choices.split('\n');
  parts.reveal.tags = [answer];
  parts.answer.text = '';
};

const oneDraw = (P) => {
  const n = P.keys.length, nd = P.d_k.length;
  const di = dk.value, v = rule.active;
  const at = (d, w) => index(P, 'record', {...controls(), d_k: d, rule: w});
  const record = (w) => {
    const rec = at(di, w), get = (table, name) => field(P, table, rec, name);
    const weight = get('floats', 'weight'), diagonal = get('floats', 'pq');
    const jac = new Array(n * n);
    for (let a = 0; a < n; a++) {
      for (let b = 0; b < n; b++) jac[a * n + b] = a === b ? diagonal[a] : -(weight[a] * weight[b]);
    }
    const row = index(P, 'logits', {...controls(), rule: w});
    const [alpha, line] = P.styles[get('ints', 'style')[0]];
    const [top, align, text] = P.labels[get('ints', 'label')[0]];
    const varying = {}, texts = get('ints', 'fields');
    P.fields.forEach((name, k) => { varying[name] = P.strings[texts[k]]; });
    const fields = {};      // in the served page's order
    for (const name of P.field_order) {
      fields[name] = name in varying ? varying[name] : P.constant_fields[name];
    }
    const cell_text = Array.from(get('ints', 'cell_text'), (k) => P.strings[k]);
    return {
      bars: {logit: Array.from(P.F.subarray(P.logit_offset + row * n, P.logit_offset + (row + 1) * n)),
             weight: Array.from(weight),
             pq: Array.from({length: n}, (_, k) => jac[k * n + k]),
             gq: Array.from(get('floats', 'gq')),
             alpha: alpha.slice(), line: line.slice(),
             label: Array.from({length: n}, (_, k) => k === top ? text : ''),
             align: Array.from({length: n}, (_, k) => k === top ? align : 'center'),
             label_alpha: Array.from({length: n}, (_, k) => k === top ? P.label_alpha : 0)},
      jacobian: {value: jac},
      labels: {text: cell_text, ink: P.inks[get('ints', 'ink')[0]].slice()},
      fields: fields,
    };
  };
  // the left chart: the rule's logits beside the unscaled ones (core.paired_rule)
  const s = record(P.rules.indexOf(P.paired[P.rules[v]])), u = record(P.rules.indexOf('none'));
  const act = record(v);
  // the p(1 - p) sweep, key by key across the widths: every width's Jacobian diagonal
  const sweep = new Array(n * nd);
  for (let d = 0; d < nd; d++) {
    const diagonal = field(P, 'floats', at(d, v), 'pq');
    for (let k = 0; k < n; k++) sweep[k * nd + d] = diagonal[k];
  }
  assign(src.scaled_bars, s.bars);
  assign(src.unscaled_bars, u.bars);
  assign(src.jacobian, act.jacobian);
  assign(src.labels, act.labels);
  assign(src.sweep, {value: sweep});
  assign(src.marker, {width: [String(P.d_k[di])]});
  const styling = P.styling[P.rules[v]];
  for (const name in styling) {
    const fig = figs[name], st = styling[name];
    if (fig.title.text !== st.title) fig.title.text = st.title;
    fig.outline_line_color = st.outline_line_color;
    fig.outline_line_width = st.outline_line_width;
    if (st.fill !== undefined) {
      fig.renderers.find((r) => r.name === name + '-bars').glyph.fill_color = {value: st.fill};
    }
    if (st.subtitle !== undefined) {
      const line = fig.above.find((m) => m.name === name + '-subtitle');
      if (line.text !== st.subtitle) line.text = st.subtitle;
    }
  }
  const names = Object.keys(act.fields);
  text_source.data = new Map([['field', names], ['value', names.map((k) => act.fields[k])]]);
  seed_div.text = "<span class='seed'>seed <code>" + P.seeds[seed.value] + "</code></span>";
  ask(P, 'draw');
};

// The blocks of the argument (and of the one draw's spread chart): the columns of a source at
// one setting, and a text's paragraphs.
const block = (P, name, at) => {
  const b = P.argument.blocks[name], out = {};
  let o = b.offset + at * b.width;
  b.columns.forEach((c, k) => { out[c] = Array.from(P.F.subarray(o, o + b.lengths[k]));
                                o += b.lengths[k]; });
  return out;
};
const paragraphs = (P, key, at) =>
  P.argument.texts[key][at].map((k) => P.paragraphs[k]).join('');

const argument = (P) => {
  const A = P.argument, key = P.argument.tabs[tabs.active];
  if (key in A.question_index) ask(P, key);
  if (!(key in A.sources)) return;          // the training run
  const v = rule.active, setting = [seed.value, dk.value, temp.value, v].join();
  if (P.shown[key] === setting) return;
  const indexes = settingIndex(P);
  const widths = A.widths[P.rules[v]];
  lines.forEach((line, k) => {
    if (line.glyph.line_width !== widths[k]) line.glyph.line_width = widths[k];
  });
  for (const [name, by] of A.sources[key]) {
    const data = block(P, name, indexes[by]);
    if (name.includes(':')) {             // a figure's axis range
      const [fig, r] = name.split(':'), range = argument_figs[fig][r];
      if (range.start !== data.start[0]) range.start = data.start[0];
      if (range.end !== data.end[0]) range.end = data.end[0];
    } else {
      assign(sources[name], data);
    }
  }
  if (key in A.text_index) {         // the one draw's texts are its records' fields
    texts[key].text = paragraphs(P, key, indexes[A.text_index[key]]);
    leads[key].text = P.paragraphs[A.leads[key][indexes[A.text_index[key]]]];
  }
  P.shown[key] = setting;
};

const training = (P) => {
  const A = P.argument;
  const rec = A.training[[seed.value, dk.value, temp.value].join()];
  const empty = (columns) => Object.fromEntries(columns.map((c) => [c, []]));
  if (rec === undefined) {      // no run here: the tab as before a run, and the status says why
    assign(sources['training-source'], empty(A.training_columns));
    assign(sources['training-lr-sweep-source'], empty(A.sweep_columns));
    training_figs['training-lr-sweep'].title.text = A.sweep_title;
    texts.training.text = A.idle_text.map((k) => P.paragraphs[k]).join('');
    leads.training.text = P.paragraphs[A.idle_lead];
    training_status.text = A.no_run;
    return;
  }
  sources['training-source'].tags = A.training_tags[rec];   // what the downloads are named after
  assign(sources['training-source'], block(P, 'training-source', rec));
  // the learning-rate sweep: held at a few widths; elsewhere empty, its title says where it is
  const sweep = A.training_sweep[dk.value];
  assign(sources['training-lr-sweep-source'], sweep === undefined ? empty(A.sweep_columns)
    : block(P, 'training-lr-sweep-source', sweep));
  training_figs['training-lr-sweep'].title.text = sweep === undefined ? A.no_sweep : A.sweep_title;
  const ranges = A.training_ranges[rec];
  for (const name in ranges) {
    for (const r in ranges[name]) {
      const range = training_figs[name][r], [start, end] = ranges[name][r];
      if (range.start !== start) range.start = start;
      if (range.end !== end) range.end = end;
    }
  }
  texts.training.text = paragraphs(P, 'training', rec);
  leads.training.text = P.paragraphs[A.leads.training[rec]];
  training_status.text = A.training_status[rec];
};

if (action === 'change') {
  const origin = cb_obj.origin != null ? cb_obj.origin : cb_obj;
  if (origin === tabs && tabs.active !== 0 && tabs.tabs[1] !== panels[1]) {
    tabs.tabs = panels;            // the argument's charts, drawn when first asked for
  }
  AS.noted(holder, 'attn').then((P) => {
    if (origin === train) {
      training(P);
    } else {
      if (origin !== tabs) oneDraw(P);
      argument(P);
    }
  });
}
