// Tick labels of a log axis (a CustomJSTickFormatter), as plain text: a whole power of ten
// written 10⁻³, 1 or 10; another tick (where the axis spans little: 2 or 5 times a power, or
// steps of a tenth of one, 1.2, 1.4) as its number to two digits at most: 0.02, 5, 200, 1.2.
/* global tick */
const k = Math.round(Math.log10(tick));
if (Math.abs(Math.log10(tick) - k) > 1e-9) return String(Number(tick.toPrecision(2)));
const SUPERSCRIPT = {'-': '⁻', 0: '⁰', 1: '¹', 2: '²', 3: '³', 4: '⁴', 5: '⁵', 6: '⁶', 7: '⁷', 8: '⁸', 9: '⁹'};
if (k === 0) return '1';
if (k === 1) return '10';
return '10' + String(k).split('').map((c) => SUPERSCRIPT[c]).join('');
