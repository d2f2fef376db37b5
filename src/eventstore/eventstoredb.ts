import { randomUUID } from 'node:crypto';
import {
  BACKWARDS,
  END,
  EventStoreDBClient,
  eventTypeFilter,
  excludeSystemEvents,
  FORWARDS,
  jsonEvent,
  START as ESDB_START,
  streamNameFilter,
  StreamNotFoundError,
  WrongExpectedVersionError,
  type AllStreamResolvedEvent,
  type Filter,
  type ResolvedEvent,
} from '@eventstore/db-client';
import { READ_PAGE_DEFAULT, READ_PAGE_MAX, SUBSCRIPTION_RETRY_MS } from '../limits.ts';
import {
  type AppendResult,
  checkAppend,
  checkStreamName,
  type EventMetadata,
  type EventStore,
  EventStoreError,
  type ExpectedRevision,
  type JsonObject,
  matchesFilter,
  type NewEvent,
  type Position,
  type ReadAllOptions,
  type ReadFilter,
  type ReadStreamOptions,
  type RecordedEvent,
  START,
  type SubscribeOptions,
  type SubscriptionItem,
  WrongExpectedRevision,
} from './port.ts';

// The EventStoreDB adapter: a thin translation onto @eventstore/db-client.
// Positions are "<commit>:<prepare>", each zero-padded to 20 digits, so string
// order is log order. readAll from a position is inclusive on the server and
// subscribeToAll is exclusive; the port is exclusive everywhere, so readAll
// drops the event sitting exactly at `after`. System events ($-prefixed) never
// leave this file.

const DIGITS = 20;

function formatPosition(p: { commit: bigint; prepare: bigint }): Position {
  return `${p.commit.toString().padStart(DIGITS, '0')}:${p.prepare.toString().padStart(DIGITS, '0')}`;
}

function parsePosition(p: Position): { commit: bigint; prepare: bigint } {
  const m = /^(\d{1,20}):(\d{1,20})$/.exec(p);
  if (!m) throw new EventStoreError('invalid_event', `not a position of this store: ${p}`);
  return { commit: BigInt(m[1]!), prepare: BigInt(m[2]!) };
}

const isSystem = (streamId: string, type: string) => streamId.startsWith('$') || type.startsWith('$');

function toRecorded(r: ResolvedEvent | AllStreamResolvedEvent): RecordedEvent | undefined {
  const e = r.event;
  if (!e || isSystem(e.streamId, e.type) || !e.isJson) return undefined;
  const position = 'position' in e && e.position ? formatPosition(e.position) : r.commitPosition !== undefined ? formatPosition({ commit: r.commitPosition, prepare: r.commitPosition }) : START;
  return {
    id: e.id,
    type: e.type,
    streamName: e.streamId,
    revision: e.revision,
    position,
    data: e.data as JsonObject,
    metadata: e.metadata as EventMetadata,
    recordedAt: e.created.toISOString(),
  };
}

function serverFilter(filter: ReadFilter | undefined): Filter {
  if (!filter) return excludeSystemEvents();
  if ('streamPrefixes' in filter) return streamNameFilter({ prefixes: [...filter.streamPrefixes] });
  const escaped = filter.eventTypes.map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return eventTypeFilter({ regex: `^(?:${escaped.join('|')})$` });
}

/** A small unbounded queue turning event-emitter callbacks into an async iterator. */
class Inbox<T> {
  private items: T[] = [];
  private wake: (() => void) | undefined;
  push(item: T) {
    this.items.push(item);
    this.wake?.();
  }
  get size() {
    return this.items.length;
  }
  async take(signal?: AbortSignal): Promise<T | undefined> {
    while (this.items.length === 0) {
      if (signal?.aborted) return undefined;
      await new Promise<void>((resolve) => {
        const done = () => {
          signal?.removeEventListener('abort', done);
          resolve();
        };
        this.wake = done;
        signal?.addEventListener('abort', done, { once: true });
      });
      this.wake = undefined;
    }
    return this.items.shift();
  }
}

export class EventStoreDbStore implements EventStore {
  readonly kind = 'eventstoredb' as const;
  private constructor(private readonly client: EventStoreDBClient) {}

  static async open(connectionString: string): Promise<EventStoreDbStore> {
    const client = EventStoreDBClient.connectionString([connectionString] as unknown as TemplateStringsArray);
    const store = new EventStoreDbStore(client);
    await store.headPosition(); // fail fast when the server is unreachable or $all is not readable
    return store;
  }

