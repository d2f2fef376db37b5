import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { listToolCalls, readStatusRow, readToolCall, statusView } from '../usecases/tool-calls.ts';
import { defineRoute, type AppDeps } from './kernel/route.ts';
import { Instant, Timestamp } from './kernel/schemas.ts';
import { tenantOf } from './kernel/auth.ts';
import { notVisible, toolCallIdParam } from './kernel/errors.ts';

// Tool calls (spec 2 Tool call, 4.3): the list (before, since, limit,
// count_only → {count}), one call, and its payment and verification status
// views. `{id}` is `tc_<digits>` or bare digits; a malformed id answers 400 and
// an id not visible to the caller 404, each with a bare body (no error.code,
// no request_id: spec Part 7).

export const TOOL_CALL_LIST_MAX = 200;

export const ToolCallView = z
  .object({
    id: z.string(),
    session_id: z.string(),
    server_id: z.string(),
    tool_name: z.string(),
    status: z.enum(['running', 'success', 'error']).describe('`running` until the provider answers, then `success` or `error` (`error_code` says which).'),
    called_at: Timestamp,
    duration_ms: z.number().int().nullable(),
    error_code: z.string().nullable(),
    input: z.unknown().optional(),
    output: z.unknown().optional(),
    routing: z.unknown().optional(),
    failover_trail: z.unknown().optional(),
  })
  .meta({ id: 'ToolCall' });

const ViewEvent = z.object({ event_type: z.string(), received_at: Timestamp });
export const PaymentView = z.object({
  tool_call_id: z.string(),
  payment_status: z.enum(['pending', 'succeeded', 'failed', 'refunded', 'updated', 'unknown']),
  original_status: z.enum(['running', 'success', 'error']),
  idempotency_key: z.string().nullable(),
  events: z.array(ViewEvent).describe("The provider's webhook events about this call, in the order received."),
});
export const VerificationView = z.object({
  tool_call_id: z.string(),
  verification_status: z.enum(['pending', 'approved', 'rejected', 'expired', 'review', 'unknown']),
  original_status: z.enum(['running', 'success', 'error']),
  idempotency_key: z.string().nullable(),
  hosted_url: z.string().nullable(),
  events: z.array(ViewEvent).describe("The provider's webhook events about this call, in the order received."),
});

// Any length: a malformed id answers the bare 400 (spec 4.3), not a schema error.
const IdParams = z.object({ id: z.string() });

export async function toolCallRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/tool-calls',
    operationId: 'listToolCalls',
    summary: 'Tool calls of the project, newest first; before (a tool call id) pages back, since (date-time) bounds; count_only=true answers {count}',
    tags: ['tool-calls'],
    auth: 'key_or_service',
    scope: 'sessions:read',
    query: z.object({
      before: z.string().max(40).optional(),
      since: Instant.optional(),
      limit: z.coerce.number().int().min(1).max(TOOL_CALL_LIST_MAX).default(50),
      count_only: z.enum(['true', 'false']).default('false'),
    }),
    responses: { 200: z.union([z.object({ tool_calls: z.array(ToolCallView) }), z.object({ count: z.number().int() })]) },
    errors: [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden']],
    async handler(ctx) {
      const { query } = ctx;
      const t = await tenantOf(ctx);
      const q = { before: query.before, since: query.since, limit: query.limit };
      if (query.count_only === 'true') return { status: 200, body: { count: await listToolCalls(ctx.deps, t, q, true) } };
      return { status: 200, body: { tool_calls: await listToolCalls(ctx.deps, t, q) } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/tool-calls/:id',
    operationId: 'getToolCall',
    summary: 'One tool call (tc_<digits> or bare digits)',
    tags: ['tool-calls'],
    auth: 'key_or_service',
    scope: 'sessions:read',
    params: IdParams,
    responses: { 200: ToolCallView },
    errors: [[400, 'invalid_tool_call_id'], [401, 'unauthorized'], [404, 'not_found']],
    async handler(ctx) {
      const id = toolCallIdParam(ctx.params.id);
      const r = await readToolCall(ctx.deps, await tenantOf(ctx), id);
      if (!r) throw notVisible();
      return { status: 200, body: r };
    },
  });

  for (const kind of ['payment', 'verification'] as const) {
    defineRoute(app, deps, {
      method: 'GET',
      url: `/v1/tool-calls/:id/${kind}-status`,
      operationId: kind === 'payment' ? 'getToolCallPaymentStatus' : 'getToolCallVerificationStatus',
      summary: `The ${kind} status view of a tool call`,
      tags: ['tool-calls'],
      auth: 'key_or_service',
      scope: 'sessions:read',
      params: IdParams,
      responses: { 200: kind === 'payment' ? PaymentView : VerificationView },
      errors: [[400, 'invalid_tool_call_id'], [401, 'unauthorized'], [404, 'not_found']],
      async handler(ctx) {
        const id = toolCallIdParam(ctx.params.id);
        const r = await readStatusRow(ctx.deps, await tenantOf(ctx), id);
        if (!r) throw notVisible();
        return { status: 200, body: statusView(kind, r) };
      },
    });
  }
}
