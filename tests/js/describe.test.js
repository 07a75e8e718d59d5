const test = require('node:test');
const assert = require('node:assert');
const {program, clock, source} = require('./load.js');

// A text Div's view whose marked elements are `els` (selector -> element stub).
// The left chart's title and what each title names (figures.Charts: left_names).
const LEFT_NAMES = {'Scaled by 1/√dₖ': ['Scaled', 'logit ÷√dₖ'],
                    'Scaled by 1/dₖ': ['Scaled by 1/dₖ', 'logit ÷dₖ']};

const divPage = (div, els) => {
  const time = clock();
  const view = {shadow_el: {querySelector: (sel) => els[sel] ?? null}};
  return {time, globals: {Bokeh: {index: {find_one: (m) => (m === div ? view : null)}},
                          setTimeout: time.setTimeout, clearTimeout: time.clearTimeout}};
};

test('the bars as a table and a sentence, written once the charts are still', () => {
  const div = {}, els = {'[data-bars]': {innerHTML: ''}, '[data-summary]': {textContent: ''}};
  const p = divPage(div, els);
  const scaled = source({key: ['k1', 'k2'], logit: [1.5, -0.25], weight: [0.9996, 0.0004],
                         pq: [0.00039984, 0.00039984], label: ['max weight >99.9%', '']});
  const unscaled = source({key: ['k1', 'k2'], logit: [0.1, 0.2], weight: [0.475, 0.525],
                           pq: [0.249375, 0.249375], label: ['', 'max weight 52.5%']});
  const left = {text: 'Scaled by 1/√dₖ  ◀ model uses this'};
  const describe = program('describe-bars', {scaled, unscaled, div, left, left_names: LEFT_NAMES},
                           p.globals);
  describe(); describe();                        // one change per source: written once
  p.time.flush(1);
  assert.strictEqual(p.time.flush(), 1);        // the announcement, 0.7 s later
  assert.strictEqual(els['[data-bars]'].innerHTML,
    '<tr><th scope="row">k1</th><td>1.500</td><td>>99.9%</td><td>3.998e-4</td>'
    + '<td>0.100</td><td>47.5%</td><td>2.494e-1</td></tr>'
    + '<tr><th scope="row">k2</th><td>-0.250</td><td><0.1%</td><td>3.998e-4</td>'
    + '<td>0.200</td><td>52.5%</td><td>2.494e-1</td></tr>');
  const sentence = 'Scaled: max weight >99.9% on k1; unscaled: max weight 52.5% on k2.';
  assert.strictEqual(els['[data-summary]'].textContent, sentence);
});

test('the left chart showing ÷d_k names its column and its half of the summary so', () => {
  const div = {}, els = {'[data-bars]': {innerHTML: ''}, '[data-summary]': {textContent: ''},
                         '[data-left-logit]': {textContent: 'logit ÷√dₖ'}};
  const p = divPage(div, els);
  const scaled = source({key: ['k1', 'k2'], logit: [0.6, 0.1], weight: [0.6, 0.4],
                         pq: [0.24, 0.24], label: ['max weight 60.0%', '']});
  const unscaled = source({key: ['k1', 'k2'], logit: [29, 5], weight: [0.99, 0.01],
                           pq: [0.0099, 0.0099], label: ['max weight 99.0%', '']});
  program('describe-bars', {scaled, unscaled, div, left: {text: 'Scaled by 1/dₖ'},
                            left_names: LEFT_NAMES}, p.globals)();
  p.time.flush();
  assert.strictEqual(els['[data-left-logit]'].textContent, 'logit ÷dₖ');
  assert.strictEqual(els['[data-summary]'].textContent,
    'Scaled by 1/dₖ: max weight 60.0% on k1; unscaled: max weight 99.0% on k1.');
});

test('bars of different numbers of keys (a change half-way through) are not described', () => {
  const div = {}, els = {'[data-bars]': {innerHTML: 'before'}};
  const p = divPage(div, els);
  const scaled = source({key: ['k1', 'k2'], logit: [0, 0], weight: [0.5, 0.5], pq: [0.25, 0.25],
                         label: ['max weight 50.0%', '']});
  const unscaled = source({key: ['k1'], logit: [0], weight: [1], pq: [0], label: ['max weight 100%']});
  program('describe-bars', {scaled, unscaled, div, left: {text: 'Scaled by 1/√dₖ'},
                            left_names: LEFT_NAMES}, p.globals)();
  p.time.flush();
  assert.strictEqual(els['[data-bars]'].innerHTML, 'before');
});

test('the heat maps: the diagonal as printed and the largest p(1 - p) of every width', () => {
  const div = {}, els = {'[data-diagonal]': {textContent: ''}, '[data-sweep]': {innerHTML: ''}};
  const p = divPage(div, els);
  const widths = ['1', '4'];
  program('describe-heatmaps', {
    cells: source({key: ['k1', 'k2', 'k3'], text: ['0.21', '0.16', '0.09']}),
    // key by key across the widths
    sweep: source({value: [0.1, 0.2, 0.25, 0.05, 0.15, 0.24]}),
    marker: source({width: ['4']}), widths, div}, p.globals)();
  p.time.flush();
  assert.strictEqual(els['[data-diagonal]'].textContent, 'Jacobian diagonal p(1 − p) at this '
    + 'width: k1 0.21, k2 0.16, k3 0.09; off the diagonal −p_i p_j.');
  assert.strictEqual(els['[data-sweep]'].innerHTML,
    '<tr><th scope="row">1</th><td>2.500e-1</td><td>k2</td></tr>'
    + '<tr aria-current="true"><th scope="row">4 (current)</th><td>2.400e-1</td><td>k3</td></tr>');
});
