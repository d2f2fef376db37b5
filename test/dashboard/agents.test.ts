import t from 'tap';
import { findChromium } from '../../src/adapters/browser/chromium.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { chromium, listen, signIn } from './browser.ts';
import { checkLook } from './look-checks.ts';

// Agents in real Chromium: an owner opens an agent, sees its keys, its DID
// document and its spends (a refused one with why); rotates its key in the
// page and /v1 signs with the new key only; revokes the old key in the page
// and the DID document drops it, /v1 calls it already revoked; every event
// names the person; the pages pass axe and do not scroll sideways.

if (!(await findChromium())) {
  t.skip('no Chromium found (CHROMIUM_PATH, /usr/bin/chromium or @sparticuz/chromium): the agents page tests did not run', async () => {});
} else {
  const { app, ledger, sandboxProviders } = await testApp(t, { providers: true });
  const org = await bootstrapOrg(app, 'Agentco');
  const api = async (method: 'GET' | 'POST', url: string, payload?: Record<string, unknown>) => app.inject({ method, url, headers: org.key, ...(payload ? { payload } : {}) });
  const registered = (await api('POST', '/v1/agents', { agent_id: 'buyer', principal_ref: 'ops@agentco', display_name: 'Buyer bot' })).json();
  const consumer = (await api('POST', '/v1/consumers', { display_name: 'Ana' })).json();
  const mandate = (
    await api('POST', '/v1/mandates', { consumer_id: consumer.id, agent_id: 'buyer', purpose: 'groceries', merchant_allowlist: ['mercado'], merchant_pin_kind: 'merchant-id', cap_minor: '10000', per_tx_cap_minor: '5000', currency: 'BRL', expires_at: Math.floor(Date.now() / 1000) + 86_400 })
  ).json();
  const spent = [
    (await api('POST', `/v1/consumers/mandates/${mandate.id}/spend`, { amount_minor: '1250', currency: 'BRL', merchant: 'mercado' })).statusCode,
    (await api('POST', `/v1/consumers/mandates/${mandate.id}/spend`, { amount_minor: '7000', currency: 'BRL', merchant: 'mercado' })).statusCode,
  ];

  // A session of the agent (its user is the agent's handle) with a mocked tool: one recorded tool call.
  const session = (await api('POST', '/v1/sessions', { servers: ['clima'], user_id: 'buyer', mocks: { 'clima/get_forecast': { city: 'Recife', min_c: 24, max_c: 31 } } })).json();
  const call = (await api('POST', `/v1/sessions/${session.id}/execute`, { tool: 'clima/get_forecast', input: { city: 'Recife' } })).json();

  const base = await listen(app);
  const browser = await chromium(t);
  const page = await signIn(await browser.newContext({ locale: 'en-US' }), base, sandboxProviders!.url, 'owner+agentco@example.com');

  t.test('an agent: keys, DID document, spends with why', async (t) => {
    t.same(spent, [201, 422], 'one spend approved, one refused (over the per-spend cap)');
    await page.goto(`${base}/dashboard/agents`);
    await page.click('#agents a:has-text("Buyer bot")');
    await page.waitForURL(/\/dashboard\/agents\/buyer$/);
    t.match(await page.textContent('#agent-facts'), registered.agent_did);
    t.match(await page.textContent('#agent-keys'), 'Active: signs');
    t.match(await page.textContent('#did-methods'), registered.kid, 'the DID document lists the key');
    const spends = await page.textContent('#agent-spends');
    t.match(spends, '12.50 BRL');
    t.match(spends, /70\.00 BRL[\s\S]*Declined[\s\S]*Over the per-spend cap/, 'a refused spend says which rule');
    t.match(call, { success: true, tool_call_id: /^tc_\d+$/ }, 'the agent made a tool call');
    const calls = await page.textContent('#agent-calls');
    t.match(calls, call.tool_call_id, 'its tool call is listed');
    t.match(calls, 'get_forecast');
    const download = await page.request.get(`${base}/dashboard/agents/buyer/did.json`);
    t.equal(download.headers()['content-disposition'], 'attachment; filename="buyer.did.json"');
    t.same((await download.json()).authentication, [registered.kid], 'the downloadable document is the resolver’s');
    await checkLook(t, page, 'the agent page');
    await page.goto(`${base}/dashboard/agents`);
    await checkLook(t, page, 'the agents list');
  });

  t.test('rotate in the page: /v1 signs with the new key; revoke the old one: gone from the DID document', async (t) => {
    await page.goto(`${base}/dashboard/agents/buyer`);
    await page.click('#rotate-key');
    await page.waitForSelector('#notice:has-text("The key is rotated")');
    const agent = (await api('GET', '/v1/agents/buyer')).json();
    const active = agent.keys.find((k: { status: string }) => k.status === 'active');
    t.not(active.kid, registered.kid, 'a new key is active');
    t.equal(agent.keys.find((k: { kid: string }) => k.kid === registered.kid).status, 'retired');
    const signed = (await api('POST', '/v1/agents/buyer/sign', { message: 'hello' })).json();
    t.equal(signed.kid, active.kid, '/v1 signs with the new key, not the old one');
    t.match(await page.textContent('#agent-keys'), 'Retired: verifies only');

    await page.click('#revoke-key-1');
    await page.waitForSelector(`#notice:has-text("is revoked")`);
    const doc = (await app.inject({ method: 'GET', url: `/${org.orgId}/buyer/did.json` })).json();
    t.notOk(JSON.stringify(doc).includes(registered.kid), 'the DID document no longer lists the old key');
    const again = await api('POST', `/v1/agents/buyer/keys/${encodeURIComponent(registered.kid)}/revoke`);
    t.equal(again.statusCode, 409);
    t.equal(again.json().error.code, 'key_already_revoked', '/v1 refuses the old key: it is revoked');
    const events = (await ledger.store.readStream(`agent-${org.orgId}.buyer`)).filter((e) => e.type === 'agent.key_rotated' || e.type === 'agent.key_revoked');
    t.equal(events.length, 2);
    for (const e of events) t.same((e.metadata as unknown as { actor: unknown }).actor, { kind: 'user', id: org.ownerId }, `${e.type}: the person is the actor`);
  });

  t.test('the list grows by cursor: 50 a page, then the older ones', async (t) => {
    for (let i = 0; i < 50; i++) await api('POST', '/v1/agents', { agent_id: `extra-${String(i).padStart(2, '0')}`, principal_ref: 'p' });
    await page.goto(`${base}/dashboard/agents`);
    t.equal(await page.locator('#agents tbody tr').count(), 50, 'the newest 50');
    t.equal(await page.locator('#agents a:has-text("Buyer bot")').count(), 0, 'the oldest is on the next page');
    await page.click('text=Older →');
    await page.waitForURL(/before=/);
    t.equal(await page.locator('#agents tbody tr').count(), 1, 'the one older agent');
    t.equal(await page.locator('#agents a:has-text("Buyer bot")').count(), 1);
    t.equal(await page.locator('text=Older →').count(), 0, 'no older page after the last');
  });
}
