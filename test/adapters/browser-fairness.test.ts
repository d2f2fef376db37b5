import t from 'tap';
import { findChromium } from '../../src/adapters/browser/chromium.ts';
import { embeddedWorker } from '../../src/adapters/browser/worker.ts';
import { hostedConfig } from '../../src/usecases/hosted-browser.ts';
import { HOSTED_CONNECT_QUEUE_WAIT_MS } from '../../src/limits.ts';
import { signupQueueConfig } from '../../src/usecases/signup-paused.ts';
import { sweepQueuedRuns } from '../../src/usecases/signup-runner.ts';
import { bootstrapOrg, testApp, testClock, type Org } from '../helpers/app.ts';
import { until } from '../helpers/wait.ts';

// The browser worker as a shared, fair and work-conserving resource (issues 38
// and 61), over HTTP in real Chromium: one organization holding its share of
// contexts with abandoned hosted-connect sessions cannot make another
// organization's signup runs fail; a run that finds no context free waits
// queued (status running, step `queued`, recorded as an event), proceeds when
// a context frees, and fails with `capacity` at open_browser when none frees
// before its wait ends by the app's clock (advanced here: no test waits on
// real time). On a worker of its own: one organization alone starts as many
// hosted sessions as the worker has contexts, all at once; another
// organization then gets its share at once (the first's unwatched contexts
// above its share are taken back); with every organization at its share a
// start waits its bounded time, then answers 503 `browser_capacity` with
// Retry-After and a sentence saying what the organization holds.

const chromium = await findChromium();
const skip = chromium ? false : 'no Chromium found (findChromium() returned null): browser fairness tests skipped';

const worker = embeddedWorker(); // the defaults: 4 contexts, 2 per organization
const clock = testClock();
const { app, ledger, sandboxProviders } = await testApp(t, { providers: true, merchants: true, browserWorker: worker, now: clock.now });
const sb = sandboxProviders!;
const greedy = await bootstrapOrg(app, 'Greedy');
const idle = hostedConfig.idleMs;
hostedConfig.idleMs = 60 * 60_000; // abandoned for the whole file: nobody ever opens these live views
t.teardown(() => void (hostedConfig.idleMs = idle));
const fair = await bootstrapOrg(app, 'Fair');
const late = await bootstrapOrg(app, 'Late');

const status = async (org: Org, runId: string) => (await app.inject({ method: 'GET', url: `/v1/connections/engine/${runId}/status`, headers: org.key })).json() as { status: string; step?: string; code?: string; failed_step_id?: string };
const waitFor = (org: Org, runId: string, ok: (v: Awaited<ReturnType<typeof status>>) => boolean, what: string) => until(async () => {
  const v = await status(org, runId);
  return ok(v) ? v : undefined;
}, what);
const startRun = async (org: Org, email: string) => {
  const r = await app.inject({ method: 'POST', url: '/v1/connections/engine/start', headers: org.key, payload: { server_id: 'acme-payments', user_id: email.split('@')[0], email } });
  if (r.statusCode !== 202) throw new Error(r.body);
  return r.json().run_id as string;
};
const eventsOf = async (runId: string) => (await ledger.store.readAll({ maxCount: 100_000 })).filter((e) => e.streamName === `signup_run-${runId}`).map((e) => e.type);

t.test("abandoned hosted sessions of one organization do not fail another organization's signup run", { skip }, async (t) => {
  for (const m of ['merchant-a', 'merchant-b']) {
    const r = await app.inject({ method: 'POST', url: `/v1/cart/${m}/connect/start`, headers: greedy.key });
    t.equal(r.statusCode, 200, r.body);
  }
  t.equal(worker.activeOf(greedy.orgId), 2, 'Greedy holds its share');

  const runId = await startRun(fair, 'fair.one@example.com');
  const paused = await waitFor(fair, runId, (v) => v.status !== 'running', `${runId} leaves running`);
  t.equal(paused.status, 'needs_verification', JSON.stringify(paused));
  t.notOk((await eventsOf(runId)).includes('signup_run.queued'), 'it got a context at once: two of four were free');
  t.equal(worker.activeOf(fair.orgId), 1);
  t.equal(worker.active, 3);
});

