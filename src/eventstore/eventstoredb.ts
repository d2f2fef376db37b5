import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import {
  BACKWARDS,
  CancelledError,
  DeadlineExceededError,
  END,
  EventStoreDBClient,
  FORWARDS,
  jsonEvent,
  MaxAppendSizeExceededError,
  NotLeaderError,
  START as ESDB_START,
  streamNameFilter,
  eventTypeFilter,
  StreamNotFoundError,
  UnavailableError,
  WrongExpectedVersionError,
  type AllStreamResolvedEvent,
  type AppendExpectedRevision,
  type Filter,
  type ResolvedEvent,
  type StreamingRead,
} from '@eventstore/db-client';
import { APPEND_MAX_BYTES, ESDB_RETRY_ATTEMPTS, ESDB_RETRY_BASE_MS, ESDB_RETRY_MAX_MS, READ_PAGE_DEFAULT, READ_PAGE_MAX } from '../limits.ts';
import {
  type AppendOptions,
  type AppendResult,
  AppendTooLarge,
  GuardFailed,
  OutcomeUnknown,
  checkAppend,
  checkStreamName,
  type EventMetadata,
  type EventStore,
  EventStoreError,
  type ExpectedRevision,
  type IterateAllOptions,
  type IterateStreamOptions,
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
import { iteratePage, readAhead } from './read-ahead.ts';

// The EventStoreDB adapter: a thin translation onto @eventstore/db-client 6.x.
//
// Positions are "<commit>:<prepare>", each zero-padded to 20 digits, so string
// order is log order. The server's $all positions are byte offsets (they grow,
// they are not dense). A read of $all from a position is inclusive on the
// server, a subscription from a position is exclusive; the port is exclusive
// everywhere, so reads drop the event sitting exactly at `after`.
//
// Filters run on the server: a projection rebuild of one organization's streams
// reads only those streams, and system events ($-prefixed streams) never cross
// the wire unless asked. The 6.x client exposes filters on subscribeToAll only;
// its readAll always sends `no_filter`. A filtered read is the same Read call
// with the `filter` option set (what the later @kurrent/kurrentdb-client sends
// for readAll({filter})), so `filteredReadAll` builds that request from the
// client's own generated messages and sends it on the client's own channel
// (its connection, discovery, credentials and reconnection).

const DIGITS = 20;
/** Server-side search window of filtered subscriptions; checkpoints every window x multiplier events searched. */
const SEARCH_WINDOW = 32;

type EsdbPosition = { commit: bigint; prepare: bigint };

function formatPosition(p: EsdbPosition): Position {
  return `${p.commit.toString().padStart(DIGITS, '0')}:${p.prepare.toString().padStart(DIGITS, '0')}`;
}

function parsePosition(p: Position): EsdbPosition {
  const m = /^(\d{1,20}):(\d{1,20})$/.exec(p);
  if (!m) throw new EventStoreError('invalid_event', `not a position of this store: ${p}`);
  return { commit: BigInt(m[1]!), prepare: BigInt(m[2]!) };
}

const isSystem = (streamId: string, type: string) => streamId.startsWith('$') || type.startsWith('$');

function toRecorded(r: ResolvedEvent | AllStreamResolvedEvent): RecordedEvent | undefined {
  const e = r.event;
  if (!e || isSystem(e.streamId, e.type) || !e.isJson) return undefined;
  if (!('position' in e) || !e.position) return undefined; // every event the server sends carries its $all position
  return {
    id: e.id,
    type: e.type,
    streamName: e.streamId,
    revision: e.revision,
    position: formatPosition(e.position),
    data: e.data as JsonObject,
    metadata: e.metadata as EventMetadata,
    recordedAt: e.created.toISOString(),
  };
}

/** The server-side filter for a port filter: stream prefixes, exact event types, or (none) every non-system stream. */
type ServerFilter = { on: 'stream' | 'type'; prefixes?: string[]; regex?: string };

const escapeRegex = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function serverFilter(filter: ReadFilter | undefined): ServerFilter {
  if (!filter) return { on: 'stream', regex: '^[^$]' };
  if ('streamPrefixes' in filter) return { on: 'stream', prefixes: [...filter.streamPrefixes] };
  return { on: 'type', regex: `^(?:${filter.eventTypes.map(escapeRegex).join('|')})$` };
}

function clientFilter(f: ServerFilter, maxSearchWindow = SEARCH_WINDOW): Filter {
  const base = { maxSearchWindow, checkpointInterval: 1 };
  const make = f.on === 'stream' ? streamNameFilter : eventTypeFilter;
  return f.prefixes ? make({ ...base, prefixes: f.prefixes }) : make({ ...base, regex: f.regex! });
}

// ---------------------------------------------------------------------------
// The filtered read: the client's generated messages on the client's channel.

const requireCjs = createRequire(import.meta.url);
/* eslint-disable @typescript-eslint/no-explicit-any */
const streamsPb = requireCjs('@eventstore/db-client/generated/streams_pb.js');
const sharedPb = requireCjs('@eventstore/db-client/generated/shared_pb.js');
const { StreamsClient } = requireCjs('@eventstore/db-client/generated/streams_grpc_pb.js');
const { ReadStream } = requireCjs('@eventstore/db-client/dist/streams/utils/ReadStream.js');
const { convertGrpcEvent } = requireCjs('@eventstore/db-client/dist/utils/convertGrpcEvent.js');
/**
 * The unary Append RPC, as the client sends it. The client's appendToStream
 * takes its BatchAppend path whenever the server offers it, and that path keeps
 * one table of pending appends for every stream of the process: a stream's
 * error clears the whole table, so after a reconnection the old stream's late
 * error drops the entries of the new one, whose answer then finds none and
 * throws inside the gRPC callback (an uncaught TypeError that ends the process;
 * seen under dropped subscriptions, docs/decisions.md). Append answers each
 * call on its own call.
 */
const { append: unaryAppend } = requireCjs('@eventstore/db-client/dist/streams/appendToStream/append.js') as {
  append: (this: EventStoreDBClient, stream: string, events: unknown[], opts: { expectedRevision: AppendExpectedRevision }) => Promise<{ success: boolean; nextExpectedRevision: bigint; position?: { commit: bigint; prepare: bigint } }>;
};

/** The protected members of the client that its own commands use. */
type ClientInternals = {
  GRPCStreamCreator(Client: unknown, name: string, creator: (c: any) => unknown): () => Promise<unknown>;
  callArguments(base: object, options: object): unknown[];
};

function filteredReadAll(
  client: EventStoreDBClient,
  opts: { from: 'start' | 'end' | EsdbPosition; direction: 'forwards' | 'backwards'; count: number; filter: ServerFilter },
): StreamingRead<AllStreamResolvedEvent> {
  const { ReadReq } = streamsPb;
  const options = new ReadReq.Options();
  const all = new ReadReq.Options.AllOptions();
  if (opts.from === 'start') all.setStart(new sharedPb.Empty());
  else if (opts.from === 'end') all.setEnd(new sharedPb.Empty());
  else {
    const pos = new ReadReq.Options.Position();
    pos.setCommitPosition(opts.from.commit.toString());
    pos.setPreparePosition(opts.from.prepare.toString());
    all.setPosition(pos);
  }
  options.setAll(all);
  options.setReadDirection(opts.direction === 'forwards' ? 0 : 1);
  options.setResolveLinks(false);
  options.setCount(String(opts.count));
  const uuid = new ReadReq.Options.UUIDOption();
  uuid.setString(new sharedPb.Empty());
  options.setUuidOption(uuid);
  const expr = new ReadReq.Options.FilterOptions.Expression();
  if (opts.filter.prefixes) expr.setPrefixList(opts.filter.prefixes);
  else expr.setRegex(opts.filter.regex!);
  const fo = new ReadReq.Options.FilterOptions();
  if (opts.filter.on === 'stream') fo.setStreamIdentifier(expr);
  else fo.setEventType(expr);
  // "count" window: the server searches until `count` matching events or the end.
  fo.setCount(new sharedPb.Empty());
  fo.setCheckpointintervalmultiplier(1);
  options.setFilter(fo);
  const req = new ReadReq();
  req.setOptions(options);
  const internals = client as unknown as ClientInternals;
  const create = internals.GRPCStreamCreator(StreamsClient, 'readAll', (c: any) => c.read(req, ...internals.callArguments({}, { deadline: Infinity })));
  return new ReadStream(create, convertGrpcEvent, {}) as StreamingRead<AllStreamResolvedEvent>;
}

// ---------------------------------------------------------------------------
// Every read is consumed to its end (the server bounds it by `count`):
// leaving a read early leaves its gRPC call unfinished, and the client's
// dispose() then waits for it forever.

// Transport failures: named, retried with back-off, surfaced clearly.

function isTransient(err: unknown): boolean {
  if (err instanceof UnavailableError || err instanceof DeadlineExceededError || err instanceof NotLeaderError) return true;
  if (err instanceof CancelledError) return true;
  const code = (err as { code?: unknown })?.code;
  return code === 14 || code === 4; // grpc UNAVAILABLE, DEADLINE_EXCEEDED
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });

