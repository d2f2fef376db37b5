import { businessEventTypes, parseEvent } from '../events/index.ts';
import type { EventStore, RecordedEvent } from '../src/eventstore/port.ts';
import type { Queryable } from '../src/postgres/db.ts';
import { decodeLink, LINK_RECORD_TYPE, linkOf, SWITCH_EVENT_TYPE } from '../src/audit/link.ts';
import { entryHashOf } from '../src/audit/linker.ts';
import { occurredAt } from '../src/audit/chain.ts';
import type { Projection } from '../src/projector/projection.ts';

/** The audit read model's own events (the rest of what it reads are linked facts: version 2 entries). */
const OWN_TYPES = ['audit.entry_sealed', 'audit.checkpoint_signed', 'audit.config_updated', 'audit.initial_walk_completed', 'audit.incident_opened', 'audit.incident_acknowledged'];

/**
 * The row of a linked event (a version 2 entry: the event is the entry,
 * docs/audit-chain.md), or undefined for an unlinked one. It holds no copy of
 * the fact's data: `payload_in_log` says the payload is the data of the event
 * at `position` in the log (false once redacted); `entryPayloads` reads it.
 */
function linkedRow(ev: RecordedEvent): Record<string, unknown> | undefined {
  if (ev.type === LINK_RECORD_TYPE) return recordRow(ev);
  const link = linkOf(ev);
  if (!link) return undefined;
  return {
    org_id: ev.metadata.org_id,
    sequence_number: link.sequence_number,
    event_type: ev.type,
    happened_at: occurredAt(ev),
    payload: null,
    payload_in_log: link.payload_salt !== null,
    prev_hash: link.prev_hash,
    entry_hash: entryHashOf(ev),
    source_event_id: ev.id,
    position: ev.position,
  };
}

/** The row of a fact linked by a record in its chain's stream (EventStoreDB): the same as the fact's own link gives on PostgreSQL. */
function recordRow(ev: RecordedEvent): Record<string, unknown> | undefined {
  let e: ReturnType<typeof parseEvent>;
  try {
    e = parseEvent(ev.type, ev.data);
  } catch {
    // A record not in its shape (forged) gets no row; the verification reports it. It must not stop the read model.
    return undefined;
  }
  if (e.type !== LINK_RECORD_TYPE) return undefined;
  const link = decodeLink(e.data.link);
  if (!link) return undefined;
  return {
    org_id: ev.metadata.org_id,
    sequence_number: link.sequence_number,
    event_type: e.data.event_type,
    happened_at: e.data.happened_at,
    payload: null,
    payload_in_log: link.payload_salt !== null,
    prev_hash: link.prev_hash,
    entry_hash: e.data.entry_hash,
    source_event_id: e.data.event_id,
    position: e.data.position,
  };
}

/** A witness's latest cosignature of the organization's checkpoints (either format's `audit.checkpoint_cosigned`). */
function cosignatureRow(ev: RecordedEvent): Record<string, unknown> | undefined {
  if (ev.type !== 'audit.checkpoint_cosigned') return undefined;
  const e = parseEvent(ev.type, ev.data);
  if (e.type !== 'audit.checkpoint_cosigned') return undefined;
  const d = e.data;
  return { org_id: d.org_id, witness: d.witness, size: d.size, cosignature: d.cosignature, timestamp: d.timestamp, cosigned_at: occurredAt(ev), position: ev.position };
}

// Read models of the audit surface: the chain's entries (from `audit-<org>`
// streams), signed checkpoints, configuration, and incidents.

