import { randomUUID } from 'node:crypto';
import t from 'tap';
import {
  BACKWARDS,
  DeadlineExceededError,
  END,
  EventStoreDBClient,
  eventTypeFilter,
  excludeSystemEvents,
  FORWARDS,
  jsonEvent,
  MaxAppendSizeExceededError,
  NO_STREAM,
  START,
  STREAM_EXISTS,
  streamNameFilter,
  StreamNotFoundError,
  WrongExpectedVersionError,
  type AllStreamResolvedEvent,
  type Position,
} from '@eventstore/db-client';
import { EsdbDouble } from '../../tools/esdb-double/server.ts';

// The server's answers, as the official client sees them. Each case restates a
// behaviour pinned down by the client's own test suite
// (EventStore/EventStore-Client-NodeJS packages/test/src/streams/*.test.ts) or
// the server documentation; docs/eventstoredb.md lists the sources and what
// could not be confirmed. They run against the double on loopback, or against
// a real server when ESDB_URL is set: the same cases, unchanged.

let url = process.env.ESDB_URL;
let double: EsdbDouble | undefined;
if (!url) {
  double = await EsdbDouble.start();
  t.teardown(() => double!.stop());
  url = double.url;
}
const client = EventStoreDBClient.connectionString([url] as unknown as TemplateStringsArray);
t.teardown(() => client.dispose());

const uniq = (p: string) => `${p}-${randomUUID().slice(0, 8)}`;
const events = (n: number, type = 'test.event') => Array.from({ length: n }, (_, i) => jsonEvent({ type, data: { i } }));
async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}
async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => undefined,
    (e: unknown) => e,
  );
}

t.test('append: each expected-revision form (appendToStream.test.ts)', async (t) => {
  const s = uniq('expect');
  const r0 = await client.appendToStream(s, events(2), { expectedRevision: NO_STREAM });
  t.equal(r0.nextExpectedRevision, 1n, 'no_stream on a new stream: revisions 0..1');
  const e1 = await rejection(client.appendToStream(s, events(1), { expectedRevision: NO_STREAM }));
  t.ok(e1 instanceof WrongExpectedVersionError);
  t.equal((e1 as WrongExpectedVersionError).streamName, s);
  t.equal((e1 as WrongExpectedVersionError).expectedVersion, NO_STREAM);
  t.equal((e1 as WrongExpectedVersionError).actualVersion, 1n, 'the conflict reports the current revision');
  const missing = uniq('missing');
  const e2 = await rejection(client.appendToStream(missing, events(1), { expectedRevision: STREAM_EXISTS }));
  t.equal((e2 as WrongExpectedVersionError).expectedVersion, STREAM_EXISTS);
  t.equal((e2 as WrongExpectedVersionError).actualVersion, NO_STREAM, 'stream_exists on a missing stream: actual no_stream');
  const e3 = await rejection(client.appendToStream(missing, events(1), { expectedRevision: 1n }));
  t.equal((e3 as WrongExpectedVersionError).expectedVersion, 1n);
  t.equal((e3 as WrongExpectedVersionError).actualVersion, NO_STREAM);
  const e4 = await rejection(client.appendToStream(s, events(1), { expectedRevision: 2n }));
  t.equal((e4 as WrongExpectedVersionError).actualVersion, 1n, 'an exact revision ahead of the stream');
  t.equal((await client.appendToStream(s, events(1), { expectedRevision: 1n })).nextExpectedRevision, 2n);
  t.equal((await client.appendToStream(s, events(1), { expectedRevision: STREAM_EXISTS })).nextExpectedRevision, 3n);
  t.equal((await client.appendToStream(s, events(1))).nextExpectedRevision, 4n, 'any is the default');
});

t.test('append: re-sending already-written event ids is idempotent', async (t) => {
  const s = uniq('idem');
  const batch = events(3);
  const first = await client.appendToStream(s, batch, { expectedRevision: NO_STREAM });
  const again = await client.appendToStream(s, batch, { expectedRevision: NO_STREAM });
  t.equal(again.nextExpectedRevision, first.nextExpectedRevision, 'the same answer');
  t.same(again.position, first.position, 'the original position');
  const next = await client.appendToStream(s, events(1), { expectedRevision: 2n });
  const exactAgain = await client.appendToStream(s, [batch[1]!, batch[2]!], { expectedRevision: 0n });
  t.equal(exactAgain.nextExpectedRevision, 2n, 'an exact expectation pointing at the original write');
  t.equal(next.nextExpectedRevision, 3n);
  t.equal((await collect(client.readStream(s))).length, 4, 'nothing written twice');
});

