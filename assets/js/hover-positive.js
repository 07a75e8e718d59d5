// A positive quantity of a softmax (p(1 - p), ||dp_i/dq||) in a hover: four significant digits,
// and where float64 underflows to 0, says so instead of "0".
/* global value */
return value > 0 ? value.toPrecision(4) : '<1e-308';
