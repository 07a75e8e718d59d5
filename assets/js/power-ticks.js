// Tick labels of an axis in log10 units, as powers of ten (a CustomJSTickFormatter):
// -3 is written 10⁻³; a tick between whole powers is left unlabelled.
/* global tick */
if (!Number.isInteger(tick)) return '';
const SUPERSCRIPT = {'-': '⁻', 0: '⁰', 1: '¹', 2: '²', 3: '³', 4: '⁴', 5: '⁵', 6: '⁶', 7: '⁷', 8: '⁸', 9: '⁹'};
if (tick === 0) return '1';
if (tick === 1) return '10';
return '10' + String(tick).split('').map((c) => SUPERSCRIPT[c]).join('');
