// The helpers the browser programs share, as the one object `AS`. style.library_code() puts
// this file first in the page's library of programs, before every program whose
// `/* global */` line names AS (each a function of its args there); nothing else of one
// program is seen by another.
//
// The seams with BokehJS (checked against BokehJS 3.9): every use of a BokehJS internal by
// the programs goes through the functions below, so that an upgrade that breaks one breaks
// it here. BokehJS offers no public way to reach a model's rendered elements (its view, the
// view's shadow root) or to have a chart painted again; the programs need them to name
// slider handles and tabs for screen readers, to fill the texts' numbers, to write the
// screen-reader tables, to export the charts as SVG, to repaint the charts in a new theme and
// to lay out many changes once.
//   AS.view(model)     the model's view: Bokeh.index.find_one (of a view the programs use
//                      `el`, `model` and `export('svg')`); null while it is not drawn
//   AS.root(model)     the view's shadow root (view.shadow_el), where BokehJS draws the
//                      model's elements (.bk-* classes); null while it is not drawn
//   AS.repaint(model)  the view painted again (view.request_paint)
//   AS.documents()     the page's BokehJS documents (Bokeh.documents)
//   (installed once per page) each document laid out once per task: BokehJS lays the whole
//                      document out again, at once, after each change of a layout's
//                      visible, size or classes (LayoutDOMView.invalidate_layout) and each
//                      widget's new text (compute_layout); the first program to run has
//                      the view class (Bokeh.require('models/layouts/layout_dom')) hand
//                      both on to the document's top view, which lays out in a microtask
//                      after the task that made the changes (a tab's idle notes, a
//                      present-mode step, the handout, a server message of many changes)
//   AS.note(object, key, value), AS.noted(object, key)
//                      a program's state kept for a model (or an element) across its runs,
//                      in one WeakMap instead of properties set on BokehJS's objects
// One use stays outside: first-view.js, a page script run before the live explorer (not a
// program: no AS), takes its ready-made document out of Bokeh.documents.
/* exported AS */
const AS = (() => {
  // A column of a ColumnDataSource as an Array (its data is a Map in BokehJS 3, a plain
  // object where a program set it so); [] for a column it does not hold.
  const col = (source, name) => {
    const data = source.data;
    const values = data instanceof Map ? data.get(name) : data[name];
    return values == null ? [] : Array.from(values);
  };
  // The text source's fields (columns field, value) as {field: value}.
  const fields = (source) => {
    const names = col(source, 'field'), values = col(source, 'value'), out = {};
    names.forEach((name, i) => { out[name] = values[i]; });
    return out;
  };
  const view = (model) => Bokeh.index.find_one(model) ?? null;
  const root = (model) => { const found = view(model); return found == null ? null : found.shadow_el; };
  const repaint = (model) => { const found = view(model); if (found != null) found.request_paint(); };
  const documents = () => [...Bokeh.documents];
  // Every program shares the one WeakMap, kept on the page under a registered symbol.
  const NOTES = Symbol.for('attention-scaling.notes');
  const notes = globalThis[NOTES] ?? (globalThis[NOTES] = new WeakMap());
  const note = (object, key, value) => {
    let kept = notes.get(object);
    if (kept == null) notes.set(object, kept = new Map());
    kept.set(key, value);
    return value;
  };
  const noted = (object, key) => notes.get(object)?.get(key);
  // Each document laid out once per task (see the header): only on the BokehJS it was
  // checked against, whose layout views pass both calls on to their parent.
  const layOutOncePerTask = () => {
    let View;
    try {
      if (!String(Bokeh.version).startsWith('3.9.')) return false;
      View = Bokeh.require('models/layouts/layout_dom').LayoutDOMView;
    } catch {
      return false;
    }
    if (typeof View !== 'function') return false;
    const proto = View.prototype;
    if (noted(proto, 'once per task')) return true;
    const {update_layout: update, compute_layout: compute} = proto;
    const due = new Map();          // a document's top view -> whether its styles are due too
    const top = (view) => (view.parent instanceof View ? top(view.parent) : view);
    const layOut = (view, styles) => {
      const root = top(view), queued = due.has(root);
      due.set(root, styles || due.get(root) === true);
      if (queued) return;
      queueMicrotask(() => {
        const withStyles = due.get(root);
        due.delete(root);
        if (withStyles) update.call(root);
        compute.call(root);
      });
    };
    proto.invalidate_layout = function invalidateLayout() { layOut(this, true); };
    proto.compute_layout = function computeLayout() { layOut(this, false); };
    note(proto, 'once per task', true);
    return true;
  };
  layOutOncePerTask();
  // The page's address and its controls. `rows` are the controls a page has, one per row of
  // state.CONTROLS (layout.View.address builds them): {key (the URL key), widget, prop (the
  // widget's "value" or "active"), kind, values, shown, linear, positive}; kind "choice": a
  // position over the numbers `values` (shown in the address as `shown`), "word": a position
  // over the words `values`, "count": a whole number from values[0] to values[1], the
  // widget's value itself or, with `positions`, its position in them. A value is read as
  // state.parse_query reads it (the last one given; a number between two choices takes the
  // nearest, on a log scale unless `linear`; a count above its range the largest); one it
  // refuses leaves its control as it is.
  const DECIMAL = /^[+-]?(\d(_?\d)*(\.(\d(_?\d)*)?)?|\.\d(_?\d)*)([eE][+-]?\d(_?\d)*)?$/;
  const position = (row, text) => {
    const raw = text.trim();
    if (row.kind === 'word') return row.values.includes(raw) ? row.values.indexOf(raw) : null;
    if (row.kind === 'count') {
      if (!/^[0-9]{1,30}$/.test(raw)) return null;
      const n = Math.max(row.values[0], Math.min(row.values[1], Number(raw)));
      if (row.positions == null) return n;
      return row.positions.includes(n) ? row.positions.indexOf(n) : null;
    }
    const x = DECIMAL.test(raw) ? Number(raw.replace(/_/g, '')) : NaN;
    if (!Number.isFinite(x) || (row.positive && x <= 0)) return null;
    const options = row.values, lo = options[0], hi = options[options.length - 1];
    const clamped = Math.min(Math.max(x, lo), hi);
    const far = (o) => (row.linear ? Math.abs(o - clamped) : Math.abs(Math.log(o) - Math.log(clamped)));
    let best = 0;
    options.forEach((o, i) => { if (far(o) < far(options[best])) best = i; });
    return best;
  };
  // Set the widgets of `rows` to the address `search` (a query string): the served page's
  // Python callbacks, or the offline copy's programs, then draw what they show.
  const apply = (search, rows) => {
    const params = new URLSearchParams(search);
    for (const row of rows) {
      const given = params.getAll(row.key);
      if (given.length === 0) continue;
      const at = position(row, given[given.length - 1]);
      if (at !== null && row.widget[row.prop] !== at) row.widget[row.prop] = at;
    }
  };
  // The controls of `rows` as a query string, as state.to_query writes them.
  const query = (rows) => new URLSearchParams(rows.map((row) => {
    const at = row.widget[row.prop];
    if (row.kind !== 'count') return [row.key, row.shown[at]];
    return [row.key, String(row.positions == null ? at : row.positions[at])];
  })).toString();
  // Put the query string `search` into the address with history.replaceState, keeping any
  // other parameter (hide, embed, theme) but those of `remove` and "scaled", which older
  // links carry and the "rule" control holds.
  const writeAddress = (search, remove = []) => {
    const url = new URL(window.location.href);
    for (const [k, v] of new URLSearchParams(search)) url.searchParams.set(k, v);
    for (const k of [...remove, 'scaled']) url.searchParams.delete(k);
    if (url.href !== window.location.href) window.history.replaceState(window.history.state, '', url.href);
  };
  // Text as HTML (or XML) text or attribute value: &, <, > and " escaped.
  const escape = (t) => String(t).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;');
  return {col, fields, view, root, repaint, documents, note, noted, position,
          apply, query, writeAddress, escape};
})();
