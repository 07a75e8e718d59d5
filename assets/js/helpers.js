// The helpers the browser programs share, as the one object `AS`. charts.script() puts this
// file before the code of every program whose `/* global */` line names AS; nothing else of
// one program is seen by another.
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
  return {col, fields};
})();
