import t from 'tap';
import { bootstrapOrg, secondInstance, testApp, testClock } from '../helpers/app.ts';

// The product CLI's directed-pay flow against us, in the shapes its source
// sends and reads (codespar-core packages/cli 0.6.0):
// - `mandate create --slot CUR:RAIL:CAP:PER_TX ...` (src/commands/mandate.ts):
//   POST /v1/consents/init {agent_id, intent: {purpose, cap_minor, per_tx_cap_minor,
//   currency, mandate_ttl_seconds, merchant_allowlist, merchant_pin_kind, slots}}
//   → reads {token}; then POST /v1/consents/{token}/submit {consumer_id, rail,
//   provider_token} → reads mandate_id;
// - `spend` (src/commands/spend.ts): POST /v1/consumers/mandates/{id}/spend
//   {amount_minor, payee, agent_id};
// - `wallet` (src/commands/wallet.ts): GET /v1/consumers/{id}/wallet → currencies
//   [{currency, rail, authorized_minor, spent_minor, available_minor}];
// - `transfer` (src/commands/transfer.ts): POST /v1/consumers/{id}/wallet/transfer
//   {from_currency, to_currency, amount_minor, execute?, agent_id?, purpose?} →
//   {route, converts, engine, executable, executed, transaction_id, from, to}.

const clock = testClock();
const lines: string[] = [];
const a = await testApp(t, { now: clock.now, logStream: { write: (l) => void lines.push(l) } });
const { app, ledger } = a;
// A second instance of the service on the same database (the concurrent spends go through both).
const appB = await secondInstance(t, a, { app: { now: clock.now } });
const org = await bootstrapOrg(app, 'Wallet');
const other = await bootstrapOrg(app, 'Elsewhere');

