import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { bootstrapOrg, testApp, testClock } from '../helpers/app.ts';
import { GENEROUS_MS, until } from '../helpers/wait.ts';

// Outbound webhooks at their edges: retry-pending attempts each delivery
// once, replay matches as live dispatch does (server_id), audit configuration
// and incident events are delivered, and list limits read as the audit list's.
// The worker is off: every pass is one the test asks for; the clock is injected.

const clock = testClock();
const SCHEDULE = [60_000, 120_000, 180_000];
const { app, ledger, webhooks } = await testApp(t, { now: clock.now, webhooks: { scheduleMs: SCHEDULE, jitter: 0, deadThreshold: 1_000 }, webhookWorker: false });
const org = await bootstrapOrg(app, 'HookEdges');

async function receiver(status: number): Promise<{ url: string; hits: http.IncomingHttpHeaders[] }> {
  const hits: http.IncomingHttpHeaders[] = [];
  const srv = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      hits.push(req.headers);
      res.statusCode = status;
      res.end();
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => srv.close(() => r())));
  return { url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}/hook`, hits };
}

async function endpoint(url: string, event: string, serverId?: string): Promise<{ id: string }> {
  const r = await app.inject({ method: 'POST', url: '/v1/webhook-endpoints', headers: org.key, payload: { event, name: 'hook', webhook_url: url, ...(serverId ? { server_id: serverId } : {}) } });
  if (r.statusCode !== 201) throw new Error(r.body);
  await ledger.settle();
  return r.json();
}
const remove = (id: string) => app.inject({ method: 'DELETE', url: `/v1/webhook-endpoints/${id}`, headers: org.key });
const consumerCreated = () => app.inject({ method: 'POST', url: '/v1/consumers', headers: org.key, payload: {} });
const retryPending = async () => (await app.inject({ method: 'POST', url: '/v1/webhook-endpoints/retry-pending', headers: org.key })).json();

type Row = { id: string; attempt: number; status: string; wait_ms: number | null };
/** The endpoint's deliveries, with how long after its last attempt the next one is due. */
const deliveries = async (triggerId: string) =>
  (
    await ledger.db.query<Row>(
      `SELECT d.id::text, d.attempt, d.status,
         (SELECT (extract(epoch FROM d.next_attempt_at - a.created_at) * 1000)::int FROM webhook_attempts a WHERE a.delivery_id = d.id ORDER BY a.attempt DESC LIMIT 1) AS wait_ms
       FROM webhook_deliveries d WHERE d.trigger_id = $1 ORDER BY d.id`,
      [triggerId],
    )
  ).rows;
/** Waits until the dispatcher has passed everything appended so far. */
async function dispatched(): Promise<void> {
  const head = await ledger.store.headPosition();
  if (!(await ledger.readSide.progress.waitForOne('webhook-dispatcher', head, GENEROUS_MS))) throw new Error('the webhook dispatcher did not catch up');
}

t.test('retry-pending attempts each pending delivery once; a failure waits for its next scheduled retry', async (t) => {
  const rcv = await receiver(503);
  const e = await endpoint(rcv.url, 'consumer.created');
  for (let i = 0; i < 3; i++) await consumerCreated();
  await dispatched();
  t.equal((await deliveries(e.id)).length, 3, 'three pending deliveries');
  t.match(await webhooks.drain({}), { scanned: 3, redispatched: 3, failed: 3 }, 'a worker pass: attempt 1 each');

  t.same(await retryPending(), { scanned: 3, redispatched: 3, delivered: 0, failed: 3, dead: 0 }, 'one attempt per delivery, counted honestly');
  t.equal(rcv.hits.length, 6);
  t.same(
    (await deliveries(e.id)).map((d) => [d.attempt, d.status, d.wait_ms]),
    [
      [2, 'pending', SCHEDULE[1]],
      [2, 'pending', SCHEDULE[1]],
      [2, 'pending', SCHEDULE[1]],
    ],
    'attempt 2 failed; attempt 3 is due after the schedule’s delay',
  );
  t.same(await webhooks.drain({}), { scanned: 0, redispatched: 0, delivered: 0, failed: 0, dead: 0 }, 'nothing is due before its delay');
  clock.advance(SCHEDULE[1]!);
  t.same(await webhooks.drain({}), { scanned: 3, redispatched: 3, delivered: 0, failed: 3, dead: 0 }, 'due once the delay has passed: attempt 3');
  t.same((await deliveries(e.id)).map((d) => d.wait_ms), [SCHEDULE[2], SCHEDULE[2], SCHEDULE[2]]);

  t.same(await retryPending(), { scanned: 3, redispatched: 3, delivered: 0, failed: 0, dead: 3 }, 'the last allowed attempt dead-letters');
  t.same((await deliveries(e.id)).map((d) => [d.attempt, d.status]), [[4, 'dead'], [4, 'dead'], [4, 'dead']]);
  t.same(await retryPending(), { scanned: 0, redispatched: 0, delivered: 0, failed: 0, dead: 0 }, 'nothing pending is left');
  t.equal(rcv.hits.length, 12, 'four attempts per delivery in all');
  t.equal((await app.inject({ method: 'GET', url: `/v1/webhook-endpoints/${e.id}`, headers: org.key })).json().status, 'active');
  await remove(e.id);
});

t.test('replay matches endpoints by the live dispatcher’s rule, server_id binding included', async (t) => {
  const rcv = await receiver(200);
  const pix = await endpoint(rcv.url, 'webhook_endpoint.created', 'pix');
  const x402 = await endpoint(rcv.url, 'webhook_endpoint.created', 'x402');
  const unbound = await endpoint(rcv.url, 'webhook_endpoint.created');
  // Its creation is a webhook_endpoint.created event whose server_id is x402.
  const subject = await endpoint(rcv.url, 'agent.registered', 'x402');
  await dispatched();
  const ev = (await ledger.db.query<{ id: string }>(`SELECT id::text FROM webhook_events WHERE event_type = 'webhook_endpoint.created' AND payload->>'trigger_id' = $1`, [subject.id])).rows[0]!;
  const targets = async (kind: string) => (await ledger.db.query<{ trigger_id: string }>(`SELECT trigger_id FROM webhook_deliveries WHERE event_id = $1 AND kind = $2 ORDER BY trigger_id`, [ev.id, kind])).rows.map((r) => r.trigger_id);
  const expected = [x402.id, unbound.id].sort();
  t.same(await targets('original'), expected, 'live dispatch skipped the endpoint bound to pix');

  const all = await app.inject({ method: 'POST', url: `/v1/events/${ev.id}/replay`, headers: org.key });
  t.same([all.statusCode, all.json()], [202, { event_id: ev.id, dispatched: 2, trigger_id: null }]);
  t.same(await targets('replay'), expected, 'replay reaches the same endpoints');

  const one = await app.inject({ method: 'POST', url: `/v1/events/${ev.id}/replay?trigger_id=${pix.id}`, headers: org.key });
  t.equal(one.statusCode, 400);
  t.match(one.json().error, { code: 'trigger_event_mismatch', details: { trigger_event: 'webhook_endpoint.created', event_type: 'webhook_endpoint.created', trigger_server_id: 'pix', event_server_id: 'x402' } });
  const bound = await app.inject({ method: 'POST', url: `/v1/events/${ev.id}/replay?trigger_id=${x402.id}`, headers: org.key });
  t.same([bound.statusCode, bound.json()], [202, { event_id: ev.id, dispatched: 1, trigger_id: x402.id }]);
  t.same(await targets('replay'), [...expected, x402.id].sort(), 'nothing queued for the pix endpoint');
  for (const e of [pix, x402, unbound, subject]) await remove(e.id);
});

t.test('audit configuration events are delivered; the sealer’s own output is not', async (t) => {
  const rcv = await receiver(200);
  const e = await endpoint(rcv.url, 'audit.config_updated');
  const patched = await app.inject({ method: 'PATCH', url: '/v1/audit-events/config', headers: org.owner, payload: { hot_max_staleness_seconds: 7_200 } });
  t.equal(patched.statusCode, 200, patched.body);
  await ledger.settle();
  await dispatched();
  const rows = (await ledger.db.query<{ event_type: string; payload: { hot_max_staleness_seconds?: number } }>(`SELECT ev.event_type, ev.payload FROM webhook_deliveries d JOIN webhook_events ev ON ev.id = d.event_id WHERE d.trigger_id = $1`, [e.id])).rows;
  t.match(rows, [{ event_type: 'audit.config_updated', payload: { hot_max_staleness_seconds: 7_200 } }], 'one delivery of the update');
  t.equal(rows.length, 1);
  const sealed = (await ledger.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_events WHERE event_type IN ('audit.entry_sealed', 'audit.checkpoint_signed')`)).rows[0]!.n;
  t.equal(sealed, 0, 'the chain and its checkpoints are never stored as webhook events');
  await remove(e.id);
});

