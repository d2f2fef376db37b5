import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Thresholds } from '../../../commands/audit.ts';
import { auditHealth, readAuditConfig, updateAuditConfig } from '../../usecases/audit.ts';
import { AuditConfig, Health, ThresholdPatch } from './audit-schemas.ts';
import { forbidden } from '../kernel/errors.ts';
import { defineRoute, type AppDeps } from '../kernel/route.ts';
import type { Auth } from '../kernel/auth.ts';

// The chain's verification thresholds and health (spec 4.12), each under
// /v1/audit-events and, deprecated, under /v1/orgs/:orgId/audit.

export async function auditConfigRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
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
        return { status: 200, body: await readAuditConfig(ctx.deps, orgOf(ctx)) };
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
        return { status: 200, body: await updateAuditConfig(ctx.deps, ctx.run, ctx.auth.orgId, ctx.body as Partial<Thresholds>) };
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
        return { status: 200, body: await auditHealth(ctx.deps, orgOf(ctx)) };
      },
    });
  }
}
