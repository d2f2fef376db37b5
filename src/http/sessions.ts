import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { sessionDecider, sessionQuotaDecider, sessionQuotaStream, sessionStream } from '../../commands/session.ts';
import type { Tenant } from '../../commands/consumer.ts';
import { Rejection } from '../eventstore/handler.ts';
import type { ApiKeyAuth, ServiceAuth } from './auth.ts';
import { ApiError, projectResolutionFailed, RawHttpError } from './errors.ts';
import { newId } from './ids.ts';
import { defineRoute, type AppDeps, type Ctx } from './route.ts';
import { IdParam, Timestamp, isoText as TS } from './schemas.ts';
import { executeTool, toolCallError, type SessionRow, type ToolCallOutcome } from './tool-exec.ts';
import { registerApprovalExecutor } from './approvals.ts';

// Sessions (spec 4.3, client 0.3 wire shape): POST /v1/sessions
// {"servers": [...], "user_id": "...", "mocks"?: {"<server>/<tool>": output}};
// read; close (DELETE); the attached providers with their connection state
// and tools; execute {"tool": "<server>/<tool>", "input": {...}}, answered as
// the client's tool result. A session is `active` until closed. Open sessions
// per organization are capped (403 {error: quota_exceeded, limit, current}).
// Test-mode mocks (spec 7, code at the top level): a live key sending `mocks`
// is 403 {code: mocks_not_permitted}; in a mocked session a tool without a
// mock is 422 {code: tool_not_mocked}.


const SessionView = z
  .object({
    id: z.string(),
    object: z.literal('session'),
    user_id: z.string(),
    servers: z.array(z.string()),
    status: z.enum(['active', 'closed', 'error']),
    environment: z.enum(['live', 'test']),
    created_at: Timestamp,
    closed_at: Timestamp.nullable(),
    mcp: z.object({ url: z.string(), headers: z.record(z.string(), z.string()) }),
  })
  .meta({ id: 'Session' });
type Row = SessionRow & { created_at: string; closed_at: string | null };

export const ToolCallView = z
  .object({
    id: z.string(),
    session_id: z.string(),
    server_id: z.string(),
    tool_name: z.string(),
    status: z.enum(['running', 'success', 'error']),
    called_at: Timestamp,
    duration_ms: z.number().int().nullable(),
    error_code: z.string().nullable(),
    input: z.unknown().optional(),
    output: z.unknown().optional(),
    routing: z.unknown().optional(),
    failover_trail: z.unknown().optional(),
  })
  .meta({ id: 'ToolCall' });

/** What execute answers (the product client's tool result). */
export const ToolResult = z
  .object({
    success: z.boolean(),
    data: z.unknown().meta({ description: "The provider's output, or null" }),
    error: z.string().nullable().meta({ description: 'null on success; else "<code>: <the provider\'s words>"' }),
    duration: z.number().int().meta({ description: 'milliseconds' }),
    server: z.string(),
    tool: z.string(),
    tool_call_id: z.string(),
    called_at: Timestamp,
  })
  .meta({ id: 'ToolResult' });

const SessionConnections = z
  .object({
    data: z.array(z.object({ id: z.string(), name: z.string(), category: z.string(), country: z.string(), auth_type: z.string(), connected: z.boolean(), tools_count: z.number().int(), status: z.string() })),
    total: z.number().int(),
    session_id: z.string(),
    servers: z.array(z.object({ id: z.string(), name: z.string(), connected: z.boolean(), auth_type: z.string(), status: z.string() })),
    tools: z.array(z.object({ name: z.string(), server: z.string(), description: z.string(), input_schema: z.record(z.string(), z.unknown()) })),
  })
  .meta({ id: 'SessionConnections' });

