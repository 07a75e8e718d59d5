const test = require('node:test');
const assert = require('node:assert');
const {run, clock} = require('./load.js');

// A page at `href` whose clipboard answers `copies` (true: written, false: refused).
const page = (href, copies) => {
  const prompts = [], button = {label: 'Copy link to this view'}, time = clock();
  const window = {location: {href}, isSecureContext: true,
                  prompt: (text, value) => { prompts.push([text, value]); return null; }};
  const navigator = {clipboard: {writeText: (text) => (copies ? Promise.resolve(text)
                                                              : Promise.reject(new Error('denied')))}};
  const globals = {window, navigator, setTimeout: time.setTimeout};
  return {button, prompts, time, globals};
};

test('a copied link says so, and the label comes back', async () => {
  const p = page('https://host/?d_k=128', true);
  run('copy-link', {button: p.button}, p.globals);
  await new Promise((done) => setImmediate(done));
  assert.equal(p.button.label, 'Link copied');
  assert.deepEqual(p.prompts, []);
  p.time.flush();
  assert.equal(p.button.label, 'Copy link to this view');
});

test('where the clipboard is refused (an iframe) the link is shown to copy by hand', async () => {
  const p = page('https://host/?embed=1&d_k=128', false);
  run('copy-link', {button: p.button}, p.globals);
  await new Promise((done) => setImmediate(done));
  assert.deepEqual(p.prompts, [['Copy this link to the view:', 'https://host/?embed=1&d_k=128']]);
  assert.equal(p.button.label, 'Not copied: link shown');
});
