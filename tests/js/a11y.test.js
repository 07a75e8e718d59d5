const test = require('node:test');
const assert = require('node:assert');
const {program, clock} = require('./load.js');

// An element stub that keeps its attributes and listeners.
const element = (extra = {}) => {
  const el = {attrs: {}, listeners: {}, isConnected: true, tabIndex: 0,
    setAttribute(k, v) { this.attrs[k] = v; },
    addEventListener(type, fn) { this.listeners[type] = fn; },
    focus() { el.focused = true; }, ...extra};
  return el;
};

// The page as a11y.js sees it: `views` maps a model to its view (none: not drawn yet);
// `drawnAfter` finds views only from that many look-ups on.
const page = (views, drawnAfter = 0) => {
  const time = clock();
  let lookups = 0;
  const Bokeh = {index: {find_one: (model) => (++lookups > drawnAfter ? views.get(model) : null)}};
  return {time, Bokeh, lookups: () => lookups,
          globals: {Bokeh, setTimeout: time.setTimeout, queueMicrotask: (fn) => fn(),
                    window: {}, Date: {now: () => time.now}}};
};

test('each run looks again for what is not drawn yet: the retries start anew every time', () => {
  const main = {};
  const p = page(new Map());                      // never drawn
  const a11y = program('a11y', {sliders: [], groups: [], tabs: null, regions: [[main, 'main', 'Charts']],
                                charts: [], cb_obj: null}, p.globals);
  const passes = () => { const before = p.lookups(); a11y(); p.time.flush(); return p.lookups() - before; };
  const first = passes(), second = passes(), third = passes();
  assert.ok(first >= 100 && first <= 101, String(first));      // bounded
  assert.strictEqual(second, first);              // a later run (a tab change) retries as long
  assert.strictEqual(third, first);
});

test('once everything is drawn the retries stop, and the regions are named', () => {
  const main = {}, view = {el: element()};
  const p = page(new Map([[main, view]]), 5);      // drawn after five look-ups
  const a11y = program('a11y', {sliders: [], groups: [], tabs: null, regions: [[main, 'main', 'Charts']],
                                charts: [], cb_obj: null}, p.globals);
  a11y();
  p.time.flush();
  assert.ok(p.lookups() <= 7, String(p.lookups()));
  assert.deepStrictEqual(view.el.attrs, {role: 'main', 'aria-label': 'Charts'});
});

test('slider handles get their title and the value shown; a moved slider relabels only itself', () => {
  const handle = (n) => element({n});
  const h1 = handle(1), h2 = handle(2);
  const s1 = {title: 'Head width d_k', value: 2}, s2 = {title: 'Temperature', value: 0};
  const slider = (h) => ({shadow_el: {querySelectorAll: () => [h]}});
  const p = page(new Map([[s1, slider(h1)], [s2, slider(h2)]]));
  const args = {sliders: [[s1, ['1', '4', '16']], [s2, ['0.1']]], groups: [], tabs: null,
                regions: [], charts: []};
  program('a11y', {...args, cb_obj: null}, p.globals)();
  p.time.flush();
  assert.deepStrictEqual(h1.attrs, {'aria-label': 'Head width d_k', 'aria-valuetext': '16'});
  assert.deepStrictEqual(h2.attrs, {'aria-label': 'Temperature', 'aria-valuetext': '0.1'});
  s1.value = 0; s2.value = 7;
  program('a11y', {...args, cb_obj: s1}, p.globals)();
  assert.strictEqual(h1.attrs['aria-valuetext'], '1');
  assert.strictEqual(h2.attrs['aria-valuetext'], '0.1');      // not this slider's change
  assert.strictEqual(p.time.flush(), 0);                     // and no whole pass
});

