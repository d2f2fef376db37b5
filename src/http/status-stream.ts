import { PassThrough } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { watchStatus } from '../usecases/status-stream.ts';
import { readStatusRow } from '../usecases/tool-calls.ts';
import { defineRoute, type AppDeps } from './kernel/route.ts';
import { tenantOf } from './kernel/auth.ts';
import { notVisible, toolCallIdParam } from './kernel/errors.ts';

// Server-sent event streams of the payment and verification views (spec 6
// Streams, 8 Limits; the watch itself: src/usecases/status-stream.ts): each
// event as `event:`, `id:` and `data:` lines, `:` comments for the open and
// the heartbeats; a reconnect's Last-Event-ID resumes after the changes it saw.

export async function statusStreamRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  for (const kind of ['payment', 'verification'] as const) {
    defineRoute(app, deps, {
      method: 'GET',
      url: `/v1/tool-calls/:id/${kind}-status/stream`,
      operationId: kind === 'payment' ? 'streamToolCallPaymentStatus' : 'streamToolCallVerificationStatus',
      summary: `Server-sent events of the ${kind} view: snapshot, update per change, done; Last-Event-ID resumes`,
      tags: ['tool-calls'],
      auth: 'key_or_service',
      scope: 'sessions:read',
      params: z.object({ id: z.string() }), // any length: a malformed id is the bare 400
      responses: { 200: null },
      errors: [[400, 'invalid_tool_call_id'], [401, 'unauthorized'], [404, 'not_found']],
      async handler(ctx) {
        const id = toolCallIdParam(ctx.params.id);
        const tenant = await tenantOf(ctx);
        if (!(await readStatusRow(ctx.deps, tenant, id))) throw notVisible();
        const h = ctx.req.headers['last-event-id'];
        const m = typeof h === 'string' ? /^(\d{1,9})/.exec(h) : null;
        const out = new PassThrough();
        const stop = watchStatus(ctx.deps, tenant, id, kind, m ? Number(m[1]) : null, {
          event: (name, evId, data) => out.write(`event: ${name}\nid: ${evId}\ndata: ${JSON.stringify(data)}\n\n`),
          comment: (text) => out.write(`: ${text}\n\n`),
          end: () => out.end(),
        });
        ctx.reply.raw.on('close', stop);
        return { status: 200, body: out, headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' } };
      },
    });
  }
}
