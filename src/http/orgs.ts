import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { type ActiveOrg, orgDecider, orgStream } from '../../commands/org.ts';
import { projectView } from '../usecases/projects.ts';
import { hashKey } from './auth.ts';
import { newId, randomString } from './ids.ts';
import { defineRoute, type AppDeps } from './route.ts';
import { IdParam, Project, Timestamp } from './schemas.ts';

// Bootstrap and credentials: organizations, team members, API keys, whoami.
// Organizations, users and keys are events in the organization's stream (the
// key's hash, never the key).

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

export function newApiKey(environment: 'live' | 'test'): string {
  return `sk_${environment}_${randomString(32)}`;
}

export async function orgRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
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
        org: z.object({ id: z.string(), name: z.string(), created_at: Timestamp }),
        owner: z.object({ user_id: z.string(), email: z.string(), role: z.literal('owner') }),
        default_project: Project,
      }),
    },
    errors: [[400, 'invalid_body'], [401, 'unauthorized']],
    idempotent: false,
    async handler({ body, run }) {
      const orgId = newId('org');
      const userId = newId('usr');
      const projectId = newId('prj');
      const r = await run(
        orgDecider,
        orgStream(orgId),
        { type: 'create_org', orgId, name: body.name, defaultProjectId: projectId, owner: { userId, email: body.owner_email, displayName: body.owner_display_name ?? null } },
        { orgId, projectId: null, expectedRevision: 'no_stream' },
      );
      const s = r.state as ActiveOrg;
      const created = r.events[0]!.type === 'org.created' ? r.events[0]!.data.created_at : '';
      return {
        status: 201,
        body: { org: { id: orgId, name: body.name, created_at: created }, owner: { user_id: userId, email: body.owner_email, role: 'owner' }, default_project: projectView(orgId, projectId, s) },
      };
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
      const userId = newId('usr');
      await run(orgDecider, orgStream(auth.orgId), { type: 'add_user', userId, email: body.email, displayName: body.display_name ?? null, role: body.role });
      return { status: 201, body: { user_id: userId, email: body.email, role: body.role } };
    },
  });

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
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'insufficient_role'], [404, 'not_found']],
    idempotent: true,
    async handler({ auth, body, run }) {
      const keyId = newId('key');
      const key = newApiKey(body.environment);
      const scopes = body.scopes ?? ['*'];
      const projectId = body.project_id ?? null;
      const r = await run(orgDecider, orgStream(auth.orgId), {
        type: 'create_api_key',
        keyId,
        name: body.name,
        environment: body.environment,
        projectId,
        scopes,
        keyHash: hashKey(key),
        keyPrefix: key.slice(0, 12),
      });
      const e = r.events[0]!;
      const createdAt = e.type === 'api_key.created' ? e.data.created_at : '';
      return { status: 201, body: { id: keyId, key, name: body.name, environment: body.environment, project_id: projectId, scopes, created_at: createdAt } };
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
      const { rows } = await deps.db.query<z.infer<typeof ApiKey>>(
        `SELECT key_id AS id, name, environment, project_id, scopes, key_prefix AS prefix,
           to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS created_at,
           to_char(revoked_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS revoked_at
         FROM api_keys WHERE org_id = $1 ORDER BY created_at DESC, key_id`,
        [auth.orgId],
      );
      return { status: 200, body: { api_keys: rows } };
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
      await run(orgDecider, orgStream(auth.orgId), { type: 'revoke_api_key', keyId: params.id });
      return { status: 200, body: { id: params.id, revoked: true } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/whoami',
    operationId: 'whoami',
    summary: 'What the calling API key resolves to',
    tags: ['bootstrap'],
    auth: 'api_key',
    responses: { 200: z.object({ org_id: z.string(), project_id: z.string(), api_key_id: z.string(), environment: z.enum(['live', 'test']), scopes: z.array(z.string()) }) },
    errors: [[401, 'unauthorized'], [403, 'forbidden']],
    async handler({ auth }) {
      return { status: 200, body: { org_id: auth.orgId, project_id: auth.projectId, api_key_id: auth.keyId, environment: auth.environment, scopes: auth.scopes } };
    },
  });
}
