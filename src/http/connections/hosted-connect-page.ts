import type { HostedMerchant } from '../../../events/hosted-connect.ts';
import { HOSTED_INPUT_TEXT_MAX_CHARS } from '../../limits.ts';
import { SPECIAL_KEYS } from '../../usecases/hosted-viewer.ts';
import { servicePage } from '../../dashboard/look.tsx';
import { escapeHtml } from '../kernel/html.ts';

// The live view's HTML (hosted-browser connect, spec 4.16): the page a person
// opens (the merchant's page as a screencast; clicks and keys forwarded), and
// the page a browser gets for a view that has ended or is not theirs. Both in
// the dashboard's look (src/dashboard/look.tsx); the view's one script runs
// by its nonce.

export const MERCHANT_NAMES: Record<HostedMerchant, string> = { 'merchant-a': 'Merchant A', 'merchant-b': 'Merchant B' };

export const endedPage = () =>
  servicePage({
    title: 'This live view has ended',
    bodyHtml: '<p>The browser session is closed, the link is not valid, or it is already open in another browser. Return to the application and start again.</p>',
  });

export function viewerPage(merchant: HostedMerchant, nonce: string): string {
  const name = escapeHtml(MERCHANT_NAMES[merchant]);
  const keys = JSON.stringify(Object.keys(SPECIAL_KEYS));
  const body = `<p>This is ${name}'s page, running in a browser on our server. Click into it and type to log in yourself: the agent never sees what you type. When you are logged in, return to the application.</p>
<p id="bar" class="live-bar"><span id="state" class="badge badge-neutral" role="status">Connecting…</span> <span id="remote-title"></span> <span id="remote-url" class="mono"></span></p>
<img id="screen" class="live-screen" tabindex="0" alt="${name}'s page">
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
    $('state').className = 'badge badge-ok';
  });
  const ended = () => { $('state').textContent = 'This session has ended.'; $('state').className = 'badge badge-danger'; };
  es.addEventListener('ended', () => { ended(); es.close(); });
  es.onerror = () => { if (es.readyState === EventSource.CLOSED) ended(); };
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
</script>`;
  return servicePage({ title: `Log in to ${MERCHANT_NAMES[merchant]}`, bodyHtml: body });
}
