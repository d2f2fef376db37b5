import { randomBytes } from 'node:crypto';
import t from 'tap';
import { Vault } from '../../src/adapters/vault.ts';
import { generateSigningKey } from '../../src/audit/note.ts';
import { PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { openDb } from '../../src/postgres/db.ts';
import { startReadSide } from '../../src/readside.ts';
import { bootstrapOrg, checkedApp, SERVICE_SECRET } from '../helpers/app.ts';
import { testDatabase } from '../helpers/db.ts';
import { LossyProxy } from '../helpers/lossy-proxy.ts';
import { requestHash } from '../../src/http/kernel/idempotency.ts';
import { until } from '../helpers/wait.ts';

// A write whose outcome the store cannot confirm (the COMMIT's answer lost on
// the way, and the lookup by event ids failing too) may stand in the log. The
// request answers 503 write_outcome_unknown, and its Idempotency-Key keeps
// that answer: a retry with the key replays it instead of deciding the
// command a second time. A key whose request failed before writing anything
// is released, so its retry runs. A key left pending by a request that never
// finished answers write_outcome_unknown once it is stale.

const { url } = await testDatabase(t);
const direct = new URL(url);
const proxy = await LossyProxy.start({ host: direct.hostname, port: Number(direct.port) });
const viaProxy = new URL(url);
viaProxy.port = String(proxy.port);
t.teardown(() => proxy.stop());

const db = openDb(viaProxy.toString(), { max: 10 });
const store = await PostgresEventStore.open(db);
const readSide = await startReadSide(db, store, { signingKey: generateSigningKey('outcome'), origin: 'test/audit' }, undefined, { reactors: false });
const app = await checkedApp(t, { vault: await Vault.open(db, randomBytes(32)), db, store, readSide, serviceSecret: SERVICE_SECRET, baseUrl: 'http://127.0.0.1:8080', logLevel: 'silent', readWaitMs: 10_000, webhookTargets: { loopback: true, private: false }, rateLimit: { burst: 100_000, perSecond: 100_000 } });
t.teardown(async () => {
  await app.close();
  await readSide.stop();
  await store.close();
  await db.close();
});
const org = await bootstrapOrg(app, 'Unknown');
const create = (key: string, slug: string) =>
  app.inject({ method: 'POST', url: '/v1/projects', headers: { ...org.key, 'idempotency-key': key }, payload: { name: `Project ${slug}`, slug } });
const projectsWith = async (slug: string) => {
  const list = (await app.inject({ method: 'GET', url: '/v1/projects', headers: org.key })).json() as { data?: { slug: string }[] } | { slug: string }[];
  const rows = Array.isArray(list) ? list : (list.data ?? []);
  return rows.filter((p) => p.slug === slug).length;
};

t.test('the outcome of a write is unknown: 503 write_outcome_unknown, and the key replays it', async (t) => {
  proxy.arm('COMMIT');
  proxy.block('WHERE event_id = ANY');
  const first = await create('unknown-1', 'lost-one');
  t.equal(proxy.refused, 1, 'the lookup never reached the server');
  t.equal(first.statusCode, 503);
  t.match(first.json(), { error: { code: 'write_outcome_unknown', details: { retry_safe: false } } });
  const again = await create('unknown-1', 'lost-one');
  t.equal(again.statusCode, 503, 'the retry with the same key is answered the same');
  t.equal(again.headers['idempotent-replayed'], 'true', 'replayed, not run again');
  t.match(again.json(), { error: { code: 'write_outcome_unknown' } });
  // The write did happen (only its answer was lost): the read side catches up with it.
  await until(async () => (await projectsWith('lost-one')) === 1, 'the project in the read model');
  t.equal(await projectsWith('lost-one'), 1, 'created once');
});

t.test('a request that failed before writing releases its key: the retry runs', async (t) => {
  // The log's append is refused at the connection (nothing reaches the server).
  proxy.block('es_append');
  const first = await create('released-1', 'second-try');
  t.ok(first.statusCode >= 500, `failed (${first.statusCode})`);
  t.not(first.json().error?.code, 'write_outcome_unknown');
  const again = await create('released-1', 'second-try');
  t.equal(again.statusCode, 201, 'the retry with the same key ran');
  t.equal(again.headers['idempotent-replayed'], undefined);
  t.equal(await projectsWith('second-try'), 1);
});

t.test('a failure after a write of the request was acknowledged: 503 write_outcome_unknown, the key keeps it, the write stands', async (t) => {
  // Reactivating a webhook endpoint writes its event, then resets the endpoint's
  // dead-delivery count in its own statement; that statement's connection is
  // cut (nothing reaches the server), after the append was acknowledged.
  const created = await app.inject({ method: 'POST', url: '/v1/webhook-endpoints', headers: org.key, payload: { event: 'consumer.created', name: 'hook', webhook_url: 'http://127.0.0.1:9/hook' } });
  t.equal(created.statusCode, 201, 'the endpoint is created');
  const id = (created.json() as { id: string }).id;
  const endpoint = `/v1/webhook-endpoints/${id}`;
  t.equal((await app.inject({ method: 'PATCH', url: endpoint, headers: org.key, payload: { status: 'paused' } })).statusCode, 200);
  const refused = proxy.refused;
  proxy.block('UPDATE webhook_endpoint_stats SET consecutive_dead = 0');
  const reactivate = () => app.inject({ method: 'PATCH', url: endpoint, headers: { ...org.key, 'idempotency-key': 'after-write-1' }, payload: { status: 'active' } });
  const first = await reactivate();
  t.equal(proxy.refused, refused + 1, 'the statement after the write never reached the server');
  t.equal(first.statusCode, 503);
  t.match(first.json(), { error: { code: 'write_outcome_unknown', details: { retry_safe: false } } });
  const again = await reactivate();
  t.equal(again.statusCode, 503, 'the retry with the same key is answered the same');
  t.equal(again.headers['idempotent-replayed'], 'true', 'replayed, not run again');
  const read = await app.inject({ method: 'GET', url: endpoint, headers: org.key });
  t.equal(read.statusCode, 200);
  t.equal(read.json().status, 'active', 'the acknowledged write stands');
});

t.test('a key left pending by a request that never finished (its process died) answers write_outcome_unknown once it is stale', async (t) => {
  // The row a process leaves when it dies between claiming the key and answering.
  const body = { name: 'Project cut-short', slug: 'cut-short' };
  const pending = async (key: string, ageSeconds: number) =>
    db.query(`INSERT INTO idempotency_keys (org_id, environment, key, request_hash, state, created_at) VALUES ($1, 'test', $2, $3, 'pending', now() - make_interval(secs => $4))`, [
      org.orgId,
      key,
      requestHash('POST', '/v1/projects', body),
      ageSeconds,
    ]);
  await pending('cut-short-fresh', 5);
  const fresh = await app.inject({ method: 'POST', url: '/v1/projects', headers: { ...org.key, 'idempotency-key': 'cut-short-fresh' }, payload: body });
  t.equal(fresh.statusCode, 409, 'a request that may still be running');
  t.match(fresh.json(), { error: { code: 'idempotency_request_in_progress' } });
  await pending('cut-short-stale', 11 * 60);
  const stale = await app.inject({ method: 'POST', url: '/v1/projects', headers: { ...org.key, 'idempotency-key': 'cut-short-stale' }, payload: body });
  t.equal(stale.statusCode, 503, 'a request cut short long ago: its outcome is unknown');
  t.match(stale.json(), { error: { code: 'write_outcome_unknown', details: { retry_safe: false } } });
  t.equal(await projectsWith('cut-short'), 0, 'and it was not run');
});
