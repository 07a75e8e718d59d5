// The paired bar charts as text for screen readers (into the "bars-text" Div, whose HTML holds
// an empty table body and a live region): a table of every key's logit, weight and p(1 - p)
// under both variants, rewritten after every change, and a one-sentence summary (the one
// copy in the page) announced politely once the charts have been still for 0.95 s (not on
// every step of a drag, however slowly it goes: each change puts the announcement off).
// Written once the charts have been still for 0.25 s (a change of the bars runs this for each
// source; a drag writes it once, at its end): off the path from a change to the new chart,
// and no work for the page while a slider moves. The left chart's rule (its title `left`, in
// `left_names`: title -> [its name in the summary, its logit column's header]) names its
// column and its half of the summary: "Scaled" for ÷√d_k, "Scaled by 1/dₖ" for ÷d_k.
/* global AS, scaled, unscaled, div, left, left_names */
clearTimeout(AS.noted(div, 'described'));
clearTimeout(AS.noted(div, 'announce'));   // a change meanwhile: the summary waits again
AS.note(div, 'described', setTimeout(() => {
  AS.note(div, 'described', null);
  const view = AS.root(div);
  // both charts hold the same keys again once a change of their number has reached both
  if (view != null && AS.col(scaled, 'key').length === AS.col(unscaled, 'key').length) {
    const {col} = AS;
    // a softmax weight is never 0 or 1, even where float64 rounds it there
    const pct = (w) => w >= 0.9995 ? '>99.9%' : w < 0.0005 ? '<0.1%' : (100 * w).toFixed(1) + '%';
    const keys = col(scaled, 'key');
    const s = {logit: col(scaled, 'logit'), weight: col(scaled, 'weight'), pq: col(scaled, 'pq')};
    const u = {logit: col(unscaled, 'logit'), weight: col(unscaled, 'weight'), pq: col(unscaled, 'pq')};
    const body = view.querySelector('[data-bars]');
    if (body != null) {
      body.innerHTML = keys.map((k, i) => '<tr><th scope="row">' + k + '</th><td>'
        + s.logit[i].toFixed(3) + '</td><td>' + pct(s.weight[i]) + '</td><td>'
        + s.pq[i].toExponential(3) + '</td><td>' + u.logit[i].toFixed(3) + '</td><td>'
        + pct(u.weight[i]) + '</td><td>' + u.pq[i].toExponential(3) + '</td></tr>').join('');
    }
    const top = (src) => { const labels = col(src, 'label'), i = labels.findIndex((t) => t);
                           return labels[i].replace('max weight ', '') + ' on ' + keys[i]; };
    const [name, header] = left_names[String(left.text).split('◀')[0].trim()] ?? ['Scaled', null];
    const column = view.querySelector('[data-left-logit]');
    if (column != null && header != null && column.textContent !== header) column.textContent = header;
    const sentence = name + ': max weight ' + top(scaled) + '; unscaled: max weight '
                     + top(unscaled) + '.';
    const live = view.querySelector('[data-summary]');
    if (live != null) {
      AS.note(div, 'announce', setTimeout(() => {
        if (live.textContent !== sentence) live.textContent = sentence;
      }, 700));
    }
  }
}, 250));
