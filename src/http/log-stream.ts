import { PassThrough } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { watchLogs } from '../usecases/log-stream.ts';
import { defineRoute, type AppDeps } from './kernel/route.ts';
import { tenantOf } from './kernel/auth.ts';
import { Timestamp } from './kernel/schemas.ts';

// GET /v1/logs/stream: the project's tool calls live as server-sent events
// (the product client's `logs tail`), filtered by server, tool and status;
// each `log` event's id is a log position, and a reconnect's Last-Event-ID
// resumes after it. The watch: src/usecases/log-stream.ts.

const LogEvent = z
  .object({
    id: z.string(),
    session_id: z.string(),
    tool: z.string(),
    server: z.string(),
    status: z.enum(['running', 'success', 'error']).describe('`running` until the provider answers, then `success` or `error`.'),
    duration_ms: z.number().int().nullable(),
    called_at: Timestamp,
    error: z.string().nullable(),
  })
  .meta({ id: 'ToolCallLogEvent' });

/** A position this service gave as an event id (fixed-width, printable); anything else starts afresh. */
const POSITION = /^[0-9A-Za-z:._-]{1,64}$/;

export async function logStreamRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/logs/stream',
    operationId: 'streamToolCallLogs',
    summary: "Server-sent events of the project's tool calls (event `log`, one per call and per change of it); filters server, tool, status; limit past calls first; Last-Event-ID resumes",
    tags: ['tool-calls'],
    auth: 'key_or_service',
    scope: 'sessions:read',
    query: z.object({
      server: z.string().min(1).max(64).optional(),
      tool: z.string().min(1).max(64).optional(),
      status: z.enum(['running', 'success', 'error']).optional(),
      limit: z.coerce.number().int().min(0).max(500).default(0),
    }),
    responses: { 200: null },
    sse: LogEvent,
    errors: [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden']],
    async handler(ctx) {
      const tenant = await tenantOf(ctx);
      const h = ctx.req.headers['last-event-id'];
      const lastEventId = typeof h === 'string' && POSITION.test(h) ? h : null;
      const out = new PassThrough();
      const { limit, ...filter } = ctx.query;
      const stop = watchLogs(ctx.deps, tenant, filter, { lastEventId, limit }, {
        event: (name, id, data) => out.write(`event: ${name}\nid: ${id}\ndata: ${JSON.stringify(data)}\n\n`),
        comment: (text) => out.write(`: ${text}\n\n`),
        end: () => out.end(),
      });
      ctx.reply.raw.on('close', stop);
      return { status: 200, body: out, headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' } };
    },
  });
}
