// The presets in place (state.PRESETS: links in the Div `presets`, text.presets_html). Each
// link's address is its preset's controls (data-preset) with the keys of its data-keep
// (embed, hide, theme, and the open tab unless the preset sets one) as the page's address
// has them, so that a link opened elsewhere (a new tab, a copied address) shows this view;
// it is brought up to date whenever a pointer, the keyboard or a context menu reaches it. A
// plain click sets the controls `rows` (AS.apply) and the address instead of loading the
// page again, and, for a preset whose link names one (data-open), opens its tab's "More
// detail" once the tab is built (the server builds a tab when it is first shown), where
// what the preset names is. Run when the page is shown; its listeners are the document's,
// installed once (a ready-made first view runs it first: the live page's rows replace the
// first view's).
/* global AS, presets, rows */
const linkOf = (event) => event.composedPath().find(
  (el) => el instanceof HTMLAnchorElement && el.dataset.preset !== undefined) ?? null;
const address = (link) => {
  const params = new URLSearchParams(link.dataset.preset);
  const here = new URLSearchParams(window.location.search);
  for (const key of link.dataset.keep.split(' ')) {
    if (here.has(key)) params.set(key, here.get(key));
    else params.delete(key);
  }
  return '?' + params.toString();
};
// The Toggle named `name` switched on, once a document holds it (for 20 s at most).
const open = (name, tries = 200) => {
  const found = AS.documents().map((d) => d.get_model_by_name(name)).find((m) => m != null);
  if (found != null) {
    if (!found.active) found.active = true;
  } else if (tries > 0) {
    setTimeout(() => open(name, tries - 1), 100);
  }
};
const refresh = (link) => {
  const href = address(link);
  if (link.getAttribute('href') !== href) link.setAttribute('href', href);
  return href;
};
AS.note(document, 'preset-rows', rows);
if (AS.noted(document, 'presets') == null) {
  AS.note(document, 'presets', true);
  for (const type of ['pointerover', 'focusin', 'mousedown', 'contextmenu']) {
    document.addEventListener(type, (event) => {
      const link = linkOf(event);
      if (link !== null) refresh(link);
    }, true);
  }
  document.addEventListener('click', (event) => {
    const link = linkOf(event);
    if (link === null) return;
    const href = refresh(link);
    if (event.defaultPrevented || event.button !== 0 || event.ctrlKey || event.metaKey
        || event.shiftKey || event.altKey) return;     // a new tab or window: the link itself
    event.preventDefault();
    AS.apply(href, AS.noted(document, 'preset-rows'));
    AS.writeAddress(href);
    if (link.dataset.open) open(link.dataset.open);
  }, true);
}
const root = AS.root(presets);
if (root != null) root.querySelectorAll('a[data-preset]').forEach(refresh);
