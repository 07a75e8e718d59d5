// The keys' labels k1 … kn on an axis of `fig` along `dim` ('x' or 'y'), a
// CustomJSTickFormatter: every key where each label has room (its text and a gap across, at
// least 14 px apart along a vertical axis), otherwise every 2nd, 4th, 8th … key (the
// multiples, and k1 where it has that room before the first), so that no two labels touch.
// The plot's frame size is the model's inner_width / inner_height (set by BokehJS after each
// layout, not sent anywhere).
/* global fig, dim, tick, ticks */
let length = Infinity;
try { length = (dim === 'x' ? fig.inner_width : fig.inner_height) ?? Infinity; } catch { /* not laid out yet */ }
const room = length / ticks.length;
const longest = Math.max(...ticks.map((t) => String(t).length));
// an 11 px label's characters are at most ~7 px wide
const need = dim === 'x' ? Math.max(14, 7 * longest + 8) : 14;
let step = 1;
while (room * step < need && step < ticks.length) step *= 2;
const i = Number(String(tick).slice(1));
return i % step === 0 || (i === 1 && room * (step - 1) >= need) ? tick : '';
