import type { HostedMerchant } from '../../../events/hosted-connect.ts';
import { HOSTED_INPUT_TEXT_MAX_CHARS } from '../../limits.ts';
import { SPECIAL_KEYS } from '../../usecases/hosted-viewer.ts';
import { servicePage } from '../../dashboard/look.tsx';
import { escapeHtml } from '../kernel/html.ts';

// The live view's HTML (hosted-browser connect, spec 4.16): the page a person
// opens (the merchant's page as a screencast; clicks and keys forwarded), and
// the page a browser gets for a view that has ended or is not theirs. Both in
// the dashboard's look (src/dashboard/look.tsx, its classes live-*); the
// view's one script runs by its nonce.

export const MERCHANT_NAMES: Record<HostedMerchant, string> = { 'merchant-a': 'Merchant A', 'merchant-b': 'Merchant B' };

export const endedPage = () =>
  servicePage({
    title: 'This live view has ended',
    bodyHtml: '<p>The browser session is closed, the link is not valid, or it is already open in another browser. Return to the application and start again.</p>',
  });

export function viewerPage(merchant: HostedMerchant, nonce: string): string {
  const name = escapeHtml(MERCHANT_NAMES[merchant]);
  const keys = JSON.stringify(Object.keys(SPECIAL_KEYS));
  // On a phone: the remote page is laid out at this page's width (one CSS
  // pixel to one, readable), a tap on it focuses a real text field (so the
  // soft keyboard opens) whose typing goes to the remote page, a drag scrolls
  // it; once connected the page says so, with the way back when one was given.
  const body = `<div id="live" class="live-view">
<h1>Log in to ${name}</h1>
<p>This is ${name}'s page, running in a browser on our server. Tap or click into it and type to log in yourself: the agent never sees what you type. When you are logged in, return to the application.</p>
<p id="bar" class="live-bar"><span id="state" class="badge badge-neutral">Connecting…</span> <span id="remote-title"></span> <span id="remote-url" class="mono"></span></p>
<div id="typing" class="live-typing"><label for="type">Type here</label><input id="type" type="text" autocomplete="off" autocorrect="off" autocapitalize="none" spellcheck="false" enterkeyhint="go" aria-describedby="type-help"></div>
<p id="type-help" class="hint" hidden>What you type goes to the field you tapped on ${name}'s page.</p>
<img id="screen" class="live-screen" tabindex="0" alt="${name}'s page">
</div>
<section id="done" class="live-done" hidden role="status"><h1>Connected — you can close this tab</h1><p>Your ${name} login is stored; the application can use it now.</p><p><a id="return" class="btn btn-primary live-return" hidden>Return to the application</a></p></section>
<script nonce="${nonce}">
(() => {
  const $ = (id) => document.getElementById(id);
  const img = $('screen');
  const field = $('type');
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
  es.addEventListener('ended', (e) => {
    es.close();
    let d = {};
    try { d = JSON.parse(e.data); } catch {}
    if (d.connected) {
      $('live').hidden = true;
      $('done').hidden = false;
      if (typeof d.return_url === 'string' && /^https?:/i.test(d.return_url)) { const a = $('return'); a.href = d.return_url; a.hidden = false; }
      document.title = 'Connected';
    }
    ended();
  });
  es.onerror = () => { if (es.readyState === EventSource.CLOSED && $('done').hidden) ended(); };
  let chain = Promise.resolve();
  const send = (msg) => {
    chain = chain.then(() => fetch(base + '/input', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(msg) })).catch(() => {});
    img.dataset.sent = String(Number(img.dataset.sent || 0) + 1);
    chain.then(() => { img.dataset.done = String(Number(img.dataset.done || 0) + 1); });
  };
  // The remote page is laid out at the width this page gives the image, and the window's height.
  // A soft keyboard opening shrinks the window: the height only grows until the width changes (turned), so the page does not reflow under the person's typing.
  let sized = { width: 0, height: 0 };
  const resize = () => {
    const width = Math.round(img.getBoundingClientRect().width) - 2;
    const height = width === sized.width ? Math.max(sized.height, Math.round(window.innerHeight)) : Math.round(window.innerHeight);
    if (width < 240 || (width === sized.width && height === sized.height)) return;
    sized = { width, height };
    send({ type: 'resize', width: Math.min(1920, width), height: Math.max(240, Math.min(2160, height)) });
  };
  let resizeTimer;
  window.addEventListener('resize', () => { clearTimeout(resizeTimer); resizeTimer = setTimeout(resize, 150); });
  resize();
  const at = (p) => { const r = img.getBoundingClientRect(); return { x: Math.min(1, Math.max(0, (p.clientX - r.left) / r.width)), y: Math.min(1, Math.max(0, (p.clientY - r.top) / r.height)) }; };
  // A click or tap goes to the remote page; the text field takes the focus, so a phone opens its keyboard.
  img.addEventListener('click', (ev) => { send({ type: 'click', ...at(ev) }); field.focus({ preventScroll: true }); $('type-help').hidden = false; });
  img.addEventListener('wheel', (ev) => { ev.preventDefault(); send({ type: 'scroll', ...at(ev), dy: Math.max(-5000, Math.min(5000, ev.deltaY)) }); }, { passive: false });
  // A drag on the image scrolls the remote page (a tap stays a click).
  let drag;
  img.addEventListener('touchstart', (ev) => { const p = ev.touches[0]; drag = p && ev.touches.length === 1 ? { y: p.clientY, moved: false, p } : undefined; }, { passive: true });
  img.addEventListener('touchmove', (ev) => {
    const p = ev.touches[0];
    if (!drag || !p) return;
    const dy = drag.y - p.clientY;
    if (!drag.moved && Math.abs(dy) < 10) return;
    ev.preventDefault();
    drag.moved = true;
    drag.y = p.clientY;
    send({ type: 'scroll', ...at(p), dy: Math.max(-5000, Math.min(5000, dy * 2)) });
  }, { passive: false });
  // The text field stays one space long: what is typed after it is sent as text, deleting it is a Backspace.
  const SENTINEL = ' ';
  const reset = () => { field.value = SENTINEL; field.setSelectionRange(1, 1); };
  field.addEventListener('focus', () => setTimeout(reset, 0));
  field.addEventListener('input', (ev) => {
    const v = field.value;
    if (ev.inputType && ev.inputType.startsWith('delete')) { if (v.length < SENTINEL.length) send({ type: 'key', key: 'Backspace' }); }
    else if (ev.inputType === 'insertLineBreak') send({ type: 'key', key: 'Enter' });
    else if (v.startsWith(SENTINEL) && v.length > SENTINEL.length) send({ type: 'text', text: v.slice(SENTINEL.length, SENTINEL.length + ${HOSTED_INPUT_TEXT_MAX_CHARS}) });
    else if (v.length > 0 && !v.startsWith(SENTINEL)) send({ type: 'text', text: v.slice(0, ${HOSTED_INPUT_TEXT_MAX_CHARS}) });
    reset();
  });
  field.addEventListener('keydown', (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.isComposing) return;
    if (ev.key !== 'Backspace' && keys.includes(ev.key)) { ev.preventDefault(); send({ type: 'key', key: ev.key }); }
  });
  // Keys with the focus elsewhere on the page (a desktop: the image clicked) go to the remote page as before.
  document.addEventListener('keydown', (ev) => {
    if (ev.target === field || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key.length === 1) { ev.preventDefault(); send({ type: 'text', text: ev.key }); }
    else if (keys.includes(ev.key)) { ev.preventDefault(); send({ type: 'key', key: ev.key }); }
  });
  document.addEventListener('paste', (ev) => { if (ev.target === field) return; const t = ev.clipboardData && ev.clipboardData.getData('text'); if (t) { ev.preventDefault(); send({ type: 'text', text: t.slice(0, ${HOSTED_INPUT_TEXT_MAX_CHARS}) }); } });
})();
</script>`;
  return servicePage({ title: `Log in to ${MERCHANT_NAMES[merchant]}`, bodyHtml: body, heading: false });
}
