import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { type Connection, connectionDecider, connectionSlotDecider, connectionSlotStream, connectionStream, ownConnection, refsOf } from '../../commands/connection.ts';
import type { Tenant } from '../../commands/consumer.ts';
import { loadState, Rejection } from '../eventstore/handler.ts';
import type { ProviderDef } from '../providers/catalog.ts';
import { checkCredential, encodeCredential } from '../providers/credentials.ts';
import { CONNECTION_METADATA_MAX_BYTES, CONNECTION_METADATA_MAX_KEYS, DISPLAY_NAME_MAX_CHARS } from '../limits.ts';
import { ApiError, VERIFY_ERRORS } from './errors.ts';
import { newId } from './ids.ts';
import { probeProvider } from '../usecases/providers.ts';
import { defineRoute, type AppDeps, type RunCommand } from './route.ts';
import { tenantOf } from './tenant.ts';
import { IdParam, Timestamp, isoText as TS } from './schemas.ts';

// Provider connections (spec 2 Connection, 3 Connection, 4.4): credentials
// checked against the catalog, stored in the vault (AES-256-GCM), never
// returned; rotation in place for the same server and end user; revoke purges
// the vault rows and keeps the row; delete removes the row and the vault rows.

export const ConnectionView = z
  .object({
    id: z.string(),
    user_id: z.string().nullable(),
    server_id: z.string(),
    auth_type: z.string(),
    status: z.enum(['pending', 'connected', 'revoked', 'expired']),
    display_name: z.string().nullable(),
    metadata: z.record(z.string(), z.unknown()).nullable(),
    connection_metadata: z.record(z.string(), z.unknown()),
    cert_metadata: z.record(z.string(), z.unknown()),
    created_at: Timestamp,
    connected_at: Timestamp.nullable(),
    revoked_at: Timestamp.nullable(),
    expires_at: Timestamp.nullable(),
  })
  .meta({ id: 'Connection' });
type View = z.infer<typeof ConnectionView>;
const COLUMNS = `id, user_id, server_id, auth_type, status, display_name, metadata, connection_metadata, cert_metadata, ${TS('created_at')} AS created_at,
  ${TS('connected_at')} AS connected_at, ${TS('revoked_at')} AS revoked_at, ${TS('expires_at')} AS expires_at`;

const notFound = () => new ApiError(404, 'not_found', 'connection not found');

export async function readConnection(deps: AppDeps, t: Tenant, id: string): Promise<View | undefined> {
  const { rows } = await deps.db.query<View>(`SELECT ${COLUMNS} FROM connections WHERE id = $1 AND org_id = $2 AND project_id = $3`, [id, t.orgId, t.projectId]);
  return rows[0];
}


const vaultDown = (err: unknown) => new ApiError(503, 'vault_unavailable', 'the vault could not be written; nothing was stored', { retriable: true, reason: err instanceof Error ? err.constructor.name : 'error' });

/** Removes vault rows; a failure is a 503 before anything else changed. */
async function purge(deps: Pick<AppDeps, 'vault'>, orgId: string, refs: string[]): Promise<void> {
  try {
    for (const r of refs) await deps.vault.delete(orgId, r);
  } catch (err) {
    throw new ApiError(503, 'vault_unavailable', 'the vault rows could not be purged; nothing changed', { retriable: true, reason: err instanceof Error ? err.constructor.name : 'error' });
  }
}

/**
 * Deletes a connection: its vault rows are purged first (503 vault_unavailable,
 * nothing else changed, when they cannot be), then `connection.deleted`, then
 * its slot is released. Used by DELETE /v1/connections/{id} and by the project
 * cascade; repeating it after a crash changes nothing already done.
 */
export async function deleteConnection(deps: Pick<AppDeps, 'vault'>, run: RunCommand, tenant: Tenant, c: Connection): Promise<void> {
  await purge(deps, tenant.orgId, refsOf(c));
  await run(connectionDecider, connectionStream(c.id), { type: 'delete', tenant }, { serialize: true, orgId: tenant.orgId, projectId: tenant.projectId });
  await run(connectionSlotDecider, connectionSlotStream(tenant, c.serverId, c.userId), { type: 'release', connectionId: c.id }, { serialize: true, orgId: tenant.orgId, projectId: tenant.projectId });
}

const ConnectionMetadata = z
  .record(z.string().min(1).max(200), z.unknown())
  .refine((m) => Object.keys(m).length <= CONNECTION_METADATA_MAX_KEYS, `at most ${CONNECTION_METADATA_MAX_KEYS} keys`)
  .refine((m) => Buffer.byteLength(JSON.stringify(m)) <= CONNECTION_METADATA_MAX_BYTES, `at most ${CONNECTION_METADATA_MAX_BYTES} bytes serialized`);

const ProviderSlug = z.string().min(1).max(64);
const UserId = z.string().min(1).max(128).regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces');

