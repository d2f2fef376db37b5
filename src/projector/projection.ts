import type { Queryable } from '../postgres/db.ts';
import type { RecordedEvent } from '../eventstore/port.ts';

// A projection: a named, versioned function from events to rows.
//
// Tables are declared by logical name with DDL taking the physical name, so a
// rebuild can project into fresh tables and swap them in. The DDL runs only
// when the table does not exist; use unnamed indexes (CREATE INDEX ON ...) so
// names never collide across rebuilds, and COLLATE "C" on position columns so
// text order is log order.
// `apply` must be idempotent: applying an event twice changes nothing.

export type TableNames = Record<string, string>;

/**
 * fresh: the tables hold exactly what this same pass applied, and each event
 * comes once, in order (a rebuild's bulk phase). A row the batch creates
 * cannot exist yet, so the projection need not look for it and may insert it
 * without an idempotency guard; if that fails anyway, the batch is applied
 * again one by one, with the guards.
 */
export type BatchOptions = { fresh?: boolean };

export interface Projection {
  readonly name: string;
  readonly version: number;
  readonly tables: Readonly<Record<string, (physical: string) => string>>;
  /** Event types this projection reads; every other event only advances its checkpoint. */
  readonly eventTypes: ReadonlySet<string>;
  apply(tx: Queryable, event: RecordedEvent, t: TableNames): Promise<void>;
  /**
   * Optional set-based form of `apply` for a batch of handled events, in log
   * order, with the same result as applying them one by one. When it fails the
   * runtime replays the batch event by event to find the failing one.
   */
  applyBatch?(tx: Queryable, events: readonly RecordedEvent[], t: TableNames, opts?: BatchOptions): Promise<void>;
  /**
   * Optional: whether `applyBatch` issues every statement for these events
   * before it waits for any answer. Only then may the inline followers send
   * the transaction's COMMIT right behind its statements without waiting for
   * them (a statement issued after an answer would come after the COMMIT, outside
   * the transaction); any other projection's statements are answered first.
   */
  pipelined?(events: readonly RecordedEvent[], opts?: BatchOptions): boolean;
}

export const liveTables = (p: Projection): TableNames => Object.fromEntries(Object.keys(p.tables).map((k) => [k, k]));
export const shadowTables = (p: Projection): TableNames => Object.fromEntries(Object.keys(p.tables).map((k) => [k, `${k}__rebuild`]));
