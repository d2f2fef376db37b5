import { randomUUID } from 'node:crypto';
import type { Test } from 'tap';
import {
  AppendTooLarge,
  appendSize,
  type EventStore,
  EventStoreError,
  GuardFailed,
  InvalidEvent,
  InvalidStreamName,
  type NewEvent,
  type RecordedEvent,
  START,
  WrongExpectedRevision,
} from '../../src/eventstore/port.ts';

// The event store conformance suite: every adapter runs it (Postgres always,
// EventStoreDB when ESDB_URL is set). `open` may be called several times; each
// call returns another store instance over the same log (another process, in effect).

export type StoreFactory = { open(): Promise<EventStore> };

const ORG = 'org_conformance';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function ev(type: string, data: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): NewEvent {
  return { type, data: data as NewEvent['data'], metadata: { org_id: ORG, ...extra } as NewEvent['metadata'] };
}

const uniq = (p: string) => `${p}-${randomUUID().slice(0, 8)}`;

async function rejects<E>(p: Promise<unknown>, ctor: new (...a: never[]) => E): Promise<E> {
  try {
    await p;
  } catch (err) {
    if (err instanceof ctor) return err;
    throw err;
  }
  throw new Error(`expected a ${ctor.name}`);
}

async function collect(store: EventStore, stream: string) {
  return store.readAll({ filter: { streamPrefixes: [stream] }, maxCount: 10_000 });
}

