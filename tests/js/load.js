// Runs a browser program of assets/js in node, as the page runs it: its code (after
// helpers.js where its `/* global */` line names AS, as in style.library_code()) as the body
// of a strict function whose parameters are its args. The browser's globals it uses are
// stubs given by name (window, document, Bokeh, setTimeout, ...), which shadow node's; the
// rest (Map, URL, Blob, Promise) are node's own, of the same realm as the tests.
const fs = require('node:fs');
const path = require('node:path');
const vm = require('node:vm');

const JS = path.join(__dirname, '..', '..', 'assets', 'js');

// The names a program's `/* global a, b */` line declares.
const declared = (code) => {
  const found = /^\/\* global ([^*]*)\*\//m.exec(code);
  return found ? found[1].split(',').map((n) => n.trim()).filter(Boolean) : [];
};

// A program's code with what it sees of AS before it.
const script = (name) => {
  const code = fs.readFileSync(path.join(JS, name + '.js'), 'utf8');
  if (!declared(code).includes('AS')) return code;
  return fs.readFileSync(path.join(JS, 'helpers.js'), 'utf8') + '\n' + code;
};

// The program `name` as a function of its args, compiled with the stubs `globals` in scope.
// Every name it declares but AS must be given in `args`, and nothing else.
const program = (name, args, globals = {}) => {
  const code = script(name);
  const names = Object.keys(args);
  const wanted = declared(fs.readFileSync(path.join(JS, name + '.js'), 'utf8'))
    .filter((n) => n !== 'AS');
  if (JSON.stringify([...names].sort()) !== JSON.stringify([...wanted].sort())) {
    throw new Error(`${name}.js declares ${wanted}, given ${names}`);
  }
  const stubs = Object.keys(globals);
  const outer = vm.runInThisContext(`(function (${stubs.join(', ')}) {
    return function (${names.join(', ')}) {'use strict';\n${code}\n};\n})`,
  {filename: name + '.js'});
  const fn = outer(...stubs.map((n) => globals[n]));
  return () => fn(...names.map((n) => args[n]));
};

// Run the program once; its return value.
const run = (name, args, globals) => program(name, args, globals)();

// The helpers object AS, as a program sees it.
const helpers = () => vm.runInThisContext(
  `(function () {${fs.readFileSync(path.join(JS, 'helpers.js'), 'utf8')}\nreturn AS;\n})()`);

// A clock for setTimeout/clearTimeout: `flush()` runs what is due, in time order, until
// nothing is left (or `limit` callbacks ran).
const clock = () => {
  let now = 0, next = 1;
  const queue = new Map();
  const setTimeout = (fn, ms = 0) => { const id = next++; queue.set(id, [now + ms, id, fn]); return id; };
  const clearTimeout = (id) => { queue.delete(id); };
  const flush = (limit = 100000) => {
    let ran = 0;
    while (queue.size && ran < limit) {
      const [at, id, fn] = [...queue.values()].sort((a, b) => a[0] - b[0] || a[1] - b[1])[0];
      queue.delete(id);
      now = at;
      fn();
      ran += 1;
    }
    return ran;
  };
  return {setTimeout, clearTimeout, flush, get now() { return now; }};
};

// A ColumnDataSource as BokehJS holds it: its data a Map of columns.
const source = (columns, extra = {}) => ({data: new Map(Object.entries(columns)), ...extra});

module.exports = {declared, script, program, run, helpers, clock, source};
