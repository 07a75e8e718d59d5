const test = require('node:test');
const assert = require('node:assert');
const {run} = require('./load.js');

test('a weight in the hover never rounds to 0 or 1', () => {
  const shown = [1.0, 0.99996, 0.99994, 0.5, 0.27, 3e-5, 1e-300, 0.0]
    .map((value) => run('hover-weight', {value}));
  assert.deepEqual(shown, ['>0.9999', '>0.9999', '0.9999', '0.5000', '0.2700', '3.00e-5',
                           '1.00e-300', '<1e-308']);
});

test('a positive quantity in the hover keeps four significant digits and never reads 0', () => {
  const shown = [0.25, 0.1234567, 2.7e-189, 0.0].map((value) => run('hover-positive', {value}));
  assert.deepEqual(shown, ['0.2500', '0.1235', '2.700e-189', '<1e-308']);
});

test('the sweep labels every width where the slanted labels have room, else the powers of four', () => {
  const ticks = ['1', '2', '4', '8', '16'];
  const label = (innerWidth, tick) => run('sweep-ticks', {
    fig: {inner_width: innerWidth}, angle: Math.PI / 4, every: ['1', '4', '16'], tick, ticks});
  // 14 px of text over sin(45°) needs 19.8 px a label
  assert.deepEqual(ticks.map((t) => label(100, t)), ticks);            // 20 px each
  assert.deepEqual(ticks.map((t) => label(95, t)), ['1', '', '4', '', '16']);
  // not laid out yet: the figure throws; every label
  const unlaid = {get inner_width() { throw new Error('no layout'); }};
  assert.equal(run('sweep-ticks', {fig: unlaid, angle: 0.7, every: [], tick: '2', ticks}), '2');
});

test('a bar chart\'s max-weight label sits on its bar, or at the cap on a taller bar', () => {
  const heights = run('label-height', {xs: new Float64Array([0.1, 0.8, 0.97, 1.0]), cap: 0.8});
  assert.deepEqual(heights, [0.1, 0.8, 0.8, 0.8]);
});
