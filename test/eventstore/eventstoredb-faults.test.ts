import net from 'node:net';
import t, { type Test } from 'tap';
import { EventStoreDbStore } from '../../src/eventstore/eventstoredb.ts';
import { EventStoreError, type RecordedEvent } from '../../src/eventstore/port.ts';
import { EsdbDouble } from '../../tools/esdb-double/server.ts';
import { EsdbLog } from '../../tools/esdb-double/log.ts';

// Transport faults through the double and the official client: a subscription
// dropped mid-stream, a server unreachable at start, a server restarting under
// a live subscription and a writer.

const ev = (i: number) => ({ type: 'test.fault', data: { i }, metadata: { org_id: 'org_faults' } });

async function follow(store: EventStoreDbStore, prefix: string, total: number, signal: AbortSignal): Promise<RecordedEvent[]> {
  const seen: RecordedEvent[] = [];
  for await (const item of store.subscribeToAll({ filter: { streamPrefixes: [prefix] }, signal })) {
    if (item.kind === 'event') seen.push(item.event);
    if (seen.length >= total) break;
  }
  return seen;
}

function exactlyOnceInOrder(t: Test, seen: RecordedEvent[], total: number) {
  t.equal(seen.length, total, 'every event delivered');
  t.equal(new Set(seen.map((e) => e.id)).size, total, 'none twice');
  t.same(
    seen.map((e) => e.data.i),
    Array.from({ length: total }, (_, i) => i),
    'in order, no gap',
  );
}

t.test('the server drops the subscription every few events, during catch-up and live: nothing lost, nothing doubled', async (t) => {
  const double = await EsdbDouble.start();
  t.teardown(() => double.stop());
  const store = await EventStoreDbStore.open(double.url);
  t.teardown(() => store.close());
  const prefix = 'drop-';
  for (let i = 0; i < 50; i++) await store.appendToStream(`${prefix}${i % 5}`, [ev(i)]);
  double.dropSubscriptionsAfter = 7;
  const ac = new AbortController();
  const following = follow(store, prefix, 100, ac.signal);
  for (let i = 50; i < 100; i++) await store.appendToStream(`${prefix}${i % 5}`, [ev(i)]);
  const seen = await following;
  exactlyOnceInOrder(t, seen, 100);
  t.ok(store.health.resubscriptions >= 10, `resubscribed after each drop (${store.health.resubscriptions})`);
  t.match(store.health.lastError, /dropped by the double/);
});

t.test('a server unreachable at start: a clear error naming the address', async (t) => {
  const port = await new Promise<number>((resolve) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const p = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(p));
    });
  });
  const err = await EventStoreDbStore.open(`esdb://127.0.0.1:${port}?tls=false`).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(err instanceof EventStoreError, 'a typed store error');
  t.equal((err as EventStoreError).code, 'store_unavailable');
  t.match((err as Error).message, new RegExp(`EventStoreDB at 127\\.0\\.0\\.1:${port}`), 'names the address');
  t.notMatch((err as Error).message, /password|changeit/);
});

t.test('the server restarts under a live subscription and a writer: appends retry, the subscription resumes', async (t) => {
  const log = new EsdbLog();
  let double = await EsdbDouble.start({ log });
  const port = double.port;
  t.teardown(() => double.stop());
  const store = await EventStoreDbStore.open(double.url);
  t.teardown(() => store.close());
  const ac = new AbortController();
  const following = follow(store, 'restart-', 40, ac.signal);
  for (let i = 0; i < 20; i++) await store.appendToStream('restart-a', [ev(i)]);
  await double.stop();
  // Appends issued while the server is down wait with back-off and land once it is back.
  const pending = (async () => {
    for (let i = 20; i < 40; i++) await store.appendToStream('restart-a', [ev(i)]);
  })();
  await new Promise((r) => setTimeout(r, 150));
  double = await EsdbDouble.start({ log, port });
  await pending;
  const seen = await following;
  exactlyOnceInOrder(t, seen, 40);
  t.ok(store.health.transportErrors > 0, 'the outage was seen and counted');
  t.equal((await store.readStream('restart-a')).length, 40, 'each append written once');
});
