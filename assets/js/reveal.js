// Reveal a step's answer (layout.View._ask; `asks`: each step's models and kind of guess, by
// tab key): the guess (a percentage on the slider, or the chosen button) beside the true
// value and why; the answer alone for the handout (assets/js/present.js clicks `answers`, a
// hidden button, for every step's answer at once: on paper nobody guessed).
// Offline, a step's answer waits in its Reveal button's tags from the start, and is shown at
// the click. Served, the server sends it only when asked (layout.View.reveal: the step's
// answer into its Reveal's tags; View.reveal_all: every step's, by key, into the tags of
// `answers` as [the request's number, [[key, answer], ...]]), and this program, run again by that change of the
// tags, shows it with the guess as it was at the click, if the question is still the one
// asked (a new question empties its Reveal's tags).
/* global AS, asks, answers, cb_obj */
const ASKED = 'reveal-asked';     // per Reveal button: [the guess's sentence, the question]
const guessed = (parts) => {
  const g = parts.guess;
  if (!g.visible) return '';
  const chosen = parts.kind === 'percent' ? `${g.value}%`
    : (g.active === null || g.active === undefined ? 'none' : g.labels[g.active]);
  return `Your guess: <b>${AS.escape(chosen)}</b>. `;
};
const show = (parts, guess, answer) => {
  const text = `<div class='answer' role='status'><p>${guess}Answer: ${answer}</p></div>`;
  if (parts.answer.text !== text) parts.answer.text = text;
};
const all = answers != null && (cb_obj === answers || cb_obj.origin === answers);
if (cb_obj.event_name === 'button_click') {
  for (const parts of Object.values(asks)) {
    if (!all && parts.reveal !== cb_obj.origin) continue;
    const guess = all ? '' : guessed(parts);
    if (parts.reveal.tags.length > 0) show(parts, guess, parts.reveal.tags[0]);
    else AS.note(parts.reveal, ASKED, [guess, parts.text.text]);
  }
} else {
  // the server's answer: one step's (its Reveal's tags) or, for `answers`, every step's
  const sent = new Map(all ? cb_obj.tags[1] ?? [] : []);
  for (const [key, parts] of Object.entries(asks)) {
    if (!all && parts.reveal !== cb_obj) continue;
    const answer = all ? sent.get(key) : parts.reveal.tags[0];
    const asked = AS.noted(parts.reveal, ASKED);
    if (asked == null || answer == null) continue;
    AS.note(parts.reveal, ASKED, null);
    if (asked[1] === parts.text.text) show(parts, asked[0], answer);
  }
}
