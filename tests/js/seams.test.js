const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const vm = require('node:vm');

const JS = path.join(__dirname, '..', '..', 'assets', 'js');

// BokehJS's internals, as the programs would name them: each is used only in helpers.js
// (the adapter AS) and first-view.js (the page script it names).
const INTERNALS = [
  ['Bokeh.index', /\bBokeh\.index\b/],
  ['Bokeh.documents', /\bBokeh\.documents\b/],
  ['shadow_el', /\bshadow_el\b/],
  ['request_paint', /\brequest_paint\b/],
  ['invalidate_layout', /\binvalidate_layout\b/],
  ['compute_layout', /\bcompute_layout\b/],
  ['a __name property', /\.__[A-Za-z_$]/],
];
const ALLOWED = new Set(['helpers.js', 'first-view.js']);

test('no program of assets/js uses a BokehJS internal but through AS', () => {
  const files = fs.readdirSync(JS).filter((f) => f.endsWith('.js'));
  assert.ok(files.length > 10, String(files));
  const found = [];
  for (const file of files.filter((f) => !ALLOWED.has(f))) {
    const code = fs.readFileSync(path.join(JS, file), 'utf8');
    for (const [name, pattern] of INTERNALS) {
      if (pattern.test(code)) found.push(`${file}: ${name}`);
    }
  }
  assert.deepStrictEqual(found, []);
});

test('the adapter and first-view.js each say the BokehJS version they were checked against', () => {
  for (const file of ALLOWED) {
    assert.match(fs.readFileSync(path.join(JS, file), 'utf8'), /checked against BokehJS 3\.9/, file);
  }
});

// AS with `Bokeh` a stand-in: `views` maps a model to its view, `documents` the page's.
const adapter = (views, documents = []) => vm.runInThisContext(
  `(function (Bokeh) {${fs.readFileSync(path.join(JS, 'helpers.js'), 'utf8')}\nreturn AS;\n})`)(
  {index: {find_one: (model) => views.get(model)}, documents});

test('view and root reach a drawn model\'s view and shadow root, null before it is drawn', () => {
  const drawn = {}, later = {}, shadow = {querySelector: () => null};
  const view = {el: {}, shadow_el: shadow};
  const AS = adapter(new Map([[drawn, view]]));
  assert.strictEqual(AS.view(drawn), view);
  assert.strictEqual(AS.root(drawn), shadow);
  assert.strictEqual(AS.view(later), null);
  assert.strictEqual(AS.root(later), null);
});

test('repaint asks a drawn view to paint again, and nothing of one not drawn', () => {
  const plot = {}, hidden = {};
  let painted = 0;
  const AS = adapter(new Map([[plot, {request_paint: () => { painted += 1; }}]]));
  AS.repaint(plot);
  AS.repaint(hidden);
  assert.strictEqual(painted, 1);
});

test('documents lists the page\'s documents, a copy of BokehJS\'s list', () => {
  const docs = [{roots: []}, {roots: []}];
  const listed = adapter(new Map(), docs).documents();
  assert.deepStrictEqual(listed, docs);
  listed.pop();
  assert.strictEqual(docs.length, 2);
});

// BokehJS's layout views, as a stand-in: a view passes both calls on to its parent, and
// the top one lays out the whole document (update_layout: styles, compute_layout: boxes).
const layoutViews = (calls) => {
  class LayoutDOMView {
    constructor(parent = null) { this.parent = parent; }
    update_layout() { calls.push(['update', this]); }
    compute_layout() {
      if (this.parent instanceof LayoutDOMView) this.parent.compute_layout();
      else calls.push(['compute', this]);
    }
    invalidate_layout() {
      if (this.parent instanceof LayoutDOMView) this.parent.invalidate_layout();
      else { this.update_layout(); this.compute_layout(); }
    }
  }
  return LayoutDOMView;
};
const withBokeh = (version, LayoutDOMView) => vm.runInThisContext(
  `(function (Bokeh) {${fs.readFileSync(path.join(JS, 'helpers.js'), 'utf8')}\nreturn AS;\n})`)({
  version, index: {find_one: () => null}, documents: [],
  require: (name) => {
    if (name !== 'models/layouts/layout_dom') throw new Error(`no module ${name}`);
    return {LayoutDOMView};
  }});

test('on BokehJS 3.9 each document is laid out once per task, after the task', async () => {
  const calls = [];
  const View = layoutViews(calls);
  withBokeh('3.9.2', View);
  withBokeh('3.9.2', View);                  // a second program: installed once
  const top = new View(), other = new View();
  const row = new View(top), div = new View(row);
  for (let i = 0; i < 5; i++) { div.invalidate_layout(); row.compute_layout(); }
  other.compute_layout();
  assert.deepStrictEqual(calls, []);         // nothing laid out within the task
  await Promise.resolve();
  assert.deepStrictEqual(calls.map(([what, view]) => [what, view === top ? 'top' : 'other']),
                         [['update', 'top'], ['compute', 'top'], ['compute', 'other']]);
  calls.length = 0;
  div.compute_layout();                      // a text: its boxes only, once
  div.compute_layout();
  await Promise.resolve();
  assert.deepStrictEqual(calls.map(([what]) => what), ['compute']);
});

test('on another BokehJS version, or without its module, the layout is left as it is', () => {
  const calls = [];
  const View = layoutViews(calls);
  withBokeh('3.10.0', View);
  new View(new View()).invalidate_layout();  // at once, as BokehJS does
  assert.deepStrictEqual(calls.map(([what]) => what), ['update', 'compute']);
  const AS = withBokeh('3.9.2', undefined);  // require finds no layout views: AS all the same
  assert.strictEqual(AS.view({}), null);
});

test('note keeps state per object and key, shared by every copy of AS, off the objects', () => {
  const model = {}, other = {};
  const one = adapter(new Map()), two = adapter(new Map());      // two programs, or two runs
  assert.strictEqual(one.noted(model, 'keyed'), undefined);
  assert.strictEqual(one.note(model, 'keyed', 7), 7);
  assert.strictEqual(two.noted(model, 'keyed'), 7);
  assert.strictEqual(two.noted(model, 'handles'), undefined);
  assert.strictEqual(two.noted(other, 'keyed'), undefined);
  two.note(model, 'keyed', null);
  assert.strictEqual(one.noted(model, 'keyed'), null);
  assert.deepStrictEqual(Object.keys(model), []);
  assert.deepStrictEqual(Object.getOwnPropertySymbols(model), []);
});
