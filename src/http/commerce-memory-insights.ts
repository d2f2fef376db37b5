import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { type Negotiation, negotiationDecider, type NegotiationState, negotiationStream, discountBps } from '../../commands/commerce-memory.ts';
import { CounterpartyKind, NegotiationOutcome } from '../../events/commerce-memory.ts';
import { counterpartySummary, negotiationStats, topCounterparties, type Window } from '../../projections/commerce-memory-insights.ts';
import { ApiError } from './errors.ts';
import { ExactInt } from './exact-json.ts';
import { newId } from './ids.ts';
import { type AppDeps, defineRoute } from './route.ts';
import { AmountMinor, Currency, Instant, Limit, Metadata, orderedWindow } from './commerce-memory-schemas.ts';
import { requireCounterparty } from '../usecases/commerce-memory.ts';
import { IdParam, Timestamp, isoText as TS } from './schemas.ts';
import type { ApiKeyAuth } from './auth.ts';

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
    kind: CounterpartyKind,
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
  .object({ counterparty_id: z.string(), name: z.string(), kind: CounterpartyKind, payment_count: z.int(), total_payment_minor: ExactInt })
  .meta({ id: 'TopCounterpartyRow' });
const StatsRow = z
  .object({ outcome: NegotiationOutcome, n: z.int(), currencies: z.array(z.string()), discount_sample_n: z.int(), avg_discount_bps: z.int().nullable() })
  .meta({ id: 'NegotiationStatsRow' });

const InsightQuery = z.object({ kind: CounterpartyKind.optional(), limit: Limit(20, 200), since: Instant.optional(), until: Instant.optional() }).superRefine(orderedWindow);

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
type NegotiationView = z.infer<typeof NegotiationView>;

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

const NG_COLUMNS = `id, counterparty_id, item_ref, outcome, currency, list_price_minor::text AS list_price_minor, final_price_minor::text AS final_price_minor, discount_bps::text AS discount_bps,
  ${TS('started_at')} AS started_at, ${TS('ended_at')} AS ended_at, metadata, ${TS('created_at')} AS created_at`;
type NegotiationRow = Omit<NegotiationView, 'list_price_minor' | 'final_price_minor' | 'discount_bps'> & { list_price_minor: string | null; final_price_minor: string | null; discount_bps: string | null };
const num = (v: string | null) => (v === null ? null : Number(v));
const negotiationRow = (r: NegotiationRow): NegotiationView => ({ ...r, list_price_minor: num(r.list_price_minor), final_price_minor: num(r.final_price_minor), discount_bps: num(r.discount_bps) });

function negotiationView(n: Negotiation): NegotiationView {
  const d = discountBps(n.list_price_minor === null ? null : BigInt(n.list_price_minor), n.final_price_minor === null ? null : BigInt(n.final_price_minor));
  return {
    id: n.negotiation_id,
    counterparty_id: n.counterparty_id,
    item_ref: n.item_ref,
    outcome: n.outcome,
    currency: n.currency,
    list_price_minor: num(n.list_price_minor),
    final_price_minor: num(n.final_price_minor),
    discount_bps: d === null ? null : Number(d),
    started_at: new Date(n.started_at).toISOString(),
    ended_at: n.ended_at === null ? null : new Date(n.ended_at).toISOString(),
    metadata: n.metadata,
    created_at: n.created_at,
  };
}

async function readNegotiation(deps: AppDeps, auth: ApiKeyAuth, id: string): Promise<NegotiationView | undefined> {
  const { rows } = await deps.db.query<NegotiationRow>(`SELECT ${NG_COLUMNS} FROM negotiations WHERE id = $1 AND org_id = $2 AND project_id = $3`, [id, auth.orgId, auth.projectId]);
  return rows[0] ? negotiationRow(rows[0]) : undefined;
}

const INSIGHT_ERRORS = [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden']] as const;

export async function commerceMemoryInsightRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
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
      const rows = await counterpartySummary(deps.db, { orgId: auth.orgId, projectId: auth.projectId, kind: query.kind, limit: query.limit }, w);
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
    responses: { 200: z.object({ kind: CounterpartyKind.nullable(), window: WindowView, rows: z.array(TopRow) }) },
    errors: INSIGHT_ERRORS,
    async handler({ auth, query, deps }) {
      const w = windowOf(query, deps.now());
      const rows = await topCounterparties(deps.db, { orgId: auth.orgId, projectId: auth.projectId, kind: query.kind, limit: query.limit }, w);
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
      const rows = await negotiationStats(deps.db, { orgId: auth.orgId, projectId: auth.projectId, itemRef: query.item_ref }, w);
      return { status: 200, body: { item_ref: query.item_ref ?? null, window: windowView(w), rows: rows as z.infer<typeof StatsRow>[] } };
    },
  });

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
      const cp = await requireCounterparty(deps, auth, body.counterparty_id);
      const id = newId('neg');
      const r = await run(
        negotiationDecider,
        negotiationStream(id),
        {
          type: 'record',
          negotiation: {
            negotiation_id: id,
            org_id: auth.orgId,
            project_id: auth.projectId,
            counterparty_id: cp.id,
            item_ref: body.item_ref,
            outcome: body.outcome,
            currency: body.currency ?? null,
            list_price_minor: body.list_price_minor == null ? null : String(body.list_price_minor),
            final_price_minor: body.final_price_minor == null ? null : String(body.final_price_minor),
            started_at: body.started_at ? body.started_at.toISOString() : null,
            ended_at: body.ended_at ? body.ended_at.toISOString() : null,
            metadata: body.metadata ?? {},
          },
        },
        { expectedRevision: 'no_stream' },
      );
      return { status: 201, body: negotiationView((r.state as Extract<NegotiationState, { status: 'exists' }>).n) };
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
      const params: unknown[] = [auth.orgId, auth.projectId, query.limit];
      let where = 'org_id = $1 AND project_id = $2';
      const add = (sql: string, v: unknown) => {
        params.push(v);
        where += ` AND ${sql.replace('?', `$${params.length}`)}`;
      };
      if (query.counterparty_id) add('counterparty_id = ?', query.counterparty_id);
      if (query.item_ref) add('item_ref = ?', query.item_ref);
      if (query.outcome) add('outcome = ?', query.outcome);
      if (query.since) add('started_at >= ?', query.since.toISOString());
      if (query.until) add('started_at < ?', query.until.toISOString());
      const { rows } = await deps.db.query<NegotiationRow>(`SELECT ${NG_COLUMNS} FROM negotiations WHERE ${where} ORDER BY started_at DESC, id DESC LIMIT $3`, params);
      return { status: 200, body: { negotiations: rows.map(negotiationRow) } };
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
      const n = await readNegotiation(deps, auth, params.id);
      if (!n) throw new ApiError(404, 'not_found', 'negotiation not found');
      return { status: 200, body: n };
    },
  });
}
