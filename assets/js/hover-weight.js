// A weight in the bars' hover (CustomJSHover, `value`): four decimals that never round to a lie.
/* global value */
if (value >= 0.99995) return '>0.9999';
if (value < 0.00005) return value > 0 ? value.toExponential(2) : '<1e-308';
return value.toFixed(4);