export const auditProjection: Projection = {
  name: 'audit',
  // 2: each entry keeps its source event's id (a person's search finds an entry by the event id).
  // 3: a linked entry's payload is read from the log, not copied (payload_in_log); witnesses' cosignatures have their table;
  //    the source event's id is a uuid (null for an entry whose source names none: a forged one).
  version: 3,
  tables: {
    audit_events: (t) => `CREATE TABLE ${t} (
      org_id text NOT NULL,
      sequence_number bigint NOT NULL,
      event_type text NOT NULL,
      happened_at timestamptz NOT NULL,
      payload jsonb,
      payload_in_log boolean NOT NULL DEFAULT false,
      prev_hash text NOT NULL,
      entry_hash text NOT NULL,
      source_event_id uuid,
      position text COLLATE "C" NOT NULL,
      PRIMARY KEY (org_id, sequence_number)
    );
    CREATE INDEX ON ${t} (org_id, event_type text_pattern_ops, sequence_number);
    CREATE INDEX ON ${t} (org_id, source_event_id)`,
    audit_checkpoints: (t) => `CREATE TABLE ${t} (
      org_id text NOT NULL,
      size bigint NOT NULL,
      root_hash text NOT NULL,
      note text NOT NULL,
      verifier_key text NOT NULL,
      signed_at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL,
      PRIMARY KEY (org_id, size)
    )`,
    audit_cosignatures: (t) => `CREATE TABLE ${t} (
      org_id text NOT NULL,
      witness text NOT NULL,
      size bigint NOT NULL,
      cosignature text NOT NULL,
      timestamp bigint NOT NULL,
      cosigned_at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL,
      PRIMARY KEY (org_id, witness)
    )`,
    audit_configs: (t) => `CREATE TABLE ${t} (
      org_id text PRIMARY KEY,
      verification_window_days int,
      hot_window_days int,
      hot_max_staleness_seconds int,
      warm_window_days int,
      warm_max_staleness_seconds int,
      cold_max_staleness_seconds int,
      initial_walk_completed_at timestamptz,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    )`,
    audit_incidents: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY,
      org_id text NOT NULL,
      kind text NOT NULL,
      detected_at timestamptz NOT NULL,
      detected_at_sequence bigint NOT NULL,
      detail text NOT NULL,
      status text NOT NULL,
      anpd_notification_status text NOT NULL,
      acknowledgement jsonb,
      acknowledged_at timestamptz,
      created_at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (org_id, status, detected_at)`,
  },
  // Every business event: after its chain's switch each is an entry (linked) and gets its row.
  // On EventStoreDB a fact's link is a record in its chain's stream (LINK_RECORD_TYPE), which gets the row instead.
  eventTypes: new Set([...OWN_TYPES, ...businessEventTypes, SWITCH_EVENT_TYPE, LINK_RECORD_TYPE]),

  async apply(tx, event, t) {
    const row = linkedRow(event);
    if (row) await insertEntries(tx, t, [row]);
    const cosigned = cosignatureRow(event);
    if (cosigned) await upsertCosignatures(tx, t, [cosigned]);
    if (OWN_TYPES.includes(event.type)) await applyOwn(tx, event, t);
  },
};

/** The audit surface's own events: v1 entries, checkpoints, configuration, incidents. */
async function applyOwn(tx: Parameters<Projection['apply']>[0], event: RecordedEvent, t: Parameters<Projection['apply']>[2]): Promise<void> {
    const e = parseEvent(event.type, event.data);
    const org = event.metadata.org_id;
    const pos = event.position;
    switch (e.type) {
      case 'audit.entry_sealed':
        await tx.query(
          `INSERT INTO ${t.audit_events} (org_id, sequence_number, event_type, happened_at, payload, prev_hash, entry_hash, source_event_id, position)
           VALUES ($1, $2, $3, $4, $5, $6, $7, ${SOURCE_ID('$8::text')}, $9) ON CONFLICT DO NOTHING`,
          [org, e.data.sequence_number, e.data.event_type, e.data.happened_at, e.data.payload === null ? null : JSON.stringify(e.data.payload), e.data.prev_hash, e.data.entry_hash, e.data.source.event_id, pos],
        );
        return;
      case 'audit.checkpoint_signed':
        await tx.query(
          `INSERT INTO ${t.audit_checkpoints} (org_id, size, root_hash, note, verifier_key, signed_at, position) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
          [e.data.org_id, e.data.size, e.data.root_hash, e.data.note, e.data.verifier_key, e.data.signed_at, pos],
        );
        return;
      case 'audit.config_updated': {
        const d = e.data;
        await tx.query(
          `INSERT INTO ${t.audit_configs} AS c (org_id, verification_window_days, hot_window_days, hot_max_staleness_seconds, warm_window_days, warm_max_staleness_seconds, cold_max_staleness_seconds, created_at, updated_at, position)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9)
           ON CONFLICT (org_id) DO UPDATE SET
             verification_window_days = coalesce(EXCLUDED.verification_window_days, c.verification_window_days),
             hot_window_days = coalesce(EXCLUDED.hot_window_days, c.hot_window_days),
             hot_max_staleness_seconds = coalesce(EXCLUDED.hot_max_staleness_seconds, c.hot_max_staleness_seconds),
             warm_window_days = coalesce(EXCLUDED.warm_window_days, c.warm_window_days),
             warm_max_staleness_seconds = coalesce(EXCLUDED.warm_max_staleness_seconds, c.warm_max_staleness_seconds),
             cold_max_staleness_seconds = coalesce(EXCLUDED.cold_max_staleness_seconds, c.cold_max_staleness_seconds),
             updated_at = EXCLUDED.updated_at, position = EXCLUDED.position
           WHERE c.position < EXCLUDED.position`,
          [d.org_id, d.verification_window_days ?? null, d.hot_window_days ?? null, d.hot_max_staleness_seconds ?? null, d.warm_window_days ?? null, d.warm_max_staleness_seconds ?? null, d.cold_max_staleness_seconds ?? null, d.at, pos],
        );
        return;
      }
      case 'audit.initial_walk_completed':
        await tx.query(
          `INSERT INTO ${t.audit_configs} AS c (org_id, initial_walk_completed_at, created_at, updated_at, position) VALUES ($1, $2, $2, $2, $3)
           ON CONFLICT (org_id) DO UPDATE SET initial_walk_completed_at = coalesce(c.initial_walk_completed_at, EXCLUDED.initial_walk_completed_at), position = EXCLUDED.position
           WHERE c.position < EXCLUDED.position`,
          [e.data.org_id, e.data.at, pos],
        );
        return;
      case 'audit.incident_opened':
        await tx.query(
          `INSERT INTO ${t.audit_incidents} (id, org_id, kind, detected_at, detected_at_sequence, detail, status, anpd_notification_status, created_at, position)
           VALUES ($1, $2, $3, $4, $5, $6, 'open', 'pending_assessment', $4, $7) ON CONFLICT (id) DO NOTHING`,
          [e.data.incident_id, e.data.org_id, e.data.kind, e.data.detected_at, e.data.detected_at_sequence, e.data.detail, pos],
        );
        return;
      case 'audit.incident_acknowledged': {
        const { incident_id, acknowledged_at, anpd_notification_status, ...rest } = e.data;
        await tx.query(
          `UPDATE ${t.audit_incidents} SET status = 'acknowledged', anpd_notification_status = $2, acknowledgement = $3, acknowledged_at = $4, position = $5 WHERE id = $1 AND position < $5`,
          [incident_id, anpd_notification_status, JSON.stringify(rest), acknowledged_at, pos],
        );
        return;
      }
    }
}

