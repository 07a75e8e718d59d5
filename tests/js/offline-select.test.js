const test = require('node:test');
const assert = require('node:assert');
const zlib = require('node:zlib');
const {run, source} = require('./load.js');

// A tiny offline payload, written here by loops of its own: 2 seeds x 3 widths x 2
// temperatures x 3 rules, 2 keys. Its schema lays the fields out in another order than
// export.schema does, so a reader that counted positions instead of reading by name would
// show the wrong numbers.
const SIZES = {seed: 2, d_k: 3, temperature: 2, rule: 3};
const N = 2, RULES = ['none', 'sqrt', 'linear'], NAMES = {gq: 1, pq: 2, weight: 3};
const SCHEMA = {
  axes: {record: ['seed', 'd_k', 'temperature', 'rule'], logits: ['seed', 'd_k', 'rule'],
         width: ['d_k'], temperature: ['temperature'], grid: ['d_k', 'temperature'],
         setting: ['seed', 'd_k', 'temperature']},
  sizes: SIZES,
  floats: {pq: [0, N], weight: [N, N], gq: [2 * N, N]},
  ints: {fields: [0, 1], cell_text: [1, N], ink: [1 + N, 1], label: [2 + N, 1], style: [3 + N, 1]},
  width: {floats: 3 * N, ints: 4 + N},
};

// Every record's values, by its indices: the record number r = (((s * 3 + d) * 2 + t) * 3 + v).
const recordOf = (s, d, t, v) => ((s * SIZES.d_k + d) * SIZES.temperature + t) * SIZES.rule + v;
const value = (r, name, k) => (r + 1) / 1000 + NAMES[name] / 10 + k / 100;
const logitOf = (s, d, v, k) => -(s * 100 + d * 10 + v) - k / 10;

const payload = () => {
  const records = SIZES.seed * SIZES.d_k * SIZES.temperature * SIZES.rule;
  const logits = SIZES.seed * SIZES.d_k * SIZES.rule * N;
  const floats = new Float64Array(records * 3 * N + logits);
  const ints = new Uint16Array(records * (4 + N));
  const strings = [];
  const str = (t) => { strings.push(t); return strings.length - 1; };
  for (let r = 0; r < records; r++) {
    ['pq', 'weight', 'gq'].forEach((name, j) => {
      for (let k = 0; k < N; k++) floats[r * 3 * N + j * N + k] = value(r, name, k);
    });
    const row = r * (4 + N);
    ints[row] = str(`query ${r}`);
    for (let k = 0; k < N; k++) ints[row + 1 + k] = str(`cell ${r}.${k}`);
    ints[row + 1 + N] = r % 2;                          // ink
    ints[row + 2 + N] = r % 3;                          // label
    ints[row + 3 + N] = r % 2;                          // style
  }
  for (let s = 0, o = records * 3 * N; s < SIZES.seed; s++) {
    for (let d = 0; d < SIZES.d_k; d++) {
      for (let v = 0; v < SIZES.rule; v++) {
        for (let k = 0; k < N; k++) floats[o++] = logitOf(s, d, v, k);
      }
    }
  }
  const settings = SIZES.seed * SIZES.d_k * SIZES.temperature;
  const paragraphs = [];
  const questions = Array.from({length: settings}, (_, i) => {
    paragraphs.push(`question ${i}`, 'a\nb', `answer ${i}`);
    return [3 * i, 3 * i + 1, 3 * i + 2];
  });
  const json = {
    schema: SCHEMA, keys: ['k1', 'k2'], d_k: [1, 2, 4], temperatures: [0.5, 1], seeds: [11, 22],
    rules: RULES, logit_offset: records * 3 * N, strings, label_alpha: 0.9,
    styles: [[[1, 1], ['a', 'a']], [[0.5, 0.5], ['b', 'b']]],
    labels: [[0, 'left', 'top 0'], [1, 'right', 'top 1'], [0, 'center', 'top 2']],
    inks: [['#000', '#000'], ['#fff', '#fff']],
    fields: ['query'], field_order: ['seed_text', 'query'], constant_fields: {seed_text: 'same'},
    styling: {none: {}, sqrt: {}, linear: {}},
    paired: {none: 'sqrt', sqrt: 'sqrt', linear: 'linear'},
    paragraphs,
    argument: {tabs: ['draw'], question_index: {draw: 'setting'}, questions: {draw: questions},
               sources: {}},
  };
  // the float64s as export packs them: 8 byte planes, byte k of value i at k * n + i
  const bytes = new Uint8Array(floats.buffer), n = floats.length, planes = new Uint8Array(8 * n);
  for (let i = 0; i < n; i++) for (let k = 0; k < 8; k++) planes[k * n + i] = bytes[8 * i + k];
  const packed = (b) => zlib.gzipSync(Buffer.from(b)).toString('base64');
  return [packed(new TextEncoder().encode(JSON.stringify(json))), packed(planes),
          packed(new Uint8Array(ints.buffer))];
};

