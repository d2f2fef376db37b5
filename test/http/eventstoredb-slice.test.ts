import { randomBytes } from 'node:crypto';
import t from 'tap';
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from '../../src/adapters/chain/signature.ts';
import { BASE_SEPOLIA_CHAIN_ID, BASE_SEPOLIA_USDC } from '../../src/adapters/chain/local-chain.ts';
import type { Queryable } from '../../src/postgres/db.ts';
import { rebuildProjection } from '../../src/projector/runner.ts';
import { projections } from '../../src/readside.ts';
import { mandateDecider } from '../../commands/mandate.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';

// A representative slice of the service with its log on EventStoreDB (the
// double on loopback through the official client, or the server at ESDB_URL):
// a mandate life cycle with spends, an x402 execution, an audit verification,
// and a rebuild of every projection from the log giving the live tables and
// chain roots back. Subscriptions are dropped mid-stream along the way, and a
// WrongExpectedVersion is provoked under a command: both must be invisible to
// the API.

const { app, ledger } = await testApp(t, { x402: true, store: 'esdb' });
const double = ledger.esdb; // undefined against a real server: the fault cases need the double
const org = await bootstrapOrg(app, 'Clustered');
const inject = (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: Record<string, unknown>, headers: Record<string, string> = org.key) =>
  app.inject({ method, url, headers, ...(payload !== undefined ? { payload } : {}) });

if (ledger.store.kind !== 'eventstoredb') throw new Error('the service must run on EventStoreDB here');

let mandateId = '';
t.test('a mandate life cycle with spends', async (t) => {
  t.equal((await inject('POST', '/v1/agents', { agent_id: 'buyer', principal_ref: 'p' })).statusCode, 201);
  const consumer = (await inject('POST', '/v1/consumers', { display_name: 'Ana' })).json();
  const created = await inject('POST', '/v1/mandates', {
    consumer_id: consumer.id,
    agent_id: 'buyer',
    purpose: 'weekly groceries',
    merchant_allowlist: ['shop@pix.example'],
    merchant_pin_kind: 'pix-key',
    cap_minor: '1000',
    per_tx_cap_minor: '300',
    currency: 'BRL',
    expires_at: Math.floor(Date.now() / 1000) + 3600,
  });
  t.equal(created.statusCode, 201, created.body);
  mandateId = created.json().id;
  const spend = `/v1/consumers/mandates/${mandateId}/spend`;
  const s1 = await inject('POST', spend, { amount_minor: '250', currency: 'BRL', merchant: 'shop@pix.example' });
  t.match(s1.json(), { decision: 'approved', remaining_minor: '750' });
  const refused = await inject('POST', spend, { amount_minor: '301', currency: 'BRL', merchant: 'shop@pix.example' });
  t.same([refused.statusCode, refused.json().error.code], [422, 'per_tx_cap_exceeded']);
  // The server drops every subscription mid-stream: projections and the sealer resubscribe.
  if (double) t.ok(double.dropSubscriptions() >= 1, 'subscriptions dropped');
  t.equal((await inject('POST', `/v1/mandates/${mandateId}/pause`)).json().mandate.status, 'paused');
  t.equal((await inject('POST', spend, { amount_minor: '1', currency: 'BRL', merchant: 'shop@pix.example' })).json().error.code, 'mandate_not_active');
  t.equal((await inject('POST', `/v1/mandates/${mandateId}/resume`)).json().mandate.status, 'active');
  const s2 = await inject('POST', spend, { amount_minor: '300', currency: 'BRL', merchant: 'shop@pix.example' }, { ...org.key, 'idempotency-key': 'esdb-spend-2' });
  const s2again = await inject('POST', spend, { amount_minor: '300', currency: 'BRL', merchant: 'shop@pix.example' }, { ...org.key, 'idempotency-key': 'esdb-spend-2' });
  t.same(s2again.json(), s2.json(), 'an idempotent retry answers the first result');
  t.equal(s2.json().remaining_minor, '450');
  const card = (await inject('GET', `/v1/consumers/mandates/${mandateId}/card`)).json();
  t.ok(card.authorizations.some((a: { decision: string }) => a.decision === 'declined'), 'declines are on the card')
  t.equal(card.authorizations.filter((a: { decision: string }) => a.decision === 'approved').length, 2);
});

t.test('a WrongExpectedVersion under a command: the handler re-reads and retries, as on Postgres', { skip: double ? false : 'needs the double to provoke the conflict' }, async (t) => {
  const spend = `/v1/consumers/mandates/${mandateId}/spend`;
  const stream = `mandate-${mandateId}`;
  let competitor: Promise<unknown> | undefined;
  const conflictsBefore = double!.calls.wrongExpectedVersion;
  // The first append to the mandate stream waits while another writer (the
  // command handler on its own, as another service instance would run it)
  // spends 100: the waiting append then meets a stream one revision ahead.
  double!.beforeAppend = async (s) => {
    if (s !== stream || competitor) return;
    competitor = ledger.run(
      mandateDecider,
      stream,
      { type: 'spend', tenant: { orgId: org.orgId, projectId: org.projectId }, spend: { transactionId: 'txn_competitor000001', channel: 'api', amount: 100n, currency: 'BRL', merchant: 'shop@pix.example', description: null } },
      ledger.ctx(org.orgId, { projectId: org.projectId }),
    );
    await competitor;
  };
  const mine = await inject('POST', spend, { amount_minor: '50', currency: 'BRL', merchant: 'shop@pix.example' });
  double!.beforeAppend = undefined;
  t.equal(mine.statusCode, 201, mine.body);
  t.ok(double!.calls.wrongExpectedVersion > conflictsBefore, 'the server answered WrongExpectedVersion');
  t.equal(mine.json().remaining_minor, '300', 'decided again on the competitor’s state: 450 - 100 - 50');
  const events = (await ledger.store.readStream(stream)).filter((e) => e.type.startsWith('mandate.spend') || e.type.includes('authoriz'));
  t.ok(events.length >= 4);
});

