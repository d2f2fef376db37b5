import t from 'tap';
import { findChromium } from '../../src/adapters/browser/chromium.ts';
import { bootstrapOrg, testApp, testClock } from '../helpers/app.ts';
import { chromium, listen, signIn } from './browser.ts';
import { checkLook } from './look-checks.ts';

// The connect-link callback's refusals as a person meets them: the provider
// sent their browser to our callback, and a link that is unknown, spent or
// expired answers a page in the dashboard's look (same status, the code on
// the page), in real Chromium with axe-core and no horizontal scroll; any
// other client keeps the spec's JSON envelope. (The consent page, the outbox
// and the live view run the same checks in their own browser tests.)

const clock = testClock();
const { app, sandboxProviders } = await testApp(t, { providers: true, now: clock.now });
const org = await bootstrapOrg(app, 'Look');
const base = await listen(app);
const html = { accept: 'text/html,application/xhtml+xml' };

async function newLink(): Promise<string> {
  const r = await app.inject({ method: 'POST', url: '/v1/connections/start', headers: org.key, payload: { redirect_uri: 'https://app.example.com/connected', server_id: 'contahub', user_id: 'ana' } });
  if (r.statusCode !== 200) throw new Error(`start answered ${r.statusCode}: ${r.body}`);
  return r.json().link_token as string;
}
const callback = (state: string, headers: Record<string, string> = {}) => app.inject({ method: 'GET', url: `/v1/connections/callback?state=${encodeURIComponent(state)}&error=access_denied`, headers });

t.test('a spent and an expired link: a page for a browser, the envelope for any other client', async (t) => {
  const spent = await newLink();
  const first = await callback(spent, html);
  t.equal(first.statusCode, 302, 'the first callback redirects back to the application');
  const again = await callback(spent, html);
  t.equal(again.statusCode, 409);
  t.match(again.headers['content-type'], /^text\/html/);
  t.match(again.headers['content-security-policy'], /style-src 'self'/);
  t.equal(again.headers['x-frame-options'], 'DENY');
  t.match(again.body, /This connection link was already used/);
  t.match(again.body, /<code id="refusal-code">link_token_used<\/code>/);
  const api = await callback(spent);
  t.equal(api.statusCode, 409);
  t.equal(api.json().error.code, 'link_token_used', 'without Accept: text/html the spec envelope');

  const late = await newLink();
  clock.advance(10 * 60_000 + 1_000);
  const expired = await callback(late, html);
  t.equal(expired.statusCode, 410);
  t.match(expired.body, /This connection link has expired/);
  t.match(expired.body, /ten minutes/);
  t.equal((await callback(late)).json().error.code, 'link_expired');
});

t.test('an unknown link in Chromium: the look, axe-core clean, no horizontal scroll', (await findChromium()) ? {} : { skip: 'no Chromium found: the look check did not run' }, async (t) => {
  const browser = await chromium(t);
  const page = await (await browser.newContext()).newPage();
  const res = await page.goto(`${base}/v1/connections/callback?state=lt_${'x'.repeat(40)}&code=abc`);
  t.equal(res?.status(), 400);
  t.equal(await page.locator('h1').textContent(), 'This connection link is not valid');
  t.equal(await page.locator('#refusal-code').textContent(), 'link_token_unknown');
  t.equal(await page.title(), 'This connection link is not valid · Agent Ledger');
  await checkLook(t, page, 'the connect-link refusal');
});

t.test('a mistyped dashboard address is a page in the look, not the API\'s JSON 404', (await findChromium()) ? {} : { skip: 'no Chromium found: the look check did not run' }, async (t) => {
  const browser = await chromium(t);
  const page = await (await browser.newContext()).newPage();
  const res = await page.goto(`${base}/dashboard/aprovals?x=1`);
  t.equal(res?.status(), 404);
  t.match(res?.headers()['content-type'], /^text\/html/);
  t.equal(await page.locator('h1').textContent(), 'There is no such page');
  t.match(await page.locator('#not-found').textContent(), '/dashboard/aprovals');
  t.equal(await page.locator('a[href="/dashboard"]').count() > 0, true, 'a way back to the dashboard');
  await checkLook(t, page, 'the dashboard\'s not-found page');
  // The API keeps its envelope.
  const api = await app.inject({ method: 'GET', url: '/v1/no-such-thing', headers: org.key });
  t.equal(api.json().error.code, 'not_found');
});

t.test('the navigation: a row of links on a wide screen, a menu the keyboard opens on a phone', (await findChromium()) ? {} : { skip: 'no Chromium found: the navigation check did not run' }, async (t) => {
  const browser = await chromium(t);
  const context = await browser.newContext({ locale: 'en-US', viewport: { width: 1440, height: 900 } });
  const page = await signIn(context, base, sandboxProviders!.url, 'owner+look@example.com');
  await page.goto(`${base}/dashboard/webhooks`);
  const link = page.locator('nav.nav a[href="/dashboard/agents"]');
  const summary = page.locator('.nav-menu > summary');
  t.ok(await link.isVisible(), 'wide: the links show without opening anything');
  t.notOk(await summary.isVisible(), 'wide: no menu button');

  await page.setViewportSize({ width: 375, height: 800 });
  t.ok(await summary.isVisible(), 'phone: the menu button shows');
  t.match(await summary.textContent(), /Menu.*Webhooks/, 'it says where you are');
  t.notOk(await link.isVisible(), 'phone: the links are folded away');
  const navHeight = await page.locator('nav.nav').evaluate((el) => el.getBoundingClientRect().height);
  t.ok(navHeight <= 60, `phone: the folded navigation is one row (${navHeight} px)`);
  await summary.focus();
  await page.keyboard.press('Enter');
  await link.waitFor({ state: 'visible', timeout: 5_000 });
  t.equal(await page.locator('.nav-menu').getAttribute('open'), '', 'Enter opened it');
  await page.keyboard.press('Tab');
  t.equal(await page.evaluate(() => document.activeElement?.getAttribute('href')), '/dashboard', 'Tab goes on to the first link');
  await checkLook(t, page, 'a page with the menu open');
  await page.setViewportSize({ width: 375, height: 800 }); // checkLook leaves the page wide
  t.ok(await link.isVisible(), 'still open');
  await summary.focus();
  await page.keyboard.press('Space');
  await link.waitFor({ state: 'hidden', timeout: 5_000 });
  t.pass('Space folded it again');
});
