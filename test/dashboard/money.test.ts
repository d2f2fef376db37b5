import t from 'tap';
import { findChromium } from '../../src/adapters/browser/chromium.ts';
import { HttpBank } from '../../src/adapters/bank/http-bank.ts';
import { SandboxBank } from '../../src/adapters/bank/sandbox-bank.ts';
import type { Bank } from '../../src/adapters/bank/port.ts';
import { HttpPsp } from '../../src/adapters/psp/http-psp.ts';
import { UnconfiguredPsp } from '../../src/adapters/psp/port.ts';
import { SandboxPsp } from '../../src/adapters/psp/sandbox-psp.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { CPF } from '../helpers/pix.ts';
import { until } from '../helpers/wait.ts';
import { chromium, listen, signIn } from './browser.ts';
import { checkLook } from './look-checks.ts';

// Consumers and their money in real Chromium, one organization seeded through
// the API: the owner pauses a mandate in the page and /v1 refuses the next
// spend with mandate_not_active, resumes it and /v1 allows it; the refused
// spend shows the rule and the numbers; a Pix charge made in the page shows
// its BR Code and QR image and is paid from the sandbox, then read settled
// through /v1; a bank consent's statement is fetched from the page; a member
// sees the pages but cannot act; every page passes axe at 375 and 1440 px.