t.test('readStream: from a revision, both directions, max count; a missing stream (readStream.test.ts)', async (t) => {
  const s = uniq('read');
  await client.appendToStream(s, events(10));
  const rev = async (o: Parameters<typeof client.readStream>[1]) => (await collect(client.readStream(s, o))).map((e) => e.event!.revision);
  t.same(await rev({ fromRevision: START }), [0n, 1n, 2n, 3n, 4n, 5n, 6n, 7n, 8n, 9n]);
  t.same(await rev({ fromRevision: 7n }), [7n, 8n, 9n], 'from a revision, inclusive');
  t.same(await rev({ direction: BACKWARDS, fromRevision: END, maxCount: 3 }), [9n, 8n, 7n]);
  t.same(await rev({ direction: BACKWARDS, fromRevision: 2n }), [2n, 1n, 0n], 'backwards from a revision, inclusive');
  t.same(await rev({ maxCount: 2 }), [0n, 1n]);
  const err = await rejection(collect(client.readStream(uniq('none'))));
  t.ok(err instanceof StreamNotFoundError, 'a missing stream is StreamNotFoundError');
});

t.test('$all: system events beside ours; positions grow and are not dense; the append position is the event position', async (t) => {
  const s = uniq('all');
  const one = await client.appendToStream(s, jsonEvent({ type: 'test.one', data: {} }));
  const all = await collect(client.readAll({ direction: FORWARDS, fromPosition: START }));
  t.ok(all.some((r) => r.event!.streamId.startsWith('$') || r.event!.type.startsWith('$')), 'system events are part of $all');
  const mine = all.find((r) => r.event!.streamId === s)!;
  t.same(mine.event!.position, one.position, 'readStream.test.ts "populates log position"');
  let dense = true;
  let increasing = true;
  for (let i = 1; i < all.length; i++) {
    const a = all[i - 1]!.event!.position!.commit;
    const b = all[i]!.event!.position!.commit;
    if (b <= a) increasing = false;
    if (b !== a + 1n) dense = false;
  }
  t.ok(increasing, 'commit positions grow');
  t.notOk(dense, 'commit positions are not dense');
});

t.test('$all: reading from a position is inclusive; backwards from the end starts at the newest (readAll.test.ts)', async (t) => {
  const a = uniq('incl');
  await client.appendToStream(a, events(3));
  const firstThree = await collect(client.readAll({ maxCount: 3 }));
  const third = firstThree[2]!;
  const [again] = await collect(client.readAll({ maxCount: 1, fromPosition: third.event!.position! }));
  t.same(again, third, 'readAll from a position starts with the event at that position');
  const last = await client.appendToStream(uniq('newest'), events(1));
  const [newest] = await collect(client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1 }));
  t.same(newest!.event!.position, last.position);
  t.equal((await collect(client.readAll({ maxCount: 2 }))).length, 2, 'maxCount');
});

t.test('subscribeToAll: from a position is exclusive; caught up once; events appended during catch-up arrive exactly once (subscribeToAll.test.ts)', async (t) => {
  const a = uniq('sub');
  const marker = await client.appendToStream(a, jsonEvent({ type: 'test.marker', data: {} }));
  await client.appendToStream(a, events(3));
  const seen: AllStreamResolvedEvent[] = [];
  let caughtUp = 0;
  let confirmed = 0;
  const sub = client.subscribeToAll({ fromPosition: marker.position!, filter: streamNameFilter({ prefixes: [a] }) });
  sub.on('caughtUp', () => caughtUp++);
  sub.on('confirmation', () => confirmed++);
  // Appended while the subscription is starting and catching up.
  const writing = (async () => {
    for (let i = 0; i < 10; i++) await client.appendToStream(a, events(1, 'test.during'));
  })();
  for await (const r of sub) {
    seen.push(r);
    if (seen.length === 13) break;
  }
  await writing;
  await sub.unsubscribe();
  t.notOk(seen.some((r) => r.event!.type === 'test.marker'), 'the event at the start position is not delivered');
  t.equal(seen.length, 13);
  t.equal(new Set(seen.map((r) => r.event!.id)).size, 13, 'no duplicates');
  t.same(seen.map((r) => r.event!.revision), Array.from({ length: 13 }, (_, i) => BigInt(i + 1)), 'in order, no gap');
  t.equal(caughtUp, 1, 'caughtUp once (server 23.10+)');
  t.equal(confirmed, 1);
});

