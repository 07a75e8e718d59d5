// Put the controls' query string (the text source `source`'s field "query") into the address
// (AS.writeAddress: the other parameters kept).
/* global AS, source */
const query = AS.fields(source).query;
if (query !== undefined) AS.writeAddress(query);
