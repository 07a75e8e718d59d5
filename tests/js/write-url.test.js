const test = require('node:test');
const assert = require('node:assert');
const {run, source} = require('./load.js');

const page = (href) => {
  const calls = [];
  const window = {location: {href}, history: {state: {kept: true},
    replaceState: (state, title, url) => { calls.push([state, url]); window.location.href = url; }}};
  return {window, calls, globals: {window, URL, URLSearchParams}};
};

test('the controls replace their own parameters, keep the others and drop "scaled"', () => {
  const p = page('http://host/app?hide=header&scaled=0&d_k=1#top');
  run('write-url', {source: source({field: ['seed', 'query'],
                                    value: ['7', 'd_k=64&seed=7&rule=sqrt']})}, p.globals);
  assert.equal(p.calls.length, 1);
  assert.deepEqual(p.calls[0][0], {kept: true});          // the history entry's state kept
  assert.equal(p.calls[0][1], 'http://host/app?hide=header&d_k=64&seed=7&rule=sqrt#top');
});

test('an address already equal to the controls is left alone', () => {
  const p = page('http://host/app?d_k=64&seed=7');
  run('write-url', {source: source({field: ['query'], value: ['seed=7&d_k=64']})}, p.globals);
  assert.deepEqual(p.calls, []);
});

test('without a query field nothing is written', () => {
  const p = page('http://host/app?scaled=1');
  run('write-url', {source: source({field: ['seed'], value: ['7']})}, p.globals);
  assert.deepEqual(p.calls, []);
});
