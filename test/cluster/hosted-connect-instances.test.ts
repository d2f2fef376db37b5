import type { AddressInfo } from 'node:net';
import t from 'tap';
import { findChromium, launchChromium } from '../../src/adapters/browser/chromium.ts';
import { embeddedWorker } from '../../src/adapters/browser/worker.ts';
import { LOGIN_LAYOUT, SANDBOX_MERCHANT_USER } from '../../src/adapters/merchants/sandbox-merchants.ts';
import { HOSTED_CONNECT_QUEUE_WAIT_MS } from '../../src/limits.ts';
import { hostedConfig } from '../../src/usecases/hosted-browser.ts';
import { bootstrapOrg, secondInstance, testApp, type Org } from '../helpers/app.ts';
import { until } from '../helpers/wait.ts';
import { clickThrough, remoteLaidOut } from '../helpers/live-view.ts';

// Browser state across two instances on one PostgreSQL (issue 38, Build item
// 2): a hosted-connect session started through instance A is viewed, driven
// and finished through instance B, and a signup run started through A takes
// its resend and verification code through B. A holds the contexts; B finds
// A in browser_owners and forwards each request there, relaying the answer
// (the live view's frames streamed). When the owner cannot be reached B
// answers as before (410 session_expired), and the claim is dropped. An
// organization's share of contexts is counted across both (issue 61): alone it
// may hold contexts on each, and when another organization wants some, its
// unwatched ones above its share, on either instance, are taken back.

const chromium = await findChromium();
const skip = chromium ? false : 'no Chromium found (findChromium() returned null): cross-instance browser tests skipped';

const workerA = embeddedWorker();
const workerB = embeddedWorker();
const a = await testApp(t, { merchants: true, providers: true, browserWorker: workerA });
const appB = await secondInstance(t, a, { app: { vault: a.vault, providers: a.providerRuntime, merchants: a.sandboxMerchants!.sites(), browserWorker: workerB } });
const urls: string[] = [];
for (const app of [a.app, appB]) {
  await app.listen({ host: '127.0.0.1', port: 0 });
  urls.push(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}`);
}
const [urlA, urlB] = urls as [string, string];
const org = await bootstrapOrg(a.app, 'Twins');
const sm = a.sandboxMerchants!;
const sb = a.sandboxProviders!;

const call = async (base: string, method: string, path: string, body?: unknown) => {
  const res = await fetch(`${base}${path}`, { method, headers: { ...org.key, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) }, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  return { status: res.status, body: (await res.json()) as any };
};
const typesOf = async (stream: string) => (await a.ledger.store.readAll({ maxCount: 100_000 })).filter((e) => e.streamName === stream).map((e) => e.type);

t.test('a hosted session started through A is viewed, driven and finished through B', { skip }, async (t) => {
  const started = await call(urlA, 'POST', '/v1/cart/merchant-a/connect/start');
  t.equal(started.status, 200, JSON.stringify(started.body));
  const { session_id: sessionId, live_view_url: liveUrl } = started.body;
  t.equal(workerA.active, 1, 'A holds the context');

  const early = await call(urlB, 'POST', '/v1/cart/merchant-a/connect/finish', { session_id: sessionId });
  t.equal(early.status, 409, 'B relays A\'s answer: not logged in yet (not 410, and the session is not spent)');
  t.equal(early.body.error.code, 'not_logged_in');

  // The person's browser opens the live view on B: page, frames and input all reach A's context.
  const person = await launchChromium('shell');
  t.teardown(() => person.close());
  const page = await person.newPage({ viewport: { width: 1400, height: 1100 } });
  const res = await page.goto(`${urlB}${new URL(liveUrl).pathname}`);
  t.equal(res!.status(), 200, 'B serves the live view');
  t.match((await res!.allHeaders())['set-cookie'], /^hosted_viewer=/, 'bound to this browser, through B');
  const shows = (sel: string, text: string) => until(async () => (await page.textContent(sel)) === text, `the live view's ${sel} reads ${text}`);
  await shows('#remote-title', 'Merchant A — Sign in');
  const attr = async (name: string) => Number(await page.getAttribute('#screen', name));
  await remoteLaidOut(page);
  const clickRemote = (b: { x: number; y: number; w: number; h: number }) => clickThrough(page, b);
  const flushed = () => until(async () => (await attr('data-sent')) === (await attr('data-done')), 'the live view sent every input');
  await clickRemote(LOGIN_LAYOUT.username);
  await page.keyboard.type(SANDBOX_MERCHANT_USER.username);
  await flushed();
  await clickRemote(LOGIN_LAYOUT.password);
  await page.keyboard.type(SANDBOX_MERCHANT_USER.password);
  await page.keyboard.press('Enter');
  await flushed();
  await until(() => sm.signedIn('merchant-a').includes(SANDBOX_MERCHANT_USER.username), 'the merchant sees the login');
  await shows('#remote-title', 'Merchant A — Your account');

  const done = await call(urlB, 'POST', '/v1/cart/merchant-a/connect/finish', { session_id: sessionId });
  t.equal(done.status, 200, JSON.stringify(done.body));
  t.match(done.body, { merchant: 'merchant-a', session_id: sessionId, connection: { id: /^ca_/, auth_type: 'browser_session', status: 'connected' } });
  t.same(await typesOf(`hosted_connect-${sessionId}`), ['hosted_connect.started', 'hosted_connect.finished'], 'no context_lost: finished where it lived');
  await shows('#state', 'This session has ended.');
  await until(() => workerA.active === 0, "A's context closes");
  t.equal(workerB.active, 0, 'B never opened one');
  const claims = await a.ledger.db.query('SELECT key FROM browser_owners');
  t.same(claims.rows, [], 'no claim is left');
});

