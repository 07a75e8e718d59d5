// The text fields of `source` (the text source: columns field, value) as `values`
// {field: value}; the start of every browser callback on that source.
const d = source.data;
const col = (k) => (d instanceof Map ? d.get(k) : d[k]);
const keys = col('field') || [], vals = col('value') || [], values = {};
for (let i = 0; i < keys.length; i++) values[keys[i]] = vals[i];
