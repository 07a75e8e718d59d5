// The numbers in the Jacobian's diagonal cells (the text renderer `cells` of `fig`, its keys
// in `source`) are shown only where a cell holds one: "<0.001" at 11 px needs ~40 px across
// and 16 px down. Run when the document is ready and when the keys change; a ResizeObserver
// on the chart runs it again after the chart changes size.
/* global AS, cells, fig, source */
const fit = () => {
  const n = AS.col(source, 'key').length;
  let width = 0, height = 0;
  try { width = fig.inner_width; height = fig.inner_height; } catch { return; /* not laid out */ }
  if (n === 0 || width == null || height == null) return;
  const fits = width / n >= 40 && height / n >= 16;
  if (cells.visible !== fits) cells.visible = fits;
};
// finding the chart's view walks the page's views: only until its observer is installed
const view = AS.noted(fig, 'cells-observed') ? null : AS.view(fig);
if (view != null) {
  AS.note(fig, 'cells-observed', true);
  // after BokehJS lays the chart out again (it sets inner_width then)
  new ResizeObserver(() => requestAnimationFrame(() => requestAnimationFrame(fit))).observe(view.el);
}
fit();
