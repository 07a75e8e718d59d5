const test = require('node:test');
const assert = require('node:assert');
const {program, clock, source} = require('./load.js');

// The page as download.js sees it; `saved()` waits for the files it saved: [[name, text]].
const page = (views = new Map()) => {
  const time = clock(), blobs = new Map(), clicked = [];
  const globals = {
    setTimeout: time.setTimeout,
    document: {createElement: () => ({click() { clicked.push([this.download, this.href]); }})},
    URL: {createObjectURL: (blob) => { const u = 'blob:' + blobs.size; blobs.set(u, blob); return u; },
          revokeObjectURL: () => {}},
    Bokeh: {index: {find_one: (model) => views.get(model)}},
    getComputedStyle: () => ({getPropertyValue: () => ''}),
  };
  const saved = async () => {
    for (let i = 0; i < 20 && clicked.length === 0; i++) await new Promise((r) => setImmediate(r));
    return Promise.all(clicked.map(async ([name, href]) => [name, await blobs.get(href).text()]));
  };
  return {globals, saved};
};

const draw = {
  tab: 'draw', parts: ['d_k', 'temperature', 'seed', 'keys', 'rule'],
  controls: {d_k: [{value: 3}, ['1', '4', '16', '64']], rule: [{active: 1}, ['sqrt', 'none', 'linear']]},
  defaults: {temperature: '1'},
  text_source: source({field: ['seed', 'query'], value: ['7', 'seed=7']}),
  figures: [], run: null, heading: 'Why attention: One draw',
  labels: {d_k: ['Head width d_k', {}], temperature: ['Temperature T', {}], seed: ['Random seed', {}],
           keys: ['Number of keys n', {}],
           rule: ['Scaling of the logits', {none: 'unscaled', sqrt: '÷√d_k', linear: '÷d_k'}]},
};

test('the CSV: every column of the tables side by side, float64s that read back exactly', async () => {
  const p = page();
  const scaled = source({key: ['k1', 'k2', 'k3'], weight: new Float64Array([0.1, 0.30000000000000004, 0.6])});
  const other = source({note: ['a, "b"', 'c']});
  program('download', {...draw, kind: 'csv', keyed: scaled,
                       tables: [[scaled, [['key', 'key'], ['weight', 'weight_scaled']]],
                                [other, [['note', 'note']]]]}, p.globals)();
  assert.deepStrictEqual(await p.saved(), [[
    'attention-draw-dk64-T1-seed7-keys3-none.csv',
    'key,weight_scaled,note\nk1,0.1,"a, ""b"""\nk2,0.30000000000000004,c\nk3,0.6,\n']]);
});

test('a training run is named after its own setting (its source\'s tags)', async () => {
  const p = page();
  const run = source({step: [0, 1], loss: [2.5, 1.25]}, {tags: [16, 2, 5, 8]});
  program('download', {...draw, tab: 'training', parts: ['d_k', 'temperature', 'seed', 'keys'],
                       kind: 'csv', keyed: null, run, tables: [[run, [['loss', 'loss_sqrt']]]]},
          p.globals)();
  assert.deepStrictEqual(await p.saved(), [['attention-training-dk16-T2-seed5-keys8.csv',
                                             'loss_sqrt\n2.5\n1.25\n']]);
});

test('the SVG: each figure as BokehJS exports it, placed as on the page under its title and setting',
     async () => {
  const exported = (inner) => ({export: () => ({to_blob: async () => new Blob(
    ['<svg xmlns="http://www.w3.org/2000/svg" width="10" height="5">'
     + inner + '</svg>'])})});
  const view = (left, top, width, height, inner) => ({
    el: {getBoundingClientRect: () => ({left, top, right: left + width, bottom: top + height})},
    model: {border_fill_color: '#fefefe'}, ...exported(inner)});
  const a = {name: 'scaled-weights'}, b = {name: 'unscaled-weights'}, hidden = {name: 'x'};
  const p = page(new Map([[a, view(20, 100, 400, 300, '<path d="M0 0"/>')],
                          [b, view(430, 100.5, 400, 300, '<rect/>')]]));
  program('download', {...draw, kind: 'svg', keyed: source({key: ['k1', 'k2']}),
                       figures: [a, b, hidden], tables: []}, p.globals)();
  const [[name, svg]] = await p.saved();
  assert.strictEqual(name, 'attention-draw-dk64-T1-seed7-keys2-none.svg');
  assert.strictEqual(svg,
    '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"'
    + ' width="810" height="353" viewBox="0 0 810 353"><rect width="100%" height="100%" fill="#fefefe"/>'
    + '<title>Why attention: One draw</title>'
    + '<text x="10" y="22" font-family="sans-serif" font-size="16" font-weight="bold" fill="#1f2933">'
    + 'Why attention: One draw</text>'
    + '<text x="10" y="42" font-family="sans-serif" font-size="13" font-weight="normal" fill="#1f2933">'
    + 'Head width d_k: 64 · Temperature T: 1 · Random seed: 7 · Number of keys n: 2 · '
    + 'Scaling of the logits: unscaled</text>'
    + '<svg x="0" y="52" data-chart="scaled-weights" xmlns="http://www.w3.org/2000/svg" width="10" height="5">'
    + '<path d="M0 0"/></svg>'
    + '<svg x="410" y="52.5" data-chart="unscaled-weights" xmlns="http://www.w3.org/2000/svg" width="10" height="5">'
    + '<rect/></svg></svg>');
});

test('a setting too long for the charts\' width takes more lines, and the title its chart\'s ink',
     async () => {
  const view = {el: {getBoundingClientRect: () => ({left: 0, top: 0, right: 300, bottom: 200})},
                model: {border_fill_color: '#000', title: {text_color: '#e0e6eb'}},
                export: () => ({to_blob: async () => new Blob(['<svg></svg>'])})};
  const a = {name: 'chart'};
  const p = page(new Map([[a, view]]));
  program('download', {...draw, kind: 'svg', keyed: source({key: ['k1', 'k2']}), figures: [a],
                       tables: []}, p.globals)();
  const [[, svg]] = await p.saved();
  const lines = [...svg.matchAll(/<text [^>]*font-size="13"[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]);
  assert.deepStrictEqual(lines, ['Head width d_k: 64 · Temperature T: 1',
                                 'Random seed: 7 · Number of keys n: 2',
                                 'Scaling of the logits: unscaled']);
  assert.ok(lines.every((line) => line.length * 7 <= 280), String(lines));
  assert.match(svg, /height="288"/);                    // 200 + 34 + 3 × 18
  assert.match(svg, /fill="#e0e6eb">Why attention: One draw</);
});
