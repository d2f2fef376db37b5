import { createHmac, timingSafeEqual } from 'node:crypto';
import { webhookReceiptDecider, webhookReceiptStream } from '../../commands/connection.ts';
import { Rejection } from '../eventstore/handler.ts';
import { INBOUND_WEBHOOK_TOLERANCE_SECONDS } from '../limits.ts';
import type { Ports, RunCommand } from './context.ts';

// Inbound provider webhooks (spec 4.4, 6 item 6): a delivery for one
// connection, verified with the connection's webhook secret under the
// provider's declared scheme. `standard_webhooks`: headers webhook-id,
// webhook-timestamp (Unix seconds, at most 5 minutes off) and
// webhook-signature (space-separated `v1,<base64 HMAC-SHA256(key,
// "<id>.<timestamp>.<raw body>")>`, key = the base64 after `whsec_`). A valid
// delivery is recorded as `connection.webhook_received` on a receipt stream
// appended with no_stream (a reused delivery id is refused), and the outbound
// webhook dispatcher fans it out to endpoints subscribed to that event and
// bound to the server_id. Anything unverifiable writes nothing.

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

export type InboundDelivery = { serverId: string; connectionId: string; id: string | undefined; timestamp: string | undefined; signature: string | undefined; body: string };

/** Verifies and records one delivery; answers its delivery id. */
export async function receiveProviderWebhook(ports: Pick<Ports, 'providers' | 'vault' | 'now'>, run: RunCommand, d: InboundDelivery): Promise<string> {
  const refused = (message: string) => new Rejection('webhook_signature_invalid', message);
  const c = await ports.providers.connectionById(d.connectionId);
  const p = ports.providers.runtime.catalog.get(d.serverId);
  if (!c || !p || c.server_id !== d.serverId || c.status === 'revoked') throw new Rejection('not_found', 'no connection receives webhooks here');
  if (!p.inbound_webhooks || !c.webhook_secret_ref) throw refused('no webhook secret is set for this connection');
  const { id, timestamp: ts, signature: sig, body } = d;
  if (!id || !/^[\x21-\x7e]{1,200}$/.test(id) || !ts || !/^\d{1,12}$/.test(ts) || !sig) throw refused('webhook-id, webhook-timestamp and webhook-signature are required');
  const secret = await ports.vault.get(c.org_id, c.webhook_secret_ref);
  if (!secret || !signatureMatches(secret.toString('utf8'), id, ts, body, sig)) throw refused('the signature does not match');
  const skew = Math.abs(ports.now().getTime() / 1000 - Number(ts));
  if (skew > INBOUND_WEBHOOK_TOLERANCE_SECONDS) throw new Rejection('webhook_timestamp_stale', `the timestamp is more than ${INBOUND_WEBHOOK_TOLERANCE_SECONDS} seconds from now`);
  let payload: unknown;
  try {
    payload = body === '' ? null : JSON.parse(body);
  } catch {
    throw new Rejection('invalid_webhook_body', 'the body is not JSON');
  }
  const o = payload as Record<string, unknown> | null;
  const typeOf = o && typeof o === 'object' ? (typeof o.type === 'string' ? o.type : typeof o.event === 'string' ? o.event : null) : null;
  await run(
    webhookReceiptDecider,
    webhookReceiptStream(c.id, id),
    { type: 'receive', data: { connection_id: c.id, server_id: c.server_id, delivery_id: id, provider_event_type: typeOf?.slice(0, 200) ?? null, payload, received_at: ports.now().toISOString() } },
    { orgId: c.org_id, projectId: c.project_id },
  );
  return id;
}
