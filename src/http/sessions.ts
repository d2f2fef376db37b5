import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { executeTool, qualifyToolName, toolCallRejection, type ToolCallOutcome } from '../usecases/session-tools.ts';
import { activeSession, closeSession, createSession, getSession, sessionConnections, type SessionRecord } from '../usecases/sessions.ts';
import type { Tenant } from '../usecases/context.ts';
import { defineRoute, type AppDeps } from './kernel/route.ts';
import { IdParam, Timestamp } from './kernel/schemas.ts';
import { tenantOf } from './kernel/auth.ts';

// Sessions (spec 4.3, client 0.3 wire shape): POST /v1/sessions
// {"servers": [...], "user_id": "...", "mocks"?: {"<server>/<tool>": output}};
// read; close (DELETE); the attached providers with their connection state
// and tools; execute {"tool": "<server>/<tool>", "input": {...}}, answered as
// the client's tool result. A session is `active` until closed. Open sessions
// per organization are capped (403 {error: quota_exceeded, limit, current}).
// Test-mode mocks (spec 7, code at the top level): a live key sending `mocks`
// is 403 {code: mocks_not_permitted}; in a mocked session a tool without a
// mock is 422 {code: tool_not_mocked}. The use cases: src/usecases/sessions.ts
// and session-tools.ts.

const SESSION_STATUS = '`active` while its tools may be called; `closed` once closed (for good); `error` when it failed.';
const CONNECTED = z.boolean().describe('Whether the end user (or the project) holds a live connection to the provider; a provider without credentials counts as connected.');
const PROVIDER_STATUS = z.string().describe('The provider in the catalog: `active`, `beta` or `deprecated`.');
const SessionView = z
  .object({
    id: z.string(),
    object: z.literal('session'),
    user_id: z.string(),
    servers: z.array(z.string()),
    status: z.enum(['active', 'closed', 'error']).describe(SESSION_STATUS),
    environment: z.enum(['live', 'test']),
    created_at: Timestamp,
    closed_at: Timestamp.nullable(),
    tool_call_count: z.number().int().meta({ description: 'Tool calls recorded in this session' }),
    mcp: z
      .object({ url: z.string().describe("The session's MCP endpoint (`/v1/sessions/{id}/mcp`)."), headers: z.record(z.string(), z.string()).describe('The headers an MCP client sends with every request there (the credential among them).') })
      .describe('How an MCP client (Claude, an IDE) connects to the session.'),
  })
  .meta({ id: 'Session' });

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
    data: z.array(z.object({ id: z.string(), name: z.string(), category: z.string(), country: z.string(), auth_type: z.string(), connected: CONNECTED, tools_count: z.number().int(), status: PROVIDER_STATUS })),
    total: z.number().int().describe('How many providers the session has.'),
    session_id: z.string(),
    servers: z.array(z.object({ id: z.string(), name: z.string(), category: z.string(), country: z.string(), connected: CONNECTED, auth_type: z.string(), status: PROVIDER_STATUS })).describe('The same providers, in the product client\'s older shape.'),
    tools: z.array(z.object({ name: z.string(), server: z.string(), description: z.string(), input_schema: z.record(z.string(), z.unknown()) })).describe('The tools of the session\'s providers, as the session calls them.'),
  })
  .meta({ id: 'SessionConnections' });

/** The tool result of a call that reached its tool; anything else (a call never recorded, a refused input, no connection, a policy) is the error it was. */
function toolResultOf(o: ToolCallOutcome): z.infer<typeof ToolResult> {
  if (o.ok) return { success: true, data: o.output ?? null, error: null, duration: o.duration_ms, server: o.server_id, tool: o.tool_name, tool_call_id: o.id, called_at: o.called_at };
  if (!o.id || !o.ran) throw toolCallRejection(o);
  const e = o.error;
  const words = 'detail' in e && e.detail ? `${e.message}: ${e.detail}` : e.message;
  return { success: false, data: null, error: `${e.code}: ${words}`, duration: o.duration_ms, server: o.server_id, tool: o.tool_name, tool_call_id: o.id, called_at: o.called_at };
}

function view(deps: AppDeps, r: SessionRecord, t: Tenant): z.infer<typeof SessionView> {
  return {
    id: r.id,
    object: 'session',
    user_id: r.user_id,
    servers: r.servers,
    status: r.status as 'active' | 'closed' | 'error',
    environment: r.environment,
    created_at: r.created_at,
    closed_at: r.closed_at,
    tool_call_count: r.tool_call_count,
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

export async function sessionRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  lifecycleRoutes(app, deps);
  toolRoutes(app, deps);
}

/** Open, read and close a session. */
function lifecycleRoutes(app: FastifyInstance, deps: AppDeps): void {
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
      const tenant = await tenantOf(ctx);
      // The project's environment (test and live are two worlds): a key's is its project's.
      const environment = ctx.auth.environment ?? 'test';
      const s = await createSession(ctx.deps, ctx.run.bind(ctx), tenant, { servers: ctx.body.servers, userId: ctx.body.user_id, environment, mocks: ctx.body.mocks });
      return { status: 201, body: view(ctx.deps, s, tenant) };
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
      const tenant = await tenantOf(ctx);
      return { status: 200, body: view(ctx.deps, await getSession(ctx.deps, tenant, ctx.params.id), tenant) };
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
      const tenant = await tenantOf(ctx);
      return { status: 200, body: view(ctx.deps, await closeSession(ctx.deps, ctx.run.bind(ctx), tenant, ctx.params.id), tenant) };
    },
  });
}

/** The session's providers and tools, and executing one. */
function toolRoutes(app: FastifyInstance, deps: AppDeps): void {
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
      const { session, providers: data, tools } = await sessionConnections(ctx.deps, await tenantOf(ctx), ctx.params.id);
      const servers = data.map((d) => ({ id: d.id, name: d.name, category: d.category, country: d.country, connected: d.connected, auth_type: d.auth_type, status: d.status }));
      return { status: 200, body: { data, total: data.length, session_id: session.id, servers, tools } };
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
    body: z.object({
      tool: z.string().min(1).max(200).meta({ description: '"<server>/<tool>", or a bare tool name with `server` beside it (or the one attached server that has it)' }),
      server: Slug.optional(),
      input: z.record(z.string(), z.unknown()).default({}),
    }),
    responses: { 200: ToolResult },
    errors: [[400, 'invalid_body'], [400, 'invalid_input'], [401, 'unauthorized'], [403, 'forbidden'], [403, 'policy_denied'], [404, 'not_found'], [404, 'server_unknown'], [404, 'tool_unknown'], [409, 'session_closed'], [422, 'tool_not_mocked'], [424, 'not_connected']],
    async handler(ctx) {
      const s = await activeSession(ctx.deps, await tenantOf(ctx), ctx.params.id);
      const o = await executeTool(ctx.deps, ctx.run.bind(ctx), s, qualifyToolName(ctx.deps, s, ctx.body.tool, ctx.body.server), ctx.body.input);
      return { status: 200, body: toolResultOf(o) };
    },
  });
}
