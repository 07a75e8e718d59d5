const test = require('node:test');
const assert = require('node:assert');
const {run} = require('./load.js');

test('a log axis labels its ticks as plain text: powers of ten as 10ⁿ, others as numbers', () => {
  const shown = [1e-5, 1e-3, 0.01, 0.1, 1, 10, 100, 1e12, 2, 50, 0.05, 0.002, 0.4, 0.6, 1.2, 1.4,
                 200]
    .map((tick) => run('log-ticks', {tick}));
  assert.deepEqual(shown, ['10⁻⁵', '10⁻³', '10⁻²', '10⁻¹', '1', '10', '10²', '10¹²', '2', '50',
                           '0.05', '0.002', '0.4', '0.6', '1.2', '1.4', '200']);
  // ticks a tenth of a power apart never print alike (1, 1.2 and 1.4 were "1" three times)
  const close = [1, 1.2, 1.4, 1.6, 0.8].map((tick) => run('log-ticks', {tick}));
  assert.equal(new Set(close).size, close.length);
});
