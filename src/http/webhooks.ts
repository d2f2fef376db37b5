import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { type Endpoint, ownEndpoint, webhookDecider, webhookStream, type WebhookState } from '../../commands/webhook.ts';
import { businessEventTypes } from '../../events/index.ts';
import { checkResolved, checkUrl, UnsafeTarget } from '../adapters/outbound-http.ts';
import { loadState } from '../eventstore/handler.ts';
import { endpointMatchesEventSql, eventServerIdSql, type WebhookDispatcher } from '../reactors/webhooks.ts';
import { ApiError } from './errors.ts';
import { newId } from './ids.ts';
import { defineRoute, type AppDeps } from './route.ts';
import { IdParam, Timestamp, isoText as TS } from './schemas.ts';
import type { ApiKeyAuth } from './auth.ts';
import { deleteWebhookEndpoint } from '../usecases/webhook-endpoints.ts';

// Outbound webhook endpoints ("triggers"), their deliveries and dead letters,
// redelivery, draining, and event replay (spec 4.13, 6).

/** Provider ids a trigger may be bound to with server_id. */
export const KNOWN_SERVERS = ['open-finance', 'pix', 'x402', 'card-issuer', 'mcp'] as const;
const SECRET_OVERLAP_MS = 24 * 60 * 60 * 1000;

export const WebhookEndpoint = z
  .object({
    id: z.string(),
    org_id: z.string(),
    project_id: z.string().nullable(),
    server_id: z.string().nullable(),
    name: z.string(),
    event: z.string(),
    webhook_url: z.string(),
    status: z.enum(['active', 'paused', 'error']),
    total_runs: z.number().int(),
    last_run_at: Timestamp.nullable(),
    signing_enabled: z.boolean(),
    created_at: Timestamp,
  })
  .meta({ id: 'WebhookEndpoint' });
type EndpointView = z.infer<typeof WebhookEndpoint>;

const COLUMNS = `w.id, w.org_id, w.project_id, w.server_id, w.name, w.event, w.webhook_url, w.status, coalesce(s.total_runs, 0)::int AS total_runs, ${TS('s.last_run_at')} AS last_run_at, true AS signing_enabled, ${TS('w.created_at')} AS created_at`;

async function readEndpoint(deps: AppDeps, auth: ApiKeyAuth, id: string): Promise<EndpointView | undefined> {
  const { rows } = await deps.db.query<EndpointView>(
    `SELECT ${COLUMNS} FROM webhook_endpoints w LEFT JOIN webhook_endpoint_stats s ON s.trigger_id = w.id WHERE w.id = $1 AND w.org_id = $2 AND w.project_id = $3 AND NOT w.deleted`,
    [id, auth.orgId, auth.projectId],
  );
  return rows[0];
}

function view(e: Endpoint, stats?: { total_runs: number; last_run_at: string | null }): EndpointView {
  return { id: e.id, org_id: e.orgId, project_id: e.projectId, server_id: e.serverId, name: e.name, event: e.event, webhook_url: e.url, status: e.status, total_runs: stats?.total_runs ?? 0, last_run_at: stats?.last_run_at ?? null, signing_enabled: true, created_at: e.createdAt };
}