/** The tool result of a call that reached its tool; anything else (a call never recorded, a refused input, no connection, a policy) is the error it was. */
function toolResultOf(o: ToolCallOutcome): z.infer<typeof ToolResult> {
  if (o.ok) return { success: true, data: o.output ?? null, error: null, duration: o.duration_ms, server: o.server_id, tool: o.tool_name, tool_call_id: o.id, called_at: o.called_at };
  if (!o.id || !o.ran) throw toolCallError(o);
  const e = o.error;
  const words = 'detail' in e && e.detail ? `${e.message}: ${e.detail}` : e.message;
  return { success: false, data: null, error: `${e.code}: ${words}`, duration: o.duration_ms, server: o.server_id, tool: o.tool_name, tool_call_id: o.id, called_at: o.called_at };
}

/** The organization and project of a key, or of a service call (both resolved by the authenticator: x-svc-project, else the default project). */
export async function tenantOf(ctx: Ctx<unknown, unknown, unknown, ApiKeyAuth | ServiceAuth>): Promise<Tenant> {
  const { auth } = ctx;
  if (auth.kind === 'api_key') return { orgId: auth.orgId, projectId: auth.projectId };
  if (!auth.projectId) throw projectResolutionFailed();
  return { orgId: auth.orgId, projectId: auth.projectId };
}

const notFound = () => new ApiError(404, 'not_found', 'session not found');

export async function readSession(deps: AppDeps, t: Tenant, id: string): Promise<Row | undefined> {
  const { rows } = await deps.db.query<Row>(
    `SELECT id, org_id, project_id, user_id, servers, environment, status, mocks, ${TS('created_at')} AS created_at, ${TS('closed_at')} AS closed_at FROM sessions WHERE id = $1 AND org_id = $2 AND project_id = $3`,
    [id, t.orgId, t.projectId],
  );
  return rows[0];
}

function view(deps: AppDeps, r: Row, t: Tenant): z.infer<typeof SessionView> {
  return {
    id: r.id,
    object: 'session',
    user_id: r.user_id,
    servers: r.servers,
    status: r.status as 'active' | 'closed' | 'error',
    environment: r.environment,
    created_at: r.created_at,
    closed_at: r.closed_at,
    mcp: { url: `${deps.baseUrl}/v1/sessions/${r.id}/mcp`, headers: { 'x-svc-project': t.projectId } },
  };
}

const UserId = z.string().min(1).max(128).regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces');
const Slug = z.string().min(1).max(64);
const SessionParams = z.object({ id: IdParam });
/** At most this many mocked tools in a session. */
const MOCKS_MAX = 200;
const Mocks = z
  .record(z.string().min(3).max(200), z.unknown())
  .refine((m) => Object.keys(m).length <= MOCKS_MAX, `at most ${MOCKS_MAX} mocked tools`)
  .meta({ description: 'Test keys only: "<server>/<tool>" → the output that tool returns in this session without calling the provider; a tool without a mock then answers 422 tool_not_mocked' });

/** The mocks of a new session, checked against its servers and the catalog (400 naming the member), or undefined. */
function checkMocks(deps: AppDeps, servers: string[], mocks: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (mocks === undefined || Object.keys(mocks).length === 0) return undefined;
  for (const key of Object.keys(mocks)) {
    const i = key.indexOf('/');
    const server = i > 0 ? key.slice(0, i) : '';
    const tool = i > 0 ? key.slice(i + 1) : '';
    const bad = (message: string) => new ApiError(400, 'invalid_body', message, { issues: [{ path: ['mocks', key], code: 'invalid_key', message }] });
    if (!server || !tool) throw bad('a mock is named "<server>/<tool>"');
    if (!servers.includes(server)) throw bad(`${server} is not attached to this session`);
    if (!deps.providers.resolveTool(server, tool)) throw bad(`${server} has no tool ${tool} in the catalog`);
  }
  return mocks;
}

