import t from 'tap';
import { randomBytes } from 'node:crypto';
import { bootstrapOrg, checkedApp, testApp } from '../helpers/app.ts';
import { until } from '../helpers/wait.ts';

// What an operator and an integrator expect: /metrics that moves with the
// traffic and never names a tenant, and log lines that carry the request id a
// user sees in an error (the reference page: test/http/docs-browser.test.ts).

const { app, ledger, vault } = await testApp(t);
const org = await bootstrapOrg(app, 'Operators');

/** The value of one sample of the scrape, 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string>): number {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const inner = line.slice(name.length + 1, line.indexOf('}'));
    const have = inner.split(',');
    if (want.every((w) => have.includes(w))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return 0;
}
const scrape = async () => {
  const r = await app.inject({ method: 'GET', url: '/metrics' });
  if (r.statusCode !== 200) throw new Error(`/metrics answered ${r.statusCode}: ${r.body}`);
  return r.body;
};

t.test('/metrics: counters move with commands; labels are route patterns, never tenant data', async (t) => {
  const before = await scrape();
  const consumer = (await app.inject({ method: 'POST', url: '/v1/consumers', headers: org.key, payload: { display_name: 'Secret Name' } })).json();
  await app.inject({ method: 'POST', url: '/v1/consumers', headers: org.key, payload: {} });
  t.equal((await app.inject({ method: 'GET', url: `/v1/consumers/${consumer.id}`, headers: org.key })).statusCode, 200);
  t.equal((await app.inject({ method: 'GET', url: '/v1/consumers/cns_absentAbsent0000', headers: org.key })).statusCode, 404);
  const after = await scrape();
  const created = { method: 'POST', route: '/v1/consumers', status: '201' };
  t.equal(sample(after, 'ledger_http_requests_total', created) - sample(before, 'ledger_http_requests_total', created), 2, 'two creates counted');
  t.equal(sample(after, 'ledger_http_request_duration_seconds_count', created) - sample(before, 'ledger_http_request_duration_seconds_count', created), 2, 'and timed');
  t.equal(sample(after, 'ledger_http_requests_total', { method: 'GET', route: '/v1/consumers/:id', status: '404' }) - sample(before, 'ledger_http_requests_total', { method: 'GET', route: '/v1/consumers/:id', status: '404' }), 1, 'by route pattern and status');
  t.equal(sample(after, 'ledger_events_appended_total', { type: 'consumer.created' }) - sample(before, 'ledger_events_appended_total', { type: 'consumer.created' }), 2, 'events appended');
  t.match(after, /ledger_follower_lag_positions\{follower="consumer",kind="projection"\} \d+/);
  t.match(after, /ledger_follower_lag_seconds\{follower="[^"]+",kind="sealer"\} [\d.e-]+/, 'the sealer lag');
  for (const metric of ['ledger_webhook_delivery_attempts_total', 'ledger_x402_settlements_total', 'ledger_audit_verification_passes_total']) t.match(after, new RegExp(`# TYPE ${metric} counter`), metric);
  for (const secret of [org.orgId, org.projectId, consumer.id, 'Secret Name', 'cns_absentAbsent0000']) t.notOk(after.includes(secret), `no tenant data: ${secret.slice(0, 8)}…`);
  // The sealer's own appends move the head again, so wait on the condition, not on one settle.
  await until(async () => sample(await scrape(), 'ledger_follower_lag_positions', { follower: 'consumer' }) === 0, 'the consumer projection to show no lag');
  t.pass('caught up: no lag');
});

t.test('/metrics: loopback only, unless a token is configured', async (t) => {
  const remote = await app.inject({ method: 'GET', url: '/metrics', remoteAddress: '203.0.113.9' });
  t.same([remote.statusCode, remote.json().error.code], [403, 'forbidden']);
  const token = randomBytes(24).toString('base64url');
  const guarded = await checkedApp(t, { vault, db: ledger.db, store: ledger.store, readSide: ledger.readSide, serviceSecret: 'svc_other_secret_0123456789abcdefghijk', baseUrl: 'http://x', logLevel: 'silent', metricsToken: token });
  t.teardown(() => guarded.close());
  t.equal((await guarded.inject({ method: 'GET', url: '/metrics' })).statusCode, 401, 'with a token, loopback needs it too');
  t.equal((await guarded.inject({ method: 'GET', url: '/metrics', remoteAddress: '203.0.113.9', headers: { authorization: 'Bearer wrong' } })).statusCode, 401);
  const ok = await guarded.inject({ method: 'GET', url: '/metrics', remoteAddress: '203.0.113.9', headers: { authorization: `Bearer ${token}` } });
  t.equal(ok.statusCode, 200);
  t.match(ok.headers['content-type'], /^text\/plain; version=0\.0\.4/);
});

t.test('a failing request: its request_id is in the error envelope and on its log lines', async (t) => {
  const lines: string[] = [];
  const logged = await checkedApp(t, { vault, db: ledger.db, store: ledger.store, readSide: ledger.readSide, serviceSecret: 'svc_other_secret_0123456789abcdefghijk', baseUrl: 'http://x', logLevel: 'info', logStream: { write: (l: string) => void lines.push(l) } });
  t.teardown(() => logged.close());
  const res = await logged.inject({ method: 'POST', url: '/v1/consumers', headers: org.key, payload: { document: '123' } });
  t.same([res.statusCode, res.json().error.code], [400, 'invalid_body']);
  const id = res.json().request_id as string;
  t.match(id, /^req_[0-9a-f]{32}$/);
  t.equal(res.headers['x-request-id'], id);
  const mine = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.request_id === id);
  t.ok(mine.some((l) => l.msg === 'incoming request'), 'the incoming line');
  t.ok(mine.some((l) => (l.res as { statusCode?: number } | undefined)?.statusCode === 400), 'the completed line, with its status');
  t.notOk(lines.join('\n').includes(org.key.authorization!.slice(7)), 'the credential is not logged');
});

