import type { Queryable } from '../postgres/db.ts';
import type { KeyUsage } from './key-usage.ts';

// The Usage page's figures for one project of an organization: requests per
// UTC day and API key (api_key_usage_daily, src/usecases/key-usage.ts),
// approved spends per day and credential (projections/usage.ts), and each of
// the organization's keys against the rate limit (requests, refusals, the
// fullest its bucket got). Sums are numeric in PostgreSQL, money stays in
// integer minor units as decimal strings.

export type DayKeyCount = { day: string; key_id: string; requests: number };
export type DaySpendBy = { day: string; actor_id: string; currency: string; amount_minor: string; count: number };
export type KeyRate = { key_id: string; name: string; key_prefix: string; environment: string; revoked: boolean; requests_today: number; requests_window: number; limited_window: number; peak_today: number; peak_window: number };
export type UsageSummary = { days: number; since: string; limit: { burst: number; perSecond: number } | undefined; requests: DayKeyCount[]; spends: DaySpendBy[]; keys: KeyRate[] };

export async function usageSummary(db: Queryable, usage: KeyUsage | undefined, tenant: { orgId: string; projectId: string }, now: Date, days: number): Promise<UsageSummary> {
  // This instance's counts are written first, so they show at once (another instance's within a minute).
  await usage?.flush();
  const today = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
  const since = new Date(today.getTime() - (days - 1) * 86_400_000).toISOString().slice(0, 10);
  const todayText = today.toISOString().slice(0, 10);
  const [requests, spends, keys] = await Promise.all([
    db.query<DayKeyCount>(
      `SELECT to_char(u.day, 'YYYY-MM-DD') AS day, u.key_id, sum(u.requests)::int AS requests
       FROM api_key_usage_daily u JOIN api_keys k ON k.key_id = u.key_id AND k.org_id = $1
       WHERE u.project_id = $2 AND u.day >= $3::date GROUP BY 1, 2 ORDER BY 1, 2`,
      [tenant.orgId, tenant.projectId, since],
    ),
    db.query<DaySpendBy>(
      `SELECT to_char(date_trunc('day', at AT TIME ZONE 'UTC'), 'YYYY-MM-DD') AS day, actor_id, currency, sum(amount_minor)::text AS amount_minor, count(*)::int AS count
       FROM usage_spends WHERE org_id = $1 AND project_id = $2 AND at >= $3::date GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
      [tenant.orgId, tenant.projectId, since],
    ),
    db.query<KeyRate>(
      `SELECT k.key_id, k.name, k.key_prefix, k.environment, k.revoked_at IS NOT NULL AS revoked,
         coalesce((SELECT sum(requests) FROM api_key_usage_daily u WHERE u.key_id = k.key_id AND u.day = $3::date), 0)::int AS requests_today,
         coalesce((SELECT sum(requests) FROM api_key_usage_daily u WHERE u.key_id = k.key_id AND u.day >= $2::date), 0)::int AS requests_window,
         coalesce((SELECT sum(limited) FROM api_key_rate_daily r WHERE r.key_id = k.key_id AND r.day >= $2::date), 0)::int AS limited_window,
         coalesce((SELECT max(peak_fill) FROM api_key_rate_daily r WHERE r.key_id = k.key_id AND r.day = $3::date), 0)::float8 AS peak_today,
         coalesce((SELECT max(peak_fill) FROM api_key_rate_daily r WHERE r.key_id = k.key_id AND r.day >= $2::date), 0)::float8 AS peak_window
       FROM api_keys k WHERE k.org_id = $1 AND (k.project_id IS NULL OR k.project_id = $4) ORDER BY k.revoked_at IS NOT NULL, k.created_at DESC LIMIT 200`,
      [tenant.orgId, since, todayText, tenant.projectId],
    ),
  ]);
  return { days, since, limit: usage?.limit, requests: requests.rows, spends: spends.rows, keys: keys.rows };
}
