import { sessionDecider, sessionQuotaDecider, sessionQuotaStream, sessionStream } from '../../commands/session.ts';
import { Rejection } from '../eventstore/handler.ts';
import { newId } from '../ids.ts';
import { isoText as TS } from '../postgres/iso-text.ts';
import type { Ports, RunCommand, Tenant } from './context.ts';

// Sessions (spec 4.3): open one for an end user with the providers to attach
// (test-mode mocks checked against them and the catalog), read it, close it,
// and the attached providers with their connection state and tools. Open
// sessions per organization are capped (the quota stream's `quota_exceeded`).

/** A session as tool execution reads it. */
export type SessionRow = { id: string; org_id: string; project_id: string; user_id: string; servers: string[]; environment: 'live' | 'test'; status: string; mocks?: Record<string, unknown> | null };
/** A session as the API shows it. */
export type SessionRecord = SessionRow & { created_at: string; closed_at: string | null; tool_call_count: number };

/** The columns of a session as the API shows it, `s` the sessions table (its recorded tool calls counted). */
export const SESSION_COLUMNS = `s.id, s.org_id, s.project_id, s.user_id, s.servers, s.environment, s.status, s.mocks, ${TS('s.created_at')} AS created_at, ${TS('s.closed_at')} AS closed_at,
  (SELECT count(*)::int FROM tool_calls c WHERE c.org_id = s.org_id AND c.project_id = s.project_id AND c.session_id = s.id) AS tool_call_count`;

/** One session of the tenant, or undefined. */
export async function readSession(ports: Pick<Ports, 'db'>, t: Tenant, id: string): Promise<SessionRecord | undefined> {
  const { rows } = await ports.db.query<SessionRecord>(`SELECT ${SESSION_COLUMNS} FROM sessions s WHERE s.id = $1 AND s.org_id = $2 AND s.project_id = $3`, [id, t.orgId, t.projectId]);
  return rows[0];
}

/** One session of the tenant, or the rejection `not_found`. */
export async function getSession(ports: Pick<Ports, 'db'>, t: Tenant, id: string): Promise<SessionRecord> {
  const s = await readSession(ports, t, id);
  if (!s) throw new Rejection('not_found', 'session not found');
  return s;
}

/** A session whose tools may be called: `not_found`, else `session_closed` when it is not active. */
export async function activeSession(ports: Pick<Ports, 'db'>, t: Tenant, id: string): Promise<SessionRecord> {
  const s = await getSession(ports, t, id);
  if (s.status !== 'active') throw new Rejection('session_closed', 'the session is closed');
  return s;
}

/** The session of a held call (approval execution), active, or `session_closed`. */
export async function heldCallSession(ports: Pick<Ports, 'db'>, call: { org_id: string; project_id: string | null; session_id: string | null }): Promise<SessionRecord> {
  if (!call.session_id || !call.project_id) throw new Rejection('session_closed', 'the held call has no session');
  const s = await readSession(ports, { orgId: call.org_id, projectId: call.project_id }, call.session_id);
  if (!s || s.status !== 'active') throw new Rejection('session_closed', 'the session of the held call is closed');
  return s;
}

/** The mocks of a new session, checked against its servers and the catalog (`invalid_body` naming the member), or undefined. */
function checkMocks(ports: Pick<Ports, 'providers'>, servers: string[], mocks: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (mocks === undefined || Object.keys(mocks).length === 0) return undefined;
  for (const key of Object.keys(mocks)) {
    const i = key.indexOf('/');
    const server = i > 0 ? key.slice(0, i) : '';
    const tool = i > 0 ? key.slice(i + 1) : '';
    const bad = (message: string) => new Rejection('invalid_body', message, { issues: [{ path: ['mocks', key], code: 'invalid_key', message }] });
    if (!server || !tool) throw bad('a mock is named "<server>/<tool>"');
    if (!servers.includes(server)) throw bad(`${server} is not attached to this session`);
    if (!ports.providers.resolveTool(server, tool)) throw bad(`${server} has no tool ${tool} in the catalog`);
  }
  return mocks;
}

