import { isAuditStream } from '../audit/chain.ts';
import { APPEND_MAX_BYTES, APPEND_MAX_EVENTS, EVENT_TYPE_MAX_CHARS, SEAL_HEADROOM_BYTES, STREAM_NAME_MAX_CHARS } from '../limits.ts';

// The event store port. Semantics follow EventStoreDB so that every adapter
// behaves the same; one conformance suite (test/eventstore/) holds them to it.

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/**
 * An opaque log position. Positions of one store are fixed-width strings whose
 * string order equals log order. START sorts before every real position.
 */
export type Position = string;
export const START: Position = '';

export type ExpectedRevision = 'no_stream' | 'stream_exists' | 'any' | bigint;
/** The actual state a WrongExpectedRevision reports: the last revision, or no stream at all. */
export type ActualRevision = 'no_stream' | bigint;

export type EventMetadata = JsonObject & { org_id: string };

export type NewEvent = {
  /**
   * A UUID; generated when absent. An id already in the log is never written
   * twice: Postgres refuses it (DuplicateEventId, or WrongExpectedRevision when
   * the expectation no longer holds); EventStoreDB answers a re-sent append with
   * the same expectation with its original result (idempotent append).
   */
  id?: string;
  type: string;
  data: JsonObject;
  metadata: EventMetadata;
};

export type RecordedEvent = {
  id: string;
  type: string;
  streamName: string;
  /** 0-based revision within its stream. */
  revision: bigint;
  position: Position;
  data: JsonObject;
  metadata: EventMetadata;
  /** When the store recorded the event (ISO 8601). */
  recordedAt: string;
};

export type AppendResult = {
  /** The revision of the last event written; pass it as the next expected revision. */
  nextExpectedRevision: bigint;
  /** The log position of the last event written. */
  lastPosition: Position;
};

/** Either stream-name prefixes or exact event types; one kind, as EventStoreDB filters allow. */
export type ReadFilter = { streamPrefixes: readonly string[] } | { eventTypes: readonly string[] };

export type ReadStreamOptions = {
  /** Inclusive. Default: 0 forwards, the last revision backwards. */
  fromRevision?: bigint;
  direction?: 'forwards' | 'backwards';
  maxCount?: number;
};

export type ReadAllOptions = {
  /** Exclusive. Default: START. */
  after?: Position;
  maxCount?: number;
  filter?: ReadFilter;
};

export type IterateStreamOptions = {
  /** Inclusive. Default: 0. */
  fromRevision?: bigint;
  /** Events read per round trip (default ITERATE_PAGE). */
  pageSize?: number;
};

export type IterateAllOptions = {
  /** Exclusive. Default: START. */
  after?: Position;
  filter?: ReadFilter;
  /** Events read per round trip (default ITERATE_PAGE). */
  pageSize?: number;
};

export type SubscriptionItem =
  | { kind: 'event'; event: RecordedEvent }
  /** Sent once, when the history up to the head at subscription time has been delivered. */
  | { kind: 'caught_up'; position: Position };

/** A run of consecutive events of the log, or the moment a subscription caught up. */
export type BatchItem = { kind: 'events'; events: readonly RecordedEvent[] } | { kind: 'caught_up'; position: Position };

export type SubscribeOptions = {
  /** Exclusive. Default: START. */
  after?: Position;
  filter?: ReadFilter;
  signal?: AbortSignal;
};

/**
 * A condition on another stream an append is accepted under: that stream
 * stands exactly at `revision` ('no_stream': it does not exist). The append
 * does not write to it. A mismatch throws GuardFailed and writes nothing.
 */
export type AppendGuard = { stream: string; revision: bigint | 'no_stream' };

export type AppendOptions = { expectedRevision?: ExpectedRevision; guard?: AppendGuard };

