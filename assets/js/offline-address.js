// The offline copy's address, as the served page's: read when the page is shown (action
// "ready": the controls `rows` it names are set, AS.apply, as state.parse_query reads them),
// and written with every change (AS.writeAddress: the other parameters kept).
/* global AS, rows, action */
if (action === 'ready') AS.apply(window.location.search, rows);
AS.writeAddress(AS.query(rows));
