// The busy note (layout.View.show_busy): its model's tags say whether the page waits for a
// setting the worker pool computes; the note is shown by the class `busy-on` on its element
// (assets/style.css), which takes no room in the layout. A change of the model's `visible` or
// `css_classes` would have BokehJS lay the whole page out again, twice a setting. Run on a
// change of the tags and once the document is shown.
/* global AS, busy */
const view = AS.view(busy);
if (view != null) view.el.classList.toggle('busy-on', busy.tags.includes('busy-on'));
