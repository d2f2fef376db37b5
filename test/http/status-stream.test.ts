import type { AddressInfo } from 'node:net';
import { EventSource } from 'eventsource';
import { Webhook } from 'standardwebhooks';
import t from 'tap';
import { streamConfig, type Timers } from '../../src/usecases/status-stream.ts';
import { bootstrapOrg, checkedApp, SERVICE_SECRET, testApp, testClock } from '../helpers/app.ts';

// The payment-status SSE stream with the `eventsource` client over a real
// loopback port: snapshot/update/done order, heartbeats and the 5 s / 30 min
// closes on injected timers, Last-Event-ID resume, and an update written
// through a second app instance on the same database reaching a stream held
// by the first.

/** Timers that fire only when the test advances them. */
function manualTimers() {
  let now = 0;
  let seq = 0;
  const due = new Map<number, { at: number; fn: () => void; every?: number }>();
  const timers: Timers = {
    setTimeout: (fn, ms) => (due.set(++seq, { at: now + ms, fn }), seq),
    clearTimeout: (h) => void due.delete(h as number),
    setInterval: (fn, ms) => (due.set(++seq, { at: now + ms, fn, every: ms }), seq),
    clearInterval: (h) => void due.delete(h as number),
  };
  const advance = (ms: number) => {
    const target = now + ms;
    for (;;) {
      const next = [...due.entries()].filter(([, d]) => d.at <= target).sort((a, b) => a[1].at - b[1].at)[0];
      if (!next) break;
      const [h, d] = next;
      now = d.at;
      if (d.every) d.at += d.every;
      else due.delete(h);
      d.fn();
    }
    now = target;
  };
  return { timers, advance };
}
const mt = manualTimers();
streamConfig.timers = mt.timers;
streamConfig.pollMs = 20;

const clock = testClock();
const { app, ledger, vault, sandboxProviders } = await testApp(t, { providers: true, now: clock.now });
const sb = sandboxProviders!;
const org = await bootstrapOrg(app, 'Streams');
await app.listen({ port: 0, host: '127.0.0.1' });
const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
// A second instance of the service on the same database.
const app2 = await checkedApp(t, { db: ledger.db, store: ledger.store, readSide: ledger.readSide, serviceSecret: SERVICE_SECRET, baseUrl: 'http://127.0.0.1:8081', vault, logLevel: 'silent', now: clock.now });
t.teardown(() => app2.close());

async function until<T>(f: () => T | undefined | Promise<T | undefined>, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 10));
  }
}

const acme = (await app.inject({ method: 'POST', url: '/v1/connections', headers: org.key, payload: { server_id: 'acme-payments', secret: sb.issueCredential('acme-payments') } })).json();
const whsec = (await app.inject({ method: 'PUT', url: `/v1/connections/${acme.id}/webhook-secret`, headers: org.key })).json().secret as string;
const session = (await app.inject({ method: 'POST', url: '/v1/sessions', headers: org.key, payload: { servers: ['acme-payments', 'clima'], user_id: 'u1' } })).json();
const call = (await app.inject({ method: 'POST', url: `/v1/sessions/${session.id}/execute`, headers: org.key, payload: { tool: 'acme-payments/create_charge', input: { amount_minor: 900, currency: 'BRL' } } })).json();
const chargeId = call.data.id as string;

