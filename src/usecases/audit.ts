import { type Acknowledgement, auditConfigDecider, auditConfigStream, incidentDecider, incidentStream, type Thresholds } from '../../commands/audit.ts';
import { entryPayloads } from '../../projections/audit.ts';
import type { VerificationRow } from '../audit/health.ts';
import { UNWITNESSED_TYPES } from '../audit/witness-client.ts';
import { loadState } from '../eventstore/handler.ts';
import { isoText as TS } from '../postgres/iso-text.ts';
import { REWIND_INCIDENT_KIND } from '../recovery.ts';
import type { Ports, RunCommand, Tenant } from './context.ts';

// The audit surface's reads and writes (spec 4.10, 4.12): the chain's events,
// the verification thresholds, the chain's health, incidents and their
// acknowledgement. The HTTP routes (src/http/audit/audit.ts, audit-config.ts) parse
// the request and shape the answer; the export bundle is src/audit/export.ts.

const DAY_MS = 86_400_000;
const OPEN_LIST_MAX = 20;

export type AuditEventView = { sequence_number: number; event_type: string; happened_at: string; payload: Record<string, unknown> | null; prev_hash: string; entry_hash: string };
export type AuditConfigView = Thresholds & { org_id: string; initial_walk_completed_at: string | null; created_at: string; updated_at: string };
export type IncidentView = {
  id: string;
  org_id: string;
  kind: string;
  detail: string;
  detected_at: string;
  detected_at_sequence: number;
  status: 'open' | 'acknowledged';
  anpd_notification_status: 'not_required' | 'notified' | 'pending_assessment';
  created_at: string;
};
export type WitnessLagView = { name: string; verifier_key: string; cosigned_size: number; cosigned_at: string | null; lag_entries: number };
export type ActionableStatus = 'verifying' | 'healthy' | 'catching_up' | 'link_unverifiable' | 'degraded' | 'broken';
export type HealthView = {
  status: 'healthy' | 'degraded';
  actionable_status: ActionableStatus;
  detail: string;
  last_sequence_number: number;
  last_checked_at: string | null;
  verification: {
    window_days: number;
    watermark_sequence: number;
    coverage_ratio: number;
    hot_bucket_max_staleness_seconds: number | null;
    writer_tip_check_at: string | null;
    chain_link_check: {
      unverifiable_segments: number;
      oldest_unverifiable_segment: { from_sequence: number; to_sequence: number; reason: string; first_detected_at: string } | null;
      writer_tip_link_unverifiable: boolean;
    };
  };
  incidents: { open_count: number; acknowledged_count_30d: number; open_truncated: boolean; open: { id: string; detected_at: string; detected_at_sequence: number }[] };
  initial_walk: { in_progress: boolean; events_processed: number };
  witnesses: WitnessLagView[];
};

/** Each configured witness: the largest size it cosigned and how many entries (other than cosignatures and incidents) it has yet to witness. */
async function witnessLag(ports: Pick<Ports, 'db' | 'auditWitnesses'>, orgId: string): Promise<WitnessLagView[]> {
  const configured = ports.auditWitnesses ?? [];
  if (configured.length === 0) return [];
  const { rows } = await ports.db.query<{ witness: string; size: number; at: string }>(`SELECT witness, size::int, ${TS('cosigned_at')} AS at FROM audit_cosignatures WHERE org_id = $1`, [orgId]);
  const last = Number((await ports.db.query<{ s: string | null }>('SELECT max(sequence_number)::text AS s FROM audit_events WHERE org_id = $1 AND event_type <> ALL($2)', [orgId, [...UNWITNESSED_TYPES]])).rows[0]?.s ?? 0);
  return configured.map((w) => {
    const r = rows.find((x) => x.witness === w.key.name);
    return { name: w.key.name, verifier_key: w.vkey, cosigned_size: r?.size ?? 0, cosigned_at: r?.at ?? null, lag_entries: Math.max(0, last - (r?.size ?? 0)) };
  });
}

/** The organization's verification thresholds, with when they were set. */
export async function readAuditConfig(ports: Pick<Ports, 'db' | 'store'>, orgId: string): Promise<AuditConfigView> {
  const { state } = await loadState(ports.store, auditConfigStream(orgId), auditConfigDecider);
  const { rows } = await ports.db.query<{ created_at: string; updated_at: string | null; initial: string | null }>(
    `SELECT ${TS('o.created_at')} AS created_at, ${TS('c.updated_at')} AS updated_at, ${TS('c.initial_walk_completed_at')} AS initial
     FROM orgs o LEFT JOIN audit_configs c ON c.org_id = o.org_id WHERE o.org_id = $1`,
    [orgId],
  );
  const created = rows[0]?.created_at ?? new Date(0).toISOString();
  return { org_id: orgId, ...state.thresholds, initial_walk_completed_at: state.initialWalkAt ?? rows[0]?.initial ?? null, created_at: created, updated_at: rows[0]?.updated_at ?? created };
}

