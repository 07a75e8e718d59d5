// Take the one-draw view away (`kind`: 'csv', 'svg' or 'png'), named after the state, e.g.
// attention-dk64-T1-seed2288-sqrt.svg: the numbers of both bar charts as CSV, or the pair of
// charts drawn again from their data as a vector SVG (for slides and papers) or a PNG of it.
const col = (src, k) => { const d = src.data; return Array.from(d instanceof Map ? d.get(k) : d[k]); };
const fd = text_source.data;
const fcol = (k) => Array.from(fd instanceof Map ? fd.get(k) : fd[k]);
const f = {};
fcol('field').forEach((k, i) => { f[k] = fcol('value')[i]; });
const name = 'attention-dk' + f.d + '-T' + f.t + '-seed' + f.seed + '-' + f.rule + '.' + kind;
const save = (blob) => {
  const a = document.createElement('a');       // never in the page: nothing to announce
  a.href = URL.createObjectURL(blob);
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
};
const charts = [[scaled, 'Scaled by 1/√d_k', colors[0]], [unscaled, 'Unscaled', colors[1]]];
if (kind === 'csv') {
  const keys = col(scaled, 'key');
  const cols = ['logit', 'weight', 'pq', 'gq'];
  const head = ['key', ...cols.map((c) => c + '_scaled'), ...cols.map((c) => c + '_unscaled')];
  const lines = [head.join(',').replace(/pq/g, 'p_1_minus_p').replace(/gq/g, 'grad_to_query')];
  keys.forEach((k, i) => {
    const cells = [k];
    for (const [src] of charts) for (const c of cols) cells.push(col(src, c)[i].toPrecision(17));
    lines.push(cells.join(','));
  });
  save(new Blob([lines.join('\n') + '\n'], {type: 'text/csv'}));
} else {
  const W = 900, H = 400, pw = 380, ph = 280, top = 60, esc = (t) => String(t)
    .replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="' + W + '" height="' + H
    + '" viewBox="0 0 ' + W + ' ' + H + '" font-family="Helvetica, Arial, sans-serif">'
    + '<rect width="100%" height="100%" fill="#ffffff"/>'
    + '<text x="20" y="28" font-size="16" fill="#1f2933">Attention weights, d_k = ' + esc(f.d)
    + ', T = ' + esc(f.t) + ', seed ' + esc(f.seed) + '</text>'];
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
  const svg = parts.join('');
  if (kind === 'svg') {
    save(new Blob([svg], {type: 'image/svg+xml'}));
  } else {
    const img = new Image();
    img.onload = () => {
      const canvas = document.createElement('canvas');
      canvas.width = 2 * W; canvas.height = 2 * H;
      const ctx = canvas.getContext('2d');
      ctx.scale(2, 2);
      ctx.drawImage(img, 0, 0);
      canvas.toBlob((blob) => save(blob), 'image/png');
    };
    img.src = 'data:image/svg+xml;base64,' + btoa(unescape(encodeURIComponent(svg)));
  }
}
