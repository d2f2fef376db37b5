import type { Queryable } from '../src/postgres/db.ts';

// The insight queries over the read models of projections/commerce-memory.ts.
//
// A window [since, until) is cut into: whole UTC months (monthly buckets),
// whole UTC days outside those months (daily buckets), and the partial days at
// either end (raw rows, through the (org, project, time) index). So the cost
// of an insight grows with the number of counterparties (or outcomes) and
// months/days touched, not with the number of interactions in the window.

const DAY_MS = 86_400_000;

export type Window = { since: Date; until: Date };
export type WindowParts = {
  /** Half-open ranges answered from raw rows. */
  raw: [Date, Date][];
  /** Half-open ranges of whole days, as YYYY-MM-DD, answered from daily buckets. */
  days: [string, string][];
  /** A half-open range of whole months, as YYYY-MM-01, answered from monthly buckets. */
  months: [string, string] | null;
};

const ymd = (d: Date) => d.toISOString().slice(0, 10);
const floorDay = (d: Date) => new Date(Math.floor(d.getTime() / DAY_MS) * DAY_MS);
const ceilDay = (d: Date) => new Date(Math.ceil(d.getTime() / DAY_MS) * DAY_MS);
const floorMonth = (d: Date) => new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1));
const ceilMonth = (d: Date) => {
  const f = floorMonth(d);
  return f.getTime() === d.getTime() ? f : new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1));
};

export function splitWindow({ since, until }: Window): WindowParts {
  const d0 = ceilDay(since);
  const d1 = floorDay(until);
  if (d0 >= d1) return { raw: since < until ? [[since, until]] : [], days: [], months: null };
  const raw: [Date, Date][] = [];
  if (since < d0) raw.push([since, d0]);
  if (d1 < until) raw.push([d1, until]);
  const m0 = ceilMonth(d0);
  const m1 = floorMonth(d1);
  if (m0 >= m1) return { raw, days: [[ymd(d0), ymd(d1)]], months: null };
  const days: [string, string][] = [];
  if (d0 < m0) days.push([ymd(d0), ymd(m0)]);
  if (m1 < d1) days.push([ymd(m1), ymd(d1)]);
  return { raw, days, months: [ymd(m0), ymd(m1)] };
}

/**
 * The UNION ALL of bucket and raw pieces of a window, each piece with the
 * given columns. `where` filters both (on columns they share); `only` adds a
 * filter for bucket rows and one for raw rows.
 */
function pieces(
  params: unknown[],
  w: Window,
  tables: { daily: string; monthly: string; raw: string; rawTime: string },
  cols: { bucket: string; raw: string },
  where: string,
  only: { bucket: string; raw: string } = { bucket: 'true', raw: 'true' },
): string {
  const p = (v: unknown) => {
    params.push(v);
    return `$${params.length}`;
  };
  const parts = splitWindow(w);
  const sql: string[] = [];
  if (parts.months) sql.push(`SELECT ${cols.bucket} FROM ${tables.monthly} WHERE ${where} AND ${only.bucket} AND month >= ${p(parts.months[0])}::date AND month < ${p(parts.months[1])}::date`);
  for (const [a, b] of parts.days) sql.push(`SELECT ${cols.bucket} FROM ${tables.daily} WHERE ${where} AND ${only.bucket} AND day >= ${p(a)}::date AND day < ${p(b)}::date`);
  for (const [a, b] of parts.raw) sql.push(`SELECT ${cols.raw} FROM ${tables.raw} WHERE ${where} AND ${only.raw} AND ${tables.rawTime} >= ${p(a.toISOString())} AND ${tables.rawTime} < ${p(b.toISOString())}`);
  // An empty window still yields a well-typed, empty relation.
  if (sql.length === 0) sql.push(`SELECT ${cols.bucket} FROM ${tables.daily} WHERE false`);
  return sql.join('\n UNION ALL\n ');
}

