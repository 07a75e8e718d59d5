// Present mode (URL key present=1): one step of the argument per screen, each tab in turn
// (`keys`, the tabs' keys in order; `steps`, per key: its main `charts`, the `controls` its
// step shows and the `extra` models it keeps, by name). On the open tab only these stay shown,
// with the tabs' titles as the steps' bar, the step's question (the column `<key>-ask`, when
// the tab has one; layout.PRESENT_LAYOUT_CSS puts it above the lead), and the buttons of
// `actions` (leave, print the handout); the charts grow to fill the screen without
// scrolling. Everything else is hidden by its `visible`, and exactly what was hidden is shown
// again on leaving, with the charts' heights.
// Keys: the arrows, Page Up/Down (a clicker's keys), Space, Home and End move between steps
// (the arrows, Home and End move a slider, a group of buttons or a tab that has the keyboard,
// as they do outside present mode), R shows the answer, Escape leaves. The handout: every
// step's panel, one printed page each, with its lead, charts, question and answer (and the
// training step's run).
// `action`: "ready" (the page is shown: opens it when the address says present=1), "enter",
// "leave", "step" (the open tab or the tabs' panels changed), "print".
/* global AS, tabs, keys, steps, root, body, actions, action */
const ON = ['1', 'true', 'yes', 'on'];
const MARGIN = 12;          // px left under the page in present mode
const MIN_CHART = 200;      // px: the least height a chart is given
const PRINT_HEIGHT = {1: 440, 2: 300};    // px: a printed chart's height, by the step's charts
const state = AS.noted(tabs, 'present') ?? AS.note(tabs, 'present', {
  on: false, handout: false, hidden: new Set(), heights: new Map(), answers: new Map(),
  shown: new Set(), theme: null, timers: [], refit: null, legends: new Map(), progress: null});

const byName = (name) => {
  try {
    return tabs.document?.get_model_by_name(name) ?? null;
  } catch {
    return null;       // more than one: none of them is this program's
  }
};
const classes = (model, name, on) => {
  const rest = model.css_classes.filter((c) => c !== name);
  const next = on ? [...rest, name] : rest;
  if (next.length !== model.css_classes.length) model.css_classes = next;
};
// the models under `model` that its layout shows: a Tabs' open panel (every panel with `all`)
const kids = (model, all) => {
  if (model.type === 'Tabs') {
    return (all ? model.tabs : [model.tabs[model.active]]).filter((p) => p != null).map((p) => p.child);
  }
  if (Array.isArray(model.children)) return model.children.filter((c) => c != null && c.type !== undefined);
  return model.child != null ? [model.child] : [];
};
// the models a step keeps (each with all it holds): printed, its lead, charts and question
const keptFor = (key, print) => {
  const step = steps[key];
  const names = [`${key}-ask`, `${key}-lead`, ...step.charts];
  if (print) names.push(`${key}-answer`);
  else {
    for (const name of step.controls) names.push(`${name}-control`, name, `${name}-idle`);
    names.push(...step.extra);
  }
  const found = names.map(byName).filter((m) => m != null);
  if (!print) found.push(actions);
  return [...found, ...headings()];
};
// the page's heading (its title bar, or the screen readers' title without it): kept, for
// screen readers only
const headings = () => [...tabs.document.all_models].filter(
  (m) => m.type === 'Div' && (m.text ?? '').includes('<h1'));
