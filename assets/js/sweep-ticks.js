// The sweep's width labels (a CustomJSTickFormatter): every width where each has room along
// the axis for its slanted label (a line of 11 px text, slanted by `angle`, needs its line
// height over sin(angle)), otherwise only the widths of `every` (the powers of four), so
// that no two labels overlap on a phone. The plot's frame width is the model's inner_width
// (set by BokehJS after each layout, not sent anywhere).
/* global fig, angle, every, tick, ticks */
let width = Infinity;
try { width = fig.inner_width ?? Infinity; } catch { /* not laid out yet */ }
const room = width / ticks.length;
return room * Math.sin(angle) >= 14 || every.includes(tick) ? tick : '';
