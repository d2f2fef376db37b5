import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import t from 'tap';
import { addressKind, checkUrl, guardedRequest } from '../../src/adapters/outbound-http.ts';
import { WebhookDispatcher, defaultWebhookConfig } from '../../src/reactors/webhooks.ts';
import { until } from '../helpers/wait.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';

// Real receivers on loopback; signatures checked with the standardwebhooks package.

const { app, ledger, vault, webhooks } = await testApp(t, { webhooks: { deadThreshold: 2 }, webhookWorker: true });
const org = await bootstrapOrg(app, 'Hooks');

type Hit = { headers: http.IncomingHttpHeaders; body: string; url: string };
async function receiver(handle: (hit: Hit, n: number, res: http.ServerResponse) => void): Promise<{ url: string; hits: Hit[]; close(): Promise<void> }> {
  const hits: Hit[] = [];
  const srv = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const hit = { headers: req.headers, body, url: req.url ?? '' };
      hits.push(hit);
      handle(hit, hits.length, res);
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => srv.close(() => r())));
  return { url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}/hook`, hits, close: () => new Promise<void>((r) => srv.close(() => r())) };
}

async function endpoint(url: string, event = 'consumer.created') {
  const r = await app.inject({ method: 'POST', url: '/v1/webhook-endpoints', headers: org.key, payload: { event, name: 'hook', webhook_url: url } });
  if (r.statusCode !== 201) throw new Error(r.body);
  await ledger.settle();
  return r.json();
}
const consumerCreated = async () => (await app.inject({ method: 'POST', url: '/v1/consumers', headers: org.key, payload: {} })).json();
/** Every delivery of the endpoint is finished (delivered or dead), and there are at least `n`: nothing more will be sent. */
const finished = (triggerId: string, n: number) =>
  until(async () => {
    const { rows } = await ledger.db.query<{ all: string; pending: string }>(
      `SELECT count(*)::text AS all, count(*) FILTER (WHERE status = 'pending')::text AS pending FROM webhook_deliveries WHERE trigger_id = $1`,
      [triggerId],
    );
    return Number(rows[0]!.all) >= n && rows[0]!.pending === '0';
  }, `${n} finished deliveries`);

t.test('creation: the secret once, validation, unknown server', async (t) => {
  const rcv = await receiver((_h, _n, res) => res.end());
  const e = await endpoint(rcv.url);
  t.match(e, { id: /^trg_[A-Za-z0-9]{16}$/, status: 'active', signing_enabled: true, total_runs: 0, secret: /^whsec_/ });
  const read = (await app.inject({ method: 'GET', url: `/v1/webhook-endpoints/${e.id}`, headers: org.key })).json();
  t.equal(read.secret, undefined, 'the secret is never read back');
  const bad = await app.inject({ method: 'POST', url: '/v1/webhook-endpoints', headers: org.key, payload: { event: 'consumer.created', name: 'x', webhook_url: rcv.url, server_id: 'nope' } });
  t.same([bad.statusCode, bad.json().error.code], [400, 'unknown_server']);
  const badEvent = await app.inject({ method: 'POST', url: '/v1/webhook-endpoints', headers: org.key, payload: { event: 'Not.An.Event', name: 'x', webhook_url: rcv.url } });
  t.equal(badEvent.json().error.code, 'invalid_body');
  const list = (await app.inject({ method: 'GET', url: '/v1/webhook-endpoints?limit=1', headers: org.key })).json();
  t.equal(list.triggers.length, 1);
  t.equal(list.next_before, list.triggers[0].id);
  await app.inject({ method: 'DELETE', url: `/v1/webhook-endpoints/${e.id}`, headers: org.key });
});

t.test('a healthy receiver gets each event once, attempt 1, signed (standardwebhooks verifies)', async (t) => {
  const rcv = await receiver((_h, _n, res) => res.end('ok'));
  const e = await endpoint(rcv.url);
  const c1 = await consumerCreated();
  const c2 = await consumerCreated();
  await until(() => rcv.hits.length >= 2);
  await finished(e.id, 2);
  t.equal(rcv.hits.length, 2, 'once each');
  const wh = new Webhook(e.secret);
  for (const h of rcv.hits) {
    const verified = wh.verify(h.body, h.headers as Record<string, string>) as { id: string; event_type: string; payload: { consumer_id: string } };
    t.equal(verified.event_type, 'consumer.created');
    t.equal(h.headers['x-svc-attempt'], '1');
    t.equal(h.headers['x-svc-trigger-id'], e.id);
    t.equal(h.headers['webhook-id'], h.headers['x-svc-event-id']);
    t.equal(h.headers['x-svc-event'], 'consumer.created');
  }
  t.same(rcv.hits.map((h) => JSON.parse(h.body).payload.consumer_id).sort(), [c1.id, c2.id].sort());
  const after = await until(async () => {
    const r = (await app.inject({ method: 'GET', url: `/v1/webhook-endpoints/${e.id}`, headers: org.key })).json();
    return r.total_runs === 2 ? r : undefined;
  });
  t.match(after.last_run_at, /Z$/);
  const deliveries = (await app.inject({ method: 'GET', url: `/v1/webhook-endpoints/${e.id}/deliveries`, headers: org.key })).json().deliveries;
  const detail = (await app.inject({ method: 'GET', url: `/v1/webhook-endpoints/${e.id}/deliveries/${deliveries[0].id}`, headers: org.key })).json();
  t.match(detail, { delivery: { status: 'delivered', attempt: 1 }, request: { headers: { 'x-svc-attempt': '1' } }, response: { status: 200, body: 'ok' }, event: { event_type: 'consumer.created' } });
  t.equal((await app.inject({ method: 'GET', url: `/v1/webhook-endpoints/${e.id}/deliveries/abc`, headers: org.key })).json().error.code, 'invalid_delivery_id');
  t.equal((await app.inject({ method: 'GET', url: `/v1/webhook-endpoints/${e.id}/deliveries/12345678901234567890`, headers: org.key })).json().error.code, 'invalid_delivery_id');
  await app.inject({ method: 'DELETE', url: `/v1/webhook-endpoints/${e.id}`, headers: org.key });
});

t.test('failing twice then healthy: attempts 1-3 with the same event id', async (t) => {
  const rcv = await receiver((_h, n, res) => {
    res.statusCode = n <= 2 ? 500 : 204;
    res.end();
  });
  const e = await endpoint(rcv.url);
  await consumerCreated();
  await until(() => rcv.hits.length >= 3);
  t.same(rcv.hits.map((h) => h.headers['x-svc-attempt']), ['1', '2', '3']);
  t.equal(new Set(rcv.hits.map((h) => h.headers['webhook-id'])).size, 1);
  t.ok(rcv.hits.every((h) => new Webhook(e.secret).verify(h.body, h.headers as Record<string, string>)), 'each attempt signed with its own timestamp');
  await app.inject({ method: 'DELETE', url: `/v1/webhook-endpoints/${e.id}`, headers: org.key });
});

t.test('always failing: the whole schedule, then the dead-letter list; enough dead deliveries pause into error', async (t) => {
  const rcv = await receiver((_h, _n, res) => {
    res.statusCode = 503;
    res.end('down');
  });
  const e = await endpoint(rcv.url);
  await consumerCreated();
  await consumerCreated();
  const dlq = await until(async () => {
    const r = (await app.inject({ method: 'GET', url: `/v1/webhook-endpoints/${e.id}/dlq`, headers: org.key })).json().dead_letters;
    return r.length >= 2 ? r : undefined;
  });
  t.ok(dlq.every((d: { attempt: number }) => d.attempt === 4), 'the last allowed attempt (1 + 3 retries)');
  const status = await until(async () => {
    const r = (await app.inject({ method: 'GET', url: `/v1/webhook-endpoints/${e.id}`, headers: org.key })).json();
    return r.status === 'error' ? r : undefined;
  });
  t.equal(status.total_runs, 0, 'only delivered attempts count');
  const types = (await ledger.store.readStream(`webhook_endpoint-${e.id}`)).map((x) => x.type);
  t.ok(types.includes('webhook_endpoint.status_changed'), 'the auto-pause is an event');
  await app.inject({ method: 'DELETE', url: `/v1/webhook-endpoints/${e.id}`, headers: org.key });
});

t.test('410 dead-letters at once; a redirect fails and is never followed; slow receivers time out; huge bodies are cut at 16 KiB', async (t) => {
  const target = await receiver((_h, _n, res) => res.end('should never be reached'));
  const gone = await receiver((_h, _n, res) => {
    res.statusCode = 410;
    res.end();
  });
  const redirect = await receiver((_h, _n, res) => {
    res.statusCode = 302;
    res.setHeader('location', target.url);
    res.end();
  });
  // Answers after the client's timeout (5 s, test/helpers/app.ts) has surely fired: its timer starts later.
  const slow = await receiver((_h, _n, res) => setTimeout(() => res.end(), 6_000));
  const huge = await receiver((_h, _n, res) => res.end('x'.repeat(100_000)));
  const eps = { gone: await endpoint(gone.url), redirect: await endpoint(redirect.url), slow: await endpoint(slow.url), huge: await endpoint(huge.url) };
  await consumerCreated();
  const detail = async (id: string) => {
    const ds = (await app.inject({ method: 'GET', url: `/v1/webhook-endpoints/${id}/deliveries`, headers: org.key })).json().deliveries;
    return ds[0] ? (await app.inject({ method: 'GET', url: `/v1/webhook-endpoints/${id}/deliveries/${ds[0].id}`, headers: org.key })).json() : undefined;
  };
  const g = await until(async () => ((await detail(eps.gone.id))?.delivery.status === 'dead' ? detail(eps.gone.id) : undefined));
  t.same([g.delivery.attempt, g.response.status], [1, 410]);
  const r = await until(async () => ((await detail(eps.redirect.id))?.delivery.attempt >= 2 ? detail(eps.redirect.id) : undefined));
  t.equal(r.response.status, 302);
  t.equal(target.hits.length, 0, 'the redirect was not followed');
  const s = await until(async () => ((await detail(eps.slow.id))?.response?.error ? detail(eps.slow.id) : undefined));
  t.match(s.response.error, /timed out/);
  const h = await until(async () => ((await detail(eps.huge.id))?.delivery.status === 'delivered' ? detail(eps.huge.id) : undefined));
  t.equal(h.response.body.length, 16_384);
  t.equal(h.response.truncated, true);
  for (const e of Object.values(eps)) await app.inject({ method: 'DELETE', url: `/v1/webhook-endpoints/${e.id}`, headers: org.key });
});

t.test('paused: events wait and are delivered after reactivation, none lost, none twice', async (t) => {
  const rcv = await receiver((_h, _n, res) => res.end());
  const e = await endpoint(rcv.url);
  await app.inject({ method: 'PATCH', url: `/v1/webhook-endpoints/${e.id}`, headers: org.key, payload: { status: 'paused' } });
  const made = [await consumerCreated(), await consumerCreated(), await consumerCreated()];
  await until(async () => (await ledger.db.query('SELECT 1 FROM webhook_deliveries WHERE trigger_id = $1', [e.id])).rowCount === 3, 'three pending deliveries');
  await webhooks.drain({});
  t.equal(rcv.hits.length, 0, 'nothing sent while paused, after a full worker pass');
  await app.inject({ method: 'PATCH', url: `/v1/webhook-endpoints/${e.id}`, headers: org.key, payload: { status: 'active' } });
  await until(() => rcv.hits.length >= 3);
  await finished(e.id, 3);
  t.same(rcv.hits.map((h) => JSON.parse(h.body).payload.consumer_id).sort(), made.map((c) => c.id).sort());
  await app.inject({ method: 'DELETE', url: `/v1/webhook-endpoints/${e.id}`, headers: org.key });
});

t.test('replay, redeliver and retry-pending', async (t) => {
  const rcv = await receiver((_h, _n, res) => res.end());
  const e = await endpoint(rcv.url);
  await consumerCreated();
  await until(() => rcv.hits.length >= 1);
  const eventId = rcv.hits[0]!.headers['webhook-id'] as string;
  const replay = await app.inject({ method: 'POST', url: `/v1/events/${eventId}/replay`, headers: org.key });
  t.same(replay.json(), { event_id: eventId, dispatched: 1, trigger_id: null });
  await until(() => rcv.hits.length >= 2);
  t.equal(rcv.hits[1]!.headers['webhook-id'], eventId, 'replay keeps the event id, mints no event');
  const other = await endpoint(rcv.url, 'agent.registered');
  t.match((await app.inject({ method: 'POST', url: `/v1/events/${eventId}/replay?trigger_id=${other.id}`, headers: org.key })).json().error, { code: 'trigger_event_mismatch', details: { trigger_event: 'agent.registered', event_type: 'consumer.created' } });
  t.equal((await app.inject({ method: 'POST', url: `/v1/events/${eventId}/replay?trigger_id=trg_nope`, headers: org.key })).json().error.code, 'trigger_not_found');
  t.equal((await app.inject({ method: 'POST', url: `/v1/events/00000000-0000-4000-8000-000000000000/replay`, headers: org.key })).json().error.code, 'not_found');
  await app.inject({ method: 'PATCH', url: `/v1/webhook-endpoints/${e.id}`, headers: org.key, payload: { status: 'paused' } });
  t.match((await app.inject({ method: 'POST', url: `/v1/events/${eventId}/replay?trigger_id=${e.id}`, headers: org.key })).json().error, { code: 'trigger_not_active', details: { status: 'paused' } });
  const deliveries = (await app.inject({ method: 'GET', url: `/v1/webhook-endpoints/${e.id}/deliveries`, headers: org.key })).json().deliveries;
  const re = await app.inject({ method: 'POST', url: `/v1/webhook-endpoints/deliveries/${deliveries[0].id}/redeliver`, headers: org.key });
  t.equal(re.statusCode, 202);
  t.match(re.json(), { redelivery_id: /^\d+$/, trigger_id: e.id, event_id: eventId, trigger_status: 'paused' });
  await webhooks.drain({});
  const before = rcv.hits.length;
  await app.inject({ method: 'PATCH', url: `/v1/webhook-endpoints/${e.id}`, headers: org.key, payload: { status: 'active' } });
  const drained = (await app.inject({ method: 'POST', url: '/v1/webhook-endpoints/retry-pending', headers: org.key })).json();
  t.match(drained, { scanned: Number, delivered: Number, failed: 0, dead: 0 });
  await until(() => rcv.hits.length >= before + 1);
  t.equal((await app.inject({ method: 'POST', url: '/v1/webhook-endpoints/deliveries/abc/redeliver', headers: org.key })).json().error.code, 'invalid_delivery_id');
  for (const x of [e, other]) await app.inject({ method: 'DELETE', url: `/v1/webhook-endpoints/${x.id}`, headers: org.key });
});

t.test('a restart with deliveries pending sends each exactly once', async (t) => {
  const rcv = await receiver((_h, _n, res) => res.end());
  const e = await endpoint(rcv.url);
  await app.inject({ method: 'PATCH', url: `/v1/webhook-endpoints/${e.id}`, headers: org.key, payload: { status: 'paused' } });
  for (let i = 0; i < 3; i++) await consumerCreated();
  await webhooks.stop();
  await app.inject({ method: 'PATCH', url: `/v1/webhook-endpoints/${e.id}`, headers: org.key, payload: { status: 'active' } });
  const fresh = new WebhookDispatcher(ledger.db, ledger.store, vault, ledger.readSide.progress, { ...webhooks.cfg, workerIntervalMs: 30 });
  await fresh.start();
  t.teardown(() => fresh.stop());
  await until(() => rcv.hits.length >= 3);
  await finished(e.id, 3);
  t.equal(rcv.hits.length, 3);
  t.equal(new Set(rcv.hits.map((h) => h.headers['webhook-id'])).size, 3, 'none twice');
});

const REFUSED = { message: /^refused target/ };

t.test('SSRF: refused targets, in every spelling', async (t) => {
  const none = { loopback: false, private: false };
  for (const url of ['http://127.0.0.1/', 'http://[::1]/', 'http://[::ffff:127.0.0.1]/', 'http://2130706433/', 'http://0x7f000001/', 'http://169.254.169.254/latest/meta-data', 'http://10.0.0.1/', 'http://localhost:8080/', 'http://[fe80::1]/', 'http://192.168.1.1/']) {
    t.throws(() => checkUrl(url, none), REFUSED, url);
  }
  t.throws(() => checkUrl('ftp://example.com/', none), REFUSED);
  t.throws(() => checkUrl('http://user:pw@example.com/', none), REFUSED);
  t.equal(addressKind('8.8.8.8'), 'public');
  // A name that resolves to loopback is refused at connect time (the resolver stands in for DNS).
  const toLoopback = async () => [{ address: '127.0.0.1', family: 4 }];
  await t.rejects(guardedRequest('http://innocent.example/', none, { resolve: toLoopback }), REFUSED);
  await t.rejects(guardedRequest('http://innocent.example/', none, { resolve: async () => [{ address: '::ffff:10.1.2.3', family: 6 }] }), REFUSED);
  const loopbackOnly = { loopback: true, private: false };
  t.doesNotThrow(() => checkUrl('http://127.0.0.1:9/', loopbackOnly), 'allowed when the environment says so');
  t.throws(() => checkUrl('http://10.0.0.1/', loopbackOnly), REFUSED, 'private still refused');
  const refused = await app.inject({ method: 'POST', url: '/v1/webhook-endpoints', headers: org.key, payload: { event: 'consumer.created', name: 'x', webhook_url: 'http://169.254.169.254/' } });
  t.same([refused.statusCode, refused.json().error.code], [400, 'invalid_webhook_url']);
  void defaultWebhookConfig;
});
