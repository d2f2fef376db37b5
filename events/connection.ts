import { z } from 'zod';
import { IsoTime } from './common.ts';

// Facts of provider connections (stream `connection-<ca_id>`), of the slot
// that holds the one live connection per project, server and end user
// (stream `connection_slot-<org>.<project>.<server>.<user|->`), and of inbound
// provider webhooks (stream `connection_webhook-<ca_id>.<delivery hash>`, whose
// existence is the replay guard). Secrets are in the vault: events carry
// references (`*_ref`) and public parts (certificate metadata) only.

const Json = z.record(z.string(), z.unknown());

export const CertMetadata = z.union([
  z.object({ issuer: z.string(), subject: z.string(), valid_from: IsoTime, valid_to: IsoTime, fingerprint_sha256: z.string(), serial_number: z.string() }),
  z.object({}).strict(),
]);

export const ConnectionCreated = z.object({
  connection_id: z.string(),
  org_id: z.string(),
  project_id: z.string(),
  server_id: z.string(),
  auth_type: z.string(),
  user_id: z.string().nullable(),
  display_name: z.string().nullable(),
  connection_metadata: Json,
  cert_metadata: CertMetadata,
  secret_ref: z.string(),
  expires_at: IsoTime.nullable(),
  created_at: IsoTime,
  /** Provider metadata written by an OAuth callback or provisioning (scope, refresh_ref, account_id); absent for a pasted key. */
  metadata: Json.nullable().optional(),
});

export const ConnectionCredentialRotated = z.object({
  connection_id: z.string(),
  secret_ref: z.string(),
  previous_secret_ref: z.string(),
  cert_metadata: CertMetadata,
  display_name: z.string().nullable().optional(),
  connection_metadata: Json.optional(),
  expires_at: IsoTime.nullable(),
  at: IsoTime,
  /** Provider metadata replaced by an OAuth callback or a token refresh. */
  metadata: Json.nullable().optional(),
});

export const ConnectionRevoked = z.object({ connection_id: z.string(), from: z.string(), purged_refs: z.array(z.string()), at: IsoTime });
export const ConnectionMetadataUpdated = z.object({ connection_id: z.string(), connection_metadata: Json, at: IsoTime });
export const ConnectionWebhookSecretSet = z.object({ connection_id: z.string(), webhook_secret_ref: z.string(), previous_webhook_secret_ref: z.string().nullable(), at: IsoTime });
export const ConnectionDeleted = z.object({ connection_id: z.string(), purged_refs: z.array(z.string()), at: IsoTime });

export const ConnectionWebhookReceived = z.object({
  connection_id: z.string(),
  server_id: z.string(),
  delivery_id: z.string(),
  provider_event_type: z.string().nullable(),
  payload: z.unknown(),
  received_at: IsoTime,
});

export const ConnectionSlotClaimed = z.object({ connection_id: z.string(), at: IsoTime });
export const ConnectionSlotReleased = z.object({ connection_id: z.string(), at: IsoTime });

export const connectionEvents = {
  'connection.created': ConnectionCreated,
  'connection.credential_rotated': ConnectionCredentialRotated,
  'connection.revoked': ConnectionRevoked,
  'connection.metadata_updated': ConnectionMetadataUpdated,
  'connection.webhook_secret_set': ConnectionWebhookSecretSet,
  'connection.deleted': ConnectionDeleted,
  'connection.webhook_received': ConnectionWebhookReceived,
  'connection_slot.claimed': ConnectionSlotClaimed,
  'connection_slot.released': ConnectionSlotReleased,
} as const;