t.test("a signup run started through A takes its resend and its code through B", { skip }, async (t) => {
  const email = 'twin.signup@example.com';
  const started = await call(urlA, 'POST', '/v1/connections/engine/start', { server_id: 'acme-payments', user_id: 'twin', email });
  t.equal(started.status, 202, JSON.stringify(started.body));
  const runId = started.body.run_id as string;
  const statusB = () => call(urlB, 'GET', `/v1/connections/engine/${runId}/status`);
  await until(async () => (await statusB()).body.status !== 'running', 'the run pauses');
  t.equal((await statusB()).body.status, 'needs_verification');

  const resent = await call(urlB, 'POST', `/v1/connections/engine/${runId}/resend`);
  t.equal(resent.status, 200, JSON.stringify(resent.body));
  t.equal(resent.body.status, 'needs_verification', 'the resend reached the paused page on A');
  t.equal(sb.outbox(email).length, 2, 'the provider sent a second code');
  const given = await call(urlB, 'POST', `/v1/connections/engine/${runId}/verification`, { code: sb.outbox(email).at(-1)!.code });
  t.equal(given.status, 202, JSON.stringify(given.body));
  await until(async () => (await statusB()).body.status !== 'running', 'the run finishes');
  const done = (await statusB()).body;
  t.equal(done.status, 'provisioned', JSON.stringify(done));
  t.match(done.connection_id, /^ca_/);
  const all = JSON.stringify(await a.ledger.store.readAll({ maxCount: 100_000 }), (_k, v) => (typeof v === 'bigint' ? v.toString() : v));
  t.notOk(all.includes(sb.outbox(email).at(-1)!.code), 'the code is in no event');
});

t.test('an owner that cannot be reached: B answers as an instance without the context, and drops the claim', { skip }, async (t) => {
  const started = await call(urlA, 'POST', '/v1/cart/merchant-b/connect/start');
  t.equal(started.status, 200);
  const sessionId = started.body.session_id as string;
  await a.ledger.db.query(`UPDATE browser_owners SET instance_id = 'inst_gone', instance_url = 'http://127.0.0.1:9' WHERE key = $1`, [`hosted:${sessionId}`]);
  const r = await call(urlB, 'POST', '/v1/cart/merchant-b/connect/finish', { session_id: sessionId });
  t.equal(r.status, 410);
  t.equal(r.body.error.code, 'session_expired');
  t.same((await a.ledger.db.query('SELECT 1 FROM browser_owners WHERE key = $1', [`hosted:${sessionId}`])).rows, [], 'the stale claim is gone');
});

t.test("an organization's share is counted across the instances: alone it holds contexts on both; another organization takes back what is above its share on each", { skip }, async (t) => {
  const idle = hostedConfig.idleMs;
  hostedConfig.idleMs = 60 * 60_000; // nobody watches these live views; none closes by itself during the test
  t.teardown(() => void (hostedConfig.idleMs = idle));
  // Two contexts free on each instance (A may still hold the previous test's session).
  const limits = [workerA.limits.maxContexts, workerB.limits.maxContexts] as const;
  workerA.limits.maxContexts = workerA.active + 2;
  workerB.limits.maxContexts = workerB.active + 2;
  t.teardown(() => void ([workerA.limits.maxContexts, workerB.limits.maxContexts] = limits));
  const x = await bootstrapOrg(a.app, 'Spread');
  const y = await bootstrapOrg(a.app, 'Newcomer');
  const start = async (base: string, who: Org) => {
    const res = await fetch(`${base}/v1/cart/merchant-b/connect/start`, { method: 'POST', headers: who.key });
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as any };
  };
  const held = (org: Org) => workerA.activeOf(org.orgId) + workerB.activeOf(org.orgId);

  const spread = await Promise.all([start(urlA, x), start(urlA, x), start(urlB, x), start(urlB, x)]);
  t.same(spread.map((r) => r.status), [200, 200, 200, 200], 'alone, Spread takes every free context on both instances');
  t.same([workerA.activeOf(x.orgId), workerB.activeOf(x.orgId)], [2, 2], 'two on each: four in all, twice its share');
  const recorded = async () => (await a.ledger.db.query<{ n: number }>('SELECT count(*)::int AS n FROM browser_slots WHERE org_id = $1', [x.orgId])).rows[0]!.n;
  await until(async () => (await recorded()) === 4, 'each held context recorded for the other instance (written beside the open)');

  // Newcomer asks each instance for one: each is full, and Spread is above its share counted across both.
  t.equal((await start(urlA, y)).status, 200, 'through A');
  t.equal((await start(urlB, y)).status, 200, 'through B');
  t.same([held(x), held(y)], [2, 2], 'Spread is back at its share in all (not at its share on each instance), Newcomer has its share');

  hostedConfig.queueWaitMs = 300; // shortened: nothing can free now
  t.teardown(() => void (hostedConfig.queueWaitMs = HOSTED_CONNECT_QUEUE_WAIT_MS));
  for (const [base, who] of [[urlA, y], [urlB, x]] as const) {
    const r = await start(base, who);
    t.equal(r.status, 503, 'both at their share, both instances full');
    t.equal(r.body.error.code, 'browser_capacity');
    t.match(r.body.error.message, /this organization holds 2 browser contexts \(1 on this instance/, 'the sentence counts both instances');
    t.ok(Number(r.retryAfter) >= 1, `Retry-After ${r.retryAfter}`);
  }
});
