import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import t from 'tap';
import { bootstrapOrg, testApp, testClock } from '../helpers/app.ts';

// Inbound provider webhooks: signed by the provider with the connection's
// webhook secret (here by the standardwebhooks package, an independent
// implementation), recorded as connection.webhook_received, fanned out to our
// outbound endpoints bound to that server_id (verified with standardwebhooks
// again); a bad signature, a stale timestamp and a replay are refused and
// write nothing.

const clock = testClock();
const { app, ledger, sandboxProviders } = await testApp(t, { providers: true, webhookWorker: true, now: clock.now });
const sb = sandboxProviders!;
const org = await bootstrapOrg(app, 'Inbound');

const hits: { headers: http.IncomingHttpHeaders; body: string }[] = [];
const srv = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    hits.push({ headers: req.headers, body });
    res.end('ok');
  });
});
await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
t.teardown(() => new Promise<void>((r) => srv.close(() => r())));
const receiverUrl = `http://127.0.0.1:${(srv.address() as AddressInfo).port}/in`;

async function until<T>(f: () => Promise<T | undefined> | T | undefined, ms = 60_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 25));
  }
}

const conn = (await app.inject({ method: 'POST', url: '/v1/connections', headers: org.key, payload: { server_id: 'acme-payments', secret: sb.issueCredential('acme-payments') } })).json();
const secret = (await app.inject({ method: 'PUT', url: `/v1/connections/${conn.id}/webhook-secret`, headers: org.key })).json().secret as string;
// Two outbound endpoints: one bound to acme-payments, one bound to another provider.
const mk = async (server_id: string) => (await app.inject({ method: 'POST', url: '/v1/webhook-endpoints', headers: org.key, payload: { event: 'connection.webhook_received', name: server_id, webhook_url: receiverUrl, server_id } })).json();
const bound = await mk('acme-payments');
const elsewhere = await mk('banco-seguro');
// Setup checks throw rather than assert: an assertion at the top level lets tap's
// root test end while a slow setup is still awaited on a busy machine.
if (!/^trg_/.test(bound.id) || bound.server_id !== 'acme-payments') throw new Error(`endpoint not created: ${JSON.stringify(bound)}`);
await ledger.settle();

const url = `/v1/webhooks/acme-payments/${conn.id}`;
function signed(id: string, payload: unknown, at = clock.now(), key = secret) {
  const body = JSON.stringify(payload);
  const signature = new Webhook(key).sign(id, at, body);
  return { body, headers: { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': signature } };
}
const post = (s: { body: string; headers: Record<string, string> }, u = url) => app.inject({ method: 'POST', url: u, headers: s.headers, payload: s.body });
const head = () => ledger.store.headPosition();

t.test('a valid delivery is recorded and fanned out to the endpoint bound to the server', async (t) => {
  const payload = { type: 'charge.succeeded', data: { id: 'ch_1', amount_minor: 1000 } };
  const r = await post(signed('msg_1', payload));
  t.equal(r.statusCode, 200, r.body);
  t.same(r.json(), { received: true, delivery_id: 'msg_1', event_type: 'connection.webhook_received' });
  const events = (await ledger.store.readAll({ maxCount: 100_000 })).filter((e) => e.type === 'connection.webhook_received');
  t.equal(events.length, 1, 'recorded once');
  t.match(events[0]!.data, { connection_id: conn.id, server_id: 'acme-payments', delivery_id: 'msg_1', provider_event_type: 'charge.succeeded', payload });
  t.equal(events[0]!.metadata.org_id, org.orgId);
  t.equal(events[0]!.metadata.project_id, org.projectId);
  const hit = await until(() => hits.find((h) => h.headers['x-svc-trigger-id'] === bound.id));
  const verified = new Webhook(bound.secret).verify(hit.body, hit.headers as Record<string, string>) as { event_type: string; payload: { delivery_id: string; payload: unknown } };
  t.equal(verified.event_type, 'connection.webhook_received', 'standardwebhooks verifies our outbound signature');
  t.same(verified.payload.payload, payload);
  // Deliveries of one event are dispatched in one transaction: once the bound endpoint has its delivery, any other match would too.
  const { rows } = await ledger.db.query<{ trigger_id: string }>('SELECT trigger_id FROM webhook_deliveries WHERE event_id = $1', [events[0]!.id]);
  t.same(rows.map((r) => r.trigger_id), [bound.id], 'only the endpoint bound to acme-payments got a delivery');
  t.notOk(hits.some((h) => h.headers['x-svc-trigger-id'] === elsewhere.id), 'an endpoint bound to another server gets nothing');
});

t.test('refusals write nothing', async (t) => {
  const cases: [string, () => Promise<import('fastify').LightMyRequestResponse>, number, string][] = [
    ['bad signature', () => post(signed('msg_2', { a: 1 }, clock.now(), 'whsec_' + Buffer.alloc(32, 1).toString('base64'))), 401, 'webhook_signature_invalid'],
    ['tampered body', async () => {
      const s = signed('msg_3', { a: 1 });
      return post({ ...s, body: JSON.stringify({ a: 2 }) });
    }, 401, 'webhook_signature_invalid'],
    ['stale timestamp', () => post(signed('msg_4', { a: 1 }, new Date(clock.now().getTime() - 10 * 60_000))), 400, 'webhook_timestamp_stale'],
    ['future timestamp', () => post(signed('msg_5', { a: 1 }, new Date(clock.now().getTime() + 10 * 60_000))), 400, 'webhook_timestamp_stale'],
    ['replay', () => post(signed('msg_1', { type: 'charge.succeeded' })), 409, 'webhook_replayed'],
    ['missing headers', () => app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload: '{}' }), 401, 'webhook_signature_invalid'],
    ['unknown connection', () => post(signed('msg_6', {}), '/v1/webhooks/acme-payments/ca_unknownConnection00'), 404, 'not_found'],
    ['wrong server', () => post(signed('msg_7', {}), `/v1/webhooks/banco-seguro/${conn.id}`), 404, 'not_found'],
    ['not JSON', async () => {
      const at = clock.now();
      const body = 'not json';
      return post({ body, headers: { 'content-type': 'text/plain', 'webhook-id': 'msg_8', 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': new Webhook(secret).sign('msg_8', at, body) } });
    }, 400, 'invalid_webhook_body'],
  ];
  for (const [name, send, status, code] of cases) {
    const before = await head();
    const r = await send();
    t.equal(r.statusCode, status, `${name}: ${status}`);
    t.equal(r.json().error.code, code, `${name}: ${code}`);
    t.equal(await head(), before, `${name}: nothing written`);
  }
});

t.test('a connection without a webhook secret, or revoked, verifies nothing', async (t) => {
  const c2 = (await app.inject({ method: 'POST', url: '/v1/connections', headers: org.key, payload: { server_id: 'banco-seguro', secret: sb.issueCredential('banco-seguro') } })).json();
  const before = await head();
  const r = await post(signed('msg_9', {}), `/v1/webhooks/banco-seguro/${c2.id}`);
  t.same([r.statusCode, r.json().error.code], [401, 'webhook_signature_invalid']);
  t.equal(await head(), before);
  await app.inject({ method: 'POST', url: `/v1/connections/${conn.id}/revoke`, headers: org.key });
  const before2 = await head();
  const gone = await post(signed('msg_10', {}));
  t.equal(gone.statusCode, 404, 'a revoked connection receives nothing');
  t.equal(await head(), before2);
});
