import { isoText as TS } from '../postgres/iso-text.ts';
import type { ConnectionRow } from './connections.ts';
import type { Ports, Tenant } from './context.ts';
import type { ToolCallRecord } from './tool-calls.ts';

// What a person reads of connections and tool calls beyond the API's lists,
// each growing by cursor: the project's connections (newest first, after
// (created_at, id): index (org_id, project_id, created_at)), and tool calls
// of the project or of one session (newest first, before a seq: indexes
// (org_id, project_id, seq) and (session_id, seq) of the session projection).

export type Cursor<T> = { rows: T[]; next: string | null };

const CONNECTION_COLUMNS = `id, user_id, server_id, auth_type, status, display_name, metadata, connection_metadata, cert_metadata, ${TS('created_at')} AS created_at,
  ${TS('connected_at')} AS connected_at, ${TS('revoked_at')} AS revoked_at, ${TS('expires_at')} AS expires_at`;

const encode = (s: string) => Buffer.from(s).toString('base64url');
const decode = (s: string) => Buffer.from(s, 'base64url').toString('utf8');

/** The project's connections, newest first; `after` is the cursor the previous page gave (a malformed one gives an empty page). */
export async function connectionPage(ports: Pick<Ports, 'db'>, t: Tenant, q: { after?: string | undefined; limit: number }): Promise<Cursor<ConnectionRow>> {
  const params: unknown[] = [t.orgId, t.projectId, q.limit];
  let where = 'org_id = $1 AND project_id = $2';
  if (q.after !== undefined) {
    const [at, id, ...rest] = decode(q.after).split('|');
    if (!at || !id || rest.length > 0 || Number.isNaN(Date.parse(at))) return { rows: [], next: null };
    params.push(at, id);
    where += ' AND (connections.created_at, connections.id) < ($4::timestamptz, $5)';
  }
  const { rows } = await ports.db.query<ConnectionRow>(`SELECT ${CONNECTION_COLUMNS} FROM connections WHERE ${where} ORDER BY connections.created_at DESC, connections.id DESC LIMIT $3`, params);
  const last = rows[rows.length - 1];
  return { rows, next: rows.length === q.limit && last ? encode(`${last.created_at}|${last.id}`) : null };
}

export type CallRow = Pick<ToolCallRecord, 'id' | 'session_id' | 'server_id' | 'tool_name' | 'status' | 'called_at' | 'duration_ms' | 'error_code'> & { view: 'payment' | 'verification' | null; view_status: string | null };

const CALL_COLUMNS = `id, session_id, server_id, tool_name, status, ${TS('called_at')} AS called_at, duration_ms, error_code, view, view_status, seq::text AS seq`;

/** Tool calls of the project (or of one session), newest first; `before` is the cursor the previous page gave. */
export async function toolCallPage(ports: Pick<Ports, 'db'>, t: Tenant, q: { sessionId?: string | undefined; before?: string | undefined; limit: number }): Promise<Cursor<CallRow>> {
  const params: unknown[] = [t.orgId, t.projectId, q.limit];
  let where = 'org_id = $1 AND project_id = $2';
  if (q.sessionId !== undefined) {
    params.push(q.sessionId);
    where += ` AND session_id = $${params.length}`;
  }
  if (q.before !== undefined) {
    if (!/^\d{1,19}$/.test(q.before)) return { rows: [], next: null };
    params.push(q.before);
    where += ` AND seq < $${params.length}::bigint`;
  }
  const { rows } = await ports.db.query<CallRow & { seq: string }>(`SELECT ${CALL_COLUMNS} FROM tool_calls WHERE ${where} ORDER BY tool_calls.seq DESC LIMIT $3`, params);
  const last = rows[rows.length - 1];
  return { rows: rows.map(({ seq: _seq, ...r }) => r), next: rows.length === q.limit && last ? last.seq : null };
}
