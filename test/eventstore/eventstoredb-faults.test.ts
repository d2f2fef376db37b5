import net from 'node:net';
import t, { type Test } from 'tap';
import { EventStoreDbStore } from '../../src/eventstore/eventstoredb.ts';
import { AppendTooLarge, EventStoreError, type RecordedEvent } from '../../src/eventstore/port.ts';
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

// The per-call deadline and MaxAppendSize, as the server enforces them.

const countOf = async (store: EventStoreDbStore, stream: string) => (await store.readStream(stream)).length;

t.test('a batch reaches the server after its deadline: DeadlineExceeded, nothing written; the retry lands the append once', async (t) => {
  const double = await EsdbDouble.start();
  t.teardown(() => double.stop());
  const store = await EventStoreDbStore.open(double.url);
  t.teardown(() => store.close());
  const batch = [ev(0), ev(1), ev(2)];
  double.expireDeadlines = 1;
  const r = await store.appendToStream('deadline-a', batch, { expectedRevision: 'no_stream' });
  t.equal(double.calls.deadlineExceeded, 1, 'the double answered DeadlineExceeded to one batch');
  t.equal(double.expireDeadlines, 0);
  t.equal(store.health.transportErrors, 1, 'the adapter saw it as a transport error and retried');
  t.match(store.health.lastError, /deadline/i);
  t.equal(r.nextExpectedRevision, 2n);
  const read = await store.readStream('deadline-a');
  t.same(read.map((e) => e.data.i), [0, 1, 2], 'the stream holds the events once');
  t.equal(read[2]!.position, r.lastPosition);
});

t.test('the server writes a batch and answers DeadlineExceeded (a commit timeout): the retry is the same write, the events stand once', async (t) => {
  const double = await EsdbDouble.start();
  t.teardown(() => double.stop());
  const store = await EventStoreDbStore.open(double.url);
  t.teardown(() => store.close());
  await store.appendToStream('deadline-b', [ev(0)], { expectedRevision: 'no_stream' });
  double.timeoutAfterWrite = 1;
  const r = await store.appendToStream('deadline-b', [ev(1), ev(2)], { expectedRevision: 0n });
  t.equal(double.calls.deadlineExceeded, 1, 'one answer was DeadlineExceeded');
  t.equal(store.health.transportErrors, 1, 'retried once');
  t.equal(double.log.stream('deadline-b')?.length, 3, "the server's stream: the first attempt's write, not a second");
  t.equal(r.nextExpectedRevision, 2n, "the original write's result");
  const read = await store.readStream('deadline-b');
  t.same(read.map((e) => e.data.i), [0, 1, 2], 'the stream holds the events once');
  t.equal(read[2]!.position, r.lastPosition);
});

t.test("a server whose MaxAppendSize is below the adapter's limit refuses an append: AppendTooLarge, not retried, nothing written", async (t) => {
  const double = await EsdbDouble.start({ maxAppendSize: 4096 });
  t.teardown(() => double.stop());
  const store = await EventStoreDbStore.open(double.url);
  t.teardown(() => store.close());
  t.equal(store.maxAppendBytes, 1_048_576, 'the adapter allows the default');
  const big = { type: 'test.fault', data: { blob: 'x'.repeat(4096) }, metadata: { org_id: 'org_faults' } };
  const err = await store.appendToStream('small-server', [big]).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(err instanceof AppendTooLarge, 'a typed port error, not the client error raw');
  t.equal((err as AppendTooLarge).code, 'invalid_event');
  t.equal((err as AppendTooLarge).limit, 4096, "the server's MaxAppendSize");
  t.equal((err as AppendTooLarge).refusedBy, 'server');
  t.equal(double.calls.maxAppendSizeExceeded, 1, 'refused once: not retried');
  t.equal(store.health.transportErrors, 0);
  t.equal(await countOf(store, 'small-server'), 0, 'nothing written');
  t.equal((await store.appendToStream('small-server', [ev(0)])).nextExpectedRevision, 0n, 'a small append still lands');
});

t.test('the adapter set to a server\'s lower MaxAppendSize refuses a larger append itself, before the server sees it', async (t) => {
  const double = await EsdbDouble.start({ maxAppendSize: 4096 });
  t.teardown(() => double.stop());
  const store = await EventStoreDbStore.open(double.url, { maxAppendBytes: 4096 });
  t.teardown(() => store.close());
  const big = { type: 'test.fault', data: { blob: 'x'.repeat(4096) }, metadata: { org_id: 'org_faults' } };
  const batches = double.calls.batchAppend + double.calls.append;
  const err = await store.appendToStream('small-port', [big]).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(err instanceof AppendTooLarge);
  t.equal((err as AppendTooLarge).refusedBy, 'port');
  t.equal(double.calls.maxAppendSizeExceeded, 0, 'the server never saw it');
  t.equal(double.calls.batchAppend + double.calls.append, batches);
  t.equal(await countOf(store, 'small-port'), 0);
});

t.test('appends go through the unary Append RPC, each answered on its own call, while subscriptions drop around them', async (t) => {
  // The client's BatchAppend path keeps one table of pending appends for every stream of the process,
  // which a stream's error clears whole: a reconnection then made an answer find no entry and end the
  // process with an uncaught TypeError (the eventstoredb-slice flake). The store uses Append instead.
  const double = await EsdbDouble.start();
  t.teardown(() => double.stop());
  const store = await EventStoreDbStore.open(double.url);
  t.teardown(() => store.close());
  const ac = new AbortController();
  const followed = follow(store, 'unary-', 60, ac.signal);
  double.dropSubscriptionsAfter = 3;
  const before = { ...double.calls };
  const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => store.appendToStream(`unary-${i % 6}`, [ev(i)])));
  double.dropSubscriptionsAfter = undefined;
  t.equal(answers.length, 60, 'every append answered');
  t.equal(double.calls.batchAppend - before.batchAppend, 0, 'no BatchAppend call');
  t.ok(double.calls.append - before.append >= 60, 'one Append call per append (more when one is retried)');
  const seen = await followed;
  ac.abort();
  t.equal(new Set(seen.map((e) => e.id)).size, 60, 'the follower saw each once, through the drops');
});
