// eslint (flat config) for the browser programs in assets/js and their tests in tests/js.
// Each file of assets/js is the body of a Bokeh CustomJS, CustomJSHover or
// CustomJSTickFormatter (a function body: `return` at its top level) or a page's script; it
// names what it takes from outside (its args, Bokeh's cb_obj, value, tick, and AS from
// helpers.js) in its own `/* global */` line, and nothing else but the browser's globals.
// Bokeh is a global of helpers.js (the adapter AS) and first-view.js only.
const js = require('@eslint/js');
const globals = require('globals');

module.exports = [
  js.configs.recommended,
  {
    files: ['assets/js/**/*.js'],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: 'script',
      parserOptions: {ecmaFeatures: {globalReturn: true}},
      globals: {...globals.browser},
    },
  },
  {
    // scripts of their own, not function bodies: helpers.js (the start of the library of
    // programs, style.library_code) and the first view's page script
    files: ['assets/js/helpers.js', 'assets/js/first-view.js'],
    languageOptions: {
      parserOptions: {ecmaFeatures: {globalReturn: false}},
      globals: {...globals.browser, Bokeh: 'readonly'},
    },
  },
  {
    files: ['tests/js/**/*.js', 'eslint.config.js'],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: 'commonjs',
      globals: {...globals.node},
    },
  },
];
