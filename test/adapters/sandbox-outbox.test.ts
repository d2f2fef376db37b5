import t from 'tap';
import { checkLook } from '../dashboard/look-checks.ts';
import { findChromium, launchChromium } from '../../src/adapters/browser/chromium.ts';
import { SandboxProviders } from '../../src/adapters/providers/sandbox-providers.ts';
import { Catalog } from '../../src/providers/catalog.ts';

// (No assertion runs before the subtests: the setup throws instead.)
// The sandbox outbox read as a person reads a local mail catcher, over real
// HTTP: the signup site "e-mails" a code, GET /_sandbox/outbox?email= answers
// it (JSON, newest first, one address), and /_sandbox/outbox.html lists it in
// a headless Chromium; the code read from the page finishes the sign-up.

const chromium = await findChromium();
const sandbox = new SandboxProviders(Catalog.load());
await sandbox.start();
t.teardown(() => sandbox.stop());
const base = sandbox.url;
const signup = `${base}/_sandbox/acme-payments/signup`;

/** Fills page 1 over HTTP as a browser would; the page-2 URL it redirects to. */
async function signUp(email: string): Promise<string> {
  const r = await fetch(signup, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ email, name: 'Ana' }), redirect: 'manual' });
  if (r.status !== 303) throw new Error(`sign-up page 1 answered ${r.status}`);
  return new URL(r.headers.get('location')!, base).toString();
}
const sid = (verifyUrl: string) => new URL(verifyUrl).searchParams.get('s')!;
type Outbox = { email: string | null; count: number; messages: { id: string; to: string; subject: string; text: string; code: string; sent_at: string }[] };
const outbox = async (query = ''): Promise<Outbox> => {
  const r = await fetch(`${base}/_sandbox/outbox${query}`);
  if (r.status !== 200 || !/^application\/json/.test(r.headers.get('content-type') ?? '')) throw new Error(`the outbox answered ${r.status} ${r.headers.get('content-type')}`);
  return (await r.json()) as Outbox;
};

const ana = 'Ana.Person@example.com';
const bia = 'bia@example.com';
const anaVerify = await signUp(ana);
await signUp(bia);
// Resend: Ana's second code is the one the site now expects.
const resent = await fetch(`${signup}/resend`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ s: sid(anaVerify) }), redirect: 'manual' });
if (resent.status !== 303) throw new Error(`resend answered ${resent.status}`);

t.test('JSON: one address, newest first, as the site sent it', async (t) => {
  const box = await outbox(`?email=${encodeURIComponent('ana.person@EXAMPLE.com')}`);
  t.equal(box.email, 'ana.person@EXAMPLE.com');
  t.equal(box.count, 2, 'two codes to Ana, none of Bia');
  t.ok(box.messages.every((m) => m.to === ana));
  t.match(box.messages[0], { id: /^msg_/, subject: 'Your acme-payments verification code', code: /^\d{6}$/, sent_at: /^\d{4}-\d{2}-\d{2}T/ });
  t.match(box.messages[0]!.text, box.messages[0]!.code);
  t.same(box.messages.map((m) => m.code), sandbox.outbox(ana).map((m) => m.code).reverse(), 'newest first');
  t.ok(box.messages[0]!.id !== box.messages[1]!.id);
  const all = await outbox();
  t.equal(all.email, null);
  t.same(all.messages.map((m) => m.to), [ana, bia, ana], 'every address, newest first');
  t.same((await outbox('?email=nobody@example.com')).messages, []);
});

t.test('the outbox is read-only: a POST is not served', async (t) => {
  const post = await fetch(`${base}/_sandbox/outbox`, { method: 'POST' });
  t.equal(post.status, 404);
});

t.test('HTML: a person reads the newest code in Chromium and finishes the sign-up with it', chromium ? {} : { skip: 'no Chromium found (CHROMIUM_PATH, /usr/bin/chromium or @sparticuz/chromium): the outbox page browser test did not run' }, async (t) => {
  const browser = await launchChromium('shell');
  t.teardown(() => browser.close());
  // A page of its own context: axe-core's Playwright runner needs one (not browser.newPage()).
  const page = await (await browser.newContext()).newPage();
  const res = await page.goto(`${base}/_sandbox/outbox.html`);
  t.equal(res?.status(), 200);
  t.match(res?.headers()['content-type'], /^text\/html/);
  t.equal(await page.locator('tr.message').count(), 3);
  await checkLook(t, page, 'the outbox');
  // Filter by address with the page's own form.
  await page.fill('#email', ana);
  await Promise.all([page.waitForURL(/email=/), page.click('#show')]);
  t.same(await page.locator('tr.message td.to').allTextContents(), [ana, ana]);
  const codes = await page.locator('tr.message code.code').allTextContents();
  t.same(codes, sandbox.outbox(ana).map((m) => m.code).reverse(), 'newest first on the page');
  // The newest code, as the person read it, finishes the sign-up: page 3 shows the key.
  await page.goto(anaVerify);
  await page.fill('#code', codes[0]!);
  await Promise.all([page.waitForURL(/\/done\?/), page.click('#verify')]);
  t.match(await page.locator('#api-key').textContent(), /^acme_sk_[0-9a-f]{32}$/);
  // An address with no mail says so.
  await page.goto(`${base}/_sandbox/outbox.html?email=${encodeURIComponent('<b>x</b>@example.com')}`);
  t.match(await page.locator('#empty').textContent(), 'No messages to <b>x</b>@example.com yet');
  t.equal(await page.locator('#empty b').count(), 0, 'the address is shown as text');
  await checkLook(t, page, 'the empty outbox');
});
