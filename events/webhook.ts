import { z } from 'zod';
import { IsoTime } from './common.ts';

// Facts of an outbound webhook endpoint ("trigger"), stream `webhook_endpoint-<id>`.
// Signing secrets are in the vault; events name their references only.

export const WebhookStatus = z.enum(['active', 'paused', 'error']);

export const WebhookEndpointCreated = z.object({
  trigger_id: z.string(),
  org_id: z.string(),
  project_id: z.string(),
  name: z.string(),
  event: z.string(),
  webhook_url: z.string(),
  server_id: z.string().nullable(),
  secret_ref: z.string(),
  created_at: IsoTime,
});

export const WebhookEndpointUpdated = z.object({ trigger_id: z.string(), name: z.string().optional(), webhook_url: z.string().optional() });

export const WebhookEndpointStatusChanged = z.object({
  trigger_id: z.string(),
  from: WebhookStatus,
  to: WebhookStatus,
  reason: z.enum(['requested', 'consecutive_dead_deliveries']),
  at: IsoTime,
});

export const WebhookEndpointSecretRotated = z.object({
  trigger_id: z.string(),
  secret_ref: z.string(),
  previous_secret_ref: z.string(),
  previous_valid_until: IsoTime,
  at: IsoTime,
});

export const WebhookEndpointDeleted = z.object({ trigger_id: z.string(), at: IsoTime });

export const webhookEvents = {
  'webhook_endpoint.created': WebhookEndpointCreated,
  'webhook_endpoint.updated': WebhookEndpointUpdated,
  'webhook_endpoint.status_changed': WebhookEndpointStatusChanged,
  'webhook_endpoint.secret_rotated': WebhookEndpointSecretRotated,
  'webhook_endpoint.deleted': WebhookEndpointDeleted,
} as const;
