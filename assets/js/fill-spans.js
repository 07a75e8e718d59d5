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
  const root = AS.root(div);
  if (root == null) continue;
  const box = root.querySelector('.bk-clearfix');
  if (box != null && AS.noted(box, 'width') !== box.clientWidth) {   // a new width: the text wraps anew
    box.style.display = 'flow-root';     // its children's margins inside it, in its height
    AS.note(box, 'width', box.clientWidth);
    box.style.minHeight = '';
    AS.note(box, 'tallest', Math.ceil(box.getBoundingClientRect().height));
  }
  for (const el of root.querySelectorAll('[data-k]')) {
    const v = values[el.dataset.k];
    if (v !== undefined && el.textContent !== v) el.textContent = v;
  }
  for (const el of root.querySelectorAll('[data-active]')) {
    if (el.dataset.active !== values.active) el.dataset.active = values.active;
  }
  if (box == null) continue;
  const tallest = AS.note(box, 'tallest',
    Math.max(AS.noted(box, 'tallest'), Math.ceil(box.getBoundingClientRect().height)));
  box.style.minHeight = tallest + 'px';
}
