import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { businessEventTypes } from '../../events/index.ts';
import { createEndpoint, listEndpoints, readEndpoint, removeEndpoint, rotateEndpointSecret, updateEndpoint } from '../usecases/webhook-endpoints.ts';
import { defineRoute, type AppDeps } from './kernel/route.ts';
import { IdParam, Timestamp } from './kernel/schemas.ts';

// Outbound webhook endpoints ("triggers", spec 4.13, 6): the declarations of
// src/usecases/webhook-endpoints.ts. Their deliveries: webhook-deliveries.ts.

export const WebhookEndpoint = z
  .object({
    id: z.string(),
    org_id: z.string(),
    project_id: z.string().nullable(),
    server_id: z.string().nullable(),
    name: z.string(),
    event: z.string(),
    webhook_url: z.string(),
    status: z.enum(['active', 'paused', 'error']).describe('`active` delivers; `paused` holds deliveries (set by a PATCH); `error` is set by the dispatcher when the endpoint auto-pauses after consecutive dead deliveries; a PATCH to `active` resumes it.'),
    total_runs: z.number().int(),
    last_run_at: Timestamp.nullable(),
    signing_enabled: z.boolean(),
    created_at: Timestamp,
  })
  .meta({ id: 'WebhookEndpoint' });

const EventName = z.string().regex(/^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$/, 'a dotted lowercase event name').refine((e) => (businessEventTypes as string[]).includes(e), 'not an event type of this service (see the OpenAPI x-event-types)');

export async function webhookEndpointRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  endpointCreateAndReadRoutes(app, deps);
  endpointChangeRoutes(app, deps);
}

/** Subscribe an endpoint, list them, read one. */
function endpointCreateAndReadRoutes(app: FastifyInstance, deps: AppDeps): void {
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
      return { status: 201, body: await createEndpoint({ ports: deps, tenant: auth, run }, body) };
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
      return { status: 200, body: await listEndpoints(deps, auth, query) };
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
      return { status: 200, body: await readEndpoint(deps, auth, params.id) };
    },
  });
}

/** Update an endpoint, rotate its secret, delete it. */
function endpointChangeRoutes(app: FastifyInstance, deps: AppDeps): void {
  defineRoute(app, deps, {
    method: 'PATCH',
    url: '/v1/webhook-endpoints/:id',
    operationId: 'updateWebhookEndpoint',
    summary: 'Set status active or paused (reactivating drains what waited), rename, or change the URL',
    tags: ['webhooks'],
    auth: 'api_key',
    scope: 'webhooks:write',
    params: z.object({ id: IdParam }),
    body: z.strictObject({ status: z.enum(['active', 'paused']).optional().describe('`paused` holds deliveries; `active` resumes them (also after the dispatcher set `error`).'), name: z.string().trim().min(1).max(200).optional(), webhook_url: z.string().min(1).max(2048).optional() }),
    responses: { 200: WebhookEndpoint },
    errors: [[400, 'invalid_body'], [400, 'invalid_webhook_url'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    idempotent: true,
    async handler({ auth, params, body, run, deps }) {
      return { status: 200, body: await updateEndpoint({ ports: deps, tenant: auth, run }, params.id, body) };
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
      return { status: 200, body: await rotateEndpointSecret({ ports: deps, tenant: auth, run }, params.id) };
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
      await removeEndpoint({ ports: deps, tenant: auth, run }, params.id);
      return { status: 204 };
    },
  });
}
