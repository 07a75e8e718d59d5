// After read-fields.js: put the controls' query string (field "query") into the address
// with history.replaceState, keeping any other parameter (hide, embed).
if (values.query !== undefined) {
  const url = new URL(window.location.href);
  for (const [k, v] of new URLSearchParams(values.query)) url.searchParams.set(k, v);
  if (url.href !== window.location.href) window.history.replaceState(window.history.state, '', url.href);
}
