import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { CounterpartyKind, NegotiationOutcome } from '../../../events/commerce-memory.ts';
import type { Window } from '../../../projections/commerce-memory-insights.ts';
import { ApiError } from '../kernel/errors.ts';
import { ExactInt } from '../kernel/exact-json.ts';
import { type AppDeps, defineRoute } from '../kernel/route.ts';
import { AmountMinor, CounterpartyKindField, Currency, Instant, Limit, Metadata, orderedWindow } from './commerce-memory-schemas.ts';
import { getNegotiation, insightNegotiationStats, insightSummary, insightTopCounterparties, listNegotiations, recordNegotiation } from '../../usecases/commerce-memory-insights.ts';
import { IdParam, Timestamp } from '../kernel/schemas.ts';

// Commerce memory insights (spec 4.8), answered from the bucket read models,
// and the negotiations resource they count (negotiation-stats).

/** Without since/until an insight covers the 90 days up to now. */
export const DEFAULT_WINDOW_DAYS = 90;

const WindowView = z.object({ since: Timestamp, until: Timestamp }).meta({ id: 'InsightWindow' });

function windowOf(q: { since?: Date | undefined; until?: Date | undefined }, now: Date): Window {
  const until = q.until ?? (q.since && q.since >= now ? new Date(q.since.getTime() + DEFAULT_WINDOW_DAYS * 86_400_000) : now);
  const since = q.since ?? new Date(until.getTime() - DEFAULT_WINDOW_DAYS * 86_400_000);
  if (since >= until) throw new ApiError(400, 'invalid_query', 'the query is invalid', { issues: [{ path: ['since'], code: 'custom', message: 'since must be before until' }] });
  return { since, until };
}
const windowView = (w: Window) => ({ since: w.since.toISOString(), until: w.until.toISOString() });

const SummaryRow = z
  .object({
    counterparty_id: z.string(),
    name: z.string(),
    kind: CounterpartyKindField,
    identifier_kind: z.string().nullable(),
    last_seen_at: Timestamp,
    interaction_count: z.int(),
    payment_count: z.int(),
    // A sum of amounts up to 10^15 each: an exact integer of any size.
    total_payment_minor: ExactInt,
    currencies: z.array(z.string()),
  })
  .meta({ id: 'CounterpartySummaryRow' });
const TopRow = z
  .object({ counterparty_id: z.string(), name: z.string(), kind: CounterpartyKindField, payment_count: z.int(), total_payment_minor: ExactInt })
  .meta({ id: 'TopCounterpartyRow' });
const StatsRow = z
  .object({ outcome: NegotiationOutcome, n: z.int(), currencies: z.array(z.string()), discount_sample_n: z.int(), avg_discount_bps: z.int().nullable() })
  .meta({ id: 'NegotiationStatsRow' });

const InsightQuery = z.object({ kind: CounterpartyKindField.optional(), limit: Limit(20, 200), since: Instant.optional(), until: Instant.optional() }).superRefine(orderedWindow);

export const NegotiationView = z
  .object({
    id: z.string(),
    counterparty_id: z.string(),
    item_ref: z.string(),
    outcome: NegotiationOutcome,
    currency: z.string().nullable(),
    list_price_minor: z.int().nullable(),
    final_price_minor: z.int().nullable(),
    discount_bps: z.int().nullable(),
    started_at: Timestamp,
    ended_at: Timestamp.nullable(),
    metadata: z.record(z.string(), z.unknown()),
    created_at: Timestamp,
  })
  .meta({ id: 'Negotiation' });
const NegotiationBody = z
  .object({
    counterparty_id: z.string().min(1).max(200),
    item_ref: z.string().trim().min(1).max(200),
    outcome: NegotiationOutcome,
    currency: Currency.nullable().optional(),
    list_price_minor: AmountMinor.nullable().optional(),
    final_price_minor: AmountMinor.nullable().optional(),
    started_at: Instant.optional(),
    ended_at: Instant.nullable().optional(),
    metadata: Metadata.optional(),
  })
  .superRefine((b, ctx) => {
    const priced = (b.list_price_minor ?? null) !== null || (b.final_price_minor ?? null) !== null;
    if (priced && !b.currency) ctx.addIssue({ code: 'custom', path: ['currency'], message: 'a price needs its currency' });
    if (b.ended_at && b.started_at && b.ended_at < b.started_at) ctx.addIssue({ code: 'custom', path: ['ended_at'], message: 'ended_at must not be before started_at' });
  });

const NegotiationQuery = z
  .object({
    counterparty_id: z.string().min(1).max(200).optional(),
    item_ref: z.string().min(1).max(200).optional(),
    outcome: NegotiationOutcome.optional(),
    limit: Limit(50, 200),
    since: Instant.optional(),
    until: Instant.optional(),
  })
  .superRefine(orderedWindow);

