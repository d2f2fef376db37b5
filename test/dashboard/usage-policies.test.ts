import t from 'tap';
import { findChromium } from '../../src/adapters/browser/chromium.ts';
import { testApp } from '../helpers/app.ts';
import { spendingOrg } from './spending.ts';
import { chromium, listen, signIn } from './browser.ts';
import { checkLook } from './look-checks.ts';

// Policies, commerce memory and usage in real Chromium. A policy enabled in
// the page holds the next spend made through /v1 (and the page lists that
// decision as held); disabled again, the next spend passes. Usage counts the
// key's requests and spends per day and shows the key reaching its rate limit
// (the 429s /v1 answered). Commerce memory lists what an agent recorded.
// Each page: axe-core clean, no sideways scroll at 375 and 1440 px.

if (!(await findChromium())) {
  t.skip('no Chromium found (CHROMIUM_PATH, /usr/bin/chromium or @sparticuz/chromium): the usage and policies page tests did not run', async () => {});
} else {
  // A small bucket that barely refills, so the test can take a key to its limit.
  const { app, sandboxProviders } = await testApp(t, { providers: true, rateLimit: { burst: 60, perSecond: 0.01 } });
  const { org, v1, spend } = await spendingOrg(app, 'Ruleco');
  const must = (what: string, r: { status: number; body: unknown }, status: number) => {
    if (r.status !== status) throw new Error(`${what} answered ${r.status}: ${JSON.stringify(r.body)}`);
    return r.body as Record<string, string>;
  };
  must('a spend before any policy', await spend('1250'), 201);
  const policy = must('the policy', await v1('POST', '/v1/policies', { name: 'A person decides spends', type: 'approval-required', tools: ['mandate.spend'], enabled: false }), 201);
  const supplier = must('the counterparty', await v1('POST', '/v1/counterparties', { kind: 'supplier', name: 'Mercado Azul', identifier: 'azul@example.com', identifier_kind: 'email' }), 201);
  must('the interaction', await v1('POST', '/v1/commerce-memory/interactions', { counterparty_id: supplier.id, kind: 'payment', agent_id: 'buyer', amount_minor: 1250, currency: 'BRL' }), 201);

  const base = await listen(app);
  const browser = await chromium(t);
  const page = await signIn(await browser.newContext({ locale: 'en-US' }), base, sandboxProviders!.url, 'owner+ruleco@example.com');

  t.test('enable a policy in the page: the next spend through /v1 is held, and the page lists the decision', async (t) => {
    await page.goto(`${base}/dashboard/policies`);
    await checkLook(t, page, 'policies');
    t.match(await page.textContent('#policies'), /A person decides spends[\s\S]*disabled/);
    await page.click(`[data-policy="${policy.id}"]`);
    await page.waitForURL(`${base}/dashboard/policies/${policy.id}`);
    await checkLook(t, page, 'a policy');
    t.match(await page.textContent('#policy-type'), 'Holds the calls it matches');
    await page.click('#toggle-policy');
    await page.waitForSelector('#notice:has-text("Enabled")');
    const held = await spend('500');
    t.equal(held.status, 403, 'the spend is held');
    t.ok(held.body.approval_id, 'for an approval');
    await page.goto(`${base}/dashboard/policies/${policy.id}?decision=approval_required`);
    t.match(await page.textContent('#decisions'), /held[\s\S]*mandate\.spend \(5\.00 BRL\)[\s\S]*buyer/);
    t.match(await page.textContent('#decisions'), held.body.approval_id, 'the decision links its approval');
    await page.goto(`${base}/dashboard/policies?decision=denied`);
    t.notOk(await page.locator('#decisions').count(), 'nothing denied');
    await page.goto(`${base}/dashboard/policies`);
    t.match(await page.textContent('#policies'), /A person decides spends[\s\S]*enabled[\s\S]*1/, 'the count of held calls');
    await page.goto(`${base}/dashboard/policies/${policy.id}`);
    await page.click('#toggle-policy');
    await page.waitForSelector('#notice:has-text("Disabled")');
    t.equal((await spend('300')).status, 201, 'disabled, the next spend passes');
    const viaApi = (await v1('GET', `/v1/policies/${policy.id}`)).body;
    t.equal(viaApi.enabled, false, '/v1 reads the same policy');
  });

  t.test('add a policy in the page', async (t) => {
    await page.goto(`${base}/dashboard/policies`);
    await page.fill('#policy-name', 'No x402');
    await page.selectOption('#policy-type', 'deny');
    await page.fill('#policy-tools', 'x402.*');
    await page.click('#add-policy');
    await page.waitForSelector('#notice:has-text("added")');
    const listed = (await v1('GET', '/v1/policies')).body as { name: string; type: string; tools: string[] }[];
    t.same(listed.map((p) => [p.name, p.type, p.tools]), [['A person decides spends', 'approval-required', ['mandate.spend']], ['No x402', 'deny', ['x402.*']]]);
    await page.goto(`${base}/dashboard/policies`);
    await page.fill('#policy-tools', 'a*b');
    await page.fill('#policy-name', 'Bad');
    await page.click('#add-policy');
    await page.waitForSelector('#error-summary');
    t.equal((await v1('GET', '/v1/policies')).body.length, 2, 'a refused form adds nothing');
  });

  t.test('commerce memory: counterparties and insights', async (t) => {
    await page.goto(`${base}/dashboard/memory`);
    await checkLook(t, page, 'memory');
    t.match(await page.textContent('#top'), /Mercado Azul[\s\S]*1/);
    await page.click(`[data-counterparty="${supplier.id}"]`);
    await page.waitForURL(`${base}/dashboard/memory/${supplier.id}`);
    await checkLook(t, page, 'a counterparty');
    t.match(await page.textContent('#interactions'), /payment[\s\S]*12\.50 BRL[\s\S]*buyer/);
  });

  t.test('usage: requests and spends per day per key, and a key reaching its rate limit', async (t) => {
    // The day (UTC) the requests are counted on: the day they were made, which a run across midnight leaves behind.
    const dayBefore = new Date().toISOString().slice(0, 10);
    let refused = 0;
    for (let i = 0; i < 80 && refused === 0; i++) if ((await v1('GET', '/v1/policies')).status === 429) refused++;
    const dayAfter = new Date().toISOString().slice(0, 10);
    t.equal(refused, 1, 'the key reached its limit through /v1');
    await page.goto(`${base}/dashboard/usage`);
    await page.waitForSelector('#requests-chart canvas');
    await page.waitForSelector('#spends-brl-chart canvas');
    await checkLook(t, page, 'usage');
    t.match(await page.textContent('#requests-table'), new RegExp(`(?:${dayBefore}|${dayAfter})[\\s\\S]*\\d`));
    t.match(await page.textContent('#spends-brl-table'), /15\.50 BRL/, 'the approved spends of the day: 12.50 + 3.00 (the held 5.00 is not spent)');
    const { api_keys } = (await app.inject({ method: 'GET', url: '/v1/api-keys', headers: org.owner })).json() as { api_keys: { id: string; name: string; environment: string }[] };
    const key = api_keys.find((k) => k.name === 't' && k.environment === 'test')!;
    const row = page.locator('#keys-usage tr', { has: page.locator(`[id="${key.id}"]`) });
    t.match(await row.textContent(), /100\s%/, 'the fullest the bucket got');
    t.match(await row.locator('.badge-danger').textContent(), '1', 'the refusal counted');
  });
}