const ISO = (c: string) => `to_char(${c} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
const ONE_CURRENCY = `CASE WHEN currency IS NULL THEN '{}'::text[] ELSE ARRAY[currency] END`;

const INTERACTION_TABLES = { daily: 'counterparty_daily', monthly: 'counterparty_monthly', raw: 'interactions', rawTime: 'occurred_at' };
const INTERACTION_COLS = {
  bucket: `counterparty_id, currencies, interaction_count AS n, payment_count AS p, payment_minor AS s`,
  raw: `counterparty_id, ${ONE_CURRENCY} AS currencies, 1::bigint AS n, (kind = 'payment')::int::bigint AS p, CASE WHEN kind = 'payment' THEN coalesce(amount_minor, 0) ELSE 0 END AS s`,
};

export type SummaryRow = {
  counterparty_id: string;
  name: string;
  kind: string;
  identifier_kind: string | null;
  last_seen_at: string;
  interaction_count: number;
  payment_count: number;
  /** Exact: a sum of amounts up to 10^15 each passes 2^53 (Postgres numeric, bigint here). */
  total_payment_minor: bigint;
  currencies: string[];
};

export type TopRow = { counterparty_id: string; name: string; kind: string; payment_count: number; total_payment_minor: bigint };

type Scope = { orgId: string; projectId: string; kind?: string | undefined; limit: number };

function scopeWhere(params: unknown[], s: Scope, kindColumn: string | null): string {
  params.push(s.orgId, s.projectId);
  let where = `org_id = $${params.length - 1} AND project_id = $${params.length}`;
  if (s.kind && kindColumn) {
    params.push(s.kind);
    where += ` AND ${kindColumn} = $${params.length}`;
  }
  return where;
}

/** counterparty-summary: the counterparties with interactions in the window, most interactions first. */
export async function counterpartySummary(db: Queryable, s: Scope, w: Window): Promise<SummaryRow[]> {
  const params: unknown[] = [];
  const where = scopeWhere(params, s, 'counterparty_kind');
  const union = pieces(params, w, INTERACTION_TABLES, INTERACTION_COLS, where);
  params.push(s.limit);
  const { rows } = await db.query<Omit<SummaryRow, 'interaction_count' | 'payment_count' | 'total_payment_minor'> & { interaction_count: string; payment_count: string; total_payment_minor: string }>(
    `WITH pieces AS MATERIALIZED (${union}),
     top AS (
       SELECT counterparty_id, sum(n) AS n, sum(p) AS p, sum(s) AS s FROM pieces GROUP BY counterparty_id
       ORDER BY sum(n) DESC, counterparty_id COLLATE "C" LIMIT $${params.length}
     ),
     cur AS (
       SELECT pieces.counterparty_id, array_agg(DISTINCT c) AS currencies
       FROM pieces JOIN top USING (counterparty_id) CROSS JOIN LATERAL unnest(pieces.currencies) AS c GROUP BY pieces.counterparty_id
     )
     SELECT c.id AS counterparty_id, c.name, c.kind, c.identifier_kind, ${ISO('c.last_seen_at')} AS last_seen_at,
       top.n::text AS interaction_count, top.p::text AS payment_count, top.s::text AS total_payment_minor, coalesce(cur.currencies, '{}') AS currencies
     FROM top JOIN counterparties c ON c.id = top.counterparty_id LEFT JOIN cur ON cur.counterparty_id = top.counterparty_id
     ORDER BY top.n DESC, c.id COLLATE "C"`,
    params,
  );
  return rows.map((r) => ({ ...r, interaction_count: Number(r.interaction_count), payment_count: Number(r.payment_count), total_payment_minor: BigInt(r.total_payment_minor), currencies: [...r.currencies].sort() }));
}

/** top-counterparties: the counterparties with payments in the window, by payment count, then total. */
export async function topCounterparties(db: Queryable, s: Scope, w: Window): Promise<TopRow[]> {
  const params: unknown[] = [];
  const where = scopeWhere(params, s, 'counterparty_kind');
  const union = pieces(params, w, INTERACTION_TABLES, INTERACTION_COLS, where, { bucket: 'payment_count > 0', raw: `kind = 'payment'` });
  params.push(s.limit);
  const { rows } = await db.query<Omit<TopRow, 'payment_count' | 'total_payment_minor'> & { payment_count: string; total_payment_minor: string }>(
    `WITH agg AS (
       SELECT counterparty_id, sum(p) AS p, sum(s) AS s FROM (${union}) AS pieces GROUP BY counterparty_id HAVING sum(p) > 0
     ), top AS (SELECT * FROM agg ORDER BY agg.p DESC, agg.s DESC, counterparty_id COLLATE "C" LIMIT $${params.length})
     SELECT c.id AS counterparty_id, c.name, c.kind, top.p::text AS payment_count, top.s::text AS total_payment_minor
     FROM top JOIN counterparties c ON c.id = top.counterparty_id
     ORDER BY top.p DESC, top.s DESC, c.id COLLATE "C"`,
    params,
  );
  return rows.map((r) => ({ ...r, payment_count: Number(r.payment_count), total_payment_minor: BigInt(r.total_payment_minor) }));
}

export type NegotiationStatsRow = { outcome: string; n: number; currencies: string[]; discount_sample_n: number; avg_discount_bps: number | null };

/** negotiation-stats: per outcome, negotiations started in the window (optionally of one item). */
export async function negotiationStats(db: Queryable, s: { orgId: string; projectId: string; itemRef?: string | undefined }, w: Window): Promise<NegotiationStatsRow[]> {
  const params: unknown[] = [s.orgId, s.projectId];
  let where = 'org_id = $1 AND project_id = $2';
  if (s.itemRef !== undefined) {
    params.push(s.itemRef);
    where += ` AND item_ref = $3`;
  }
  const union = pieces(params, w, { daily: 'negotiation_daily', monthly: 'negotiation_monthly', raw: 'negotiations', rawTime: 'started_at' }, {
    bucket: `outcome, currencies, n, discount_sample_n AS dn, discount_bps_sum AS ds`,
    raw: `outcome, ${ONE_CURRENCY} AS currencies, 1::bigint AS n, (discount_bps IS NOT NULL)::int::bigint AS dn, coalesce(discount_bps, 0)::numeric AS ds`,
  }, where);
  const { rows } = await db.query<{ outcome: string; n: string; dn: string; avg: string | null; currencies: string[] | null }>(
    `WITH pieces AS MATERIALIZED (${union}),
     agg AS (SELECT outcome, sum(n) AS n, sum(dn) AS dn, sum(ds) AS ds FROM pieces GROUP BY outcome HAVING sum(n) > 0),
     cur AS (SELECT outcome, array_agg(DISTINCT c) AS currencies FROM pieces CROSS JOIN LATERAL unnest(currencies) AS c GROUP BY outcome)
     SELECT agg.outcome, agg.n::text AS n, agg.dn::text AS dn, CASE WHEN agg.dn > 0 THEN round(agg.ds / agg.dn)::text END AS avg, cur.currencies
     FROM agg LEFT JOIN cur USING (outcome) ORDER BY agg.outcome COLLATE "C"`,
    params,
  );
  return rows.map((r) => ({ outcome: r.outcome, n: Number(r.n), currencies: [...(r.currencies ?? [])].sort(), discount_sample_n: Number(r.dn), avg_discount_bps: r.avg === null ? null : Number(r.avg) }));
}
