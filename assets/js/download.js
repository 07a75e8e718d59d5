// Take a tab away (`kind`: 'csv', 'svg' or 'png'), named after the tab and the controls its
// charts depend on (`parts`, in order), e.g. attention-saturation-dk64-T1-seed2288-keys8-
// align0.5-sqrt.svg. CSV: the columns of `tables` ([source, [[column, header], ...]], side
// by side, a shorter one ending in empty cells) as the charts hold them, every number
// written so that it reads back to the same float64. SVG: the tab's `figures` as BokehJS
// exports them, in vector form, placed as on the page, under a heading: `heading` (the page's
// and the tab's titles) and the setting they show, each of `parts` as its control's label
// and value (`labels`: name -> [label, {value: as shown}]). PNG: that SVG at twice its size.
// The number of keys, where no control holds it, is the length of `keyed`'s key column; a
// training run's setting is its source `run`'s tags.
/* global AS, kind, tab, parts, controls, defaults, text_source, figures, tables, keyed, run,
   heading, labels */
const setting = Object.assign({}, defaults, {seed: AS.fields(text_source).seed});
for (const [name, [widget, shown]] of Object.entries(controls)) {
  const at = widget.value !== undefined ? widget.value : widget.active;
  setting[name] = shown[at];
}
if (keyed != null && controls.keys == null) setting.keys = String(AS.col(keyed, 'key').length);
if (run != null && run.tags.length === 4) {
  ['d_k', 'temperature', 'seed', 'keys'].forEach((k, i) => { setting[k] = String(run.tags[i]); });
}
const prefix = {d_k: 'dk', temperature: 'T', seed: 'seed', keys: 'keys', align: 'align', rule: ''};
const name = ['attention', tab, ...parts.map((p) => prefix[p] + setting[p])].join('-') + '.' + kind;
const save = (blob) => {
  const a = document.createElement('a');       // never in the page: nothing to announce
  a.href = URL.createObjectURL(blob);
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
};
const esc = AS.escape;
const png = (svg, W, H) => {
  const img = new Image();
  img.onload = () => {
    const canvas = document.createElement('canvas');
    canvas.width = 2 * W; canvas.height = 2 * H;
    const ctx = canvas.getContext('2d');
    ctx.scale(2, 2);
    ctx.drawImage(img, 0, 0, W, H);
    canvas.toBlob((blob) => save(blob), 'image/png');
  };
  img.src = 'data:image/svg+xml;base64,' + btoa(unescape(encodeURIComponent(svg)));
};
const image = (svg, W, H) => {
  if (kind === 'svg') save(new Blob([svg], {type: 'image/svg+xml'}));
  else png(svg, W, H);
};

if (kind === 'csv') {
  const columns = [];
  for (const [src, cols] of tables) for (const [c, head] of cols) columns.push([head, AS.col(src, c)]);
  const cell = (x) => typeof x === 'number' ? String(x)
    : /[",\n]/.test(String(x)) ? '"' + String(x).replace(/"/g, '""') + '"' : String(x);
  const rows = Math.max(...columns.map(([, v]) => v.length));
  const lines = [columns.map(([head]) => head).join(',')];
  for (let i = 0; i < rows; i++) lines.push(columns.map(([, v]) => i < v.length ? cell(v[i]) : '').join(','));
  save(new Blob([lines.join('\n') + '\n'], {type: 'text/csv'}));
} else {
  // each figure exported by BokehJS as SVG, nested where the page shows it
  const shown = figures.map((m) => [m, AS.view(m)]).filter(([, v]) => v != null);
  const boxes = shown.map(([, v]) => v.el.getBoundingClientRect());
  const x0 = Math.min(...boxes.map((b) => b.left)), y0 = Math.min(...boxes.map((b) => b.top));
  const W = Math.ceil(Math.max(...boxes.map((b) => b.right)) - x0);
  const H = Math.ceil(Math.max(...boxes.map((b) => b.bottom)) - y0);
  const view = shown[0][1];
  const bg = getComputedStyle(view.el).getPropertyValue('--bk-border-fill-color').trim()
    || view.model.border_fill_color || '#ffffff';
  // the charts' ink: the dark theme's (a CSS override of Bokeh's) or the title's own
  const ink = getComputedStyle(view.el).getPropertyValue('--bk-text-color').trim()
    || (view.model.title != null && view.model.title.text_color) || '#1f2933';
  // the setting, "label: value" per control, in lines that fit the charts' width
  const items = parts.map((p) => labels[p][0] + ': ' + (labels[p][1][setting[p]] ?? setting[p]));
  const lines = [];
  for (const item of items) {
    const last = lines.length ? lines[lines.length - 1] : null;
    if (last != null && (last + ' · ' + item).length * 7 <= W - 20) lines[lines.length - 1] += ' · ' + item;
    else lines.push(item);
  }
  const top = 34 + 18 * lines.length;
  const Ht = H + top;
  const text = (y, size, weight, t) => '<text x="10" y="' + y + '" font-family="sans-serif" font-size="'
    + size + '" font-weight="' + weight + '" fill="' + esc(ink) + '">' + esc(t) + '</text>';
  Promise.all(shown.map(([, v]) => v.export('svg').to_blob().then((b) => b.text()))).then((svgs) => {
    const out = ['<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"'
      + ' width="' + W + '" height="' + Ht + '" viewBox="0 0 ' + W + ' ' + Ht + '">'
      + '<rect width="100%" height="100%" fill="' + esc(bg) + '"/>'
      + '<title>' + esc(heading) + '</title>' + text(22, 16, 'bold', heading)
      + lines.map((line, i) => text(42 + 18 * i, 13, 'normal', line)).join('')];
    svgs.forEach((svg, i) => {
      const b = boxes[i];
      out.push(svg.replace(/^[^<]*<svg /, '<svg x="' + (b.left - x0) + '" y="' + (b.top - y0 + top)
        + '" data-chart="' + esc(shown[i][0].name) + '" '));
    });
    out.push('</svg>');
    image(out.join(''), W, Ht);
  });
}
