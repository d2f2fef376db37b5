import t, { type Test } from 'tap';
import { chainItems, verifyOrgChain } from '../../src/audit/verifier.ts';
import { mandateStream } from '../../commands/mandate.ts';
import { platform } from '../helpers/app.ts';
import { call, testCluster } from '../helpers/cluster.ts';
import { until } from '../helpers/wait.ts';

// A rolling restart of one of two instances under 50 concurrent spends
// (issue 38, docs/deployment.md "Rolling restart"): through the balancer,
// clients spend continuously while the second instance drains and closes as
// SIGTERM does, the first serves alone, and a new second instance on the same
// database takes the old one's place. No answer is a 5xx, no client sees a
// connection fail, every spend answered 201 is in the organization's sealed
// audit chain and on its mandate's card, and no mandate's cap is exceeded.
// Every phase ends on a condition (answers counted), never on the clock.

const CLIENTS = 50;
/** Clients spending on one mandate at a time (the cap is contended across both instances). */
const PER_GROUP = 5;
/** Spends on one mandate before its group moves to a new one: its card (newest 100) shows all of them. */
const PER_MANDATE = 90;
const CAP = 1_500n;
const PER_TX = 100n;

const c = await testCluster(t, { checkpointEveryEntries: 500, checkpointIntervalMs: 1_000 });
const LB = c.balancer.url;

const org = await (async () => {
  const made = await call(c.urls[0]!, 'POST', '/v1/orgs', platform, { name: 'Rolling', owner_email: 'owner+rolling@example.com' });
  const owner = { ...platform, 'x-svc-user': made.body.owner.user_id as string };
  const key = await call(c.urls[0]!, 'POST', '/v1/api-keys', owner, { name: 'k', environment: 'test' });
  return { orgId: made.body.org.id as string, key: { authorization: `Bearer ${key.body.key}` } };
})();
const consumer = await call(LB, 'POST', '/v1/consumers', org.key, { display_name: 'Ana' });
await call(LB, 'POST', '/v1/agents', org.key, { agent_id: 'buyer', principal_ref: 'p' });

type Mandate = { id: string; approved: Map<string, bigint>; declined: Set<string>; remaining: bigint[] };
const mandates: Mandate[] = [];
const seen = { answered: 0, statuses: new Map<number, number>(), declines: new Set<string>(), failures: [] as string[], serverErrors: [] as string[] };

async function newMandate(n: number): Promise<Mandate> {
  const body = { consumer_id: consumer.body.id, agent_id: 'buyer', purpose: 'rolling', merchant_allowlist: ['shop@pix.example'], merchant_pin_kind: 'pix-key', cap_minor: String(CAP), per_tx_cap_minor: String(PER_TX), currency: 'BRL', expires_at: Math.floor(Date.now() / 1000) + 3600 };
  const r = await call(LB, 'POST', '/v1/mandates', { ...org.key, 'idempotency-key': `mandate-${n}` }, body);
  if (r.status !== 201) throw new Error(`a mandate answered ${r.status}: ${JSON.stringify(r.body)}`);
  const m: Mandate = { id: r.body.id, approved: new Map(), declined: new Set(), remaining: [] };
  mandates.push(m);
  return m;
}

let made = 0;

/** A group's mandate for its next spend: counted before any await, so each mandate gets exactly PER_MANDATE spends at most. */
function group() {
  let used = PER_MANDATE;
  let current: Promise<Mandate> | undefined;
  return () => {
    if (used >= PER_MANDATE) {
      used = 0;
      current = newMandate(made++);
    }
    used++;
    return current!;
  };
}

let stop = false;
const groups = Array.from({ length: CLIENTS / PER_GROUP }, group);

async function client(i: number): Promise<void> {
  for (let n = 0; !stop; n++) {
    let m: Mandate;
    let r: Awaited<ReturnType<typeof call>>;
    try {
      m = await groups[i % groups.length]!();
      r = await call(LB, 'POST', `/v1/consumers/mandates/${m.id}/spend`, { ...org.key, 'idempotency-key': `spend-${i}-${n}` }, { amount_minor: String(1 + ((i * 31 + n * 17) % 60)), currency: 'BRL', merchant: 'shop@pix.example' });
    } catch (err) {
      // A connection failure, or a mandate not granted: this client stops (the phases below stop waiting).
      seen.failures.push(String(err));
      return;
    }
    seen.answered++;
    seen.statuses.set(r.status, (seen.statuses.get(r.status) ?? 0) + 1);
    if (r.status >= 500) seen.serverErrors.push(`${r.status} ${JSON.stringify(r.body)}`);
    if (r.status === 201) {
      m.approved.set(r.body.transaction_id, BigInt(r.body.amount_minor));
      m.remaining.push(BigInt(r.body.remaining_minor));
    } else if (r.status === 422) {
      m.declined.add(r.body.error.details.transaction_id);
      seen.declines.add(r.body.error.code);
    }
  }
}

