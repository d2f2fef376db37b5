import { isoText as TS } from '../postgres/iso-text.ts';
import type { Queryable } from '../postgres/db.ts';
import type { Tenant } from './context.ts';
import { decodeCursor, pageOf } from './page-cursor.ts';

// What a project's paid MCP servers earned (projections/mcp.ts): paid calls
// and their platform fees summed per UTC day, a server's paid calls newest
// first, and its fee sweep transfers, each list a page at a time by cursor.
// Amounts are USDC atomic units (6 decimals) as decimal strings.

export type DayEarning = { day: string; calls: number; price_atomic: string; fee_atomic: string };
export type PaidCall = { id: string; tool_name: string; payer: string; price_atomic: string; fee_atomic: string; tx_hash: string; status: string; environment: string; created_at: string };
export type SweepLine = { nonce: string; sweep_id: string; source: string; destination: string; amount_atomic: string; status: string; tx_hash: string | null; position: string };

/** Paid calls (settled, answered or failed upstream: each was paid) and their fees per UTC day from the day of `since`, for the project's servers or one of them (the projection's daily sums). */
export async function earningsPerDay(db: Queryable, t: Tenant, since: Date, serverId?: string): Promise<DayEarning[]> {
  const { rows } = await db.query<DayEarning>(
    `SELECT to_char(d.day, 'YYYY-MM-DD') AS day, sum(d.calls)::int AS calls, sum(d.price_atomic)::text AS price_atomic, sum(d.fee_atomic)::text AS fee_atomic
     FROM mcp_earnings_daily d JOIN mcp_servers s ON s.id = d.server_id
     WHERE d.org_id = $1 AND s.project_id = $2 AND d.day >= ($3::timestamptz AT TIME ZONE 'UTC')::date ${serverId ? 'AND d.server_id = $4' : ''}
     GROUP BY d.day ORDER BY d.day`,
    serverId ? [t.orgId, t.projectId, since, serverId] : [t.orgId, t.projectId, since],
  );
  return rows;
}

/** A page of one server's paid calls, newest first (the caller has checked the server is the tenant's). */
export async function paidCallPage(db: Queryable, serverId: string, cursor: string | undefined, limit: number): Promise<{ rows: PaidCall[]; next: string | undefined }> {
  const c = decodeCursor(cursor);
  const { rows } = await db.query<PaidCall>(
    `SELECT id, tool_name, payer, price_atomic::text, fee_atomic::text, tx_hash, status, environment, ${TS('created_at')} AS created_at FROM mcp_calls
     WHERE server_id = $1 ${c ? 'AND (created_at, id) < ($3::timestamptz, $4)' : ''} ORDER BY mcp_calls.created_at DESC, mcp_calls.id DESC LIMIT $2`,
    c ? [serverId, limit + 1, c.at, c.id] : [serverId, limit + 1],
  );
  return pageOf(rows, limit, (r) => [r.created_at, r.id]);
}

/** A page of one server's sweep transfers, latest first (by log position). */
export async function sweepPage(db: Queryable, serverId: string, cursor: string | undefined, limit: number): Promise<{ rows: SweepLine[]; next: string | undefined }> {
  const after = cursor && /^[A-Za-z0-9_-]{1,200}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('utf8') : undefined;
  const { rows } = await db.query<SweepLine>(
    `SELECT nonce, sweep_id, source, destination, amount_atomic::text, status, tx_hash, position FROM mcp_sweep_transfers
     WHERE server_id = $1 ${after ? 'AND position < $3' : ''} ORDER BY position DESC LIMIT $2`,
    after ? [serverId, limit + 1, after] : [serverId, limit + 1],
  );
  if (rows.length <= limit) return { rows, next: undefined };
  const page = rows.slice(0, limit);
  return { rows: page, next: Buffer.from(page[page.length - 1]!.position).toString('base64url') };
}

