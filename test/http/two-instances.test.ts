import t from 'tap';
import { isAuditStream } from '../../src/audit/chain.ts';
import { linkOf } from '../../src/audit/link.ts';
import { chainItems, verifyOrgChain } from '../../src/audit/verifier.ts';
import { listCheckpoints } from '../../src/projector/checkpoints.ts';
import { bootstrapOrg, secondInstance, testApp } from '../helpers/app.ts';

// Two service instances on one database, as two processes run them: each with
// its own pool, event store (its own group commit and inline followers), read
// side, sealer and command-state cache. Commands go through both at once;
// every 2xx is visible through both at once; the audit chain stays gapless and
// no projection records an error.

const a = await testApp(t);
const appB = await secondInstance(t, a, { sealer: { checkpointEveryEntries: 4, checkpointIntervalMs: 60_000 } });
const apps = [a.app, appB];

const org = await bootstrapOrg(a.app, 'Twins');
const inject = (i: number, method: 'GET' | 'POST', url: string, payload?: Record<string, unknown>) => apps[i]!.inject({ method, url, headers: org.key, ...(payload ? { payload } : {}) });
const agent = await inject(1, 'POST', '/v1/agents', { agent_id: 'buyer', principal_ref: 'p' });
if (agent.statusCode !== 201) throw new Error(agent.body);
const consumer = (await inject(0, 'POST', '/v1/consumers', {})).json();
const mandates: string[] = [];
for (let i = 0; i < 4; i++) {
  const r = await inject(i % 2, 'POST', '/v1/mandates', { consumer_id: consumer.id, agent_id: 'buyer', purpose: 'twins', merchant_allowlist: ['shop@pix.example'], merchant_pin_kind: 'pix-key', cap_minor: '1000', per_tx_cap_minor: '300', currency: 'BRL', expires_at: Math.floor(Date.now() / 1000) + 3600 });
  if (r.statusCode !== 201) throw new Error(r.body);
  mandates.push(r.json().id);
}

t.test('concurrent commands through both instances: every 2xx visible through both, caps hold, chains gapless, no projection error', async (t) => {
  const approved = new Map<string, bigint>(mandates.map((m) => [m, 0n]));
  let twoXX = 0;
  const problems: string[] = [];
  await Promise.all(
    Array.from({ length: 80 }, async (_, i) => {
      const via = i % 2;
      const m = mandates[i % mandates.length]!;
      if (i % 8 === 7) {
        const verb = i % 16 === 7 ? 'pause' : 'resume';
        const r = await inject(via, 'POST', `/v1/mandates/${m}/${verb}`);
        if (r.statusCode !== 200) return;
        twoXX++;
        // What this answer says is the current state, through both instances (unless a later command moved it).
        return;
      }
      const r = await inject(via, 'POST', `/v1/consumers/mandates/${m}/spend`, { amount_minor: '70', currency: 'BRL', merchant: 'shop@pix.example' });
      if (r.statusCode !== 201) {
        if (!['total_cap_exceeded', 'mandate_not_active'].includes(r.json().error?.code)) problems.push(`spend ${r.statusCode} ${r.body}`);
        return;
      }
      twoXX++;
      const txn = r.json().transaction_id as string;
      approved.set(m, approved.get(m)! + 70n);
      for (const other of [0, 1]) {
        const card = (await inject(other, 'GET', `/v1/consumers/mandates/${m}/card`)).json();
        if (!card.authorizations.some((x: { transaction_id: string }) => x.transaction_id === txn)) problems.push(`${txn} (201 through instance ${via}) not visible through instance ${other}`);
      }
    }),
  );
  t.same(problems, [], 'every 2xx visible through both instances');
  t.ok(twoXX > 20, `${twoXX} commands answered 2xx`);
  for (const [m, total] of approved) {
    t.ok(total <= 1000n, `cap of ${m} holds`);
    for (const i of [0, 1]) {
      const card = (await inject(i, 'GET', `/v1/consumers/mandates/${m}/card`)).json();
      const sum = (card.authorizations as { decision: string; amount_minor: string }[]).filter((x) => x.decision === 'approved').reduce((n, x) => n + BigInt(x.amount_minor), 0n);
      t.equal(sum, total, `approved spends of ${m} through instance ${i}`);
    }
  }
  // The audit chain: one entry per business event, gapless, verified.
  await a.ledger.settle();
  const business = (await a.ledger.store.readAll({ maxCount: 10_000 })).filter((e) => !isAuditStream(e.streamName) && e.metadata.org_id === org.orgId);
  // Version 1: each event sealed by an entry of audit-<org>; version 2 (AUDIT_FORMAT=2): from the switch on, each event is its own entry, with its link.
  const items = [];
  for await (const item of chainItems(a.ledger.store, org.orgId)) items.push(item);
  const sources = items.map((i) => ('linked' in i ? i.linked.id : (i.entry as { source: { event_id: string } }).source.event_id));
  t.equal(items.length, business.length, 'one entry per event, none twice');
  t.same(new Set(sources), new Set(business.map((e) => e.id)), 'every event of the organization is in its chain');
  t.same(
    items.map((i) => ('linked' in i ? linkOf(i.linked)?.sequence_number : (i.entry as { sequence_number: number }).sequence_number)),
    items.map((_, i) => i + 1),
    'gapless sequence',
  );
  const report = await verifyOrgChain(a.ledger.store, org.orgId, a.ledger.key, a.ledger.origin);
  t.ok(report.ok, JSON.stringify(report.problems?.slice(0, 3)));
  const failed = (await listCheckpoints(a.ledger.db)).filter((c) => c.status !== 'running' || c.error);
  t.same(failed, [], 'no follower failed');
});