export function conformance(t: Test, factory: StoreFactory): void {
  let store: EventStore;
  const extra: EventStore[] = [];
  t.before(async () => {
    store = await factory.open();
  });
  t.teardown(async () => {
    for (const s of extra) await s.close();
    await store.close();
  });

  t.test('revisions start at 0 and advance by the number of events', async (t) => {
    const s = uniq('rev');
    const a = await store.appendToStream(s, [ev('test.one')], { expectedRevision: 'no_stream' });
    t.equal(a.nextExpectedRevision, 0n);
    const b = await store.appendToStream(s, [ev('test.two'), ev('test.three')], { expectedRevision: 0n });
    t.equal(b.nextExpectedRevision, 2n);
    const read = await store.readStream(s);
    t.same(read.map((e) => e.revision), [0n, 1n, 2n]);
    t.same(read.map((e) => e.type), ['test.one', 'test.two', 'test.three']);
  });

  t.test('each expected-revision rule, with the actual revision in the error', async (t) => {
    const s = uniq('expect');
    const missing = await rejects(store.appendToStream(s, [ev('test.a')], { expectedRevision: 'stream_exists' }), WrongExpectedRevision);
    t.equal(missing.actual, 'no_stream', 'stream_exists on a missing stream');
    const exact = await rejects(store.appendToStream(s, [ev('test.a')], { expectedRevision: 0n }), WrongExpectedRevision);
    t.equal(exact.actual, 'no_stream', 'exact revision on a missing stream');
    await store.appendToStream(s, [ev('test.a'), ev('test.b')], { expectedRevision: 'no_stream' });
    const again = await rejects(store.appendToStream(s, [ev('test.c')], { expectedRevision: 'no_stream' }), WrongExpectedRevision);
    t.equal(again.actual, 1n, 'no_stream on an existing stream reports its last revision');
    t.equal(again.stream, s);
    const stale = await rejects(store.appendToStream(s, [ev('test.c')], { expectedRevision: 0n }), WrongExpectedRevision);
    t.equal(stale.actual, 1n);
    t.equal(stale.expected, 0n);
    const ahead = await rejects(store.appendToStream(s, [ev('test.c')], { expectedRevision: 5n }), WrongExpectedRevision);
    t.equal(ahead.actual, 1n);
    t.equal((await store.appendToStream(s, [ev('test.c')], { expectedRevision: 'stream_exists' })).nextExpectedRevision, 2n);
    t.equal((await store.appendToStream(s, [ev('test.d')], { expectedRevision: 'any' })).nextExpectedRevision, 3n);
    t.equal((await store.appendToStream(uniq('any'), [ev('test.d')])).nextExpectedRevision, 0n, 'any is the default');
    t.equal((await store.readStream(s)).length, 4, 'refused appends wrote nothing');
  });

  t.test('a guard: the append is accepted only while another stream stands where it was decided', async (t) => {
    const s = uniq('guarded');
    const g = uniq('guard');
    const absent = await store.appendToStream(s, [ev('test.a')], { expectedRevision: 'no_stream', guard: { stream: g, revision: 'no_stream' } });
    t.equal(absent.nextExpectedRevision, 0n, 'an absent guard stream expected absent');
    await store.appendToStream(g, [ev('test.rule')], { expectedRevision: 'no_stream' });
    const moved = await rejects(store.appendToStream(s, [ev('test.b')], { expectedRevision: 0n, guard: { stream: g, revision: 'no_stream' } }), GuardFailed);
    t.equal(moved.actual, 0n, "the guard stream's actual revision");
    t.equal(moved.guard.stream, g);
    t.equal(moved.code, 'guard_failed');
    const ahead = await rejects(store.appendToStream(s, [ev('test.b')], { expectedRevision: 0n, guard: { stream: g, revision: 3n } }), GuardFailed);
    t.equal(ahead.actual, 0n);
    t.equal((await store.readStream(s)).length, 1, 'a refused guard wrote nothing');
    t.equal((await store.appendToStream(s, [ev('test.b')], { expectedRevision: 0n, guard: { stream: g, revision: 0n } })).nextExpectedRevision, 1n, 'the guard at its revision');
    // The append's own stream is checked first: a stale expectation is a WrongExpectedRevision even when the guard moved too.
    await store.appendToStream(g, [ev('test.rule')], { expectedRevision: 0n });
    await rejects(store.appendToStream(s, [ev('test.c')], { expectedRevision: 0n, guard: { stream: g, revision: 0n } }), WrongExpectedRevision);
    t.equal((await store.readStream(g)).length, 2, 'the guard stream is never written by a guarded append');
  });

  t.test('checkRevision: confirms where a stream stands, refuses otherwise, writes nothing', async (t) => {
    const s = uniq('check');
    await store.checkRevision(s, 'no_stream');
    const absent = await rejects(store.checkRevision(s, 0n), WrongExpectedRevision);
    t.equal(absent.actual, 'no_stream', 'a missing stream is not at revision 0');
    await store.appendToStream(s, [ev('test.a'), ev('test.b')], { expectedRevision: 'no_stream' });
    const head = await store.headPosition();
    await store.checkRevision(s, 1n);
    const stale = await rejects(store.checkRevision(s, 0n), WrongExpectedRevision);
    t.equal(stale.actual, 1n, 'the actual revision');
    t.equal(stale.stream, s);
    const exists = await rejects(store.checkRevision(s, 'no_stream'), WrongExpectedRevision);
    t.equal(exists.actual, 1n);
    // Checks alongside appends, in the same moment: each answered on its own.
    const other = uniq('check-other');
    const [a, b, c] = await Promise.allSettled([
      store.checkRevision(s, 1n),
      store.appendToStream(other, [ev('test.c')], { expectedRevision: 'no_stream' }),
      store.checkRevision(other, 5n),
    ]);
    t.equal(a.status, 'fulfilled');
    t.equal(b.status, 'fulfilled');
    t.ok(c.status === 'rejected' && c.reason instanceof WrongExpectedRevision, 'a check in the same batch as an append is refused alone');
    t.equal((await store.readStream(s)).length, 2, 'checks write nothing');
    t.ok((await store.headPosition()) > head, 'only the append moved the log');
    await rejects(store.checkRevision('', 0n), InvalidStreamName);
  });

  t.test('ten racing appends with the same expectation: exactly one wins', async (t) => {
    const s = uniq('race');
    await store.appendToStream(s, [ev('test.base')], { expectedRevision: 'no_stream' });
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, (_, i) => store.appendToStream(s, [ev('test.racer', { i })], { expectedRevision: 0n })),
    );
    const won = results.filter((r) => r.status === 'fulfilled');
    const lost = results.filter((r) => r.status === 'rejected');
    t.equal(won.length, 1);
    t.equal(lost.length, 9);
    for (const r of lost) t.ok((r as PromiseRejectedResult).reason instanceof WrongExpectedRevision);
    t.equal((await store.readStream(s)).length, 2);

    const fresh = uniq('race-new');
    const created = await Promise.allSettled(
      Array.from({ length: 10 }, () => store.appendToStream(fresh, [ev('test.racer')], { expectedRevision: 'no_stream' })),
    );
    t.equal(created.filter((r) => r.status === 'fulfilled').length, 1, 'one creator of a new stream');
  });

  t.test('readStream: order, from, backwards, max; a missing stream reads empty', async (t) => {
    const s = uniq('read');
    await store.appendToStream(s, Array.from({ length: 10 }, (_, i) => ev('test.n', { i })));
    const all = await store.readStream(s);
    t.same(all.map((e) => e.data.i), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    t.same((await store.readStream(s, { fromRevision: 7n })).map((e) => e.data.i), [7, 8, 9]);
    t.same((await store.readStream(s, { maxCount: 3 })).map((e) => e.data.i), [0, 1, 2]);
    t.same((await store.readStream(s, { direction: 'backwards', maxCount: 3 })).map((e) => e.data.i), [9, 8, 7]);
    t.same((await store.readStream(s, { direction: 'backwards', fromRevision: 2n })).map((e) => e.data.i), [2, 1, 0]);
    t.same(await store.readStream(uniq('missing')), []);
    t.same(await store.readStream(uniq('missing'), { direction: 'backwards' }), []);
  });

  t.test('iterateStream and iterateAll: the events the page reads give, across page edges, decoded alike', async (t) => {
    const toArray = async (it: AsyncIterable<RecordedEvent>) => {
      const out: RecordedEvent[] = [];
      for await (const e of it) out.push(e);
      return out;
    };
    const s = uniq('iterate');
    const other = uniq('iterate-other');
    const before = await store.headPosition();
    // Unicode, nested values and metadata decode as readStream decodes them.
    await store.appendToStream(s, Array.from({ length: 10 }, (_, i) => ev('test.n', { i, text: `olá ${i} 🚀 \u2028`, nested: { list: [i, -2.5, null] } })));
    await store.appendToStream(other, [ev('test.other', { i: 100 })]);
    await store.appendToStream(s, [ev('test.n', { i: 10 })]);
    const paged = await store.readStream(s);
    t.equal(paged.length, 11);
    for (const pageSize of [1, 3, 4, 11, 12]) {
      t.same(await toArray(store.iterateStream(s, { pageSize })), paged, `whole stream, pages of ${pageSize}`);
    }
    t.same(await toArray(store.iterateStream(s)), paged, 'the default page');
    t.same(await toArray(store.iterateStream(s, { fromRevision: 7n, pageSize: 2 })), paged.slice(7), 'from a revision');
    t.same(await toArray(store.iterateStream(uniq('missing'), { pageSize: 2 })), [], 'a missing stream');
    const all = await store.readAll({ after: before, filter: { streamPrefixes: [s, other] } });
    t.same(all.map((e) => e.data.i), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 100, 10], 'log order across streams');
    t.same(await toArray(store.iterateAll({ after: before, filter: { streamPrefixes: [s, other] }, pageSize: 5 })), all, 'filtered by stream, pages of 5');
    t.same(await toArray(store.iterateAll({ after: all[3]!.position, filter: { streamPrefixes: [s, other] }, pageSize: 4 })), all.slice(4), '`after` is exclusive');
    const byType = (await toArray(store.iterateAll({ after: before, filter: { eventTypes: ['test.other'] }, pageSize: 1 }))).filter((e) => e.streamName === other);
    t.same(byType, all.filter((e) => e.type === 'test.other'), 'filtered by type');
    const unfiltered = (await toArray(store.iterateAll({ after: before, pageSize: 3 }))).filter((e) => e.streamName === s || e.streamName === other);
    t.same(unfiltered, all, 'unfiltered, then narrowed to the two streams');
    t.throws(() => store.iterateStream(s, { pageSize: 0 }), { code: 'invalid_event' }, 'a page of nothing is refused');
  });

  t.test('data, metadata and unicode round-trip exactly', async (t) => {
    const s = uniq('unicode');
    const id = randomUUID();
    const data = {
      text: 'Olá, São Paulo — 東京 🚀 \u0001 soh \u2028 sep "quoted" \\ back \\u0000 not a nul',
      nested: { list: [1, -2.5, true, null, 'x'], empty: {}, arr: [] },
      amount_minor: '123456789012345678901234567890',
      big: 9007199254740991,
    };
    await store.appendToStream(s, [{ id, type: 'test.unicode', data, metadata: { org_id: ORG, actor: { kind: 'system', id: 'ç' }, 'chave-é': 'valor' } }]);
    const [e] = await store.readStream(s);
    t.equal(e?.id, id);
    t.same(e?.data, data);
    t.same(e?.metadata, { org_id: ORG, actor: { kind: 'system', id: 'ç' }, 'chave-é': 'valor' });
    t.match(e?.recordedAt, /^\d{4}-\d\d-\d\dT/);
  });

  t.test('text no reader can hold (U+0000, a lone surrogate) is refused, nothing written', async (t) => {
    const s = uniq('unholdable');
    for (const data of [{ text: 'a\u0000b' }, { text: 'lone \ud800' }, { ['k\u0000']: 1 }] as Record<string, string | number>[]) {
      await t.rejects(store.appendToStream(s, [{ type: 'test.text', data, metadata: { org_id: ORG } }]), { code: 'invalid_event' }, JSON.stringify(data));
    }
    t.same(await store.readStream(s), [], 'nothing written');
  });

  t.test('readAt: the events at the positions asked for, in log order, whole', async (t) => {
    const s = uniq('at');
    await store.appendToStream(s, [ev('test.a', { n: 1 }), ev('test.b', { n: 2, text: 'é "q"' }), ev('test.c', { n: 3 })]);
    const events = await collect(store, s);
    t.same(await store.readAt([events[2]!.position, events[0]!.position]), [events[0], events[2]], 'as readAll gives them, in log order');
    t.same(await store.readAt([events[1]!.position, events[1]!.position]), [events[1]], 'a position asked twice is answered once');
    t.same(await store.readAt([]), []);
  });

  t.test('lastPosition is the position readAll shows; after is exclusive', async (t) => {
    const s = uniq('pos');
    const before = await store.headPosition();
    const r = await store.appendToStream(s, [ev('test.a'), ev('test.b'), ev('test.c')]);
    const events = await collect(store, s);
    t.equal(events.length, 3);
    t.equal(events[2]!.position, r.lastPosition);
    t.ok(events[0]!.position > before, 'positions grow');
    t.ok(events[0]!.position < events[1]!.position && events[1]!.position < events[2]!.position, 'string order is log order');
    const afterFirst = await store.readAll({ after: events[0]!.position, filter: { streamPrefixes: [s] } });
    t.same(afterFirst.map((e) => e.type), ['test.b', 'test.c'], 'the event at `after` is not returned');
    t.same(await store.readAll({ after: r.lastPosition, filter: { streamPrefixes: [s] } }), []);
    t.ok((await store.headPosition()) >= r.lastPosition, 'head is at or past the last append');
    const byType = await store.readAll({ after: before, filter: { eventTypes: ['test.b'] } });
    t.ok(byType.some((e) => e.streamName === s && e.type === 'test.b'));
    t.ok(byType.every((e) => e.type === 'test.b'), 'event-type filter');
    t.ok(START < events[0]!.position, 'START sorts first');
  });

  t.test('re-sending already-written event ids never writes them twice', async (t) => {
    // EventStoreDB answers the original result (idempotent append); Postgres
    // refuses with DuplicateEventId or, when the expectation no longer holds,
    // WrongExpectedRevision. Either way the log holds each event once.
    const s = uniq('idem');
    const batch = [0, 1, 2].map((i) => ({ ...ev('test.idem', { i }), id: randomUUID() }));
    const first = await store.appendToStream(s, batch, { expectedRevision: 'no_stream' });
    const head = await store.headPosition();
    for (const expectedRevision of ['no_stream', 'any'] as const) {
      const again = await store.appendToStream(s, batch, { expectedRevision }).then(
        (r) => r,
        (e: unknown) => e,
      );
      if (again instanceof Error) t.ok(again instanceof EventStoreError && ['duplicate_event_id', 'wrong_expected_revision'].includes(again.code), `${expectedRevision}: ${again.name}`);
      else t.same(again, first, `${expectedRevision}: the original result`);
    }
    t.equal(await store.headPosition(), head, 'the log did not move');
    t.same((await store.readStream(s)).map((e) => e.id), batch.map((e) => e.id));
  });

  t.test('a large event and a many-event append round-trip', async (t) => {
    const s = uniq('large');
    const big = { blob: 'x'.repeat(900_000), n: 1 };
    const r = await store.appendToStream(s, [ev('test.large', big)]);
    const [e] = await store.readStream(s);
    t.same(e?.data, big, 'a 900 kB event intact');
    const many = await store.appendToStream(s, Array.from({ length: 2000 }, (_, i) => ev('test.many', { i })), { expectedRevision: r.nextExpectedRevision });
    t.equal(many.nextExpectedRevision, 2000n);
    const read = await store.readAll({ filter: { streamPrefixes: [s] }, maxCount: 5000 });
    t.equal(read.length, 2001);
    t.equal(read[read.length - 1]!.position, many.lastPosition);
  });

  t.test("the largest append: exactly the store's limit is accepted, one byte more is refused whole, nothing written", async (t) => {
    // Sized as EventStoreDB counts an append against MaxAppendSize: UTF-8 bytes
    // of data and metadata plus twice the type, summed over the append. A
    // 2-byte character in the data shows bytes are counted, not characters.
    const limit = store.maxAppendBytes;
    t.ok(limit > 0 && limit <= 1_048_576, `within the server's default MaxAppendSize (${limit})`);
    const sized = (type: string, bytes: number): NewEvent => {
      const base = ev(type, { blob: 'é' });
      const over = appendSize([{ type, data: JSON.stringify(base.data), metadata: JSON.stringify(base.metadata) }]);
      return ev(type, { blob: 'é' + 'x'.repeat(bytes - over) });
    };
    const size = (events: NewEvent[]) => appendSize(events.map((e) => ({ type: e.type, data: JSON.stringify(e.data), metadata: JSON.stringify(e.metadata) })));
    const half = Math.floor(limit / 2);
    const atLimit = [sized('test.limit', half), sized('test.limit_two', limit - half)];
    t.equal(size(atLimit), limit, 'two events summing to the limit');
    const s = uniq('limit');
    const head = await store.headPosition();
    const ok = await store.appendToStream(s, atLimit, { expectedRevision: 'no_stream' });
    t.equal(ok.nextExpectedRevision, 1n, 'an append of exactly the limit is accepted');
    t.same((await store.readStream(s)).map((e) => e.data), atLimit.map((e) => e.data), 'and reads back intact');

    const after = await store.headPosition();
    t.ok(after > head);
    const over = [sized('test.limit', half), sized('test.limit_two', limit - half + 1)];
    t.equal(size(over), limit + 1, 'one byte more, spread over two events each far below the limit');
    const big = uniq('limit-over');
    const refused = await rejects(store.appendToStream(big, over, { expectedRevision: 'no_stream' }), AppendTooLarge);
    t.equal(refused.code, 'invalid_event');
    t.equal(refused.limit, limit);
    t.equal(refused.size, limit + 1, 'the size counted as the server counts it');
    const alone = await rejects(store.appendToStream(big, [sized('test.limit', limit + 1)]), AppendTooLarge);
    t.equal(alone.size, limit + 1, 'one event over the limit alone');
    t.same(await store.readStream(big), [], 'nothing written');
    t.equal(await store.headPosition(), after, 'the log did not move');
  });

  t.test('a 500-event append is never seen half done', async (t) => {
    const s = uniq('atomic');
    let done = false;
    const seen = new Set<number>();
    const reader = (async () => {
      while (!done) {
        const got = await collect(store, s);
        seen.add(got.length);
        await sleep(1);
      }
      seen.add((await collect(store, s)).length);
    })();
    await sleep(20);
    await store.appendToStream(s, Array.from({ length: 500 }, (_, i) => ev('test.bulk', { i })));
    await sleep(20);
    done = true;
    await reader;
    t.same([...seen].sort((a, b) => a - b), [0, 500].filter((n) => seen.has(n)));
    t.ok(seen.has(500));
    t.notOk([...seen].some((n) => n !== 0 && n !== 500), 'only 0 or 500 ever visible');
  });

  t.test('bad input: a typed error and nothing written', async (t) => {
    const head = await store.headPosition();
    const s = uniq('bad');
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    const bad: Array<[string, () => Promise<unknown>, new (...a: never[]) => EventStoreError]> = [
      ['empty stream name', () => store.appendToStream('', [ev('test.a')]), InvalidStreamName],
      ['stream name too long', () => store.appendToStream('x'.repeat(201), [ev('test.a')]), InvalidStreamName],
      ['reserved stream name', () => store.appendToStream('$all', [ev('test.a')]), InvalidStreamName],
      ['no events', () => store.appendToStream(s, []), InvalidEvent],
      ['bigint in data', () => store.appendToStream(s, [{ type: 'test.a', data: { n: 1n } as never, metadata: { org_id: ORG } }]), InvalidEvent],
      ['function in data', () => store.appendToStream(s, [{ type: 'test.a', data: { f: () => 1 } as never, metadata: { org_id: ORG } }]), InvalidEvent],
      ['undefined in data', () => store.appendToStream(s, [{ type: 'test.a', data: { u: undefined } as never, metadata: { org_id: ORG } }]), InvalidEvent],
      ['NaN in data', () => store.appendToStream(s, [{ type: 'test.a', data: { n: Number.NaN }, metadata: { org_id: ORG } }]), InvalidEvent],
      ['circular data', () => store.appendToStream(s, [{ type: 'test.a', data: circular as never, metadata: { org_id: ORG } }]), InvalidEvent],
      ['Date in data', () => store.appendToStream(s, [{ type: 'test.a', data: { d: new Date() } as never, metadata: { org_id: ORG } }]), InvalidEvent],
      ['array as data', () => store.appendToStream(s, [{ type: 'test.a', data: [] as never, metadata: { org_id: ORG } }]), InvalidEvent],
      ['metadata without org_id', () => store.appendToStream(s, [{ type: 'test.a', data: {}, metadata: {} as never }]), InvalidEvent],
      ['empty org_id', () => store.appendToStream(s, [{ type: 'test.a', data: {}, metadata: { org_id: '' } }]), InvalidEvent],
      ['bad event type', () => store.appendToStream(s, [ev('Not A Type')]), InvalidEvent],
      ['bad event id', () => store.appendToStream(s, [{ ...ev('test.a'), id: 'nope' }]), InvalidEvent],
      ['one bad event spoils the append', () => store.appendToStream(s, [ev('test.a'), { type: 'test.b', data: { n: 2n } as never, metadata: { org_id: ORG } }]), InvalidEvent],
    ];
    for (const [name, fn, ctor] of bad) {
      const err = await fn().then(
        () => undefined,
        (e: unknown) => e,
      );
      t.ok(err instanceof ctor, `${name}: ${ctor.name}`);
    }
    t.equal(await store.headPosition(), head, 'the log did not move');
    t.same(await store.readStream(s), []);
  });

  t.test('subscribe: history, caught up, live; resuming gives no gap and no duplicate', async (t) => {
    const s = uniq('sub');
    await store.appendToStream(s, [ev('test.h', { n: 0 }), ev('test.h', { n: 1 })]);
    const ac = new AbortController();
    const got: RecordedEvent[] = [];
    let caughtUpAt = -1;
    const sub = (async () => {
      for await (const item of store.subscribeToAll({ filter: { streamPrefixes: [s] }, signal: ac.signal })) {
        if (item.kind === 'caught_up') caughtUpAt = got.length;
        else got.push(item.event);
        if (got.length === 5) break;
      }
    })();
    while (caughtUpAt < 0) await sleep(5);
    t.equal(caughtUpAt, 2, 'caught up after the two historical events');
    await store.appendToStream(s, [ev('test.l', { n: 2 })]);
    await sleep(10);
    await store.appendToStream(s, [ev('test.l', { n: 3 }), ev('test.l', { n: 4 })]);
    await sub;
    ac.abort();
    t.same(got.map((e) => e.data.n), [0, 1, 2, 3, 4]);

    // Resume after the third event: exactly the rest, then new ones.
    await store.appendToStream(s, [ev('test.l', { n: 5 })]);
    const resumed: number[] = [];
    const ac2 = new AbortController();
    for await (const item of store.subscribeToAll({ after: got[2]!.position, filter: { streamPrefixes: [s] }, signal: ac2.signal })) {
      if (item.kind === 'event') resumed.push(item.event.data.n as number);
      if (resumed.length === 3) break;
    }
    t.same(resumed, [3, 4, 5]);
  });

  t.test('8 concurrent writers x 100 appends with a subscriber: every event once, in order', async (t) => {
    const writers = await Promise.all(Array.from({ length: 8 }, () => factory.open()));
    extra.push(...writers);
    const prefix = uniq('conc');
    const start = await store.headPosition();
    const ac = new AbortController();
    const seen: RecordedEvent[] = [];
    const total = 8 * 100;
    const sub = (async () => {
      for await (const item of store.subscribeToAll({ after: start, filter: { streamPrefixes: [prefix] }, signal: ac.signal })) {
        if (item.kind === 'event') seen.push(item.event);
        if (seen.length >= total) break;
      }
    })();
    await Promise.all(
      writers.map(async (w, wi) => {
        for (let i = 0; i < 100; i++) {
          await sleep(Math.random() * 3);
          await w.appendToStream(`${prefix}-${wi}`, [ev('test.w', { wi, i })]);
        }
      }),
    );
    const timer = setTimeout(() => ac.abort(), 30_000);
    await sub;
    clearTimeout(timer);
    t.equal(seen.length, total, 'every event delivered');
    t.equal(new Set(seen.map((e) => e.id)).size, total, 'no duplicates');
    let increasing = true;
    for (let i = 1; i < seen.length; i++) if (!(seen[i - 1]!.position < seen[i]!.position)) increasing = false;
    t.ok(increasing, 'strictly increasing positions');
    for (let wi = 0; wi < 8; wi++) {
      const mine = seen.filter((e) => e.data.wi === wi).map((e) => e.data.i);
      t.same(mine, Array.from({ length: 100 }, (_, i) => i), `writer ${wi} in its own order`);
    }
  });
}
