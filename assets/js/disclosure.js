// A disclosure ("More detail", "More controls"): the Toggle `toggle` opens and closes the
// column `body` by its CSS class "open" (closed, the column takes no room and is hidden from
// screen readers: see layout.MORE_CSS and layout.MORE_CONTROLS_CSS), keeping the column's
// other classes, and says which it is to screen readers (aria-expanded).
/* global AS, toggle, body */
body.css_classes = [...body.css_classes.filter((c) => c !== 'open'),
  ...(toggle.active ? ['open'] : [])];
const button = AS.root(toggle)?.querySelector('button');
if (button != null) button.setAttribute('aria-expanded', String(toggle.active));
