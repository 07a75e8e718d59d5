// Reveal a step's answer (layout.View._ask; `asks`: each step's models and kind of guess, by
// tab key): the guess (a percentage on the slider, or the chosen button) beside the true
// value and why, which wait in its Reveal button's tags until now; the answer alone where the
// guess is hidden (the printed handout, assets/js/present.js).
/* global AS, asks, cb_obj */
const parts = Object.values(asks).find((p) => p.reveal === cb_obj.origin);
if (parts) {
  const g = parts.guess;
  const chosen = parts.kind === 'percent' ? `${g.value}%`
    : (g.active === null || g.active === undefined ? 'none' : g.labels[g.active]);
  const guessed = g.visible ? `Your guess: <b>${AS.escape(chosen)}</b>. ` : '';
  parts.answer.text = `<div class='answer' role='status'><p>${guessed}`
    + `Answer: ${parts.reveal.tags[0] ?? ''}</p></div>`;
}
