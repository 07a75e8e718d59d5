// The height of a bar chart's "max weight" label (the v_func of a CustomJSTransform over the
// bars' weights): on its bar's top, or at `cap` where the bar is taller, so that the label,
// drawn above that height, stays inside a chart as short as a phone's (about 100 px).
/* global xs, cap */
return Array.from(xs, (x) => Math.min(x, cap));
