import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { policySetDecider, policiesStream, type PolicyFields } from '../../commands/policy.ts';
import { PolicyType } from '../../events/policy.ts';
import { CONFIG_SCHEMAS, Pattern } from '../policy/config.ts';
import { ApiError, forbidden, toIssues } from './errors.ts';
import { newId } from './ids.ts';
import { defineRoute, type AppDeps } from './route.ts';
import { IdParam, isoText as TS, Timestamp } from './schemas.ts';

// Policies (spec 4.11): per organization, ordered; every change is an event in
// the organization's policy stream, which the engine folds on every
// evaluation (so a 2xx PATCH is enforced by the next request on any instance).

const Policy = z
  .object({
    id: z.string(),
    name: z.string(),
    type: PolicyType,
    config: z.record(z.string(), z.unknown()),
    agents: z.array(z.string()),
    tools: z.array(z.string()),
    enabled: z.boolean(),
    order: z.number().int(),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  })
  .meta({ id: 'Policy' });

const Name = z.string().trim().min(1).max(200);
const Patterns = z.array(Pattern).max(100);
const common = { name: Name, agents: Patterns.optional(), tools: Patterns.optional(), enabled: z.boolean().optional() };
/** One body shape per type, so the OpenAPI document publishes each type's config. */
const CreateBody = z.discriminatedUnion('type', [
  z.object({ ...common, type: z.literal('allow'), config: CONFIG_SCHEMAS.allow.optional() }),
  z.object({ ...common, type: z.literal('deny'), config: CONFIG_SCHEMAS.deny.optional() }),
  z.object({ ...common, type: z.literal('budget'), config: CONFIG_SCHEMAS.budget }),
  z.object({ ...common, type: z.literal('rate-limit'), config: CONFIG_SCHEMAS['rate-limit'] }),
  z.object({ ...common, type: z.literal('time-window'), config: CONFIG_SCHEMAS['time-window'] }),
  z.object({ ...common, type: z.literal('approval-required'), config: CONFIG_SCHEMAS['approval-required'].optional() }),
]);
const PatchBody = z
  .object({ name: Name, type: PolicyType, config: z.record(z.string(), z.unknown()), agents: Patterns, tools: Patterns, enabled: z.boolean() })
  .partial()
  .strict();

type Row = { id: string; name: string; type: z.infer<typeof PolicyType>; config: Record<string, unknown>; agents: string[]; tools: string[]; enabled: boolean; ord: number; created_at: string; updated_at: string };
const COLUMNS = `id, name, type, config, agents, tools, enabled, ord, ${TS('created_at')} AS created_at, ${TS('updated_at')} AS updated_at`;
const view = (r: Row) => ({ id: r.id, name: r.name, type: r.type, config: r.config, agents: r.agents, tools: r.tools, enabled: r.enabled, order: r.ord, createdAt: r.created_at, updatedAt: r.updated_at });

/** A config checked against its type: the parsed form (defaults applied) or 400 invalid_body with the issues under `config`. */
function checkedConfig(type: z.infer<typeof PolicyType>, config: unknown): Record<string, unknown> {
  const r = CONFIG_SCHEMAS[type].safeParse(config ?? {});
  if (!r.success) throw new ApiError(400, 'invalid_body', `the config does not fit a ${type} policy`, { issues: toIssues(r.error.issues.map((i) => ({ ...i, path: ['config', ...i.path] }))) });
  return r.data as Record<string, unknown>;
}

/** Policies govern every project of the organization: a key bound to one project may read them, not change them (spec Part 5). */
function organizationWide(auth: { projectBound: boolean }): void {
  if (auth.projectBound) throw forbidden('a project API key cannot change the organization\'s policies');
}

