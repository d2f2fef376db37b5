import { isoText as TS } from '../postgres/iso-text.ts';
import type { Ports, Tenant } from './context.ts';
import { AGENT_COLUMNS, type AgentView, withKeys } from './agents.ts';

// What a person browses of agents (the dashboard's Agents pages): the
// organization's agents a page at a time, and what one agent did in a
// project: the spend decisions on its mandates and the tool calls of its
// sessions (a session's user is the agent the policies see). Every list grows
// by a cursor (the last row's key), never by an offset, each over an index
// (projections/agent.ts, mandate.ts, session.ts).

/** A page of rows and the cursor of the next (older) page, null at the end. */
export type Page<T> = { rows: T[]; next: string | null };

/** A cursor of a (time, id) ordered list: "<iso>|<id>". */
export const timeCursor = (at: string, id: string) => `${at}|${id}`;
export function parseTimeCursor(raw: string | undefined): { at: string; id: string } | null {
  const m = raw ? /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)\|([A-Za-z0-9._:-]{1,200})$/.exec(raw) : null;
  return m ? { at: m[1]!, id: m[2]! } : null;
}

export function pageOf<T>(rows: T[], limit: number, cursor: (last: T) => string): Page<T> {
  const more = rows.length > limit;
  const kept = more ? rows.slice(0, limit) : rows;
  return { rows: kept, next: more ? cursor(kept[kept.length - 1]!) : null };
}

/** The organization's agents, newest first, with their keys. */
export async function browseAgents(ports: Pick<Ports, 'db'>, orgId: string, q: { before?: string | undefined; limit: number }): Promise<Page<AgentView>> {
  const c = parseTimeCursor(q.before);
  const params: unknown[] = [orgId, q.limit + 1];
  let where = 'org_id = $1';
  if (c) {
    params.push(c.at, c.id);
    where += ' AND (created_at, handle) < ($3::timestamptz, $4)';
  }
  const { rows } = await ports.db.query<Omit<AgentView, 'keys'>>(
    `SELECT ${AGENT_COLUMNS} FROM agents WHERE ${where} ORDER BY agents.created_at DESC, handle DESC LIMIT $2`,
    params,
  );
  const page = pageOf(rows, q.limit, (last) => timeCursor(last.created_at, last.agent_id));
  return { rows: await withKeys(ports, orgId, page.rows), next: page.next };
}

export type AgentSpend = { transaction_id: string; mandate_id: string; consumer_id: string; channel: string; amount_minor: string; currency: string; merchant: string; decision: 'approved' | 'declined'; code: string | null; at: string; position: string };

/** The spend decisions (approved and declined) on the agent's mandates in the project, newest first; the cursor is a log position. */
export async function agentSpends(ports: Pick<Ports, 'db'>, tenant: Tenant, handle: string, q: { before?: string | undefined; limit: number }): Promise<Page<AgentSpend>> {
  const params: unknown[] = [tenant.orgId, tenant.projectId, handle, q.limit + 1];
  let cursor = '';
  if (q.before && /^[0-9A-Za-z:._-]{1,80}$/.test(q.before)) {
    params.push(q.before);
    cursor = ' AND a.position < $5';
  }
  const { rows } = await ports.db.query<AgentSpend>(
    `SELECT a.transaction_id, a.mandate_id, m.consumer_id, a.channel, a.amount_minor::text, a.currency, a.merchant, a.decision, a.code, ${TS('a.at')} AS at, a.position
     FROM mandates m JOIN mandate_authorizations a ON a.mandate_id = m.id
     WHERE m.org_id = $1 AND m.project_id = $2 AND m.agent_id = $3${cursor}
     ORDER BY a.position DESC LIMIT $4`,
    params,
  );
  return pageOf(rows, q.limit, (last) => last.position);
}

export type AgentToolCall = { id: string; session_id: string; server_id: string; tool_name: string; status: 'running' | 'success' | 'error'; called_at: string; duration_ms: number | null; error_code: string | null; seq: string };

/** The tool calls of the agent's sessions in the project, newest first; the cursor is the call's sequence. */
export async function agentToolCalls(ports: Pick<Ports, 'db'>, tenant: Tenant, handle: string, q: { before?: string | undefined; limit: number }): Promise<Page<AgentToolCall>> {
  const params: unknown[] = [tenant.orgId, tenant.projectId, handle, q.limit + 1];
  let cursor = '';
  if (q.before && /^\d{1,19}$/.test(q.before)) {
    params.push(q.before);
    cursor = ' AND c.seq < $5';
  }
  const { rows } = await ports.db.query<AgentToolCall>(
    `SELECT c.id, c.session_id, c.server_id, c.tool_name, c.status, ${TS('c.called_at')} AS called_at, c.duration_ms, c.error_code, c.seq::text AS seq
     FROM sessions s JOIN tool_calls c ON c.session_id = s.id
     WHERE s.org_id = $1 AND s.project_id = $2 AND s.user_id = $3${cursor}
     ORDER BY c.seq DESC LIMIT $4`,
    params,
  );
  return pageOf(rows, q.limit, (last) => last.seq);
}