let delivery = 0;
/** The provider's webhook, delivered through the second instance. */
async function providerSays(status: string, charge = chargeId) {
  const id = `msg_${++delivery}`;
  const body = JSON.stringify({ type: `charge.${status}`, data: { id: charge, status } });
  const at = clock.now();
  const r = await app2.inject({ method: 'POST', url: `/v1/webhooks/acme-payments/${acme.id}`, headers: { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': new Webhook(whsec).sign(id, at, body) }, payload: body });
  if (r.statusCode !== 200) throw new Error(r.body);
}

type Got = { type: string; id: string; data: Record<string, unknown> };
function listen(url: string, lastEventId?: string) {
  const got: Got[] = [];
  const es = new EventSource(url, {
    fetch: (input, init) => fetch(input, { ...init, headers: { ...(init?.headers ?? {}), ...org.key, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) } }),
  });
  for (const type of ['snapshot', 'update', 'done']) {
    es.addEventListener(type, (e) => {
      got.push({ type, id: e.lastEventId, data: JSON.parse(e.data) });
      if (type === 'done') es.close();
    });
  }
  t.teardown(() => es.close());
  return { es, got };
}
const streamUrl = `${base}/v1/tool-calls/${call.tool_call_id}/payment-status/stream`;

t.test('snapshot, updates across instances, resume with Last-Event-ID, done 5 s after terminal', async (t) => {
  const a = listen(streamUrl);
  await until(() => a.got.length === 1);
  t.match(a.got[0], { type: 'snapshot', id: '0', data: { tool_call_id: call.tool_call_id, payment_status: 'succeeded', events: [] } });
  await providerSays('updated');
  await until(() => a.got.length === 2);
  t.match(a.got[1], { type: 'update', id: '1', data: { payment_status: 'updated', event: { event_type: 'charge.updated' } } }, 'written through the second instance');
  a.es.close();

  // Disconnected: one more change; the reconnect resumes after event 1.
  await providerSays('succeeded');
  await ledger.settle();
  const b = listen(streamUrl, '1');
  await until(() => b.got.length === 1);
  t.match(b.got[0], { type: 'update', id: '2', data: { payment_status: 'succeeded' } }, 'no snapshot, no repetition, nothing lost');
  await providerSays('refunded');
  await until(() => b.got.length === 2);
  t.match(b.got[1], { type: 'update', id: '3', data: { payment_status: 'refunded' } });
  await new Promise((r) => setTimeout(r, 100));
  mt.advance(4_999);
  await new Promise((r) => setTimeout(r, 100));
  t.equal(b.got.length, 2, 'not done before 5 s');
  mt.advance(1);
  await until(() => b.got.length === 3);
  t.match(b.got[2], { type: 'done', id: '3.done', data: { status: 'refunded' } }, 'succeeded started the 5 s; the refund inside them is sent, and done carries the latest status');
  t.same(b.got.map((g) => g.type), ['update', 'update', 'done']);

  // A Last-Event-ID past every change cannot be a resume: a fresh open, with its snapshot.
  const c = listen(streamUrl, '99');
  await until(() => c.got.length >= 1);
  t.match(c.got[0], { type: 'snapshot', id: '3', data: { payment_status: 'refunded' } }, 'the snapshot first, not silence');
  c.es.close();
});

t.test('succeeded is terminal: done 5 s after it; a later refund is still recorded, on the polled view and a new stream', async (t) => {
  const charge = (await app.inject({ method: 'POST', url: `/v1/sessions/${session.id}/execute`, headers: org.key, payload: { tool: 'acme-payments/create_charge', input: { amount_minor: 300, currency: 'BRL' } } })).json();
  t.match(charge, { success: true, data: { status: 'succeeded' } });
  const url = `${base}/v1/tool-calls/${charge.tool_call_id}/payment-status/stream`;
  const s = listen(url);
  await until(() => s.got.length === 1);
  t.match(s.got[0], { type: 'snapshot', id: '0', data: { payment_status: 'succeeded' } });
  await new Promise((r) => setTimeout(r, 100));
  mt.advance(4_999);
  await new Promise((r) => setTimeout(r, 100));
  t.equal(s.got.length, 1, 'not done before 5 s');
  mt.advance(1);
  await until(() => s.got.length === 2);
  t.match(s.got[1], { type: 'done', id: '0.done', data: { tool_call_id: charge.tool_call_id, status: 'succeeded' } });

  await providerSays('refunded', charge.data.id);
  await ledger.settle();
  const polled = (await app.inject({ method: 'GET', url: `/v1/tool-calls/${charge.tool_call_id}/payment-status`, headers: org.key })).json();
  t.match(polled, { payment_status: 'refunded', events: [{ event_type: 'charge.refunded' }] }, 'the refund is recorded and polled');
  const again = listen(url);
  await until(() => again.got.length === 1);
  t.match(again.got[0], { type: 'snapshot', id: '1', data: { payment_status: 'refunded' } }, 'and a new stream opens on it');
  mt.advance(5_000);
  await until(() => again.got.length === 2);
  t.match(again.got[1], { type: 'done', data: { status: 'refunded' } });
});

t.test('heartbeat every 15 s and the 30-minute close (raw reader)', async (t) => {
  const clima = (await app.inject({ method: 'POST', url: `/v1/sessions/${session.id}/execute`, headers: org.key, payload: { tool: 'clima/get_forecast', input: { city: 'Recife' } } })).json();
  const res = await fetch(`${base}/v1/tool-calls/${clima.tool_call_id.slice(3)}/payment-status/stream`, { headers: org.key });
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /^text\/event-stream/);
  const reader = res.body!.getReader();
  let text = '';
  let closed = false;
  void (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return void (closed = true);
      text += Buffer.from(value).toString('utf8');
    }
  })();
  await until(() => text.includes('event: snapshot'));
  t.match(text, /"payment_status":"unknown","original_status":"success","idempotency_key":null/);
  t.notOk(text.includes(': heartbeat'));
  mt.advance(15_000);
  await until(() => text.includes(': heartbeat'));
  mt.advance(15_000);
  await until(() => text.split(': heartbeat').length === 3);
  t.notOk(closed);
  mt.advance(30 * 60_000 - 30_000 - 1);
  await new Promise((r) => setTimeout(r, 100));
  t.notOk(closed, 'open just before 30 minutes');
  mt.advance(1);
  await until(() => closed);
  t.pass('closed at 30 minutes');
});

t.test('the stream answers the same bare 400 and 404', async (t) => {
  const bad = await fetch(`${base}/v1/tool-calls/tc_abc/payment-status/stream`, { headers: org.key });
  t.equal(bad.status, 400);
  const body = (await bad.json()) as Record<string, unknown>;
  t.equal(typeof body.error, 'string');
  t.notOk('request_id' in body);
  const other = await bootstrapOrg(app, 'Other');
  const hidden = await fetch(`${base}/v1/tool-calls/${call.tool_call_id}/verification-status/stream`, { headers: other.key });
  t.equal(hidden.status, 404);
  t.notOk('request_id' in ((await hidden.json()) as object));
});
