import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { INBOUND_WEBHOOK_MAX_BYTES } from '../limits.ts';
import { receiveProviderWebhook } from '../usecases/provider-webhooks.ts';
import { defineRoute, type AppDeps } from './kernel/route.ts';
import { IdParam } from './kernel/schemas.ts';

// Inbound provider webhooks (spec 4.4, 6 item 6): the route, which keeps the
// body as the exact text sent; verification and the receipt are
// src/usecases/provider-webhooks.ts.

const header = (h: unknown) => (typeof h === 'string' ? h : undefined);

export async function providerWebhookRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  // The signature covers the exact bytes sent: this scope keeps the body as text.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => done(null, body));

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/webhooks/:server_id/:connection_id',
    operationId: 'receiveProviderWebhook',
    summary: 'Inbound provider event for one connection, verified with its webhook secret (Standard Webhooks headers)',
    tags: ['connections'],
    auth: 'open',
    bodyLimit: INBOUND_WEBHOOK_MAX_BYTES,
    params: z.object({ server_id: z.string().min(1).max(64), connection_id: IdParam }),
    responses: { 200: z.object({ received: z.literal(true).describe('True: the webhook was verified and recorded.'), delivery_id: z.string(), event_type: z.literal('connection.webhook_received') }) },
    errors: [[400, 'invalid_webhook_body'], [400, 'webhook_timestamp_stale'], [401, 'webhook_signature_invalid'], [404, 'not_found'], [409, 'webhook_replayed'], [413, 'payload_too_large']],
    async handler(ctx) {
      const { params, req } = ctx;
      const id = await receiveProviderWebhook(ctx.deps, ctx.run.bind(ctx), {
        serverId: params.server_id,
        connectionId: params.connection_id,
        id: header(req.headers['webhook-id']),
        timestamp: header(req.headers['webhook-timestamp']),
        signature: header(req.headers['webhook-signature']),
        body: typeof req.body === 'string' ? req.body : '',
      });
      return { status: 200, body: { received: true as const, delivery_id: id, event_type: 'connection.webhook_received' as const } };
    },
  });
}