t.test('server-side filters: stream prefix, event-type regex, excludeSystemEvents (subscribeToAll-filters.test.ts)', async (t) => {
  const a = uniq('filt-a');
  const b = uniq('filt-b');
  const start = await client.appendToStream(uniq('filt-start'), events(1));
  await client.appendToStream(a, events(4, 'test.apple'));
  await client.appendToStream(b, events(4, 'test.banana'));
  const endStream = uniq('filt-end');
  const end = await client.appendToStream(endStream, events(1, 'test.end'));
  const take = async (filter: Parameters<typeof client.subscribeToAll>[0]) => {
    const out: AllStreamResolvedEvent[] = [];
    for await (const r of client.subscribeToAll({ fromPosition: start.position!, ...filter })) {
      if (r.event!.position!.commit === end.position!.commit) break;
      out.push(r);
    }
    return out;
  };
  const byPrefix = await take({ filter: streamNameFilter({ prefixes: [a, endStream, 'no-such-prefix'] }) });
  t.ok(byPrefix.length === 4 && byPrefix.every((r) => r.event!.streamId === a), 'stream-name prefix');
  const byType = await take({ filter: eventTypeFilter({ regex: '^test\\.(banana|end)$' }) });
  t.same(byType.map((r) => r.event!.streamId), [b, b, b, b], 'event-type regex (the end marker stops the loop)');
  const noSystem = await take({ filter: excludeSystemEvents() });
  t.ok(noSystem.every((r) => !r.event!.type.startsWith('$')), 'no system events');
  t.ok(noSystem.length >= 8);
});

t.test('filtered subscriptions send checkpoints every window x interval events searched (subscribeToAll-filters.test.ts "checkpoints")', async (t) => {
  const a = uniq('cp');
  const marker = await client.appendToStream(a, jsonEvent({ type: 'test.marker', data: {} }));
  await client.appendToStream(a, events(8));
  const checkpoints: Position[] = [];
  let n = 0;
  const sub = client.subscribeToAll({
    fromPosition: marker.position!,
    filter: excludeSystemEvents({ checkpointInterval: 2, checkpointReached: (_s, p) => void checkpoints.push(p) }),
  });
  const writing = (async () => {
    for (let i = 0; i < 18; i++) await client.appendToStream(a, events(20));
    await client.appendToStream(a, [...events(15), jsonEvent({ type: 'test.finish', data: {} })]);
  })();
  for await (const r of sub) {
    if (r.event!.streamId === a) n++;
    if (r.event!.type === 'test.finish') break;
  }
  await writing;
  await sub.unsubscribe();
  t.equal(n, 384, '8 before subscribing, 376 after');
  // 384 events (plus the system events searched alongside) / (32 x 2).
  t.ok(checkpoints.length >= 6 && checkpoints.length <= 8, `6..8 checkpoints (got ${checkpoints.length})`);
  let increasing = true;
  for (let i = 1; i < checkpoints.length; i++) if (checkpoints[i]!.commit <= checkpoints[i - 1]!.commit) increasing = false;
  t.ok(increasing, 'checkpoint positions grow');
  const windowed: Position[] = [];
  const sub2 = client.subscribeToAll({
    fromPosition: marker.position!,
    filter: streamNameFilter({ prefixes: [a], maxSearchWindow: 10, checkpointInterval: 1, checkpointReached: (_s, p) => void windowed.push(p) }),
  });
  let m = 0;
  for await (const r of sub2) {
    if (r.event!.type === 'test.finish') break;
    m++;
  }
  await sub2.unsubscribe();
  t.equal(m, 383);
  t.ok(windowed.length >= 38, `a max search window of 10 checkpoints every 10 events searched (got ${windowed.length})`);
});

