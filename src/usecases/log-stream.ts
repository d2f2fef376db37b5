import type { Ports, Tenant } from './context.ts';
import { LOG_COLUMNS, type LogEntry } from './session-history.ts';
import { streamConfig, type StatusSink } from './status-stream.ts';

// The organization's tool calls, live (GET /v1/logs/stream, the product
// client's `logs tail`): each recorded call, and each later change of it
// (running → success or error), as a `log` event whose id is the log position
// the read model recorded it at. The watch polls the tool-call read model, fed
// from the log, with the status streams' clocks (src/usecases/status-stream.ts:
// heartbeat, hard close, poll interval), so a call made through any instance
// on the same database reaches every stream. Positions only grow in commit
// order (the projection writes under the log's order), so `position > last`
// misses nothing and repeats nothing; a reconnect's Last-Event-ID resumes
// after the position it saw. Without one, the last `limit` matching calls come
// first, then what follows.

export type LogFilter = { server?: string | undefined; tool?: string | undefined; status?: 'running' | 'success' | 'error' | undefined };
export type LogStreamEntry = LogEntry & { position: string };

/** Bounds one poll's page: a stream far behind catches up over several polls. */
const PAGE = 500;

function where(t: Tenant, f: LogFilter, after: string | null): { sql: string; params: unknown[] } {
  const params: unknown[] = [t.orgId, t.projectId];
  let sql = 'org_id = $1 AND project_id = $2';
  const add = (cond: string, v: unknown) => {
    params.push(v);
    sql += ` AND ${cond.replace('?', `$${params.length}`)}`;
  };
  if (f.server) add('server_id = ?', f.server);
  if (f.tool) add('tool_name = ?', f.tool);
  if (f.status) add('status = ?', f.status);
  if (after !== null) add('position > ?', after);
  return { sql, params };
}

/** Calls changed after a position, in log order (at most a page). */
export async function logsAfter(ports: Pick<Ports, 'db'>, t: Tenant, f: LogFilter, after: string | null): Promise<LogStreamEntry[]> {
  const w = where(t, f, after);
  const { rows } = await ports.db.query<LogStreamEntry>(`SELECT ${LOG_COLUMNS}, position FROM tool_calls WHERE ${w.sql} ORDER BY position LIMIT ${PAGE}`, w.params);
  return rows;
}

/** The position to follow from (the newest of the tenant's calls; '' when none), and the last `limit` matching calls up to it, in log order. */
async function backlog(ports: Pick<Ports, 'db'>, t: Tenant, f: LogFilter, limit: number): Promise<{ rows: LogStreamEntry[]; from: string }> {
  const head = await ports.db.query<{ p: string | null }>('SELECT max(position) AS p FROM tool_calls WHERE org_id = $1 AND project_id = $2', [t.orgId, t.projectId]);
  const from = head.rows[0]?.p ?? '';
  if (limit === 0 || from === '') return { rows: [], from };
  const w = where(t, f, null);
  w.params.push(from);
  const { rows } = await ports.db.query<LogStreamEntry>(`SELECT ${LOG_COLUMNS}, position FROM tool_calls WHERE ${w.sql} AND position <= $${w.params.length} ORDER BY position DESC LIMIT ${Math.min(limit, PAGE)}`, w.params);
  return { rows: rows.reverse(), from };
}

/** Watches the tenant's calls until the client leaves or the hard close; answers the function that stops it. */
export function watchLogs(ports: Pick<Ports, 'db'>, t: Tenant, f: LogFilter, start: { lastEventId: string | null; limit: number }, sink: StatusSink): () => void {
  const { timers } = streamConfig;
  let after: string | null = start.lastEventId;
  let ended = false;
  const send = (e: LogStreamEntry) => {
    const { position, ...entry } = e;
    if (!ended) sink.event('log', position, entry);
    after = position;
  };
  const tick = async () => {
    if (after === null) {
      const b = await backlog(ports, t, f, start.limit);
      for (const e of b.rows) send(e);
      after = b.from;
      return;
    }
    const rows = await logsAfter(ports, t, f, after);
    for (const e of rows) send(e);
  };
  let busy = false;
  const poll = () => {
    if (busy || ended) return;
    busy = true;
    void tick()
      .catch(() => {}) // the next poll tries again
      .finally(() => (busy = false));
  };
  const poller = setInterval(poll, streamConfig.pollMs);
  const beat = timers.setInterval(() => !ended && sink.comment('heartbeat'), streamConfig.heartbeatMs);
  const hard = timers.setTimeout(() => end(), streamConfig.maxMs);
  function end() {
    if (ended) return;
    ended = true;
    clearInterval(poller);
    timers.clearInterval(beat);
    timers.clearTimeout(hard);
    sink.end();
  }
  sink.comment('open');
  poll();
  return end;
}