/**
 * The set-based form, with the same result as applying the events one by one:
 * sealed entries (the bulk, independent rows) in one INSERT; the rest, rare, in order.
 */
auditProjection.applyBatch = async (tx, events, t) => {
  const entries: unknown[] = [];
  const cosignatures: unknown[] = [];
  // Each apply issues its one statement when called: all go out before any answer is awaited.
  const others: Promise<unknown>[] = [];
  for (const ev of events) {
    const cosigned = cosignatureRow(ev);
    if (cosigned) cosignatures.push(cosigned);
    const row = linkedRow(ev);
    if (row) {
      entries.push(row);
      if (OWN_TYPES.includes(ev.type)) others.push(applyOwn(tx, ev, t));
      continue;
    }
    if (ev.type !== 'audit.entry_sealed') {
      if (OWN_TYPES.includes(ev.type)) others.push(applyOwn(tx, ev, t));
      continue;
    }
    const e = parseEvent(ev.type, ev.data);
    if (e.type !== 'audit.entry_sealed') continue;
    const d = e.data;
    entries.push({ org_id: ev.metadata.org_id, sequence_number: d.sequence_number, event_type: d.event_type, happened_at: d.happened_at, payload: d.payload === null ? null : JSON.stringify(d.payload), payload_in_log: false, prev_hash: d.prev_hash, entry_hash: d.entry_hash, source_event_id: d.source.event_id, position: ev.position });
  }
  if (cosignatures.length > 0) others.push(upsertCosignatures(tx, t, cosignatures));
  for (const o of others) o.catch(() => {});
  if (entries.length === 0) {
    await Promise.all(others);
    return;
  }
  const inserted = insertEntries(tx, t, entries);
  await Promise.all([...others, inserted]);
};

