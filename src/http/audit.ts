import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { type Acknowledgement, auditConfigDecider, auditConfigStream, DEFAULT_THRESHOLDS, incidentDecider, incidentStream, type Thresholds } from '../../commands/audit.ts';
import { AuditThresholds } from '../../events/audit.ts';
import { bundleLines } from '../audit/export.ts';
import type { VerificationRow } from '../audit/health.ts';
import { UNWITNESSED_TYPES } from '../audit/witness-client.ts';
import { loadState } from '../eventstore/handler.ts';
import { REWIND_INCIDENT_KIND } from '../recovery.ts';
import { ApiError, forbidden } from './errors.ts';
import { defineRoute, type AppDeps, type Ctx } from './route.ts';
import { Timestamp, isoText as TS } from './schemas.ts';
import type { Auth } from './auth.ts';

// The audit surface (spec 4.10, 4.12): the chain's events, verification
// thresholds, health, incidents; and for auditors, the signed checkpoints and
// inclusion proofs (src/http/audit-proofs.ts).

const DAY_MS = 86_400_000;

const AuditEvent = z
  .object({ sequence_number: z.number().int(), event_type: z.string(), happened_at: Timestamp, payload: z.record(z.string(), z.unknown()).nullable(), prev_hash: z.string(), entry_hash: z.string() })
  .meta({ id: 'AuditEvent' });
const AuditConfig = AuditThresholds.extend({
  org_id: z.string(),
  initial_walk_completed_at: Timestamp.nullable(),
  created_at: Timestamp,
  updated_at: Timestamp,
}).meta({ id: 'AuditConfig' });
const Incident = z
  .object({ id: z.string(), org_id: z.string(), kind: z.string(), detail: z.string(), detected_at: Timestamp, detected_at_sequence: z.number().int(), status: z.enum(['open', 'acknowledged']), anpd_notification_status: z.enum(['not_required', 'notified', 'pending_assessment']), created_at: Timestamp })
  .meta({ id: 'AuditIncident' });
const WitnessLag = z
  .object({ name: z.string(), verifier_key: z.string(), cosigned_size: z.number().int(), cosigned_at: Timestamp.nullable(), lag_entries: z.number().int() })
  .meta({ id: 'AuditWitnessLag' });
const Health = z
  .object({
    status: z.enum(['healthy', 'degraded']),
    actionable_status: z.enum(['verifying', 'healthy', 'catching_up', 'link_unverifiable', 'degraded', 'broken']),
    detail: z.string(),
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
    }),
    incidents: z.object({ open_count: z.number().int(), acknowledged_count_30d: z.number().int(), open_truncated: z.boolean(), open: z.array(z.object({ id: z.string(), detected_at: Timestamp, detected_at_sequence: z.number().int() })) }),
    initial_walk: z.object({ in_progress: z.boolean(), events_processed: z.number().int() }),
    witnesses: z.array(WitnessLag),
  })
  .meta({ id: 'AuditHealth' });

const OPEN_LIST_MAX = 20;

/** Each configured witness: the largest size it cosigned and how many entries (other than cosignatures and incidents) it has yet to witness. */
async function witnessLag(deps: AppDeps, orgId: string): Promise<z.infer<typeof WitnessLag>[]> {
  const configured = deps.auditWitnesses ?? [];
  if (configured.length === 0) return [];
  const { rows } = await deps.db.query<{ witness: string; size: number; at: string }>(
    `SELECT DISTINCT ON (payload->>'witness') payload->>'witness' AS witness, (payload->>'size')::int AS size, ${TS('happened_at')} AS at
     FROM audit_events WHERE org_id = $1 AND event_type = 'audit.checkpoint_cosigned' AND payload IS NOT NULL ORDER BY payload->>'witness', (payload->>'size')::bigint DESC`,
    [orgId],
  );
  const last = Number((await deps.db.query<{ s: string | null }>('SELECT max(sequence_number)::text AS s FROM audit_events WHERE org_id = $1 AND event_type <> ALL($2)', [orgId, [...UNWITNESSED_TYPES]])).rows[0]?.s ?? 0);
  return configured.map((w) => {
    const r = rows.find((x) => x.witness === w.key.name);
    return { name: w.key.name, verifier_key: w.vkey, cosigned_size: r?.size ?? 0, cosigned_at: r?.at ?? null, lag_entries: Math.max(0, last - (r?.size ?? 0)) };
  });
}