/** Change thresholds (the decider refuses what breaks the regulatory minimum or the windows' order); the new config. */
export async function updateAuditConfig(ports: Pick<Ports, 'db' | 'store'>, run: RunCommand, orgId: string, patch: Partial<Thresholds>): Promise<AuditConfigView> {
  await run(auditConfigDecider, auditConfigStream(orgId), { type: 'update', orgId, patch }, { serialize: true });
  return readAuditConfig(ports, orgId);
}

function classify(
  v: VerificationRow | undefined,
  rewound: { id: string; detail: string } | undefined,
  gaps: VerificationRow['gaps'],
  openCount: number,
  staleness: number | null,
  hotMax: number,
  tip: number,
  watermark: number,
): { actionable: ActionableStatus; detail: string } {
  if (rewound) return { actionable: 'broken', detail: `The database lost writes this service had acknowledged (incident ${rewound.id}): ${rewound.detail}` };
  if (!v || v.last_checked_at === null) {
    return { actionable: 'verifying', detail: v?.in_progress ? 'The first verification walk of this chain is in progress.' : 'No verification run has happened yet for this chain.' };
  }
  if (v.first_problem) return { actionable: 'broken', detail: `Verification found a break at sequence ${v.first_problem.sequence_number} (${v.first_problem.kind}).` };
  if (gaps.length > 0) return { actionable: 'link_unverifiable', detail: `${gaps.length} stretch(es) of the chain cannot be linked; the oldest starts at sequence ${gaps[0]!.from_sequence}.` };
  if (staleness !== null && staleness > hotMax) return { actionable: 'degraded', detail: `The last verification is ${staleness} s old, beyond the hot staleness bound of ${hotMax} s.` };
  if (openCount > 0) return { actionable: 'degraded', detail: `The chain verifies, but ${openCount} incident(s) are still open.` };
  if (tip > watermark) return { actionable: 'catching_up', detail: `Verified up to sequence ${watermark}; ${tip - watermark} newer entries await the next walk.` };
  return { actionable: 'healthy', detail: `Verified up to the tip, sequence ${tip}.` };
}

/** Verification health of the organization's chain. */
export async function auditHealth(ports: Pick<Ports, 'db' | 'store' | 'now' | 'auditWitnesses'>, orgId: string): Promise<HealthView> {
  const cfg = await readAuditConfig(ports, orgId);
  const tip = Number((await ports.db.query<{ tip: string | null }>('SELECT max(sequence_number)::text AS tip FROM audit_events WHERE org_id = $1', [orgId])).rows[0]?.tip ?? 0);
  const v = (
    await ports.db.query<VerificationRow>(
      `SELECT org_id, ${TS('last_checked_at')} AS last_checked_at, ${TS('writer_tip_check_at')} AS writer_tip_check_at, watermark_sequence::int, tip_sequence::int, ok, first_problem, gaps, events_processed::int, in_progress
       FROM audit_verification WHERE org_id = $1`,
      [orgId],
    )
  ).rows[0];
  const now = ports.now().getTime();
  const openRows = (await ports.db.query<{ id: string; detected_at: string; detected_at_sequence: number; kind: string; detail: string }>(
    `SELECT id, ${TS('detected_at')} AS detected_at, detected_at_sequence::int, kind, detail FROM audit_incidents WHERE org_id = $1 AND status = 'open' ORDER BY audit_incidents.detected_at, id`,
    [orgId],
  )).rows;
  const open = openRows.map(({ id, detected_at, detected_at_sequence }) => ({ id, detected_at, detected_at_sequence }));
  // The database lost acknowledged commits (src/recovery.ts): broken until a person acknowledges the incident.
  const rewound = openRows.find((r) => r.kind === REWIND_INCIDENT_KIND);
  const acked = Number((await ports.db.query<{ n: string }>(`SELECT count(*)::text AS n FROM audit_incidents WHERE org_id = $1 AND status = 'acknowledged' AND acknowledged_at > $2`, [orgId, new Date(now - 30 * DAY_MS).toISOString()])).rows[0]!.n);
  const checked = v?.last_checked_at ? Date.parse(v.last_checked_at) : null;
  const staleness = checked === null ? null : Math.max(0, Math.floor((now - checked) / 1000));
  const watermark = v?.watermark_sequence ?? 0;
  const gaps = v?.gaps ?? [];
  const tipGap = gaps.some((g) => g.to_sequence >= tip);
  const { actionable, detail } = classify(v, rewound, gaps, open.length, staleness, cfg.hot_max_staleness_seconds, tip, watermark);
  const underVerifying = actionable === 'verifying' && tip > watermark;
  const status = actionable === 'healthy' || actionable === 'catching_up' || (actionable === 'verifying' && !underVerifying) ? 'healthy' : 'degraded';
  return {
    status: open.length > 0 ? 'degraded' : status,
    actionable_status: actionable,
    detail,
    last_sequence_number: tip,
    last_checked_at: v?.last_checked_at ?? null,
    verification: {
      window_days: cfg.verification_window_days,
      watermark_sequence: watermark,
      coverage_ratio: tip === 0 ? 1 : Math.min(1, watermark / tip),
      hot_bucket_max_staleness_seconds: staleness,
      writer_tip_check_at: v?.writer_tip_check_at ?? null,
      chain_link_check: { unverifiable_segments: gaps.length, oldest_unverifiable_segment: gaps[0] ?? null, writer_tip_link_unverifiable: tipGap },
    },
    incidents: { open_count: open.length, acknowledged_count_30d: acked, open_truncated: open.length > OPEN_LIST_MAX, open: open.slice(0, OPEN_LIST_MAX) },
    initial_walk: { in_progress: v?.in_progress ?? false, events_processed: v?.events_processed ?? 0 },
    witnesses: await witnessLag(ports, orgId),
  };
}

