// After read-fields.js: put the controls' query string (field "query") into the address
// with history.replaceState, keeping any other parameter (hide, embed) but "scaled", which
// older links carry and the "rule" control now holds.
if (values.query !== undefined) {
  const url = new URL(window.location.href);
  for (const [k, v] of new URLSearchParams(values.query)) url.searchParams.set(k, v);
  url.searchParams.delete('scaled');
  if (url.href !== window.location.href) window.history.replaceState(window.history.state, '', url.href);
}
