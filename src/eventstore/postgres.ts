import { randomUUID } from 'node:crypto';
import { type Db, isServerError, type Queryable, timestamptzIso, type Transaction } from '../postgres/db.ts';
import { iteratePage, readAhead } from './read-ahead.ts';
import { APPEND_MAX_BYTES, GROUP_COMMIT_MAX_APPENDS, GROUP_COMMIT_MAX_EVENTS, READ_PAGE_DEFAULT, READ_PAGE_MAX, SUBSCRIPTION_POLL_MS, SUBSCRIPTION_RETRY_MS } from '../limits.ts';
import { migrate } from '../postgres/schema.ts';
import { ChainLinker, type LinkedAppend } from '../audit/linker.ts';
import {
  type AppendGuard,
  type AppendOptions,
  type AppendResult,
  type BatchItem,
  type CheckedEvent,
  checkAppend,
  checkStreamName,
  DuplicateEventId,
  type EventMetadata,
  type EventStore,
  EventStoreError,
  type ExpectedRevision,
  GuardFailed,
  OutcomeUnknown,
  type IterateAllOptions,
  type IterateStreamOptions,
  type JsonObject,
  type LogRewind,
  type NewEvent,
  type Position,
  type ReadAllOptions,
  type ReadFilter,
  type ReadStreamOptions,
  type RecordedEvent,
  START,
  StoreRecovering,
  type SubscribeOptions,
  type SubscriptionItem,
  WrongExpectedRevision,
} from './port.ts';

// The Postgres event store.
//
// Positions are gapless: every append transaction first locks the single
// log-head row, takes the next positions from it and commits before the next
// transaction can take the lock, so commit order equals position order and a
// reader polling `position > checkpoint` never skips an event (a bigserial
// cursor would: its values are taken before commit and become visible out of
// order).
//
// Group commit: appends that arrive while a transaction is in flight wait in a
// queue and go together in the next one. The whole batch is one call of the
// es_append() function, one round trip and one WAL flush; inside it each
// append is checked against its own expected revision and answered on its own.

const NOTIFY_CHANNEL = 'es_appended';
/** How much of this process's latest commits local subscriptions can take from memory. */
const TAIL_TRANSACTIONS = 256;
const TAIL_EVENTS = 10_000;
const POSITION_DIGITS = 20;

/** The message of the failure that says a predicted batch did not land as predicted (nothing of it was written). */
const PREDICTION_MISSED = 'es_prediction_missed';
/** The message (then `:` and the database's head) of the failure that says the log's head is behind what this process saw acknowledged. */
const LOG_REWOUND = 'es_log_rewound';
/** How many streams' revisions a process remembers for its predictions. */
const REMEMBERED_REVISIONS = 100_000;

const SENTINEL: Record<'no_stream' | 'stream_exists' | 'any', bigint> = { no_stream: -1n, stream_exists: -2n, any: -3n };

export const SCHEMA_SQL = `
CREATE TABLE IF NOT EXISTS es_log_head (
  id smallint PRIMARY KEY CHECK (id = 1),
  position bigint NOT NULL
);
INSERT INTO es_log_head (id, position) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;

CREATE TABLE IF NOT EXISTS es_events (
  position bigint PRIMARY KEY,
  event_id uuid NOT NULL UNIQUE,
  stream_name text NOT NULL,
  stream_revision bigint NOT NULL,
  event_type text NOT NULL,
  data json NOT NULL,
  metadata json NOT NULL,
  recorded_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (stream_name, stream_revision)
);

DROP FUNCTION IF EXISTS es_append(text[], bigint[], int[], uuid[], text[], json[], json[]);
DROP FUNCTION IF EXISTS es_append(text[], bigint[], int[], int[], int[], uuid[], text[], json[], json[]);
DROP FUNCTION IF EXISTS es_append(text[], bigint[], int[], int[], int[], uuid[], text[], json, json);
DROP FUNCTION IF EXISTS es_append(text[], bigint[], int[], int[], int[], uuid[], text[], json, json, text[], bigint[]);

-- Appends a batch in a constant number of statements, whatever its size.
-- Per append: stream, expected revision (>= 0 exact, -1 no_stream, -2 stream_exists,
-- -3 any) and event count. Per event (flattened, in order): the 1-based index of its
-- append, its 1-based index within that append, id, type; data and metadata come as
-- two JSON arrays in the same order (their elements' text is kept exactly).
-- Per append, optionally, a guard: another stream (NULL: none) that must stand at
-- exactly a revision (-1: must not exist), as of this append's place in the batch.
-- The events' recorded_at: the transaction's time, or p_recorded_at when given
-- (a writer that built its followers' rows before the append: PREDICTED_APPEND_SQL).
-- Returns one row per append, in order: ok, the actual revision (-1: no stream),
-- whether its guard held, and for an accepted append its last revision and position.
-- Its statements run on generic plans, made once per connection: left to
-- choose, PostgreSQL planned the revision lookup again on every call (a
-- custom plan for the arrays' values, ~165 µs of planning per call, more than
-- the lookup itself). No statement in it depends on the arrays' sizes for its
-- plan (the events are inserted without a join).
--
-- The audit chain, version 2 (docs/audit-chain.md): per append, the
-- organization of its events, and for a linked append the first event's
-- sequence number and previous hash and the last event's entry hash. The
-- heads of switched chains are in audit_chain_head, read and moved here under
-- the log-head lock: a linked append is taken only on top of its chain's head,
-- an unlinked append of a switched chain not at all (only its checkpoints stay
-- unlinked), and the switch (stream audit_switch-<org>) creates the head. An
-- append refused by its link answers link_ok false and the chain's head, so
-- its writer links again (it is not refused to its caller). Old code calling
-- the previous es_append never links: the trigger below refuses its events of
-- a switched chain.
CREATE TABLE IF NOT EXISTS audit_chain_head (
  org_id text PRIMARY KEY,
  sequence bigint NOT NULL,
  tip_hash text NOT NULL
);

CREATE OR REPLACE FUNCTION es_append(
  p_streams text[], p_expected bigint[], p_counts int[],
  p_event_append int[], p_event_k int[],
  p_ids uuid[], p_types text[], p_data json, p_metadata json,
  p_guard_streams text[], p_guard_expected bigint[], p_recorded_at timestamptz,
  p_orgs text[], p_link_first bigint[], p_link_prev text[], p_link_tip text[]
) RETURNS TABLE (ok boolean, actual bigint, guard_actual bigint, last_revision bigint, last_position bigint, link_ok boolean, chain_seq bigint, chain_tip text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
  n int := coalesce(array_length(p_streams, 1), 0);
  head bigint;
  start_head bigint;
  names text[];
  revs bigint[];
  corgs text[];
  cseq bigint[];
  ctip text[];
  cmoved boolean[] := '{}';
  oks boolean[] := '{}';
  base_revs bigint[] := '{}';
  base_pos bigint[] := '{}';
  c int;
  j int;
  cur bigint;
  exp bigint;
BEGIN
  -- The log-head row lock serializes appends across every process: positions are
  -- taken and committed in the same order, so the log has no gap a reader could skip.
  SELECT h.position INTO head FROM es_log_head h WHERE h.id = 1 FOR UPDATE;
  start_head := head;
  -- This writer links (the trigger on es_events lets its rows through).
  PERFORM set_config('es.writer', '2', true);

  SELECT coalesce(array_agg(o.org), '{}'), coalesce(array_agg(ch.sequence), '{}'), coalesce(array_agg(ch.tip_hash), '{}') INTO corgs, cseq, ctip
  FROM (SELECT DISTINCT x AS org FROM unnest(p_orgs) AS x WHERE x IS NOT NULL) o
  LEFT JOIN audit_chain_head ch ON ch.org_id = o.org;

  SELECT coalesce(array_agg(s.name), '{}'), coalesce(array_agg(coalesce(m.rev, -1)), '{}') INTO names, revs
  FROM (SELECT DISTINCT x AS name FROM unnest(p_streams || p_guard_streams) AS x WHERE x IS NOT NULL) s
  LEFT JOIN LATERAL (SELECT max(e.stream_revision) AS rev FROM es_events e WHERE e.stream_name = s.name) m ON true;

  -- Each append in order, answered as it is decided (one row each): its
  -- revision and guard as of its place in the batch, then its link.
  FOR i IN 1 .. n LOOP
    j := array_position(names, p_streams[i]);
    cur := revs[j];
    exp := p_expected[i];
    ok := exp = -3 OR (exp = -1 AND cur = -1) OR (exp = -2 AND cur <> -1) OR (exp >= 0 AND cur = exp);
    guard_actual := NULL;
    IF p_guard_streams[i] IS NOT NULL THEN
      guard_actual := revs[array_position(names, p_guard_streams[i])];
      ok := ok AND guard_actual = p_guard_expected[i];
    END IF;
    link_ok := true;
    c := NULL;
    IF p_orgs[i] IS NOT NULL AND p_counts[i] > 0 THEN
      c := array_position(corgs, p_orgs[i]);
      IF cseq[c] IS NULL THEN
        -- Not switched: unlinked, or the switch itself.
        link_ok := p_link_first[i] IS NULL OR p_streams[i] = 'audit_switch-' || p_orgs[i];
      ELSIF p_link_first[i] IS NULL THEN
        link_ok := starts_with(p_streams[i], 'audit_checkpoint-');
      ELSE
        link_ok := p_link_first[i] = cseq[c] + 1 AND p_link_prev[i] = ctip[c];
      END IF;
    END IF;
    ok := coalesce(ok AND link_ok, false);
    oks[i] := ok;
    IF ok THEN
      IF c IS NOT NULL AND p_link_first[i] IS NOT NULL THEN
        cseq[c] := p_link_first[i] + p_counts[i] - 1;
        ctip[c] := p_link_tip[i];
        cmoved[c] := true;
      END IF;
      base_revs[i] := cur;
      base_pos[i] := head;
      head := head + p_counts[i];
      cur := cur + p_counts[i];
      revs[j] := cur;
      last_revision := cur;
      last_position := head;
    ELSE
      last_revision := NULL;
      last_position := NULL;
    END IF;
    actual := cur;
    chain_seq := cseq[c];
    chain_tip := ctip[c];
    RETURN NEXT;
  END LOOP;

  IF head <> start_head THEN
    INSERT INTO es_events (position, event_id, stream_name, stream_revision, event_type, data, metadata, recorded_at)
    SELECT base_pos[e.app] + e.k, e.id, p_streams[e.app], base_revs[e.app] + e.k, e.type, e.data, e.metadata, coalesce(p_recorded_at, now())
    FROM unnest(p_event_append, p_event_k, p_ids, p_types,
      ARRAY(SELECT x.d FROM json_array_elements(p_data) WITH ORDINALITY AS x(d, o) ORDER BY x.o),
      ARRAY(SELECT x.m FROM json_array_elements(p_metadata) WITH ORDINALITY AS x(m, o) ORDER BY x.o)) AS e(app, k, id, type, data, metadata)
    WHERE oks[e.app]
    ORDER BY 1;
    IF true = ANY(cmoved) THEN
      INSERT INTO audit_chain_head (org_id, sequence, tip_hash)
      SELECT corgs[k], cseq[k], ctip[k] FROM generate_subscripts(corgs, 1) AS k WHERE cmoved[k]
      ON CONFLICT (org_id) DO UPDATE SET sequence = EXCLUDED.sequence, tip_hash = EXCLUDED.tip_hash;
    END IF;
    UPDATE es_log_head SET position = head WHERE id = 1;
    PERFORM pg_notify('${NOTIFY_CHANNEL}', head::text);
  END IF;
END
$fn$;

-- Events of a switched chain written without a link (by code older than
-- version 2, which calls the previous es_append) are refused: such an
-- instance acknowledges nothing for that organization (docs/decisions.md,
-- "Issue 57"). es_append above marks its transaction, so its rows skip this.
CREATE OR REPLACE FUNCTION es_refuse_unlinked() RETURNS trigger LANGUAGE plpgsql AS $tr$
BEGIN
  IF NOT starts_with(NEW.stream_name, 'audit_checkpoint-') AND EXISTS (SELECT 1 FROM audit_chain_head WHERE org_id = NEW.metadata->>'org_id') THEN
    RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'es_chain_switched: the audit chain of ' || (NEW.metadata->>'org_id') || ' is on version 2; this writer does not link its events (upgrade it)';
  END IF;
  RETURN NEW;
END
$tr$;
CREATE OR REPLACE TRIGGER es_events_unlinked BEFORE INSERT ON es_events FOR EACH ROW
  WHEN (current_setting('es.writer', true) IS DISTINCT FROM '2') EXECUTE FUNCTION es_refuse_unlinked();

-- Raises (SQLSTATE P0001) unless ok: a statement that fails the transaction,
-- and every statement pipelined behind it, when an expectation does not hold.
CREATE OR REPLACE FUNCTION es_expect(ok boolean, message text) RETURNS void
LANGUAGE plpgsql AS $ex$
BEGIN
  IF NOT coalesce(ok, false) THEN RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = message; END IF;
END
$ex$;

-- A filtered read of the log: the next events after a position whose type or
-- stream matches, in log order. Always the ordered scan of the primary key
-- (it stops at the LIMIT): a planner left to itself may, when its statistics
-- are stale (right after a bulk import) or the types rare, fetch the whole
-- tail by bitmap and sort it for every page.
CREATE OR REPLACE FUNCTION es_read_filtered(p_after bigint, p_count int, p_types text[], p_prefixes text[])
RETURNS SETOF es_events
LANGUAGE sql STABLE
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_sort = off
AS $rd$
  SELECT e.*
  FROM es_events e
  WHERE e.position > p_after
    AND (p_types IS NULL OR e.event_type = ANY(p_types))
    AND (p_prefixes IS NULL OR e.stream_name LIKE ANY(p_prefixes))
  ORDER BY e.position
  LIMIT p_count
$rd$;
`;

