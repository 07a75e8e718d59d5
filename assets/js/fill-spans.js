// After read-fields.js: put each field's new value into the spans of the text Divs (`divs`)
// that show it; text nodes only, so the page is not laid out again.
for (const div of divs) {
  const view = Bokeh.index.find_one(div);
  if (view == null) continue;
  for (const el of view.shadow_el.querySelectorAll('[data-k]')) {
    const v = values[el.dataset.k];
    if (v !== undefined && el.textContent !== v) el.textContent = v;
  }
  for (const el of view.shadow_el.querySelectorAll('[data-active]')) {
    if (el.dataset.active !== values.which) el.dataset.active = values.which;
  }
}
