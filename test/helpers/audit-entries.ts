import { auditStream } from '../../src/audit/chain.ts';
import { chainItems } from '../../src/audit/verifier.ts';
import type { EventStore } from '../../src/eventstore/port.ts';
import type { Db } from '../../src/postgres/db.ts';

// The stored event that is one entry of an organization's audit chain, for a
// test that tampers with the log by SQL, whichever format sealed the entry
// (docs/audit-chain.md): version 1's copy in `audit-<org>`, version 2's linked
// business event itself. The same test then runs on both (AUDIT_FORMAT=2).

export type StoredEntryEvent = {
  /** Its position in es_events. */
  position: string;
  data: Record<string, unknown>;
  /** Its data with the entry's payload changed: what the entry committed to no longer matches. */
  forged: Record<string, unknown>;
};

/** Entry `sequence` (from 1) of `orgId`'s chain as the log stores it. */
export async function storedEntryEvent(db: Db, store: EventStore, orgId: string, sequence: number): Promise<StoredEntryEvent> {
  let n = 0;
  for await (const item of chainItems(store, orgId)) {
    if (++n !== sequence) continue;
    if ('linked' in item) return { position: item.linked.position, data: item.linked.data, forged: { ...item.linked.data, forged: true } };
    const { rows } = await db.query<{ position: string; data: Record<string, unknown> }>('SELECT position::text, data FROM es_events WHERE stream_name = $1 AND stream_revision = $2', [auditStream(orgId), String(item.revision)]);
    const data = rows[0]!.data;
    return { position: rows[0]!.position, data, forged: { ...data, payload: { forged: true } } };
  }
  throw new Error(`${orgId}'s chain has no entry ${sequence} (it has ${n})`);
}

/** The number of entries of `orgId`'s chain, whichever formats it holds. */
export async function chainSize(store: EventStore, orgId: string): Promise<number> {
  let n = 0;
  for await (const _ of chainItems(store, orgId)) n++;
  return n;
}

/** The chain's size once an entry of `eventType` is one of its entries, else undefined (to wait on with `until`). */
export async function chainSizeWith(store: EventStore, orgId: string, eventType: string): Promise<number | undefined> {
  let n = 0;
  let found = false;
  for await (const i of chainItems(store, orgId)) {
    n++;
    found ||= ('linked' in i ? i.linked.type : i.entry.event_type) === eventType;
  }
  return found ? n : undefined;
}