t.test('a rolling restart of one of two instances under 50 concurrent spends', async (t) => {
  const load = Array.from({ length: CLIENTS }, (_, i) => client(i));
  try {
    await restartUnderLoad(t);
  } finally {
    stop = true;
    await Promise.all(load);
  }
  t.comment(`${seen.answered} spends on ${mandates.length} mandates; statuses ${JSON.stringify(Object.fromEntries(seen.statuses))}; per instance slot ${c.balancer.sent.join(' / ')}`);
  t.same(seen.failures, [], 'no client saw a connection fail');
  t.same(seen.serverErrors, [], 'no answer was a 5xx');
  t.same([...seen.statuses.keys()].filter((s) => s !== 201 && s !== 422), [], 'every spend approved (201) or declined by the mandate (422)');
  t.ok((seen.statuses.get(201) ?? 0) > 0, 'spends approved');
  t.same([...seen.declines], (seen.statuses.get(422) ?? 0) > 0 ? ['total_cap_exceeded'] : [], 'a decline is a spend past its mandate\'s cap');
});

/** Both instances serve; the second drains and closes; the first serves alone; a new second takes its slot and serves. */
async function restartUnderLoad(t: Test): Promise<void> {
  // Each phase waits for answers; a client that failed ends the wait (the assertions say why).
  const answers = (what: string, done: () => boolean) => until(() => seen.failures.length > 0 || done(), what);
  await answers('spends answered through both instances', () => seen.answered >= 150 && c.balancer.sent[1]! > 0);
  const atDrain = { answered: seen.answered, second: c.balancer.sent[1]! };
  await c.stopSecond();
  t.comment(`the second instance answered ${c.balancer.sent[1]! - atDrain.second} requests after its drain began; ${seen.answered - atDrain.answered} answers in all meanwhile`);
  const drained = seen.answered;
  await answers('spends answered while the second instance is down', () => seen.answered >= drained + 150);
  t.ok(c.balancer.resent > 0, `the balancer sent ${c.balancer.resent} refused requests on to the first instance`);
  await c.startSecond();
  const restarted = c.balancer.sent[1]!;
  await answers('spends answered by the restarted instance', () => c.balancer.sent[1]! >= restarted + 50);
}

t.test('the caps hold, and every acknowledged spend is on its card', async (t) => {
  for (const m of mandates) {
    const spent = [...m.approved.values()].reduce((a, b) => a + b, 0n);
    t.ok(spent <= CAP, `${m.id}: ${spent} spent of ${CAP}`);
    if (m.remaining.length) t.equal(m.remaining.reduce((a, b) => (a < b ? a : b)), CAP - spent, `${m.id}: the last approval's remaining is the cap less every approved spend`);
    const card = await call(LB, 'GET', `/v1/consumers/mandates/${m.id}/card?limit=100`, org.key);
    t.equal(card.status, 200);
    const approved = (card.body.authorizations as { transaction_id: string; decision: string }[]).filter((a) => a.decision === 'approved').map((a) => a.transaction_id);
    const declined = (card.body.authorizations as { transaction_id: string; decision: string }[]).filter((a) => a.decision === 'declined').map((a) => a.transaction_id);
    t.same(approved.sort(), [...m.approved.keys()].sort(), `${m.id}: the card's approvals are exactly the spends answered 201`);
    t.same(declined.sort(), [...m.declined].sort(), `${m.id}: the card's declines are exactly the spends answered 422`);
  }
});

t.test('every acknowledged spend is in the sealed audit chain', async (t) => {
  const store = c.first.ledger.store;
  // Each spend answered 201 is a mandate.spend_approved event in the log.
  const eventOf = new Map<string, string>();
  for (const m of mandates) {
    for (const e of await store.readStream(mandateStream(m.id), { maxCount: 100_000 })) {
      if (e.type === 'mandate.spend_approved') eventOf.set((e.data as { transaction_id: string }).transaction_id, e.id);
    }
  }
  const acknowledged = mandates.flatMap((m) => [...m.approved.keys()]);
  t.same(acknowledged.filter((txn) => !eventOf.has(txn)), [], 'every spend answered 201 is in the log');
  const missing = await until(
    async () => {
      // A version 1 entry names its source event; from a switch on (AUDIT_FORMAT=2) the event is its own entry.
      const sealed = new Set<string>();
      for await (const item of chainItems(store, org.orgId)) sealed.add('entry' in item ? item.entry.source.event_id : item.linked.id);
      const left = acknowledged.filter((txn) => !sealed.has(eventOf.get(txn)!));
      return left.length === 0 ? left : undefined;
    },
    'every acknowledged spend sealed in the chain',
    undefined,
    250,
  );
  t.same(missing, [], `all ${acknowledged.length} acknowledged spends sealed in audit-${org.orgId}`);
  const report = await verifyOrgChain(store, org.orgId, c.first.ledger.key, c.first.ledger.origin);
  t.ok(report.ok, 'the chain verifies');
});
