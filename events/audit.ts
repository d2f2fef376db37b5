import { z } from 'zod';
import { IsoTime } from './common.ts';

// Facts of the audit surface. Entries and checkpoints are written by the
// sealer to `audit-<org>` and `audit_checkpoint-<org>` (never sealed again);
// configuration and incidents are ordinary facts, sealed into the chain.

export const AuditEntrySealed = z.object({
  sequence_number: z.number().int().positive(),
  event_type: z.string(),
  happened_at: z.string(),
  payload: z.record(z.string(), z.unknown()).nullable(),
  payload_salt: z.string().nullable(),
  source: z.object({ event_id: z.string(), stream: z.string(), revision: z.string(), position: z.string() }),
  envelope: z.string(),
  prev_hash: z.string(),
  entry_hash: z.string(),
});

/**
 * A fact's entry in a version 2 chain on EventStoreDB (docs/audit-chain.md,
 * "Version 2 on EventStoreDB"): the fact's link, which PostgreSQL writes in the
 * fact's own metadata, written by the sealer as the next event of
 * `audit-<org>` (its revision + 1 is the sequence number). The entry is the
 * fact with this link; nothing of the fact's data is copied. `event_type`,
 * `happened_at` and `entry_hash` are what the audit read model serves; a
 * verifier recomputes the hash from the fact.
 */
export const AuditFactLinked = z.object({
  event_id: z.string(),
  stream: z.string(),
  revision: z.string(),
  position: z.string(),
  event_type: z.string(),
  happened_at: z.string(),
  link: z.string(),
  entry_hash: z.string(),
});

export const AuditCheckpointSigned = z.object({
  org_id: z.string(),
  size: z.number().int().nonnegative(),
  root_hash: z.string(),
  note: z.string(),
  key_name: z.string(),
  verifier_key: z.string(),
  signed_at: IsoTime,
});

export const AuditThresholds = z.object({
  verification_window_days: z.number().int(),
  hot_window_days: z.number().int(),
  hot_max_staleness_seconds: z.number().int(),
  warm_window_days: z.number().int(),
  warm_max_staleness_seconds: z.number().int(),
  cold_max_staleness_seconds: z.number().int(),
});

export const AuditConfigUpdated = AuditThresholds.partial().extend({ org_id: z.string(), at: IsoTime });

export const AuditInitialWalkCompleted = z.object({ org_id: z.string(), tip_sequence: z.number().int(), at: IsoTime });

export const AuditIncidentOpened = z.object({
  incident_id: z.string(),
  org_id: z.string(),
  kind: z.string(),
  detected_at_sequence: z.number().int(),
  detail: z.string(),
  detected_at: IsoTime,
});

export const AuditIncidentAcknowledged = z.object({
  incident_id: z.string(),
  personal_data_affected: z.boolean(),
  resolution_summary: z.string(),
  anpd_notification_status: z.enum(['not_required', 'notified']),
  incident_reference: z.string().nullable(),
  affected_from_sequence: z.number().int().nullable(),
  affected_to_sequence: z.number().int().nullable(),
  acknowledged_by: z.string(),
  acknowledged_at: IsoTime,
});

/**
 * A witness's cosignature (C2SP tlog-cosignature, Ed25519) of a signed
 * checkpoint, in the stream `audit_cosignature-<org>-<witness hash>`; sealed
 * into the chain like every fact.
 */
export const AuditCheckpointCosigned = z.object({
  org_id: z.string(),
  origin: z.string(),
  size: z.number().int().nonnegative(),
  root_hash: z.string(),
  witness: z.string(),
  witness_key: z.string(),
  /** The signature line, "— <witness> base64(key id || timestamp || signature)". */
  cosignature: z.string(),
  timestamp: z.number().int().positive(),
  cosigned_at: IsoTime,
});

export const auditEvents = {
  'audit.entry_sealed': AuditEntrySealed,
  'audit.fact_linked': AuditFactLinked,
  'audit.checkpoint_signed': AuditCheckpointSigned,
  'audit.config_updated': AuditConfigUpdated,
  'audit.initial_walk_completed': AuditInitialWalkCompleted,
  'audit.incident_opened': AuditIncidentOpened,
  'audit.incident_acknowledged': AuditIncidentAcknowledged,
  'audit.checkpoint_cosigned': AuditCheckpointCosigned,
} as const;

/** What the sealer writes: never subscribable as business events, never sealed again. */
export const SEALER_OUTPUT_TYPES: ReadonlySet<string> = new Set(['audit.entry_sealed', 'audit.fact_linked', 'audit.checkpoint_signed']);
