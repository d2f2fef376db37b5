import type { EventStore, RecordedEvent } from '../eventstore/port.ts';
import type { Queryable } from '../postgres/db.ts';
import { linkOf, switchStream } from './link.ts';

// A stretch of a switched chain's version 2 entries, by sequence number: the
// organization's linked events, found through the audit read model (where
// each lies in the log) and read from the log itself (PostgreSQL store).

/** The sequence number of the chain's switch to version 2, 0 for a chain that has not switched. */
export async function switchSequence(store: EventStore, orgId: string): Promise<number> {
  const [sw] = await store.readStream(switchStream(orgId), { maxCount: 1 });
  return sw ? (linkOf(sw)?.sequence_number ?? 0) : 0;
}

/**
 * The linked events holding entries [from, to] of a switched chain, by
 * sequence number: the audit read model says where each lies in the log (an
 * index, not trusted: what is read is checked), the log gives the events.
 */
export async function linkedEvents(store: EventStore, db: Queryable, orgId: string, from: number, to: number): Promise<Map<number, RecordedEvent>> {
  const found = new Map<number, RecordedEvent>();
  if (store.kind !== 'postgres') return found;
  const { rows } = await db.query<EventRowText>(
    `SELECT a.sequence_number::text AS seq, e.position::text AS position, e.event_id::text AS event_id, e.stream_name, e.stream_revision::text AS stream_revision, e.event_type, e.data::text AS data, e.metadata::text AS metadata, e.recorded_at
       FROM audit_events a JOIN es_events e ON e.position = a.position::bigint
      WHERE a.org_id = $1 AND a.sequence_number BETWEEN $2 AND $3 ORDER BY a.sequence_number`,
    [orgId, from, to],
  );
  for (const r of rows) {
    const e: RecordedEvent = { id: r.event_id, type: r.event_type, streamName: r.stream_name, revision: BigInt(r.stream_revision), position: r.position.padStart(20, '0'), data: JSON.parse(r.data), metadata: JSON.parse(r.metadata), recordedAt: r.recorded_at.toISOString() };
    // Filed where the read model saw it; its own link is checked against that place (a rewritten one is a sequence_mismatch).
    found.set(Number(r.seq), e);
  }
  return found;
}

type EventRowText = { seq: string; position: string; event_id: string; stream_name: string; stream_revision: string; event_type: string; data: string; metadata: string; recorded_at: Date };