const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`;
const secretBytes = (s: string) => Buffer.from(s.slice('whsec_'.length), 'base64');

async function safeUrl(deps: AppDeps, raw: string): Promise<string> {
  try {
    const url = checkUrl(raw, deps.webhookTargets);
    await checkResolved(url.hostname, deps.webhookTargets).catch((err: unknown) => {
      if (err instanceof UnsafeTarget) throw err;
      // An unresolvable name is checked again at every delivery; let it through here.
    });
    return url.toString();
  } catch (err) {
    if (err instanceof UnsafeTarget) throw new ApiError(400, 'invalid_webhook_url', `webhook_url is refused: ${err.reason}`, { reason: err.reason });
    throw err;
  }
}

const notFound = () => new ApiError(404, 'not_found', 'webhook endpoint not found');
/**
 * `limit` of the deliveries and dead-letter lists (spec 4.13: "clamped 1..200,
 * non-number gives 50"): 0 and negatives give 1, above 200 gives 200; absent,
 * empty or not a number gives 50. Only the audit list reads 0 as 50.
 */
export function clampDeliveryLimit(raw: unknown): number {
  if (typeof raw !== 'string' || raw.trim() === '') return 50;
  const n = Number(raw);
  if (!Number.isFinite(n)) return 50;
  return Math.min(200, Math.max(1, Math.trunc(n)));
}
const clamp50 = z
  .unknown()
  .optional()
  .transform(clampDeliveryLimit)
  .meta({ type: 'integer', minimum: 1, maximum: 200, description: 'clamped 1..200 (0 gives 1); absent, empty or not a number gives 50' });
const DeliveryId = z.string().regex(/^\d{1,19}$/);

function dispatcher(deps: AppDeps): WebhookDispatcher {
  if (!deps.webhooks) throw new ApiError(503, 'webhooks_unavailable', 'the webhook dispatcher is not running', { retriable: true });
  return deps.webhooks;
}

export async function webhookRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const EventName = z.string().regex(/^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$/, 'a dotted lowercase event name').refine((e) => (businessEventTypes as string[]).includes(e), 'not an event type of this service (see the OpenAPI x-event-types)');

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/webhook-endpoints',
    operationId: 'createWebhookEndpoint',
    summary: 'Subscribe a URL to one event type; the signing secret (whsec_) is shown once',
    tags: ['webhooks'],
    auth: 'api_key',
    scope: 'webhooks:write',
    body: z.object({ event: EventName, name: z.string().trim().min(1).max(200), webhook_url: z.string().min(1).max(2048), server_id: z.string().min(1).max(64).optional() }),
    responses: { 201: WebhookEndpoint.extend({ secret: z.string() }) },
    errors: [[400, 'invalid_body'], [400, 'unknown_server'], [400, 'invalid_webhook_url'], [401, 'unauthorized'], [403, 'forbidden']],
    idempotent: true,
    async handler({ auth, body, run, deps }) {
      if (body.server_id !== undefined && !(KNOWN_SERVERS as readonly string[]).includes(body.server_id) && !deps.providers.runtime.catalog.get(body.server_id)) throw new ApiError(400, 'unknown_server', `server_id names no known provider (${KNOWN_SERVERS.join(', ')}, or a catalog provider id)`);
      const url = await safeUrl(deps, body.webhook_url);
      const id = newId('trg');
      const secret = newSecret();
      const secretRef = await deps.vault.put(auth.orgId, 'webhook_signing_secret', secretBytes(secret));
      try {
        const r = await run(webhookDecider, webhookStream(id), { type: 'create', id, tenant: auth, name: body.name, event: body.event, url, serverId: body.server_id ?? null, secretRef }, { expectedRevision: 'no_stream' });
        return { status: 201, body: { ...view((r.state as Extract<WebhookState, { status: 'exists' }>).e), secret } };
      } catch (err) {
        await deps.vault.delete(auth.orgId, secretRef).catch(() => {});
        throw err;
      }
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/webhook-endpoints',
    operationId: 'listWebhookEndpoints',
    summary: 'List endpoints, newest first; `before` is the id of the last endpoint of the previous page',
    tags: ['webhooks'],
    auth: 'api_key',
    scope: 'webhooks:read',
    query: z.object({ before: z.string().max(100).optional(), event: z.string().max(100).optional(), server_id: z.string().max(64).optional(), status: z.enum(['active', 'paused', 'error']).optional(), limit: z.coerce.number().int().min(1).max(200).default(50) }),
    responses: { 200: z.object({ triggers: z.array(WebhookEndpoint), next_before: z.string().nullable() }) },
    errors: [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden']],
    async handler({ auth, query, deps }) {
      const params: unknown[] = [auth.orgId, auth.projectId, query.limit];
      let where = 'w.org_id = $1 AND w.project_id = $2 AND NOT w.deleted';
      const add = (sql: string, v: unknown) => {
        params.push(v);
        where += ` AND ${sql.replace('?', `$${params.length}`)}`;
      };
      if (query.before) add('w.created_position < coalesce((SELECT created_position FROM webhook_endpoints WHERE id = ?), \'\')', query.before);
      if (query.event) add('w.event = ?', query.event);
      if (query.server_id) add('w.server_id = ?', query.server_id);
      if (query.status) add('w.status = ?', query.status);
      const { rows } = await deps.db.query<EndpointView>(`SELECT ${COLUMNS} FROM webhook_endpoints w LEFT JOIN webhook_endpoint_stats s ON s.trigger_id = w.id WHERE ${where} ORDER BY w.created_position DESC LIMIT $3`, params);
      return { status: 200, body: { triggers: rows, next_before: rows.length === query.limit ? rows[rows.length - 1]!.id : null } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/webhook-endpoints/:id',
    operationId: 'getWebhookEndpoint',
    summary: 'Read an endpoint (its secret is never read back)',
    tags: ['webhooks'],
    auth: 'api_key',
    scope: 'webhooks:read',
    params: z.object({ id: IdParam }),
    responses: { 200: WebhookEndpoint },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler({ auth, params, deps }) {
      const e = await readEndpoint(deps, auth, params.id);
      if (!e) throw notFound();
      return { status: 200, body: e };
    },
  });

  defineRoute(app, deps, {
    method: 'PATCH',
    url: '/v1/webhook-endpoints/:id',
    operationId: 'updateWebhookEndpoint',
    summary: 'Set status active or paused (reactivating drains what waited), rename, or change the URL',
    tags: ['webhooks'],
    auth: 'api_key',
    scope: 'webhooks:write',
    params: z.object({ id: IdParam }),
    body: z.strictObject({ status: z.enum(['active', 'paused']).optional(), name: z.string().trim().min(1).max(200).optional(), webhook_url: z.string().min(1).max(2048).optional() }),
    responses: { 200: WebhookEndpoint },
    errors: [[400, 'invalid_body'], [400, 'invalid_webhook_url'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    idempotent: true,
    async handler({ auth, params, body, run, deps }) {
      const url = body.webhook_url !== undefined ? await safeUrl(deps, body.webhook_url) : undefined;
      const r = await run(webhookDecider, webhookStream(params.id), { type: 'update', tenant: auth, ...(body.name !== undefined ? { name: body.name } : {}), ...(url !== undefined ? { url } : {}), ...(body.status ? { status: body.status } : {}) });
      if (body.status === 'active') await deps.db.query('UPDATE webhook_endpoint_stats SET consecutive_dead = 0 WHERE trigger_id = $1', [params.id]);
      const e = await readEndpoint(deps, auth, params.id);
      return { status: 200, body: e ?? view(ownEndpoint(r.state, auth)) };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/webhook-endpoints/:id/rotate-secret',
    operationId: 'rotateWebhookSecret',
    summary: 'A new signing secret, shown once; the previous one keeps signing beside it for 24 hours',
    tags: ['webhooks'],
    auth: 'api_key',
    scope: 'webhooks:write',
    params: z.object({ id: IdParam }),
    responses: { 200: z.object({ id: z.string(), secret: z.string(), previous_secret_valid_until: Timestamp }) },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    idempotent: true,
    async handler({ auth, params, run, deps }) {
      const { state } = await loadState(deps.store, webhookStream(params.id), webhookDecider);
      ownEndpoint(state, auth);
      const secret = newSecret();
      const secretRef = await deps.vault.put(auth.orgId, 'webhook_signing_secret', secretBytes(secret));
      const r = await run(webhookDecider, webhookStream(params.id), { type: 'rotate_secret', tenant: auth, secretRef, overlapMs: SECRET_OVERLAP_MS });
      const e = r.events[0]!;
      return { status: 200, body: { id: params.id, secret, previous_secret_valid_until: e.type === 'webhook_endpoint.secret_rotated' ? e.data.previous_valid_until : '' } };
    },
  });

  defineRoute(app, deps, {
    method: 'DELETE',
    url: '/v1/webhook-endpoints/:id',
    operationId: 'deleteWebhookEndpoint',
    summary: 'Delete an endpoint; its secrets are purged first (503, nothing deleted, if they cannot be)',
    tags: ['webhooks'],
    auth: 'api_key',
    scope: 'webhooks:write',
    params: z.object({ id: IdParam }),
    responses: { 204: null },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [503, 'secret_purge_failed']],
    idempotent: true,
    async handler({ auth, params, run, deps }) {
      const { state } = await loadState(deps.store, webhookStream(params.id), webhookDecider);
      const e = ownEndpoint(state, auth);
      await deleteWebhookEndpoint(deps, run, auth, e);
      return { status: 204 };
    },
  });

  const Delivery = z.object({ id: z.string(), trigger_id: z.string(), event_id: z.string(), attempt: z.number().int(), status: z.string(), created_at: Timestamp, next_attempt_at: Timestamp.nullable() });
  const DELIVERY_COLUMNS = `id::text, trigger_id, event_id::text, attempt, status, ${TS('created_at')} AS created_at, CASE WHEN status = 'pending' THEN ${TS('next_attempt_at')} END AS next_attempt_at`;

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/webhook-endpoints/:id/deliveries',
    operationId: 'listWebhookDeliveries',
    summary: 'Deliveries of an endpoint, newest first (limit clamped 1..200, non-number 50)',
    tags: ['webhooks'],
    auth: 'api_key',
    scope: 'webhooks:read',
    params: z.object({ id: IdParam }),
    query: z.object({ limit: clamp50 }),
    responses: { 200: z.object({ deliveries: z.array(Delivery) }) },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler({ auth, params, query, deps }) {
      if (!(await readEndpoint(deps, auth, params.id))) throw notFound();
      const { rows } = await deps.db.query<z.infer<typeof Delivery>>(`SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE trigger_id = $1 ORDER BY id DESC LIMIT $2`, [params.id, query.limit]);
      return { status: 200, body: { deliveries: rows } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/webhook-endpoints/:id/dlq',
    operationId: 'listWebhookDeadLetters',
    summary: 'Dead letters: deliveries that failed their last allowed attempt (or got a 410)',
    tags: ['webhooks'],
    auth: 'api_key',
    scope: 'webhooks:read',
    params: z.object({ id: IdParam }),
    query: z.object({ limit: clamp50 }),
    responses: { 200: z.object({ dead_letters: z.array(z.object({ id: z.string(), event_id: z.string(), attempt: z.number().int(), created_at: Timestamp })) }) },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler({ auth, params, query, deps }) {
      if (!(await readEndpoint(deps, auth, params.id))) throw notFound();
      const { rows } = await deps.db.query<{ id: string; event_id: string; attempt: number; created_at: string }>(
        `SELECT id::text, event_id::text, attempt, ${TS('created_at')} AS created_at FROM webhook_deliveries WHERE trigger_id = $1 AND status = 'dead' ORDER BY id DESC LIMIT $2`,
        [params.id, query.limit],
      );
      return { status: 200, body: { dead_letters: rows } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/webhook-endpoints/:id/deliveries/:delivery_id',
    operationId: 'getWebhookDelivery',
    summary: 'One delivery with its last attempt: request headers and body, response (status, headers, first 16 KiB) and the stored event',
    tags: ['webhooks'],
    auth: 'api_key',
    scope: 'webhooks:read',
    params: z.object({ id: IdParam, delivery_id: z.string().max(100) }),
    responses: { 200: z.object({ delivery: Delivery, request: z.object({ headers: z.record(z.string(), z.string()), body: z.string() }).nullable(), response: z.record(z.string(), z.unknown()).nullable(), event: z.record(z.string(), z.unknown()) }) },
    errors: [[400, 'invalid_delivery_id'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler({ auth, params, deps }) {
      if (!DeliveryId.safeParse(params.delivery_id).success) throw new ApiError(400, 'invalid_delivery_id', 'delivery_id is 1 to 19 decimal digits');
      if (!(await readEndpoint(deps, auth, params.id))) throw notFound();
      const d = (await deps.db.query<z.infer<typeof Delivery>>(`SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE id = $1::numeric AND trigger_id = $2`, [params.delivery_id, params.id])).rows[0];
      if (!d) throw new ApiError(404, 'not_found', 'delivery not found');
      const a = (
        await deps.db.query<{ request_headers: Record<string, string>; request_body: string; response_status: number | null; response_headers: Record<string, string> | null; response_body: string | null; response_truncated: boolean; error: string | null }>(
          'SELECT request_headers, request_body, response_status, response_headers, response_body, response_truncated, error FROM webhook_attempts WHERE delivery_id = $1 ORDER BY attempt DESC LIMIT 1',
          [d.id],
        )
      ).rows[0];
      const ev = (await deps.db.query<Record<string, unknown>>(`SELECT id::text, 'agent-ledger' AS source, event_type, payload, ${TS('received_at')} AS received_at FROM webhook_events WHERE id = $1`, [d.event_id])).rows[0] ?? {};
      return {
        status: 200,
        body: {
          delivery: d,
          request: a ? { headers: a.request_headers, body: a.request_body } : null,
          response: a ? { status: a.response_status, headers: a.response_headers, body: a.response_body, truncated: a.response_truncated, error: a.error } : null,
          event: ev,
        },
      };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/webhook-endpoints/deliveries/:delivery_id/redeliver',
    operationId: 'redeliverWebhook',
    summary: 'Queue a new pending delivery of an old delivery’s event (it waits while the endpoint is not active)',
    tags: ['webhooks'],
    auth: 'api_key',
    scope: 'webhooks:write',
    params: z.object({ delivery_id: z.string().max(100) }),
    responses: { 202: z.object({ redelivery_id: z.string(), trigger_id: z.string(), event_id: z.string(), trigger_status: z.string() }) },
    errors: [[400, 'invalid_delivery_id'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    idempotent: true,
    async handler({ auth, params, deps }) {
      if (!DeliveryId.safeParse(params.delivery_id).success) throw new ApiError(400, 'invalid_delivery_id', 'delivery_id is 1 to 19 decimal digits');
      const { rows } = await deps.db.query<{ id: string; trigger_id: string; event_id: string; status: string }>(
        `INSERT INTO webhook_deliveries (trigger_id, event_id, org_id, project_id, kind, next_attempt_at)
         SELECT d.trigger_id, d.event_id, d.org_id, d.project_id, 'redelivery', now() FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.trigger_id AND NOT w.deleted
         WHERE d.id = $1::numeric AND d.org_id = $2 AND d.project_id = $3
         RETURNING id::text, trigger_id, event_id::text, (SELECT status FROM webhook_endpoints WHERE id = trigger_id) AS status`,
        [params.delivery_id, auth.orgId, auth.projectId],
      );
      const r = rows[0];
      if (!r) throw new ApiError(404, 'not_found', 'delivery not found');
      return { status: 202, body: { redelivery_id: r.id, trigger_id: r.trigger_id, event_id: r.event_id, trigger_status: r.status } };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/webhook-endpoints/retry-pending',
    operationId: 'retryPendingWebhooks',
    summary: 'Drain the project’s retry queue now: one attempt at every pending delivery of its active endpoints; a failure waits for its next scheduled retry',
    tags: ['webhooks'],
    auth: 'api_key',
    scope: 'webhooks:write',
    responses: { 200: z.object({ scanned: z.number().int(), redispatched: z.number().int(), delivered: z.number().int(), failed: z.number().int(), dead: z.number().int() }) },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [503, 'webhooks_unavailable']],
    async handler({ auth, deps }) {
      // Each pending delivery is attempted at most once; a failure waits for its next scheduled retry.
      const c = await dispatcher(deps).drain({ orgId: auth.orgId, projectId: auth.projectId, all: true });
      return { status: 200, body: c };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/events/:event_id/replay',
    operationId: 'replayEvent',
    summary: 'Re-dispatch a stored event to every active matching endpoint (or one, with trigger_id); mints no new event',
    tags: ['webhooks'],
    auth: 'api_key',
    scope: 'webhooks:write',
    params: z.object({ event_id: z.string().max(100) }),
    query: z.object({ trigger_id: z.string().max(100).optional() }),
    responses: { 202: z.object({ event_id: z.string(), dispatched: z.number().int(), trigger_id: z.string().nullable() }) },
    errors: [[400, 'trigger_event_mismatch'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [404, 'trigger_not_found'], [409, 'trigger_not_active']],
    idempotent: true,
    async handler({ auth, params, query, deps }) {
      const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(params.event_id);
      const ev = uuid
        ? (await deps.db.query<{ id: string; event_type: string; server_id: string | null }>(`SELECT id::text, event_type, ${eventServerIdSql('payload')} AS server_id FROM webhook_events WHERE id = $1 AND org_id = $2 AND (project_id IS NULL OR project_id = $3)`, [params.event_id, auth.orgId, auth.projectId])).rows[0]
        : undefined;
      if (!ev) throw new ApiError(404, 'not_found', 'event not found');
      // The project's endpoints that subscribe to the event, by the live dispatcher's own rule (server_id binding included).
      const matching = async (triggerId?: string) =>
        (
          await deps.db.query<{ id: string; status: string }>(
            `SELECT w.id, w.status FROM webhook_events x JOIN webhook_endpoints w ON ${endpointMatchesEventSql('w', 'x')}
             WHERE x.id = $1 AND w.project_id = $2 ${triggerId !== undefined ? 'AND w.id = $3' : ''} ORDER BY w.created_position`,
            triggerId !== undefined ? [ev.id, auth.projectId, triggerId] : [ev.id, auth.projectId],
          )
        ).rows;
      let targets: { id: string }[];
      if (query.trigger_id) {
        const w = await readEndpoint(deps, auth, query.trigger_id);
        if (!w) throw new ApiError(404, 'trigger_not_found', 'trigger not found');
        if (w.event !== ev.event_type) throw new ApiError(400, 'trigger_event_mismatch', 'the trigger subscribes to another event type', { trigger_event: w.event, event_type: ev.event_type });
        if ((await matching(w.id)).length === 0) {
          throw new ApiError(400, 'trigger_event_mismatch', 'the trigger is bound to another provider (server_id) than the event', { trigger_event: w.event, event_type: ev.event_type, trigger_server_id: w.server_id, event_server_id: ev.server_id });
        }
        if (w.status !== 'active') throw new ApiError(409, 'trigger_not_active', 'the trigger is not active', { status: w.status });
        targets = [{ id: w.id }];
      } else {
        targets = (await matching()).filter((w) => w.status === 'active');
      }
      for (const t of targets) {
        await deps.db.query(`INSERT INTO webhook_deliveries (trigger_id, event_id, org_id, project_id, kind, next_attempt_at) VALUES ($1, $2, $3, $4, 'replay', now())`, [t.id, ev.id, auth.orgId, auth.projectId]);
      }
      return { status: 202, body: { event_id: ev.id, dispatched: targets.length, trigger_id: query.trigger_id ?? null } };
    },
  });
}