export const backoffMs = (attempt: number) => Math.min(ESDB_RETRY_MAX_MS, ESDB_RETRY_BASE_MS * 2 ** attempt);

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

export type EventStoreDbHealth = {
  /** Transport errors seen (appends, reads and subscriptions), and the last one. */
  transportErrors: number;
  lastError: string | undefined;
  /** Subscriptions re-opened after a drop. */
  resubscriptions: number;
};

export class EventStoreDbStore implements EventStore {
  readonly kind = 'eventstoredb' as const;
  readonly health: EventStoreDbHealth = { transportErrors: 0, lastError: undefined, resubscriptions: 0 };
  /** Kept out of sight (it may carry credentials): only to open the same store elsewhere (the verifier thread). */
  #connectionString = '';
  private constructor(
    private readonly client: EventStoreDBClient,
    /** host:port list of the connection string, for error messages (never credentials). */
    readonly address: string,
    readonly maxAppendBytes: number,
  ) {}

  /** The connection string this store was opened with (credentials included: never log it). */
  connectionString(): string {
    return this.#connectionString;
  }

  /**
   * `maxAppendBytes`: the largest append accepted (default APPEND_MAX_BYTES,
   * the server's default MaxAppendSize); set it to a server's own MaxAppendSize
   * when that is lower. A server that refuses an append anyway
   * (MaximumAppendSizeExceeded) is answered as AppendTooLarge, never retried.
   */
  static async open(connectionString: string, opts: { maxAppendBytes?: number } = {}): Promise<EventStoreDbStore> {
    const address = describeAddress(connectionString);
    let client: EventStoreDBClient;
    try {
      client = EventStoreDBClient.connectionString([connectionString] as unknown as TemplateStringsArray);
    } catch (err) {
      throw new EventStoreError('store_unavailable', `EventStoreDB connection string for ${address} is invalid: ${(err as Error).message}`);
    }
    const store = new EventStoreDbStore(client, address, opts.maxAppendBytes ?? APPEND_MAX_BYTES);
    store.#connectionString = connectionString;
    try {
      await store.headPosition(); // fail fast when the server is unreachable or $all is not readable
    } catch (err) {
      await client.dispose().catch(() => {});
      throw err;
    }
    return store;
  }

