// Put each text field's new value (the text source `source`: columns field, value) into the
// spans of the text Divs (`divs`) that show it; text nodes only, so the page is not laid out
// again.
// Each text then keeps the tallest height it has had at its width: a shorter text leaves its
// space, so the charts below it stay where they are while a slider moves, and the page keeps
// its size (BokehJS lays out the whole page again whenever its root changes size: 17-76 ms a
// change at 375 px).
/* global AS, source, divs */
const values = AS.fields(source);
for (const div of divs) {
  const view = Bokeh.index.find_one(div);
  if (view == null) continue;
  const box = view.shadow_el.querySelector('.bk-clearfix');
  if (box != null && box.__width !== box.clientWidth) {   // a new width: the text wraps anew
    box.style.display = 'flow-root';     // its children's margins inside it, in its height
    box.__width = box.clientWidth;
    box.style.minHeight = '';
    box.__tallest = Math.ceil(box.getBoundingClientRect().height);
  }
  for (const el of view.shadow_el.querySelectorAll('[data-k]')) {
    const v = values[el.dataset.k];
    if (v !== undefined && el.textContent !== v) el.textContent = v;
  }
  for (const el of view.shadow_el.querySelectorAll('[data-active]')) {
    if (el.dataset.active !== values.which) el.dataset.active = values.which;
  }
  if (box == null) continue;
  box.__tallest = Math.max(box.__tallest, Math.ceil(box.getBoundingClientRect().height));
  box.style.minHeight = box.__tallest + 'px';
}