async function readConfig(deps: AppDeps, orgId: string): Promise<z.infer<typeof AuditConfig>> {
  const { state } = await loadState(deps.store, auditConfigStream(orgId), auditConfigDecider);
  const { rows } = await deps.db.query<{ created_at: string; updated_at: string | null; initial: string | null }>(
    `SELECT ${TS('o.created_at')} AS created_at, ${TS('c.updated_at')} AS updated_at, ${TS('c.initial_walk_completed_at')} AS initial
     FROM orgs o LEFT JOIN audit_configs c ON c.org_id = o.org_id WHERE o.org_id = $1`,
    [orgId],
  );
  const created = rows[0]?.created_at ?? new Date(0).toISOString();
  return { org_id: orgId, ...state.thresholds, initial_walk_completed_at: state.initialWalkAt ?? rows[0]?.initial ?? null, created_at: created, updated_at: rows[0]?.updated_at ?? created };
}

async function health(deps: AppDeps, orgId: string): Promise<z.infer<typeof Health>> {
  const cfg = await readConfig(deps, orgId);
  const tip = Number((await deps.db.query<{ tip: string | null }>('SELECT max(sequence_number)::text AS tip FROM audit_events WHERE org_id = $1', [orgId])).rows[0]?.tip ?? 0);
  const v = (
    await deps.db.query<VerificationRow>(
      `SELECT org_id, ${TS('last_checked_at')} AS last_checked_at, ${TS('writer_tip_check_at')} AS writer_tip_check_at, watermark_sequence::int, tip_sequence::int, ok, first_problem, gaps, events_processed::int, in_progress
       FROM audit_verification WHERE org_id = $1`,
      [orgId],
    )
  ).rows[0];
  const now = deps.now().getTime();
  const openRows = (await deps.db.query<{ id: string; detected_at: string; detected_at_sequence: number; kind: string; detail: string }>(
    `SELECT id, ${TS('detected_at')} AS detected_at, detected_at_sequence::int, kind, detail FROM audit_incidents WHERE org_id = $1 AND status = 'open' ORDER BY detected_at, id`,
    [orgId],
  )).rows;
  const open = openRows.map(({ id, detected_at, detected_at_sequence }) => ({ id, detected_at, detected_at_sequence }));
  // The database lost acknowledged commits (src/recovery.ts): broken until a person acknowledges the incident.
  const rewound = openRows.find((r) => r.kind === REWIND_INCIDENT_KIND);
  const acked = Number((await deps.db.query<{ n: string }>(`SELECT count(*)::text AS n FROM audit_incidents WHERE org_id = $1 AND status = 'acknowledged' AND acknowledged_at > $2`, [orgId, new Date(now - 30 * DAY_MS).toISOString()])).rows[0]!.n);
  const checked = v?.last_checked_at ? Date.parse(v.last_checked_at) : null;
  const staleness = checked === null ? null : Math.max(0, Math.floor((now - checked) / 1000));
  const watermark = v?.watermark_sequence ?? 0;
  const gaps = v?.gaps ?? [];
  const tipGap = gaps.some((g) => g.to_sequence >= tip);
  let actionable: z.infer<typeof Health>['actionable_status'];
  let detail: string;
  if (rewound) {
    actionable = 'broken';
    detail = `The database lost writes this service had acknowledged (incident ${rewound.id}): ${rewound.detail}`;
  } else if (!v || v.last_checked_at === null) {
    actionable = 'verifying';
    detail = v?.in_progress ? 'The first verification walk of this chain is in progress.' : 'No verification run has happened yet for this chain.';
  } else if (v.first_problem) {
    actionable = 'broken';
    detail = `Verification found a break at sequence ${v.first_problem.sequence_number} (${v.first_problem.kind}).`;
  } else if (gaps.length > 0) {
    actionable = 'link_unverifiable';
    detail = `${gaps.length} stretch(es) of the chain cannot be linked; the oldest starts at sequence ${gaps[0]!.from_sequence}.`;
  } else if (staleness !== null && staleness > cfg.hot_max_staleness_seconds) {
    actionable = 'degraded';
    detail = `The last verification is ${staleness} s old, beyond the hot staleness bound of ${cfg.hot_max_staleness_seconds} s.`;
  } else if (open.length > 0) {
    actionable = 'degraded';
    detail = `The chain verifies, but ${open.length} incident(s) are still open.`;
  } else if (tip > watermark) {
    actionable = 'catching_up';
    detail = `Verified up to sequence ${watermark}; ${tip - watermark} newer entries await the next walk.`;
  } else {
    actionable = 'healthy';
    detail = `Verified up to the tip, sequence ${tip}.`;
  }
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
    witnesses: await witnessLag(deps, orgId),
  };
}

