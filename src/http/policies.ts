import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { PolicyType } from '../../events/policy.ts';
import { CONFIG_SCHEMAS, Pattern } from '../policy/config.ts';
import { createPolicy, deletePolicy, getPolicy, listPolicies, type PolicyRow, reorderPolicies, updatePolicy } from '../usecases/policies.ts';
import { forbidden } from './kernel/errors.ts';
import { defineRoute, type AppDeps } from './kernel/route.ts';
import { IdParam, Timestamp } from './kernel/schemas.ts';

// Policies (spec 4.11): the declarations of src/usecases/policies.ts; every
// change is an event in the organization's policy stream, which the engine
// folds on every evaluation (so a 2xx PATCH is enforced by the next request on any instance).

const TYPE = 'What the rule does: `allow`, `deny`, `budget` (a spend cap), `rate-limit` (calls per window), `time-window` (allowed hours and days) or `approval-required` (a person decides); `config` follows the type.';
const AGENTS = 'The agents the rule applies to, by agent id: an exact id, or a prefix ending in `*`; an empty list (the default) matches every agent.';
const TOOLS = 'The tools the rule applies to, by tool name: an exact name, or a prefix ending in `*`; an empty list (the default) matches every tool.';
const Policy = z
  .object({
    id: z.string(),
    name: z.string(),
    type: PolicyType.describe(TYPE),
    config: z.record(z.string(), z.unknown()),
    agents: z.array(z.string()).describe(AGENTS),
    tools: z.array(z.string()).describe(TOOLS),
    enabled: z.boolean(),
    order: z.number().int().describe('Its place in evaluation: policies are evaluated in ascending order (set by `POST /v1/policies/reorder`).'),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  })
  .meta({ id: 'Policy' });

const Name = z.string().trim().min(1).max(200);
const Patterns = z.array(Pattern).max(100);
const common = { name: Name, agents: Patterns.describe(AGENTS).optional(), tools: Patterns.describe(TOOLS).optional(), enabled: z.boolean().optional() };
/** One body shape per type, so the OpenAPI document publishes each type's config. */
const CreateBody = z.discriminatedUnion('type', [
  z.object({ ...common, type: z.literal('allow').describe(TYPE), config: CONFIG_SCHEMAS.allow.optional() }),
  z.object({ ...common, type: z.literal('deny').describe(TYPE), config: CONFIG_SCHEMAS.deny.optional() }),
  z.object({ ...common, type: z.literal('budget').describe(TYPE), config: CONFIG_SCHEMAS.budget }),
  z.object({ ...common, type: z.literal('rate-limit').describe(TYPE), config: CONFIG_SCHEMAS['rate-limit'] }),
  z.object({ ...common, type: z.literal('time-window').describe(TYPE), config: CONFIG_SCHEMAS['time-window'] }),
  z.object({ ...common, type: z.literal('approval-required').describe(TYPE), config: CONFIG_SCHEMAS['approval-required'].optional() }),
]);
const PatchBody = z
  .object({ name: Name, type: PolicyType.describe(TYPE), config: z.record(z.string(), z.unknown()), agents: Patterns.describe(AGENTS), tools: Patterns.describe(TOOLS), enabled: z.boolean() })
  .partial()
  .strict();

const view = (r: PolicyRow) => ({ id: r.id, name: r.name, type: r.type, config: r.config, agents: r.agents, tools: r.tools, enabled: r.enabled, order: r.ord, createdAt: r.created_at, updatedAt: r.updated_at });

/** Policies govern every project of the organization: a key bound to one project may read them, not change them (spec Part 5). */
function organizationWide(auth: { projectBound: boolean }): void {
  if (auth.projectBound) throw forbidden('a project API key cannot change the organization\'s policies');
}

export async function policyRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  policyCollectionRoutes(app, deps);
  policyItemRoutes(app, deps);
}

/** The organization’s policies: list, create, reorder. */
function policyCollectionRoutes(app: FastifyInstance, deps: AppDeps): void {
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
      return { status: 200, body: (await listPolicies(deps, auth.orgId)).map(view) };
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
      return { status: 201, body: view(await createPolicy({ ports: deps, run, orgId: auth.orgId }, body)) };
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
      await reorderPolicies({ ports: deps, run, orgId: auth.orgId }, body.ids);
      return { status: 204 };
    },
  });
}

/** One policy: read, update, delete. */
function policyItemRoutes(app: FastifyInstance, deps: AppDeps): void {
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
      return { status: 200, body: view(await getPolicy(deps, auth.orgId, params.id)) };
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
      return { status: 200, body: view(await updatePolicy({ ports: deps, run, orgId: auth.orgId }, params.id, body)) };
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
      await deletePolicy({ ports: deps, run, orgId: auth.orgId }, params.id);
      return { status: 204 };
    },
  });
}
