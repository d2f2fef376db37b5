import { isoText as TS } from '../postgres/iso-text.ts';
import type { Queryable } from '../postgres/db.ts';
import type { Tenant } from './context.ts';
import { decodeCursor, pageOf } from './page-cursor.ts';

// The dashboard's lists of commerce memory, a page at a time by cursor (the
// API's lists take a limit only): the project's counterparties by last seen,
// and one counterparty's interactions, newest first. Each rides an index of
// projections/commerce-memory.ts.

export type CounterpartyLine = { id: string; kind: string; name: string; identifier: string | null; identifier_kind: string | null; last_seen_at: string };
export type InteractionLine = { id: string; kind: string; occurred_at: string; source: string; agent_id: string | null; amount_minor: string | null; currency: string | null };

export async function counterpartyPage(db: Queryable, t: Tenant, cursor: string | undefined, limit: number): Promise<{ rows: CounterpartyLine[]; next: string | undefined }> {
  const c = decodeCursor(cursor);
  const { rows } = await db.query<CounterpartyLine>(
    `SELECT id, kind, name, identifier, identifier_kind, ${TS('last_seen_at')} AS last_seen_at FROM counterparties
     WHERE org_id = $1 AND project_id = $2 ${c ? 'AND (last_seen_at, id) < ($4::timestamptz, $5)' : ''}
     ORDER BY counterparties.last_seen_at DESC, counterparties.id DESC LIMIT $3`,
    c ? [t.orgId, t.projectId, limit + 1, c.at, c.id] : [t.orgId, t.projectId, limit + 1],
  );
  return pageOf(rows, limit, (r) => [r.last_seen_at, r.id]);
}

/** One counterparty's interactions, newest first (the caller has checked the counterparty is the tenant's). */
export async function interactionPage(db: Queryable, counterpartyId: string, cursor: string | undefined, limit: number): Promise<{ rows: InteractionLine[]; next: string | undefined }> {
  const c = decodeCursor(cursor);
  const { rows } = await db.query<InteractionLine>(
    `SELECT id, kind, ${TS('occurred_at')} AS occurred_at, source, agent_id, amount_minor::text AS amount_minor, currency FROM interactions
     WHERE counterparty_id = $1 ${c ? 'AND (occurred_at, id) < ($3::timestamptz, $4)' : ''}
     ORDER BY interactions.occurred_at DESC, interactions.id DESC LIMIT $2`,
    c ? [counterpartyId, limit + 1, c.at, c.id] : [counterpartyId, limit + 1],
  );
  return pageOf(rows, limit, (r) => [r.occurred_at, r.id]);
}