function providerOf(deps: AppDeps, serverId: string): ProviderDef {
  const p = deps.providers.runtime.catalog.get(serverId);
  if (!p) throw new ApiError(404, 'server_unknown', `no provider ${serverId} in the catalog`, { server_id: serverId });
  return p;
}

export async function connectionRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
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
      const { body, deps } = ctx;
      const tenant = await tenantOf(ctx as never);
      const p = providerOf(deps, body.server_id);
      const checked = checkCredential(p, body.secret);
      const userId = body.user_id ?? null;
      if (p.connection_scope === 'user' && userId === null) throw new Rejection('user_id_required', `${p.id} connections belong to an end user: give user_id`);
      const slot = connectionSlotStream(tenant, p.id, userId);
      let ref: string;
      try {
        ref = await deps.vault.put(tenant.orgId, `connection:${p.id}`, encodeCredential(checked.credential));
      } catch (err) {
        throw vaultDown(err);
      }
      try {
        for (let attempt = 0; ; attempt++) {
          const holder = (await loadState(deps.store, slot, connectionSlotDecider)).state.holder;
          if (holder) {
            const r = await ctx.run(
              connectionDecider,
              connectionStream(holder),
              { type: 'rotate', tenant, data: { secret_ref: ref, cert_metadata: checked.certMetadata, expires_at: checked.expiresAt, ...(body.display_name !== undefined ? { display_name: body.display_name } : {}), ...(body.connection_metadata ? { connection_metadata: body.connection_metadata } : {}) } },
              { serialize: true, projectId: tenant.projectId },
            );
            const rotated = r.events[0];
            if (rotated?.type === 'connection.credential_rotated') await deps.vault.delete(tenant.orgId, rotated.data.previous_secret_ref).catch(() => {});
            return { status: 200, body: (await readConnection(deps, tenant, holder))! };
          }
          const id = newId('ca');
          try {
            await ctx.run(connectionSlotDecider, slot, { type: 'claim', connectionId: id }, { serialize: true, maxAttempts: 1, projectId: tenant.projectId });
          } catch (err) {
            if (attempt < 3 && err instanceof Rejection && (err.code === 'slot_taken' || err.code === 'concurrency_conflict')) continue; // a racer created it: rotate theirs
            throw err;
          }
          try {
            await ctx.run(
              connectionDecider,
              connectionStream(id),
              {
                type: 'create',
                data: {
                  connection_id: id,
                  org_id: tenant.orgId,
                  project_id: tenant.projectId,
                  server_id: p.id,
                  auth_type: p.auth_type,
                  user_id: userId,
                  display_name: body.display_name ?? null,
                  connection_metadata: body.connection_metadata ?? {},
                  cert_metadata: checked.certMetadata,
                  secret_ref: ref,
                  expires_at: checked.expiresAt,
                  created_at: deps.now().toISOString(),
                },
              },
              { expectedRevision: 'no_stream', projectId: tenant.projectId },
            );
          } catch (err) {
            await ctx.run(connectionSlotDecider, slot, { type: 'release', connectionId: id }, { serialize: true, projectId: tenant.projectId }).catch(() => {});
            throw err;
          }
          return { status: 201, body: (await readConnection(deps, tenant, id))! };
        }
      } catch (err) {
        await deps.vault.delete(tenant.orgId, ref).catch(() => {});
        throw err;
      }
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
      const params: unknown[] = [auth.orgId, auth.projectId, query.limit];
      let where = 'org_id = $1 AND project_id = $2';
      for (const [col, v] of [['server_id', query.server_id], ['status', query.status], ['user_id', query.user_id]] as const) {
        if (v === undefined) continue;
        params.push(v);
        where += ` AND ${col} = $${params.length}`;
      }
      const { rows } = await deps.db.query<View>(`SELECT ${COLUMNS} FROM connections WHERE ${where} ORDER BY created_at DESC, id DESC LIMIT $3`, params);
      return { status: 200, body: { connections: rows } };
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
      if (!v) throw notFound();
      return { status: 200, body: v };
    },
  });

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
    responses: { 200: z.object({ id: z.string(), status: z.literal('revoked'), already: z.literal(true).optional() }) },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [403, 'insufficient_role'], [404, 'not_found'], [503, 'vault_unavailable']],
    idempotent: true,
    async handler(ctx) {
      const { params, deps } = ctx;
      const tenant = await tenantOf(ctx as never);
      const c = ownConnection((await loadState(deps.store, connectionStream(params.id), connectionDecider)).state, tenant);
      if (c.status === 'revoked') return { status: 200, body: { id: c.id, status: 'revoked' as const, already: true as const } };
      // The secret material goes first: a failure after this point leaves a connection without a credential (verify answers 424), never a revoked one with one.
      await purge(deps, tenant.orgId, refsOf(c));
      const r = await ctx.run(connectionDecider, connectionStream(c.id), { type: 'revoke', tenant }, { serialize: true, projectId: tenant.projectId });
      await ctx.run(connectionSlotDecider, connectionSlotStream(tenant, c.serverId, c.userId), { type: 'release', connectionId: c.id }, { serialize: true, projectId: tenant.projectId });
      return { status: 200, body: r.changed ? { id: c.id, status: 'revoked' as const } : { id: c.id, status: 'revoked' as const, already: true as const } };
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
      const { params, body, deps } = ctx;
      const tenant = await tenantOf(ctx as never);
      const c = ownConnection((await loadState(deps.store, connectionStream(params.id), connectionDecider)).state, tenant);
      const others = Object.keys(body).filter((k) => k !== 'connection_metadata');
      if (others.length > 0) throw new ApiError(400, 'fields_not_user_editable', 'only connection_metadata can be edited', { fields: others.slice(0, 20) });
      const patch = body.connection_metadata;
      if (patch === undefined) throw new ApiError(400, 'no_user_fields', 'give connection_metadata to update');
      const shaped = z.record(z.string().min(1).max(200), z.unknown()).safeParse(patch);
      if (!shaped.success) throw new ApiError(400, 'invalid_body', 'connection_metadata must be an object', { issues: shaped.error.issues.map((i) => ({ path: ['connection_metadata', ...i.path.map(String)], code: i.code, message: i.message })) });
      const merged: Record<string, unknown> = { ...c.connectionMetadata };
      for (const [k, v] of Object.entries(shaped.data)) if (v === null) delete merged[k];
      else merged[k] = v;
      const capped = ConnectionMetadata.safeParse(merged);
      if (!capped.success) throw new ApiError(400, 'invalid_body', 'connection_metadata would exceed its limits', { issues: capped.error.issues.map((i) => ({ path: ['connection_metadata'], code: i.code, message: i.message })) });
      try {
        await ctx.run(connectionDecider, connectionStream(c.id), { type: 'update_metadata', tenant, connectionMetadata: merged }, { conflictCode: 'metadata_update_failed', projectId: tenant.projectId });
      } catch (err) {
        if (err instanceof Rejection && err.code === 'concurrency_conflict') throw new Rejection('metadata_update_failed', 'the connection changed meanwhile; retry');
        throw err;
      }
      return { status: 200, body: (await readConnection(deps, tenant, c.id))! };
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
      const { params, body, deps } = ctx;
      const tenant = await tenantOf(ctx as never);
      const c = ownConnection((await loadState(deps.store, connectionStream(params.id), connectionDecider)).state, tenant);
      const p = deps.providers.runtime.catalog.get(c.serverId);
      if (!p?.inbound_webhooks) throw new ApiError(400, 'provider_has_no_inbound_webhooks', `${c.serverId} sends no webhooks`);
      if (c.status === 'revoked') throw new Rejection('connection_not_active', 'the connection is revoked', { status: c.status });
      const generated = body.secret === undefined;
      const secret = body.secret ?? `whsec_${randomBytes(32).toString('base64')}`;
      if (Buffer.from(secret.slice(6), 'base64').length < 24) throw new ApiError(400, 'invalid_body', 'the secret must carry at least 24 bytes');
      let ref: string;
      try {
        ref = await deps.vault.put(tenant.orgId, 'connection_webhook_secret', Buffer.from(secret, 'utf8'));
      } catch (err) {
        throw vaultDown(err);
      }
      let r;
      try {
        r = await ctx.run(connectionDecider, connectionStream(c.id), { type: 'set_webhook_secret', tenant, ref }, { serialize: true, projectId: tenant.projectId });
      } catch (err) {
        await deps.vault.delete(tenant.orgId, ref).catch(() => {});
        throw err;
      }
      const prev = r.events[0]?.type === 'connection.webhook_secret_set' ? r.events[0].data.previous_webhook_secret_ref : null;
      if (prev) await deps.vault.delete(tenant.orgId, prev).catch(() => {});
      return {
        status: 200,
        body: { id: c.id, server_id: c.serverId, scheme: p.inbound_webhooks.scheme, webhook_url: `${deps.baseUrl}/v1/webhooks/${c.serverId}/${c.id}`, ...(generated ? { secret } : {}) },
      };
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
      const { params, deps } = ctx;
      const tenant = await tenantOf(ctx as never);
      const c = ownConnection((await loadState(deps.store, connectionStream(params.id), connectionDecider)).state, tenant);
      await deleteConnection(deps, ctx.run.bind(ctx), tenant, c);
      return { status: 200, body: { id: c.id, deleted: true as const } };
    },
  });

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
        const p = providerOf(deps, body.server_id);
        if (p.auth_type !== authType) throw new ApiError(400, 'auth_type_mismatch', `${p.id} uses ${p.auth_type}, not ${authType}`, { auth_type: p.auth_type });
        const checked = checkCredential(p, body.secret);
        return { status: 200, body: await probeProvider(deps, p, auth.environment, checked.credential, String(req.id)) };
      },
    });
  }
}
