import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { addTeamMember, createApiKey, createOrganization, listApiKeys, revokeApiKey } from '../usecases/orgs.ts';
import { whoami } from '../usecases/whoami.ts';
import { hashKey } from './kernel/auth.ts';
import { defineRoute, type AppDeps } from './kernel/route.ts';
import { IdParam, Project, Timestamp } from './kernel/schemas.ts';

// Bootstrap and credentials: organizations, team members, API keys, whoami:
// the routes; the use cases are src/usecases/orgs.ts.

const Email = z.string().trim().toLowerCase().pipe(z.email()).pipe(z.string().max(254));
const Scope = z.string().regex(/^(\*|[a-z_]+:(read|write|\*))$/);

export const ApiKey = z
  .object({
    id: z.string(),
    name: z.string(),
    environment: z.enum(['live', 'test']),
    project_id: z.string().nullable(),
    scopes: z.array(z.string()),
    prefix: z.string(),
    created_at: Timestamp,
    revoked_at: Timestamp.nullable(),
  })
  .meta({ id: 'ApiKey' });

export async function orgRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  bootstrapRoutes(app, deps);
  apiKeyRoutes(app, deps);
}

/** An organization with its owner, and the users added to it. */
function bootstrapRoutes(app: FastifyInstance, deps: AppDeps): void {
  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/orgs',
    operationId: 'createOrganization',
    summary: 'Create an organization with its owner and default project (platform secret, no x-svc-user)',
    tags: ['bootstrap'],
    auth: 'platform',
    body: z.object({ name: z.string().trim().min(1).max(200), owner_email: Email, owner_display_name: z.string().trim().min(1).max(200).optional() }),
    responses: {
      201: z.object({
        org: z.object({ id: z.string(), name: z.string(), created_at: Timestamp }).describe('The organization made.'),
        owner: z.object({ user_id: z.string(), email: z.string(), role: z.literal('owner') }).describe('Its first owner.'),
        default_project: Project,
      }),
    },
    errors: [[400, 'invalid_body'], [401, 'unauthorized']],
    idempotent: false,
    async handler({ body, run }) {
      return { status: 201, body: await createOrganization(run, body) };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/team/members',
    operationId: 'addTeamMember',
    summary: 'Add a user to the organization (acting user admin or owner)',
    tags: ['bootstrap'],
    auth: 'service',
    minRole: 'admin',
    body: z.object({ email: Email, role: z.enum(['admin', 'member']), display_name: z.string().trim().min(1).max(200).optional() }),
    responses: { 201: z.object({ user_id: z.string(), email: z.string(), role: z.enum(['admin', 'member']) }) },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'insufficient_role'], [409, 'user_exists']],
    idempotent: true,
    async handler({ auth, body, run }) {
      return { status: 201, body: await addTeamMember(run, auth.orgId, body) };
    },
  });
}

/** API keys (create, list, revoke) and what the calling key resolves to. */
function apiKeyRoutes(app: FastifyInstance, deps: AppDeps): void {
  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/api-keys',
    operationId: 'createApiKey',
    summary: 'Create an API key; the key is shown once (acting user admin or owner)',
    tags: ['bootstrap'],
    auth: 'service',
    minRole: 'admin',
    body: z.object({
      name: z.string().trim().min(1).max(200),
      environment: z.enum(['test', 'live']),
      project_id: z.string().min(1).nullable().optional(),
      scopes: z.array(Scope).min(1).max(50).optional(),
    }),
    responses: {
      201: z.object({ id: z.string(), key: z.string(), name: z.string(), environment: z.enum(['live', 'test']), project_id: z.string().nullable(), scopes: z.array(z.string()), created_at: Timestamp }),
    },
    errors: [[400, 'invalid_body'], [400, 'environment_mismatch'], [401, 'unauthorized'], [403, 'insufficient_role'], [404, 'not_found']],
    idempotent: true,
    async handler({ auth, body, run }) {
      return { status: 201, body: await createApiKey(run, auth.orgId, body, hashKey) };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/api-keys',
    operationId: 'listApiKeys',
    summary: 'List the organization API keys (never the keys themselves)',
    tags: ['bootstrap'],
    auth: 'service',
    minRole: 'admin',
    responses: { 200: z.object({ api_keys: z.array(ApiKey) }) },
    errors: [[401, 'unauthorized'], [403, 'insufficient_role']],
    async handler({ auth, deps }) {
      return { status: 200, body: { api_keys: await listApiKeys(deps, auth.orgId) } };
    },
  });

  defineRoute(app, deps, {
    method: 'DELETE',
    url: '/v1/api-keys/:id',
    operationId: 'revokeApiKey',
    summary: 'Revoke an API key; it answers 401 from then on',
    tags: ['bootstrap'],
    auth: 'service',
    minRole: 'admin',
    params: z.object({ id: IdParam }),
    responses: { 200: z.object({ id: z.string(), revoked: z.literal(true) }) },
    errors: [[401, 'unauthorized'], [403, 'insufficient_role'], [404, 'not_found']],
    idempotent: true,
    async handler({ auth, params, run }) {
      await revokeApiKey(run, auth.orgId, params.id);
      return { status: 200, body: { id: params.id, revoked: true } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/whoami',
    operationId: 'whoami',
    summary: "What the calling API key resolves to: flat ids, and the same as objects (the product client's whoami); `user` is the organization's owner",
    tags: ['bootstrap'],
    auth: 'api_key',
    responses: {
      200: z.object({
        org_id: z.string(),
        project_id: z.string(),
        api_key_id: z.string(),
        environment: z.enum(['live', 'test']),
        scopes: z.array(z.string()),
        user: z.object({ id: z.string(), email: z.string(), name: z.string().nullable(), role: z.literal('owner') }).nullable().describe("The organization's owner the key answers for; null when it has none."),
        organization: z.object({ id: z.string(), name: z.string() }).describe('The organization of the credential.'),
        project: z.object({ id: z.string(), name: z.string(), slug: z.string().nullable() }).describe('The project the request acts in (the key\'s, or the one `x-svc-project` named).'),
        key: z.object({ id: z.string(), name: z.string().nullable(), environment: z.enum(['live', 'test']), scopes: z.array(z.string()) }),
      }),
    },
    errors: [[401, 'unauthorized'], [403, 'forbidden']],
    async handler({ auth, deps }) {
      return { status: 200, body: await whoami(deps, { orgId: auth.orgId, projectId: auth.projectId, keyId: auth.keyId, environment: auth.environment, scopes: auth.scopes }) };
    },
  });
}