export function formatPosition(p: bigint): Position {
  return p <= 0n ? START : p.toString().padStart(POSITION_DIGITS, '0');
}

export function parsePosition(p: Position | undefined): bigint {
  if (p === undefined || p === START) return 0n;
  if (!/^\d{1,20}$/.test(p)) throw new EventStoreError('invalid_event', `not a position of this store: ${p}`);
  return BigInt(p);
}

type Pending = {
  stream: string;
  expected: ExpectedRevision;
  guard?: AppendGuard | undefined;
  events: CheckedEvent[];
  resolve: (r: AppendResult) => void;
  reject: (e: unknown) => void;
};

/** An append as one attempt writes it: its events linked into their audit chain where it has switched (src/audit/linker.ts). */
type Linked = Omit<Pending, 'events'> & LinkedAppend;

/**
 * What an inline follower gets inside the append transaction: the transaction
 * itself (the log-head row is locked, so nothing else appends until it commits),
 * appends into the same transaction, and stream reads that see them.
 */
export type InlineTx = Queryable & {
  /** Appends in this transaction, each checked against its expected revision; answers per append. */
  append(appends: ReadonlyArray<{ stream: string; events: readonly NewEvent[]; expectedRevision: ExpectedRevision; guard?: AppendGuard }>): Promise<Array<{ ok: true; events: RecordedEvent[] } | { ok: false; actual: 'no_stream' | bigint }>>;
  readStream(stream: string, fromRevision: bigint, maxCount: number): Promise<RecordedEvent[]>;
  /** The last event of a stream, if any. */
  readLast(stream: string): Promise<RecordedEvent | undefined>;
  /** The `n` positions right after `p` (where the next append of this transaction lands). */
  positionsAfter(p: Position, n: number): Position[];
  /** A savepoint (issued, not awaited: the transaction pipelines); rolling back to it also forgets the appends made since. */
  savepoint(name: string): Promise<unknown>;
  rollbackTo(name: string): Promise<void>;
  /** Fails the transaction (an SQL error, so statements issued behind it fail too) unless event `id` is at `position`. */
  expectAt(id: string, position: Position): Promise<void>;
};

/**
 * Runs inside every append transaction that wrote events, after them, with the
 * head position before the batch and the recorded events in log order. If it
 * throws, the transaction is rolled back and the batch is written again without
 * it (the asynchronous followers then catch up). Answers what to do once the
 * transaction has committed, or if it did not.
 */
