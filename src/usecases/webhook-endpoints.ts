import type { Tenant } from '../../commands/consumer.ts';
import { type Endpoint, webhookDecider, webhookStream } from '../../commands/webhook.ts';
import { Rejection } from '../eventstore/handler.ts';
import type { Ports, RunCommand } from './context.ts';

// Outbound webhook endpoints ("triggers"): what the routes and the project
// cascade share.

/**
 * Deletes an endpoint: its signing secrets (current and previous) are purged
 * first (`secret_purge_failed`, nothing deleted, when they cannot be), then
 * `webhook_endpoint.deleted`. Used by DELETE /v1/webhook-endpoints/{id} and by
 * the project cascade; repeating it after a crash changes nothing already done.
 */
export async function deleteWebhookEndpoint(ports: Pick<Ports, 'vault'>, run: RunCommand, tenant: Tenant, e: Endpoint): Promise<void> {
  try {
    await ports.vault.delete(tenant.orgId, e.secretRef);
    if (e.previousSecret) await ports.vault.delete(tenant.orgId, e.previousSecret.ref);
  } catch {
    throw new Rejection('secret_purge_failed', 'the signing secret could not be purged; nothing was deleted', { retriable: true });
  }
  await run(webhookDecider, webhookStream(e.id), { type: 'delete', tenant }, { serialize: true, orgId: tenant.orgId, projectId: tenant.projectId });
}
