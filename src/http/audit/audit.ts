import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { bundleLines } from '../../audit/export.ts';
import { acknowledgeIncident, listAuditEvents, listIncidents } from '../../usecases/audit.ts';
import { AuditEvent, clampAuditLimit, DAY_MS, Incident, isoParam, parseAcknowledgement } from './audit-schemas.ts';
import { ApiError } from '../kernel/errors.ts';
import { defineRoute, type AppDeps } from '../kernel/route.ts';

// The audit surface (spec 4.10, 4.12): the chain's events, incidents and the
// export bundle; the verification thresholds and health in
// src/http/audit/audit-config.ts; for auditors, the signed checkpoints and inclusion
// proofs in src/http/audit/audit-proofs.ts. The logic is src/usecases/audit.ts.

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export async function auditRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  auditEventRoutes(app, deps);
  auditIncidentAndExportRoutes(app, deps);
}

/** The chain’s events, and its incidents. */
function auditEventRoutes(app: FastifyInstance, deps: AppDeps): void {
  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/audit-events',
    operationId: 'listAuditEvents',
    summary: 'The organization’s audit chain, newest first; event_type exact or a prefix ending in a dot',
    tags: ['audit'],
    auth: 'api_key',
    scope: 'audit:read',
    query: z.record(z.string(), z.unknown()),
    responses: { 200: z.object({ events: z.array(AuditEvent).describe("The chain's events of this page, newest first."), next_before_sequence: z.number().int().nullable() }) },
    errors: [[400, 'invalid_before_sequence'], [400, 'invalid_iso_8601'], [400, 'from_after_to'], [401, 'unauthorized'], [403, 'forbidden']],
    async handler({ auth, query, deps }) {
      const now = deps.now().getTime();
      const before = query.before_sequence;
      if (before !== undefined && (typeof before !== 'string' || !/^\d{1,18}$/.test(before))) throw new ApiError(400, 'invalid_before_sequence', 'before_sequence must be a non-negative integer');
      const from = isoParam(query.from, 'from', now - 7 * DAY_MS);
      const to = isoParam(query.to, 'to', now);
      if (from > to) throw new ApiError(400, 'from_after_to', 'from is after to');
      const eventType = typeof query.event_type === 'string' && query.event_type !== '' ? query.event_type : undefined;
      const page = await listAuditEvents(deps, auth, { from, to, limit: clampAuditLimit(query.limit), ...(before !== undefined ? { before } : {}), ...(eventType !== undefined ? { eventType } : {}) });
      return { status: 200, body: page };
    },
  });

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
      return { status: 200, body: { incidents: await listIncidents(deps, auth, statuses) } };
    },
  });
}

/** An incident’s acknowledgement, and the export bundle. */
function auditIncidentAndExportRoutes(app: FastifyInstance, deps: AppDeps): void {
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
    responses: { 200: z.object({ incident: Incident.extend({ acknowledgement: z.record(z.string(), z.unknown()) }).describe('The incident, now acknowledged, with what the acknowledgement recorded.') }) },
    errors: [[400, 'pending_assessment_not_terminal'], [400, 'field_invalid'], [401, 'unauthorized'], [403, 'human_session_required'], [403, 'insufficient_role'], [404, 'not_found'], [409, 'incident_already_acknowledged']],
    idempotent: true,
    async handler({ auth, params, body, run, deps }) {
      if (!UUID.test(params.id)) throw new ApiError(404, 'not_found', 'incident not found');
      const ack = parseAcknowledgement(body);
      return { status: 200, body: { incident: await acknowledgeIncident(deps, run, auth, { id: params.id, ack, by: auth.userId }) } };
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
