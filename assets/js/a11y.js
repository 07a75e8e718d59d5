// Names and keys for what BokehJS draws without them (WCAG 2.2: name, role, value; keyboard):
// each slider handle gets its slider's title as its name and the value it shows as
// aria-valuetext; each group of buttons (a choice of one) is a named group whose buttons say
// whether they are pressed (aria-pressed); the tabs become a tablist, first in reading and
// focus order (BokehJS puts its headers after the panels and places them above by CSS), that
// Tab reaches and the arrow keys, Home and End move through, each tab controlling its panel
// (role tabpanel); each chart is an image named by its title, out of the Tab order (BokehJS
// makes the layer that takes a chart's events focusable, and no chart here uses a key); the
// main column and the sidebar become landmarks. Run on document_ready and whenever the tabs
// change (their headers are drawn anew then; the first pass is a microtask, so that no later
// task, a screen reader's or axe's, finds the new headers without their roles); a slider's
// change relabels its own handle only, once the slider has drawn the new value (a microtask:
// before the server's answer is handled, at a fraction of the whole pass's cost).
// A slider's handles, noted for the slider while they are in the page (finding the view walks
// every view of the page: most of a relabel's cost).
/* global AS, sliders, groups, tabs, regions, charts, cb_obj */
const handles = (slider) => {
  const kept = AS.noted(slider, 'handles');
  if (kept != null && kept.length && kept.every((h) => h.isConnected)) return kept;
  const root = AS.root(slider);
  if (root == null) return null;
  return AS.note(slider, 'handles', [...root.querySelectorAll('[role="slider"]')]);
};
const label = (slider, labels) => {
  const found = handles(slider);
  if (found == null) return false;
  for (const handle of found) {
    handle.setAttribute('aria-label', slider.title);
    handle.setAttribute('aria-valuetext', labels[slider.value] ?? String(slider.value));
  }
  return true;
};
// A region that stays at the top of the screen (a phone's controls) keeps what the keyboard
// reaches from scrolling under it (WCAG 2.2 focus not obscured): the page's scroll padding
// follows its height while it is sticky.
const padUnder = (el) => {
  const root = el.ownerDocument?.documentElement;
  if (root == null || AS.noted(el, 'padded')) return;
  AS.note(el, 'padded', true);
  const pad = () => {
    root.style.scrollPaddingTop = getComputedStyle(el).position === 'sticky'
      ? `${Math.ceil(el.getBoundingClientRect().height) + 8}px` : '';
  };
  new ResizeObserver(pad).observe(el);
  pad();
};
const pressed = (group, name) => {
  const root = AS.root(group);
  if (root == null) return false;
  const box = root.querySelector('.bk-btn-group');
  if (box != null) {
    box.setAttribute('role', 'group');
    box.setAttribute('aria-label', name);
  }
  root.querySelectorAll('button').forEach((button, i) => {
    button.setAttribute('aria-pressed', String(i === group.active));
  });
  return true;
};
// A chart's event layer (in its canvas's shadow root): named by the chart's title, an image.
const chart = (figure) => {
  const root = AS.root(figure);
  const canvas = root == null ? null : root.querySelector('.bk-Canvas');
  const layer = canvas == null || canvas.shadowRoot == null ? null
    : canvas.shadowRoot.querySelector('.bk-events');
  if (layer == null) return false;
  const title = figure.title == null ? '' : String(figure.title.text ?? '');
  layer.setAttribute('role', 'img');
  layer.setAttribute('aria-label', 'Chart: ' + (title.replace(/\s*[◀▶]\s*/g, ', ').replace(/\s+/g, ' ')
    .trim() || figure.name));
  layer.tabIndex = -1;
  return true;
};
const moved = sliders.find(([slider]) => slider === cb_obj);
if (moved != null) {
  queueMicrotask(() => label(...moved));
  return;
}
const chosen = groups.find(([group]) => group === cb_obj);
if (chosen != null) {
  queueMicrotask(() => pressed(...chosen));
  return;
}
// Views still missing (not drawn yet) are looked for again every 0.1 s, at most 100 passes
// from each run of this program.
let passes = 0;
const apply = () => {
  let missing = false;
  for (const [slider, labels] of sliders) {
    if (!label(slider, labels)) missing = true;
  }
  for (const [group, name] of groups) {
    if (!pressed(group, name)) missing = true;
  }
  for (const [model, role, name, sticky] of regions) {
    const view = AS.view(model);
    if (view == null) { missing = true; continue; }
    view.el.setAttribute('role', role);
    view.el.setAttribute('aria-label', name);
    if (sticky) padUnder(view.el);
  }
  for (const figure of charts) {
    if (!chart(figure)) missing = true;
  }
  const tv = tabs == null ? null : AS.root(tabs);
  if (tabs != null && tv == null) missing = true;
  if (tv != null) {
    const heads = [...tv.querySelectorAll('.bk-tab')];
    if (heads.length) {
      const list = heads[0].parentElement;
      list.setAttribute('role', 'tablist');
      list.setAttribute('aria-label', 'Sections of the explorer');
      // the headers' box before the first panel, where the headers show
      const header = heads[0].closest('.bk-header') ?? list;
      const first = [...tv.children].find((el) => el.tagName !== 'STYLE' && el.tagName !== 'LINK');
      if (first != null && first !== header) tv.insertBefore(header, first);
    }
    // keep the keyboard on the tabs when a key changed them, even where they were drawn
    // anew (a tab the server builds first can take seconds): unless it went elsewhere since
    const doc = tv.ownerDocument;
    const lost = doc == null || doc.activeElement == null || doc.activeElement === doc.body;
    const hadFocus = heads.some((h) => h === tv.activeElement)
                     || (lost && Date.now() - (AS.noted(tabs, 'keyed') || 0) < 30000);
    heads.forEach((head, i) => {
      const on = i === tabs.active;
      head.setAttribute('role', 'tab');
      head.setAttribute('aria-selected', String(on));
      head.id = `as-tab-${i}`;
      const panel = AS.view(tabs.tabs[i].child);
      if (panel == null) {
        missing = true;
        head.removeAttribute('aria-controls');
      } else {
        panel.el.id = `as-panel-${i}`;
        panel.el.setAttribute('role', 'tabpanel');
        panel.el.setAttribute('aria-labelledby', head.id);
        head.setAttribute('aria-controls', panel.el.id);
      }
      head.tabIndex = on ? 0 : -1;
      if (on && hadFocus) head.focus();
      if (AS.noted(head, 'keys')) return;
      AS.note(head, 'keys', true);
      head.addEventListener('keydown', (event) => {
        const n = heads.length;
        const to = {ArrowRight: (i + 1) % n, ArrowLeft: (i + n - 1) % n, Home: 0, End: n - 1,
                    Enter: i, ' ': i}[event.key];
        if (to === undefined) return;
        event.preventDefault();
        AS.note(tabs, 'keyed', Date.now());
        tabs.active = to;
      });
    });
  }
  passes += 1;
  if (missing && passes < 100) setTimeout(apply, 100);
};
queueMicrotask(apply);
setTimeout(apply, 150);
