import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { findChromium } from '../../src/adapters/browser/chromium.ts';
import { drive, embeddedWorker, remoteWorker, WorkerError, workerFromEnv } from '../../src/adapters/browser/worker.ts';

// The browser worker port against a real headless Chromium: isolated contexts,
// the concurrency bound, the per-run deadline and stall detection, a remote
// worker that cannot be reached.

const chromiumFound = await findChromium();

t.test('configuration: remote by URL, embedded by default, none when disabled', async (t) => {
  t.equal(workerFromEnv({ BROWSER_WORKER_URL: 'http://127.0.0.1:9' })?.kind, 'remote');
  t.equal(workerFromEnv({})?.kind, 'embedded');
  t.equal(workerFromEnv({ BROWSER_WORKER: 'none' }), undefined);
  const w = remoteWorker('http://127.0.0.1:9');
  await t.rejects(w.open(), { code: 'worker_unavailable' }, 'an unreachable remote worker is a typed failure');
  t.equal(w.active, 0);
});

t.test('embedded Chromium: contexts, capacity, deadline, stall', { skip: chromiumFound ? false : 'no Chromium found (findChromium() returned null): browser worker tests skipped' }, async (t) => {
  // A page that never answers, for the bounds.
  const hang = http.createServer((req, res) => {
    if (req.url === '/ok') res.writeHead(200, { 'content-type': 'text/html' }).end('<h1 id="t">hello</h1>');
  });
  await new Promise<void>((r) => hang.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(hang.address() as AddressInfo).port}`;
  t.teardown(() => {
    hang.closeAllConnections();
    hang.close();
  });
  const w = embeddedWorker({ maxContexts: 2 });
  t.teardown(() => w.close());
  const a = await w.open();
  const b = await w.open();
  await t.rejects(w.open(), { code: 'capacity' }, 'a third context is refused at maxContexts 2');
  await a.page.goto(`${base}/ok`);
  t.equal(await a.page.textContent('#t'), 'hello');
  await a.context.addCookies([{ name: 's', value: '1', url: base }]);
  t.same(await b.context.cookies(base), [], 'contexts are isolated');
  await a.close();
  await b.close();
  t.equal(w.active, 0);

  const s1 = await w.open();
  const err1 = await drive(s1, { deadlineMs: 1_500, stallMs: 60_000 }, async (progress) => {
    for (;;) {
      progress('poll');
      await s1.page.goto(`${base}/ok`);
    }
  }).catch((e: unknown) => e);
  t.ok(err1 instanceof WorkerError && err1.code === 'drive_deadline_exceeded', 'a run that keeps going past its deadline fails with drive_deadline_exceeded');
  const s2 = await w.open();
  const err2 = await drive(s2, { deadlineMs: 60_000, stallMs: 500 }, async (progress) => {
    progress('open');
    await s2.page.goto(`${base}/hang`, { timeout: 0 });
  }).catch((e: unknown) => e);
  t.match(err2, { code: 'drive_stalled', step: 'open' }, 'a run stuck on a page that never answers fails with drive_stalled');
  const s3 = await w.open();
  const ok = await drive(s3, { deadlineMs: 10_000, stallMs: 5_000 }, async () => 42);
  t.equal(ok, 42);
  await s3.close();
  await s1.close();
  await s2.close();
  t.equal(w.active, 0, 'every context closed');
});
