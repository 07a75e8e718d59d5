// The controls the open tab does not use (state.TABS' idle rows: `idle`, tab key -> {control:
// the HTML of its note}) are disabled and say why under them (`notes`); the others are
// enabled. `keys` are the tabs' keys in order, `widgets` the controls by name (the seed's: the
// Resample button).
/* global tabs, keys, idle, widgets, notes */
const unused = idle[keys[tabs.active]] ?? {};
for (const [name, widget] of Object.entries(widgets)) {
  const text = unused[name] ?? '';
  if (widget.disabled !== (text !== '')) widget.disabled = text !== '';
  const note = notes[name];
  if (note == null) continue;
  if (note.text !== text) note.text = text;
  if (note.visible !== (text !== '')) note.visible = text !== '';
}
