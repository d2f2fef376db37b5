import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { DISPLAY_NAME_MAX_CHARS } from '../../limits.ts';
import {
  ConnectionMetadata,
  createConnection,
  deleteConnection,
  listConnections,
  loadConnection,
  readConnection,
  revokeConnection,
  setConnectionWebhookSecret,
  updateConnectionMetadata,
  validateCredential,
  type ConnectionCtx,
} from '../../usecases/connections.ts';
import { ConnectionView } from './connection-schemas.ts';
import { ApiError, VERIFY_ERRORS } from '../kernel/errors.ts';
import { defineRoute, type AppDeps, type Ctx } from '../kernel/route.ts';
import { IdParam } from '../kernel/schemas.ts';
import { tenantOf } from '../kernel/auth.ts';
import type { ApiKeyAuth, ServiceAuth } from '../kernel/auth.ts';

// Provider connections (spec 2 Connection, 3 Connection, 4.4): the routes;
// the use cases are src/usecases/connections.ts.

const ProviderSlug = z.string().min(1).max(64);
const UserId = z.string().min(1).max(128).regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces');

/** The use case context of a request: the ports, the request's tenant, its command runner. */
async function useCase(ctx: Ctx<unknown, unknown, unknown, ApiKeyAuth | ServiceAuth>): Promise<ConnectionCtx> {
  return { ports: ctx.deps, tenant: await tenantOf(ctx), run: ctx.run.bind(ctx) };
}

export async function connectionRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  connectionResourceRoutes(app, deps);
  connectionChangeRoutes(app, deps);
  credentialValidationRoutes(app, deps);
}

