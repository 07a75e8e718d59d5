// Put the controls' query string (the text source `source`'s field "query") into the address
// with history.replaceState, keeping any other parameter (hide, embed) but "scaled", which
// older links carry and the "rule" control now holds.
/* global AS, source */
const query = AS.fields(source).query;
if (query !== undefined) {
  const url = new URL(window.location.href);
  for (const [k, v] of new URLSearchParams(query)) url.searchParams.set(k, v);
  url.searchParams.delete('scaled');
  if (url.href !== window.location.href) window.history.replaceState(window.history.state, '', url.href);
}