const INSIGHT_ERRORS = [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden']] as const;

/** The insights over the bucket read models. */
function insightRoutes(app: FastifyInstance, deps: AppDeps): void {
  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/commerce-memory/insights/counterparty-summary',
    operationId: 'insightCounterpartySummary',
    summary: `Per counterparty with interactions in [since, until) on occurred_at (default: the ${DEFAULT_WINDOW_DAYS} days up to now): counts, payment total, currencies; most interactions first`,
    tags: ['commerce-memory'],
    auth: 'api_key',
    scope: 'commerce_memory:read',
    query: InsightQuery,
    responses: { 200: z.object({ window: WindowView, rows: z.array(SummaryRow) }) },
    errors: INSIGHT_ERRORS,
    async handler({ auth, query, deps }) {
      const w = windowOf(query, deps.now());
      const rows = await insightSummary(deps, auth, query, w);
      return { status: 200, body: { window: windowView(w), rows } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/commerce-memory/insights/top-counterparties',
    operationId: 'insightTopCounterparties',
    summary: `Counterparties with payments in [since, until) (default: the ${DEFAULT_WINDOW_DAYS} days up to now), by payment count then total`,
    tags: ['commerce-memory'],
    auth: 'api_key',
    scope: 'commerce_memory:read',
    query: InsightQuery,
    responses: { 200: z.object({ kind: CounterpartyKind.nullable().describe('The kind the rows were filtered by; null when all kinds.'), window: WindowView, rows: z.array(TopRow) }) },
    errors: INSIGHT_ERRORS,
    async handler({ auth, query, deps }) {
      const w = windowOf(query, deps.now());
      const rows = await insightTopCounterparties(deps, auth, query, w);
      return { status: 200, body: { kind: query.kind ?? null, window: windowView(w), rows } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/commerce-memory/insights/negotiation-stats',
    operationId: 'insightNegotiationStats',
    summary: `Negotiations started in [since, until) (default: the ${DEFAULT_WINDOW_DAYS} days up to now), per outcome, optionally of one item_ref`,
    tags: ['commerce-memory'],
    auth: 'api_key',
    scope: 'commerce_memory:read',
    query: z.object({ item_ref: z.string().min(1).max(200).optional(), since: Instant.optional(), until: Instant.optional() }).superRefine(orderedWindow),
    responses: { 200: z.object({ item_ref: z.string().nullable(), window: WindowView, rows: z.array(StatsRow) }) },
    errors: INSIGHT_ERRORS,
    async handler({ auth, query, deps }) {
      const w = windowOf(query, deps.now());
      const rows = await insightNegotiationStats(deps, auth, query.item_ref, w);
      return { status: 200, body: { item_ref: query.item_ref ?? null, window: windowView(w), rows: rows as z.infer<typeof StatsRow>[] } };
    },
  });

}

/** The negotiations resource negotiation-stats counts. */
function negotiationRoutes(app: FastifyInstance, deps: AppDeps): void {
  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/commerce-memory/negotiations',
    operationId: 'createNegotiation',
    summary: 'Record a negotiation over an item with a counterparty: outcome, list and final price; negotiation-stats counts these',
    tags: ['commerce-memory'],
    auth: 'api_key',
    scope: 'commerce_memory:write',
    body: NegotiationBody,
    responses: { 201: NegotiationView },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'counterparty_not_found']],
    idempotent: true,
    async handler({ auth, body, run, deps }) {
      return { status: 201, body: await recordNegotiation(deps, run, auth, body) };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/commerce-memory/negotiations',
    operationId: 'listNegotiations',
    summary: 'List negotiations, newest started first; since inclusive, until exclusive, on started_at',
    tags: ['commerce-memory'],
    auth: 'api_key',
    scope: 'commerce_memory:read',
    query: NegotiationQuery,
    responses: { 200: z.object({ negotiations: z.array(NegotiationView) }) },
    errors: [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden']],
    async handler({ auth, query, deps }) {
      return { status: 200, body: { negotiations: await listNegotiations(deps, auth, query) } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/commerce-memory/negotiations/:id',
    operationId: 'getNegotiation',
    summary: "Read a negotiation (another project's is absent)",
    tags: ['commerce-memory'],
    auth: 'api_key',
    scope: 'commerce_memory:read',
    params: z.object({ id: IdParam }),
    responses: { 200: NegotiationView },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler({ auth, params, deps }) {
      const n = await getNegotiation(deps, auth, params.id);
      return { status: 200, body: n };
    },
  });
}

export async function commerceMemoryInsightRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  insightRoutes(app, deps);
  negotiationRoutes(app, deps);
}