const args = (at) => {
  const dk = {value: at.d}, asks = {draw: {text: {text: ''}, reveal: {tags: []}, guess: {labels: []},
                                          answer: {text: ''}}};
  return {
    holder: {tags: payload()}, seed: {value: at.s}, dk, temp: {value: at.t},
    rule: {active: at.v},
    src: {scaled_bars: source({}), unscaled_bars: source({}), jacobian: source({}),
          labels: source({}), sweep: source({}), marker: source({})},
    figs: {}, text_source: source({}), seed_div: {text: ''}, tabs: {active: 0, tabs: []},
    panels: [], train: {}, training_status: {}, sources: {}, texts: {}, leads: {}, asks,
    training_figs: {}, argument_figs: {}, lines: [], shown: [0, 0, 0, 1], action: 'change',
    cb_obj: dk,
  };
};

const shown = async (a) => {
  // the payload inflates asynchronously; the program ends with the step's question
  for (let i = 0; i < 2000 && a.asks.draw.text.text === ''; i++) {
    await new Promise((done) => setTimeout(done, 1));
  }
  for (let i = 0; i < 5; i++) await new Promise((done) => setImmediate(done));
  const col = (src, name) => src.data.get(name);
  return {col, src: a.src};
};

test('a setting shows its own records, read by field name from a tiny payload', async () => {
  const at = {s: 1, d: 2, t: 0, v: 2};                      // seed 22, d_k 4, T 0.5, ÷d_k
  const a = args(at);
  run('offline-select', a);
  const {col, src} = await shown(a);
  // under ÷d_k the left chart shows ÷d_k's bars (core.paired_rule), the right one unscaled's
  const none = recordOf(1, 2, 0, 0), active = recordOf(1, 2, 0, 2);
  const keys = [0, 1];
  assert.deepEqual(col(src.scaled_bars, 'weight'), keys.map((k) => value(active, 'weight', k)));
  assert.deepEqual(col(src.scaled_bars, 'gq'), keys.map((k) => value(active, 'gq', k)));
  assert.deepEqual(col(src.scaled_bars, 'pq'), keys.map((k) => value(active, 'pq', k)));
  assert.deepEqual(col(src.unscaled_bars, 'weight'), keys.map((k) => value(none, 'weight', k)));
  assert.deepEqual(col(src.scaled_bars, 'logit'), keys.map((k) => logitOf(1, 2, 2, k)));
  assert.deepEqual(col(src.unscaled_bars, 'logit'), keys.map((k) => logitOf(1, 2, 0, k)));
  // the Jacobian of the rule shown: its diagonal stored, the rest -p_i p_j
  const w = keys.map((k) => value(active, 'weight', k));
  assert.deepEqual(col(src.jacobian, 'value'), [value(active, 'pq', 0), -(w[0] * w[1]),
                                                -(w[1] * w[0]), value(active, 'pq', 1)]);
  // its tables: label (r % 3), ink (r % 2), the cells' texts
  const label = [[0, 'left', 'top 0'], [1, 'right', 'top 1'], [0, 'center', 'top 2']][active % 3];
  assert.deepEqual(col(src.scaled_bars, 'label'), keys.map((k) => (k === label[0] ? label[2] : '')));
  assert.deepEqual(col(src.labels, 'text'), [`cell ${active}.0`, `cell ${active}.1`]);
  assert.deepEqual(col(src.labels, 'ink'), [['#000', '#000'], ['#fff', '#fff']][active % 2]);
  // the sweep: every width's diagonal at this seed, temperature and rule, key by key
  assert.deepEqual(col(src.sweep, 'value'),
                   [0, 1].flatMap((k) => [0, 1, 2].map((d) => value(recordOf(1, d, 0, 2), 'pq', k))));
  assert.deepEqual(col(src.marker, 'width'), ['4']);
  assert.deepEqual(col(a.text_source, 'field'), ['seed_text', 'query']);
  assert.deepEqual(col(a.text_source, 'value'), ['same', `query ${active}`]);
  assert.match(a.seed_div.text, /seed <code>22<\/code>/);
  // the question of this setting: index (seed * 3 + width) * 2 + temperature
  const setting = (1 * 3 + 2) * 2 + 0;
  assert.equal(a.asks.draw.text.text, `question ${setting}`);
  assert.deepEqual(a.asks.draw.reveal.tags, [`answer ${setting}`]);
});

test('every setting of the tiny payload reads its own record', async () => {
  for (let s = 0; s < 2; s++) {
    for (let d = 0; d < 3; d++) {
      for (let t = 0; t < 2; t++) {
        const a = args({s, d, t, v: 0});
        run('offline-select', a);
        const {col, src} = await shown(a);
        const r = recordOf(s, d, t, 1);
        assert.deepEqual(col(src.scaled_bars, 'weight'), [value(r, 'weight', 0), value(r, 'weight', 1)],
                         JSON.stringify({s, d, t}));
      }
    }
  }
});
