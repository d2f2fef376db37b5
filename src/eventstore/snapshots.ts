import { isDeepStrictEqual } from 'node:util';
import type { Db } from '../postgres/db.ts';
import { migrate } from '../postgres/schema.ts';
import type { EventStore } from './port.ts';

// Snapshots of folded stream states, beside the log (docs/decisions.md,
// "Snapshots beside the log"). A snapshot names the revision it folds up to
// and the id of the event at that revision; a reader starts from it only when
// the stream still holds that event there, so a snapshot of a log that went
// backwards, or one that was tampered with, is ignored rather than believed.
// They live in PostgreSQL whichever store holds the log.

/** A decider's opt-in: bump `version` whenever evolve (or the parsing of its events) changes. */
export type SnapshotSpec = { name: string; version: number; streamPrefix: string };

export type StoredSnapshot = { revision: bigint; eventId: string; state: unknown };

// --- The state codec: JSON with tagged bigint, Map, Set, Date and undefined.
// A plain object whose only key starts with `$` is wrapped, so it never reads
// back as a tag. Anything else (class instances, functions, symbols) is not
// snapshottable, and neither is a state that does not round-trip exactly.

class NotSnapshottable extends Error {}

function encode(v: unknown): unknown {
  switch (typeof v) {
    case 'string':
    case 'boolean':
    case 'number':
      return v;
    case 'bigint':
      return { $bigint: v.toString() };
    case 'undefined':
      return { $undefined: 1 };
    case 'object': {
      if (v === null) return null;
      if (Array.isArray(v)) return v.map(encode);
      if (v instanceof Date) return { $date: v.toISOString() };
      if (v instanceof Map) return { $map: [...v].map(([k, x]) => [encode(k), encode(x)]) };
      if (v instanceof Set) return { $set: [...v].map(encode) };
      if (Object.getPrototypeOf(v) !== Object.prototype) throw new NotSnapshottable('not a plain object');
      const entries = Object.entries(v).map(([k, x]) => [k, encode(x)] as const);
      const out = Object.fromEntries(entries);
      return entries.length === 1 && entries[0]![0].startsWith('$') ? { $object: out } : out;
    }
    default:
      throw new NotSnapshottable(`a ${typeof v}`);
  }
}

function decode(v: unknown): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(decode);
  const keys = Object.keys(v);
  const o = v as Record<string, unknown>;
  if (keys.length === 1 && keys[0]!.startsWith('$')) {
    const x = o[keys[0]!];
    switch (keys[0]) {
      case '$bigint':
        return BigInt(x as string);
      case '$undefined':
        return undefined;
      case '$date':
        return new Date(x as string);
      case '$map':
        return new Map((x as [unknown, unknown][]).map(([k, y]) => [decode(k), decode(y)]));
      case '$set':
        return new Set((x as unknown[]).map(decode));
      case '$object':
        return Object.fromEntries(Object.entries(x as object).map(([k, y]) => [k, decode(y)]));
      default:
        throw new Error(`unknown snapshot tag ${keys[0]}`);
    }
  }
  // fromEntries defines own properties: a "__proto__" key stays a key.
  return Object.fromEntries(Object.entries(o).map(([k, y]) => [k, decode(y)]));
}

/** The state as snapshot text, or undefined when it would not read back exactly (then it is not snapshotted). */
export function serializeState(state: unknown): string | undefined {
  try {
    const text = JSON.stringify(encode(state));
    return isDeepStrictEqual(decode(JSON.parse(text)), state) ? text : undefined;
  } catch {
    return undefined;
  }
}

export function deserializeState(text: string): unknown {
  return decode(JSON.parse(text));
}

// --- The table.

export class Snapshots {
  constructor(private readonly db: Db) {}

  static async open(db: Db): Promise<Snapshots> {
    await migrate(db, async (tx) => {
      await tx.query(`CREATE TABLE IF NOT EXISTS stream_snapshots (
        stream text NOT NULL,
        decider text NOT NULL,
        version int NOT NULL,
        revision bigint NOT NULL,
        event_id text NOT NULL,
        state text NOT NULL,
        taken_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (stream, decider, version)
      )`);
    });
    return new Snapshots(db);
  }

  /** The stream's snapshot for this decider version, decoded; undefined when there is none. */
  async load(stream: string, spec: SnapshotSpec): Promise<StoredSnapshot | undefined> {
    const { rows } = await this.db.query<{ revision: string; event_id: string; state: string }>(
      'SELECT revision::text AS revision, event_id, state FROM stream_snapshots WHERE stream = $1 AND decider = $2 AND version = $3',
      [stream, spec.name, spec.version],
      { name: 'snapshot_load' },
    );
    const r = rows[0];
    return r ? { revision: BigInt(r.revision), eventId: r.event_id, state: deserializeState(r.state) } : undefined;
  }

  /** The revisions of the snapshots these streams have (streams without one are absent). */
  async revisions(streams: readonly string[], spec: SnapshotSpec): Promise<Map<string, bigint>> {
    const { rows } = await this.db.query<{ stream: string; revision: string }>(
      'SELECT stream, revision::text AS revision FROM stream_snapshots WHERE stream = ANY($1::text[]) AND decider = $2 AND version = $3',
      [streams, spec.name, spec.version],
    );
    return new Map(rows.map((r) => [r.stream, BigInt(r.revision)]));
  }

  /**
   * Saves a snapshot unless one at a later revision is there already (older
   * versions of the decider's snapshot of the stream go). False when the state
   * does not round-trip exactly, or nothing was written.
   */
  async save(stream: string, spec: SnapshotSpec, revision: bigint, eventId: string, state: unknown): Promise<boolean> {
    const text = serializeState(state);
    if (text === undefined) return false;
    const { rowCount } = await this.db.query(
      `WITH older AS (DELETE FROM stream_snapshots WHERE stream = $1 AND decider = $2 AND version < $3)
       INSERT INTO stream_snapshots (stream, decider, version, revision, event_id, state) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (stream, decider, version) DO UPDATE SET revision = EXCLUDED.revision, event_id = EXCLUDED.event_id, state = EXCLUDED.state, taken_at = now()
       WHERE stream_snapshots.revision < EXCLUDED.revision`,
      [stream, spec.name, spec.version, revision.toString(), eventId, text],
    );
    return (rowCount ?? 0) > 0;
  }

  /** Drops a snapshot found not to match its stream (still the one found: a newer one stays). */
  async discard(stream: string, spec: SnapshotSpec, found: StoredSnapshot): Promise<void> {
    await this.db.query('DELETE FROM stream_snapshots WHERE stream = $1 AND decider = $2 AND version = $3 AND revision = $4 AND event_id = $5', [
      stream,
      spec.name,
      spec.version,
      found.revision.toString(),
      found.eventId,
    ]);
  }
}

// The snapshot table a store's command handler reads and writes; set by the
// read side (src/readside.ts), which owns the database handle. A store with
// none attached folds from the start, as before.
const attached = new WeakMap<EventStore, Snapshots>();

export function attachSnapshots(store: EventStore, snapshots: Snapshots): void {
  attached.set(store, snapshots);
}

export function detachSnapshots(store: EventStore, snapshots: Snapshots): void {
  if (attached.get(store) === snapshots) attached.delete(store);
}

export function snapshotsOf(store: EventStore): Snapshots | undefined {
  return attached.get(store);
}