const title = (on) => { for (const m of headings()) classes(m, 'present-sr', on); };
// Of `model`'s descendants, those that hold no kept model, beside one that does, into `hide`
// (those shown, or hidden here before: not those something else hides); true when `model`
// holds a kept model.
const walk = (model, keep, hide, all) => {
  if (keep.has(model)) return true;
  const children = kids(model, all);
  const holding = children.map((child) => walk(child, keep, hide, all));
  if (!holding.includes(true)) return false;
  children.forEach((child, i) => {
    if (!holding[i] && (child.visible || state.hidden.has(child))) hide.add(child);
  });
  return true;
};
// hide the models of `hide`, show again those hidden before and not now
const apply = (hide) => {
  for (const model of state.hidden) if (!hide.has(model)) model.visible = true;
  const next = new Set();
  for (const model of hide) {
    if (state.hidden.has(model) || model.visible) {
      model.visible = false;
      next.add(model);
    }
  }
  state.hidden = next;
};
const setHeight = (fig, height) => {
  if (!state.heights.has(fig)) state.heights.set(fig, fig.height);
  if (fig.height !== height) fig.height = height;
};
const restoreHeights = () => {
  for (const [fig, height] of state.heights) if (fig.height !== height) fig.height = height;
  state.heights.clear();
  for (const [legend, size] of state.legends) legend.label_text_font_size = size;
  state.legends.clear();
};
// a chart's legends in type as large as its axes' (the page's CSS variables reach the axes)
const legends = (fig, size) => {
  for (const legend of [...fig.below, ...fig.above, ...fig.center, ...fig.right, ...fig.left]) {
    if (legend.type !== 'Legend') continue;
    if (!state.legends.has(legend)) state.legends.set(legend, legend.label_text_font_size);
    if (legend.label_text_font_size !== size) legend.label_text_font_size = size;
  }
};
const address = (on) => AS.writeAddress(on ? 'present=1' : '', on ? [] : ['present']);

// The open step's charts as tall as the screen leaves them: the room under the page shared
// among their rows (charts side by side share one).
const fit = () => {
  if (!state.on || state.handout) return;
  const el = AS.view(root)?.el;
  const figs = steps[keys[tabs.active]].charts.map(byName).filter((f) => f != null && AS.view(f) != null);
  if (el == null || figs.length === 0) return;
  const size = `${Math.round(Math.min(19, Math.max(14, window.innerWidth * 0.0095)))}px`;
  for (const fig of figs) legends(fig, size);
  const free = window.innerHeight - MARGIN - el.getBoundingClientRect().bottom - window.scrollY;
  if (Math.abs(free) < 4) return;
  const rows = new Map();
  for (const fig of figs) {
    const top = Math.round(AS.view(fig).el.getBoundingClientRect().top / 20);
    rows.set(top, [...(rows.get(top) ?? []), fig]);
  }
  for (const row of rows.values()) {
    const now = Math.max(...row.map((f) => AS.view(f).el.getBoundingClientRect().height));
    const height = Math.max(MIN_CHART, Math.floor(now + free / rows.size));
    for (const fig of row) setHeight(fig, height);
  }
};
// fit once BokehJS has laid the step out, and again whenever the page's height changes (its
// texts and charts arrive, a lead gains a line)
const settle = () => {
  for (const timer of state.timers) clearTimeout(timer);
  state.timers = [60, 250, 700, 1500, 3000].map((ms) => setTimeout(fit, ms));
  const el = AS.view(root)?.el;
  if (el == null || AS.noted(el, 'present-watch')) return;
  const watch = AS.note(el, 'present-watch', new ResizeObserver(() => {
    if (!state.on || state.handout) return;
    clearTimeout(state.refit);
    state.refit = setTimeout(fit, 120);
  }));
  watch.observe(el);
};
const update = () => {
  const key = keys[tabs.active];
  const keep = new Set(keptFor(key, false));
  const hide = new Set();
  walk(root, keep, hide, false);
  apply(hide);
  settle();
};

const enter = () => {
  state.on = true;
  classes(body, 'present', true);
  title(true);
  actions.visible = true;
  update();
  address(true);
  window.scrollTo(0, 0);
};
const leave = () => {
  state.on = false;
  for (const timer of state.timers) clearTimeout(timer);
  apply(new Set());
  restoreHeights();
  classes(body, 'present', false);
  title(false);
  actions.visible = false;
  address(false);
  AS.root(byName('present'))?.querySelector('button')?.focus();
};
const go = (to) => {
  const at = Math.max(0, Math.min(keys.length - 1, to));
  if (at !== tabs.active) tabs.active = at;
};
const click = (name) => AS.root(byName(name))?.querySelector('button')?.click();

// The handout: every step gathered (its panel built: the served page builds the argument's
// when one is shown, the offline copy puts them in; its lead and question; the training
// step's run), with progress said on the page meanwhile; every answer asked for at once
// (reveal.js); then every step shown one under the other, light, each chart as wide as the
// page, laid out once, and printed; the page as it was once printed.
const RUN_MS = 2500;        // ms after the click: the longest the handout waits for a run to end
const GATHER_MS = 240000;   // ms after the click: the longest it waits for the steps and answers
                            // (a machine busy with other work took minutes where one second does)