export interface EventStore {
  readonly kind: 'postgres' | 'eventstoredb';
  /**
   * The largest append this store accepts, in bytes as EventStoreDB counts
   * them (appendSize). A larger one is refused with AppendTooLarge before
   * anything is written. The same on every store (APPEND_MAX_BYTES, or the
   * configured EVENTSTORE_MAX_APPEND_BYTES).
   */
  readonly maxAppendBytes: number;
  /**
   * A guard is checked in the append's own transaction on Postgres; EventStoreDB
   * has no multi-stream condition, so its adapter reads the guard stream just
   * before appending (a change acknowledged before the append started is seen).
   */
  appendToStream(stream: string, events: readonly NewEvent[], opts?: AppendOptions): Promise<AppendResult>;
  /**
   * Resolves if the stream stood exactly at `revision` ('no_stream': did not
   * exist) at one moment during the call; throws WrongExpectedRevision
   * otherwise. Writes nothing. On Postgres it travels in the next group-commit
   * batch as an append of no events (checked under the log-head lock like any
   * other expectation); on EventStoreDB it reads the stream's last event.
   */
  checkRevision(stream: string, revision: bigint | 'no_stream'): Promise<void>;
  /** Events of one stream; a stream that does not exist reads empty. */
  readStream(stream: string, opts?: ReadStreamOptions): Promise<RecordedEvent[]>;
  readAll(opts?: ReadAllOptions): Promise<RecordedEvent[]>;
  /**
   * The events at these log positions (positions this store answered), in
   * log order, each once (the audit read model reads a linked fact's data from
   * where its row says it lies).
   */
  readAt(positions: readonly Position[]): Promise<RecordedEvent[]>;
  /**
   * The events readStream gives forwards, from `fromRevision` to the stream's
   * end, one at a time: the store reads a page ahead and decodes each event
   * only when the reader reaches it (a long read keeps one page of rows alive,
   * not one of objects). For long readers: the chain's verification and export.
   */
  iterateStream(stream: string, opts?: IterateStreamOptions): AsyncIterable<RecordedEvent>;
  /** The same over the log (filtered as readAll), after `after` to the end each page finds. */
  iterateAll(opts?: IterateAllOptions): AsyncIterable<RecordedEvent>;
  /** Catch-up then live; resubscribes by itself after transport errors; ends when `signal` aborts. */
  subscribeToAll(opts?: SubscribeOptions): AsyncIterable<SubscriptionItem>;
  /** Optional: the same subscription as runs of consecutive events (shared arrays: never change them). */
  subscribeToAllBatches?(opts?: SubscribeOptions): AsyncIterable<BatchItem>;
  /** Position of the last event in the log, START for an empty log. */
  headPosition(): Promise<Position>;
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------
// Errors: typed, with stable codes.

export class EventStoreError extends Error {
  constructor(
    readonly code: 'wrong_expected_revision' | 'guard_failed' | 'invalid_stream_name' | 'invalid_event' | 'duplicate_event_id' | 'store_unavailable',
    message: string,
  ) {
    super(message);
  }
}

/**
 * The store could not tell whether an append was written: its answer was lost
 * and finding out failed too. The append may be in the log; the caller must
 * not decide the same command again blindly (read first).
 */
export class OutcomeUnknown extends EventStoreError {
  override name = 'OutcomeUnknown';
  constructor(message: string, cause: unknown) {
    super('store_unavailable', message);
    (this as { cause?: unknown }).cause = cause;
  }
}

/**
 * What a store saw when the database went backwards: the log head it had seen
 * acknowledged (its own commits, other processes' NOTIFYs) against the head
 * the database now holds (issue 46: synchronous_commit=off, or a failover to a
 * standby that had not received the last commits).
 */
export type LogRewind = { knownHead: Position; databaseHead: Position; detectedAt: string; where: 'append' | 'read' };

/**
 * Refused, nothing written: the store found the database behind what it had
 * already acknowledged and is reloading its state from the database. Safe to
 * try again shortly (`reason` says why).
 */
export class StoreRecovering extends EventStoreError {
  override name = 'StoreRecovering';
  constructor(readonly reason: string) {
    super('store_unavailable', `the event store is reloading its state: ${reason}`);
  }
}

export class WrongExpectedRevision extends EventStoreError {
  override name = 'WrongExpectedRevision';
  constructor(
    readonly stream: string,
    readonly expected: ExpectedRevision,
    readonly actual: ActualRevision,
  ) {
    super('wrong_expected_revision', `stream ${stream}: expected revision ${String(expected)}, actual ${String(actual)}`);
  }
}

/** The guard stream of an append (AppendGuard) was not at the revision it was decided on. */
export class GuardFailed extends EventStoreError {
  override name = 'GuardFailed';
  constructor(
    readonly guard: AppendGuard,
    readonly actual: ActualRevision,
  ) {
    super('guard_failed', `guard stream ${guard.stream}: expected revision ${String(guard.revision)}, actual ${String(actual)}`);
  }
}

export class InvalidStreamName extends EventStoreError {
  override name = 'InvalidStreamName';
  constructor(message: string) {
    super('invalid_stream_name', message);
  }
}

export class InvalidEvent extends EventStoreError {
  override name = 'InvalidEvent';
  constructor(message: string) {
    super('invalid_event', message);
  }
}

/**
 * An append larger than the store accepts (`limit`, in bytes as appendSize
 * counts them): refused by the port's own check before anything is written
 * (`size`: the bytes counted up to and including event `atEvent`, where it
 * passed the limit), or by an EventStoreDB server whose MaxAppendSize is
 * lower than ours (MaximumAppendSizeExceeded; nothing written there either).
 */
export class AppendTooLarge extends InvalidEvent {
  override name = 'AppendTooLarge';
  constructor(
    readonly limit: number,
    readonly size: number | undefined,
    readonly refusedBy: 'port' | 'server',
    readonly atEvent?: number,
  ) {
    super(
      refusedBy === 'port'
        ? `the append passes ${limit} bytes, the most the store accepts in one append (data, metadata and twice the event type of each event): ${size} bytes by event ${atEvent}`
        : `the EventStoreDB server refused the append: more than its MaxAppendSize of ${limit} bytes`,
    );
  }
}

export class DuplicateEventId extends EventStoreError {
  override name = 'DuplicateEventId';
  constructor(readonly eventId: string) {
    super('duplicate_event_id', `event id ${eventId} already exists in the log`);
  }
}

// ---------------------------------------------------------------------------
// Shared checks: every adapter validates an append the same way, before any write.

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const EVENT_TYPE = /^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$/;

export function checkStreamName(stream: unknown): asserts stream is string {
  if (typeof stream !== 'string' || stream.length === 0) throw new InvalidStreamName('stream name must be a non-empty string');
  if (stream.length > STREAM_NAME_MAX_CHARS) throw new InvalidStreamName(`stream name longer than ${STREAM_NAME_MAX_CHARS} characters`);
  if (stream.startsWith('$')) throw new InvalidStreamName('stream names starting with $ are reserved for the store');
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(stream)) throw new InvalidStreamName('stream name contains control characters');
}

