import { type DomainEvent, normalizeEvent, parseEvent } from '../../events/index.ts';
import type { Actor, EventMeta } from '../../events/common.ts';
import { SNAPSHOT_EVERY_EVENTS, STATE_CACHE_MAX_STREAMS } from '../limits.ts';
import { randomUUID } from 'node:crypto';
import { type AppendGuard, checkAppend, type EventStore, type ExpectedRevision, type NewEvent, type Position, type RecordedEvent, WrongExpectedRevision } from './port.ts';
import { eventsAppended } from '../metrics.ts';
import { type SnapshotSpec, type Snapshots, snapshotsOf } from './snapshots.ts';

// The command handler: load the stream, fold it with `evolve`, `decide`, append
// with the expected revision. On a revision conflict it re-reads and decides
// again (bounded), or answers a rejection when the command asks for that.

/** A refusal with a stable snake_case code; src/http/kernel/errors.ts maps codes to HTTP. */
export class Rejection extends Error {
  override name = 'Rejection';
  constructor(
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

export type Decider<State, Command> = {
  initialState: () => State;
  evolve: (state: State, event: DomainEvent) => State;
  /** Pure: the events the command produces, none when it changes nothing, or a thrown Rejection. */
  decide: (command: Command, state: State, ctx: DecideContext) => DomainEvent[];
  /** Opt-in: a cold load starts from a snapshot of the folded state (src/eventstore/snapshots.ts). */
  snapshot?: SnapshotSpec;
};

/** What loading a stream needs of a decider. */
export type Foldable<State> = Pick<Decider<State, unknown>, 'initialState' | 'evolve' | 'snapshot'>;

export type DecideContext = { now: string };

export type CommandContext = {
  orgId: string;
  projectId: string | null;
  actor: Actor;
  requestId: string | null;
  correlationId?: string | null;
  /** The injected clock; deciders never read the wall clock. */
  now: () => Date;
};

export type CommandResult<State> = {
  state: State;
  /** The events this command appended (empty when it changed nothing). */
  events: DomainEvent[];
  changed: boolean;
  /** Position of the last appended event; null when nothing was appended. */
  lastPosition: Position | null;
};

export type HandleOptions<State = unknown> = {
  /** Attempts before giving up on repeated conflicts. */
  maxAttempts?: number;
  /** When set, a revision conflict is answered with this rejection code instead of a retry... */
  conflictCode?: string;
  /** ...unless this says the state that matters to the command is unchanged (then it retries). */
  retryIf?: (first: State, latest: State) => boolean;
  /** Overrides the expected revision derived from the read (e.g. 'no_stream' for a claim). */
  expectedRevision?: ExpectedRevision;
  /** Queue behind other commands on the same stream in this process instead of racing them. */
  serialize?: boolean;
  /**
   * Append only while another stream stands at this revision (the state the
   * caller decided on); otherwise GuardFailed reaches the caller, which decides
   * again on a fresh read of that stream.
   */
  guard?: AppendGuard;
  /**
   * Decide and check the events against the store's rules for an append (its
   * size limit included: AppendTooLarge), but write nothing: for a request
   * that must write elsewhere first (a claim) and may not leave that behind
   * when this command's events could never be appended.
   */
  checkOnly?: boolean;
};

// Commands that ask to be serialized queue per stream: N concurrent spends on
// one mandate become N appends in a row instead of N-1 conflicts a round.
const streamQueues = new Map<string, Promise<void>>();

async function serialized<T>(stream: string, fn: () => Promise<T>): Promise<T> {
  const prev = streamQueues.get(stream) ?? Promise.resolve();
  let release!: () => void;
  const mine = new Promise<void>((r) => (release = r));
  const tail = prev.then(() => mine);
  streamQueues.set(stream, tail);
  await prev;
  try {
    return await fn();
  } finally {
    release();
    if (streamQueues.get(stream) === tail) streamQueues.delete(stream);
  }
}

export const SCHEMA_VERSION = 1;

export function eventMeta(ctx: CommandContext, at: string): EventMeta {
  return {
    org_id: ctx.orgId,
    project_id: ctx.projectId,
    actor: ctx.actor,
    request_id: ctx.requestId,
    correlation_id: ctx.correlationId ?? ctx.requestId,
    causation_id: ctx.requestId,
    occurred_at: at,
    schema_version: SCHEMA_VERSION,
  };
}

/** A folded state and the revision it folds up to; -1 when the stream did not exist (the initial state). */
type Folded = { state: unknown; revision: bigint };

// Folded states by store and decider, keyed by stream, each with the revision
// it folds up to. A command starts from the cached state and reads only the
// events after that revision (none, usually), so its cost does not grow with
// the stream. Safe with other writers: a command decides on the cached state
// and appends expecting exactly its revision, so whatever another process
// appended meanwhile makes the append fail and the command re-reads from the
// cached revision forward (loadState, used by reads, always reads forward). Relies on
// `evolve` never mutating the state it is given (every decider returns a new
// state), so a cached state is never changed under a reader.
const folded = new WeakMap<EventStore, WeakMap<object, Map<string, Folded>>>();

function cacheOf(store: EventStore, decider: object): Map<string, Folded> {
  let byDecider = folded.get(store);
  if (!byDecider) folded.set(store, (byDecider = new WeakMap()));
  let m = byDecider.get(decider);
  if (!m) byDecider.set(decider, (m = new Map()));
  return m;
}

function remember(cache: Map<string, Folded>, stream: string, state: unknown, revision: bigint | null): void {
  const r = revision ?? -1n;
  const cur = cache.get(stream);
  if (cur && cur.revision >= r) return;
  cache.delete(stream);
  cache.set(stream, { state, revision: r });
  if (cache.size > STATE_CACHE_MAX_STREAMS) cache.delete(cache.keys().next().value!);
}

/**
 * Forgets every folded state cached for a store: its database lost commits
 * this process had acknowledged (src/recovery.ts), so a cached state may fold
 * events that no longer exist.
 */
export function forgetStates(store: EventStore): void {
  folded.delete(store);
}

/** The cached folded state of a stream, without reading (undefined when this process has none). */
export function cachedState<State>(store: EventStore, stream: string, decider: object): { state: State; revision: bigint | null } | undefined {
  const hit = cacheOf(store, decider).get(stream);
  return hit ? { state: hit.state as State, revision: hit.revision < 0n ? null : hit.revision } : undefined;
}

export async function loadState<State>(store: EventStore, stream: string, decider: Foldable<State>) {
  const cache = cacheOf(store, decider);
  const hit = cache.get(stream);
  const { state, revision } = hit ? await fold(store, stream, decider, { state: hit.state as State, revision: hit.revision >= 0n ? hit.revision : null }) : await coldLoad(store, stream, decider);
  if (hit) {
    // Most recently used last.
    cache.delete(stream);
    cache.set(stream, hit);
  }
  remember(cache, stream, state, revision);
  return { state, revision };
}

const PAGE = 1000;
/** The first page of a cold read, asked for together with the snapshot: most streams end within it. */
const FIRST_PAGE = 100;

type Start<State> = { state: State; revision: bigint | null };
type Fold<State> = Start<State> & { lastId: string | undefined; folded: number };

/** Folds the events after `start` (beginning with `page` when given: a read of `asked` events). */
async function fold<State>(store: EventStore, stream: string, decider: Foldable<State>, start: Start<State>, first?: { page: RecordedEvent[]; asked: number }): Promise<Fold<State>> {
  let { state, revision } = start;
  let lastId: string | undefined;
  let folded = 0;
  let from = revision === null ? 0n : revision + 1n;
  let read = first;
  for (;;) {
    read ??= { page: await store.readStream(stream, { fromRevision: from, maxCount: PAGE }), asked: PAGE };
    for (const e of read.page) {
      if (e.revision < from) continue;
      state = decider.evolve(state, parseEvent(e.type, e.data));
      revision = e.revision;
      lastId = e.id;
      folded++;
    }
    if (read.page.length < read.asked) break;
    from = read.page[read.page.length - 1]!.revision + 1n;
    read = undefined;
  }
  return { state, revision, lastId, folded };
}

/**
 * A load without a cached state: from the decider's snapshot when the stream
 * still holds, at the snapshot's revision, the event the snapshot names; else
 * from the start. The snapshot and the stream's first page are asked for
 * together, so a short stream costs no more than before. A load that folded
 * many events leaves a snapshot behind, off the command path.
 */
async function coldLoad<State>(store: EventStore, stream: string, decider: Foldable<State>): Promise<Fold<State>> {
  const initial: Start<State> = { state: decider.initialState(), revision: null };
  const spec = decider.snapshot;
  const snapshots = spec ? snapshotsOf(store) : undefined;
  if (!spec || !snapshots) return fold(store, stream, decider, initial);
  const [snap, page] = await Promise.all([snapshots.load(stream, spec).catch(() => undefined), store.readStream(stream, { fromRevision: 0n, maxCount: FIRST_PAGE })]);
  const first = { page, asked: FIRST_PAGE };
  let res: Fold<State> | undefined;
  if (snap) {
    const inFirst = snap.revision <= (page.at(-1)?.revision ?? -1n);
    const at = inFirst ? first : { page: await store.readStream(stream, { fromRevision: snap.revision, maxCount: PAGE }), asked: PAGE };
    const there = at.page.find((e) => e.revision === snap.revision);
    if (there && there.id === snap.eventId) res = await fold(store, stream, decider, { state: snap.state as State, revision: snap.revision }, at);
    else void snapshots.discard(stream, spec, snap).catch(() => {});
  }
  res ??= await fold(store, stream, decider, initial, first);
  if (res.folded > SNAPSHOT_EVERY_EVENTS) saveLater(snapshots, stream, spec, res);
  return res;
}

function saveLater(snapshots: Snapshots, stream: string, spec: SnapshotSpec, res: Fold<unknown>): void {
  const { revision, lastId, state } = res;
  if (revision === null || lastId === undefined) return;
  // A snapshot never fails, nor delays, a command.
  setImmediate(() => void snapshots.save(stream, spec, revision, lastId, state).catch(() => {}));
}

/**
 * Brings a stream's snapshot up to the stream's end (for the snapshotter):
 * folds from the snapshot there is, bypassing this process's cache (whose
 * states do not carry the id of their last event). True when one was written.
 */
export async function takeSnapshot<State>(store: EventStore, stream: string, decider: Foldable<State>): Promise<boolean> {
  const spec = decider.snapshot;
  const snapshots = snapshotsOf(store);
  if (!spec || !snapshots) return false;
  const snap = await snapshots.load(stream, spec);
  let res: Fold<State> | undefined;
  if (snap) {
    const at = { page: await store.readStream(stream, { fromRevision: snap.revision, maxCount: PAGE }), asked: PAGE };
    if (at.page[0]?.revision === snap.revision && at.page[0].id === snap.eventId) res = await fold(store, stream, decider, { state: snap.state as State, revision: snap.revision }, at);
    else await snapshots.discard(stream, spec, snap);
  }
  res ??= await fold(store, stream, decider, { state: decider.initialState(), revision: null });
  if (res.folded === 0 || res.revision === null || res.lastId === undefined) return false;
  return snapshots.save(stream, spec, res.revision, res.lastId, res.state);
}

export async function handleCommand<State, Command>(
  store: EventStore,
  decider: Decider<State, Command>,
  stream: string,
  command: Command,
  ctx: CommandContext,
  opts: HandleOptions<State> = {},
): Promise<CommandResult<State>> {
  if (opts.serialize) return serialized(stream, () => decideAndAppend(store, decider, stream, command, ctx, opts));
  return decideAndAppend(store, decider, stream, command, ctx, opts);
}

async function decideAndAppend<State, Command>(
  store: EventStore,
  decider: Decider<State, Command>,
  stream: string,
  command: Command,
  ctx: CommandContext,
  opts: HandleOptions<State>,
): Promise<CommandResult<State>> {
  const maxAttempts = opts.maxAttempts ?? 20;
  let first: State | undefined;
  // Optimistic first try: decide on the cached state and append expecting its
  // revision, without reading the stream. If another process appended since,
  // the append is refused (nothing written) and the command runs again from a
  // fresh read, as if the cached try never happened. A refusal or a no-op
  // decided on the cached state is answered only once the store confirms the
  // stream still stands at the cached revision (checkRevision: on Postgres it
  // rides in the next group-commit batch instead of a read of its own);
  // otherwise the command runs again from a fresh read. Not with an overridden
  // expected revision: that append would not prove the cached state current.
  let optimistic = opts.expectedRevision === undefined;
  for (let attempt = 1; ; attempt++) {
    const cached = optimistic ? cachedState<State>(store, stream, decider) : undefined;
    optimistic = false;
    const { state, revision } = cached ?? (await loadState(store, stream, decider));
    if (attempt === 1) first = state;
    else if (opts.conflictCode && !(opts.retryIf?.(first as State, state) ?? false)) {
      throw new Rejection(opts.conflictCode, 'the resource changed while the command was being decided', { stream });
    }
    const now = ctx.now().toISOString();
    let produced: DomainEvent[];
    try {
      produced = decider.decide(command, state, { now });
    } catch (err) {
      // A refusal (or a no-op below) is only answered from a state known to be
      // current: read from the stream, or a cached one the store confirms.
      if (cached && !(await current(store, stream, revision))) {
        attempt--;
        continue;
      }
      throw err;
    }
    if (produced.length === 0) {
      if (cached && !(await current(store, stream, revision))) {
        attempt--;
        continue;
      }
      return { state, events: [], changed: false, lastPosition: null };
    }
    // Assert on the write side: every event matches its schema before it is appended.
    const newEvents: NewEvent[] = produced.map((e) => ({
      type: e.type,
      data: normalizeEvent(e.type, e.data).data as NewEvent['data'],
      metadata: eventMeta(ctx, now) as unknown as NewEvent['metadata'],
    }));
    const expected: ExpectedRevision = opts.expectedRevision ?? (revision === null ? 'no_stream' : revision);
    if (opts.checkOnly) {
      checkAppend(stream, newEvents, expected, randomUUID, store.maxAppendBytes);
      return { state, events: produced, changed: false, lastPosition: null };
    }
    try {
      const res = await store.appendToStream(stream, newEvents, { expectedRevision: expected, ...(opts.guard ? { guard: opts.guard } : {}) });
      for (const e of produced) eventsAppended.inc({ type: e.type });
      let next = state;
      for (const e of produced) next = decider.evolve(next, e);
      // Cached only when the append was checked against exactly the state folded
      // (not with 'any'), folding the events as readers will parse them.
      if (expected === (revision ?? 'no_stream')) {
        let cached = state;
        for (const e of newEvents) cached = decider.evolve(cached, parseEvent(e.type, e.data));
        remember(cacheOf(store, decider), stream, cached, res.nextExpectedRevision);
      }
      return { state: next, events: produced, changed: true, lastPosition: res.lastPosition };
    } catch (err) {
      if (!(err instanceof WrongExpectedRevision)) throw err;
      if (cached) {
        attempt--; // the cached state was stale: not a conflict of this command
        continue;
      }
      if (opts.conflictCode && !opts.retryIf) throw new Rejection(opts.conflictCode, 'the resource changed while the command was being decided', { stream });
      if (opts.expectedRevision !== undefined || attempt >= maxAttempts) {
        throw new Rejection('concurrency_conflict', 'the resource kept changing; retry the request', { stream, attempts: attempt });
      }
      // Racers that lost together should not collide again in lockstep.
      await new Promise((r) => setTimeout(r, Math.random() * 2 * attempt));
    }
  }
}

/** Whether the stream still stands at a cached revision (false: read it again). */
async function current(store: EventStore, stream: string, revision: bigint | null): Promise<boolean> {
  try {
    await store.checkRevision(stream, revision ?? 'no_stream');
    return true;
  } catch (err) {
    if (err instanceof WrongExpectedRevision) return false;
    throw err;
  }
}
