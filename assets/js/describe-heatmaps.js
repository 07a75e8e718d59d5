// The two heat maps as text for screen readers (into the "heatmaps-text" Div): the Jacobian's
// diagonal p_i(1 - p_i) at this width, as printed in its cells, and for every width of the
// sweep the largest p(1 - p) and its key, the current width marked.
// Written once the charts have been still for 0.25 s (a change of the bars runs this for each
// source; a drag writes it once, at its end): off the path from a change to the new chart,
// and no work for the page while a slider moves.
/* global AS, cells, sweep, marker, widths, div */
clearTimeout(AS.noted(div, 'described'));
AS.note(div, 'described', setTimeout(() => {
  AS.note(div, 'described', null);
  const view = AS.root(div);
  if (view != null) {
    const {col} = AS;
    const keys = col(cells, 'key'), printed = col(cells, 'text');
    const diag = view.querySelector('[data-diagonal]');
    if (diag != null) {
      diag.textContent = 'Jacobian diagonal p(1 − p) at this width: '
        + keys.map((k, i) => k + ' ' + printed[i]).join(', ') + '; off the diagonal −p_i p_j.';
    }
    const values = col(sweep, 'value'), m = widths.length, here = col(marker, 'width')[0];
    const body = view.querySelector('[data-sweep]');
    if (body != null && values.length === keys.length * m) {
      const rows = [];
      for (let j = 0; j < m; j++) {
        let best = 0;
        for (let i = 1; i < keys.length; i++) if (values[i * m + j] > values[best * m + j]) best = i;
        rows.push('<tr' + (widths[j] === here ? ' aria-current="true"' : '') + '><th scope="row">'
          + widths[j] + (widths[j] === here ? ' (current)' : '') + '</th><td>'
          + values[best * m + j].toExponential(3) + '</td><td>'
          // with two keys p1(1 - p1) = p2(1 - p2): there is no single key
          + (keys.length === 2 ? 'k1 and k2 (equal)' : keys[best]) + '</td></tr>');
      }
      body.innerHTML = rows.join('');
    }
  }
}, 250));
