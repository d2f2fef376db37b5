import type { Tenant } from '../../commands/consumer.ts';
import { isoText as TS } from '../postgres/iso-text.ts';
import type { Ports } from './context.ts';
import { readEndpoint } from './webhook-endpoints.ts';

// What a person reads of an endpoint's deliveries beyond the API's lists:
// pages of deliveries or dead letters that grow by cursor (the id of the last
// row shown; index webhook_deliveries_trigger, and webhook_deliveries_dead
// for dead letters), the attempts per hour (delivered, failed) for a chart
// (the sums the dispatcher keeps, webhook_attempts_hourly), and why an
// endpoint paused itself.

export type DeliveryListRow = { id: string; event_id: string; event_type: string; kind: string; attempt: number; status: string; created_at: string; response_status: number | null };
export type DeliveryPage = { rows: DeliveryListRow[]; next_before: string | null };

const DIGITS = /^\d{1,19}$/;

/** A page of an endpoint's deliveries (or its dead letters), newest first; `before` is the id of the last one of the previous page. */
export async function deliveryPage(ports: Pick<Ports, 'db'>, tenant: Tenant, triggerId: string, q: { before?: string | undefined; dead?: boolean; limit: number }): Promise<DeliveryPage> {
  await readEndpoint(ports, tenant, triggerId);
  const params: unknown[] = [triggerId, q.limit];
  let where = 'd.trigger_id = $1';
  if (q.dead) where += ` AND d.status = 'dead'`;
  if (q.before !== undefined) {
    if (!DIGITS.test(q.before)) return { rows: [], next_before: null };
    params.push(q.before);
    where += ` AND d.id < $${params.length}::bigint`;
  }
  const { rows } = await ports.db.query<DeliveryListRow>(
    `SELECT d.id::text, d.event_id::text, coalesce(e.event_type, '') AS event_type, d.kind, d.attempt, d.status, ${TS('d.created_at')} AS created_at,
       (SELECT a.response_status FROM webhook_attempts a WHERE a.delivery_id = d.id ORDER BY a.attempt DESC LIMIT 1) AS response_status
     FROM webhook_deliveries d LEFT JOIN webhook_events e ON e.id = d.event_id
     WHERE ${where} ORDER BY d.id DESC LIMIT $2`,
    params,
  );
  return { rows, next_before: rows.length === q.limit ? rows[rows.length - 1]!.id : null };
}

export type HourCount = { hour: string; delivered: number; failed: number };

/** Attempts per hour over the last `hours` hours (UTC, oldest first, every hour present): delivered and failed, of one endpoint or of the project's endpoints. */
export async function attemptsPerHour(ports: Pick<Ports, 'db'>, tenant: Tenant, q: { triggerId?: string | undefined; hours: number; now: Date }): Promise<HourCount[]> {
  const end = new Date(Math.floor(q.now.getTime() / 3_600_000) * 3_600_000);
  const start = new Date(end.getTime() - (q.hours - 1) * 3_600_000);
  const params: unknown[] = [start.toISOString(), tenant.orgId, tenant.projectId];
  let only = '';
  if (q.triggerId) {
    params.push(q.triggerId);
    only = ` AND h.trigger_id = $${params.length}`;
  }
  // The sums the dispatcher keeps per endpoint and hour (webhook_attempts_hourly): at most 24 rows an endpoint.
  const { rows } = await ports.db.query<{ hour: string; delivered: number; failed: number }>(
    `SELECT ${TS('h.hour')} AS hour, sum(h.delivered)::int AS delivered, sum(h.failed)::int AS failed
     FROM webhook_attempts_hourly h
     WHERE h.hour >= $1 AND h.org_id = $2 AND h.project_id = $3${only}
     GROUP BY h.hour`,
    params,
  );
  const byHour = new Map(rows.map((r) => [r.hour.slice(0, 13), r]));
  const out: HourCount[] = [];
  for (let i = 0; i < q.hours; i++) {
    const h = new Date(start.getTime() + i * 3_600_000).toISOString();
    const r = byHour.get(h.slice(0, 13));
    out.push({ hour: h, delivered: r?.delivered ?? 0, failed: r?.failed ?? 0 });
  }
  return out;
}

/** Why an endpoint is in `error`: the dead deliveries in a row that paused it, and the newest of them. */
export async function autoPauseCause(ports: Pick<Ports, 'db'>, triggerId: string): Promise<{ consecutive_dead: number; last_dead_at: string | null; last_error: string | null; last_status: number | null }> {
  const stats = await ports.db.query<{ n: number }>('SELECT consecutive_dead AS n FROM webhook_endpoint_stats WHERE trigger_id = $1', [triggerId]);
  const last = await ports.db.query<{ at: string; error: string | null; status: number | null }>(
    `SELECT ${TS('coalesce(d.finished_at, d.created_at)')} AS at, a.error, a.response_status AS status
     FROM webhook_deliveries d LEFT JOIN LATERAL (SELECT error, response_status FROM webhook_attempts WHERE delivery_id = d.id ORDER BY attempt DESC LIMIT 1) a ON true
     WHERE d.trigger_id = $1 AND d.status = 'dead' ORDER BY d.id DESC LIMIT 1`,
    [triggerId],
  );
  const l = last.rows[0];
  return { consecutive_dead: stats.rows[0]?.n ?? 0, last_dead_at: l?.at ?? null, last_error: l?.error ?? null, last_status: l?.status ?? null };
}