const POLL_MS = 100;        // ms between two looks at what has arrived
const ASK_MS = 250;         // ms between two requests for the answers
const wait = (ms) => new Promise((done) => { setTimeout(done, ms); });
const built = () => tabs.tabs.every((p) => p.child.type !== 'Div');
const repaint = () => {
  for (const model of tabs.document.all_models) {
    if (model.type === 'Plot' || model.type === 'Figure') AS.repaint(model);
  }
};
// what the handout says while it gathers: an element of its own, outside BokehJS's layout (a
// change of it lays nothing out again); null: gone
const say = (text) => {
  let el = state.progress;
  if (text === null) {
    el?.remove();
    state.progress = null;
    return;
  }
  if (el == null) {
    el = state.progress = document.createElement('div');
    el.className = 'handout-progress';
    el.setAttribute('role', 'status');
    Object.assign(el.style, {position: 'fixed', top: '8px', left: '50%', transform: 'translateX(-50%)',
      zIndex: '1000', padding: '6px 14px', borderRadius: '6px', background: '#1f2937',
      color: '#ffffff', font: '600 15px/1.4 system-ui, sans-serif'});
    document.body.append(el);
  }
  if (el.textContent !== text) el.textContent = text;
};
// a model by name, found once (a document's search looks at every model)
const named = (name) => {
  const models = AS.noted(tabs, 'present-named') ?? AS.note(tabs, 'present-named', new Map());
  if (!models.has(name)) {
    const model = byName(name);
    if (model == null) return null;
    models.set(name, model);
  }
  return models.get(name);
};
// the training step's run: Train pressed where none is shown (the offline copy then shows its
// run at once or says it holds none; served, the runs go on while the rest is gathered)
const train = () => {
  const button = named('train'), source = named('training-source');
  if (button == null || source == null || AS.col(source, 'step').length > 0) return null;
  click('train');
  return performance.now();
};
// a step's question asked: its panel built, its lead and question written
const asked = (key) => {
  const panel = tabs.tabs[keys.indexOf(key)];
  if (panel == null || panel.child.type === 'Div') return false;
  return ![`${key}-lead`, `${key}-ask-text`].some((name) => named(name)?.text === '');
};
// the training step's run ended (or shown, once RUN_MS have passed since the click; none to
// wait for where Train was not pressed or said there is none)
const ran = (start, pressed) => {
  if (pressed === null) return true;
  const button = named('train'), source = named('training-source');
  const steps = source == null ? 0 : AS.col(source, 'step').length;
  const now = performance.now();
  if (button == null || (!button.disabled && (steps > 0 || now - pressed > 1500))) return true;
  return steps > 0 && now - start > RUN_MS;
};
// a step's answer written (none to write where the step has no question)
const answered = (key) => {
  const a = named(`${key}-answer`);
  return a == null || a.text !== '';
};
// every answer asked for until each is written, or GATHER_MS have passed since the click
const askAll = async (start, ready) => {
  let requested = -Infinity;
  while (!ready() && performance.now() - start < GATHER_MS) {
    if (keys.every(asked) && performance.now() - requested > ASK_MS) {
      requested = performance.now();
      click('present-answers');
    }
    await wait(POLL_MS);
  }
};
// every step gathered: asked, the training's run, and its answer without a guess (reveal.js,
// on a click of present-answers: at once where the page holds the answers, after one message
// from the server on the served page; asked again where a new question put one away)
const gather = async (start) => {
  let pressed = null;
  const shown = (key) => asked(key) && (key !== 'training' || ran(start, pressed));
  const progress = () => {
    const count = keys.filter(shown).length;
    say(count < keys.length ? `Gathering step ${count + 1} of ${keys.length}…`
      : 'Gathering the answers…');
    return count === keys.length && keys.every(answered);
  };
  progress();
  const open = tabs.active;
  if (!built()) {
    if (open === 0) tabs.active = 1;
    while (!built() && performance.now() - start < GATHER_MS) { await wait(POLL_MS); progress(); }
    if (tabs.active !== open) tabs.active = open;
  }
  for (const key of keys) {
    const a = named(`${key}-answer`);
    if (a != null) {
      state.answers.set(a, [a.text, null]);
      a.text = '';                  // written again without a guess (on paper nobody guessed)
    }
  }
  pressed = train();
  await askAll(start, progress);
};
const finish = () => {
  state.handout = false;
  classes(tabs, 'handout', false);
  classes(body, 'handout', false);
  for (const model of state.shown) model.visible = false;
  state.shown.clear();
  restoreHeights();
  // each answer as it was, unless a new question has put it away meanwhile
  for (const [answer, [before, printed]] of state.answers) {
    if (answer.text === printed) answer.text = before;
  }
  state.answers.clear();
  if (state.theme !== null) {
    if (state.theme === 'auto') delete document.documentElement.dataset.theme;
    else document.documentElement.dataset.theme = state.theme;
    state.theme = null;
    repaint();
  }
  if (state.on) update(); else {
    apply(new Set());
    title(false);
  }
};
const handout = async () => {
  if (state.handout) return;
  state.handout = true;
  const start = performance.now();
  await gather(start);
  say('Laying out the handout…');
  const theme = document.documentElement.dataset.theme;
  if (theme === 'dark' || (theme === undefined && window.matchMedia('(prefers-color-scheme: dark)').matches)) {
    state.theme = theme ?? 'auto';
    document.documentElement.dataset.theme = 'light';
    repaint();
  }
  title(true);
  classes(tabs, 'handout', true);
  classes(body, 'handout', true);
  const keep = new Set(keys.flatMap((key) => keptFor(key, true)));
  const hide = new Set();
  walk(root, keep, hide, true);
  // on paper a question has its answer, without the guess and Reveal
  for (const key of keys) {
    for (const name of [`${key}-guess`, `${key}-reveal`]) {
      const model = byName(name);
      if (model != null && model.visible) hide.add(model);
    }
  }
  apply(hide);
  for (const key of keys) {
    const answer = byName(`${key}-answer`);
    if (answer != null && !answer.visible) {
      answer.visible = true;
      state.shown.add(answer);
    }
    const figs = steps[key].charts.map(byName).filter((f) => f != null);
    for (const fig of figs) setHeight(fig, PRINT_HEIGHT[Math.min(figs.length, 2)]);
  }
  // the charts painted at their printed sizes
  await new Promise((done) => { requestAnimationFrame(() => requestAnimationFrame(done)); });
  await wait(200);
  // a question put away meanwhile (the training's runs ended since): its new answer
  await askAll(start, () => keys.every(answered));
  for (const [answer, texts] of state.answers) texts[1] = answer.text;      // as printed
  say(null);
  window.addEventListener('afterprint', finish, {once: true});
  window.print();
};