  async appendToStream(stream: string, events: readonly NewEvent[], opts: { expectedRevision?: ExpectedRevision } = {}): Promise<AppendResult> {
    const expected = opts.expectedRevision ?? 'any';
    const checked = checkAppend(stream, events, expected, randomUUID);
    try {
      const res = await this.client.appendToStream(
        stream,
        checked.map((e) => jsonEvent({ id: e.id, type: e.type, data: e.dataValue, metadata: e.metadataValue })),
        { expectedRevision: expected },
      );
      if (!res.position) throw new EventStoreError('store_unavailable', 'append answered without a position');
      return { nextExpectedRevision: res.nextExpectedRevision, lastPosition: formatPosition(res.position) };
    } catch (err) {
      if (err instanceof WrongExpectedVersionError) {
        const actual = err.actualVersion;
        throw new WrongExpectedRevision(stream, expected, typeof actual === 'bigint' ? actual : 'no_stream');
      }
      if (err instanceof EventStoreError) throw err;
      throw new EventStoreError('store_unavailable', `append failed: ${(err as Error).message}`);
    }
  }

  async readStream(stream: string, opts: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    checkStreamName(stream);
    const backwards = opts.direction === 'backwards';
    const maxCount = Math.min(opts.maxCount ?? READ_PAGE_MAX, READ_PAGE_MAX);
    if (maxCount === 0) return [];
    const out: RecordedEvent[] = [];
    try {
      for await (const r of this.client.readStream(stream, {
        direction: backwards ? BACKWARDS : FORWARDS,
        fromRevision: opts.fromRevision ?? (backwards ? END : ESDB_START),
        maxCount,
      })) {
        const e = toRecorded(r);
        if (e) out.push(e);
      }
    } catch (err) {
      if (err instanceof StreamNotFoundError) return [];
      throw err;
    }
    return out;
  }

  async readAll(opts: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    const maxCount = Math.min(opts.maxCount ?? READ_PAGE_DEFAULT, READ_PAGE_MAX);
    if (maxCount === 0) return [];
    const after = opts.after ?? START;
    let from: typeof ESDB_START | { commit: bigint; prepare: bigint } = after === START ? ESDB_START : parsePosition(after);
    const out: RecordedEvent[] = [];
    // readAll has no server-side filter in this client: page through $all and filter here.
    for (;;) {
      let last: Position | undefined;
      let seen = 0;
      for await (const r of this.client.readAll({ fromPosition: from, maxCount: READ_PAGE_DEFAULT, direction: FORWARDS })) {
        seen++;
        const pos = r.event?.position ? formatPosition(r.event.position) : undefined;
        if (pos === undefined) continue;
        last = pos;
        if (pos <= after) continue; // inclusive start on the server, exclusive in the port
        const e = toRecorded(r);
        if (e && matchesFilter(e, opts.filter)) {
          out.push(e);
          if (out.length >= maxCount) return out;
        }
      }
      if (seen < READ_PAGE_DEFAULT || last === undefined) return out;
      from = parsePosition(last);
    }
  }

  async headPosition(): Promise<Position> {
    let from: typeof END | { commit: bigint; prepare: bigint } = END;
    for (;;) {
      let seen = 0;
      let last: { commit: bigint; prepare: bigint } | undefined;
      for await (const r of this.client.readAll({ fromPosition: from, direction: BACKWARDS, maxCount: 100 })) {
        seen++;
        const e = r.event;
        if (!e?.position) continue;
        if (!isSystem(e.streamId, e.type)) return formatPosition(e.position);
        last = e.position;
      }
      if (seen < 100 || !last) return START;
      from = last;
    }
  }

  subscribeToAll(opts: SubscribeOptions = {}): AsyncIterable<SubscriptionItem> {
    const self = this;
    return {
      async *[Symbol.asyncIterator]() {
        let after = opts.after ?? START;
        let caughtUpSent = false;
        while (!opts.signal?.aborted) {
          const inbox = new Inbox<SubscriptionItem | { kind: 'error' }>();
          const sub = self.client.subscribeToAll({
            fromPosition: after === START ? (ESDB_START as typeof ESDB_START) : parsePosition(after),
            filter: serverFilter(opts.filter),
          });
          sub.on('data', (r: AllStreamResolvedEvent) => {
            const e = toRecorded(r);
            if (e && matchesFilter(e, opts.filter)) inbox.push({ kind: 'event', event: e });
            if (inbox.size > 1000) sub.pause();
          });
          sub.on('caughtUp', () => inbox.push({ kind: 'caught_up', position: after }));
          sub.on('error', () => inbox.push({ kind: 'error' }));
          sub.on('end', () => inbox.push({ kind: 'error' }));
          try {
            for (;;) {
              const item = await inbox.take(opts.signal);
              if (!item) return;
              if (inbox.size < 100 && sub.isPaused()) sub.resume();
              if (item.kind === 'error') break; // resubscribe from the last delivered position
              if (item.kind === 'event') {
                if (item.event.position <= after) continue;
                after = item.event.position;
                yield item;
              } else if (!caughtUpSent) {
                caughtUpSent = true;
                yield { kind: 'caught_up', position: after };
              }
            }
          } finally {
            await sub.unsubscribe().catch(() => {});
          }
          await new Promise((r) => setTimeout(r, SUBSCRIPTION_RETRY_MS));
        }
      },
    };
  }

  async close(): Promise<void> {
    await this.client.dispose();
  }
}