t.test('deliveries and dlq: limit clamped 1..200 (0 gives 1, spec 4.13); absent, empty or not a number gives 50', async (t) => {
  const rcv = await receiver(410);
  const e = await endpoint(rcv.url, 'consumer.created');
  await consumerCreated();
  await dispatched();
  const [first] = await deliveries(e.id);
  for (let i = 0; i < 54; i++) {
    const r = await app.inject({ method: 'POST', url: `/v1/webhook-endpoints/deliveries/${first!.id}/redeliver`, headers: org.key });
    if (r.statusCode !== 202) throw new Error(r.body);
  }
  t.match(await webhooks.drain({}), { scanned: 55, dead: 55 }, '55 dead letters (410)');
  const count = async (list: 'deliveries' | 'dlq', qs: string) => {
    const r = await app.inject({ method: 'GET', url: `/v1/webhook-endpoints/${e.id}/${list}${qs}`, headers: org.key });
    if (r.statusCode !== 200) throw new Error(r.body);
    return (list === 'deliveries' ? r.json().deliveries : r.json().dead_letters).length;
  };
  for (const list of ['deliveries', 'dlq'] as const) {
    const got: Record<string, number> = {};
    for (const qs of ['', '?limit=', '?limit=abc', '?limit=0', '?limit=-5', '?limit=2', '?limit=2.9', '?limit=500']) got[qs] = await count(list, qs);
    t.same(got, { '': 50, '?limit=': 50, '?limit=abc': 50, '?limit=0': 1, '?limit=-5': 1, '?limit=2': 2, '?limit=2.9': 2, '?limit=500': 55 }, list);
  }
  await remove(e.id);
});
