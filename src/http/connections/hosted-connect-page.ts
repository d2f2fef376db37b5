import type { HostedMerchant } from '../../../events/hosted-connect.ts';
import { HOSTED_INPUT_TEXT_MAX_CHARS } from '../../limits.ts';
import { SPECIAL_KEYS } from '../../usecases/hosted-viewer.ts';
import { escapeHtml } from '../kernel/html.ts';

// The live view's HTML (hosted-browser connect, spec 4.16): the page a person
// opens (the merchant's page as a screencast; clicks and keys forwarded), and
// the page a browser gets for a view that has ended or is not theirs.

export const MERCHANT_NAMES: Record<HostedMerchant, string> = { 'merchant-a': 'Merchant A', 'merchant-b': 'Merchant B' };

export const endedPage = () =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>This live view has ended</title></head><body><h1>This live view has ended</h1><p>The browser session is closed, the link is not valid, or it is already open in another browser. Return to the application and start again.</p></body></html>`;

export function viewerPage(merchant: HostedMerchant, nonce: string): string {
  const name = escapeHtml(MERCHANT_NAMES[merchant]);
  const keys = JSON.stringify(Object.keys(SPECIAL_KEYS));
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Log in to ${name}</title>
<style>body{font-family:system-ui,sans-serif;margin:1rem;color:#1a1a1a}#screen{display:block;max-width:100%;border:1px solid #888;cursor:pointer;outline:none}#screen:focus{border-color:#06c}#bar{margin:.5rem 0;font-size:.9rem;color:#444}</style></head><body>
<h1>Log in to ${name}</h1>
<p>This is ${name}'s page, running in a browser on our server. Click into it and type to log in yourself: the agent never sees what you type. When you are logged in, return to the application.</p>
<p id="bar"><span id="state">Connecting…</span> · <span id="remote-title"></span> · <span id="remote-url"></span></p>
<img id="screen" tabindex="0" alt="${name}'s page">
<script nonce="${nonce}">
(() => {
  const $ = (id) => document.getElementById(id);
  const img = $('screen');
  const base = location.pathname.replace(/\\/+$/, '');
  const keys = ${keys};
  const es = new EventSource(base + '/frames');
  es.addEventListener('frame', (e) => {
    const f = JSON.parse(e.data);
    img.src = f.image;
    img.dataset.seq = String(f.seq);
    img.dataset.width = String(f.width);
    img.dataset.height = String(f.height);
    $('remote-title').textContent = f.title;
    $('remote-url').textContent = f.url;
    $('state').textContent = 'Live';
  });
  es.addEventListener('ended', () => { $('state').textContent = 'This session has ended.'; es.close(); });
  es.onerror = () => { if (es.readyState === EventSource.CLOSED) $('state').textContent = 'This session has ended.'; };
  let chain = Promise.resolve();
  const send = (msg) => {
    chain = chain.then(() => fetch(base + '/input', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(msg) })).catch(() => {});
    img.dataset.sent = String(Number(img.dataset.sent || 0) + 1);
    chain.then(() => { img.dataset.done = String(Number(img.dataset.done || 0) + 1); });
  };
  const at = (ev) => { const r = img.getBoundingClientRect(); return { x: Math.min(1, Math.max(0, (ev.clientX - r.left) / r.width)), y: Math.min(1, Math.max(0, (ev.clientY - r.top) / r.height)) }; };
  img.addEventListener('click', (ev) => { img.focus(); send({ type: 'click', ...at(ev) }); });
  img.addEventListener('wheel', (ev) => { ev.preventDefault(); send({ type: 'scroll', ...at(ev), dy: Math.max(-5000, Math.min(5000, ev.deltaY)) }); }, { passive: false });
  document.addEventListener('keydown', (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key.length === 1) { ev.preventDefault(); send({ type: 'text', text: ev.key }); }
    else if (keys.includes(ev.key)) { ev.preventDefault(); send({ type: 'key', key: ev.key }); }
  });
  document.addEventListener('paste', (ev) => { const t = ev.clipboardData && ev.clipboardData.getData('text'); if (t) { ev.preventDefault(); send({ type: 'text', text: t.slice(0, ${HOSTED_INPUT_TEXT_MAX_CHARS}) }); } });
})();
</script></body></html>`;
}
