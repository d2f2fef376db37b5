import t from 'tap';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { axeViolations, chromium, codeFor, listen, scrollsSideways, signIn } from './browser.ts';

// Sign-in with a code, in a real Chromium: the code is read from the sandbox
// outbox (where the sandbox mail adapter delivers), the person lands on the
// dashboard, the sign-in is an event with the person as actor, and every
// page of the way passes axe at a phone's and a desktop's width.

const { app, ledger, sandboxProviders } = await testApp(t, { providers: true });
const org = await bootstrapOrg(app, 'SignIn');
const owner = 'owner+signin@example.com';
const base = await listen(app);
const sandbox = sandboxProviders!.url;
const browser = await chromium(t);

t.test('GET / and a signed-out page lead to sign-in, with a safe next', async (t) => {
  const root = await fetch(`${base}/`, { redirect: 'manual' });
  t.equal(root.status, 303);
  t.equal(root.headers.get('location'), '/dashboard');
  const keys = await fetch(`${base}/dashboard/account`, { redirect: 'manual' });
  t.equal(keys.status, 303);
  t.equal(keys.headers.get('location'), '/dashboard/sign-in?next=%2Fdashboard%2Faccount');
});

t.test('a person signs in with the code from the outbox', async (t) => {
  const context = await browser.newContext();
  const page = await signIn(context, base, sandbox, owner);
  t.equal(await page.textContent('h1'), 'SignIn');
  t.match(await page.textContent('#welcome'), owner);
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === 'dash_session')!;
  t.ok(session.httpOnly, 'HttpOnly');
  t.equal(session.sameSite, 'Lax');
  t.equal(session.path, '/dashboard');
  await ledger.settle();
  const events = await ledger.store.readStream(`person-${org.ownerId}`);
  t.equal(events.length, 1);
  t.equal(events[0]!.type, 'user.signed_in');
  t.same((events[0]!.metadata as unknown as { actor: unknown }).actor, { kind: 'user', id: org.ownerId });
  t.match(events[0]!.data, { user_id: org.ownerId, method: 'code', session_id: /^dss_/ });
});

t.test('the link in the mail fills the code in', async (t) => {
  const context = await browser.newContext();
  const page = await context.newPage();
  const seen = (await (await fetch(`${sandbox}/_sandbox/outbox?email=${encodeURIComponent(owner)}`)).json()).messages.length;
  await page.goto(`${base}/dashboard/sign-in`);
  await page.fill('#email', owner);
  await page.click('#send-code');
  await page.waitForURL(/\/sign-in\/code/);
  const { code, link } = await codeFor(sandbox, owner, seen);
  // The mail's link names this service's public address; the test server listens elsewhere.
  await page.goto(`${base}${new URL(link).pathname}${new URL(link).search}`);
  t.equal(await page.inputValue('#code'), code);
  await page.click('#sign-in');
  await page.waitForSelector('#welcome');
});

t.test('sign-in pages and home pass axe and do not scroll sideways at 375 and 1440 px', async (t) => {
  for (const width of [375, 1440]) {
    const context = await browser.newContext({ viewport: { width, height: 800 } });
    const page = await context.newPage();
    await page.goto(`${base}/dashboard/sign-in`);
    t.same(await axeViolations(page), [], `sign-in at ${width}`);
    t.notOk(await scrollsSideways(page), `sign-in at ${width}`);
    await page.fill('#email', 'nobody-here@example.com');
    await page.click('#send-code');
    await page.waitForURL(/\/sign-in\/code/);
    t.same(await axeViolations(page), [], `code page at ${width}`);
    await page.fill('#code', '000000');
    await page.click('#sign-in');
    await page.waitForSelector('#error-summary');
    t.same(await axeViolations(page), [], `code error at ${width}`);
    const signed = await browser.newContext({ viewport: { width, height: 800 } });
    const home = await signIn(signed, base, sandbox, owner);
    t.same(await axeViolations(home), [], `home at ${width}`);
    t.notOk(await scrollsSideways(home), `home at ${width}`);
  }
});
