// When the websocket to the server closes: say so at the top of the page, poll the server's
// /liveness, and reload the page as soon as it answers (every control is in the address).
// Text only (textContent), no markup from anywhere. Once a page.
/* global AS */
if (AS.noted(window, 'connection lost')) { return; }
AS.note(window, 'connection lost', true);
const bar = document.createElement('div');
bar.className = 'as-connection-lost';
bar.setAttribute('role', 'alert');
bar.style.cssText = 'position:fixed;top:0;left:0;right:0;z-index:10000;display:flex;gap:12px;' +
  'align-items:center;justify-content:center;padding:10px 16px;background:#fff8e1;' +
  'border-bottom:2px solid #f0c36d;color:#5f4b00;font:15px/1.4 "Segoe UI",Arial,sans-serif;' +
  'box-shadow:0 2px 6px rgba(0,0,0,0.15)';
const text = document.createElement('span');
const button = document.createElement('button');
button.textContent = 'Reload now';
button.style.cssText = 'font:inherit;padding:3px 12px;border:1px solid #b7950b;border-radius:4px;' +
  'background:#ffffff;color:#5f4b00;cursor:pointer';
button.addEventListener('click', () => window.location.reload());
bar.append(text, button);
const veil = document.createElement('div');   // the dead controls cannot be used meanwhile
veil.className = 'as-connection-veil';
veil.style.cssText = 'position:fixed;inset:0;z-index:9999;background:rgba(255,255,255,0.5)';
document.body.append(veil, bar);
const say = (message) => { text.textContent = 'Lost the connection to the server: the charts ' +
  'have stopped updating. ' + message; };
const liveness = new URL('liveness', window.location.origin + window.location.pathname);
let tries = 0;
const retry = () => {
  const wait = Math.min(10, 2 + tries);
  say(`Trying again in ${wait} s; your settings are kept in the address.`);
  setTimeout(attempt, wait * 1000);
};
const attempt = () => {
  tries += 1;
  say('Reconnecting…');
  fetch(liveness, {cache: 'no-store'}).then((response) => {
    if (response.ok) {
      text.textContent = 'The server is back: reloading this view…';
      window.location.reload();
    } else {
      retry();
    }
  }).catch(retry);
};
say('Reconnecting…');
setTimeout(attempt, 1000);