t.test('an x402 execution settles on the local chain and is sealed', async (t) => {
  const payer = privateKeyToAccount(generatePrivateKey());
  const payee = privateKeyToAccount(generatePrivateKey()).address;
  t.equal((await inject('POST', '/v1/test/x402/faucet', { address: payer.address, value_atomic: '50000000' })).statusCode, 200);
  const now = BigInt(Math.floor(Date.now() / 1000));
  const message = { from: payer.address, to: payee, value: 1_234_567n, validAfter: now - 60n, validBefore: now + 600n, nonce: `0x${randomBytes(32).toString('hex')}` as Hex };
  const domain = { name: 'USDC', version: '2', chainId: BASE_SEPOLIA_CHAIN_ID, verifyingContract: BASE_SEPOLIA_USDC as Hex };
  const signature = await payer.signTypedData({ domain, types: TRANSFER_WITH_AUTHORIZATION_TYPES, primaryType: 'TransferWithAuthorization', message });
  const body = {
    authorization: { ...message, value: message.value.toString(), validAfter: message.validAfter.toString(), validBefore: message.validBefore.toString() },
    domain,
    signature,
    intent: { payee, resource: 'https://api.example.com/report', seller: 'example', purpose: 'report', max_amount_minor: '500', total_cap_minor: '100000', resource_url: 'https://api.example.com/report' },
  };
  const r = await inject('POST', '/v1/facilitator/x402/executions', body);
  t.equal(r.statusCode, 200, r.body);
  t.match(r.json(), { status: 'executed', settlement: { money_moved: true } });
  const again = await inject('POST', '/v1/facilitator/x402/executions', body);
  t.same([again.statusCode, again.json().error.code], [409, 'authorization_already_used'], 'the nonce claim stream holds on EventStoreDB');
  const row = (await inject('GET', `/v1/facilitator/x402/executions/${r.json().foreign_authorization_id}`)).json();
  t.match(row, { status: 'executed', value_atomic: '1234567' });
});

async function snapshot(db: Queryable, table: string) {
  // Every row, in a total order (several tables share a first column value).
  const { rows } = await db.query(`SELECT * FROM ${table}`);
  return rows.map((r) => JSON.stringify(r)).sort();
}

t.test('the audit chain verifies; a rebuild of every projection gives the same tables and chain roots', async (t) => {
  // Mid-stream drops while the read side follows: every few events a subscription ends.
  if (double) double.dropSubscriptionsAfter = 3;
  for (let i = 0; i < 5; i++) t.equal((await inject('POST', '/v1/consumers', { display_name: `C${i}` })).statusCode, 201);
  if (double) double.dropSubscriptionsAfter = undefined;
  await ledger.readSide.sealer.checkpointAll(true);
  await ledger.settle();
  const verified = await ledger.readSide.verifier.verifyOrg(org.orgId);
  t.ok(verified.ok, 'a clean walk of the chain');
  const health = (await inject('GET', '/v1/audit-events/health')).json();
  t.same([health.status, health.actionable_status], ['healthy', 'healthy']);
  const checkpoints = (await inject('GET', '/v1/audit-events/checkpoints')).json();
  t.ok(checkpoints.checkpoints.length >= 1, 'signed checkpoints');
  const entries = (await inject('GET', '/v1/audit-events?limit=200')).json();

  const live: Record<string, unknown[]> = {};
  for (const p of projections) for (const tb of Object.keys(p.tables)) live[tb] = await snapshot(ledger.db, tb);
  const log = await ledger.store.readAll({ maxCount: 100_000 });
  const head = await ledger.store.headPosition();
  for (const p of projections) {
    const r = await rebuildProjection(ledger.db, ledger.store, p);
    // Only the events it handles leave the store; the rebuilt tables stand at the head.
    const handled = log.filter((e) => p.eventTypes.has(e.type)).length;
    t.equal(r.processed, handled, `${p.name}: rebuilt from its ${handled} events of ${log.length}`);
    t.equal(r.position, head, `${p.name}: at the head`);
    for (const tb of Object.keys(p.tables)) t.same(await snapshot(ledger.db, tb), live[tb], `${tb}: identical after the rebuild`);
  }
  t.same((await inject('GET', '/v1/audit-events/checkpoints')).json(), checkpoints, 'the same signed roots');
  t.same((await inject('GET', '/v1/audit-events?limit=200')).json(), entries, 'the same chain entries');
  t.ok((await ledger.readSide.verifier.verifyOrg(org.orgId)).ok, 'still verifies');
  if (double) t.ok(ledger.store.kind === 'eventstoredb' && (ledger.store as unknown as { health: { resubscriptions: number } }).health.resubscriptions > 0, 'the read side resubscribed after the drops');
});