/** Whether a value is plain JSON within the depth limit: checkJsonAt's rule, without building paths (the common case). */
function isPlainJson(v: unknown, depth: number): boolean {
  if (depth > 64) return false;
  if (v === null || typeof v === 'boolean' || typeof v === 'string') return true;
  if (typeof v === 'number') return Number.isFinite(v);
  if (typeof v !== 'object') return false;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) if (!isPlainJson(v[i], depth + 1)) return false;
    return true;
  }
  const proto = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) return false;
  for (const k in v) if (Object.hasOwn(v, k) && !isPlainJson((v as Record<string, unknown>)[k], depth + 1)) return false;
  return true;
}

/** True when `v` is plain JSON that survives JSON.stringify/JSON.parse unchanged; else refuses it, naming where. */
function checkJson(v: unknown, path: string, depth: number): void {
  if (depth === 0 && isPlainJson(v, 0)) return;
  checkJsonAt(v, path, depth);
}

function checkJsonAt(v: unknown, path: string, depth: number): void {
  if (depth > 64) throw new InvalidEvent(`${path}: nested deeper than 64 levels`);
  if (v === null || typeof v === 'boolean' || typeof v === 'string') return;
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new InvalidEvent(`${path}: ${v} is not a JSON number`);
    return;
  }
  if (Array.isArray(v)) {
    v.forEach((x, i) => checkJsonAt(x, `${path}[${i}]`, depth + 1));
    return;
  }
  if (typeof v === 'object') {
    const proto = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null) throw new InvalidEvent(`${path}: not a plain object`);
    for (const [k, x] of Object.entries(v)) checkJsonAt(x, `${path}.${k}`, depth + 1);
    return;
  }
  throw new InvalidEvent(`${path}: a ${typeof v} is not JSON`);
}

/**
 * Whether JSON text (as JSON.stringify writes it) holds a string that not every
 * reader of the log can hold: U+0000 (PostgreSQL's text and jsonb refuse it)
 * or a lone surrogate (no canonical JSON form, so no audit entry). JSON.stringify
 * writes both, and only those besides other control characters, as \u escapes;
 * an escape is one where the run of backslashes before the u is odd.
 */
function unholdable(json: string): boolean {
  return json.includes('\\u') && /(?<!\\)(?:\\\\)*\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})/.test(json);
}

export type CheckedEvent = { id: string; type: string; data: string; metadata: string; dataValue: JsonObject; metadataValue: EventMetadata };

/**
 * The size of an append as EventStoreDB counts it against MaxAppendSize
 * (Event.SizeOnDisk summed over the append): UTF-8 bytes of data and metadata,
 * plus twice the event type's length.
 */
