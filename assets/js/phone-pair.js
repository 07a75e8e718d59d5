// The reference pair on a phone: below 600 px the scaled and the unscaled bars (`figures`,
// stacked there) are drawn lower, so that both fit on one screen under the controls and 27%
// can be compared with 80% without scrolling; wider, they have their own height. Run when the
// page is shown and again when the window is resized, except in present mode (present.js
// sizes the charts there, `tabs`' noted state).
/* global AS, figures, tabs */
const PHONE = 600;          // px: narrower than this, the bars stand one above the other
const LOW = 200;            // px: each chart's height there
const fit = () => {
  if (AS.noted(tabs, 'present')?.on) return;
  for (const fig of figures) {
    const own = AS.noted(fig, 'own-height') ?? AS.note(fig, 'own-height', fig.height);
    const height = window.innerWidth < PHONE ? LOW : own;
    if (fig.height !== height) fig.height = height;
  }
};
fit();
// one listener per page, fitting the newest document's pair (a ready-made first view runs
// this first; the live page's figures replace its own)
if (AS.noted(document, 'phone-pair') == null) {
  AS.note(document, 'phone-pair', true);
  window.addEventListener('resize', () => AS.noted(document, 'phone-pair-fit')());
}
AS.note(document, 'phone-pair-fit', fit);