export type NewSession = { servers: string[]; userId: string; environment: 'live' | 'test'; mocks?: Record<string, unknown> | undefined };

/**
 * Opens a session: mocks only for test keys (`mocks_not_permitted`), every
 * server in the catalog (`server_unknown`), a slot of the organization's
 * quota claimed first (`quota_exceeded`) and given back when the session
 * cannot be created.
 */
export async function createSession(ports: Ports, run: RunCommand, tenant: Tenant, input: NewSession): Promise<SessionRecord> {
  if (input.mocks !== undefined && input.environment === 'live') throw new Rejection('mocks_not_permitted', 'mocks are for test keys; a live key always calls the provider');
  const servers = [...new Set(input.servers)];
  for (const s of servers) if (!ports.providers.runtime.catalog.get(s)) throw new Rejection('server_unknown', `no provider ${s} in the catalog`, { server_id: s });
  const mocks = checkMocks(ports, servers, input.mocks);
  const id = newId('ses');
  await run(sessionQuotaDecider, sessionQuotaStream(tenant.orgId), { type: 'claim', sessionId: id, limit: ports.sessionQuota }, { serialize: true, projectId: tenant.projectId });
  try {
    await run(
      sessionDecider,
      sessionStream(id),
      { type: 'create', data: { session_id: id, org_id: tenant.orgId, project_id: tenant.projectId, user_id: input.userId, servers, environment: input.environment, ...(mocks ? { mocks } : {}), created_at: ports.now().toISOString() } },
      { expectedRevision: 'no_stream', projectId: tenant.projectId },
    );
  } catch (err) {
    // Give the quota slot back: no session holds it.
    await run(sessionQuotaDecider, sessionQuotaStream(tenant.orgId), { type: 'release', sessionId: id }, { serialize: true, projectId: tenant.projectId }).catch(() => {});
    throw err;
  }
  return (await readSession(ports, tenant, id))!;
}

/** Closes a session and gives its quota slot back; closing twice is a no-op. */
export async function closeSession(ports: Ports, run: RunCommand, tenant: Tenant, id: string): Promise<SessionRecord> {
  await getSession(ports, tenant, id);
  await run(sessionDecider, sessionStream(id), { type: 'close', tenant }, { serialize: true, projectId: tenant.projectId });
  await run(sessionQuotaDecider, sessionQuotaStream(tenant.orgId), { type: 'release', sessionId: id }, { serialize: true, projectId: tenant.projectId });
  return (await readSession(ports, tenant, id))!;
}

export type SessionProvider = { id: string; name: string; category: string; country: string; auth_type: string; connected: boolean; tools_count: number; status: string };
export type SessionTool = { name: string; server: string; description: string; input_schema: Record<string, unknown> };

/** The session's providers, whether the end user (or the project) holds a live connection to each, and their tools. */
export async function sessionConnections(ports: Pick<Ports, 'db' | 'providers'>, tenant: Tenant, id: string): Promise<{ session: SessionRecord; providers: SessionProvider[]; tools: SessionTool[] }> {
  const s = await getSession(ports, tenant, id);
  const providers: SessionProvider[] = [];
  const tools: SessionTool[] = [];
  for (const sid of s.servers) {
    const p = ports.providers.runtime.catalog.get(sid);
    if (!p) continue;
    const connected = p.auth_type === 'none' || (await ports.providers.findConnection(tenant, p.id, s.user_id)) !== undefined;
    providers.push({ id: p.id, name: p.name, category: p.category, country: p.country, auth_type: p.auth_type, connected, tools_count: p.tools.length, status: p.status });
    for (const tl of p.tools) tools.push({ name: tl.name, server: p.id, description: tl.description, input_schema: tl.input_schema as Record<string, unknown> });
  }
  return { session: s, providers, tools };
}
