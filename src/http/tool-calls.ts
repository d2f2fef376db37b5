import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Tenant } from '../../commands/consumer.ts';
import { RawHttpError } from './errors.ts';
import { defineRoute, type AppDeps } from './route.ts';
import { Instant, Timestamp, isoText as TS } from './schemas.ts';
import { readToolCall, tenantOf, ToolCallView } from './sessions.ts';

// Tool calls (spec 2 Tool call, 4.3): the list (before, since, limit,
// count_only → {count}), one call, and its payment and verification status
// views. `{id}` is `tc_<digits>` or bare digits; a malformed id answers 400 and
// an id not visible to the caller 404, each with a bare body (no error.code,
// no request_id: spec Part 7).

export const TOOL_CALL_LIST_MAX = 200;

/** `tc_<digits>` or bare digits → the canonical id; undefined when malformed. */
export function canonicalToolCallId(raw: string): string | undefined {
  const m = /^(?:tc_)?(\d{1,30})$/.exec(raw);
  return m ? `tc_${m[1]}` : undefined;
}
export const malformedId = () => new RawHttpError(400, { error: 'invalid_tool_call_id', message: 'the id must be tc_<digits> or digits' });
export const notVisible = () => new RawHttpError(404, { error: 'not_found', message: 'tool call not found' });

const ViewEvent = z.object({ event_type: z.string(), received_at: Timestamp });
export const PaymentView = z.object({
  tool_call_id: z.string(),
  payment_status: z.enum(['pending', 'succeeded', 'failed', 'refunded', 'updated', 'unknown']),
  original_status: z.enum(['running', 'success', 'error']),
  idempotency_key: z.string().nullable(),
  events: z.array(ViewEvent),
});
export const VerificationView = z.object({
  tool_call_id: z.string(),
  verification_status: z.enum(['pending', 'approved', 'rejected', 'expired', 'review', 'unknown']),
  original_status: z.enum(['running', 'success', 'error']),
  idempotency_key: z.string().nullable(),
  hosted_url: z.string().nullable(),
  events: z.array(ViewEvent),
});
export type StatusKind = 'payment' | 'verification';
type ViewRow = { id: string; status: 'running' | 'success' | 'error'; view: StatusKind | null; idempotency_key: string | null; view_status: string | null; hosted_url: string | null; view_events: { event_type: string; received_at: string }[]; position: string };

export async function readStatusRow(deps: Pick<AppDeps, 'db'>, t: Tenant, id: string): Promise<ViewRow | undefined> {
  const { rows } = await deps.db.query<ViewRow>(
    'SELECT id, status, view, idempotency_key, view_status, hosted_url, view_events, position FROM tool_calls WHERE id = $1 AND org_id = $2 AND project_id = $3',
    [id, t.orgId, t.projectId],
  );
  return rows[0];
}

/** The payment or verification view of a call; `unknown` (key null) when the call opened no such view. */
export function statusView(kind: StatusKind, r: ViewRow): z.infer<typeof PaymentView> | z.infer<typeof VerificationView> {
  const mine = r.view === kind;
  const events = mine ? r.view_events.map((e) => ({ event_type: e.event_type, received_at: e.received_at })) : [];
  const status = (mine ? r.view_status : null) ?? 'unknown';
  const key = mine ? r.idempotency_key : null;
  return kind === 'payment'
    ? { tool_call_id: r.id, payment_status: status as 'unknown', original_status: r.status, idempotency_key: status === 'unknown' ? null : key, events }
    : { tool_call_id: r.id, verification_status: status as 'unknown', original_status: r.status, idempotency_key: status === 'unknown' ? null : key, hosted_url: mine ? r.hosted_url : null, events };
}

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
      const { query, deps } = ctx;
      const t = await tenantOf(ctx as never);
      const params: unknown[] = [t.orgId, t.projectId];
      let where = 'org_id = $1 AND project_id = $2';
      if (query.since) {
        params.push(query.since.toISOString());
        where += ` AND called_at >= $${params.length}`;
      }
      if (query.before) {
        const id = canonicalToolCallId(query.before);
        if (!id) return { status: 200, body: query.count_only === 'true' ? { count: 0 } : { tool_calls: [] } };
        params.push(id);
        where += ` AND seq < coalesce((SELECT seq FROM tool_calls WHERE id = $${params.length} AND org_id = $1 AND project_id = $2), 0)`;
      }
      if (query.count_only === 'true') {
        const { rows } = await deps.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM tool_calls WHERE ${where}`, params);
        return { status: 200, body: { count: rows[0]!.n } };
      }
      params.push(query.limit);
      const { rows } = await deps.db.query<z.infer<typeof ToolCallView>>(
        `SELECT id, session_id, server_id, tool_name, status, ${TS('called_at')} AS called_at, duration_ms, error_code, input, output, routing, failover_trail
         FROM tool_calls WHERE ${where} ORDER BY seq DESC LIMIT $${params.length}`,
        params,
      );
      return { status: 200, body: { tool_calls: rows } };
    },
  });

  // Any length: a malformed id answers the bare 400 (spec 4.3), not a schema error.
  const IdParams = z.object({ id: z.string() });
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
      const id = canonicalToolCallId(ctx.params.id);
      if (!id) throw malformedId();
      const r = await readToolCall(ctx.deps, await tenantOf(ctx as never), id);
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
        const id = canonicalToolCallId(ctx.params.id);
        if (!id) throw malformedId();
        const r = await readStatusRow(ctx.deps, await tenantOf(ctx as never), id);
        if (!r) throw notVisible();
        return { status: 200, body: statusView(kind, r) };
      },
    });
  }
}