t.test('the batch-append path is taken when the server offers it; the plain append otherwise', { skip: double ? false : 'counts calls on the double only' }, async (t) => {
  const before = { ...double!.calls };
  await client.appendToStream(uniq('batch'), events(2));
  await client.appendToStream(uniq('plain'), events(2), { credentials: { username: 'admin', password: 'changeit' } });
  t.equal(double!.calls.batchAppend - before.batchAppend + double!.calls.append - before.append >= 1, true);
  t.equal(double!.calls.append - before.append, 1, 'with credentials the client uses Append (appendToStream-batch-append.test.ts)');
});

// MaxAppendSize (server default 1 048 576): an append is counted as
// Event.SizeOnDisk summed over its events (data + metadata + twice the type);
// more is refused with MaximumAppendSizeExceeded (BatchAppend: a Status whose
// details are event_store.client.MaximumAppendSizeExceeded; Append:
// InvalidArgument with the exception in the trailers), nothing written.
const MAX_APPEND_SIZE = 1_048_576;
/** Events of exactly `total` bytes as the server counts them (no metadata: the client sends none). */
function sizedEvents(total: number, n = 2) {
  const type = 'test.size';
  const each = Math.floor(total / n);
  return Array.from({ length: n }, (_, i) => {
    const bytes = i === n - 1 ? total - each * (n - 1) : each;
    // {"b":"<pad>"} is 8 bytes besides the pad; the type counts twice.
    return jsonEvent({ type, data: { b: 'x'.repeat(bytes - 8 - 2 * type.length) } });
  });
}

for (const path of ['BatchAppend', 'Append'] as const) {
  const opts = path === 'Append' ? { credentials: { username: 'admin', password: 'changeit' } } : {};
  t.test(`${path}: an append of exactly MaxAppendSize is accepted; one byte more is MaxAppendSizeExceededError, nothing written`, async (t) => {
    const s = uniq(`size-${path}`);
    const at = await client.appendToStream(s, sizedEvents(MAX_APPEND_SIZE), { expectedRevision: NO_STREAM, ...opts });
    t.equal(at.nextExpectedRevision, 1n);
    const err = await rejection(client.appendToStream(s, sizedEvents(MAX_APPEND_SIZE + 1), { expectedRevision: 1n, ...opts }));
    t.ok(err instanceof MaxAppendSizeExceededError, `${path}: MaxAppendSizeExceededError (${(err as Error)?.constructor?.name})`);
    t.equal((err as MaxAppendSizeExceededError).maxAppendSize, MAX_APPEND_SIZE, 'the error carries the server limit');
    t.equal((await collect(client.readStream(s))).length, 2, 'the refused append wrote nothing');
    t.equal((await client.appendToStream(s, events(1), { expectedRevision: 1n, ...opts })).nextExpectedRevision, 2n, 'the stream stands where it was');
  });
}

t.test('BatchAppend: a batch whose deadline has passed when it arrives is DeadlineExceededError, nothing written', async (t) => {
  const s = uniq('deadline');
  const before = double?.calls.deadlineExceeded;
  // deadline 0: the batch's deadline option is the moment it was built, past
  // by the time the server reads it. The batch-append call itself has no gRPC
  // deadline, so the answer is the server's, not the client's.
  const err = await rejection(client.appendToStream(s, events(2), { expectedRevision: NO_STREAM, deadline: 0 }));
  t.ok(err instanceof DeadlineExceededError, `DeadlineExceededError (${(err as Error)?.constructor?.name})`);
  if (double) t.equal(double.calls.deadlineExceeded - before!, 1, 'answered by the server');
  t.ok(await rejection(collect(client.readStream(s))) instanceof StreamNotFoundError, 'nothing written');
  t.equal((await client.appendToStream(s, events(2), { expectedRevision: NO_STREAM })).nextExpectedRevision, 1n, 'the same append within its deadline lands');
});

t.test('Append: a call past its deadline is DeadlineExceededError, nothing written', { skip: double ? false : 'needs the double to judge a call late' }, async (t) => {
  const s = uniq('deadline-append');
  double!.expireDeadlines = 1;
  const before = double!.calls.deadlineExceeded;
  const err = await rejection(client.appendToStream(s, events(1), { credentials: { username: 'admin', password: 'changeit' } }));
  t.ok(err instanceof DeadlineExceededError, `DeadlineExceededError (${(err as Error)?.constructor?.name})`);
  t.equal(double!.calls.deadlineExceeded - before, 1, 'answered by the server, not by the client');
  t.ok(await rejection(collect(client.readStream(s))) instanceof StreamNotFoundError, 'nothing written');
});
