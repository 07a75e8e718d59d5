// "More detail": the Toggle `toggle` opens and closes the column `body` by its CSS class
// ("open"; closed, the column takes no room and is hidden from screen readers, and it prints
// open: see layout.MORE_CSS), and says which it is to screen readers (aria-expanded).
/* global AS, toggle, body */
body.css_classes = toggle.active ? ['more', 'open'] : ['more'];
const button = AS.root(toggle)?.querySelector('button');
if (button != null) button.setAttribute('aria-expanded', String(toggle.active));
