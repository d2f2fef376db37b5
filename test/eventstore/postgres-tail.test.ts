import t from 'tap';
import type { RecordedEvent } from '../../src/eventstore/port.ts';
import { twoStores } from '../helpers/db.ts';
import { until } from '../helpers/wait.ts';
import { ev } from './conformance.ts';

// A subscription takes this process's own commits from memory (the local
// tail) and reads everything else from the log. Whatever the mix, it must
// deliver exactly the log: every position once, in order, each event equal
// to what a read of the log returns.

const { storeA, storeB } = await twoStores(t);

t.test('own and other processes appends interleaved: the subscription delivers the log exactly', async (t) => {
  const abort = new AbortController();
  t.teardown(() => abort.abort());
  const got: RecordedEvent[] = [];
  // The same subscription in runs of events (what local followers use).
  const runs: RecordedEvent[] = [];
  let caughtUp = false;
  let runsCaughtUp = false;
  const done = (async () => {
    for await (const item of storeA.subscribeToAll({ signal: abort.signal })) {
      if (item.kind === 'caught_up') caughtUp = true;
      else got.push(item.event);
    }
  })();
  const runsDone = (async () => {
    for await (const item of storeA.subscribeToAllBatches({ signal: abort.signal })) {
      if (item.kind === 'caught_up') runsCaughtUp = true;
      else runs.push(...item.events);
    }
  })();
  await until(() => caughtUp && runsCaughtUp, 'the subscriptions caught up');
  const rounds = 30;
  for (let i = 0; i < rounds; i++) {
    // Both processes at once, several appends each: batches of either kind, in either order.
    await Promise.all([
      storeA.appendToStream(`tail-a-${i % 3}`, [ev('test.a', { i }), ev('test.a', { i, k: 2 })]),
      storeA.appendToStream(`tail-a2-${i}`, [ev('test.a', { i, note: 'quote " and \\u00e9 é' })]),
      storeB.appendToStream(`tail-b-${i % 3}`, [ev('test.b', { i })]),
    ]);
  }
  const head = await storeA.headPosition();
  await until(() => got.length > 0 && got[got.length - 1]!.position >= head, 'the subscription reached the head');
  await until(() => runs.length > 0 && runs[runs.length - 1]!.position >= head, 'the subscription in runs reached the head');
  const log: RecordedEvent[] = [];
  for (let after = ''; ; ) {
    const page = await storeA.readAll({ after, maxCount: 1000 });
    if (page.length === 0) break;
    log.push(...page);
    after = page[page.length - 1]!.position;
  }
  t.equal(got.length, log.length, 'as many events as the log holds');
  t.same(got.map((e) => e.position), log.map((e) => e.position), 'every position once, in log order');
  t.same(got, log, 'each delivered event equals the logged one (ids, data, metadata, revision, recordedAt)');
  t.ok(got.some((e) => e.type === 'test.b') && got.some((e) => e.type === 'test.a'), 'both processes appends are in it');
  t.same(runs, log, 'in runs: the same log, every event once, in order');
  abort.abort();
  await done;
  await runsDone;
});
