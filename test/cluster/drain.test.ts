import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { EventSource } from 'eventsource';
import Fastify from 'fastify';
import { Webhook } from 'standardwebhooks';
import t, { type Test } from 'tap';
import { Drain, registerDrain, RETRY_HINT } from '../../src/http/kernel/drain.ts';
import { streamConfig } from '../../src/usecases/status-stream.ts';
import { startBalancer } from '../helpers/balancer.ts';
import { platform } from '../helpers/app.ts';
import { call, testCluster } from '../helpers/cluster.ts';
import { until } from '../helpers/wait.ts';

// What draining an instance does (src/http/kernel/drain.ts, docs/deployment.md
// "Rolling restart"): every open event stream a GET subscribed to ends with a
// `retry:` hint, and its EventSource reconnects through the balancer to the
// other instance, where it goes on; requests in flight when the drain begins
// (a plain one, and a session message whose answer streams) are answered and
// their connections closed before the instance's runtime closes; no new
// connection is accepted. Each step waits on a condition, never on the clock.

// The charge below succeeds at once, and a status stream closes a while after
// a terminal status: here only the drain may end one.
const terminalCloseMs = streamConfig.terminalCloseMs;
streamConfig.terminalCloseMs = 60 * 60_000;
t.teardown(() => void (streamConfig.terminalCloseMs = terminalCloseMs));

// A model on loopback that answers the agent loop's first turn when the test says.
const model = { asked: false, answer: () => {} };
const modelServer = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    model.asked = true;
    model.answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: 'c1', object: 'chat.completion', model: 'held', choices: [{ index: 0, message: { role: 'assistant', content: 'all done' }, finish_reason: 'stop' }] }));
  });
});
await new Promise<void>((r) => modelServer.listen(0, '127.0.0.1', r));
t.teardown(() => new Promise<void>((r) => modelServer.close(() => r())));
Object.assign(process.env, { MODEL_BASE_URL: `http://127.0.0.1:${(modelServer.address() as AddressInfo).port}/v1`, MODEL_API_KEY: 'sk-held', MODEL_NAME: 'held' });

// SHUTDOWN_DELAY_MS on both instances; the delay is the test's to end (a
// condition, not a clock): with no hold armed it ends at once.
const hold: { wait: Promise<void> | undefined } = { wait: undefined };
const c = await testCluster(t, { providers: true, app: { webhookTargets: { loopback: true, private: false }, shutdownDelayMs: 10_000, shutdownPause: () => hold.wait ?? Promise.resolve() } });
const [A, B] = c.urls as [string, string];
// A connection left open after its answer would hold the drain for the
// keep-alive timeout: here, longer than any wait below.
c.apps[1]!.server.keepAliveTimeout = 10 * 60_000;

const org = await (async () => {
  const made = await call(A, 'POST', '/v1/orgs', platform, { name: 'Drain', owner_email: 'owner+drain@example.com' });
  const owner = { ...platform, 'x-svc-user': made.body.owner.user_id as string };
  const key = await call(A, 'POST', '/v1/api-keys', owner, { name: 'k', environment: 'test' });
  return { key: { authorization: `Bearer ${key.body.key}` } };
})();