/** Register (or rotate), list, read. */
function connectionResourceRoutes(app: FastifyInstance, deps: AppDeps): void {
  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/connections',
    operationId: 'createConnection',
    summary: 'Register a provider credential (201), or rotate the credential of the live connection for the same server_id and user_id (200)',
    tags: ['connections'],
    auth: 'key_or_service',
    minRole: 'admin',
    scope: 'connections:write',
    body: z.object({
      server_id: ProviderSlug,
      secret: z.union([z.string(), z.record(z.string(), z.unknown())]),
      display_name: z.string().max(DISPLAY_NAME_MAX_CHARS).optional(),
      user_id: UserId.optional(),
      connection_metadata: ConnectionMetadata.optional(),
    }),
    responses: { 201: ConnectionView, 200: ConnectionView },
    errors: [
      [400, 'invalid_body'], [400, 'keys_mismatch'], [400, 'path_secret_keys_mismatch'], [400, 'invalid_secret_shape'], [400, 'not_api_key_server'], [400, 'user_id_required'], [400, 'credential_invalid'],
      [401, 'unauthorized'], [403, 'forbidden'], [403, 'insufficient_role'], [404, 'server_unknown'], [500, 'catalog_row_invalid'], [503, 'vault_unavailable'],
    ],
    async handler(ctx) {
      const r = await createConnection(await useCase(ctx), ctx.body);
      return { status: r.created ? 201 : 200, body: r.connection };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/connections',
    operationId: 'listConnections',
    summary: 'Connections of the project, newest first',
    tags: ['connections'],
    auth: 'api_key',
    scope: 'connections:read',
    query: z.object({
      limit: z.coerce.number().int().min(1).max(200).default(50),
      server_id: z.string().max(64).optional(),
      status: z.enum(['pending', 'connected', 'revoked', 'expired']).optional(),
      user_id: z.string().max(128).optional(),
    }),
    responses: { 200: z.object({ connections: z.array(ConnectionView) }) },
    errors: [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden']],
    async handler({ auth, query, deps }) {
      return { status: 200, body: { connections: await listConnections(deps, auth, query) } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/connections/:id',
    operationId: 'getConnection',
    summary: 'Read a connection (the secret is never returned)',
    tags: ['connections'],
    auth: 'api_key',
    scope: 'connections:read',
    params: z.object({ id: IdParam }),
    responses: { 200: ConnectionView },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler({ auth, params, deps }) {
      const v = await readConnection(deps, auth, params.id);
      if (!v) throw new ApiError(404, 'not_found', 'connection not found');
      return { status: 200, body: v };
    },
  });
}

/** Revoke, the metadata, the inbound webhook secret, delete. */
function connectionChangeRoutes(app: FastifyInstance, deps: AppDeps): void {
  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/connections/:id/revoke',
    operationId: 'revokeConnection',
    summary: 'Revoke: the vault rows are purged, the row is kept for audit; repeating answers already: true',
    tags: ['connections'],
    auth: 'key_or_service',
    minRole: 'admin',
    scope: 'connections:write',
    params: z.object({ id: IdParam }),
    bodyOptional: true,
    responses: { 200: z.object({ id: z.string(), status: z.literal('revoked').describe('The connection is `revoked`: its credential is purged from the vault; the row is kept for audit.'), already: z.literal(true).optional() }) },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [403, 'insufficient_role'], [404, 'not_found'], [503, 'vault_unavailable']],
    idempotent: true,
    async handler(ctx) {
      return { status: 200, body: await revokeConnection(await useCase(ctx), ctx.params.id) };
    },
  });

  defineRoute(app, deps, {
    method: 'PATCH',
    url: '/v1/connections/:id/metadata',
    operationId: 'updateConnectionMetadata',
    summary: 'Merge into connection_metadata (a null value removes a key); other fields are not editable',
    tags: ['connections'],
    auth: 'key_or_service',
    minRole: 'admin',
    scope: 'connections:write',
    params: z.object({ id: IdParam }),
    body: z.record(z.string(), z.unknown()),
    responses: { 200: ConnectionView },
    errors: [[400, 'invalid_body'], [400, 'fields_not_user_editable'], [400, 'no_user_fields'], [401, 'unauthorized'], [403, 'forbidden'], [403, 'insufficient_role'], [404, 'not_found'], [409, 'metadata_update_failed']],
    async handler(ctx) {
      return { status: 200, body: await updateConnectionMetadata(await useCase(ctx), ctx.params.id, ctx.body) };
    },
  });

  defineRoute(app, deps, {
    method: 'PUT',
    url: '/v1/connections/:id/webhook-secret',
    operationId: 'setConnectionWebhookSecret',
    summary: 'Set or rotate the secret that verifies inbound deliveries at /v1/webhooks/{server_id}/{connection_id}; a generated secret is shown once',
    tags: ['connections'],
    auth: 'key_or_service',
    minRole: 'admin',
    scope: 'connections:write',
    params: z.object({ id: IdParam }),
    body: z.object({ secret: z.string().regex(/^whsec_[A-Za-z0-9+/]{32,88}={0,2}$/, 'whsec_ followed by base64 of 24 to 64 bytes').optional() }),
    bodyOptional: true,
    responses: { 200: z.object({ id: z.string(), server_id: z.string(), scheme: z.string(), webhook_url: z.string(), secret: z.string().optional() }) },
    errors: [[400, 'invalid_body'], [400, 'provider_has_no_inbound_webhooks'], [401, 'unauthorized'], [403, 'forbidden'], [403, 'insufficient_role'], [404, 'not_found'], [409, 'connection_not_active'], [503, 'vault_unavailable']],
    async handler(ctx) {
      return { status: 200, body: await setConnectionWebhookSecret(await useCase(ctx), ctx.params.id, ctx.body.secret) };
    },
  });

  defineRoute(app, deps, {
    method: 'DELETE',
    url: '/v1/connections/:id',
    operationId: 'deleteConnection',
    summary: 'Hard delete: the row and the vault rows go; the events stay',
    tags: ['connections'],
    auth: 'key_or_service',
    minRole: 'admin',
    scope: 'connections:write',
    params: z.object({ id: IdParam }),
    responses: { 200: z.object({ id: z.string(), deleted: z.literal(true) }) },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [403, 'insufficient_role'], [404, 'not_found'], [503, 'vault_unavailable']],
    async handler(ctx) {
      const { ports, tenant, run } = await useCase(ctx);
      const c = await loadConnection(ports, tenant, ctx.params.id);
      await deleteConnection(ports, run, tenant, c);
      return { status: 200, body: { id: c.id, deleted: true as const } };
    },
  });
}

/** A candidate credential tried against the provider before it is stored. */
function credentialValidationRoutes(app: FastifyInstance, deps: AppDeps): void {
  for (const [kind, authType] of [['hmac', 'hmac_signed'], ['jwt', 'jwt_ecdsa']] as const) {
    defineRoute(app, deps, {
      method: 'POST',
      url: `/v1/connections/${kind}-validate`,
      operationId: `validate${kind === 'hmac' ? 'Hmac' : 'Jwt'}Credential`,
      summary: `Test a candidate ${authType} credential against the provider before storing it; nothing is written`,
      tags: ['connections'],
      auth: 'api_key',
      scope: 'connections:write',
      body: z.object({ server_id: ProviderSlug, secret: z.union([z.string(), z.record(z.string(), z.unknown())]) }),
      responses: { 200: z.object({ ok: z.literal(true), provider: z.string(), account: z.object({ id: z.string(), name: z.string(), extras: z.record(z.string(), z.unknown()) }).optional(), latency_ms: z.number().int() }) },
      errors: [[400, 'invalid_body'], [400, 'auth_type_mismatch'], [400, 'keys_mismatch'], [400, 'invalid_secret_shape'], [400, 'credential_invalid'], [404, 'server_unknown'], ...VERIFY_ERRORS.filter(([s]) => s !== 404 && s !== 424)],
      async handler({ body, auth, deps, req }) {
        return { status: 200, body: await validateCredential(deps, auth.environment, authType, body, String(req.id)) };
      },
    });
  }
}
