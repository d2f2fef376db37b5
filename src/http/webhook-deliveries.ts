import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { getDelivery, listDeadLetters, listDeliveries, redeliver, replayEvent, retryPending } from '../usecases/webhook-deliveries.ts';
import { defineRoute, type AppDeps } from './kernel/route.ts';
import { IdParam, Timestamp } from './kernel/schemas.ts';

// Outbound webhook deliveries (spec 4.13, 6): the declarations of
// src/usecases/webhook-deliveries.ts (deliveries and dead letters, one
// delivery, redelivery, draining, event replay).

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
const Delivery = z.object({ id: z.string(), trigger_id: z.string(), event_id: z.string(), attempt: z.number().int(), status: z.string().describe('`pending` (queued or due for a retry), `delivered` (a 2xx), `failed` (refused, will be retried) or `dead` (gave up after its last attempt).'), created_at: Timestamp, next_attempt_at: Timestamp.nullable() });

export async function webhookDeliveryRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  deliveryReadRoutes(app, deps);
  deliveryActionRoutes(app, deps);
}

/** Deliveries and dead letters of an endpoint, and one delivery. */
function deliveryReadRoutes(app: FastifyInstance, deps: AppDeps): void {
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
      return { status: 200, body: { deliveries: await listDeliveries(deps, auth, params.id, query.limit) } };
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
      return { status: 200, body: { dead_letters: await listDeadLetters(deps, auth, params.id, query.limit) } };
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
    responses: { 200: z.object({ delivery: Delivery.describe('The delivery attempt.'), request: z.object({ headers: z.record(z.string(), z.string()).describe('The headers sent, the signature among them.'), body: z.string().describe('The exact body posted (the signature covers these bytes).') }).nullable().describe('What was posted; null before the first attempt.'), response: z.record(z.string(), z.unknown()).nullable().describe("The endpoint's answer (its status, and its body cut short); null before an answer."), event: z.record(z.string(), z.unknown()) }) },
    errors: [[400, 'invalid_delivery_id'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler({ auth, params, deps }) {
      return { status: 200, body: await getDelivery(deps, auth, params.id, params.delivery_id) };
    },
  });
}

/** Redelivery, draining the retry queue, and an event replay. */
function deliveryActionRoutes(app: FastifyInstance, deps: AppDeps): void {
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
      return { status: 202, body: await redeliver(deps, auth, params.delivery_id) };
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
      return { status: 200, body: await retryPending(deps, auth) };
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
      return { status: 202, body: await replayEvent(deps, auth, params.event_id, query.trigger_id) };
    },
  });
}