/** Whether a new connection to `url` is accepted. */
function accepts(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const s = net.connect(Number(port), hostname);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** A raw HTTP/1.1 connection: what it has received, and whether the server closed it. */
function rawConnection(url: string) {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  const got = { text: '', closed: false };
  socket.on('data', (d: Buffer) => (got.text += d.toString()));
  socket.on('close', () => (got.closed = true));
  socket.on('error', () => {});
  return { socket, got };
}

/** The body of a chunked HTTP/1.1 answer, as received so far. */
function dechunked(text: string): string {
  let rest = text.slice(text.indexOf('\r\n\r\n') + 4);
  let body = '';
  for (;;) {
    const eol = rest.indexOf('\r\n');
    const size = eol < 0 ? NaN : parseInt(rest.slice(0, eol), 16);
    if (!(size > 0) || rest.length < eol + 2 + size) return body;
    body += rest.slice(eol + 2, eol + 2 + size);
    rest = rest.slice(eol + 2 + size + 2);
  }
}

/** A request line and headers with the test key, for a raw connection. */
const head = (method: string, path: string, body: string, extra = '') => `${method} ${path} HTTP/1.1\r\nhost: x\r\nauthorization: ${org.key.authorization}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${extra}\r\n`;

/** A payment status stream on the second instance: one read as bytes, one held by an EventSource through a balancer whose first pick is the second instance. */
async function statusStreams(t: Test) {
  const sb = c.first.sandboxProviders!;
  const acme = await call(A, 'POST', '/v1/connections', org.key, { server_id: 'acme-payments', secret: sb.issueCredential('acme-payments') });
  const whsec = (await call(A, 'PUT', `/v1/connections/${acme.body.id}/webhook-secret`, org.key)).body.secret as string;
  const session = await call(A, 'POST', '/v1/sessions', org.key, { servers: ['acme-payments'], user_id: 'u1' });
  const charge = await call(A, 'POST', `/v1/sessions/${session.body.id}/execute`, org.key, { tool: 'acme-payments/create_charge', input: { amount_minor: 900, currency: 'BRL' } });
  t.equal(charge.status, 200, JSON.stringify(charge.body));
  const path = `/v1/tool-calls/${charge.body.tool_call_id}/payment-status/stream`;

  const raw = rawConnection(B);
  raw.socket.write(head('GET', path, ''));
  await until(() => raw.got.text.includes('event: snapshot'), 'the raw stream snapshot');

  const lb = await startBalancer([B, A]);
  t.teardown(() => lb.close());
  const es = { got: [] as { type: string; data: Record<string, unknown> }[], opens: 0, source: new EventSource(`${lb.url}${path}`, { fetch: (u, init) => fetch(u, { ...init, headers: { ...(init?.headers ?? {}), ...org.key } }) }) };
  t.teardown(() => es.source.close());
  es.source.addEventListener('open', () => es.opens++);
  for (const type of ['snapshot', 'update']) es.source.addEventListener(type, (e) => es.got.push({ type, data: JSON.parse(e.data) }));
  await until(() => es.got.length >= 1, 'the EventSource snapshot');
  t.same(lb.sent, [1, 0], 'the EventSource is held by the second instance');

  /** A change of the payment, through the first instance. */
  const update = () => {
    const id = 'msg_drain_1';
    const body = JSON.stringify({ type: 'charge.updated', data: { id: charge.body.data.id, status: 'updated' } });
    const at = new Date();
    return fetch(`${A}/v1/webhooks/acme-payments/${acme.body.id}`, { method: 'POST', headers: { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': new Webhook(whsec).sign(id, at, body) }, body });
  };
  return { raw, lb, es, update, sessionId: session.body.id as string };
}

t.test('draining ends open event streams with a retry hint, answers the requests in flight, then refuses connections', async (t) => {
  const { raw, lb, es, update, sessionId } = await statusStreams(t);

  // Two requests in flight on the second instance: one whose body has not all
  // arrived, and a session message whose answer streams while the model thinks.
  const agent = JSON.stringify({ agent_id: 'late', principal_ref: 'p' });
  const plain = rawConnection(B);
  const started = new Promise<void>((r) => c.apps[1]!.server.once('request', () => r()));
  plain.socket.write(head('POST', '/v1/agents', agent) + agent.slice(0, 10));
  await started;
  const message = JSON.stringify({ message: 'hello' });
  const send = rawConnection(B);
  send.socket.write(head('POST', `/v1/sessions/${sessionId}/send`, message, 'accept: text/event-stream\r\n') + message);
  await until(() => model.asked && send.got.text.includes('event: user_message'), 'the agent loop waiting for the model');

  let drained = false;
  const draining = c.stopSecond().then(() => void (drained = true));
  await until(async () => !(await accepts(B)), 'the second instance refusing new connections');

  await until(() => raw.got.closed, 'the raw stream ended');
  t.ok(raw.got.text.endsWith('0\r\n\r\n'), 'the raw stream ended');
  t.ok(dechunked(raw.got.text).endsWith(`\n\n${RETRY_HINT}`), `after its last event, the retry hint: ${JSON.stringify(dechunked(raw.got.text).slice(-60))}`);

  plain.socket.write(agent.slice(10));
  await until(() => plain.got.closed, 'the plain request answered and its connection closed');
  t.match(plain.got.text, /^HTTP\/1\.1 201 /, 'the request in flight when the drain began is answered 201');
  t.match(plain.got.text, /\r\nconnection: close\r\n/i, 'and its connection closes');

  t.notOk(drained, 'the drain waits for the session message');
  model.answer();
  await until(() => send.got.closed, 'the session message answered and its connection closed');
  t.match(send.got.text, /event: done\n/, 'the streamed answer ran to its end');
  t.notOk(send.got.text.includes('retry:'), 'and was not cut');
  await until(() => drained, 'the drain done');
  await draining;
  t.equal((await call(A, 'GET', '/v1/agents/late', org.key)).status, 200, 'the write in flight stands');

  // The EventSource reconnected (after the hinted delay) through the balancer to the first instance, and goes on there.
  await until(() => es.opens >= 2, 'the EventSource reconnected');
  t.equal(lb.sent[1], 1, 'through the first instance');
  t.equal((await update()).status, 200);
  const changed = await until(() => es.got.find((g) => g.type === 'update'), 'the update on the reconnected stream');
  t.match(changed.data, { payment_status: 'updated' });
  t.equal(es.got.filter((g) => g.type === 'snapshot').length, 1, 'resumed after what it had seen (Last-Event-ID): no second snapshot');
  es.source.close();
});

t.test('while draining, readiness answers 503 and every answer closes its connection', async (t) => {
  // The drain's hooks on an app of their own, the drain begun by hand (a
  // closing app takes no injected requests).
  const app = Fastify();
  const drain = new Drain();
  registerDrain(app, drain);
  app.get('/readyz', async () => ({ status: 'ready' }));
  app.get('/other', async () => ({ ok: true }));
  t.teardown(() => app.close());
  const before = await app.inject({ url: '/readyz' });
  t.equal(before.statusCode, 200);
  t.not(before.headers.connection, 'close');
  drain.begin();
  const ready = await app.inject({ url: '/readyz' });
  t.equal(ready.statusCode, 503);
  t.same(ready.json(), { status: 'not_ready', reason: 'draining', followers: [] });
  const other = await app.inject({ url: '/other' });
  t.equal(other.statusCode, 200, 'other requests are served');
  t.equal(other.headers.connection, 'close');
});

t.test('a connection opened and never used (a browser\'s preconnect) is closed when the drain begins, not left to hold the close', async (t) => {
  const app = Fastify();
  registerDrain(app, new Drain());
  app.get('/other', async () => ({ ok: true }));
  await app.listen({ host: '127.0.0.1', port: 0 });
  const port = (app.server.address() as AddressInfo).port;
  const preconnect = net.connect(port, '127.0.0.1');
  let closed = false;
  preconnect.on('close', () => void (closed = true)).on('error', () => {});
  await new Promise<void>((r) => preconnect.once('connect', () => r()));
  await until(async () => (await new Promise<number>((r) => app.server.getConnections((_e, n) => r(n)))) === 1, 'the server holding the connection');
  const closing = app.close();
  // Node closes such a connection only at its headers timeout (60 s, checked every 30 s): well past this bound.
  await until(() => closed, 'the unused connection closed by the server', 30_000);
  await closing;
  t.ok(closed, 'closed at the drain');
});

t.test('with SHUTDOWN_DELAY_MS, readiness fails first and the listener stays open until a polling balancer took the instance out: no request fails', async (t) => {
  await c.startSecond();
  const B2 = c.urls[1]!;
  // A balancer that sends only to instances whose readiness answers 200 (polled on its own schedule) and resends nothing: a refused connection is a failed request.
  const lb = await startBalancer([A, B2], { resend: false, readiness: { path: '/readyz', everyMs: 50 } });
  t.teardown(() => lb.close());
  const failures: string[] = [];
  let answered = 0;
  let stop = false;
  const client = async (n: number) => {
    for (let i = 0; !stop; i++) {
      const id = `dl${n}-${i}`;
      try {
        const made = await call(lb.url, 'POST', '/v1/agents', org.key, { agent_id: id, principal_ref: 'p' });
        const read = made.status === 201 ? await call(lb.url, 'GET', `/v1/agents/${id}`, org.key) : made;
        if (made.status !== 201 || read.status !== 200) failures.push(`${id}: ${made.status} ${read.status} ${JSON.stringify(read.body).slice(0, 200)}`);
        else answered++;
      } catch (err) {
        failures.push(`${id}: ${(err as Error).message}`);
      }
    }
  };
  const clients = [0, 1, 2, 3].map(client);
  await until(() => lb.sent[1]! >= 4, 'the second instance serving through the balancer');

  let release!: () => void;
  hold.wait = new Promise<void>((r) => (release = r));
  t.teardown(() => release());
  let stopped = false;
  const stopping = c.stopSecond().then(() => void (stopped = true));
  // Readiness and health fail at once, over new connections: the listener is open.
  await until(async () => (await call(B2, 'GET', '/readyz', {}).catch(() => ({ status: 0 }))).status === 503, 'readiness 503 on the stopping instance');
  const ready = await call(B2, 'GET', '/readyz', {});
  t.same(ready.body, { status: 'not_ready', reason: 'draining', followers: [] });
  const health = await call(B2, 'GET', '/healthz', {});
  t.same([health.status, health.body], [503, { status: 'draining' }], '/healthz too, for balancers that read it');
  await until(() => !lb.ready[1], 'the balancer took the stopping instance out');
  const served = answered;
  await until(() => answered >= served + 8, 'clients served by the other instance meanwhile');
  const direct = await call(B2, 'GET', '/v1/agents/dl0-0', org.key);
  t.equal(direct.status, 200, 'a request reaching the stopping instance during the delay is served');
  t.ok(await accepts(B2), 'the listener is still open');
  t.notOk(stopped, 'the drain waits for the delay');

  release();
  await stopping;
  t.notOk(await accepts(B2), 'after the delay and the drain the listener is closed');
  const after = answered;
  await until(() => answered >= after + 8, 'clients still served');
  stop = true;
  await Promise.all(clients);
  t.same(failures, [], 'no request failed');
  t.ok(answered > 16, `${answered} writes and reads answered`);
  hold.wait = undefined;
});