// the keys, once per page
if (!AS.noted(tabs, 'present-keys')) {
  AS.note(tabs, 'present-keys', true);
  const CONTROL = 'input, textarea, select, [contenteditable], [role=slider], .noUi-handle, '
    + '.bk-btn-group, [role=radiogroup], [role=tab], [role=tablist]';
  const FOCUSABLE = `${CONTROL}, button, a[href]`;
  window.addEventListener('keydown', (event) => {
    if (!state.on || state.handout || event.altKey || event.ctrlKey || event.metaKey) return;
    const path = event.composedPath().filter((el) => el instanceof Element);
    const inControl = path.some((el) => el.matches(CONTROL));
    const focused = path.some((el) => el.matches(FOCUSABLE));
    const i = tabs.active;
    const to = {PageDown: i + 1, PageUp: i - 1,
                ...(inControl ? {} : {ArrowRight: i + 1, ArrowDown: i + 1, ArrowLeft: i - 1,
                                      ArrowUp: i - 1, Home: 0, End: keys.length - 1}),
                ...(focused ? {} : {' ': i + 1})}[event.key];
    if (event.key === 'Escape') leave();
    else if ((event.key === 'r' || event.key === 'R') && !inControl) click(`${keys[i]}-reveal`);
    else if (to !== undefined) go(to);
    else return;
    event.preventDefault();
    event.stopPropagation();
  }, true);
  window.addEventListener('resize', () => { if (state.on) settle(); });
}

if (action === 'ready') {
  if (ON.includes((new URLSearchParams(window.location.search).get('present') ?? '').toLowerCase())) enter();
} else if (action === 'enter') {
  if (!state.on) enter();
} else if (action === 'leave') {
  if (state.on) leave();
} else if (action === 'step') {
  if (state.on && !state.handout) update();
} else if (action === 'print') {
  handout();
}
