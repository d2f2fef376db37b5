import type { AddressInfo } from 'node:net';
import t from 'tap';
import { findChromium } from '../../src/adapters/browser/chromium.ts';
import { embeddedWorker } from '../../src/adapters/browser/worker.ts';
import { HOSTED_CONNECT_IDLE_MS } from '../../src/limits.ts';
import { hostedConfig } from '../../src/usecases/hosted-browser.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { until } from '../helpers/wait.ts';

// A hosted-connect context is released when nobody uses it (issue 38): opened
// and never watched, it closes HOSTED_CONNECT_IDLE_MS (a minute) after it
// opened; watched, it stays open however long the person watches; once the
// live view is closed, it closes that long after. The idle time is shrunk
// here only while nothing but the wanted expiry can meet it: the test waits
// for the release as a condition, never for a time.

const chromium = await findChromium();
const skip = chromium ? false : 'no Chromium found (findChromium() returned null): hosted-connect idle tests skipped';

const worker = embeddedWorker();
const { app, ledger } = await testApp(t, { merchants: true, browserWorker: worker });
await app.listen({ host: '127.0.0.1', port: 0 });
const origin = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
const org = await bootstrapOrg(app, 'Idle');

const start = async () => {
  const r = await app.inject({ method: 'POST', url: '/v1/cart/merchant-b/connect/start', headers: org.key });
  if (r.statusCode !== 200) throw new Error(r.body);
  return r.json() as { session_id: string; live_view_url: string };
};
const expiredWhy = async (sessionId: string) => (await ledger.store.readAll({ maxCount: 100_000 })).find((e) => e.streamName === `hosted_connect-${sessionId}` && e.type === 'hosted_connect.expired')?.data.reason as string | undefined;

t.test('the documented idle time is a minute', async (t) => {
  t.equal(HOSTED_CONNECT_IDLE_MS, 60_000);
  t.equal(hostedConfig.idleMs, HOSTED_CONNECT_IDLE_MS);
});

t.test('a session nobody opens releases its context at the idle deadline', { skip }, async (t) => {
  const idle = hostedConfig.idleMs;
  hostedConfig.idleMs = 200;
  t.teardown(() => void (hostedConfig.idleMs = idle));
  const s = await start();
  await until(async () => (await expiredWhy(s.session_id)) === 'idle', 'the session expires idle');
  await until(() => worker.activeOf(org.orgId) === 0, 'its context is released');
  t.equal(worker.active, 0);
});

t.test('a watched session stays open; once its live view closes, it is released', { skip }, async (t) => {
  const s = await start();
  const path = new URL(s.live_view_url).pathname;
  const page = await fetch(`${origin}${path}`, { headers: { accept: 'text/html' } });
  t.equal(page.status, 200);
  const cookie = page.headers.getSetCookie()[0]!.split(';')[0]!;
  const viewer = new AbortController();
  const frames = await fetch(`${origin}${path}/frames`, { headers: { cookie }, signal: viewer.signal });
  t.equal(frames.status, 200);
  const reader = frames.body!.getReader();
  let text = '';
  while (!text.includes('event: frame')) text += new TextDecoder().decode((await reader.read()).value);
  t.pass('the viewer sees a frame');

  // Watched: no idle deadline runs, whatever its length.
  const idle = hostedConfig.idleMs;
  hostedConfig.idleMs = 200;
  t.teardown(() => void (hostedConfig.idleMs = idle));
  const input = await fetch(`${origin}${path}/input`, { method: 'POST', headers: { cookie, 'content-type': 'application/json' }, body: JSON.stringify({ type: 'key', key: 'Tab' }) });
  t.equal(input.status, 204, 'an input while watched');
  t.equal(await expiredWhy(s.session_id), undefined, 'open while watched');
  t.equal(worker.activeOf(org.orgId), 1);

  viewer.abort(); // the person closes the live view
  await until(async () => (await expiredWhy(s.session_id)) === 'idle', 'the session expires idle after its view closed');
  await until(() => worker.activeOf(org.orgId) === 0, 'its context is released');
  const ended = await fetch(`${origin}${path}/frames`, { headers: { cookie } });
  t.equal(ended.status, 404, 'the live view is gone');
  const finish = await app.inject({ method: 'POST', url: '/v1/cart/merchant-b/connect/finish', headers: org.key, payload: { session_id: s.session_id } });
  t.equal(finish.statusCode, 410);
  t.equal(finish.json().error.code, 'session_expired');
});