/** Clamp rules of spec 4.12: default 50; 0 or not a number → 50; negative → 1; at most 200. */
export function clampAuditLimit(raw: unknown): number {
  if (typeof raw !== 'string' || raw.trim() === '') return 50;
  const n = Number(raw);
  if (!Number.isFinite(n) || n === 0) return 50;
  if (n < 0) return 1;
  return Math.min(200, Math.max(1, Math.trunc(n)));
}

const ISO = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/;
function isoParam(raw: unknown, field: string, dflt: number): number {
  if (raw === undefined) return dflt;
  const t = typeof raw === 'string' && ISO.test(raw) ? Date.parse(raw) : Number.NaN;
  if (!Number.isFinite(t)) throw new ApiError(400, 'invalid_iso_8601', `${field} must be an ISO 8601 date-time`, { field });
  return t;
}

const ThresholdPatch = z.strictObject({
  verification_window_days: z.number().int().min(1).max(36_500).optional(),
  hot_window_days: z.number().int().min(1).max(36_500).optional(),
  hot_max_staleness_seconds: z.number().int().min(1).max(2_147_483_647).optional(),
  warm_window_days: z.number().int().min(1).max(36_500).optional(),
  warm_max_staleness_seconds: z.number().int().min(1).max(2_147_483_647).optional(),
  cold_max_staleness_seconds: z.number().int().min(1).max(2_147_483_647).optional(),
});

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

async function patchConfig(ctx: Ctx<unknown, unknown, z.infer<typeof ThresholdPatch>, Extract<Auth, { kind: 'service' }>>) {
  await ctx.run(auditConfigDecider, auditConfigStream(ctx.auth.orgId), { type: 'update', orgId: ctx.auth.orgId, patch: ctx.body as Partial<Thresholds> }, { serialize: true });
  return { status: 200, body: await readConfig(ctx.deps, ctx.auth.orgId) };
}