export type InlineOutcome = {
  /** The transaction committed (called before its appends are answered). */
  landed?: () => void;
  committed?: () => void;
  rolledBack?: () => void;
  /** Statements `run` left in flight (final): settled once they are answered, before the COMMIT's answer. */
  settled?: Promise<void>;
};
export type InlineFollower = {
  /** Issued right behind the batch's append, in the same round trip: takes what `run` needs (its locks). */
  prepare(tx: InlineTx): Promise<unknown>;
  /**
   * `final`: no other process appended since this process's last commit (the
   * batch starts right where it ended), so what the followers cached is
   * current: they may leave their last statements in flight for the COMMIT to
   * travel right behind (a failure among them turns the COMMIT into a rollback).
   */
  run(tx: InlineTx, before: Position, events: RecordedEvent[], prepared: unknown, opts?: { final?: boolean }): Promise<InlineOutcome | void>;
  /**
   * For a batch whose append is predicted (the store expects the log to stand
   * where this process's last commit left it): what `prepare` would answer if
   * the followers stand where this process's last commit left them, and the
   * statement that fails the transaction unless they do (it takes the same
   * locks as `prepare`). Undefined when the followers cannot say.
   */
  predict?(before: Position): { prepared: unknown; check: (tx: InlineTx) => Promise<unknown> } | undefined;
};

/** A batch as this process predicts it will land (see PostgresEventStore.predict). */
type Predicted = {
  before: Position;
  at: string;
  oks: boolean[];
  lastPositions: (string | null)[];
  lastRevisions: (string | null)[];
  events: RecordedEvent[];
  followers: { prepared: unknown; check: (tx: InlineTx) => Promise<unknown> };
  /** The batch's appends linked as predicted. */
  items: Linked[];
};

type AppendRow = { ok: boolean; actual: string; guard_actual: string | null; last_revision: string | null; last_position: string | null; link_ok: boolean; chain_seq: string | null; chain_tip: string | null; at: Date };

const SELECT_EVENT = `SELECT position, event_id, stream_name, stream_revision, event_type, data, metadata, recorded_at FROM es_events`;

/** An event's row as every read asks for it (`rawText`): each column as PostgreSQL's text. */
type RawEventRow = { position: string; event_id: string; stream_name: string; stream_revision: string; event_type: string; data: string; metadata: string; recorded_at: string };

/**
 * The event of a row: the JSON columns parsed, the time written as
 * node-postgres's timestamptz parser would read it (`timestamptzIso`, without
 * a Date for the UTC text every session writes), the position at its padded
 * width. Every read of the log decodes this way; node-postgres's own row
 * parser (a Date per row, then its ISO string) cost a read a fifth more CPU.
 */
function decodeRaw(r: RawEventRow): RecordedEvent {
  return {
    id: r.event_id,
    type: r.event_type,
    streamName: r.stream_name,
    revision: BigInt(r.stream_revision),
    // formatPosition of the same number: PostgreSQL writes an int8 without sign or leading zeros, and positions start at 1.
    position: r.position.padStart(POSITION_DIGITS, '0'),
    data: JSON.parse(r.data) as JsonObject,
    metadata: JSON.parse(r.metadata) as EventMetadata,
    recordedAt: timestamptzIso(r.recorded_at),
  };
}

function clampCount(n: number | undefined, dflt: number): number {
  if (n === undefined) return dflt;
  if (!Number.isInteger(n) || n < 0) throw new EventStoreError('invalid_event', `maxCount must be a non-negative integer`);
  return Math.min(n, READ_PAGE_MAX);
}

/** The filter's arguments of es_read_filtered: event types, stream-name LIKE patterns (each null when not filtered on). */
function filterArgs(filter: ReadFilter): [string[] | null, string[] | null] {
  if ('streamPrefixes' in filter) return [null, filter.streamPrefixes.map((p) => p.replace(/[\\%_]/g, (c) => '\\' + c) + '%')];
  return [[...filter.eventTypes], null];
}

/** Wakes waiters when the log head moves (NOTIFY from any process, or a local commit). */
class HeadSignal {
  private waiters: Array<() => void> = [];
  /** A promise that resolves at the next signal. Take it before reading, so no signal is missed. */
  next(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }
  fire(): void {
    const ws = this.waiters;
    this.waiters = [];
    for (const w of ws) w();
  }
}

/** Resolves after `ms`, when `wake` resolves, or when `signal` aborts, whichever is first; leaves no timer or listener behind. */
function sleep(ms: number, signal?: AbortSignal, wake?: Promise<void>): Promise<void> {
  return new Promise<void>((resolve) => {
    let settled = false;
    const done = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
    void wake?.then(done);
  });
}

export async function migrateEventStore(db: Db): Promise<void> {
  await migrate(db, (tx) => tx.query(SCHEMA_SQL));
}

async function readAllOn(q: Queryable, opts: ReadAllOptions): Promise<RecordedEvent[]> {
  const max = clampCount(opts.maxCount, READ_PAGE_DEFAULT);
  if (max === 0) return [];
  const after = parsePosition(opts.after).toString();
  const { rows } = opts.filter
    ? await q.query<RawEventRow>('SELECT * FROM es_read_filtered($1, $2, $3, $4)', [after, max, ...filterArgs(opts.filter)], { rawText: true })
    : await q.query<RawEventRow>(`${SELECT_EVENT} WHERE position > $1 ORDER BY position LIMIT $2`, [after, max], { rawText: true });
  return rows.map(decodeRaw);
}

async function headPositionOn(q: Queryable): Promise<Position> {
  const { rows } = await q.query<{ position: string }>('SELECT position FROM es_log_head WHERE id = 1');
  return formatPosition(BigInt(rows[0]?.position ?? '0'));
}

export class PostgresEventStore implements EventStore {
  readonly kind = 'postgres' as const;
  private queue: Pending[] = [];
  private draining = false;
  private readonly signal = new HeadSignal();
  private stopListening: (() => Promise<void>) | undefined;
  private closed = false;
  /** The highest log head this process knows of: its own commits and other processes' NOTIFYs. */
  private knownHead: Position = START;
  /**
   * The head of this process's transaction that holds the log-head lock, once
   * its appends are written. Its NOTIFY can arrive before its COMMIT answers:
   * such a NOTIFY is ours (no other process can commit an append while we hold
   * the lock), and the local wake after the commit covers it.
   */
  private lockedHead: Position = START;
  /** The log head right after this process's last committed transaction that wrote events. */
  private ownHead: Position | undefined;
  /**
   * The local tail: the events of this process's latest commits, keyed by the
   * position just before each transaction's first event. A subscription standing
   * exactly at such a position takes the transaction's events from here instead
   * of reading them back; anything else (another process's appends) is read.
   */
  private readonly tail = new Map<Position, RecordedEvent[]>();
  private tailEvents = 0;
  /** Subscriptions open in this process: without any, commits keep no tail. */
  private subscribers = 0;
  /**
   * The revisions of streams this process wrote since it last saw another
   * process append (forgotten then): what a predicted batch expects of them.
   */
  private readonly revisions = new Map<string, bigint>();
  /** The latest recorded_at this process wrote (a predicted batch's is never earlier). */
  private lastRecordedAt = 0;
  /** Predicted batches that missed in a row, and how many batches to go the ordinary way before predicting again. */
  private misses = 0;
  private skipPredictions = 0;
  /**
   * How predicted batches fared: landed; missed (the log or the followers did
   * not stand as predicted: nothing written, done the ordinary way); refused by
   * the server otherwise (likewise); unknown (the COMMIT's answer was lost:
   * settled as any append whose answer was lost).
   */
  readonly predictions = { landed: 0, missed: 0, refused: 0, unknown: 0 };
  /**
   * Set while the store reloads after finding the database behind what it had
   * acknowledged: appends are refused (StoreRecovering, nothing written) until
   * `resume`. Readiness reports it.
   */
  recovering: LogRewind | undefined;
  /**
   * Called once when the database is found behind this process's known head
   * (src/recovery.ts heals the read side and says so). Without it the store
   * only forgets its own memory of the lost log and goes on.
   */
  onRewind: ((rewind: LogRewind) => void) | undefined;
  /** How many times the store forgot a lost future (a subscription standing past the new head steps back to it). */
  private rewinds = 0;

  private constructor(
    private readonly db: Db,
    readonly maxAppendBytes: number,
  ) {}

  /**
   * `listen: false`: no LISTEN connection (a reader that polls on its own
   * schedule and never waits for new events, like the audit verifier's thread,
   * need not be woken by every commit). `maxAppendBytes`: the largest append
   * accepted (default APPEND_MAX_BYTES, EventStoreDB's default MaxAppendSize).
   */
  static async open(db: Db, opts: { listen?: boolean; maxAppendBytes?: number } = {}): Promise<PostgresEventStore> {
    await migrateEventStore(db);
    const store = new PostgresEventStore(db, opts.maxAppendBytes ?? APPEND_MAX_BYTES);
    if (opts.listen === false) return store;
    store.stopListening = await db.listen(NOTIFY_CHANNEL, (payload) => {
      // Our own commits were announced locally already; an older head says nothing new.
      const head = /^\d{1,20}$/.test(payload) ? formatPosition(BigInt(payload)) : undefined;
      if (head !== undefined && (head <= store.knownHead || head <= store.lockedHead)) return;
      if (head !== undefined) store.knownHead = head;
      store.signal.fire();
    });
    return store;
  }

