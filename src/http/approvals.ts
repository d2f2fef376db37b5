import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { migrateApprovalSweeps } from '../reactors/approval-expiry.ts';
import { approvalsHealth, decideApproval, findApproval, getApproval, listApprovals } from '../usecases/approvals.ts';
import { forbidden, errorResponse } from './kernel/errors.ts';
import { defineRoute, type AppDeps } from './kernel/route.ts';
import { IdParam, Timestamp } from './kernel/schemas.ts';
import { type Auth, type ServiceAuth } from './kernel/auth.ts';

// Approvals (spec Part 2 Approval, 4.10): a call held by an approval-required
// policy. A person decides through the human-session rules (Part 5 item 8);
// approving executes the held call with its verbatim tool_input, once.

export const Approval = z
  .object({
    id: z.string(),
    org_id: z.string(),
    project_id: z.string().nullable(),
    session_id: z.string().nullable(),
    agent_id: z.string(),
    matched_rule_id: z.string().describe('The `approval-required` policy that held the call (`pol_` prefix).'),
    matched_rule_name: z.string().describe('That policy\'s name, as it was when the call was held.'),
    tool_name: z.string(),
    tool_input: z.record(z.string(), z.unknown()).describe('The arguments of the held call, verbatim; run as they are once approved.'),
    status: z.enum(['pending', 'approved', 'denied', 'expired', 'execution_failed']).describe('`pending` until a person decides; `approved` (the call then runs), `denied`, `expired` (no decision before `expires_at`) or `execution_failed` (approved, but the call failed: see `execution_result`).'),
    decided_at: Timestamp.nullable(),
    decided_by: z.string().nullable().describe('Who decided (a user id); null while pending or when it expired.'),
    decision_reason: z.string().nullable().describe('The reason the person gave with the decision; null when none.'),
    executed_at: Timestamp.nullable(),
    execution_result: z.record(z.string(), z.unknown()).nullable().describe('What the approved call answered (or its error); null until it ran.'),
    created_at: Timestamp,
    expires_at: Timestamp,
  })
  .meta({ id: 'Approval' });
export type ApprovalView = z.infer<typeof Approval>;

/** An executor's failure as the approval records it: the status and the error body it would have answered (the composition root gives it to every surface as ports.approvalFailure). */
export function approvalFailureResult(err: unknown): Record<string, unknown> {
  const e = errorResponse(err, 'approval');
  const b = e.body as { error?: unknown; reason?: unknown };
  return { status: e.status, ...(typeof b.error === 'object' ? { error: b.error } : { error: b }) };
}

/** A key bound to one project sees that project's approvals only (another project's answer as absent ones). */
const boundTo = (auth: Auth): string | null => (auth.kind === 'api_key' && auth.projectBound ? auth.projectId : null);

/** Before the body is read: admin in the held call's project (in the organization when there is no such approval: a member gets 403, an admin 404). */
function adminInItsProject(deps: AppDeps) {
  /** Deciding a held call needs admin in the call's project: a project-level override raises or narrows the organization role, except for owners. */
  const mustAdminIn = (auth: ServiceAuth, projectId: string | null) => deps.auth.requireRoleIn(auth, projectId, 'admin');
  return async ({ auth, params }: { auth: ServiceAuth; params: Readonly<Record<string, string>> }) =>
    mustAdminIn(auth, (await findApproval(deps, auth.orgId, params.id ?? '', null))?.project_id ?? null);
}

const orgPath = (auth: Auth, orgId: string) => {
  if (!('orgId' in auth) || auth.orgId !== orgId) throw forbidden('orgId is not the authenticated organization');
  return orgId;
};

export async function approvalRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  await migrateApprovalSweeps(deps.db);
  approvalReadRoutes(app, deps);
  approvalDecisionRoutes(app, deps);
  approvalOrgScopedRoutes(app, deps);
}

/** The list and one approval, for an API key. */
function approvalReadRoutes(app: FastifyInstance, deps: AppDeps): void {
  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/approvals',
    operationId: 'listApprovals',
    summary: 'Approvals of the organization, newest first',
    tags: ['approvals'],
    auth: 'api_key',
    scope: 'approvals:read',
    query: z.object({ status: Approval.shape.status.optional(), limit: z.coerce.number().int().min(1).max(200).default(50) }).strict(),
    responses: { 200: z.object({ data: z.array(Approval) }) },
    errors: [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden']],
    async handler({ auth, query }) {
      return { status: 200, body: { data: await listApprovals(deps, auth.orgId, { status: query.status ?? null, limit: query.limit, projectId: boundTo(auth) }) } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/approvals/:id',
    operationId: 'getApproval',
    summary: 'One approval',
    tags: ['approvals'],
    auth: 'api_key',
    scope: 'approvals:read',
    params: z.object({ id: IdParam }),
    responses: { 200: Approval },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler({ auth, params }) {
      return { status: 200, body: await getApproval(deps, auth.orgId, params.id, boundTo(auth)) };
    },
  });
}

/** A person decides (human session, admin in the call's project); people decide in the dashboard (src/dashboard/approvals.tsx). */
function approvalDecisionRoutes(app: FastifyInstance, deps: AppDeps): void {
  const authorize = adminInItsProject(deps);

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/approvals/:id/decide',
    operationId: 'decideApproval',
    summary: 'A person approves or denies a held call (human session, admin); approving executes it once',
    tags: ['approvals'],
    auth: 'human_session',
    params: z.object({ id: IdParam }),
    body: z.object({ decision: z.enum(['approve', 'deny']), reason: z.string().trim().max(1000).nullable().optional() }).strict(),
    responses: { 200: Approval },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'human_session_required'], [403, 'insufficient_role'], [404, 'not_found'], [409, 'approval_not_pending'], [409, 'approval_expired']],
    authorize,
    async handler({ auth, params, body, run }) {
      const decided = await decideApproval(deps, run, { orgId: auth.orgId, id: params.id, decision: body.decision, reason: body.reason ?? null, by: auth.userId }, approvalFailureResult);
      return { status: 200, body: decided };
    },
  });
}

/** The deprecated organization-scoped reads. */
function approvalOrgScopedRoutes(app: FastifyInstance, deps: AppDeps): void {
  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/orgs/:orgId/approvals/health',
    operationId: 'getApprovalsHealthOrgScoped',
    summary: 'Pending approvals and the expiry sweeper (organization-scoped, deprecated)',
    tags: ['approvals'],
    auth: 'org_admin',
    scope: 'approvals:read',
    deprecated: true,
    params: z.object({ orgId: IdParam }),
    responses: { 200: z.object({ status: z.literal('ok').describe('`ok`: the approval sweeper runs.'), pending_count: z.number().int(), oldest_pending_age_seconds: z.number().int().nullable(), last_sweep_at: Timestamp.nullable() }) },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [403, 'insufficient_role'], [404, 'not_found']],
    async handler({ auth, params }) {
      return { status: 200, body: await approvalsHealth(deps, orgPath(auth, params.orgId)) };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/orgs/:orgId/approvals/:id',
    operationId: 'getApprovalOrgScoped',
    summary: 'One approval (organization-scoped, deprecated)',
    tags: ['approvals'],
    auth: 'org_admin',
    scope: 'approvals:read',
    deprecated: true,
    params: z.object({ orgId: IdParam, id: IdParam }),
    responses: { 200: Approval },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [403, 'insufficient_role'], [404, 'not_found']],
    async handler({ auth, params }) {
      return { status: 200, body: await getApproval(deps, orgPath(auth, params.orgId), params.id) };
    },
  });
}
