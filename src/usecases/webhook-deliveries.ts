import type { Tenant } from '../../commands/consumer.ts';
import { Rejection } from '../eventstore/handler.ts';
import { isoText as TS } from '../postgres/iso-text.ts';
import { endpointMatchesEventSql, eventServerIdSql, type WebhookDispatcher } from '../reactors/webhooks.ts';
import type { Ports } from './context.ts';
import { findEndpoint, readEndpoint } from './webhook-endpoints.ts';

// Outbound webhook deliveries (spec 4.13, 6): an endpoint's deliveries and
// dead letters, one delivery with its last attempt, redelivery, draining the
// retry queue, and event replay.

export type DeliveryRow = { id: string; trigger_id: string; event_id: string; attempt: number; status: string; created_at: string; next_attempt_at: string | null };

const DELIVERY_COLUMNS = `id::text, trigger_id, event_id::text, attempt, status, ${TS('created_at')} AS created_at, CASE WHEN status = 'pending' THEN ${TS('next_attempt_at')} END AS next_attempt_at`;
const DELIVERY_ID = /^\d{1,19}$/;

function deliveryId(raw: string): string {
  if (!DELIVERY_ID.test(raw)) throw new Rejection('invalid_delivery_id', 'delivery_id is 1 to 19 decimal digits');
  return raw;
}

function dispatcher(ports: Ports): WebhookDispatcher {
  if (!ports.webhooks) throw new Rejection('webhooks_unavailable', 'the webhook dispatcher is not running', { retriable: true });
  return ports.webhooks;
}

/** Deliveries of an endpoint, newest first. */
export async function listDeliveries(ports: Ports, tenant: Tenant, id: string, limit: number): Promise<DeliveryRow[]> {
  await readEndpoint(ports, tenant, id);
  const { rows } = await ports.db.query<DeliveryRow>(`SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE trigger_id = $1 ORDER BY webhook_deliveries.id DESC LIMIT $2`, [id, limit]);
  return rows;
}

/** Dead letters: deliveries that failed their last allowed attempt (or got a 410). */
export async function listDeadLetters(ports: Ports, tenant: Tenant, id: string, limit: number): Promise<{ id: string; event_id: string; attempt: number; created_at: string }[]> {
  await readEndpoint(ports, tenant, id);
  const { rows } = await ports.db.query<{ id: string; event_id: string; attempt: number; created_at: string }>(
    `SELECT id::text, event_id::text, attempt, ${TS('created_at')} AS created_at FROM webhook_deliveries WHERE trigger_id = $1 AND status = 'dead' ORDER BY webhook_deliveries.id DESC LIMIT $2`,
    [id, limit],
  );
  return rows;
}

type Attempt = { request_headers: Record<string, string>; request_body: string; response_status: number | null; response_headers: Record<string, string> | null; response_body: string | null; response_truncated: boolean; error: string | null };

/** One delivery with its last attempt (request, response) and the stored event. */
export async function getDelivery(ports: Ports, tenant: Tenant, id: string, rawDeliveryId: string) {
  const did = deliveryId(rawDeliveryId);
  await readEndpoint(ports, tenant, id);
  const d = (await ports.db.query<DeliveryRow>(`SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE id = $1::numeric AND trigger_id = $2`, [did, id])).rows[0];
  if (!d) throw new Rejection('not_found', 'delivery not found');
  const a = (
    await ports.db.query<Attempt>('SELECT request_headers, request_body, response_status, response_headers, response_body, response_truncated, error FROM webhook_attempts WHERE delivery_id = $1 ORDER BY attempt DESC LIMIT 1', [d.id])
  ).rows[0];
  const ev = (await ports.db.query<Record<string, unknown>>(`SELECT id::text, 'agent-ledger' AS source, event_type, payload, ${TS('received_at')} AS received_at FROM webhook_events WHERE id = $1`, [d.event_id])).rows[0] ?? {};
  return {
    delivery: d,
    request: a ? { headers: a.request_headers, body: a.request_body } : null,
    response: a ? { status: a.response_status, headers: a.response_headers, body: a.response_body, truncated: a.response_truncated, error: a.error } : null,
    event: ev,
  };
}

