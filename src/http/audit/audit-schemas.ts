import { z } from 'zod';
import type { Acknowledgement } from '../../../commands/audit.ts';
import { AuditThresholds } from '../../../events/audit.ts';
import { ApiError } from '../kernel/errors.ts';
import { Timestamp } from '../kernel/schemas.ts';

// The audit surface's wire shapes and request parsing (no routes): shared by
// the chain's routes (src/http/audit/audit.ts) and the config and health routes
// (src/http/audit/audit-config.ts).

export const DAY_MS = 86_400_000;

export const AuditEvent = z
  .object({ sequence_number: z.number().int(), event_type: z.string(), happened_at: Timestamp, payload: z.record(z.string(), z.unknown()).nullable(), prev_hash: z.string(), entry_hash: z.string() })
  .meta({ id: 'AuditEvent' });
export const AuditConfig = AuditThresholds.extend({
  org_id: z.string(),
  initial_walk_completed_at: Timestamp.nullable(),
  created_at: Timestamp,
  updated_at: Timestamp,
}).meta({ id: 'AuditConfig' });
export const Incident = z
  .object({ id: z.string(), org_id: z.string(), kind: z.string().describe('What was detected, as a stable code (e.g. `sequence_gap`, `root_mismatch`, `witness_refused`).'), detail: z.string().describe('What was detected, in a sentence.'), detected_at: Timestamp, detected_at_sequence: z.number().int(), status: z.enum(['open', 'acknowledged']).describe('`open` until a person acknowledges it, then `acknowledged`.'), anpd_notification_status: z.enum(['not_required', 'notified', 'pending_assessment']), created_at: Timestamp })
  .meta({ id: 'AuditIncident' });
const WitnessLag = z
  .object({ name: z.string(), verifier_key: z.string(), cosigned_size: z.number().int(), cosigned_at: Timestamp.nullable(), lag_entries: z.number().int() })
  .meta({ id: 'AuditWitnessLag' });
export const Health = z
  .object({
    status: z.enum(['healthy', 'degraded']).describe('`healthy`, or `degraded`: a detected break, an open incident, an uncertified stretch, or a chain under verification whose tip is above the watermark.'),
    actionable_status: z.enum(['verifying', 'healthy', 'catching_up', 'link_unverifiable', 'degraded', 'broken']),
    detail: z.string().describe('The state in one sentence: what was found, or how far verification has come.'),
    last_sequence_number: z.number().int(),
    last_checked_at: Timestamp.nullable(),
    verification: z.object({
      window_days: z.number().int(),
      watermark_sequence: z.number().int(),
      coverage_ratio: z.number(),
      hot_bucket_max_staleness_seconds: z.number().int().nullable(),
      writer_tip_check_at: Timestamp.nullable(),
      chain_link_check: z.object({
        unverifiable_segments: z.number().int(),
        oldest_unverifiable_segment: z.object({ from_sequence: z.number().int(), to_sequence: z.number().int(), reason: z.string(), first_detected_at: Timestamp }).nullable(),
        writer_tip_link_unverifiable: z.boolean(),
      }),
    }).describe("How far the verifier has re-checked the chain's hashes and links."),
    incidents: z.object({ open_count: z.number().int(), acknowledged_count_30d: z.number().int(), open_truncated: z.boolean(), open: z.array(z.object({ id: z.string(), detected_at: Timestamp, detected_at_sequence: z.number().int() })) }),
    initial_walk: z.object({ in_progress: z.boolean(), events_processed: z.number().int() }),
    witnesses: z.array(WitnessLag),
  })
  .meta({ id: 'AuditHealth' });

export const ThresholdPatch = z.strictObject({
  verification_window_days: z.number().int().min(1).max(36_500).optional(),
  hot_window_days: z.number().int().min(1).max(36_500).optional(),
  hot_max_staleness_seconds: z.number().int().min(1).max(2_147_483_647).optional(),
  warm_window_days: z.number().int().min(1).max(36_500).optional(),
  warm_max_staleness_seconds: z.number().int().min(1).max(2_147_483_647).optional(),
  cold_max_staleness_seconds: z.number().int().min(1).max(2_147_483_647).optional(),
});

