// Light and dark: the page follows prefers-color-scheme unless the address says theme=light
// or theme=dark (the theme buttons `buttons`, 0 auto, 1 light, 2 dark, write it there). The
// dark theme is a set of CSS variables on the document, inherited by every pane: the page's
// own (--as-theme-*) and Bokeh's overrides of the charts' visual properties (--bk-*), so the
// figures are drawn dark by Bokeh itself, not filtered. `rule_inks` are the rules' names'
// colours on the dark page (--as-theme-text-<rule>, from core.RULE_TABLE); `chart_colors`
// the charts' dark colours as Bokeh's variables (style.CHART_THEMES). A colour bar draws its
// title and tick labels through parts of its own that those variables do not reach (BokehJS
// 3.9): `bar_colors` ({light, dark}: {title, label}) are set on each ColorBar as properties,
// here and when the system's theme changes under "auto".
/* global AS, bar_colors, buttons, cb_obj, chart_colors, rule_inks */
const DARK = `color-scheme: dark;
  --as-theme-ink: #e4e7eb; --as-theme-muted: #bcc6d0; --as-theme-line: #3e4c59;
  --as-theme-panel: #1a2027; --as-theme-card: #11161b; --as-theme-highlight: #4a3a12;
  --as-theme-code: #2a333d; --as-theme-link: #8cc8ff;
  ${rule_inks}
  ${chart_colors}
  background: #11161b;`;
if (!document.getElementById('as-theme')) {
  const style = document.createElement('style');
  style.id = 'as-theme';
  style.textContent = '@media (prefers-color-scheme: dark) { :root:not([data-theme="light"]) {'
    + DARK + '} }\n:root[data-theme="dark"] {' + DARK + '}\n'
    + ':root[data-theme="light"] { color-scheme: light; }\n'
    + '@media print { @page { size: auto; margin: 12mm; } :root { color-scheme: light; } }';
  document.head.appendChild(style);
}
const themes = ['auto', 'light', 'dark'];
const url = new URL(window.location.href);
let want = url.searchParams.get('theme');
if (cb_obj != null && cb_obj.active !== undefined && cb_obj === buttons) want = themes[buttons.active];
if (!themes.includes(want)) want = 'auto';
if (want === 'auto') delete document.documentElement.dataset.theme;
else document.documentElement.dataset.theme = want;
if (buttons.active !== themes.indexOf(want)) buttons.active = themes.indexOf(want);
if (want === 'auto') url.searchParams.delete('theme'); else url.searchParams.set('theme', want);
if (url.href !== window.location.href && window.location.protocol !== 'file:') {
  window.history.replaceState(window.history.state, '', url.href);
}
const SYSTEM_DARK = window.matchMedia('(prefers-color-scheme: dark)');
const colourBars = () => {
  const set = document.documentElement.dataset.theme;
  const colors = bar_colors[set === 'dark' || (set === undefined && SYSTEM_DARK.matches) ? 'dark' : 'light'];
  for (const doc of AS.documents()) {
    for (const model of doc.all_models) {
      if (model.type !== 'ColorBar') continue;
      if (model.title_text_color !== colors.title) model.title_text_color = colors.title;
      if (model.major_label_text_color !== colors.label) model.major_label_text_color = colors.label;
    }
  }
};
colourBars();
if (!AS.noted(document, 'colour bars follow the system')) {
  AS.note(document, 'colour bars follow the system', true);
  SYSTEM_DARK.addEventListener('change', colourBars);
}
// the charts read those variables when they paint: paint them again now
for (const doc of AS.documents()) {
  for (const model of doc.all_models) {
    if (model.type === 'Plot' || model.type === 'Figure') AS.repaint(model);
  }
}
