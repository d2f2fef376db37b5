import t from 'tap';
import { bootstrapOrg, testApp, testClock } from '../helpers/app.ts';

// Sums of money past 2^53 (spec "Consumer wallet" and "Insight rows": integers):
// a wallet of mandates capped at 10^15 each, a counterparty paid 10^15 at a
// time. Both answered 500 (a JS number failed the response schema); they
// answer 200 with the exact decimal sums, read from the raw response text,
// since JSON.parse would round them to the nearest double.

const clock = testClock();
const { app } = await testApp(t, { now: clock.now });
const org = await bootstrapOrg(app, 'BigSums');
const inject = (method: 'GET' | 'POST', url: string, payload?: Record<string, unknown>) => app.inject({ method, url, headers: org.key, ...(payload !== undefined ? { payload } : {}) });
const ok = async (method: 'GET' | 'POST', url: string, payload?: Record<string, unknown>, status = 201) => {
  const r = await inject(method, url, payload);
  if (r.statusCode !== status) throw new Error(`${method} ${url}: ${r.statusCode} ${r.body}`);
  return r;
};

const E15 = '1000000000000000';

t.test('a wallet whose caps sum past 2^53 answers the exact sums', async (t) => {
  await ok('POST', '/v1/agents', { agent_id: 'buyer', principal_ref: 'p' });
  const c = (await ok('POST', '/v1/consumers', { display_name: 'Rich' })).json();
  const mandate = async (currency: string, cap: string) =>
    (
      await ok('POST', '/v1/mandates', {
        consumer_id: c.id, agent_id: 'buyer', purpose: 'p', merchant_allowlist: ['shop@pix.example'], merchant_pin_kind: 'pix-key',
        cap_minor: cap, per_tx_cap_minor: cap, currency, expires_at: Math.floor(clock.now().getTime() / 1000) + 3600,
      })
    ).json();
  const ids: string[] = [];
  for (let i = 0; i < 10; i++) ids.push((await mandate('USDC', E15)).id);
  ids.push((await mandate('USDC', '3')).id);
  const small = await mandate('BRL', '1500');
  await ok('POST', `/v1/consumers/mandates/${ids[0]}/spend`, { amount_minor: '7', currency: 'USDC', merchant: 'shop@pix.example' });
  await ok('POST', `/v1/consumers/mandates/${small.id}/spend`, { amount_minor: '120', currency: 'BRL', merchant: 'shop@pix.example' });

  const r = await inject('GET', `/v1/consumers/${c.id}/wallet`);
  t.equal(r.statusCode, 200, r.statusCode === 200 ? '200' : r.body);
  // 10 × 10^15 + 3, and that minus the 7 spent: neither is a double.
  t.match(r.body, /"currency":"USDC","authorized_minor":10000000000000003,"spent_minor":7,"available_minor":9999999999999996,/, 'the exact sums, bare integers');
  t.notOk(Number.isSafeInteger(10000000000000003) || Number.isSafeInteger(9999999999999996), 'sums a JS number cannot hold');
  t.match(r.body, /"currency":"BRL","authorized_minor":1500,"spent_minor":120,"available_minor":1380,/, 'an ordinary row as before');
  const w = r.json();
  t.same(w.currencies.map((x: { currency: string; mandate_ids: string[]; funding_source_ids: string[] }) => [x.currency, x.mandate_ids, x.funding_source_ids]), [['BRL', [small.id], []], ['USDC', ids, []]]);
  t.same(Object.keys(w.currencies[1]), ['currency', 'authorized_minor', 'spent_minor', 'available_minor', 'funding_source_ids', 'mandate_ids'], 'the same fields, in the same order');

  const doc = (await inject('GET', '/v1/openapi.json')).json();
  const row = doc.components.schemas.ConsumerWallet.properties.currencies.items.properties;
  for (const f of ['authorized_minor', 'spent_minor', 'available_minor', 'pix_balance_minor']) {
    const { description: _said, ...schema } = row[f];
    t.same(schema, { type: 'integer' }, `OpenAPI: ${f} is an integer, unbounded`);
  }
});

t.test('insights whose payment totals pass 2^53 answer the exact sums', async (t) => {
  const big = (await ok('POST', '/v1/counterparties', { kind: 'supplier', name: 'Big "exact-int" supplier' })).json();
  const plain = (await ok('POST', '/v1/counterparties', { kind: 'customer', name: 'Plain' })).json();
  const at = '2026-03-10T12:00:00.000Z';
  for (let i = 0; i < 10; i++) await ok('POST', '/v1/commerce-memory/interactions', { counterparty_id: big.id, kind: 'payment', amount_minor: 1_000_000_000_000_000, currency: 'BRL', occurred_at: at });
  await ok('POST', '/v1/commerce-memory/interactions', { counterparty_id: big.id, kind: 'payment', amount_minor: 3, currency: 'USD', occurred_at: at });
  await ok('POST', '/v1/commerce-memory/interactions', { counterparty_id: plain.id, kind: 'payment', amount_minor: 250, currency: 'BRL', occurred_at: at });
  await ok('POST', '/v1/commerce-memory/interactions', { counterparty_id: plain.id, kind: 'message', occurred_at: at });

  // Whole months (monthly buckets), whole days (daily buckets) and partial days (raw rows) all sum exactly.
  for (const q of ['since=2026-01-01T00:00:00Z&until=2026-06-01T00:00:00Z', 'since=2026-03-09T00:00:00Z&until=2026-03-12T00:00:00Z', 'since=2026-03-10T11:00:00Z&until=2026-03-10T13:00:00Z']) {
    const summary = await inject('GET', `/v1/commerce-memory/insights/counterparty-summary?${q}`);
    t.equal(summary.statusCode, 200, summary.statusCode === 200 ? '200' : summary.body);
    t.match(summary.body, `"counterparty_id":"${big.id}","name":"Big \\"exact-int\\" supplier","kind":"supplier","identifier_kind":null,"last_seen_at":"${big.last_seen_at}","interaction_count":11,"payment_count":11,"total_payment_minor":10000000000000003,"currencies":["BRL","USD"]}`, `counterparty-summary ${q}`);
    t.match(summary.body, `"interaction_count":2,"payment_count":1,"total_payment_minor":250,"currencies":["BRL"]}`, 'an ordinary row as before');

    const top = await inject('GET', `/v1/commerce-memory/insights/top-counterparties?${q}`);
    t.equal(top.statusCode, 200, top.statusCode === 200 ? '200' : top.body);
    t.match(top.body, `"rows":[{"counterparty_id":"${big.id}","name":"Big \\"exact-int\\" supplier","kind":"supplier","payment_count":11,"total_payment_minor":10000000000000003},{"counterparty_id":"${plain.id}","name":"Plain","kind":"customer","payment_count":1,"total_payment_minor":250}]}`, `top-counterparties ${q}`);
  }

  const doc = (await inject('GET', '/v1/openapi.json')).json();
  // An integer without bounds (its description aside).
  const { description: _a, ...summary } = doc.components.schemas.CounterpartySummaryRow.properties.total_payment_minor;
  const { description: _b, ...top } = doc.components.schemas.TopCounterpartyRow.properties.total_payment_minor;
  t.same(summary, { type: 'integer' });
  t.same(top, { type: 'integer' });
});
