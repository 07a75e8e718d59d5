// The helpers the browser programs share, as the one object `AS`. style.script() puts this
// file before the code of every program whose `/* global */` line names AS; nothing else of
// one program is seen by another.
//
// The seams with BokehJS (checked against BokehJS 3.9): every use of a BokehJS internal by
// the programs goes through the functions below, so that an upgrade that breaks one breaks
// it here. BokehJS offers no public way to reach a model's rendered elements (its view, the
// view's shadow root) or to have a chart painted again; the programs need them to name
// slider handles and tabs for screen readers, to fill the texts' numbers, to write the
// screen-reader tables, to export the charts as SVG and to repaint the charts in a new theme.
//   AS.view(model)     the model's view: Bokeh.index.find_one (of a view the programs use
//                      `el`, `model` and `export('svg')`); null while it is not drawn
//   AS.root(model)     the view's shadow root (view.shadow_el), where BokehJS draws the
//                      model's elements (.bk-* classes); null while it is not drawn
//   AS.repaint(model)  the view painted again (view.request_paint)
//   AS.documents()     the page's BokehJS documents (Bokeh.documents)
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
  // Every program (and every run of one: this file is part of each run's code) shares the
  // one WeakMap, kept on the page under a registered symbol.
  const NOTES = Symbol.for('attention-scaling.notes');
  const notes = globalThis[NOTES] ?? (globalThis[NOTES] = new WeakMap());
  const note = (object, key, value) => {
    let kept = notes.get(object);
    if (kept == null) notes.set(object, kept = new Map());
    kept.set(key, value);
    return value;
  };
  const noted = (object, key) => notes.get(object)?.get(key);
  return {col, fields, view, root, repaint, documents, note, noted};
})();