test('a group of buttons is named and says which is pressed; a click re-marks only it', () => {
  const box = element(), buttons = [element(), element(), element()];
  const group = {active: 1};
  const root = {querySelector: (sel) => (sel === '.bk-btn-group' ? box : null),
                querySelectorAll: (sel) => (sel === 'button' ? buttons : [])};
  const p = page(new Map([[group, {shadow_el: root}]]));
  const args = {sliders: [], groups: [[group, 'Scaling of the logits']], tabs: null,
                regions: [], charts: []};
  program('a11y', {...args, cb_obj: null}, p.globals)();
  p.time.flush();
  assert.deepStrictEqual(box.attrs, {role: 'group', 'aria-label': 'Scaling of the logits'});
  assert.deepStrictEqual(buttons.map((b) => b.attrs['aria-pressed']), ['false', 'true', 'false']);
  group.active = 2;
  program('a11y', {...args, cb_obj: group}, p.globals)();
  assert.deepStrictEqual(buttons.map((b) => b.attrs['aria-pressed']), ['false', 'false', 'true']);
  assert.strictEqual(p.time.flush(), 0);                     // no whole pass
});

test('the tabs are a tablist, before the panels, each tab controlling its panel', () => {
  const panels = [0, 1, 2].map(() => ({el: element()}));
  const style = {tagName: 'STYLE'};
  const children = [style, ...panels.map((v) => ({...v.el, tagName: 'DIV'}))];
  panels.forEach((v, i) => { v.el = children[i + 1]; });
  const header = {tagName: 'DIV'};
  children.push(header);
  const list = element();
  const heads = [0, 1, 2].map(() => element({parentElement: list,
                                             closest: (sel) => (sel === '.bk-header' ? header : null)}));
  const tabs = {active: 1, tabs: panels.map(() => ({child: {}}))};
  const root = {querySelectorAll: () => heads, activeElement: null, children,
                insertBefore(el, before) {
                  children.splice(children.indexOf(el), 1);
                  children.splice(children.indexOf(before), 0, el);
                }};
  const p = page(new Map([[tabs, {shadow_el: root}],
                          ...tabs.tabs.map((t, i) => [t.child, panels[i]])]));
  program('a11y', {sliders: [], groups: [], tabs, regions: [], charts: [], cb_obj: null},
          p.globals)();
  p.time.flush();
  assert.deepStrictEqual(children.map((el) => el === header ? 'header' : el.tagName),
                         ['STYLE', 'header', 'DIV', 'DIV', 'DIV']);
  assert.deepStrictEqual(list.attrs, {role: 'tablist', 'aria-label': 'Sections of the explorer'});
  assert.deepStrictEqual(heads.map((h) => [h.attrs.role, h.attrs['aria-selected'], h.tabIndex]),
                         [['tab', 'false', -1], ['tab', 'true', 0], ['tab', 'false', -1]]);
  heads.forEach((h, i) => {
    const panel = panels[i].el;
    assert.strictEqual(h.attrs['aria-controls'], panel.id);
    assert.deepStrictEqual([panel.attrs.role, panel.attrs['aria-labelledby']], ['tabpanel', h.id]);
  });
  assert.strictEqual(new Set([...heads, ...panels.map((v) => v.el)].map((e) => e.id)).size, 6);
  // [the head the key is pressed on, the key, the tab it makes active]
  for (const [on, key, to] of [[1, 'ArrowRight', 2], [2, 'ArrowRight', 0], [0, 'ArrowLeft', 2],
                               [2, 'Home', 0], [0, 'End', 2], [2, 'x', 2]]) {
    heads[on].listeners.keydown({key, preventDefault() {}});
    assert.strictEqual(tabs.active, to, `${key} on tab ${on}`);
  }
});

test('each chart is an image named by its title, out of the Tab order', () => {
  const layer = element();
  const canvas = {shadowRoot: {querySelector: (sel) => (sel === '.bk-events' ? layer : null)}};
  const figure = {name: 'scaled-weights', title: {text: 'Scaled by 1/√d_k  ◀ model uses this'}};
  const p = page(new Map([[figure, {shadow_el: {querySelector: (sel) => (
    sel === '.bk-Canvas' ? canvas : null)}}]]));
  program('a11y', {sliders: [], groups: [], tabs: null, regions: [], charts: [figure],
                   cb_obj: null}, p.globals)();
  p.time.flush();
  assert.deepStrictEqual(layer.attrs, {role: 'img',
                                       'aria-label': 'Chart: Scaled by 1/√d_k, model uses this'});
  assert.strictEqual(layer.tabIndex, -1);
});
