import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { listSessions, sessionLogs } from '../usecases/session-history.ts';
import { closeSession, type SessionRecord } from '../usecases/sessions.ts';
import { defineRoute, type AppDeps } from './kernel/route.ts';
import { IdParam, Timestamp } from './kernel/schemas.ts';
import { tenantOf } from './kernel/auth.ts';

// Sessions as the product's command-line client reads them (issue 58):
// `sessions list` (GET /v1/sessions {data, next_cursor}), `sessions close`
// (POST /v1/sessions/{id}/close, the same as DELETE /v1/sessions/{id}) and
// `sessions show --logs` (GET /v1/sessions/{id}/logs {data}). The use cases:
// src/usecases/session-history.ts and sessions.ts.

export const SessionSummary = z
  .object({
    id: z.string(),
    object: z.literal('session'),
    user_id: z.string(),
    servers: z.array(z.string()),
    status: z.enum(['active', 'closed', 'error']).describe('`active` while its tools may be called; `closed` once closed (for good); `error` when it failed.'),
    environment: z.enum(['live', 'test']),
    created_at: Timestamp,
    closed_at: Timestamp.nullable(),
    tool_call_count: z.number().int(),
  })
  .meta({ id: 'SessionSummary' });

export const LogEntry = z
  .object({
    id: z.string().meta({ description: 'The tool call id (tc_<digits>)' }),
    session_id: z.string(),
    tool: z.string().meta({ description: 'The bare tool name' }),
    server: z.string(),
    status: z.enum(['running', 'success', 'error']).describe('`running` until the provider answers, then `success` or `error`.'),
    duration_ms: z.number().int().nullable(),
    called_at: Timestamp,
    error: z.string().nullable().meta({ description: "A failure's error code; null otherwise" }),
  })
  .meta({ id: 'ToolCallLogEntry' });

const summary = (r: SessionRecord): z.infer<typeof SessionSummary> => ({
  id: r.id,
  object: 'session',
  user_id: r.user_id,
  servers: r.servers,
  status: r.status as 'active' | 'closed' | 'error',
  environment: r.environment,
  created_at: r.created_at,
  closed_at: r.closed_at,
  tool_call_count: r.tool_call_count,
});

const Limit = (max: number, dflt: number) => z.coerce.number().int().min(1).max(max).default(dflt);

export async function sessionHistoryRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/sessions',
    operationId: 'listSessions',
    summary: "The project's sessions, newest first; filter by status, user_id and server; page with next_cursor",
    tags: ['sessions'],
    auth: 'key_or_service',
    scope: 'sessions:read',
    query: z.object({
      status: z.enum(['active', 'closed']).optional(),
      user_id: z.string().min(1).max(128).optional(),
      server: z.string().min(1).max(64).optional(),
      cursor: z.string().min(1).max(400).optional(),
      limit: Limit(100, 20),
    }),
    responses: { 200: z.object({ data: z.array(SessionSummary), next_cursor: z.string().nullable(), has_more: z.boolean() }) },
    errors: [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden']],
    async handler(ctx) {
      const r = await listSessions(ctx.deps, await tenantOf(ctx), ctx.query);
      return { status: 200, body: { data: r.sessions.map(summary), next_cursor: r.next_cursor, has_more: r.next_cursor !== null } };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/sessions/:id/close',
    operationId: 'closeSessionByPost',
    summary: 'Close a session (the same as DELETE /v1/sessions/{id}); closing twice is a no-op',
    tags: ['sessions'],
    auth: 'key_or_service',
    scope: 'sessions:write',
    params: z.object({ id: IdParam }),
    bodyOptional: true,
    body: z.object({}).strict(),
    responses: { 200: SessionSummary },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    idempotent: true,
    async handler(ctx) {
      return { status: 200, body: summary(await closeSession(ctx.deps, ctx.run.bind(ctx), await tenantOf(ctx), ctx.params.id)) };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/sessions/:id/logs',
    operationId: 'listSessionLogs',
    summary: "The session's tool calls as log entries, oldest first",
    tags: ['sessions'],
    auth: 'key_or_service',
    scope: 'sessions:read',
    params: z.object({ id: IdParam }),
    query: z.object({ limit: Limit(1000, 200) }),
    responses: { 200: z.object({ data: z.array(LogEntry), session_id: z.string() }) },
    errors: [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler(ctx) {
      const r = await sessionLogs(ctx.deps, await tenantOf(ctx), ctx.params.id, ctx.query.limit);
      return { status: 200, body: { data: r.logs, session_id: r.session_id } };
    },
  });
}