if (!(await findChromium())) {
  t.skip('no Chromium found (CHROMIUM_PATH, /usr/bin/chromium or @sparticuz/chromium): the money page tests did not run', async () => {});
} else {
  const psp = new SandboxPsp();
  await psp.start();
  t.teardown(() => psp.stop());
  const pspClient = new HttpPsp('sandbox', { baseUrl: psp.url, clientId: psp.clientId, clientSecret: psp.clientSecret, webhookSecret: psp.webhookSecret, timeoutMs: 5_000 });
  const bank = new SandboxBank(2);
  const bankUrl = await bank.start();
  t.teardown(() => bank.stop());
  const banks = new Map<string, Bank>([['sandbox-bank', new HttpBank('sandbox-bank', { baseUrl: bankUrl, clientId: bank.clientId, clientSecret: bank.clientSecret, timeoutMs: 5_000 })]]);
  const { app, ledger, sandboxProviders } = await testApp(t, { providers: true, banks, pix: { sandbox: pspClient, live: new UnconfiguredPsp() } });
  const base = await listen(app);
  await pspClient.configureWebhook(`${base}/v1/pix/notifications/sandbox`);
  const org = await bootstrapOrg(app, 'Moneyco');
  const api = async (method: 'GET' | 'POST', url: string, payload?: Record<string, unknown>, headers: Record<string, string> = org.key) => app.inject({ method, url, headers, ...(payload ? { payload } : {}) });

  await api('POST', '/v1/agents', { agent_id: 'buyer', principal_ref: 'p' });
  const ana = (await api('POST', '/v1/consumers', { display_name: 'Ana Souza' })).json();
  const mandate = (
    await api('POST', '/v1/mandates', { consumer_id: ana.id, agent_id: 'buyer', purpose: 'groceries', merchant_allowlist: ['mercado'], merchant_pin_kind: 'merchant-id', cap_minor: '10000', per_tx_cap_minor: '6000', currency: 'BRL', expires_at: Math.floor(Date.now() / 1000) + 86_400 })
  ).json();
  const spend = (amount: string) => api('POST', `/v1/consumers/mandates/${mandate.id}/spend`, { amount_minor: amount, currency: 'BRL', merchant: 'mercado' });
  const seeded = [(await spend('5000')).statusCode, (await spend('5500')).statusCode];
  await api('POST', `/v1/consumers/${ana.id}/pix/partner-account`, { document: CPF });
  await api('POST', `/v1/consumers/${ana.id}/pix-keys`, { key_type: 'EVP' });
  const consent = (await api('POST', '/v1/bank-consents', { bank_id: 'sandbox-bank', consumer_id: ana.id, redirect_url: 'https://app.example.com/ofb/return', scopes: ['ACCOUNTS_READ', 'TRANSACTIONS_READ'] })).json();
  const back = new URL((await fetch(consent.authorisation_url, { redirect: 'manual' })).headers.get('location')!);
  await api('POST', `/v1/bank-consents/${consent.id}/callback`, { auth_code: back.searchParams.get('code')! });
  await api('POST', '/v1/team/members', { email: 'bia@moneyco.example', role: 'member' }, org.owner);

  const browser = await chromium(t);
  const page = await signIn(await browser.newContext({ locale: 'en-US' }), base, sandboxProviders!.url, 'owner+moneyco@example.com');

  t.test('a mandate: caps used and left, a refused spend with the rule and the numbers, pause and resume checked through /v1', async (t) => {
    t.same(seeded, [201, 422], 'one spend approved, the next refused: over the total cap');
    await page.goto(`${base}/dashboard/consumers`);
    await page.click('#consumers a:has-text("Ana Souza")');
    await page.waitForURL(/\/dashboard\/consumers\/cns_/);
    t.match(await page.textContent('#wallet-BRL'), /Used\s*50\.00 BRL[\s\S]*Left\s*50\.00 BRL/);
    await page.goto(`${base}/dashboard/mandates?agent=buyer`);
    t.equal(await page.locator('#mandates tbody tr').count(), 1, "the agent's mandates");
    await checkLook(t, page, 'the mandates list');
    await page.goBack();
    await page.click('#consumer-mandates a:has-text("groceries")');
    await page.waitForURL(/\/dashboard\/mandates\/mdt_/);
    t.equal(await page.getAttribute('#cap-0', 'value'), '5000', 'the bar: spent');
    t.equal(await page.getAttribute('#cap-0', 'max'), '10000', 'the bar: of the cap');
    t.match(await page.textContent('#decisions'), 'Asked 55.00 BRL; 50.00 BRL of the 100.00 BRL cap was already spent, so 50.00 BRL was left.');
    await checkLook(t, page, 'the mandate page');

    await page.fill('#move-reason', 'card lost');
    await page.click('#pause-mandate');
    await page.waitForSelector('#notice:has-text("The mandate is paused")');
    const refused = await spend('100');
    t.equal(refused.statusCode, 409);
    t.equal(refused.json().error.code, 'mandate_not_active', '/v1 refuses a spend on the paused mandate');
    t.equal((await api('GET', `/v1/mandates/${mandate.id}`)).json().status, 'paused');
    await page.reload();
    t.match(await page.textContent('#decisions'), 'The mandate was paused when the spend came');
    // Revoking cannot be undone: without the box ticked, nothing changes.
    await page.click('#revoke-mandate');
    await page.waitForSelector('#notice:has-text("to confirm: nothing was changed")');
    t.equal((await api('GET', `/v1/mandates/${mandate.id}`)).json().status, 'paused', 'an unconfirmed revoke changes nothing');
    await page.click('#resume-mandate');
    await page.waitForSelector('#notice:has-text("The mandate is resumed")');
    t.equal((await spend('100')).statusCode, 201, '/v1 allows spends again');
    // A sandbox card bound in the page: its authorization through /v1 is a spend, listed as a card's.
    await page.click('#bind-card');
    await page.waitForSelector('#notice:has-text("The sandbox card")');
    const card = (await api('GET', `/v1/consumers/mandates/${mandate.id}/card`)).json().card;
    t.match(card, { card_id: /^card_/, status: 'active' }, 'the card is bound, as /v1 reads it');
    t.equal((await api('POST', `/v1/test/cards/${card.card_id}/authorizations`, { amount_minor: '250', currency: 'BRL', merchant: 'mercado' })).statusCode, 201);
    await page.reload();
    t.match(await page.textContent('#card'), card.card_id);
    t.match(await page.locator('#decisions tbody tr').first().innerText(), /2\.50 BRL[\s\S]*Card[\s\S]*Approved/, "the card's authorization");
    const moves = (await ledger.store.readStream(`mandate-${mandate.id}`)).filter((e) => e.type === 'mandate.paused' || e.type === 'mandate.resumed');
    t.equal(moves.length, 2);
    for (const e of moves) t.same((e.metadata as unknown as { actor: unknown }).actor, { kind: 'user', id: org.ownerId }, `${e.type}: the person is the actor`);
    t.equal((moves[0]!.data as { reason: string | null }).reason, 'card lost');
  });

  t.test('a Pix charge made in the page, its BR Code and QR image, paid from the sandbox, settled through /v1', async (t) => {
    await page.goto(`${base}/dashboard/consumers/${ana.id}`);
    await page.fill('#charge-amount', 'twelve');
    await page.click('#create-charge');
    t.match(await page.textContent('#error-summary'), 'Enter an amount in BRL');
    await page.fill('#charge-amount', '12.34');
    await page.click('#create-charge');
    await page.waitForSelector('#notice:has-text("The charge")');
    const chargeId = /\/charges\/(pxc_[A-Za-z0-9]+)/.exec(page.url())![1]!;
    const brCode = (await page.textContent('#br-code'))!.trim();
    t.match(brCode, /^000201/, 'the BR Code');
    t.match(await page.getAttribute('#charge-qr', 'src'), /^data:image\/png;base64,/, 'its QR image');
    t.equal(await page.evaluate(() => (document.querySelector('#charge-qr') as HTMLImageElement).naturalWidth > 0), true, 'the image loads under the CSP');
    await checkLook(t, page, 'the charge page');
    await page.click('#pay-sandbox');
    await page.waitForSelector('#notice:has-text("Paid from the sandbox")');
    const settled = await until(async () => {
      const r = (await api('GET', `/v1/consumers/${ana.id}/pix/charges/${chargeId}`)).json();
      return r.status === 'settled' ? r : undefined;
    }, 'the charge settled');
    t.equal(settled.amount_minor, 1234);
    await page.goto(`${base}/dashboard/consumers/${ana.id}`);
    t.match(await page.textContent('#receivements'), '12.34 BRL', 'what was received');
    t.match(await page.textContent('#charges'), 'settled');
    await checkLook(t, page, 'the consumer page');
    await page.goto(`${base}/dashboard/consumers`);
    await checkLook(t, page, 'the consumers list');
  });

  t.test("a bank consent's statement fetched from the page", async (t) => {
    await page.goto(`${base}/dashboard/consumers/${ana.id}`);
    await page.click(`#consents a:has-text("${consent.id}")`);
    await page.click('#refresh-statement');
    await page.waitForSelector('#notice:has-text("The statement is fetched")');
    t.ok((await page.locator('#statement tbody tr').count()) > 0, 'statement lines');
    await checkLook(t, page, 'the bank consent page');
  });

  t.test('a member sees the pages and cannot act: nothing written', async (t) => {
    const bia = await signIn(await browser.newContext({ locale: 'en-US' }), base, sandboxProviders!.url, 'bia@moneyco.example');
    await bia.goto(`${base}/dashboard/mandates/${mandate.id}`);
    t.equal(await bia.locator('#mandate-read-only').count(), 1);
    t.equal(await bia.locator('#pause-mandate').count(), 0);
    const head = await ledger.store.headPosition();
    const status = await bia.evaluate(async (path) => {
      const csrf = document.querySelector('meta[name="csrf-token"]')!.getAttribute('content')!;
      const r = await fetch(path, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-csrf-token': csrf }, body: 'to=pause', redirect: 'manual' });
      return r.status;
    }, `/dashboard/mandates/${mandate.id}/move`);
    t.equal(status, 403, 'refused for the role');
    t.equal(await ledger.store.headPosition(), head, 'nothing was written');
    t.equal((await api('GET', `/v1/mandates/${mandate.id}`)).json().status, 'active');
  });
}
