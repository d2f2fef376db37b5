import type { Queryable } from '../postgres/db.ts';

// Finding any id a person pastes: one table of id prefixes (src/ids.ts
// newId's) → the kind of thing and the read model holding it, each looked up
// within the person's organization only: an id of another organization is
// "nothing found", exactly as an id that never existed. An id without a known
// prefix is tried as an agent's handle or did:web.

export type Kind =
  | 'tool_call'
  | 'session'
  | 'mandate'
  | 'consumer'
  | 'webhook_endpoint'
  | 'connection'
  | 'approval'
  | 'policy'
  | 'mcp_server'
  | 'mcp_call'
  | 'counterparty'
  | 'api_key'
  | 'agent'
  | 'event';

export type Found = {
  kind: Kind;
  /** The thing's id; for an event, its entry's sequence number in the organization's audit chain. */
  id: string;
  /** The thing's parent, for a kind shown on its parent's page (a paid call's server). */
  parent?: string;
  /** For an event: the UTC day it happened (YYYY-MM-DD), where the audit explorer finds it. */
  day?: string;
};

/** An event id (the log's UUIDs, as webhook deliveries and the audit entries carry them). */
const EVENT_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

type Lookup = { prefix: string; kind: Kind; table: string; parent?: string };

/** Prefix → kind → table (id and org_id columns). One row per kind of id. */
export const ID_KINDS: readonly Lookup[] = [
  { prefix: 'tc_', kind: 'tool_call', table: 'tool_calls' },
  { prefix: 'ses_', kind: 'session', table: 'sessions' },
  { prefix: 'mdt_', kind: 'mandate', table: 'mandates' },
  { prefix: 'cns_', kind: 'consumer', table: 'consumers' },
  { prefix: 'trg_', kind: 'webhook_endpoint', table: 'webhook_endpoints' },
  { prefix: 'ca_', kind: 'connection', table: 'connections' },
  { prefix: 'apr_', kind: 'approval', table: 'approvals' },
  { prefix: 'pol_', kind: 'policy', table: 'policies' },
  { prefix: 'mcs_', kind: 'mcp_server', table: 'mcp_servers' },
  { prefix: 'mcpcall_', kind: 'mcp_call', table: 'mcp_calls', parent: 'server_id' },
  { prefix: 'cp_', kind: 'counterparty', table: 'counterparties' },
];

/** What a typed text can be: a trimmed single token of id characters. */
export const SEARCHABLE = /^[A-Za-z0-9_.:%-]{1,200}$/;

async function inTable(db: Queryable, l: Lookup, orgId: string, id: string): Promise<Found | undefined> {
  const { rows } = await db.query<{ parent: string | null }>(`SELECT ${l.parent ?? 'NULL'} AS parent FROM ${l.table} WHERE id = $1 AND org_id = $2`, [id, orgId]);
  if (rows.length === 0) return undefined;
  return rows[0]!.parent ? { kind: l.kind, id, parent: rows[0]!.parent } : { kind: l.kind, id };
}

/** The thing of the person's organization that `text` names, or undefined. */
export async function findById(db: Queryable, orgId: string, text: string): Promise<Found | undefined> {
  const q = text.trim();
  if (!SEARCHABLE.test(q)) return undefined;
  // A tool call may be given as bare digits too (as /v1/tool-calls/{id} takes it).
  const id = /^\d{1,30}$/.test(q) ? `tc_${q}` : q;
  const known = ID_KINDS.find((l) => id.startsWith(l.prefix));
  if (known) return inTable(db, known, orgId, id);
  if (EVENT_ID.test(id)) {
    const { rows } = await db.query<{ seq: string; day: string }>(
      `SELECT sequence_number::text AS seq, to_char(happened_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day FROM audit_events WHERE org_id = $1 AND source_event_id = $2`,
      [orgId, id.toLowerCase()],
    );
    return rows[0] ? { kind: 'event', id: rows[0].seq, day: rows[0].day } : undefined;
  }
  if (id.startsWith('key_')) {
    const { rows } = await db.query('SELECT 1 FROM api_keys WHERE key_id = $1 AND org_id = $2', [id, orgId]);
    return rows.length > 0 ? { kind: 'api_key', id } : undefined;
  }
  const { rows } = await db.query<{ handle: string }>('SELECT handle FROM agents WHERE org_id = $1 AND (handle = $2 OR did = $2)', [orgId, id]);
  return rows[0] ? { kind: 'agent', id: rows[0].handle } : undefined;
}