export function appendSize(events: readonly Pick<CheckedEvent, 'type' | 'data' | 'metadata'>[]): number {
  let size = 0;
  for (const e of events) size += Buffer.byteLength(e.data, 'utf8') + Buffer.byteLength(e.metadata, 'utf8') + 2 * e.type.length;
  return size;
}

export function checkAppend(stream: string, events: readonly NewEvent[], expected: ExpectedRevision, newId: () => string, maxAppendBytes: number = APPEND_MAX_BYTES): CheckedEvent[] {
  checkStreamName(stream);
  if (!(typeof expected === 'bigint' ? expected >= 0n : ['no_stream', 'stream_exists', 'any'].includes(expected))) {
    throw new InvalidEvent(`invalid expected revision ${String(expected)}`);
  }
  if (!Array.isArray(events) || events.length === 0) throw new InvalidEvent('an append carries at least one event');
  if (events.length > APPEND_MAX_EVENTS) throw new InvalidEvent(`an append carries at most ${APPEND_MAX_EVENTS} events`);
  const ids = new Set<string>();
  // appendSize is counted exactly only once an upper bound of it (a UTF-16
  // code unit is at most 3 UTF-8 bytes) passes the limit; an append over the
  // limit is refused at the event that takes it over, before the rest is read.
  let bound = 0;
  let exact: number | undefined;
  const checked: CheckedEvent[] = [];
  // An event the audit chain will seal must leave room for its entry, which
  // is appended alone if need be (SEAL_HEADROOM_BYTES).
  const eventMax = isAuditStream(stream) ? maxAppendBytes : maxAppendBytes - SEAL_HEADROOM_BYTES;
  events.forEach((e, i) => {
    if (typeof e !== 'object' || e === null) throw new InvalidEvent(`event ${i}: not an object`);
    if (typeof e.type !== 'string' || !EVENT_TYPE.test(e.type) || e.type.length > EVENT_TYPE_MAX_CHARS) {
      throw new InvalidEvent(`event ${i}: type must be a dotted lowercase name`);
    }
    const id = e.id ?? newId();
    if (typeof id !== 'string' || !UUID.test(id)) throw new InvalidEvent(`event ${i}: id must be a lowercase UUID`);
    if (ids.has(id)) throw new InvalidEvent(`event ${i}: id ${id} repeated within the append`);
    ids.add(id);
    if (typeof e.data !== 'object' || e.data === null || Array.isArray(e.data)) throw new InvalidEvent(`event ${i}: data must be a JSON object`);
    checkJson(e.data, `event ${i}: data`, 0);
    const m = e.metadata as unknown;
    if (typeof m !== 'object' || m === null || Array.isArray(m)) throw new InvalidEvent(`event ${i}: metadata must be a JSON object`);
    checkJson(m, `event ${i}: metadata`, 0);
    const org = (m as Record<string, unknown>).org_id;
    if (typeof org !== 'string' || org.length === 0) throw new InvalidEvent(`event ${i}: metadata.org_id is required`);
    const data = JSON.stringify(e.data);
    const metadata = JSON.stringify(m);
    if (unholdable(data) || unholdable(metadata)) throw new InvalidEvent(`event ${i}: a string holds U+0000 or a lone surrogate, which the read side and the audit chain cannot hold`);
    const c: CheckedEvent = { id, type: e.type, data, metadata, dataValue: e.data, metadataValue: m as EventMetadata };
    checked.push(c);
    const own = 3 * (data.length + metadata.length) + 2 * e.type.length;
    if (own > eventMax) {
      const size = appendSize([c]);
      if (size > eventMax) throw new AppendTooLarge(eventMax, size, 'port', i);
    }
    bound += own;
    if (exact === undefined && bound > maxAppendBytes) exact = appendSize(checked);
    else if (exact !== undefined) exact += appendSize([c]);
    if (exact !== undefined && exact > maxAppendBytes) throw new AppendTooLarge(maxAppendBytes, exact, 'port', i);
  });
  return checked;
}

/** Decides an expected-revision check against the stream's current state. */
export function revisionMatches(expected: ExpectedRevision, current: ActualRevision): boolean {
  if (expected === 'any') return true;
  if (expected === 'no_stream') return current === 'no_stream';
  if (expected === 'stream_exists') return current !== 'no_stream';
  return current === expected;
}

export function matchesFilter(e: { streamName: string; type: string }, filter: ReadFilter | undefined): boolean {
  if (!filter) return true;
  if ('streamPrefixes' in filter) return filter.streamPrefixes.some((p) => e.streamName.startsWith(p));
  return filter.eventTypes.includes(e.type);
}