t.test('a policy acknowledged through one instance binds the next spend through the other, whose copy of the policies is older', async (t) => {
  const created = await inject(0, 'POST', '/v1/mandates', { consumer_id: consumer.id, agent_id: 'buyer', purpose: 'twins', merchant_allowlist: ['shop@pix.example'], merchant_pin_kind: 'pix-key', cap_minor: '1000', per_tx_cap_minor: '300', currency: 'BRL', expires_at: Math.floor(Date.now() / 1000) + 3600 });
  const m = created.json().id as string;
  const spendVia = (i: number) => inject(i, 'POST', `/v1/consumers/mandates/${m}/spend`, { amount_minor: '10', currency: 'BRL', merchant: 'shop@pix.example' });
  const approvedCount = async () => ((await inject(1, 'GET', `/v1/consumers/mandates/${m}/card`)).json().authorizations as { decision: string }[]).filter((x) => x.decision === 'approved').length;
  // Instance 0 folds the policies (none) and keeps its copy.
  t.equal((await spendVia(0)).statusCode, 201);
  t.equal((await spendVia(0)).statusCode, 201, 'decided on its copy');
  // A deny rule acknowledged through instance 1.
  const deny = await inject(1, 'POST', '/v1/policies', { name: 'stop spends', type: 'deny', agents: ['buyer'], tools: ['mandate.spend'] });
  t.equal(deny.statusCode, 201, deny.body);
  const refused = await spendVia(0);
  t.equal(refused.statusCode, 403, 'the next spend through instance 0 is denied');
  t.same(refused.json(), { reason: 'denied_by_policy', ruleType: 'deny', ruleId: deny.json().id });
  t.equal(await approvedCount(), 2, 'nothing recorded for it');
  // Removed through instance 1: instance 0's copy (with the rule) is refused by the guard, and the spend evaluated again.
  const removed = await apps[1]!.inject({ method: 'DELETE', url: `/v1/policies/${deny.json().id}`, headers: org.key });
  t.equal(removed.statusCode, 204, removed.body);
  t.equal((await spendVia(0)).statusCode, 201, 'allowed again through instance 0');
  t.equal(await approvedCount(), 3);
});
