import t from 'tap';
import { walletRows } from '../../projections/consumer.ts';
import { bootstrapOrg, testApp, testClock } from '../helpers/app.ts';

// The consumer wallet (spec Part 2 "Consumer wallet"): one row per currency,
// each row carrying the ids of its own mandates and funding sources.

const clock = testClock();
const { app } = await testApp(t, { now: clock.now });
const org = await bootstrapOrg(app, 'Wallets');
const inject = (method: 'GET' | 'POST', url: string, payload?: Record<string, unknown>) => app.inject({ method, url, headers: org.key, ...(payload !== undefined ? { payload } : {}) });
const ok = async (method: 'GET' | 'POST', url: string, payload?: Record<string, unknown>, status = 201) => {
  const r = await inject(method, url, payload);
  if (r.statusCode !== status) throw new Error(`${url}: ${r.statusCode} ${r.body}`);
  return r.json();
};

await ok('POST', '/v1/agents', { agent_id: 'buyer', principal_ref: 'p' });

t.test('each currency row carries its own mandate and funding source ids', async (t) => {
  const c = await ok('POST', '/v1/consumers', { display_name: 'Bia' });
  const mandate = (currency: string, cap: string, expiresIn = 3600) =>
    ok('POST', '/v1/mandates', {
      consumer_id: c.id, agent_id: 'buyer', purpose: 'p', merchant_allowlist: ['shop@pix.example'], merchant_pin_kind: 'pix-key',
      cap_minor: cap, per_tx_cap_minor: cap, currency, expires_at: Math.floor(clock.now().getTime() / 1000) + expiresIn,
    });
  t.same(await ok('GET', `/v1/consumers/${c.id}/wallet`, undefined, 200), { consumer_id: c.id, currencies: [] }, 'no mandates: no rows');
  const brl1 = await mandate('BRL', '1000');
  const usd = await mandate('USD', '300');
  const brl2 = await mandate('BRL', '500');
  const paused = await mandate('MXN', '80');
  const revoked = await mandate('MXN', '999');
  const expiring = await mandate('COP', '70', 60);
  await ok('POST', `/v1/mandates/${paused.id}/pause`, undefined, 200);
  await ok('POST', `/v1/mandates/${revoked.id}/revoke`, undefined, 200);
  await ok('POST', `/v1/consumers/mandates/${brl2.id}/spend`, { amount_minor: '120', currency: 'BRL', merchant: 'shop@pix.example' });
  clock.advance(120_000);
  const wallet = await ok('GET', `/v1/consumers/${c.id}/wallet`, undefined, 200);
  t.same(Object.keys(wallet).sort(), ['consumer_id', 'currencies'], 'no id lists at the top level');
  t.same(wallet.currencies, [
    { currency: 'BRL', authorized_minor: 1500, spent_minor: 120, available_minor: 1380, funding_source_ids: [], mandate_ids: [brl1.id, brl2.id] },
    { currency: 'MXN', authorized_minor: 80, spent_minor: 0, available_minor: 80, funding_source_ids: [], mandate_ids: [paused.id] },
    { currency: 'USD', authorized_minor: 300, spent_minor: 0, available_minor: 300, funding_source_ids: [], mandate_ids: [usd.id] },
  ]);
  t.notOk(JSON.stringify(wallet).includes(revoked.id), 'a revoked mandate is not counted');
  t.notOk(JSON.stringify(wallet).includes(expiring.id), 'an expired mandate is not counted');
  const doc = (await inject('GET', '/v1/openapi.json')).json();
  const row = doc.components.schemas.ConsumerWallet.properties.currencies.items;
  t.same(row.required.sort(), ['authorized_minor', 'available_minor', 'currency', 'funding_source_ids', 'mandate_ids', 'spent_minor'], 'the served OpenAPI document says the same');
});

t.test('a currency with a funding source and no active mandate still gets a row', async (t) => {
  const rows = walletRows(
    [{ id: 'mdt_1', currency: 'BRL', cap_minor: 100n, spent_minor: 40n }],
    [{ id: 'fs_pix', currency: 'BRL' }, { id: 'fs_usdc', currency: 'USDC' }],
  );
  t.same(rows, [
    { currency: 'BRL', authorized_minor: 100n, spent_minor: 40n, available_minor: 60n, funding_source_ids: ['fs_pix'], mandate_ids: ['mdt_1'] },
    { currency: 'USDC', authorized_minor: 0n, spent_minor: 0n, available_minor: 0n, funding_source_ids: ['fs_usdc'], mandate_ids: [] },
  ]);
});