  /** Reads of a log already opened (migrated) by the process that started this thread: no migration, no LISTEN (src/audit/verify-ahead-worker.ts). */
  static reader(db: Db): PostgresEventStore {
    return new PostgresEventStore(db, APPEND_MAX_BYTES);
  }

  checkRevision(stream: string, revision: bigint | 'no_stream'): Promise<void> {
    try {
      checkStreamName(stream);
      if (typeof revision === 'bigint' && revision < 0n) throw new EventStoreError('invalid_event', `not a revision: ${revision}`);
    } catch (err) {
      return Promise.reject(err);
    }
    // An append of no events: checked in its batch like any other, writes nothing.
    return this.enqueue({ stream, expected: revision, events: [] }).then(() => undefined);
  }

  appendToStream(stream: string, events: readonly NewEvent[], opts: AppendOptions = {}): Promise<AppendResult> {
    const expected = opts.expectedRevision ?? 'any';
    let checked: CheckedEvent[];
    const guard = opts.guard;
    try {
      checked = checkAppend(stream, events, expected, randomUUID, this.maxAppendBytes);
      if (guard) checkStreamName(guard.stream);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.enqueue({ stream, expected, guard, events: checked });
  }

  private enqueue(append: Omit<Pending, 'resolve' | 'reject'>): Promise<AppendResult> {
    if (this.closed) return Promise.reject(new EventStoreError('store_unavailable', 'event store is closed'));
    if (this.recovering) return Promise.reject(new StoreRecovering(PostgresEventStore.reason(this.recovering)));
    return new Promise((resolve, reject) => {
      this.queue.push({ ...append, resolve, reject });
      if (!this.draining) {
        // Start on a microtask: appends made in the same tick (a burst while
        // the store was idle) go in the first batch together, not one alone.
        this.draining = true;
        queueMicrotask(() => void this.drain());
      }
    });
  }

  private takeBatch(): Pending[] {
    const batch: Pending[] = [];
    let events = 0;
    while (this.queue.length > 0 && batch.length < GROUP_COMMIT_MAX_APPENDS) {
      const next = this.queue[0]!;
      if (batch.length > 0 && events + next.events.length > GROUP_COMMIT_MAX_EVENTS) break;
      batch.push(this.queue.shift()!);
      events += next.events.length;
    }
    return batch;
  }

  private async drain(): Promise<void> {
    this.draining = true;
    // A committed batch is answered once the next batch's transaction is under
    // way: its first statements travel while the answers (and the requests
    // waiting on them) run. Transactions stay strictly one after another.
    let answer: (() => void) | undefined;
    try {
      while (this.queue.length > 0) {
        const next = this.commitOrSettle(this.takeBatch());
        const previous = answer;
        answer = undefined;
        previous?.();
        answer = await next;
      }
    } finally {
      answer?.();
      this.draining = false;
    }
  }

  /** Commits a batch; answers how to answer it. Failures are settled here (each append answered or refused). */
  private async commitOrSettle(batch: Pending[]): Promise<(() => void) | undefined> {
    if (this.recovering) {
      const refused = new StoreRecovering(PostgresEventStore.reason(this.recovering));
      for (const p of batch) p.reject(refused);
      return undefined;
    }
    try {
      return await this.commit(batch);
    } catch (err) {
      const rewound = PostgresEventStore.rewoundHead(err);
      if (rewound !== undefined) {
        // Nothing of the batch was written (the statement failed): refused, safe to try again once reloaded.
        this.rewound(rewound, 'append');
        const refused = new StoreRecovering(this.recovering ? PostgresEventStore.reason(this.recovering) : 'the database was behind this process');
        for (const p of batch) p.reject(refused);
        return undefined;
      }
      const rest = await this.settleUnknown(batch, err);
      if (rest.length === 1 && batch.length === 1) {
        rest[0]!.reject(this.mapError(err));
      } else {
        // One bad append (a duplicate event id, say) must not fail its
        // neighbours: retry each alone, so only the culprit fails.
        for (const p of rest) {
          try {
            (await this.commit([p]))();
          } catch (e) {
            for (const q of await this.settleUnknown([p], e)) q.reject(this.mapError(e));
          }
        }
      }
      return undefined;
    }
  }

  /**
   * An append that failed without the server's answer (the connection broke,
   * perhaps while COMMIT was in flight) may or may not be in the log: its event
   * ids are looked up. Appends found are answered from the log, as written;
   * the others are returned (not written: safe to try again). Retrying
   * without looking would let a written append be refused by its own events
   * and its command decided a second time. If the lookup fails too, they are
   * all refused (store_unavailable), never retried blind.
   */
  private async settleUnknown(batch: Pending[], err: unknown): Promise<Pending[]> {
    if (isServerError(err) || err instanceof EventStoreError) return batch;
    let found: Map<string, { position: string; stream_revision: string }>;
    try {
      const { rows } = await this.db.query<{ event_id: string; position: string; stream_revision: string }>(
        'SELECT event_id::text AS event_id, position::text AS position, stream_revision::text AS stream_revision FROM es_events WHERE event_id = ANY($1::uuid[])',
        [batch.flatMap((p) => p.events.map((e) => e.id))],
      );
      found = new Map(rows.map((r) => [r.event_id, r]));
    } catch {
      // Written or not, nobody can say: never retried here, and the caller is told so.
      for (const p of batch) p.reject(p.events.length > 0 ? new OutcomeUnknown(`append outcome unknown: its answer was lost (${(err as Error)?.message ?? String(err)}) and the log could not be read to find out`, err) : this.mapError(err));
      return [];
    }
    const rest: Pending[] = [];
    for (const p of batch) {
      // A check (no events) wrote nothing: always safe to try again.
      const last = p.events.length > 0 ? found.get(p.events[p.events.length - 1]!.id) : undefined;
      if (last) p.resolve({ nextExpectedRevision: BigInt(last.stream_revision), lastPosition: formatPosition(BigInt(last.position)) });
      else rest.push(p);
    }
    // Subscriptions read what was written from the log.
    if (rest.length < batch.length) this.signal.fire();
    return rest;
  }

  private mapError(err: unknown): unknown {
    const e = err as { code?: string; constraint?: string; detail?: string };
    if (e?.code === '23505' && e.constraint === 'es_events_event_id_key') {
      const m = /\(event_id\)=\(([0-9a-f-]+)\)/.exec(e.detail ?? '');
      return new DuplicateEventId(m?.[1] ?? 'unknown');
    }
    if (err instanceof EventStoreError) return err;
    const wrapped = new EventStoreError('store_unavailable', `append failed: ${(err as Error)?.message ?? String(err)}`);
    (wrapped as { cause?: unknown }).cause = err;
    return wrapped;
  }

  /** Set by the read side: followers that advance inside the append transaction. */
  inline: InlineFollower | undefined;
  /** Called when an inline follower failed (its work was rolled back; the appends stand). */
  onInlineError: ((err: unknown) => void) | undefined;

  private static encode(batch: ReadonlyArray<Linked>, recordedAt: string | null = null): unknown[] {
    const guardStreams: (string | null)[] = [];
    const guardExpected: (string | null)[] = [];
    const streams: string[] = [];
    const expected: string[] = [];
    const counts: number[] = [];
    const eventAppend: number[] = [];
    const eventK: number[] = [];
    const ids: string[] = [];
    const types: string[] = [];
    // Data and metadata are checked JSON texts: joined into two JSON arrays, with
    // no array-literal escaping on either side.
    const data: string[] = [];
    const metadata: string[] = [];
    batch.forEach((p, ai) => {
      streams.push(p.stream);
      expected.push((typeof p.expected === 'bigint' ? p.expected : SENTINEL[p.expected]).toString());
      counts.push(p.events.length);
      guardStreams.push(p.guard?.stream ?? null);
      guardExpected.push(p.guard ? (p.guard.revision === 'no_stream' ? '-1' : p.guard.revision.toString()) : null);
      p.events.forEach((e, k) => {
        eventAppend.push(ai + 1);
        eventK.push(k + 1);
        ids.push(e.id);
        types.push(e.type);
        data.push(e.data);
        metadata.push(e.metadata);
      });
    });
    return [
      streams,
      expected,
      counts,
      eventAppend,
      eventK,
      ids,
      types,
      `[${data.join(',')}]`,
      `[${metadata.join(',')}]`,
      guardStreams,
      guardExpected,
      recordedAt,
      batch.map((p) => p.org),
      batch.map((p) => (p.first === null ? null : String(p.first))),
      batch.map((p) => p.prev),
      batch.map((p) => p.tip),
    ];
  }

  /**
   * $13: the log head this process had seen acknowledged when it sent the
   * statement. The statement fails (LOG_REWOUND, nothing written) if the head
   * the database held when the statement started is behind it: the database
   * lost commits this process acknowledged (docs/decisions.md, "When the
   * database goes backwards"). The check reads the head as of the statement's
   * start (the function's own update is later), never past what committed.
   */
  static readonly APPEND_SQL =
    `SELECT ok, actual, guard_actual, last_revision, last_position, link_ok, chain_seq, chain_tip, coalesce($12::timestamptz, now()) AS at,
       (SELECT es_expect(h.position >= $17::bigint, '${LOG_REWOUND}:' || h.position) FROM es_log_head h WHERE h.id = 1) AS held
     FROM es_append($1::text[], $2::bigint[], $3::int[], $4::int[], $5::int[], $6::uuid[], $7::text[], $8::json, $9::json, $10::text[], $11::bigint[], $12::timestamptz, $13::text[], $14::bigint[], $15::text[], $16::text[])`;

  /**
   * A predicted batch's append: the same function, with the recorded_at the
   * writer chose, failing the transaction (es_prediction_missed) unless every
   * append was accepted or refused as predicted and the accepted ones ended at
   * the predicted revision and position (so the log's head stood where
   * predicted), and unless the chosen time is within two seconds of the
   * database's clock.
   */
  private static readonly PREDICTED_APPEND_SQL = `WITH t AS MATERIALIZED (
      SELECT * FROM es_append($1::text[], $2::bigint[], $3::int[], $4::int[], $5::int[], $6::uuid[], $7::text[], $8::json, $9::json, $10::text[], $11::bigint[], $12::timestamptz, $13::text[], $14::bigint[], $15::text[], $16::text[])
        WITH ORDINALITY AS t(ok, actual, guard_actual, last_revision, last_position, link_ok, chain_seq, chain_tip, n)),
    held AS (SELECT es_expect(coalesce(bool_and(t.ok = ($17::boolean[])[t.n] AND (NOT t.ok OR (t.last_position = ($18::bigint[])[t.n] AND t.last_revision = ($19::bigint[])[t.n]))), false)
        AND abs(extract(epoch FROM clock_timestamp() - $12::timestamptz)) < 2, '${PREDICTION_MISSED}') AS held FROM t)
    SELECT t.ok, t.actual, t.guard_actual, t.last_revision, t.last_position, t.link_ok, t.chain_seq, t.chain_tip, $12::timestamptz AS at, held.held FROM t CROSS JOIN held ORDER BY t.n`;

  /**
   * Why an append was refused: its own stream moved (checked first), else its
   * guard stream, else only its audit chain's link (an append a prediction
   * left unlinked, or one the chain moved under every time it was linked
   * again): a conflict like the first, which a writer resolves the same way
   * (read again, decide again, append again).
   */
  private static refusal(p: { stream: string; expected: ExpectedRevision; guard?: AppendGuard | undefined }, r: AppendRow): EventStoreError {
    const actual = BigInt(r.actual);
    const ownHeld = p.expected === 'any' || (p.expected === 'no_stream' ? actual < 0n : p.expected === 'stream_exists' ? actual >= 0n : actual === p.expected);
    if (ownHeld && p.guard && r.guard_actual !== null) {
      const g = BigInt(r.guard_actual);
      const want = p.guard.revision === 'no_stream' ? -1n : p.guard.revision;
      if (g !== want || r.link_ok !== false) return new GuardFailed(p.guard, g < 0n ? 'no_stream' : g);
    }
    return new WrongExpectedRevision(p.stream, p.expected, actual < 0n ? 'no_stream' : actual);
  }

  /** The position just before a committed batch's first event; undefined when it wrote none. */
  private static startOf(batch: readonly Pending[], rows: readonly AppendRow[]): bigint | undefined {
    let start: bigint | undefined;
    batch.forEach((p, i) => {
      const r = rows[i]!;
      if (!r.ok || p.events.length === 0) return;
      const first = BigInt(r.last_position!) - BigInt(p.events.length);
      if (start === undefined || first < start) start = first;
    });
    return start;
  }

  /** The events of an accepted append as readers will see them (positions of one append are consecutive). */
  private static recorded(p: { stream: string; events: readonly CheckedEvent[] }, r: AppendRow): RecordedEvent[] {
    const n = BigInt(p.events.length);
    const lastPos = BigInt(r.last_position!);
    const lastRev = BigInt(r.last_revision!);
    const at = r.at.toISOString();
    return p.events.map((e, k) => ({
      id: e.id,
      type: e.type,
      streamName: p.stream,
      revision: lastRev - n + 1n + BigInt(k),
      position: formatPosition(lastPos - n + 1n + BigInt(k)),
      // The appended values themselves (checkAppend found them plain JSON, so they
      // equal their text read back); shared with the appender: never changed.
      data: e.dataValue,
      metadata: e.metadataValue,
      recordedAt: at,
    }));
  }

  /**
   * Writes a batch in one transaction; answers the function that answers each
   * append (called by the drain once the next batch is under way).
   */
  private async commit(batch: Pending[], useInline = true): Promise<() => void> {
    let rows: AppendRow[];
    const hook: { after: InlineOutcome | void } = { after: undefined };
    // Everything the transaction wrote to the log (the batch, and the inline followers' appends).
    const written: RecordedEvent[] = [];
    // The head this process has seen acknowledged: the append fails, writing nothing, if the database is behind it.
    const known = parsePosition(this.knownHead).toString();
    // A batch of checks only (no events) needs no followers and no transaction.
    const inline = useInline && batch.some((p) => p.events.length > 0) ? this.inline : undefined;
    const plan = inline ? this.predict(batch) : undefined;
    if (inline && plan) {
      const done = await this.commitPredicted(plan.items, inline, plan);
      if (done) return done;
    }
    let items = this.link(batch);
    const params = [...PostgresEventStore.encode(items), known];
    if (!inline) {
      rows = (await this.db.query<AppendRow>(PostgresEventStore.APPEND_SQL, params, { name: 'es_append_v8' })).rows;
      if (rows.length !== batch.length) throw new Error(`es_append answered ${rows.length} rows for ${batch.length} appends`);
      // A chain another process moved since this one last wrote it: linked again, in a transaction whose
      // first append takes the log-head lock, so its second attempt links on a head nothing else can move.
      if (rows.some((r) => r.link_ok === false)) {
        const first = { items, rows };
        ({ items, rows } = await this.db.transaction(async (tx) => {
          let r = first;
          for (let round = 0; round <= batch.length + 1 && r.rows.some((x) => x.link_ok === false); round++) {
            r = await this.relink(batch, r.items, r.rows, async (p) => (await tx.query<AppendRow>(PostgresEventStore.APPEND_SQL, [...p, known], { name: 'es_append_v8' })).rows);
          }
          return r;
        }));
      }
    } else {
      // Inline followers: the read models and the audit chain advance in the
      // append transaction itself, under the log-head lock, with one commit.
      let followersFailed = false;
      let followersDone = false;
      try {
        rows = await this.db.transaction(async (tx) => {
          const itx = this.inlineTx(tx, written);
          // The followers' preparation travels with the append (the transaction pipelines).
          const appending = tx.query<AppendRow>(PostgresEventStore.APPEND_SQL, params, { name: 'es_append_v8' });
          const prepared = inline.prepare(itx);
          prepared.catch(() => {});
          let rs = (await appending).rows;
          if (rs.length !== batch.length) throw new Error(`es_append answered ${rs.length} rows for ${batch.length} appends`);
          // A chain another process moved since this one last wrote it: linked again on the head the
          // database answered, in this transaction (the log-head lock is held: nothing moves it now).
          // Each round settles at least the appends up to the first one refused by its revision (which took
          // no sequence number, so the later appends of its organization were linked one too far): it ends.
          for (let round = 0; round <= batch.length && rs.some((r) => r.link_ok === false); round++) {
            ({ items, rows: rs } = await this.relink(batch, items, rs, async (p) => (await tx.query<AppendRow>(PostgresEventStore.APPEND_SQL, [...p, '0'], { name: 'es_append_v8' })).rows));
          }
          const events = items.flatMap((p, i) => (rs[i]!.ok && p.events.length > 0 ? PostgresEventStore.recorded(p, rs[i]!) : []));
          const before = PostgresEventStore.startOf(items, rs);
          if (before !== undefined) {
            events.sort((a, b) => (a.position < b.position ? -1 : 1));
            written.push(...events);
            this.lockedHead = events[events.length - 1]!.position;
            try {
              const final = formatPosition(before) === this.ownHead;
              hook.after = await inline.run(itx, formatPosition(before), events, await prepared, { final });
              followersDone = true;
            } catch (err) {
              followersFailed = true;
              this.onInlineError?.(err);
              throw err;
            }
          }
          return rs;
        });
      } catch (err) {
        written.length = 0;
        // Nothing of ours committed: its positions will be taken by the next
        // appender (perhaps another process, whose NOTIFY must wake us), and
        // NOTIFYs ignored meanwhile were other processes'.
        this.lockedHead = this.knownHead;
        this.signal.fire();
        hook.after?.rolledBack?.();
        // A follower failed: its work and the appends were rolled back together.
        // Write the appends alone (each checked again); the asynchronous
        // followers catch up and record the failure where it belongs.
        if (followersFailed) return this.commit(batch, false);
        // The server refused the COMMIT round trip (which carries the followers'
        // last statement): nothing was committed; likewise without them.
        if (followersDone && isServerError(err)) {
          // Statements left in flight for the COMMIT (final) say why it rolled back.
          const cause = await hook.after?.settled?.then(
            () => undefined,
            (e: unknown) => e,
          );
          this.onInlineError?.(cause ?? err);
          return this.commit(batch, false);
        }
        throw err;
      }
    }
    if (!inline && this.subscribers > 0) items.forEach((p, i) => rows[i]!.ok && written.push(...PostgresEventStore.recorded(p, rows[i]!)));
    return this.committed(items, rows, written, hook.after);
  }

  /** Links the audit chains of switched organizations, as the writer last saw them (see src/audit/linker.ts). */
  readonly linker = new ChainLinker();

  private link(batch: readonly Pending[], oks?: readonly boolean[]): Linked[] {
    const plans = this.linker.plan(batch, oks);
    return batch.map((p, i) => ({ ...p, ...plans[i]! }));
  }

  /** What the database answered of the chains' heads. */
  private learnHeads(items: readonly Linked[], rows: readonly AppendRow[]): void {
    items.forEach((p, i) => {
      const r = rows[i];
      if (r && r.link_ok !== undefined) this.linker.learn(p.org, r.chain_seq, r.chain_tip);
    });
  }

  /** The appends refused by their link written again, linked on the heads the database answered. */
  private async relink(batch: readonly Pending[], items: Linked[], rows: AppendRow[], append: (params: unknown[]) => Promise<AppendRow[]>): Promise<{ items: Linked[]; rows: AppendRow[] }> {
    this.learnHeads(items, rows);
    const redo = rows.flatMap((r, i) => (r.link_ok === false ? [i] : []));
    const again = this.link(redo.map((i) => batch[i]!));
    const answered = await append(PostgresEventStore.encode(again));
    if (answered.length !== again.length) throw new Error(`es_append answered ${answered.length} rows for ${again.length} appends`);
    const nextItems = [...items];
    const nextRows = [...rows];
    redo.forEach((i, k) => {
      nextItems[i] = again[k]!;
      nextRows[i] = answered[k]!;
    });
    return { items: nextItems, rows: nextRows };
  }

  /** After a batch's transaction committed: what this process now knows of the log; answers the function that answers each append. */
  private async committed(batch: Linked[], rows: AppendRow[], written: RecordedEvent[], after: InlineOutcome | void): Promise<() => void> {
    this.learnHeads(batch, rows);
    // What the followers left in flight was answered before the COMMIT was (and
    // succeeded, or the COMMIT would have rolled back). A failure here is a
    // follower that issued a statement after the COMMIT (refused, not run): a
    // defect, reported.
    await after?.settled?.catch((err: unknown) => this.onInlineError?.(err));
    after?.landed?.();
    this.learn(batch, rows, written);
    const own = [...written.map((e) => e.position), ...rows.flatMap((r, i) => (r.ok && batch[i]!.events.length > 0 ? [formatPosition(BigInt(r.last_position!))] : []))].reduce<Position | undefined>((m, p) => (m === undefined || p > m ? p : m), undefined);
    if (own !== undefined) this.ownHead = own;
    this.remember(written);
    const hook = { after };
    return () => {
      let moved = false;
      batch.forEach((p, i) => {
        const r = rows[i]!;
        if (r.ok) {
          if (p.events.length > 0) moved = true;
          p.resolve({ nextExpectedRevision: BigInt(r.last_revision!), lastPosition: formatPosition(BigInt(r.last_position!)) });
        } else {
          p.reject(PostgresEventStore.refusal(p, r));
        }
      });
      hook.after?.committed?.();
      if (moved) this.signal.fire();
    };
  }

  /**
   * What a committed batch says of the streams it wrote, for later predictions.
   * A batch that did not start where this process's last commit ended shows
   * that another process appended meanwhile: what was remembered is forgotten.
   */
  private learn(batch: Pending[], rows: AppendRow[], written: readonly RecordedEvent[]): void {
    const first = PostgresEventStore.startOf(batch, rows);
    if (first === undefined) return;
    if (formatPosition(first) !== this.ownHead || this.revisions.size > REMEMBERED_REVISIONS) this.revisions.clear();
    batch.forEach((p, i) => {
      const r = rows[i]!;
      if (r.ok && p.events.length > 0) this.revisions.set(p.stream, BigInt(r.last_revision!));
    });
    for (const e of written) if ((this.revisions.get(e.streamName) ?? -1n) < e.revision) this.revisions.set(e.streamName, e.revision);
    const at = rows[0]!.at.getTime();
    if (at > this.lastRecordedAt) this.lastRecordedAt = at;
  }

  /**
   * Predicts how a batch will land, when this process's last commit is the
   * log's last one as far as it knows: the log's head stands where that commit
   * left it, each append is accepted or refused as its expectation meets the
   * revisions this process wrote (an expected revision it knows nothing about
   * is assumed to hold), and the events are recorded at this process's clock
   * (never before its last commit's). Undefined when it cannot say (an append
   * expecting 'any' or 'stream_exists' of a stream it does not know, or none
   * accepted).
   */
  private predict(batch: Pending[]): Predicted | undefined {
    const own = this.ownHead;
    if (own === undefined || this.knownHead > own || !this.inline?.predict) return undefined;
    if (this.skipPredictions > 0) {
      this.skipPredictions--;
      return undefined;
    }
    let head = parsePosition(own);
    const at = new Date(Math.max(Date.now(), this.lastRecordedAt));
    const recordedAt = at.toISOString();
    const revs = new Map<string, bigint>();
    const known = (stream: string) => revs.get(stream) ?? this.revisions.get(stream);
    const oks: boolean[] = [];
    const lastPositions: (string | null)[] = [];
    const lastRevisions: (string | null)[] = [];
    const starts: { head: bigint; rev: bigint }[] = [];
    for (const p of batch) {
      let cur = known(p.stream);
      if (cur === undefined) {
        if (typeof p.expected === 'bigint') cur = p.expected;
        else if (p.expected === 'no_stream') cur = -1n;
        else return undefined;
      }
      let ok = p.expected === 'any' || (p.expected === 'no_stream' ? cur < 0n : p.expected === 'stream_exists' ? cur >= 0n : cur === p.expected);
      if (ok && p.guard) {
        const want = p.guard.revision === 'no_stream' ? -1n : p.guard.revision;
        ok = (known(p.guard.stream) ?? want) === want;
      }
      oks.push(ok);
      if (!ok) {
        lastPositions.push(null);
        lastRevisions.push(null);
        continue;
      }
      starts[oks.length - 1] = { head, rev: cur };
      head += BigInt(p.events.length);
      cur += BigInt(p.events.length);
      revs.set(p.stream, cur);
      lastPositions.push(head.toString());
      lastRevisions.push(cur.toString());
    }
    // Linked as predicted: a refused append takes no sequence number.
    const items = this.link(batch, oks);
    const events: RecordedEvent[] = [];
    items.forEach((p, i) => {
      const start = starts[i];
      if (!oks[i] || !start) return;
      p.events.forEach((e, k) =>
        events.push({ id: e.id, type: e.type, streamName: p.stream, revision: start.rev + 1n + BigInt(k), position: formatPosition(start.head + 1n + BigInt(k)), data: e.dataValue, metadata: e.metadataValue, recordedAt }),
      );
    });
    if (events.length === 0) return undefined;
    const followers = this.inline.predict(own);
    if (!followers) return undefined;
    return { before: own, at: recordedAt, oks, lastPositions, lastRevisions, events, followers, items };
  }

  /**
   * A predicted batch in one round trip: the append, the followers' check,
   * the followers' statements (built on the predicted events) and the COMMIT
   * go out together; the append and the check fail the transaction unless the
   * batch lands exactly as predicted. Answers undefined when the prediction
   * missed or the server refused anything (nothing was written: the batch goes
   * the ordinary way, which finds out why); throws only when the COMMIT's
   * outcome is unknown.
   */
  private async commitPredicted(batch: Linked[], inline: InlineFollower, plan: Predicted): Promise<(() => void) | undefined> {
    const written: RecordedEvent[] = [...plan.events];
    let after: InlineOutcome | void = undefined;
    let issued = false;
    const params = [...PostgresEventStore.encode(batch, plan.at), plan.oks, plan.lastPositions, plan.lastRevisions];
    let appending: Promise<{ rows: AppendRow[] }> | undefined;
    let checking: Promise<unknown> | undefined;
    try {
      await this.db.transaction(async (tx) => {
        const itx = this.inlineTx(tx, written, plan.at);
        appending = tx.query<AppendRow>(PostgresEventStore.PREDICTED_APPEND_SQL, params, { name: 'es_append_predicted_v3' });
        appending.catch(() => {});
        this.lockedHead = plan.events[plan.events.length - 1]!.position;
        checking = plan.followers.check(itx);
        checking.catch(() => {});
        after = await inline.run(itx, plan.before, plan.events, plan.followers.prepared, { final: true });
        issued = true;
      });
    } catch (err) {
      this.lockedHead = this.knownHead;
      this.signal.fire();
      (after as InlineOutcome | void)?.rolledBack?.();
      // The COMMIT went out and its answer was lost: written or not, the ordinary recovery finds out.
      if (issued && !isServerError(err)) {
        this.predictions.unknown++;
        throw err;
      }
      const saysMissed = (p: Promise<unknown> | undefined) =>
        p?.then(
          () => false,
          (e: unknown) => (e as { message?: string })?.message === PREDICTION_MISSED,
        ) ?? Promise.resolve(false);
      const missed = (await saysMissed(appending)) || (await saysMissed(checking));
      if (missed) this.predictions.missed++;
      else this.predictions.refused++;
      // Predicting again right away would likely miss again (another process is writing, or the clocks differ).
      this.misses++;
      this.skipPredictions = Math.min(2 ** (this.misses - 1), 64);
      return undefined;
    }
    this.misses = 0;
    this.predictions.landed++;
    const rows = (await appending!).rows;
    if (rows.length !== batch.length) throw new Error(`es_append answered ${rows.length} rows for ${batch.length} appends`);
    return this.committed(batch, rows, written, after);
  }

  /** Keeps a committed transaction's events for local subscriptions, when they cover its positions without a gap. */
  private remember(written: RecordedEvent[]): void {
    if (written.length === 0 || this.subscribers === 0) {
      const last = written[written.length - 1]?.position;
      if (last !== undefined && last > this.knownHead) this.knownHead = last;
      return;
    }
    written.sort((a, b) => (a.position < b.position ? -1 : 1));
    const first = parsePosition(written[0]!.position);
    const last = written[written.length - 1]!.position;
    if (last > this.knownHead) this.knownHead = last;
    if (parsePosition(last) - first + 1n !== BigInt(written.length)) return;
    this.tail.set(formatPosition(first - 1n), written);
    this.tailEvents += written.length;
    while (this.tail.size > TAIL_TRANSACTIONS || (this.tailEvents > TAIL_EVENTS && this.tail.size > 1)) {
      const [oldest, events] = this.tail.entries().next().value!;
      this.tail.delete(oldest);
      this.tailEvents -= events.length;
    }
  }

  private inlineTx(tx: Transaction, written: RecordedEvent[] = [], recordedAt: string | null = null): InlineTx {
    const marks = new Map<string, { written: number; head: Position }>();
    const savepointName = (name: string) => {
      if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not a savepoint name: ${name}`);
      return name;
    };
    return {
      savepoint: (name) => {
        marks.set(savepointName(name), { written: written.length, head: this.lockedHead });
        return tx.query(`SAVEPOINT ${name}`);
      },
      rollbackTo: async (name) => {
        const mark = marks.get(savepointName(name));
        if (!mark) throw new Error(`no savepoint ${name}`);
        await tx.query(`ROLLBACK TO SAVEPOINT ${name}`);
        written.length = mark.written;
        this.lockedHead = mark.head;
      },
      query: (text, params, opts) => tx.query(text, params, opts),
      append: async (appends) => {
        const checked = appends.map((a) => ({ stream: a.stream, expected: a.expectedRevision, guard: a.guard, events: checkAppend(a.stream, a.events, a.expectedRevision, randomUUID, this.maxAppendBytes) }));
        const plans = this.linker.plan(checked);
        const items = checked.map((p, i) => ({ ...p, ...plans[i]!, resolve: () => {}, reject: () => {} }));
        const { rows } = await tx.query<AppendRow>(PostgresEventStore.APPEND_SQL, [...PostgresEventStore.encode(items, recordedAt), '0'], { name: 'es_append_v8' });
        this.learnHeads(items, rows);
        return items.map((p, i) => {
          const r = rows[i]!;
          if (r.ok) {
            const events = PostgresEventStore.recorded(p, r);
            written.push(...events);
            const last = events[events.length - 1]?.position;
            if (last !== undefined && last > this.lockedHead) this.lockedHead = last;
            return { ok: true as const, events };
          }
          const actual = BigInt(r.actual);
          return { ok: false as const, actual: actual < 0n ? ('no_stream' as const) : actual };
        });
      },
      readStream: async (stream, fromRevision, maxCount) => {
        const { rows } = await tx.query<RawEventRow>(`${SELECT_EVENT} WHERE stream_name = $1 AND stream_revision >= $2 ORDER BY stream_revision LIMIT $3`, [stream, fromRevision.toString(), maxCount], { rawText: true });
        return rows.map(decodeRaw);
      },
      positionsAfter: (p, n) => {
        const base = parsePosition(p);
        return Array.from({ length: n }, (_, k) => formatPosition(base + BigInt(k + 1)));
      },
      expectAt: async (id, position) => {
        await tx.query('SELECT es_expect(EXISTS (SELECT 1 FROM es_events WHERE event_id = $1::uuid AND position = $2::bigint), $3)', [id, parsePosition(position).toString(), `event ${id} is not at position ${position}`], {
          name: 'es_expect_at',
        });
      },
      readLast: async (stream) => {
        const { rows } = await tx.query<RawEventRow>(`${SELECT_EVENT} WHERE stream_name = $1 ORDER BY stream_revision DESC LIMIT 1`, [stream], { rawText: true });
        return rows[0] ? decodeRaw(rows[0]) : undefined;
      },
    };
  }

  async readStream(stream: string, opts: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    checkStreamName(stream);
    const max = clampCount(opts.maxCount, READ_PAGE_MAX);
    if (max === 0) return [];
    const backwards = opts.direction === 'backwards';
    const from = opts.fromRevision;
    const params: unknown[] = [stream, max];
    let where = 'stream_name = $1';
    if (from !== undefined) {
      params.push(from.toString());
      where += backwards ? ' AND stream_revision <= $3' : ' AND stream_revision >= $3';
    }
    // Four shapes, each prepared once per connection (a command's catch-up read is this).
    const { rows } = await this.db.query<RawEventRow>(`${SELECT_EVENT} WHERE ${where} ORDER BY stream_revision ${backwards ? 'DESC' : 'ASC'} LIMIT $2`, params, {
      name: `es_read_stream_${backwards ? 'b' : 'f'}${from !== undefined ? 'r' : ''}`,
      rawText: true,
    });
    return rows.map(decodeRaw);
  }

  iterateStream(stream: string, opts: IterateStreamOptions = {}): AsyncIterable<RecordedEvent> {
    checkStreamName(stream);
    const size = iteratePage(opts.pageSize, READ_PAGE_MAX);
    const from = (opts.fromRevision ?? 0n).toString();
    const read = async (last: RawEventRow | undefined) =>
      (
        await this.db.query<RawEventRow>(`${SELECT_EVENT} WHERE stream_name = $1 AND stream_revision >= $2 ORDER BY stream_revision LIMIT $3`, [stream, last ? (BigInt(last.stream_revision) + 1n).toString() : from, size], {
          name: 'es_iterate_stream',
          rawText: true,
        })
      ).rows;
    return readAhead(read, (page) => page.length < size, decodeRaw);
  }

  iterateAll(opts: IterateAllOptions = {}): AsyncIterable<RecordedEvent> {
    const size = iteratePage(opts.pageSize, READ_PAGE_MAX);
    const start = parsePosition(opts.after).toString();
    const filter = opts.filter ? filterArgs(opts.filter) : undefined;
    const read = async (last: RawEventRow | undefined) => {
      const after = last ? last.position : start;
      const { rows } = filter
        ? await this.db.query<RawEventRow>('SELECT * FROM es_read_filtered($1, $2, $3, $4)', [after, size, ...filter], { rawText: true })
        : await this.db.query<RawEventRow>(`${SELECT_EVENT} WHERE position > $1 ORDER BY position LIMIT $2`, [after, size], { name: 'es_iterate_all', rawText: true });
      return rows;
    };
    return readAhead(read, (page) => page.length < size, decodeRaw);
  }

  async readAt(positions: readonly Position[]): Promise<RecordedEvent[]> {
    if (positions.length === 0) return [];
    const wanted = positions.map((p) => parsePosition(p).toString());
    const { rows } = await this.db.query<RawEventRow>(`${SELECT_EVENT} WHERE position = ANY($1::bigint[]) ORDER BY position`, [wanted], { rawText: true });
    return rows.map(decodeRaw);
  }

  /** Identical reads in flight at the same time share one query (followers at the same position). */
  private readonly inflight = new Map<string, Promise<RecordedEvent[]>>();

  readAll(opts: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    const key = `${opts.after ?? ''}|${opts.maxCount ?? ''}|${opts.filter ? JSON.stringify(opts.filter) : ''}`;
    const shared = this.inflight.get(key);
    if (shared) return shared;
    const read = this.readAllOnce(opts).finally(() => this.inflight.delete(key));
    this.inflight.set(key, read);
    return read;
  }

  private readAllOnce(opts: ReadAllOptions): Promise<RecordedEvent[]> {
    return readAllOn(this.db, opts);
  }

  async headPosition(): Promise<Position> {
    const known = this.knownHead;
    const head = await headPositionOn(this.db);
    if (head < known) this.rewound(head, 'read');
    return head;
  }

  /** Why appends are refused while recovering, in a sentence. */
  static reason(r: LogRewind): string {
    return `the database's event log ends at position ${r.databaseHead || '0'}, behind position ${r.knownHead} this process had already seen acknowledged (lost commits: synchronous_commit=off or a failover to an asynchronous standby); reloading from the database`;
  }

  /** The database's head in a LOG_REWOUND failure (undefined for any other error). */
  private static rewoundHead(err: unknown): Position | undefined {
    const m = new RegExp(`^${LOG_REWOUND}:(\\d+)$`).exec((err as { message?: string })?.message ?? '');
    return m ? formatPosition(BigInt(m[1]!)) : undefined;
  }

  /** The database is behind what this process saw acknowledged: refuse appends and hand over to whoever heals (once). */
  private rewound(databaseHead: Position, where: LogRewind['where']): void {
    if (this.recovering || databaseHead >= this.knownHead) return;
    const rewind: LogRewind = { knownHead: this.knownHead, databaseHead, detectedAt: new Date().toISOString(), where };
    if (!this.onRewind) {
      this.forgetFuture(databaseHead);
      return;
    }
    this.recovering = rewind;
    this.onRewind(rewind);
  }

  /**
   * Forgets everything this process remembers of the log past `head` (its
   * known, own and locked heads, the local tail, the streams' revisions behind
   * its predictions); subscriptions standing past `head` step back to it.
   */
  forgetFuture(head: Position): void {
    this.knownHead = head;
    this.lockedHead = head;
    this.ownHead = undefined;
    this.tail.clear();
    this.tailEvents = 0;
    this.revisions.clear();
    this.misses = 0;
    this.skipPredictions = 0;
    this.rewinds++;
    this.signal.fire();
  }

  /** Appends are accepted again (the state that remembered the lost log was reloaded). */
  resume(): void {
    this.recovering = undefined;
  }

  /**
   * The log read through `q`, a transaction of the caller's on `db`, when `db`
   * is this store's database (else undefined). For a transaction holding rows
   * that others wait for while it reads the log: waiting for another
   * connection of the pool there could wait for ever (docs/decisions.md, "An
   * append transaction waits for nothing outside itself").
   */
  readerIn(db: Db, q: Queryable): Pick<EventStore, 'readAll' | 'headPosition'> | undefined {
    if (db !== this.db) return undefined;
    return { readAll: (opts = {}) => readAllOn(q, opts), headPosition: () => headPositionOn(q) };
  }

  subscribeToAll(opts: SubscribeOptions = {}): AsyncIterable<SubscriptionItem> {
    return { [Symbol.asyncIterator]: () => this.subscription(opts)[Symbol.asyncIterator]() };
  }

  /**
   * The same subscription, delivered as the runs of events it reads or takes
   * from the tail (one item per transaction or page, not per event), for
   * followers in this process that work a batch at a time (src/projector/follow.ts).
   * The arrays are shared: read them, never change them.
   */
  subscribeToAllBatches(opts: SubscribeOptions = {}): AsyncIterable<BatchItem> {
    return { [Symbol.asyncIterator]: () => this.batchSubscription(opts)[Symbol.asyncIterator]() };
  }

  private async *subscription(opts: SubscribeOptions): AsyncGenerator<SubscriptionItem> {
    for await (const item of this.batchSubscription(opts)) {
      if (item.kind === 'caught_up') {
        yield item;
        continue;
      }
      for (const event of item.events) {
        if (opts.signal?.aborted) return;
        yield { kind: 'event', event };
      }
    }
  }

  private async *batchSubscription(opts: SubscribeOptions): AsyncGenerator<BatchItem> {
    this.subscribers++;
    try {
      yield* this.follow(opts);
    } finally {
      this.subscribers--;
    }
  }

  private async *follow(opts: SubscribeOptions): AsyncGenerator<BatchItem> {
    const { signal, filter } = opts;
    let after = opts.after ?? START;
    parsePosition(after);
    let caughtUp = false;
    let rewinds = this.rewinds;
    while (!signal?.aborted && !this.closed) {
      const woken = this.signal.next();
      if (rewinds !== this.rewinds) {
        // The database lost the log past its head: what was delivered past it no longer exists, and
        // new events take those positions again. Continue from the head (the follower's own state
        // is reloaded by whoever heals: src/recovery.ts).
        rewinds = this.rewinds;
        if (after > this.knownHead) after = this.knownHead;
        caughtUp = false;
      }
      if (caughtUp && !filter) {
        // This process's own commits, straight from memory while they continue exactly where we stand.
        let served = false;
        for (let events = this.tail.get(after); events; events = this.tail.get(after)) {
          if (signal?.aborted) return;
          after = events[events.length - 1]!.position;
          yield { kind: 'events', events };
          served = true;
        }
        // Nothing newer is known: wait (a NOTIFY from another process, or the poll, reads the log).
        if (served && after >= this.knownHead) {
          await sleep(SUBSCRIPTION_POLL_MS, signal, woken);
          continue;
        }
      }
      // The head is needed once, to say where "caught up" was reached.
      let head: Position = '';
      let batch: RecordedEvent[];
      try {
        if (!caughtUp) head = await this.headPosition();
        batch = await this.readAll({ after, maxCount: READ_PAGE_DEFAULT, ...(filter ? { filter } : {}) });
      } catch {
        // Transport error: back off and resume from the last delivered position.
        await sleep(SUBSCRIPTION_RETRY_MS, signal);
        continue;
      }
      if (batch.length > 0) {
        if (signal?.aborted) return;
        after = batch[batch.length - 1]!.position;
        yield { kind: 'events', events: batch };
      }
      if (batch.length < READ_PAGE_DEFAULT) {
        if (!caughtUp) {
          caughtUp = true;
          yield { kind: 'caught_up', position: head > after ? head : after };
        }
        await sleep(SUBSCRIPTION_POLL_MS, signal, woken);
      }
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.signal.fire();
    while (this.draining) await sleep(5);
    await this.stopListening?.();
  }
}