/** A page of the chain, newest first: within [from, to] (epoch ms), below `before`, of an exact type or a prefix ending in a dot. */
export async function listAuditEvents(
  ports: Pick<Ports, 'db' | 'store'>,
  tenant: Pick<Tenant, 'orgId'>,
  q: { from: number; to: number; limit: number; before?: string; eventType?: string },
): Promise<{ events: AuditEventView[]; next_before_sequence: number | null }> {
  const params: unknown[] = [tenant.orgId, new Date(q.from).toISOString(), new Date(q.to).toISOString(), q.limit];
  let where = 'org_id = $1 AND happened_at >= $2 AND happened_at <= $3';
  if (q.before !== undefined) {
    params.push(q.before);
    where += ` AND sequence_number < $${params.length}`;
  }
  const type = q.eventType;
  if (type !== undefined) {
    params.push(type.endsWith('.') ? type.replace(/[\\%_]/g, (c) => '\\' + c) + '%' : type);
    where += type.endsWith('.') ? ` AND event_type LIKE $${params.length}` : ` AND event_type = $${params.length}`;
  }
  const { rows: stored } = await ports.db.query<AuditEventView & { payload_in_log: boolean; position: string }>(
    `SELECT sequence_number::int, event_type, ${TS('happened_at')} AS happened_at, payload, payload_in_log, prev_hash, entry_hash, position FROM audit_events WHERE ${where} ORDER BY audit_events.sequence_number DESC LIMIT $4`,
    params,
  );
  const rows: AuditEventView[] = await entryPayloads(ports.store, stored);
  return { events: rows, next_before_sequence: rows.length === q.limit ? rows[rows.length - 1]!.sequence_number : null };
}

const INCIDENT_COLUMNS = `id, org_id, kind, detail, ${TS('detected_at')} AS detected_at, detected_at_sequence::int, status, anpd_notification_status, ${TS('created_at')} AS created_at`;

/** The organization's incidents of the given statuses, newest first. */
export async function listIncidents(ports: Pick<Ports, 'db'>, tenant: Pick<Tenant, 'orgId'>, statuses: readonly string[]): Promise<IncidentView[]> {
  const { rows } = await ports.db.query<IncidentView>(`SELECT ${INCIDENT_COLUMNS} FROM audit_incidents WHERE org_id = $1 AND status = ANY($2) ORDER BY audit_incidents.detected_at DESC, id`, [tenant.orgId, [...statuses]]);
  return rows;
}

/** Acknowledge an incident (the decider refuses another organization's, an unknown or an acknowledged one); the incident with its acknowledgement. */
export async function acknowledgeIncident(
  ports: Pick<Ports, 'db'>,
  run: RunCommand,
  tenant: Pick<Tenant, 'orgId'>,
  input: { id: string; ack: Acknowledgement; by: string },
): Promise<IncidentView & { acknowledgement: Record<string, unknown> }> {
  await run(incidentDecider, incidentStream(input.id), { type: 'acknowledge', orgId: tenant.orgId, ack: input.ack, by: input.by });
  const { rows } = await ports.db.query<IncidentView & { acknowledgement: Record<string, unknown> }>(`SELECT ${INCIDENT_COLUMNS}, acknowledgement FROM audit_incidents WHERE id = $1`, [input.id]);
  return rows[0]!;
}