export async function policyRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const one = async (orgId: string, id: string) => (await deps.db.query<Row>(`SELECT ${COLUMNS} FROM policies WHERE org_id = $1 AND id = $2`, [orgId, id])).rows[0];
  const mustOne = async (orgId: string, id: string) => {
    const r = await one(orgId, id);
    if (!r) throw new ApiError(404, 'not_found', 'policy not found');
    return r;
  };

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/policies',
    operationId: 'listPolicies',
    summary: 'The organization’s policies in evaluation order',
    tags: ['policies'],
    auth: 'api_key',
    scope: 'policies:read',
    responses: { 200: z.array(Policy) },
    errors: [[401, 'unauthorized'], [403, 'forbidden']],
    async handler({ auth }) {
      const { rows } = await deps.db.query<Row>(`SELECT ${COLUMNS} FROM policies WHERE org_id = $1 ORDER BY ord, created_at, id`, [auth.orgId]);
      return { status: 200, body: rows.map(view) };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/policies',
    operationId: 'createPolicy',
    summary: 'Add a policy at the end of the order',
    tags: ['policies'],
    auth: 'api_key',
    scope: 'policies:write',
    body: CreateBody,
    responses: { 201: Policy },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden']],
    idempotent: true,
    authorize: ({ auth }) => organizationWide(auth),
    async handler({ auth, body, run }) {
      const id = newId('pol');
      const fields: PolicyFields = { name: body.name, type: body.type, config: checkedConfig(body.type, body.config), agents: body.agents ?? [], tools: body.tools ?? [], enabled: body.enabled ?? true };
      await run(policySetDecider, policiesStream(auth.orgId), { type: 'create', orgId: auth.orgId, policyId: id, fields }, { serialize: true });
      return { status: 201, body: view(await mustOne(auth.orgId, id)) };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/policies/reorder',
    operationId: 'reorderPolicies',
    summary: 'Put the listed policies first, in this order; atomic (an id not of this organization moves nothing: 404)',
    tags: ['policies'],
    auth: 'api_key',
    scope: 'policies:write',
    body: z.object({ ids: z.array(IdParam).min(1).max(1000) }).strict(),
    responses: { 204: null },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    authorize: ({ auth }) => organizationWide(auth),
    async handler({ auth, body, run }) {
      await run(policySetDecider, policiesStream(auth.orgId), { type: 'reorder', orgId: auth.orgId, ids: body.ids }, { serialize: true });
      return { status: 204 };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/policies/:id',
    operationId: 'getPolicy',
    summary: 'One policy',
    tags: ['policies'],
    auth: 'api_key',
    scope: 'policies:read',
    params: z.object({ id: IdParam }),
    responses: { 200: Policy },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler({ auth, params }) {
      return { status: 200, body: view(await mustOne(auth.orgId, params.id)) };
    },
  });

  defineRoute(app, deps, {
    method: 'PATCH',
    url: '/v1/policies/:id',
    operationId: 'updatePolicy',
    summary: 'Change a policy; enforced from the next request on',
    tags: ['policies'],
    auth: 'api_key',
    scope: 'policies:write',
    params: z.object({ id: IdParam }),
    body: PatchBody,
    responses: { 200: Policy },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    authorize: ({ auth }) => organizationWide(auth),
    async handler({ auth, params, body, run }) {
      const current = await mustOne(auth.orgId, params.id);
      const changes: Partial<PolicyFields> = { ...body };
      // A new type or a new config is checked as the pair the policy will hold.
      if (body.type !== undefined || body.config !== undefined) {
        const type = body.type ?? current.type;
        changes.config = checkedConfig(type, body.config ?? (body.type !== undefined && body.type !== current.type ? {} : current.config));
      }
      await run(policySetDecider, policiesStream(auth.orgId), { type: 'update', policyId: params.id, changes }, { serialize: true });
      return { status: 200, body: view(await mustOne(auth.orgId, params.id)) };
    },
  });

  defineRoute(app, deps, {
    method: 'DELETE',
    url: '/v1/policies/:id',
    operationId: 'deletePolicy',
    summary: 'Remove a policy',
    tags: ['policies'],
    auth: 'api_key',
    scope: 'policies:write',
    params: z.object({ id: IdParam }),
    responses: { 204: null },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    authorize: ({ auth }) => organizationWide(auth),
    async handler({ auth, params, run }) {
      await run(policySetDecider, policiesStream(auth.orgId), { type: 'delete', policyId: params.id }, { serialize: true });
      return { status: 204 };
    },
  });
}