/** An entry's source event id as a uuid; null when the entry names something else (a forged v1 entry must not stop the read model). */
const SOURCE_ID = (text: string) => `CASE WHEN ${text} ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN ${text}::uuid END`;

/** Entries in one statement (prepared once per connection and table: planning it each batch cost more than running it). */
function insertEntries(tx: Parameters<Projection['apply']>[0], t: Parameters<Projection['apply']>[2], entries: unknown[]): Promise<unknown> {
  return tx.query(
    `INSERT INTO ${t.audit_events} (org_id, sequence_number, event_type, happened_at, payload, payload_in_log, prev_hash, entry_hash, source_event_id, position)
     SELECT org_id, sequence_number, event_type, happened_at, payload::jsonb, payload_in_log, prev_hash, entry_hash, ${SOURCE_ID('source_event_id')}, position
     FROM json_to_recordset($1::json) AS x(org_id text, sequence_number bigint, event_type text, happened_at timestamptz, payload text, payload_in_log boolean, prev_hash text, entry_hash text, source_event_id text, position text)
     ON CONFLICT DO NOTHING`,
    [JSON.stringify(entries)],
    { name: `audit_events_batch:${t.audit_events}` },
  );
}

/** Each witness's latest cosignature: a larger size replaces a smaller one (a later one of the same size, too). */
function upsertCosignatures(tx: Parameters<Projection['apply']>[0], t: Parameters<Projection['apply']>[2], rows: unknown[]): Promise<unknown> {
  return tx.query(
    `INSERT INTO ${t.audit_cosignatures} AS c (org_id, witness, size, cosignature, timestamp, cosigned_at, position)
     SELECT DISTINCT ON (org_id, witness) org_id, witness, size, cosignature, timestamp, cosigned_at, position
     FROM json_to_recordset($1::json) AS x(org_id text, witness text, size bigint, cosignature text, timestamp bigint, cosigned_at timestamptz, position text)
     ORDER BY org_id, witness, size DESC, position DESC
     ON CONFLICT (org_id, witness) DO UPDATE SET size = EXCLUDED.size, cosignature = EXCLUDED.cosignature, timestamp = EXCLUDED.timestamp, cosigned_at = EXCLUDED.cosigned_at, position = EXCLUDED.position
     WHERE (c.size, c.position) < (EXCLUDED.size, EXCLUDED.position)`,
    [JSON.stringify(rows)],
  );
}

/**
 * The payloads of entries as the audit surface serves them: a v1 entry's copy,
 * or a linked fact's data read from the log at the position its row keeps
 * (one read of the store for the page).
 */
export async function entryPayloads<R extends { payload: unknown; payload_in_log: boolean; position: string }>(store: Pick<EventStore, 'readAt'>, rows: R[]): Promise<Omit<R, 'payload_in_log' | 'position'>[]> {
  const inLog = rows.filter((r) => r.payload_in_log).map((r) => r.position);
  const data = new Map<string, unknown>();
  for (const e of await store.readAt(inLog)) data.set(e.position, e.data);
  return rows.map(({ payload_in_log, position, ...r }) => ({ ...r, payload: payload_in_log ? (data.get(position) ?? null) : r.payload }));
}

/** Entries (v1 events or linked facts) and checkpoints: one statement each, issued without waiting (see applyBatch). */
auditProjection.pipelined = (events) => events.every((e) => e.type === 'audit.entry_sealed' || e.type === 'audit.checkpoint_signed' || !OWN_TYPES.includes(e.type));
