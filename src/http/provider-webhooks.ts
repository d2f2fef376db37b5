import { createHmac, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { webhookReceiptDecider, webhookReceiptStream } from '../../commands/connection.ts';
import { INBOUND_WEBHOOK_MAX_BYTES, INBOUND_WEBHOOK_TOLERANCE_SECONDS } from '../limits.ts';
import { ApiError } from './errors.ts';
import { defineRoute, type AppDeps } from './route.ts';
import { IdParam } from './schemas.ts';

// Inbound provider webhooks (spec 4.4, 6 item 6): POST
// /v1/webhooks/{server_id}/{connection_id}, verified with the connection's
// webhook secret under the provider's declared scheme. `standard_webhooks`:
// headers webhook-id, webhook-timestamp (Unix seconds, at most 5 minutes off)
// and webhook-signature (space-separated `v1,<base64 HMAC-SHA256(key,
// "<id>.<timestamp>.<raw body>")>`, key = the base64 after `whsec_`). A valid
// delivery is recorded as `connection.webhook_received` on a receipt stream
// appended with no_stream (a reused delivery id is refused), and the outbound
// webhook dispatcher fans it out to endpoints subscribed to that event and
// bound to the server_id. Anything unverifiable writes nothing.

const header = (h: unknown) => (typeof h === 'string' ? h : undefined);

function signatureMatches(secret: string, id: string, ts: string, body: string, given: string): boolean {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${ts}.${body}`).digest();
  return given.split(' ').some((part) => {
    const [version, sig] = part.split(',', 2);
    if (version !== 'v1' || !sig) return false;
    const got = Buffer.from(sig, 'base64');
    return got.length === expected.length && timingSafeEqual(got, expected);
  });
}

export async function providerWebhookRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  // The signature covers the exact bytes sent: this scope keeps the body as text.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string', bodyLimit: INBOUND_WEBHOOK_MAX_BYTES }, (_req, body, done) => done(null, body));

  const refused = (code: string, message: string, status = 401) => new ApiError(status, code, message);

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/webhooks/:server_id/:connection_id',
    operationId: 'receiveProviderWebhook',
    summary: 'Inbound provider event for one connection, verified with its webhook secret (Standard Webhooks headers)',
    tags: ['connections'],
    auth: 'open',
    params: z.object({ server_id: z.string().min(1).max(64), connection_id: IdParam }),
    responses: { 200: z.object({ received: z.literal(true), delivery_id: z.string(), event_type: z.literal('connection.webhook_received') }) },
    errors: [[400, 'invalid_webhook_body'], [400, 'webhook_timestamp_stale'], [401, 'webhook_signature_invalid'], [404, 'not_found'], [409, 'webhook_replayed'], [413, 'payload_too_large']],
    async handler(ctx) {
      const { params, req, deps } = ctx;
      const c = await deps.providers.connectionById(params.connection_id);
      const p = deps.providers.runtime.catalog.get(params.server_id);
      if (!c || !p || c.server_id !== params.server_id || c.status === 'revoked') throw new ApiError(404, 'not_found', 'no connection receives webhooks here');
      if (!p.inbound_webhooks || !c.webhook_secret_ref) throw refused('webhook_signature_invalid', 'no webhook secret is set for this connection');
      const id = header(req.headers['webhook-id']);
      const ts = header(req.headers['webhook-timestamp']);
      const sig = header(req.headers['webhook-signature']);
      const body = typeof req.body === 'string' ? req.body : '';
      if (!id || !/^[\x21-\x7e]{1,200}$/.test(id) || !ts || !/^\d{1,12}$/.test(ts) || !sig) throw refused('webhook_signature_invalid', 'webhook-id, webhook-timestamp and webhook-signature are required');
      const secret = await deps.vault.get(c.org_id, c.webhook_secret_ref);
      if (!secret || !signatureMatches(secret.toString('utf8'), id, ts, body, sig)) throw refused('webhook_signature_invalid', 'the signature does not match');
      const skew = Math.abs(deps.now().getTime() / 1000 - Number(ts));
      if (skew > INBOUND_WEBHOOK_TOLERANCE_SECONDS) throw new ApiError(400, 'webhook_timestamp_stale', `the timestamp is more than ${INBOUND_WEBHOOK_TOLERANCE_SECONDS} seconds from now`);
      let payload: unknown;
      try {
        payload = body === '' ? null : JSON.parse(body);
      } catch {
        throw new ApiError(400, 'invalid_webhook_body', 'the body is not JSON');
      }
      const o = payload as Record<string, unknown> | null;
      const typeOf = o && typeof o === 'object' ? (typeof o.type === 'string' ? o.type : typeof o.event === 'string' ? o.event : null) : null;
      await ctx.run(
        webhookReceiptDecider,
        webhookReceiptStream(c.id, id),
        { type: 'receive', data: { connection_id: c.id, server_id: c.server_id, delivery_id: id, provider_event_type: typeOf?.slice(0, 200) ?? null, payload, received_at: deps.now().toISOString() } },
        { orgId: c.org_id, projectId: c.project_id },
      );
      return { status: 200, body: { received: true as const, delivery_id: id, event_type: 'connection.webhook_received' as const } };
    },
  });
}
