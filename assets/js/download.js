// Take a tab away (`kind`: 'csv', 'svg' or 'png'), named after the tab and the controls its
// charts depend on (`parts`, in order), e.g. attention-saturation-dk64-T1-seed2288-keys8-
// align0.5-sqrt.svg. CSV: the columns of `tables` ([source, [[column, header], ...]], side
// by side, a shorter one ending in empty cells) as the charts hold them, every number
// written so that it reads back to the same float64. SVG: the tab's `figures` as Bokeh
// draws them, in vector form, placed as on the page; for the one draw (`bars` given) the pair
// of bar charts drawn again from their data (`colors`). PNG: that SVG at twice its size.
/* global AS, kind, tab, parts, controls, defaults, text_source, figures, tables, bars, run, colors */
const {col} = AS;
// the setting: each control's value as the page shows it; a training run's own setting
const setting = Object.assign({}, defaults, {seed: AS.fields(text_source).seed});
for (const [name, [widget, labels]] of Object.entries(controls)) {
  const at = widget.value !== undefined ? widget.value : widget.active;
  setting[name] = labels[at];
}
if (bars != null && controls.keys == null) setting.keys = String(col(bars[0], 'key').length);
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
const esc = (t) => String(t).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
  .replace(/"/g, '&quot;');
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
  for (const [src, cols] of tables) for (const [c, head] of cols) columns.push([head, col(src, c)]);
  const cell = (x) => typeof x === 'number' ? String(x)
    : /[",\n]/.test(String(x)) ? '"' + String(x).replace(/"/g, '""') + '"' : String(x);
  const rows = Math.max(...columns.map(([, v]) => v.length));
  const lines = [columns.map(([head]) => head).join(',')];
  for (let i = 0; i < rows; i++) lines.push(columns.map(([, v]) => i < v.length ? cell(v[i]) : '').join(','));
  save(new Blob([lines.join('\n') + '\n'], {type: 'text/csv'}));
} else if (bars != null) {
  const charts = [[bars[0], 'Scaled by 1/√d_k', colors[0]], [bars[1], 'Unscaled', colors[1]]];
  const W = 900, H = 400, pw = 380, ph = 280, top = 60;
  const parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="' + W + '" height="' + H
    + '" viewBox="0 0 ' + W + ' ' + H + '" font-family="Helvetica, Arial, sans-serif">'
    + '<rect width="100%" height="100%" fill="#ffffff"/>'
    + '<text x="20" y="28" font-size="16" fill="#1f2933">Attention weights, d_k = ' + esc(setting.d_k)
    + ', T = ' + esc(setting.temperature) + ', seed ' + esc(setting.seed) + '</text>'];
  charts.forEach(([src, title, color], c) => {
    const x0 = 50 + c * (pw + 70), keys = col(src, 'key'), w = col(src, 'weight');
    const labels = col(src, 'label'), bw = pw / keys.length;
    const y = (v) => top + ph * (1 - v / 1.13);
    parts.push('<g class="chart" data-title="' + esc(title) + '"><text x="' + x0 + '" y="'
      + (top - 8) + '" font-size="14" font-weight="bold" fill="#1f2933">' + esc(title) + '</text>');
    for (const t of [0, 0.2, 0.4, 0.6, 0.8, 1]) {
      parts.push('<line x1="' + x0 + '" x2="' + (x0 + pw) + '" y1="' + y(t) + '" y2="' + y(t)
        + '" stroke="#e4e7eb"/><text x="' + (x0 - 6) + '" y="' + (y(t) + 4)
        + '" font-size="11" text-anchor="end" fill="#52606d">' + t + '</text>');
    }
    keys.forEach((k, i) => {
      const on = labels[i] !== '';
      parts.push('<rect class="bar" data-key="' + k + '" data-weight="' + w[i].toPrecision(17)
        + '" x="' + (x0 + i * bw + bw * 0.14) + '" y="' + y(w[i]) + '" width="' + (bw * 0.72)
        + '" height="' + (y(0) - y(w[i])) + '" fill="' + color + '" fill-opacity="'
        + (on ? 1 : 0.55) + '"' + (on ? ' stroke="#1f2933" stroke-width="2"' : '') + '/>'
        + '<text x="' + (x0 + (i + 0.5) * bw) + '" y="' + (y(0) + 16)
        + '" font-size="11" text-anchor="middle" fill="#52606d">' + k + '</text>');
      if (on) parts.push('<text x="' + (x0 + (i + 0.5) * bw) + '" y="' + (y(w[i]) - 6)
        + '" font-size="13" font-weight="bold" text-anchor="middle" fill="#1f2933">'
        + esc(labels[i]) + '</text>');
    });
    parts.push('<text x="' + (x0 + pw / 2) + '" y="' + (y(0) + 34) + '" font-size="12" '
      + 'text-anchor="middle" fill="#52606d">key</text></g>');
  });
  parts.push('</svg>');
  image(parts.join(''), W, H);
} else {
  // each figure exported by BokehJS as SVG, nested where the page shows it
  const shown = figures.map((m) => [m, Bokeh.index.find_one(m)]).filter(([, v]) => v != null);
  const boxes = shown.map(([, v]) => v.el.getBoundingClientRect());
  const x0 = Math.min(...boxes.map((b) => b.left)), y0 = Math.min(...boxes.map((b) => b.top));
  const W = Math.ceil(Math.max(...boxes.map((b) => b.right)) - x0);
  const H = Math.ceil(Math.max(...boxes.map((b) => b.bottom)) - y0);
  const view = shown[0][1];
  const bg = getComputedStyle(view.el).getPropertyValue('--bk-border-fill-color').trim()
    || view.model.border_fill_color || '#ffffff';
  Promise.all(shown.map(([, v]) => v.export('svg').to_blob().then((b) => b.text()))).then((svgs) => {
    const out = ['<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"'
      + ' width="' + W + '" height="' + H + '" viewBox="0 0 ' + W + ' ' + H + '">'
      + '<rect width="100%" height="100%" fill="' + esc(bg) + '"/>'];
    svgs.forEach((svg, i) => {
      const b = boxes[i];
      out.push(svg.replace(/^[^<]*<svg /, '<svg x="' + (b.left - x0) + '" y="' + (b.top - y0)
        + '" data-chart="' + esc(shown[i][0].name) + '" '));
    });
    out.push('</svg>');
    image(out.join(''), W, H);
  });
}
