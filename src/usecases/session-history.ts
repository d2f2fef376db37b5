import { Rejection } from '../eventstore/handler.ts';
import { isoText as TS } from '../postgres/iso-text.ts';
import type { Ports, Tenant } from './context.ts';
import { getSession, SESSION_COLUMNS, type SessionRecord } from './sessions.ts';

// The tenant's sessions as a list (newest first, filtered, paged by an opaque
// cursor) and one session's tool calls as log entries: what the product's
// command-line client reads (`sessions list`, `sessions show --logs`). Reads
// only; closing is sessions.ts's closeSession.

export type SessionListQuery = { status?: 'active' | 'closed' | undefined; user_id?: string | undefined; server?: string | undefined; cursor?: string | undefined; limit: number };

/** The position after a session in the list: its creation time and id, opaque to clients. */
const encodeCursor = (s: Pick<SessionRecord, 'created_at' | 'id'>) => Buffer.from(`${s.created_at}|${s.id}`).toString('base64url');
function decodeCursor(c: string): { at: string; id: string } {
  const [at, id, ...rest] = Buffer.from(c, 'base64url').toString('utf8').split('|');
  if (!at || !id || rest.length > 0 || Number.isNaN(Date.parse(at))) throw new Rejection('invalid_query', 'cursor is not one this service gave: pass next_cursor from the previous page, or omit it', { issues: [{ path: ['cursor'], code: 'invalid_cursor', message: 'unknown cursor' }] });
  return { at, id };
}

/** A page of the tenant's sessions, newest first, and the cursor of the next page (null on the last). */
export async function listSessions(ports: Pick<Ports, 'db'>, t: Tenant, q: SessionListQuery): Promise<{ sessions: SessionRecord[]; next_cursor: string | null }> {
  const params: unknown[] = [t.orgId, t.projectId, q.limit + 1];
  let where = 's.org_id = $1 AND s.project_id = $2';
  const add = (sql: string, v: unknown) => {
    params.push(v);
    where += ` AND ${sql.replaceAll('?', `$${params.length}`)}`;
  };
  if (q.status) add('s.status = ?', q.status);
  if (q.user_id) add('s.user_id = ?', q.user_id);
  if (q.server) add('s.servers @> jsonb_build_array(?::text)', q.server);
  if (q.cursor) {
    const c = decodeCursor(q.cursor);
    params.push(c.at, c.id);
    where += ` AND (s.created_at, s.id) < ($${params.length - 1}::timestamptz, $${params.length})`;
  }
  const { rows } = await ports.db.query<SessionRecord>(`SELECT ${SESSION_COLUMNS} FROM sessions s WHERE ${where} ORDER BY s.created_at DESC, s.id DESC LIMIT $3`, params);
  const more = rows.length > q.limit;
  const page = more ? rows.slice(0, q.limit) : rows;
  return { sessions: page, next_cursor: more ? encodeCursor(page[page.length - 1]!) : null };
}

/** A recorded tool call as a log line: bare tool name, its server, status, duration, time, and the error code of a failure. */
export type LogEntry = { id: string; session_id: string; tool: string; server: string; status: 'running' | 'success' | 'error'; duration_ms: number | null; called_at: string; error: string | null };

export const LOG_COLUMNS = `id, session_id, tool_name AS tool, server_id AS server, status, duration_ms, ${TS('called_at')} AS called_at, error_code AS error`;

/** One session's tool calls, oldest first (at most `limit`); another tenant's session answers not_found. */
export async function sessionLogs(ports: Pick<Ports, 'db'>, t: Tenant, id: string, limit: number): Promise<{ session_id: string; logs: LogEntry[] }> {
  const s = await getSession(ports, t, id);
  const { rows } = await ports.db.query<LogEntry>(`SELECT ${LOG_COLUMNS} FROM tool_calls WHERE org_id = $1 AND project_id = $2 AND session_id = $3 ORDER BY seq LIMIT $4`, [t.orgId, t.projectId, s.id, limit]);
  return { session_id: s.id, logs: rows };
}
