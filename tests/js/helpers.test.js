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
