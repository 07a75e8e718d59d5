// Tick labels of a log axis (a CustomJSTickFormatter), as plain text: a whole power of ten
// written 10⁻³, 1 or 10; another tick (2 or 5 times a power, where the axis spans little) as
// its number to one digit: 0.02, 5, 200.
/* global tick */
const k = Math.round(Math.log10(tick));
if (Math.abs(Math.log10(tick) - k) > 1e-9) return tick >= 1 ? String(Math.round(tick)) : tick.toPrecision(1);
const SUPERSCRIPT = {'-': '⁻', 0: '⁰', 1: '¹', 2: '²', 3: '³', 4: '⁴', 5: '⁵', 6: '⁶', 7: '⁷', 8: '⁸', 9: '⁹'};
if (k === 0) return '1';
if (k === 1) return '10';
return '10' + String(k).split('').map((c) => SUPERSCRIPT[c]).join('');