/** The CLI's ApiClient: JSON bodies, Bearer key. */
const api = (headers: Record<string, string>) => async (method: 'GET' | 'POST', path: string, body?: unknown) => {
  const r = await app.inject({ method, url: path, headers: { ...headers, 'content-type': 'application/json' }, ...(body !== undefined ? { payload: JSON.stringify(body) } : {}) });
  return { status: r.statusCode, body: r.body ? r.json() : undefined };
};
const cli = api(org.key);
const must = async (p: Promise<{ status: number; body: any }>, status: number) => {
  const r = await p;
  if (r.status !== status) throw new Error(`${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
};

await must(cli('POST', '/v1/agents', { agent_id: 'buyer', principal_ref: 'p' }), 201);
const PIX = 'loja@pix.example';
const EVM = '0x1111111111111111111111111111111111111111';

/** `codespar mandate create --consumer c --agent buyer --purpose … --payee a,b --slot … [--slot …]`, as the CLI builds it. */
async function mandateCreate(consumer: string, slots: { currency: string; rail: string; cap_minor: number; per_tx_cap_minor: number }[], key = cli) {
  const intent = {
    purpose: 'weekly groceries',
    cap_minor: slots[0]!.cap_minor,
    per_tx_cap_minor: slots[0]!.per_tx_cap_minor,
    currency: slots[0]!.currency,
    mandate_ttl_seconds: 86400,
    merchant_allowlist: [PIX, EVM],
    merchant_pin_kind: 'merchant-id',
    slots,
  };
  const init = await must(key('POST', '/v1/consents/init', { agent_id: 'buyer', intent }), 201);
  return { init, submit: (body: Record<string, unknown> = { consumer_id: consumer, rail: 'usdc-onchain', provider_token: `usdc-onchain:${consumer}` }) => key('POST', `/v1/consents/${encodeURIComponent(init.token)}/submit`, body) };
}
const twoSlots = [
  { currency: 'BRL', rail: 'pix-celcoin', cap_minor: 1000, per_tx_cap_minor: 300 },
  { currency: 'USDC', rail: 'usdc-onchain', cap_minor: 500, per_tx_cap_minor: 100 },
];
const newConsumer = async () => (await must(cli('POST', '/v1/consumers', { display_name: 'Ana' }), 201)).id as string;
const walletOf = async (consumer: string) => (await must(cli('GET', `/v1/consumers/${consumer}/wallet`), 200)).currencies as { currency: string; rail?: string; authorized_minor: number; spent_minor: number; available_minor: number; funding_source_ids: string[] }[];

t.test('a two-slot mandate through the consent flow; a Pix key draws BRL, an EVM address USDC, each against its own caps', async (t) => {
  const consumer = await newConsumer();
  const flow = await mandateCreate(consumer, twoSlots);
  t.match(flow.init, { token: /\./, expires_at: /Z$/ });
  const submitted = await must(flow.submit(), 201);
  const mandateId = submitted.mandate_id;
  t.match(submitted, { mandate_id: /^mdt_/, consumer_id: consumer, status: 'active' });
  t.same(submitted.funding_sources.map((f: { currency: string; rail: string }) => [f.currency, f.rail]), [['BRL', 'pix-celcoin'], ['USDC', 'usdc-onchain']], 'one funding source per slot');
  t.same(submitted.mandate.slots.map((s: { currency: string; cap_minor: string }) => [s.currency, s.cap_minor]), [['BRL', '1000'], ['USDC', '500']]);
  t.notOk(JSON.stringify(submitted).includes(flow.init.token), 'the token is not echoed');
  const secret = flow.init.token.split('.')[1];
  t.ok(lines.some((l) => l.includes('/v1/consents/[redacted]/submit')), 'the submit is logged');
  t.notOk(lines.some((l) => l.includes(secret)), 'the token never reaches a log line');

  const spend = (payee: string, amount: number) => cli('POST', `/v1/consumers/mandates/${mandateId}/spend`, { amount_minor: amount, payee, agent_id: 'buyer' });
  const pix = await spend(PIX, 300);
  t.equal(pix.status, 201, JSON.stringify(pix.body));
  t.match(pix.body, { currency: 'BRL', rail: 'pix-celcoin', payee: PIX, remaining_minor: '700', decision: 'approved' });
  const chain = await spend(EVM, 100);
  t.equal(chain.status, 201);
  t.match(chain.body, { currency: 'USDC', rail: 'usdc-onchain', payee: EVM, remaining_minor: '400' });
  // Each slot's own per-transaction cap: 150 is within BRL's 300, over USDC's 100.
  t.equal((await spend(PIX, 150)).status, 201);
  const over = await spend(EVM, 150);
  t.same([over.status, over.body.error.code], [422, 'per_tx_cap_exceeded']);
  // Each slot's own total: BRL has 550 left, USDC 400.
  for (let i = 0; i < 4; i++) t.equal((await spend(EVM, 100)).status, 201);
  const usdcDone = await spend(EVM, 1);
  t.same([usdcDone.status, usdcDone.body.error.code], [422, 'total_cap_exceeded'], 'the USDC slot is spent');
  t.equal((await spend(PIX, 300)).status, 201, 'while the BRL slot still pays');

  const wallet = await walletOf(consumer);
  t.same(
    wallet.map((w) => [w.currency, w.rail, w.authorized_minor, w.spent_minor, w.available_minor, w.funding_source_ids.length]),
    [
      ['BRL', 'pix-celcoin', 1000, 750, 250, 1],
      ['USDC', 'usdc-onchain', 500, 500, 0, 1],
    ],
  );
  const read = await must(cli('GET', `/v1/mandates/${mandateId}`), 200);
  t.match(read, { currency: 'BRL', cap_minor: '1000' });
  t.same(read.slots.map((s: { currency: string; spent_minor: string; available_minor: string }) => [s.currency, s.spent_minor, s.available_minor]), [['BRL', '750', '250'], ['USDC', '500', '0']]);

  const stranger = await cli('POST', `/v1/consumers/mandates/${mandateId}/spend`, { amount_minor: 1, payee: PIX, agent_id: 'someone-else' });
  t.same([stranger.status, stranger.body.error.code], [403, 'mandate_agent_mismatch']);
});

t.test('a payee whose currency has no slot is refused currency_not_authorized (403)', async (t) => {
  const consumer = await newConsumer();
  const only = await must((await mandateCreate(consumer, [twoSlots[0]!])).submit(), 201);
  const r = await cli('POST', `/v1/consumers/mandates/${only.mandate_id}/spend`, { amount_minor: 10, payee: EVM, agent_id: 'buyer' });
  t.same([r.status, r.body.error.code], [403, 'currency_not_authorized']);
  const url = await cli('POST', `/v1/consumers/mandates/${only.mandate_id}/spend`, { amount_minor: 10, payee: 'https://api.example/paid', agent_id: 'buyer' });
  t.same([url.status, url.body.error.code], [403, 'currency_not_authorized'], 'an x402 URL is paid in USDC');
  // The legacy single-currency path of the CLI: --cap/--per-tx-cap/--currency, the submit's rail names the slot's.
  const legacy = await cli('POST', '/v1/consents/init', {
    agent_id: 'buyer',
    intent: { purpose: 'p', cap_minor: 100, per_tx_cap_minor: 50, currency: 'USDC', mandate_ttl_seconds: 3600, merchant_allowlist: [EVM], merchant_pin_kind: 'merchant-id' },
  });
  const m = await must(cli('POST', `/v1/consents/${legacy.body.token}/submit`, { consumer_id: consumer, rail: 'usdc-onchain', provider_token: `usdc-onchain:${consumer}` }), 201);
  t.same(m.mandate.slots.map((s: { currency: string; rail: string }) => [s.currency, s.rail]), [['USDC', 'usdc-onchain']]);
  t.equal((await cli('POST', `/v1/consumers/mandates/${m.mandate_id}/spend`, { amount_minor: 50, payee: EVM, agent_id: 'buyer' })).status, 201);
});

t.test('a consent token is single-use and bound to its organization: refusals write nothing', async (t) => {
  const consumer = await newConsumer();
  const flow = await mandateCreate(consumer, twoSlots);
  // Another organization's consumer: answered as absent, nothing written, the token still good.
  const theirs = (await api(other.key)('POST', '/v1/consumers', {})).body.id;
  const before = await ledger.store.headPosition();
  const foreign = await flow.submit({ consumer_id: theirs, rail: 'usdc-onchain', provider_token: 'x' });
  t.same([foreign.status, foreign.body.error.code], [404, 'not_found']);
  t.equal(await ledger.store.headPosition(), before, 'nothing written');

  const first = await flow.submit();
  t.equal(first.status, 201);
  const after = await ledger.store.headPosition();
  const again = await flow.submit();
  t.same([again.status, again.body.error.code], [409, 'consent_already_used']);
  t.equal(again.body.error.details.mandate_id, first.body.mandate_id);
  t.equal(await ledger.store.headPosition(), after, 'the second use wrote nothing');

  const forged = await cli('POST', `/v1/consents/${encodeURIComponent(flow.init.token.slice(0, -1) + (flow.init.token.endsWith('A') ? 'B' : 'A'))}/submit`, { consumer_id: consumer, rail: 'usdc-onchain' });
  t.same([forged.status, forged.body.error.code], [404, 'consent_not_found']);
  // Racing submits of one fresh token: exactly one mandate.
  const race = await mandateCreate(consumer, twoSlots);
  const answers = await Promise.all(Array.from({ length: 5 }, () => race.submit()));
  t.same(answers.map((a) => a.status).sort(), [201, 409, 409, 409, 409]);
  // An expired token.
  const late = await mandateCreate(consumer, twoSlots);
  clock.advance(31 * 60_000);
  const expired = await late.submit();
  t.same([expired.status, expired.body.error.code], [410, 'consent_expired']);
});

t.test('transfer: quote, then execute, both slots checked in the wallet; the same slot and an unsupported route refused', async (t) => {
  const consumer = await newConsumer();
  const m = await must((await mandateCreate(consumer, [...twoSlots, { currency: 'MXN', rail: 'spei', cap_minor: 100, per_tx_cap_minor: 100 }])).submit(), 201);
  const before = await walletOf(consumer);
  const body = { from_currency: 'BRL', to_currency: 'USDC', amount_minor: 250, agent_id: 'buyer', purpose: 'top up' };
  const quote = await cli('POST', `/v1/consumers/${consumer}/wallet/transfer`, body);
  t.equal(quote.status, 200, JSON.stringify(quote.body));
  t.match(quote.body, { consumer_id: consumer, route: 'BRL->USDC', converts: true, engine: 'sandbox-ramp', executable: true, executed: false, from: { currency: 'BRL', rail: 'pix-celcoin', amount_minor: 250, cap_available_minor: 1000 }, to: { currency: 'USDC', rail: 'usdc-onchain', amount_minor: 50 } });
  t.same(await walletOf(consumer), before, 'a quote moves nothing');

  const done = await cli('POST', `/v1/consumers/${consumer}/wallet/transfer`, { ...body, execute: true });
  t.equal(done.status, 201, JSON.stringify(done.body));
  t.match(done.body, { executed: true, transaction_id: /^trf_/, status: 'completed', route: 'BRL->USDC', from: { cap_available_minor: 750 } });
  const wallet = await walletOf(consumer);
  t.same(
    wallet.filter((w) => w.currency !== 'MXN').map((w) => [w.currency, w.authorized_minor, w.spent_minor, w.available_minor]),
    [
      ['BRL', 750, 0, 750],
      ['USDC', 550, 0, 550],
    ],
    'BRL gave 250, USDC gained 50 at the quoted rate',
  );
  // Sealed in the organization's audit chain, like every business event.
  const audit = (await must(cli('GET', '/v1/audit-events?event_type=mandate.transfer_executed&limit=50'), 200)).events as { event_type: string; payload: Record<string, unknown> }[];
  t.match(audit.find((e) => e.event_type === 'mandate.transfer_executed')?.payload, { transfer_id: done.body.transaction_id, from_currency: 'BRL', to_currency: 'USDC', amount_minor: '250', credited_minor: '50' });
  const consents = (await must(cli('GET', '/v1/audit-events?event_type=directed_consent.&limit=200'), 200)).events as { event_type: string }[];
  t.ok(consents.some((e) => e.event_type === 'directed_consent.submitted'), 'the consent flow too');
  // The moved authority spends: USDC per-tx is still 100, its total now 550.
  t.equal((await cli('POST', `/v1/consumers/mandates/${m.mandate_id}/spend`, { amount_minor: 100, payee: EVM, agent_id: 'buyer' })).body.remaining_minor, '450');

  const same = await cli('POST', `/v1/consumers/${consumer}/wallet/transfer`, { from_currency: 'USDC', to_currency: 'USDC', amount_minor: 10 });
  t.same([same.status, same.body.error.code], [422, 'same_slot_transfer']);
  const route = await cli('POST', `/v1/consumers/${consumer}/wallet/transfer`, { from_currency: 'MXN', to_currency: 'USDC', amount_minor: 10, execute: true });
  t.same([route.status, route.body.error.code], [422, 'unsupported_transfer_route']);
  const unslotted = await cli('POST', `/v1/consumers/${consumer}/wallet/transfer`, { from_currency: 'BRL', to_currency: 'BRLA', amount_minor: 10 });
  t.same([unslotted.status, unslotted.body.error.code], [422, 'currency_not_authorized']);
  const tooMuch = await cli('POST', `/v1/consumers/${consumer}/wallet/transfer`, { from_currency: 'BRL', to_currency: 'USDC', amount_minor: 301, execute: true });
  t.same([tooMuch.status, tooMuch.body.error.code, tooMuch.body.error.details.decision], [422, 'per_tx_cap_exceeded', 'declined'], "the source slot's own caps");
  t.same(await walletOf(consumer).then((w) => w.find((x) => x.currency === 'BRL')!.available_minor), 750, 'a refused transfer moves nothing');
  // A live key: the test consumer is not in live (test and live are two worlds, issue 60).
  const liveKey = api({ authorization: `Bearer ${org.liveKey}` });
  t.same((await liveKey('POST', `/v1/consumers/${consumer}/wallet/transfer`, body)).status, 404, 'the test consumer from a live key');
  // A live consumer's live mandate: the quote says so, and the move is not wired (no live ramp).
  const liveConsumer = (await must(liveKey('POST', '/v1/consumers', { display_name: 'Live Ana' }), 201)).id as string;
  await must((await mandateCreate(liveConsumer, twoSlots, liveKey)).submit(), 201);
  t.match((await liveKey('POST', `/v1/consumers/${liveConsumer}/wallet/transfer`, body)).body, { executable: false, engine: null, to: { amount_minor: null } });
  const live = await liveKey('POST', `/v1/consumers/${liveConsumer}/wallet/transfer`, { ...body, execute: true });
  t.same([live.status, live.body.error.code], [501, 'not_wired']);
  t.equal((await api(other.key)('POST', `/v1/consumers/${consumer}/wallet/transfer`, body)).status, 404, "another organization's consumer");
});

t.test('caps hold under 50 concurrent spends across two slots, through two instances', async (t) => {
  const consumer = await newConsumer();
  const m = await must((await mandateCreate(consumer, twoSlots)).submit(), 201);
  const viaB = async (body: unknown) => {
    const r = await appB.inject({ method: 'POST', url: `/v1/consumers/mandates/${m.mandate_id}/spend`, headers: { ...org.key, 'content-type': 'application/json' }, payload: JSON.stringify(body) });
    return { status: r.statusCode, body: r.json() };
  };
  // BRL: 25 spends of 100 against a total of 1000; USDC: 25 of 100 against 500; every fourth through instance B.
  const answers = await Promise.all(
    Array.from({ length: 50 }, (_, i) => {
      const body = { amount_minor: 100, payee: i % 2 === 0 ? PIX : EVM, agent_id: 'buyer' };
      return i % 4 < 2 ? cli('POST', `/v1/consumers/mandates/${m.mandate_id}/spend`, body) : viaB(body);
    }),
  );
  const ok = (payee: string) => answers.filter((a, i) => (i % 2 === 0 ? PIX : EVM) === payee && a.status === 201).length;
  t.equal(ok(PIX), 10, 'BRL: exactly its cap');
  t.equal(ok(EVM), 5, 'USDC: exactly its cap');
  t.ok(answers.every((a) => a.status === 201 || (a.status === 422 && a.body.error.code === 'total_cap_exceeded')), 'every refusal is the total cap');
  const wallet = await walletOf(consumer);
  t.same(wallet.map((w) => [w.currency, w.spent_minor, w.available_minor]), [['BRL', 1000, 0], ['USDC', 500, 0]]);
  const seenByB = (await appB.inject({ method: 'GET', url: `/v1/consumers/${consumer}/wallet`, headers: org.key })).json();
  t.same(seenByB.currencies.map((w: { currency: string; spent_minor: number }) => [w.currency, w.spent_minor]), [['BRL', 1000], ['USDC', 500]], 'the same through instance B');
});

t.test('policies apply to transfers and slot spends as to spends', async (t) => {
  const consumer = await newConsumer();
  const m = await must((await mandateCreate(consumer, twoSlots)).submit(), 201);
  const deny = await must(cli('POST', '/v1/policies', { name: 'no transfers', type: 'deny', agents: ['buyer'], tools: ['wallet.transfer'] }), 201);
  const before = await ledger.store.headPosition();
  const body = { from_currency: 'BRL', to_currency: 'USDC', amount_minor: 100 };
  const refused = await cli('POST', `/v1/consumers/${consumer}/wallet/transfer`, { ...body, execute: true });
  t.same([refused.status, refused.body], [403, { reason: 'denied_by_policy', ruleType: 'deny', ruleId: deny.id }]);
  const written = await ledger.store.readAll({ after: before, maxCount: 100 });
  const decided = written.filter((e) => e.type === 'policy.decided').map((e) => e.data as { decision: string; tool_name: string });
  t.match(decided, [{ decision: 'denied', tool_name: 'wallet.transfer' }], 'the decision is recorded');
  t.same(written.filter((e) => e.type.startsWith('mandate.')), [], 'no transfer recorded');
  t.equal((await cli('POST', `/v1/consumers/${consumer}/wallet/transfer`, body)).status, 200, 'a quote is not a move');
  t.equal((await cli('POST', `/v1/consumers/mandates/${m.mandate_id}/spend`, { amount_minor: 10, payee: EVM, agent_id: 'buyer' })).status, 201, 'the rule names transfers only');
  const noUsdc = await must(cli('POST', '/v1/policies', { name: 'no usdc spends', type: 'deny', agents: ['buyer'], tools: ['mandate.spend'] }), 201);
  const spend = await cli('POST', `/v1/consumers/mandates/${m.mandate_id}/spend`, { amount_minor: 10, payee: PIX, agent_id: 'buyer' });
  t.same([spend.status, spend.body.ruleId], [403, noUsdc.id]);
  for (const p of [deny, noUsdc]) await app.inject({ method: 'DELETE', url: `/v1/policies/${p.id}`, headers: org.key });
  t.equal((await cli('POST', `/v1/consumers/${consumer}/wallet/transfer`, { ...body, execute: true })).status, 201, 'allowed again once removed');
});
