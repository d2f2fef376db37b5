import { EventSource } from 'eventsource';
import { Webhook } from 'standardwebhooks';
import t from 'tap';
import { checkpointStream } from '../../src/audit/chain.ts';
import { chainItems, verifyOrgChain } from '../../src/audit/verifier.ts';
import { platform } from '../helpers/app.ts';
import { call, testCluster } from '../helpers/cluster.ts';

// Two instances on one PostgreSQL behind a round-robin balancer: each family's
// writes through one instance are what the other reads next; an SSE stream
// held by one sees a change written through the other; an approval held
// through one is decided through the other; every organization's audit chain
// is signed whichever instance sealed it; a key revoked through one is refused
// by the other on the very next request.

const INTERVAL_MS = 1_000;
const c = await testCluster(t, { providers: true, checkpointEveryEntries: 100_000, checkpointIntervalMs: INTERVAL_MS });
const [A, B] = c.urls as [string, string];
const LB = c.balancer.url;

async function until<T>(f: () => Promise<T | undefined | false> | T | undefined | false, what: string, ms = 60_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function bootstrap(base: string, name: string) {
  const org = await call(base, 'POST', '/v1/orgs', platform, { name, owner_email: `owner+${name.toLowerCase()}@example.com` });
  if (org.status !== 201) throw new Error(JSON.stringify(org.body));
  const owner = { ...platform, 'x-svc-user': org.body.owner.user_id as string };
  const key = await call(base, 'POST', '/v1/api-keys', owner, { name: 'k', environment: 'test' });
  return { orgId: org.body.org.id as string, projectId: org.body.default_project.id as string, owner, key: { authorization: `Bearer ${key.body.key}` } };
}

const org = await bootstrap(A, 'Cluster');

t.test('each family written through one instance reads back through the other', async (t) => {
  const project = await call(A, 'POST', '/v1/projects', org.key, { name: 'Twin', slug: 'twin' });
  t.equal(project.status, 201);
  t.equal((await call(B, 'GET', `/v1/projects/${project.body.id}`, org.key)).body.name, 'Twin', 'project');
  t.equal((await call(B, 'PATCH', `/v1/projects/${project.body.id}`, org.key, { name: 'Renamed' })).status, 200);
  t.equal((await call(A, 'GET', `/v1/projects/${project.body.id}`, org.key)).body.name, 'Renamed', 'a rename through B, read through A at once');
  t.equal((await call(B, 'POST', '/v1/agents', org.key, { agent_id: 'buyer', principal_ref: 'p' })).status, 201);
  t.equal((await call(A, 'GET', '/v1/agents/buyer', org.key)).status, 200, 'agent');
  const consumer = await call(A, 'POST', '/v1/consumers', org.key, { display_name: 'Ana' });
  t.equal((await call(B, 'GET', `/v1/consumers/${consumer.body.id}`, org.key)).status, 200, 'consumer');
  const mandate = await call(B, 'POST', '/v1/mandates', org.key, { consumer_id: consumer.body.id, agent_id: 'buyer', purpose: 'twins', merchant_allowlist: ['shop@pix.example'], merchant_pin_kind: 'pix-key', cap_minor: '1000', per_tx_cap_minor: '500', currency: 'BRL', expires_at: Math.floor(Date.now() / 1000) + 3600 });
  t.equal(mandate.status, 201);
  const spend = await call(A, 'POST', `/v1/consumers/mandates/${mandate.body.id}/spend`, org.key, { amount_minor: '120', currency: 'BRL', merchant: 'shop@pix.example' });
  t.equal(spend.status, 201, 'a spend through A on a mandate created through B');
  const card = await call(B, 'GET', `/v1/consumers/mandates/${mandate.body.id}/card`, org.key);
  t.ok(card.body.authorizations.some((x: { transaction_id: string }) => x.transaction_id === spend.body.transaction_id), 'the spend, read through B');
  const endpoint = await call(A, 'POST', '/v1/webhook-endpoints', org.key, { event: 'mandate.revoked', name: 'hooks', webhook_url: 'https://hooks.example.com/in' });
  t.equal(endpoint.status, 201);
  t.equal((await call(B, 'GET', `/v1/webhook-endpoints/${endpoint.body.id}`, org.key)).status, 200, 'webhook endpoint');
  const policy = await call(B, 'POST', '/v1/policies', org.key, { name: 'small only', type: 'deny', agents: ['nobody'], tools: ['mandate.spend'] });
  t.equal((await call(A, 'GET', `/v1/policies/${policy.body.id}`, org.key)).status, 200, 'policy');
  t.equal((await call(A, 'DELETE', `/v1/policies/${policy.body.id}`, org.key)).status, 204);
  const counterparty = await call(B, 'POST', '/v1/counterparties', org.key, { kind: 'customer', name: 'Walk-in' });
  t.equal(counterparty.status, 201);
  t.equal((await call(A, 'GET', `/v1/counterparties/${counterparty.body.id}`, org.key)).body.name, 'Walk-in', 'commerce memory');
  const client = await call(A, 'POST', '/oauth/register', {}, { redirect_uris: ['http://127.0.0.1:9/cb'], client_name: 'Twin app' });
  t.equal(client.status, 201);
  const authorize = await fetch(`${B}/oauth/authorize?response_type=code&client_id=${client.body.client_id}&redirect_uri=${encodeURIComponent('http://127.0.0.1:9/cb')}&code_challenge=${'a'.repeat(43)}&code_challenge_method=S256&state=s`);
  t.equal(authorize.status, 200, 'an OAuth client registered through A is asked for through B');
  // Through the balancer, alternating: each answer reflects every write before it.
  for (let i = 0; i < 10; i++) {
    const r = await call(LB, 'POST', `/v1/consumers/mandates/${mandate.body.id}/spend`, org.key, { amount_minor: '10', currency: 'BRL', merchant: 'shop@pix.example' });
    t.equal(r.status, 201);
    const seen = await call(LB, 'GET', `/v1/consumers/mandates/${mandate.body.id}/card`, org.key);
    t.ok(seen.body.authorizations.some((x: { transaction_id: string }) => x.transaction_id === r.body.transaction_id), `spend ${i} visible through the next instance`);
  }
  t.ok(c.balancer.sent[0]! > 5 && c.balancer.sent[1]! > 5, `both instances served (${c.balancer.sent.join(' / ')})`);
});

t.test('an approval held through one instance is decided through the other', async (t) => {
  const consumer = await call(A, 'POST', '/v1/consumers', org.key, { display_name: 'Bia' });
  const mandate = await call(A, 'POST', '/v1/mandates', org.key, { consumer_id: consumer.body.id, agent_id: 'buyer', purpose: 'held', merchant_allowlist: ['held@pix.example'], merchant_pin_kind: 'pix-key', cap_minor: '1000', per_tx_cap_minor: '500', currency: 'BRL', expires_at: Math.floor(Date.now() / 1000) + 3600 });
  const rule = await call(B, 'POST', '/v1/policies', org.key, { name: 'a person decides', type: 'approval-required', agents: ['buyer'], tools: ['mandate.spend'] });
  t.equal(rule.status, 201);
  const held = await call(A, 'POST', `/v1/consumers/mandates/${mandate.body.id}/spend`, org.key, { amount_minor: '70', currency: 'BRL', merchant: 'held@pix.example' });
  t.equal(held.status, 403);
  t.ok(held.body.approval_id, 'held for approval through A');
  const decided = await call(B, 'POST', `/v1/approvals/${held.body.approval_id}/decide`, org.owner, { decision: 'approve', reason: 'fine' });
  t.equal(decided.status, 200, JSON.stringify(decided.body));
  t.match(decided.body, { status: 'approved', execution_result: { decision: 'approved', amount_minor: '70' } }, 'executed by B');
  t.equal((await call(A, 'GET', `/v1/approvals/${held.body.approval_id}`, org.key)).body.status, 'approved', 'read through A');
  await call(A, 'DELETE', `/v1/policies/${rule.body.id}`, org.key);
});

t.test('an SSE stream held by one instance sees a change written through the other', async (t) => {
  const sb = c.first.sandboxProviders!;
  const acme = await call(A, 'POST', '/v1/connections', org.key, { server_id: 'acme-payments', secret: sb.issueCredential('acme-payments') });
  const whsec = (await call(B, 'PUT', `/v1/connections/${acme.body.id}/webhook-secret`, org.key)).body.secret as string;
  const session = await call(B, 'POST', '/v1/sessions', org.key, { servers: ['acme-payments'], user_id: 'u1' });
  const charge = await call(A, 'POST', `/v1/sessions/${session.body.id}/execute`, org.key, { tool: 'acme-payments/create_charge', input: { amount_minor: 900, currency: 'BRL' } });
  t.equal(charge.status, 200, JSON.stringify(charge.body));
  const got: { type: string; data: Record<string, unknown> }[] = [];
  const es = new EventSource(`${A}/v1/tool-calls/${charge.body.tool_call_id}/payment-status/stream`, { fetch: (u, init) => fetch(u, { ...init, headers: { ...(init?.headers ?? {}), ...org.key } }) });
  t.teardown(() => es.close());
  for (const type of ['snapshot', 'update']) es.addEventListener(type, (e) => got.push({ type, data: JSON.parse(e.data) }));
  await until(() => got.length >= 1, 'the snapshot');
  const id = 'msg_cluster_1';
  const body = JSON.stringify({ type: 'charge.updated', data: { id: charge.body.data.id, status: 'updated' } });
  const at = new Date();
  const hook = await fetch(`${B}/v1/webhooks/acme-payments/${acme.body.id}`, { method: 'POST', headers: { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': new Webhook(whsec).sign(id, at, body) }, body });
  t.equal(hook.status, 200, 'the provider webhook lands on B');
  const update = await until(() => got.find((g) => g.type === 'update'), 'the update on the stream held by A');
  t.match(update.data, { payment_status: 'updated' });
  es.close();
});

t.test('a key revoked through one instance is refused by the other on the very next request (200 trials)', async (t) => {
  let refused = 0;
  for (let i = 0; i < 200; i++) {
    const [writer, reader] = i % 2 === 0 ? [A, B] : [B, A];
    const made = await call(writer, 'POST', '/v1/api-keys', org.owner, { name: `r${i}`, environment: 'test' });
    const key = { authorization: `Bearer ${made.body.key}` };
    // The reader authenticates it once (and keeps it on this connection and in its cache).
    if ((await call(reader, 'GET', `/v1/projects/${org.projectId}`, key)).status !== 200) throw new Error(`trial ${i}: the new key was not accepted`);
    const revoked = await call(writer, 'DELETE', `/v1/api-keys/${made.body.id}`, org.owner);
    if (revoked.status !== 200) throw new Error(`trial ${i}: revoke answered ${revoked.status}`);
    if ((await call(reader, 'GET', `/v1/projects/${org.projectId}`, key)).status === 401) refused++;
  }
  t.equal(refused, 200, 'every revoked key refused by the other instance on the next request');
});

t.test('every organization written through both instances gets a signed checkpoint covering its chain', async (t) => {
  const orgs = [];
  for (let i = 0; i < 6; i++) orgs.push(await bootstrap(i % 2 ? A : B, `Chain${i}`));
  for (const [i, o] of orgs.entries()) {
    for (let k = 0; k < 4; k++) t.equal((await call(k % 2 ? A : B, 'POST', '/v1/agents', o.key, { agent_id: `a${i}-${k}`, principal_ref: 'p' })).status, 201);
  }
  const store = c.first.ledger.store;
  for (const o of orgs) {
    const chain = await until(async () => {
      const [last] = await store.readStream(checkpointStream(o.orgId), { direction: 'backwards', maxCount: 1 });
      const size = (last?.data as { size?: number } | undefined)?.size ?? 0;
      let entries = 0;
      for await (const _ of chainItems(store, o.orgId)) entries++;
      return size > 0 && size === entries ? size : undefined;
    }, `a checkpoint of ${o.orgId} covering its chain`);
    t.ok(chain >= 5, `${o.orgId}: signed at size ${chain}`);
    const report = await verifyOrgChain(store, o.orgId, c.first.ledger.key, c.first.ledger.origin);
    t.ok(report.ok, `${o.orgId}: the chain verifies`);
  }
});