/** Clamp rules of spec 4.12: default 50; 0 or not a number → 50; negative → 1; at most 200. */
export function clampAuditLimit(raw: unknown): number {
  if (typeof raw !== 'string' || raw.trim() === '') return 50;
  const n = Number(raw);
  if (!Number.isFinite(n) || n === 0) return 50;
  if (n < 0) return 1;
  return Math.min(200, Math.max(1, Math.trunc(n)));
}

const ISO = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/;
export function isoParam(raw: unknown, field: string, dflt: number): number {
  if (raw === undefined) return dflt;
  const t = typeof raw === 'string' && ISO.test(raw) ? Date.parse(raw) : Number.NaN;
  if (!Number.isFinite(t)) throw new ApiError(400, 'invalid_iso_8601', `${field} must be an ISO 8601 date-time`, { field });
  return t;
}

// Control characters stripped (spec: "max 8000 chars after control stripping"),
// and a lone surrogate made U+FFFD, so the text is one the ledger can hold.
// eslint-disable-next-line no-control-regex
const stripControls = (s: string) => s.replace(/[\u0000-\u001f\u007f]/g, '').replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
const fieldInvalid = (field: string, reason: string) => new ApiError(400, 'field_invalid', `${field} is invalid: ${reason}`, { field, reason });

/** The acknowledge body, checked in the spec's order; one field_invalid names the first bad field. */
export function parseAcknowledgement(b: Record<string, unknown>): Acknowledgement {
  if (b.anpd_notification_status === 'pending_assessment') {
    throw new ApiError(400, 'pending_assessment_not_terminal', 'pending_assessment is not a closing value: choose not_required or notified');
  }
  if (b.personal_data_affected === undefined || b.personal_data_affected === null) throw fieldInvalid('personal_data_affected', 'empty');
  if (typeof b.personal_data_affected !== 'boolean') throw fieldInvalid('personal_data_affected', 'invalid_type');
  const summary = typeof b.resolution_summary === 'string' ? stripControls(b.resolution_summary) : '';
  if (summary.trim() === '') throw fieldInvalid('resolution_summary', 'empty');
  if (summary.length > 8000) throw fieldInvalid('resolution_summary', 'too_long');
  if (b.anpd_notification_status === undefined || b.anpd_notification_status === null || b.anpd_notification_status === '') throw fieldInvalid('anpd_notification_status', 'empty');
  if (typeof b.anpd_notification_status !== 'string') throw fieldInvalid('anpd_notification_status', 'invalid_type');
  if (!['not_required', 'notified'].includes(b.anpd_notification_status)) throw fieldInvalid('anpd_notification_status', 'invalid_enum');
  let reference: string | null = null;
  if (b.incident_reference !== undefined && b.incident_reference !== null) {
    if (typeof b.incident_reference !== 'string') throw fieldInvalid('incident_reference', 'invalid_type');
    reference = stripControls(b.incident_reference);
    if (reference.length > 256) throw fieldInvalid('incident_reference', 'too_long');
  }
  const from = b.affected_from_sequence ?? null;
  const to = b.affected_to_sequence ?? null;
  for (const [k, v] of [['affected_from_sequence', from], ['affected_to_sequence', to]] as const) {
    if (v !== null && (typeof v !== 'number' || !Number.isInteger(v) || v < 0)) throw fieldInvalid(k, 'invalid_type');
  }
  if ((from === null) !== (to === null)) throw fieldInvalid(from === null ? 'affected_from_sequence' : 'affected_to_sequence', 'paired_required');
  if (from !== null && to !== null && (from as number) > (to as number)) throw fieldInvalid('affected_from_sequence', 'range_inconsistent');
  return {
    personal_data_affected: b.personal_data_affected,
    resolution_summary: summary,
    anpd_notification_status: b.anpd_notification_status as 'not_required' | 'notified',
    incident_reference: reference,
    affected_from_sequence: from as number | null,
    affected_to_sequence: to as number | null,
  };
}
