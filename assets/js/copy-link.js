// The page's own address (kept equal to the controls) to the clipboard, with a fallback for
// pages served over plain http to other machines; `button` says how it went. Where nothing
// can be copied (an iframe without allow="clipboard-write", which has no address bar of its
// own), the link is shown in a box, selected, to copy by hand.
/* global button */
const url = window.location.href;
const done = (ok) => {
  if (!ok) window.prompt('Copy this link to the view:', url);
  button.label = ok ? 'Link copied' : 'Not copied: link shown';
  setTimeout(() => { button.label = 'Copy link to this view'; }, 1800);
};
if (navigator.clipboard && window.isSecureContext) {
  navigator.clipboard.writeText(url).then(() => done(true), () => done(false));
} else {
  const ta = document.createElement('textarea'); ta.value = url; document.body.appendChild(ta);
  ta.select(); let ok = false; try { ok = document.execCommand('copy'); } catch { /* not copied */ }
  ta.remove(); done(ok);
}
