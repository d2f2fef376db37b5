import t from 'tap';
import { testApp } from '../helpers/app.ts';
import { spendingOrg } from './spending.ts';
import { axeViolations, chromium, listen, scrollsSideways, signIn } from './browser.ts';

// Home in a real Chromium: the summary read from the read models (agents,
// active mandates, spends today, pending approvals, audit health), the spends
// per day drawn by uPlot, and the same figures as a table with no JavaScript.

const { app, ledger, sandboxProviders } = await testApp(t, { providers: true });
const { spend, v1 } = await spendingOrg(app, 'Homeco');
const spent = await spend('1250');
if (spent.status !== 201) throw new Error(`the spend answered ${spent.status}: ${JSON.stringify(spent.body)}`);
await v1('POST', '/v1/policies', { name: 'a person decides', type: 'approval-required' });
const held = await spend('500');
if (held.status !== 403) throw new Error(`the held spend answered ${held.status}`);
await ledger.settle();

const base = await listen(app);
const browser = await chromium(t);
// A real locale: this machine's default (en-US@posix) is no BCP 47 tag, and uPlot's Intl calls throw on it.
const page = await signIn(await browser.newContext({ locale: 'en-US' }), base, sandboxProviders!.url, 'owner+homeco@example.com');

t.test('the summary and the chart', async (t) => {
  await page.goto(`${base}/dashboard`);
  t.equal((await page.textContent('#card-agents .value'))!.trim(), '1');
  t.equal((await page.textContent('#card-mandates .value'))!.trim(), '1');
  t.equal((await page.textContent('#card-spends .value'))!.trim(), '12.50 BRL');
  t.equal((await page.textContent('#card-approvals .value'))!.trim(), '1');
  t.match(await page.textContent('#card-audit'), /healthy|degraded/);
  await page.waitForSelector('#spends-chart canvas');
  const today = new Date().toISOString().slice(0, 10);
  t.match(await page.textContent('#spends-table'), today);
  t.match(await page.textContent('#spends-table'), '12.50 BRL');
});

t.test('the chart draws in a browser whose language is no BCP 47 tag (Chromium under LANG=C: en-US@posix)', async (t) => {
  const posix = await browser.newContext({ locale: 'en-US@posix' });
  const p = await posix.newPage();
  await p.context().addCookies(await page.context().cookies());
  await p.goto(`${base}/dashboard`);
  t.equal(await p.evaluate(() => navigator.language), 'en-US', 'the guard replaced the tag before uPlot loaded');
  await p.waitForSelector('#spends-chart canvas');
  t.pass('the chart is drawn');
});

t.test('without JavaScript the figures are a table', async (t) => {
  const noJs = await browser.newContext({ javaScriptEnabled: false, locale: 'en-US' });
  const p = await noJs.newPage();
  await p.context().addCookies(await page.context().cookies());
  await p.goto(`${base}/dashboard`);
  t.equal(await p.locator('#spends-chart canvas').count(), 0);
  t.match(await p.textContent('#spends-table'), '12.50 BRL');
});

t.test('Home at 375 and 1440 px: axe and no sideways scroll', async (t) => {
  for (const width of [375, 1440]) {
    await page.setViewportSize({ width, height: 800 });
    await page.goto(`${base}/dashboard`);
    await page.waitForSelector('#spends-chart canvas');
    t.same(await axeViolations(page), [], `home at ${width}`);
    t.notOk(await scrollsSideways(page), `home at ${width}`);
  }
});
