// The controls the open tab does not use (state.TABS' idle rows: `idle`, tab key -> [[control,
// why], ...]) are disabled and say why under them (`notes`); the others are enabled. `keys`
// are the tabs' keys in order, `widgets` the controls by name (the seed's: the Resample
// button).
/* global tabs, keys, idle, widgets, notes */
const unused = new Map(idle[keys[tabs.active]] ?? []);
for (const [name, widget] of Object.entries(widgets)) {
  const why = unused.get(name);
  if (widget.disabled !== (why !== undefined)) widget.disabled = why !== undefined;
  const note = notes[name];
  if (note == null) continue;
  const text = why === undefined ? '' : `<p class='idle-note'>Not used on this tab: ${why}.</p>`;
  if (note.text !== text) note.text = text;
  if (note.visible !== (why !== undefined)) note.visible = why !== undefined;
}