t.test('no context free: the run is queued (step queued), proceeds when one frees, and fails with capacity when none frees in time', { skip }, async (t) => {
  worker.limits.maxContexts = 3; // Greedy's two and Fair's paused page fill the worker
  t.teardown(() => void (worker.limits.maxContexts = 4));
  const fairRun = (await ledger.db.query<{ id: string }>(`SELECT id FROM signup_runs WHERE org_id = $1 AND status = 'needs_verification'`, [fair.orgId])).rows[0]!.id;

  const queuedRun = await startRun(late, 'late.one@example.com');
  const queued = await waitFor(late, queuedRun, (v) => v.step === 'queued' || v.status !== 'running', `${queuedRun} is queued`);
  t.same(queued, { run_id: queuedRun, status: 'running', step: 'queued' }, 'running, on the queued step');
  t.equal(worker.waiting, 1);
  t.same(await eventsOf(queuedRun), ['signup_run.started', 'signup_run.queued']);

  // Fair's run takes its code, provisions, and closes its page: the context goes to Late's queued run.
  const code = sb.outbox('fair.one@example.com').at(-1)!.code;
  const given = await app.inject({ method: 'POST', url: `/v1/connections/engine/${fairRun}/verification`, headers: fair.key, payload: { code } });
  t.equal(given.statusCode, 202, given.body);
  t.equal((await waitFor(fair, fairRun, (v) => v.status !== 'running', 'Fair provisioned')).status, 'provisioned');
  const resumed = await waitFor(late, queuedRun, (v) => v.status !== 'running', `${queuedRun} leaves running`);
  t.equal(resumed.status, 'needs_verification', JSON.stringify(resumed));
  t.notOk('step' in resumed, 'no step once it left the queue');
  t.same((await eventsOf(queuedRun)).slice(0, 3), ['signup_run.started', 'signup_run.queued', 'signup_run.dequeued']);

  // Full again (Greedy two, Late one): a run that waits past its bound fails with capacity, as one that never waited did.
  const doomed = await startRun(fair, 'fair.two@example.com');
  t.equal((await waitFor(fair, doomed, (v) => v.step === 'queued' || v.status !== 'running', `${doomed} is queued`)).step, 'queued');
  clock.advance(signupQueueConfig.waitMs);
  t.teardown(() => clock.advance(-signupQueueConfig.waitMs));
  sweepQueuedRuns();
  const failed = await waitFor(fair, doomed, (v) => v.status !== 'running', `${doomed} fails`);
  t.same(failed, { run_id: doomed, status: 'failed', code: 'capacity', failed_step_id: 'open_browser' });
  t.equal(worker.waiting, 0, 'it left the queue');
  t.equal(worker.active, 3, 'and took no context');
});

t.test('hosted connect on a worker of its own: alone an organization uses every context; another then gets its share at once; at capacity a start waits, then 503 with Retry-After', { skip }, async (t) => {
  const own = embeddedWorker(); // the defaults: 4 contexts, 2 per organization
  const { app, ledger } = await testApp(t, { merchants: true, browserWorker: own });
  const shop = await bootstrapOrg(app, 'Shop');
  const other = await bootstrapOrg(app, 'Other');
  const third = await bootstrapOrg(app, 'Third');
  const startAll = (org: Org, n: number) => Promise.all(Array.from({ length: n }, (_, i) => app.inject({ method: 'POST', url: `/v1/cart/merchant-${i % 2 ? 'b' : 'a'}/connect/start`, headers: org.key })));
  const expiredWhy = async () => (await ledger.store.readAll({ maxCount: 100_000 })).filter((e) => e.type === 'hosted_connect.expired').map((e) => (e.data as { reason: string }).reason);

  const shops = await startAll(shop, own.limits.maxContexts);
  t.same(shops.map((r) => r.statusCode), [200, 200, 200, 200], `one organization alone: ${own.limits.maxContexts} shoppers at once, every start answered`);
  t.equal(own.activeOf(shop.orgId), 4);

  const others = await startAll(other, 2);
  t.same(others.map((r) => r.statusCode), [200, 200], 'another organization gets its share at once');
  t.equal(own.activeOf(other.orgId), 2);
  t.equal(own.activeOf(shop.orgId), 2, 'from the unwatched contexts above the first one\'s share');
  t.same(await expiredWhy(), ['reclaimed', 'reclaimed'], 'each taken back is recorded');

  hostedConfig.queueWaitMs = 300; // shortened: nothing can free here, the outcome does not depend on it
  t.teardown(() => void (hostedConfig.queueWaitMs = HOSTED_CONNECT_QUEUE_WAIT_MS));
  const head = await ledger.store.headPosition();
  const late = await app.inject({ method: 'POST', url: '/v1/cart/merchant-a/connect/start', headers: third.key });
  t.equal(late.statusCode, 503, 'every organization at its share and nothing unused above one: 503, not 502');
  const retryAfter = Number(late.headers['retry-after']);
  t.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 3600, `Retry-After ${late.headers['retry-after']}`);
  t.match(late.json(), { error: { code: 'browser_capacity', details: { reason: 'capacity', retriable: true, retry_after_seconds: retryAfter, contexts_held: 0, contexts_share: 2, frees_by: String } } });
  t.match(late.json().error.message, /this organization holds 0 browser contexts .*the next one here frees by \S+Z at the latest.*Retry after \d+ s/);
  const more = await app.inject({ method: 'POST', url: '/v1/cart/merchant-b/connect/start', headers: shop.key });
  t.equal(more.statusCode, 503);
  t.match(more.json().error.message, /this organization holds 2 browser contexts \(2 on this instance; its share is 2/);
  t.same((await ledger.store.readAll({ after: head })).filter((e) => e.type.startsWith('hosted_connect')), [], 'a start that got no context writes nothing');
  t.equal(own.waiting, 0);
});
