import { isoText as TS } from '../postgres/iso-text.ts';
import type { Ports, Tenant } from './context.ts';

// Tool calls as recorded (spec 2 Tool call, 4.3): the list (before, since,
// limit, or the count), one call, and its payment and verification status
// views, read by the HTTP routes and the status streams.

export type ToolCallRecord = {
  id: string;
  session_id: string;
  server_id: string;
  tool_name: string;
  status: 'running' | 'success' | 'error';
  called_at: string;
  duration_ms: number | null;
  error_code: string | null;
  input?: unknown;
  output?: unknown;
  routing?: unknown;
  failover_trail?: unknown;
};

const COLUMNS = `id, session_id, server_id, tool_name, status, ${TS('called_at')} AS called_at, duration_ms, error_code, input, output, routing, failover_trail`;

/** `tc_<digits>` or bare digits → the canonical id; undefined when malformed. */
export function canonicalToolCallId(raw: string): string | undefined {
  const m = /^(?:tc_)?(\d{1,30})$/.exec(raw);
  return m ? `tc_${m[1]}` : undefined;
}

/** One tool call of the tenant (by its canonical id), or undefined. */
export async function readToolCall(ports: Pick<Ports, 'db'>, t: Tenant, id: string): Promise<ToolCallRecord | undefined> {
  const { rows } = await ports.db.query<ToolCallRecord>(`SELECT ${COLUMNS} FROM tool_calls WHERE id = $1 AND org_id = $2 AND project_id = $3`, [id, t.orgId, t.projectId]);
  return rows[0];
}

export type ToolCallQuery = { before?: string | undefined; since?: Date | undefined; limit: number };

/**
 * The tenant's tool calls, newest first (`count` answers how many instead):
 * `before` (a tool call id) pages back, `since` bounds; a malformed `before`
 * matches nothing.
 */
export async function listToolCalls(ports: Pick<Ports, 'db'>, t: Tenant, q: ToolCallQuery, count: true): Promise<number>;
export async function listToolCalls(ports: Pick<Ports, 'db'>, t: Tenant, q: ToolCallQuery, count?: false): Promise<ToolCallRecord[]>;
export async function listToolCalls(ports: Pick<Ports, 'db'>, t: Tenant, q: ToolCallQuery, count = false): Promise<number | ToolCallRecord[]> {
  const params: unknown[] = [t.orgId, t.projectId];
  let where = 'org_id = $1 AND project_id = $2';
  if (q.since) {
    params.push(q.since.toISOString());
    where += ` AND called_at >= $${params.length}`;
  }
  if (q.before) {
    const id = canonicalToolCallId(q.before);
    if (!id) return count ? 0 : [];
    params.push(id);
    where += ` AND seq < coalesce((SELECT seq FROM tool_calls WHERE id = $${params.length} AND org_id = $1 AND project_id = $2), 0)`;
  }
  if (count) {
    const { rows } = await ports.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM tool_calls WHERE ${where}`, params);
    return rows[0]!.n;
  }
  params.push(q.limit);
  const { rows } = await ports.db.query<ToolCallRecord>(`SELECT ${COLUMNS} FROM tool_calls WHERE ${where} ORDER BY seq DESC LIMIT $${params.length}`, params);
  return rows;
}

export type StatusKind = 'payment' | 'verification';
export type StatusRow = { id: string; status: 'running' | 'success' | 'error'; view: StatusKind | null; idempotency_key: string | null; view_status: string | null; hosted_url: string | null; view_events: { event_type: string; received_at: string }[]; position: string };

type ViewEvent = { event_type: string; received_at: string };
export type PaymentStatusView = { tool_call_id: string; payment_status: 'pending' | 'succeeded' | 'failed' | 'refunded' | 'updated' | 'unknown'; original_status: StatusRow['status']; idempotency_key: string | null; events: ViewEvent[] };
export type VerificationStatusView = { tool_call_id: string; verification_status: 'pending' | 'approved' | 'rejected' | 'expired' | 'review' | 'unknown'; original_status: StatusRow['status']; idempotency_key: string | null; hosted_url: string | null; events: ViewEvent[] };

/** The status row of one tool call of the tenant, or undefined. */
export async function readStatusRow(ports: Pick<Ports, 'db'>, t: Tenant, id: string): Promise<StatusRow | undefined> {
  const { rows } = await ports.db.query<StatusRow>(
    'SELECT id, status, view, idempotency_key, view_status, hosted_url, view_events, position FROM tool_calls WHERE id = $1 AND org_id = $2 AND project_id = $3',
    [id, t.orgId, t.projectId],
  );
  return rows[0];
}

/** The payment or verification view of a call; `unknown` (key null) when the call opened no such view. */
export function statusView(kind: StatusKind, r: StatusRow): PaymentStatusView | VerificationStatusView {
  const mine = r.view === kind;
  const events = mine ? r.view_events.map((e) => ({ event_type: e.event_type, received_at: e.received_at })) : [];
  const status = (mine ? r.view_status : null) ?? 'unknown';
  const key = mine ? r.idempotency_key : null;
  return kind === 'payment'
    ? { tool_call_id: r.id, payment_status: status as 'unknown', original_status: r.status, idempotency_key: status === 'unknown' ? null : key, events }
    : { tool_call_id: r.id, verification_status: status as 'unknown', original_status: r.status, idempotency_key: status === 'unknown' ? null : key, hosted_url: mine ? r.hosted_url : null, events };
}