  private unavailable(what: string, err: unknown): EventStoreError {
    const e = new EventStoreError('store_unavailable', `EventStoreDB at ${this.address}: ${what} failed: ${describeError(err)}`);
    (e as { cause?: unknown }).cause = err;
    return e;
  }

  private noteError(err: unknown) {
    this.health.transportErrors++;
    this.health.lastError = `${new Date().toISOString()} ${describeError(err)}`;
  }

  /** Runs `op`, retrying transport failures with exponential back-off; other errors pass through. */
  private async withRetry<T>(what: string, op: () => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await op();
      } catch (err) {
        if (err instanceof EventStoreError || !isTransient(err)) throw err;
        this.noteError(err);
        if (attempt + 1 >= ESDB_RETRY_ATTEMPTS) {
          // An append's earlier attempts may have reached the server (the same
          // event ids make them one write): whether it stands is unknown.
          if (what === 'append') throw new OutcomeUnknown(`EventStoreDB at ${this.address}: append outcome unknown after ${attempt + 1} attempts: ${describeError(err)}`, err);
          throw this.unavailable(what, err);
        }
        await sleep(backoffMs(attempt));
      }
    }
  }

  async appendToStream(stream: string, events: readonly NewEvent[], opts: AppendOptions = {}): Promise<AppendResult> {
    const expected = opts.expectedRevision ?? 'any';
    const checked = checkAppend(stream, events, expected, randomUUID, this.maxAppendBytes);
    if (opts.guard) {
      // No multi-stream condition here: the guard stream is read just before the append.
      // As on Postgres, the append's own expectation is reported first.
      const lastOf = async (s: string) => (await this.readStream(s, { direction: 'backwards', maxCount: 1 }))[0]?.revision ?? ('no_stream' as const);
      const actual = await lastOf(opts.guard.stream);
      if (actual !== opts.guard.revision) {
        const own = await lastOf(stream);
        const held = expected === 'any' || (expected === 'no_stream' ? own === 'no_stream' : expected === 'stream_exists' ? own !== 'no_stream' : own === expected);
        throw held ? new GuardFailed(opts.guard, actual) : new WrongExpectedRevision(stream, expected, own);
      }
    }
    const payload = checked.map((e) => jsonEvent({ id: e.id, type: e.type, data: e.dataValue, metadata: e.metadataValue }));
    // Event ids are fixed before the first attempt, so a retry after a lost
    // answer is recognised by the server as the same write (idempotent append).
    return this.withRetry('append', async () => {
      try {
        const res = await unaryAppend.call(this.client, stream, payload, { expectedRevision: expected });
        if (!res.position) throw new EventStoreError('store_unavailable', `EventStoreDB at ${this.address}: append answered without a position`);
        return { nextExpectedRevision: res.nextExpectedRevision, lastPosition: formatPosition(res.position) };
      } catch (err) {
        if (err instanceof WrongExpectedVersionError) {
          const actual = err.actualVersion;
          throw new WrongExpectedRevision(stream, expected, typeof actual === 'bigint' ? actual : 'no_stream');
        }
        // The server counts as appendSize does: it refuses only when its MaxAppendSize is below ours.
        if (err instanceof MaxAppendSizeExceededError) throw new AppendTooLarge(err.maxAppendSize, undefined, 'server');
        throw err;
      }
    });
  }

  async checkRevision(stream: string, revision: bigint | 'no_stream'): Promise<void> {
    checkStreamName(stream);
    const actual = (await this.readStream(stream, { direction: 'backwards', maxCount: 1 }))[0]?.revision ?? ('no_stream' as const);
    if (actual !== revision) throw new WrongExpectedRevision(stream, revision, actual);
  }

  async readStream(stream: string, opts: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    checkStreamName(stream);
    const backwards = opts.direction === 'backwards';
    const maxCount = Math.min(opts.maxCount ?? READ_PAGE_MAX, READ_PAGE_MAX);
    if (maxCount === 0) return [];
    return this.withRetry('read stream', async () => {
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
    });
  }

  /** One filtered Read call: up to maxCount events after `after`, filtered on the server. */
  async readAll(opts: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    const maxCount = Math.min(opts.maxCount ?? READ_PAGE_DEFAULT, READ_PAGE_MAX);
    if (maxCount === 0) return [];
    const after = opts.after ?? START;
    const from = after === START ? ('start' as const) : parsePosition(after);
    const filter = serverFilter(opts.filter);
    return this.withRetry('read $all', async () => {
      const out: RecordedEvent[] = [];
      // Inclusive on the server: one more, in case the event at `after` matches.
      const count = after === START ? maxCount : maxCount + 1;
      for await (const r of filteredReadAll(this.client, { from, direction: 'forwards', count, filter })) {
        const e = toRecorded(r);
        if (!e || e.position <= after || !matchesFilter(e, opts.filter)) continue;
        out.push(e);
      }
      return out.slice(0, maxCount);
    });
  }

  /** One read of $all from each position (inclusive on the server), its first event kept if it is at that position. */
  async readAt(positions: readonly Position[]): Promise<RecordedEvent[]> {
    const found = await Promise.all(
      [...new Set(positions)].map((p) => {
        const from = parsePosition(p);
        return this.withRetry('read $all', async () => {
          // Read to its end (one event at most): a read left open would keep its call, and the client, busy.
          let first: RecordedEvent | undefined;
          for await (const r of filteredReadAll(this.client, { from, direction: 'forwards', count: 1, filter: serverFilter(undefined) })) first ??= toRecorded(r);
          return first?.position === p ? first : undefined;
        });
      }),
    );
    return found.filter((e): e is RecordedEvent => e !== undefined).sort((a, b) => (a.position < b.position ? -1 : 1));
  }

  // The client decodes each event as it arrives; pages read ahead keep the
  // next round trip under the reader's work, as on Postgres.
  iterateStream(stream: string, opts: IterateStreamOptions = {}): AsyncIterable<RecordedEvent> {
    checkStreamName(stream);
    const size = iteratePage(opts.pageSize, READ_PAGE_MAX);
    const from = opts.fromRevision ?? 0n;
    return readAhead((last: RecordedEvent | undefined) => this.readStream(stream, { fromRevision: last ? last.revision + 1n : from, maxCount: size }), (page) => page.length < size, (e) => e);
  }

  iterateAll(opts: IterateAllOptions = {}): AsyncIterable<RecordedEvent> {
    const size = iteratePage(opts.pageSize, READ_PAGE_MAX);
    // A filtered page can come back short with more to read (events the server's
    // filter passed and the exact filter did not): only an empty page ends it.
    return readAhead((last: RecordedEvent | undefined) => this.readAll({ after: last ? last.position : opts.after, filter: opts.filter, maxCount: size }), () => false, (e) => e);
  }

  /** The last non-system event's position: one backwards read of one event, filtered on the server. */
  async headPosition(): Promise<Position> {
    return this.withRetry('read the head of $all', async () => {
      let head = START;
      for await (const r of filteredReadAll(this.client, { from: 'end', direction: 'backwards', count: 1, filter: serverFilter(undefined) })) {
        head = toRecorded(r)?.position ?? head;
      }
      return head;
    });
  }

  subscribeToAll(opts: SubscribeOptions = {}): AsyncIterable<SubscriptionItem> {
    const self = this;
    const filter = clientFilter(serverFilter(opts.filter));
    return {
      async *[Symbol.asyncIterator]() {
        // `after` is the last position delivered to the caller: every
        // resubscription starts there (exclusive on the server), so a drop
        // loses nothing and repeats nothing.
        let after = opts.after ?? START;
        let caughtUpSent = false;
        let failures = 0;
        while (!opts.signal?.aborted) {
          const inbox = new Inbox<SubscriptionItem | { kind: 'error'; error: unknown } | { kind: 'end' }>();
          const sub = self.client.subscribeToAll({ fromPosition: after === START ? ESDB_START : parsePosition(after), filter });
          sub.on('data', (r: AllStreamResolvedEvent) => {
            const e = toRecorded(r);
            if (e && matchesFilter(e, opts.filter)) inbox.push({ kind: 'event', event: e });
            if (inbox.size > 1000) sub.pause();
          });
          sub.on('caughtUp', () => inbox.push({ kind: 'caught_up', position: after }));
          sub.on('error', (error: unknown) => inbox.push({ kind: 'error', error }));
          sub.on('end', () => inbox.push({ kind: 'end' }));
          let failure: unknown;
          try {
            for (;;) {
              const item = await inbox.take(opts.signal);
              if (!item) return;
              if (inbox.size < 100 && sub.isPaused()) sub.resume();
              if (item.kind === 'error' || item.kind === 'end') {
                failure = item.kind === 'error' ? item.error : new Error('the server ended the subscription');
                break;
              }
              if (item.kind === 'event') {
                if (item.event.position <= after) continue; // never twice, whatever the server repeats
                after = item.event.position;
                failures = 0;
                yield item;
              } else if (!caughtUpSent) {
                caughtUpSent = true;
                yield { kind: 'caught_up', position: after };
              }
            }
          } finally {
            await sub.unsubscribe().catch(() => {});
          }
          self.noteError(failure);
          self.health.resubscriptions++;
          await sleep(backoffMs(failures++), opts.signal);
        }
      },
    };
  }

  async close(): Promise<void> {
    await this.client.dispose();
  }
}

/** An error for a message: its message, else the client's error type (its DeadlineExceededError has no message: 'deadline-exceeded'). */
function describeError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const type = (err as { type?: unknown }).type;
  return err.message || (typeof type === 'string' ? type : err.name);
}

/** host:port list of an esdb:// connection string, without user info or parameters. */
export function describeAddress(connectionString: string): string {
  const m = /^esdb(?:\+discover)?:\/\/(?:[^@/?]*@)?([^/?]*)/.exec(connectionString);
  return m?.[1] || '(unparsable connection string)';
}
