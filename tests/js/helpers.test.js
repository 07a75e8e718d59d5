const test = require('node:test');
const assert = require('node:assert');
const {helpers, source} = require('./load.js');

test('col gives a column as an Array from a Map or a plain object, [] when missing', () => {
  const AS = helpers();
  const typed = source({w: new Float64Array([0.25, 0.75]), key: ['k1', 'k2']});
  const w = AS.col(typed, 'w');
  assert.ok(Array.isArray(w));
  assert.deepEqual(w, [0.25, 0.75]);
  assert.deepEqual(AS.col({data: {key: ['k1']}}, 'key'), ['k1']);
  assert.deepEqual(AS.col(typed, 'nothing'), []);
  assert.deepEqual(AS.col({data: {}}, 'key'), []);
});

test('fields reads the text source as {field: value}', () => {
  const AS = helpers();
  const text = source({field: ['seed', 'query'], value: ['7', 'd_k=64']});
  assert.deepEqual({...AS.fields(text)}, {seed: '7', query: 'd_k=64'});
  assert.deepEqual({...AS.fields(source({}))}, {});
});

test('apply sets the widgets the address names, query writes them back as to_query does', () => {
  const AS = helpers();
  const dk = {value: 6}, rule = {active: 1}, seed = {value: 0}, tabs = {active: 0};
  const rows = [
    {key: 'd_k', widget: dk, prop: 'value', kind: 'choice', values: [1, 2, 4, 8, 16, 32, 64],
     shown: ['1', '2', '4', '8', '16', '32', '64'], linear: false, positive: false},
    {key: 'rule', widget: rule, prop: 'active', kind: 'word', values: ['none', 'sqrt'],
     shown: ['none', 'sqrt']},
    {key: 'seed', widget: seed, prop: 'value', kind: 'count', values: [0, 100],
     positions: [2288, 1, 2]},
    {key: 'tab', widget: tabs, prop: 'active', kind: 'word', values: ['draw', 'variance'],
     shown: ['draw', 'variance']},
  ];
  AS.apply('d_k=5&d_k=12&rule=none&seed=2&tab=nowhere&keys=3', rows);
  assert.deepEqual([dk.value, rule.active, seed.value, tabs.active], [4, 0, 2, 0]);
  assert.equal(AS.query(rows), 'd_k=16&rule=none&seed=2&tab=draw');
  AS.apply('d_k=abc&rule=&seed=5', rows);             // refused: left as they are
  assert.deepEqual([dk.value, rule.active, seed.value], [4, 0, 2]);
});