export async function auditRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/audit-events',
    operationId: 'listAuditEvents',
    summary: 'The organization’s audit chain, newest first; event_type exact or a prefix ending in a dot',
    tags: ['audit'],
    auth: 'api_key',
    scope: 'audit:read',
    query: z.record(z.string(), z.unknown()),
    responses: { 200: z.object({ events: z.array(AuditEvent), next_before_sequence: z.number().int().nullable() }) },
    errors: [[400, 'invalid_before_sequence'], [400, 'invalid_iso_8601'], [400, 'from_after_to'], [401, 'unauthorized'], [403, 'forbidden']],
    async handler({ auth, query, deps }) {
      const now = deps.now().getTime();
      const before = query.before_sequence;
      if (before !== undefined && (typeof before !== 'string' || !/^\d{1,18}$/.test(before))) throw new ApiError(400, 'invalid_before_sequence', 'before_sequence must be a non-negative integer');
      const from = isoParam(query.from, 'from', now - 7 * DAY_MS);
      const to = isoParam(query.to, 'to', now);
      if (from > to) throw new ApiError(400, 'from_after_to', 'from is after to');
      const limit = clampAuditLimit(query.limit);
      const params: unknown[] = [auth.orgId, new Date(from).toISOString(), new Date(to).toISOString(), limit];
      let where = 'org_id = $1 AND happened_at >= $2 AND happened_at <= $3';
      if (before !== undefined) {
        params.push(before);
        where += ` AND sequence_number < $${params.length}`;
      }
      const type = typeof query.event_type === 'string' && query.event_type !== '' ? query.event_type : undefined;
      if (type !== undefined) {
        params.push(type.endsWith('.') ? type.replace(/[\\%_]/g, (c) => '\\' + c) + '%' : type);
        where += type.endsWith('.') ? ` AND event_type LIKE $${params.length}` : ` AND event_type = $${params.length}`;
      }
      const { rows } = await deps.db.query<z.infer<typeof AuditEvent>>(
        `SELECT sequence_number::int, event_type, ${TS('happened_at')} AS happened_at, payload, prev_hash, entry_hash FROM audit_events WHERE ${where} ORDER BY sequence_number DESC LIMIT $4`,
        params,
      );
      return { status: 200, body: { events: rows, next_before_sequence: rows.length === limit ? rows[rows.length - 1]!.sequence_number : null } };
    },
  });

  for (const scoped of [false, true]) {
    const base = scoped ? '/v1/orgs/:orgId/audit' : '/v1/audit-events';
    const Params = scoped ? z.object({ orgId: z.string().min(1).max(200) }) : z.object({});
    const orgOf = (ctx: { auth: Auth; params: unknown }) => {
      const orgId = 'orgId' in ctx.auth ? ctx.auth.orgId : '';
      if (scoped && (ctx.params as { orgId: string }).orgId !== orgId) throw forbidden('orgId is not the authenticated organization');
      return orgId;
    };

    defineRoute(app, deps, {
      method: 'GET',
      url: `${base}/config`,
      operationId: scoped ? 'getAuditConfigOrgScoped' : 'getAuditConfig',
      summary: 'The verification thresholds',
      tags: ['audit'],
      auth: scoped ? 'org_admin' : 'api_key',
      scope: 'audit:read',
      deprecated: scoped,
      params: Params,
      responses: { 200: AuditConfig },
      errors: [[401, 'unauthorized'], [403, 'forbidden'], [403, 'insufficient_role']],
      async handler(ctx) {
        return { status: 200, body: await readConfig(ctx.deps, orgOf(ctx)) };
      },
    });

    defineRoute(app, deps, {
      method: 'PATCH',
      url: `${base}/config`,
      operationId: scoped ? 'updateAuditConfigOrgScoped' : 'updateAuditConfig',
      summary: 'Change thresholds (human session: the platform credential and an admin in x-svc-user); nothing is written on a refusal',
      tags: ['audit'],
      auth: 'human_session',
      minRole: 'admin',
      deprecated: scoped,
      params: Params,
      body: ThresholdPatch,
      responses: { 200: AuditConfig },
      errors: [[400, 'invalid_body'], [400, 'regulatory_minimum_violation'], [400, 'window_ordering_invalid'], [401, 'unauthorized'], [403, 'human_session_required'], [403, 'insufficient_role'], [403, 'forbidden']],
      idempotent: true,
      authorize: (a) => void orgOf(a),
      async handler(ctx) {
        return patchConfig(ctx);
      },
    });

    defineRoute(app, deps, {
      method: 'GET',
      url: `${base}/health`,
      operationId: scoped ? 'getAuditHealthOrgScoped' : 'getAuditHealth',
      summary: 'Verification health of the chain',
      tags: ['audit'],
      auth: scoped ? 'org_admin' : 'api_key',
      scope: 'audit:read',
      deprecated: scoped,
      params: Params,
      responses: { 200: Health },
      errors: [[401, 'unauthorized'], [403, 'forbidden'], [403, 'insufficient_role']],
      async handler(ctx) {
        return { status: 200, body: await health(ctx.deps, orgOf(ctx)) };
      },
    });
  }

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/audit-events/incidents',
    operationId: 'listAuditIncidents',
    summary: 'Incidents: status is a comma list of open, acknowledged, all (default open)',
    tags: ['audit'],
    auth: 'api_key',
    scope: 'audit:read',
    query: z.object({ status: z.string().max(100).optional() }),
    responses: { 200: z.object({ incidents: z.array(Incident) }) },
    errors: [[400, 'invalid_status'], [401, 'unauthorized'], [403, 'forbidden']],
    async handler({ auth, query, deps }) {
      const wanted = (query.status ?? 'open').split(',').map((s) => s.trim());
      if (wanted.some((s) => !['open', 'acknowledged', 'all'].includes(s))) throw new ApiError(400, 'invalid_status', 'status takes open, acknowledged or all, comma separated');
      const statuses = wanted.includes('all') ? ['open', 'acknowledged'] : wanted;
      const { rows } = await deps.db.query<z.infer<typeof Incident>>(
        `SELECT id, org_id, kind, detail, ${TS('detected_at')} AS detected_at, detected_at_sequence::int, status, anpd_notification_status, ${TS('created_at')} AS created_at
         FROM audit_incidents WHERE org_id = $1 AND status = ANY($2) ORDER BY detected_at DESC, id`,
        [auth.orgId, statuses],
      );
      return { status: 200, body: { incidents: rows } };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/audit-events/incidents/:id/acknowledge',
    operationId: 'acknowledgeAuditIncident',
    summary: 'Acknowledge an incident (human session); never turns health green by itself',
    tags: ['audit'],
    auth: 'human_session',
    minRole: 'admin',
    params: z.object({ id: z.string().min(1).max(100) }),
    body: z.record(z.string(), z.unknown()),
    bodyText: { resolution_summary: null, incident_reference: null },
    responses: { 200: z.object({ incident: Incident.extend({ acknowledgement: z.record(z.string(), z.unknown()) }) }) },
    errors: [[400, 'pending_assessment_not_terminal'], [400, 'field_invalid'], [401, 'unauthorized'], [403, 'human_session_required'], [403, 'insufficient_role'], [404, 'not_found'], [409, 'incident_already_acknowledged']],
    idempotent: true,
    async handler({ auth, params, body, run, deps }) {
      if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(params.id)) throw new ApiError(404, 'not_found', 'incident not found');
      const ack = parseAcknowledgement(body);
      await run(incidentDecider, incidentStream(params.id), { type: 'acknowledge', orgId: auth.orgId, ack, by: auth.userId });
      const { rows } = await deps.db.query<z.infer<typeof Incident> & { acknowledgement: Record<string, unknown> }>(
        `SELECT id, org_id, kind, detail, ${TS('detected_at')} AS detected_at, detected_at_sequence::int, status, anpd_notification_status, ${TS('created_at')} AS created_at, acknowledgement
         FROM audit_incidents WHERE id = $1`,
        [params.id],
      );
      return { status: 200, body: { incident: rows[0]! } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/audit-events/export',
    operationId: 'exportAuditChain',
    summary: 'The export bundle as an NDJSON stream (manifest, entries, checkpoints, keys); `ledger audit verify-export <file>` checks it offline',
    tags: ['audit'],
    auth: 'api_key',
    scope: 'audit:read',
    responses: { 200: null },
    errors: [[401, 'unauthorized'], [403, 'forbidden']],
    async handler({ auth, deps }) {
      return {
        status: 200,
        headers: { 'content-type': 'application/x-ndjson; charset=utf-8', 'content-disposition': `attachment; filename="audit-${auth.orgId}.ndjson"` },
        body: Readable.from(bundleLines(deps.store, auth.orgId, 'agent-ledger/audit', deps.now())),
      };
    },
  });
}
