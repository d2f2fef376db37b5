import t from 'tap';
import { findChromium, launchChromium } from '../../src/adapters/browser/chromium.ts';
import { testApp } from '../helpers/app.ts';

// The reference page in a real headless Chromium over a loopback socket: its
// title, search finding an operation, an operation's recorded example shown,
// no request outside this service, and no CSP violation.

const found = await findChromium();
if (!found) {
  t.test('the reference in a browser', { skip: 'no Chromium found (CHROMIUM_PATH, /usr/bin/chromium or the @sparticuz/chromium package)' }, () => {});
} else {
  const { app } = await testApp(t);
  const base = await app.listen({ host: '127.0.0.1', port: 0 });
  const browser = await launchChromium('shell');
  t.teardown(() => browser.close());

  t.test('/docs: title, search, an example, nothing from outside', async (t) => {
    const tab = await (await browser.newContext({ locale: 'en-US' })).newPage();
    const outside: string[] = [];
    tab.on('request', (r) => {
      if (!r.url().startsWith(base) && !r.url().startsWith('data:')) outside.push(r.url());
    });
    const violations: string[] = [];
    tab.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) violations.push(m.text());
    });
    const res = await tab.goto(`${base}/docs`);
    t.equal(res?.status(), 200);
    t.equal(await tab.title(), 'Agent Ledger API reference');
    await tab.getByText('Three credentials, each for its own part of the API').first().waitFor({ timeout: 60_000 });
    await tab.locator('button[role="search"]').first().click();
    const dialog = tab.getByRole('dialog', { name: 'Reference Search' });
    await dialog.locator('input[type="search"]').fill('wallet');
    const hit = dialog.getByRole('option').filter({ hasText: '/v1/consumers/{id}/wallet' }).first();
    await hit.waitFor({ timeout: 30_000 });
    t.match(await hit.innerText(), /GET/, 'search finds the wallet operation');
    await hit.click();
    const section = tab.locator('section', { hasText: 'Per currency: authorized' }).first();
    await section.waitFor({ timeout: 30_000 });
    const text = await section.innerText();
    t.match(text, /\/v1\/consumers\/\{id\}\/wallet/, 'the operation opens from the search');
    // The recorded example of the answer (contracts/examples), not a schema's placeholder.
    const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json();
    const example = doc.paths['/v1/consumers/{id}/wallet'].get.responses['200'].content['application/json'].examples?.recorded?.value as { consumer_id: string };
    t.ok(example?.consumer_id, 'the wallet answer has a recorded example');
    await tab.getByText(example.consumer_id).first().waitFor({ timeout: 30_000 });
    t.pass('the example is shown');
    t.same(outside, [], 'the page asked nothing outside this service');
    t.same(violations, [], 'no CSP violation');
  });
}
