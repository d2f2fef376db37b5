import type { Queryable } from '../postgres/db.ts';
import type { Ports } from './context.ts';
import { auditHealth } from './audit.ts';
import { HOME_SPEND_DAYS } from '../limits.ts';

// The dashboard's Home: one project of an organization at a glance, read from
// the read models (agents, mandates and their authorizations, approvals, the
// audit chain's health). Money stays in integer minor units, as decimal
// strings (the sums are numeric in PostgreSQL, never floats).

export type DaySpend = { day: string; currency: string; amount_minor: string; count: number };
export type HomeSummary = {
  agents: number;
  active_mandates: number;
  spends_today: { currency: string; amount_minor: string; count: number }[];
  pending_approvals: number;
  audit: { status: string; actionable_status: string; detail: string; last_sequence_number: number };
  /** Approved spends per UTC day and currency, the last HOME_SPEND_DAYS days, oldest first (days without spends absent). */
  spends_per_day: DaySpend[];
};

const count = async (db: Queryable, sql: string, params: unknown[]) => Number((await db.query<{ n: string }>(sql, params)).rows[0]?.n ?? 0);

export async function homeSummary(ports: Pick<Ports, 'db' | 'store' | 'now' | 'auditWitnesses'>, orgId: string, projectId: string): Promise<HomeSummary> {
  const { db } = ports;
  const now = ports.now();
  const today = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
  const since = new Date(today.getTime() - (HOME_SPEND_DAYS - 1) * 86_400_000);
  const [agents, activeMandates, pending, perDay, health] = await Promise.all([
    count(db, "SELECT count(*)::text AS n FROM agents WHERE org_id = $1 AND status = 'active'", [orgId]),
    count(db, "SELECT count(*)::text AS n FROM mandates WHERE org_id = $1 AND project_id = $2 AND status = 'active' AND expires_at > $3", [orgId, projectId, now]),
    count(db, "SELECT count(*)::text AS n FROM approvals WHERE org_id = $1 AND (project_id = $2 OR project_id IS NULL) AND status = 'pending' AND expires_at > $3", [orgId, projectId, now]),
    db.query<DaySpend>(
      `SELECT to_char(date_trunc('day', a.at AT TIME ZONE 'UTC'), 'YYYY-MM-DD') AS day, a.currency, sum(a.amount_minor)::text AS amount_minor, count(*)::int AS count
       FROM mandate_authorizations a JOIN mandates m ON m.id = a.mandate_id
       WHERE a.org_id = $1 AND m.project_id = $2 AND a.decision = 'approved' AND a.at >= $3
       GROUP BY 1, 2 ORDER BY 1, 2`,
      [orgId, projectId, since],
    ),
    auditHealth(ports, orgId),
  ]);
  const todayText = today.toISOString().slice(0, 10);
  return {
    agents,
    active_mandates: activeMandates,
    spends_today: perDay.rows.filter((r) => r.day === todayText).map(({ currency, amount_minor, count }) => ({ currency, amount_minor, count })),
    pending_approvals: pending,
    audit: { status: health.status, actionable_status: health.actionable_status, detail: health.detail, last_sequence_number: health.last_sequence_number },
    spends_per_day: perDay.rows,
  };
}