/** Queues a new pending delivery of an old delivery's event (it waits while the endpoint is not active). */
export async function redeliver(ports: Ports, tenant: Tenant, rawDeliveryId: string): Promise<{ redelivery_id: string; trigger_id: string; event_id: string; trigger_status: string }> {
  const did = deliveryId(rawDeliveryId);
  const { rows } = await ports.db.query<{ id: string; trigger_id: string; event_id: string; status: string }>(
    `INSERT INTO webhook_deliveries (trigger_id, event_id, org_id, project_id, kind, next_attempt_at)
     SELECT d.trigger_id, d.event_id, d.org_id, d.project_id, 'redelivery', now() FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.trigger_id AND NOT w.deleted
     WHERE d.id = $1::numeric AND d.org_id = $2 AND d.project_id = $3
     RETURNING id::text, trigger_id, event_id::text, (SELECT status FROM webhook_endpoints WHERE id = trigger_id) AS status`,
    [did, tenant.orgId, tenant.projectId],
  );
  const r = rows[0];
  if (!r) throw new Rejection('not_found', 'delivery not found');
  return { redelivery_id: r.id, trigger_id: r.trigger_id, event_id: r.event_id, trigger_status: r.status };
}

/** Drains the project's retry queue now: each pending delivery is attempted at most once; a failure waits for its next scheduled retry. */
export async function retryPending(ports: Ports, tenant: Tenant) {
  return dispatcher(ports).drain({ orgId: tenant.orgId, projectId: tenant.projectId, all: true });
}

/** Re-dispatches a stored event to every active matching endpoint (or one, with triggerId); mints no new event. */
export async function replayEvent(ports: Ports, tenant: Tenant, eventId: string, triggerId: string | undefined): Promise<{ event_id: string; dispatched: number; trigger_id: string | null }> {
  const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(eventId);
  const ev = uuid
    ? (await ports.db.query<{ id: string; event_type: string; server_id: string | null }>(`SELECT id::text, event_type, ${eventServerIdSql('payload')} AS server_id FROM webhook_events WHERE id = $1 AND org_id = $2 AND (project_id IS NULL OR project_id = $3)`, [eventId, tenant.orgId, tenant.projectId])).rows[0]
    : undefined;
  if (!ev) throw new Rejection('not_found', 'event not found');
  // The project's endpoints that subscribe to the event, by the live dispatcher's own rule (server_id binding included).
  const matching = async (only?: string) =>
    (
      await ports.db.query<{ id: string; status: string }>(
        `SELECT w.id, w.status FROM webhook_events x JOIN webhook_endpoints w ON ${endpointMatchesEventSql('w', 'x')}
         WHERE x.id = $1 AND w.project_id = $2 ${only !== undefined ? 'AND w.id = $3' : ''} ORDER BY w.created_position`,
        only !== undefined ? [ev.id, tenant.projectId, only] : [ev.id, tenant.projectId],
      )
    ).rows;
  let targets: { id: string }[];
  if (triggerId) {
    const w = await findEndpoint(ports, tenant, triggerId);
    if (!w) throw new Rejection('trigger_not_found', 'trigger not found');
    if (w.event !== ev.event_type) throw new Rejection('trigger_event_mismatch', 'the trigger subscribes to another event type', { trigger_event: w.event, event_type: ev.event_type });
    if ((await matching(w.id)).length === 0) {
      throw new Rejection('trigger_event_mismatch', 'the trigger is bound to another provider (server_id) than the event', { trigger_event: w.event, event_type: ev.event_type, trigger_server_id: w.server_id, event_server_id: ev.server_id });
    }
    if (w.status !== 'active') throw new Rejection('trigger_not_active', 'the trigger is not active', { status: w.status });
    targets = [{ id: w.id }];
  } else {
    targets = (await matching()).filter((w) => w.status === 'active');
  }
  for (const t of targets) {
    await ports.db.query(`INSERT INTO webhook_deliveries (trigger_id, event_id, org_id, project_id, kind, next_attempt_at) VALUES ($1, $2, $3, $4, 'replay', now())`, [t.id, ev.id, tenant.orgId, tenant.projectId]);
  }
  return { event_id: ev.id, dispatched: targets.length, trigger_id: triggerId ?? null };
}