// An approved provider tool call runs in its session with the held input, verbatim.
registerApprovalExecutor('*/', async (a, deps, run) => {
  if (!a.session_id || !a.project_id) throw new ApiError(409, 'session_closed', 'the held call has no session');
  const s = await readSession(deps, { orgId: a.org_id, projectId: a.project_id }, a.session_id);
  if (!s || s.status !== 'active') throw new ApiError(409, 'session_closed', 'the session of the held call is closed');
  const o = await executeTool(deps, run, s, a.tool_name, a.tool_input, a.decided_by ?? 'approval');
  if (!o.ok) throw toolCallError(o);
  return { tool_call_id: o.id, output: (o.output ?? null) as unknown, duration_ms: o.duration_ms };
});

export async function sessionRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/sessions',
    operationId: 'createSession',
    summary: 'Open a session for an end user with the providers to attach (x-svc-project selects the project)',
    tags: ['sessions'],
    auth: 'key_or_service',
    scope: 'sessions:write',
    body: z.object({ servers: z.array(Slug).max(50), user_id: UserId, mocks: Mocks.optional() }),
    responses: { 201: SessionView },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [403, 'quota_exceeded'], [403, 'mocks_not_permitted'], [404, 'server_unknown']],
    async handler(ctx) {
      const { body, deps } = ctx;
      const tenant = await tenantOf(ctx as never);
      const environment = ctx.auth.kind === 'api_key' ? ctx.auth.environment : 'test';
      if (body.mocks !== undefined && environment === 'live') throw new RawHttpError(403, { code: 'mocks_not_permitted', message: 'mocks are for test keys; a live key always calls the provider' });
      const servers = [...new Set(body.servers)];
      for (const s of servers) if (!deps.providers.runtime.catalog.get(s)) throw new ApiError(404, 'server_unknown', `no provider ${s} in the catalog`, { server_id: s });
      const mocks = checkMocks(deps, servers, body.mocks);
      const id = newId('ses');
      const limit = deps.sessionQuota;
      try {
        await ctx.run(sessionQuotaDecider, sessionQuotaStream(tenant.orgId), { type: 'claim', sessionId: id, limit }, { serialize: true, projectId: tenant.projectId });
      } catch (err) {
        if (err instanceof Rejection && err.code === 'quota_exceeded') throw new RawHttpError(403, { error: 'quota_exceeded', message: err.message, ...err.details });
        throw err;
      }
      try {
        await ctx.run(sessionDecider, sessionStream(id), { type: 'create', data: { session_id: id, org_id: tenant.orgId, project_id: tenant.projectId, user_id: body.user_id, servers, environment, ...(mocks ? { mocks } : {}), created_at: deps.now().toISOString() } }, { expectedRevision: 'no_stream', projectId: tenant.projectId });
      } catch (err) {
        // Give the quota slot back: no session holds it.
        await ctx.run(sessionQuotaDecider, sessionQuotaStream(tenant.orgId), { type: 'release', sessionId: id }, { serialize: true, projectId: tenant.projectId }).catch(() => {});
        throw err;
      }
      return { status: 201, body: view(deps, (await readSession(deps, tenant, id))!, tenant) };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/sessions/:id',
    operationId: 'getSession',
    summary: 'A session',
    tags: ['sessions'],
    auth: 'key_or_service',
    scope: 'sessions:read',
    params: SessionParams,
    responses: { 200: SessionView },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler(ctx) {
      const tenant = await tenantOf(ctx as never);
      const r = await readSession(ctx.deps, tenant, ctx.params.id);
      if (!r) throw notFound();
      return { status: 200, body: view(ctx.deps, r, tenant) };
    },
  });

  defineRoute(app, deps, {
    method: 'DELETE',
    url: '/v1/sessions/:id',
    operationId: 'closeSession',
    summary: 'Close a session (its tools can no longer be called); closing twice is a no-op',
    tags: ['sessions'],
    auth: 'key_or_service',
    scope: 'sessions:write',
    params: SessionParams,
    responses: { 200: SessionView },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler(ctx) {
      const tenant = await tenantOf(ctx as never);
      if (!(await readSession(ctx.deps, tenant, ctx.params.id))) throw notFound();
      await ctx.run(sessionDecider, sessionStream(ctx.params.id), { type: 'close', tenant }, { serialize: true, projectId: tenant.projectId });
      await ctx.run(sessionQuotaDecider, sessionQuotaStream(tenant.orgId), { type: 'release', sessionId: ctx.params.id }, { serialize: true, projectId: tenant.projectId });
      return { status: 200, body: view(ctx.deps, (await readSession(ctx.deps, tenant, ctx.params.id))!, tenant) };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/sessions/:id/connections',
    operationId: 'listSessionConnections',
    summary: "The session's providers and whether the end user (or the project) holds a live connection to each (spec 4.3 data/total/session_id), and the same as the client reads it: servers and tools",
    tags: ['sessions'],
    auth: 'key_or_service',
    scope: 'sessions:read',
    params: SessionParams,
    responses: { 200: SessionConnections },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler(ctx) {
      const tenant = await tenantOf(ctx as never);
      const s = await readSession(ctx.deps, tenant, ctx.params.id);
      if (!s) throw notFound();
      const data = [];
      const tools = [];
      for (const id of s.servers) {
        const p = ctx.deps.providers.runtime.catalog.get(id);
        if (!p) continue;
        const connected = p.auth_type === 'none' || (await ctx.deps.providers.findConnection(tenant, p.id, s.user_id)) !== undefined;
        data.push({ id: p.id, name: p.name, category: p.category, country: p.country, auth_type: p.auth_type, connected, tools_count: p.tools.length, status: p.status });
        for (const tl of p.tools) tools.push({ name: tl.name, server: p.id, description: tl.description, input_schema: tl.input_schema as Record<string, unknown> });
      }
      const servers = data.map((d) => ({ id: d.id, name: d.name, connected: d.connected, auth_type: d.auth_type, status: d.status }));
      return { status: 200, body: { data, total: data.length, session_id: s.id, servers, tools } };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/sessions/:id/execute',
    operationId: 'executeSessionTool',
    summary:
      'Execute one tool of the session ("<server>/<tool>") with the end user\'s connection; the call is recorded (tc_<digits>, full record at GET /v1/tool-calls/{id}). A tool that ran and failed answers 200 with success false and error "<code>: <the provider\'s words>"; the 4xx are for requests that never reached a tool',
    tags: ['sessions'],
    auth: 'key_or_service',
    scope: 'sessions:write',
    params: SessionParams,
    body: z.object({ tool: z.string().min(3).max(200), input: z.record(z.string(), z.unknown()).default({}) }),
    responses: { 200: ToolResult },
    errors: [[400, 'invalid_body'], [400, 'invalid_input'], [401, 'unauthorized'], [403, 'forbidden'], [403, 'policy_denied'], [404, 'not_found'], [404, 'server_unknown'], [404, 'tool_unknown'], [409, 'session_closed'], [422, 'tool_not_mocked'], [424, 'not_connected']],
    async handler(ctx) {
      const tenant = await tenantOf(ctx as never);
      const s = await readSession(ctx.deps, tenant, ctx.params.id);
      if (!s) throw notFound();
      if (s.status !== 'active') throw new ApiError(409, 'session_closed', 'the session is closed');
      const o = await executeTool(ctx.deps, ctx.run.bind(ctx), s, ctx.body.tool, ctx.body.input);
      return { status: 200, body: toolResultOf(o) };
    },
  });
}

export async function readToolCall(deps: AppDeps, t: Tenant, id: string): Promise<z.infer<typeof ToolCallView> | undefined> {
  const { rows } = await deps.db.query<z.infer<typeof ToolCallView>>(
    `SELECT id, session_id, server_id, tool_name, status, ${TS('called_at')} AS called_at, duration_ms, error_code, input, output, routing, failover_trail
     FROM tool_calls WHERE id = $1 AND org_id = $2 AND project_id = $3`,
    [id, t.orgId, t.projectId],
  );
  return rows[0];
}
