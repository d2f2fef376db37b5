import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { type Connection, connectionDecider, connectionSlotDecider, connectionSlotStream, connectionStream, ownConnection, refsOf } from '../../commands/connection.ts';
import { loadState, Rejection } from '../eventstore/handler.ts';
import { newId } from '../ids.ts';
import { CONNECTION_METADATA_MAX_BYTES, CONNECTION_METADATA_MAX_KEYS } from '../limits.ts';
import { isoText as TS } from '../postgres/iso-text.ts';
import { checkCredential, encodeCredential } from '../providers/credentials.ts';
import type { Environment } from '../providers/tools.ts';
import type { Ports, RunCommand, Tenant, UseCaseCtx } from './context.ts';
import { probeProvider, providerOf, type VerifyOk } from './providers.ts';

// Provider connections (spec 2 Connection, 3 Connection, 4.4): credentials
// checked against the catalog, stored in the vault (AES-256-GCM), never
// returned; rotation in place for the same server and end user; revoke purges
// the vault rows and keeps the row; delete removes the row and the vault rows.
// The create-or-rotate of the OAuth callback, hosted connect and signup runs
// is upsertConnection; deletion is shared with the project cascade.

/** What a connection use case needs of its context. */
export type ConnectionCtx = Pick<UseCaseCtx, 'ports' | 'tenant' | 'run'>;

/** A connection as the read model answers it (the secret never). */
export type ConnectionRow = {
  id: string;
  user_id: string | null;
  server_id: string;
  auth_type: string;
  status: 'pending' | 'connected' | 'revoked' | 'expired';
  display_name: string | null;
  metadata: Record<string, unknown> | null;
  connection_metadata: Record<string, unknown>;
  cert_metadata: Record<string, unknown>;
  created_at: string;
  connected_at: string | null;
  revoked_at: string | null;
  expires_at: string | null;
};
const COLUMNS = `id, user_id, server_id, auth_type, status, display_name, metadata, connection_metadata, cert_metadata, ${TS('created_at')} AS created_at,
  ${TS('connected_at')} AS connected_at, ${TS('revoked_at')} AS revoked_at, ${TS('expires_at')} AS expires_at`;

/** connection_metadata: bounded keys and size. */
export const ConnectionMetadata = z
  .record(z.string().min(1).max(200), z.unknown())
  .refine((m) => Object.keys(m).length <= CONNECTION_METADATA_MAX_KEYS, `at most ${CONNECTION_METADATA_MAX_KEYS} keys`)
  .refine((m) => Buffer.byteLength(JSON.stringify(m)) <= CONNECTION_METADATA_MAX_BYTES, `at most ${CONNECTION_METADATA_MAX_BYTES} bytes serialized`);

export async function readConnection(ports: Pick<Ports, 'db'>, t: Tenant, id: string): Promise<ConnectionRow | undefined> {
  const { rows } = await ports.db.query<ConnectionRow>(`SELECT ${COLUMNS} FROM connections WHERE id = $1 AND org_id = $2 AND project_id = $3`, [id, t.orgId, t.projectId]);
  return rows[0];
}

export type ConnectionFilter = { limit: number; server_id?: string | undefined; status?: ConnectionRow['status'] | undefined; user_id?: string | undefined };

/** The project's connections, newest first. */
export async function listConnections(ports: Pick<Ports, 'db'>, t: Tenant, f: ConnectionFilter): Promise<ConnectionRow[]> {
  const params: unknown[] = [t.orgId, t.projectId, f.limit];
  let where = 'org_id = $1 AND project_id = $2';
  for (const [col, v] of [['server_id', f.server_id], ['status', f.status], ['user_id', f.user_id]] as const) {
    if (v === undefined) continue;
    params.push(v);
    where += ` AND ${col} = $${params.length}`;
  }
  const { rows } = await ports.db.query<ConnectionRow>(`SELECT ${COLUMNS} FROM connections WHERE ${where} ORDER BY connections.created_at DESC, id DESC LIMIT $3`, params);
  return rows;
}

/** A connection of the tenant from its stream, or `not_found`. */
export async function loadConnection(ports: Pick<Ports, 'store'>, t: Tenant, id: string): Promise<Connection> {
  return ownConnection((await loadState(ports.store, connectionStream(id), connectionDecider)).state, t);
}

const vaultDown = (err: unknown) => new Rejection('vault_unavailable', 'the vault could not be written; nothing was stored', { retriable: true, reason: err instanceof Error ? err.constructor.name : 'error' });

/** Removes vault rows; a failure is `vault_unavailable` (503) before anything else changed. */
async function purge(ports: Pick<Ports, 'vault'>, orgId: string, refs: string[]): Promise<void> {
  try {
    for (const r of refs) await ports.vault.delete(orgId, r);
  } catch (err) {
    throw new Rejection('vault_unavailable', 'the vault rows could not be purged; nothing changed', { retriable: true, reason: err instanceof Error ? err.constructor.name : 'error' });
  }
}

/**
 * Deletes a connection: its vault rows are purged first (503 vault_unavailable,
 * nothing else changed, when they cannot be), then `connection.deleted`, then
 * its slot is released. Used by DELETE /v1/connections/{id} and by the project
 * cascade; repeating it after a crash changes nothing already done.
 */
export async function deleteConnection(ports: Pick<Ports, 'vault'>, run: RunCommand, tenant: Tenant, c: Connection): Promise<void> {
  await purge(ports, tenant.orgId, refsOf(c));
  await run(connectionDecider, connectionStream(c.id), { type: 'delete', tenant }, { serialize: true, orgId: tenant.orgId, projectId: tenant.projectId });
  await run(connectionSlotDecider, connectionSlotStream(tenant, c.serverId, c.userId), { type: 'release', connectionId: c.id }, { serialize: true, orgId: tenant.orgId, projectId: tenant.projectId });
}

export type CreateConnectionInput = { server_id: string; secret: string | Record<string, unknown>; display_name?: string | undefined; user_id?: string | undefined; connection_metadata?: Record<string, unknown> | undefined };

/**
 * POST /v1/connections: checks the credential against the catalog, stores it
 * in the vault, and creates the connection of this server and end user, or
 * rotates the live one's credential (created: false). Nothing stays in the
 * vault when it fails.
 */
export async function createConnection(ctx: ConnectionCtx, body: CreateConnectionInput): Promise<{ created: boolean; connection: ConnectionRow }> {
  const { ports, tenant } = ctx;
  const p = providerOf(ports, body.server_id);
  const checked = checkCredential(p, body.secret);
  const userId = body.user_id ?? null;
  if (p.connection_scope === 'user' && userId === null) throw new Rejection('user_id_required', `${p.id} connections belong to an end user: give user_id`);
  const slot = connectionSlotStream(tenant, p.id, userId);
  let ref: string;
  try {
    ref = await ports.vault.put(tenant.orgId, `connection:${p.id}`, encodeCredential(checked.credential));
  } catch (err) {
    throw vaultDown(err);
  }
  try {
    for (let attempt = 0; ; attempt++) {
      const holder = (await loadState(ports.store, slot, connectionSlotDecider)).state.holder;
      if (holder) {
        const r = await ctx.run(
          connectionDecider,
          connectionStream(holder),
          { type: 'rotate', tenant, data: { secret_ref: ref, cert_metadata: checked.certMetadata, expires_at: checked.expiresAt, ...(body.display_name !== undefined ? { display_name: body.display_name } : {}), ...(body.connection_metadata ? { connection_metadata: body.connection_metadata } : {}) } },
          { serialize: true, projectId: tenant.projectId },
        );
        const rotated = r.events[0];
        if (rotated?.type === 'connection.credential_rotated') await ports.vault.delete(tenant.orgId, rotated.data.previous_secret_ref).catch(() => {});
        return { created: false, connection: (await readConnection(ports, tenant, holder))! };
      }
      const id = newId('ca');
      try {
        await ctx.run(connectionSlotDecider, slot, { type: 'claim', connectionId: id }, { serialize: true, maxAttempts: 1, projectId: tenant.projectId });
      } catch (err) {
        if (attempt < 3 && err instanceof Rejection && (err.code === 'slot_taken' || err.code === 'concurrency_conflict')) continue; // a racer created it: rotate theirs
        throw err;
      }
      const data = {
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
        created_at: ports.now().toISOString(),
      };
      try {
        await ctx.run(connectionDecider, connectionStream(id), { type: 'create', data }, { expectedRevision: 'no_stream', projectId: tenant.projectId });
      } catch (err) {
        await ctx.run(connectionSlotDecider, slot, { type: 'release', connectionId: id }, { serialize: true, projectId: tenant.projectId }).catch(() => {});
        throw err;
      }
      return { created: true, connection: (await readConnection(ports, tenant, id))! };
    }
  } catch (err) {
    await ports.vault.delete(tenant.orgId, ref).catch(() => {});
    throw err;
  }
}

/**
 * Creates the connection of this server and end user, or rotates the credential of the live one
 * (as POST /v1/connections does) and deletes the replaced secret from the vault. Shared by the
 * OAuth callback, hosted-browser finish and browser signup runs. `metadata` undefined writes none
 * (a rotation then keeps the connection's provider metadata).
 */
export async function upsertConnection(ctx: { ports: Pick<Ports, 'store' | 'vault' | 'now'>; run: RunCommand }, tenant: Tenant, serverId: string, userId: string | null, ref: string, metadata: Record<string, unknown> | undefined, authType = 'oauth'): Promise<string> {
  const { ports } = ctx;
  const slot = connectionSlotStream(tenant, serverId, userId);
  for (let attempt = 0; ; attempt++) {
    const holder = (await loadState(ports.store, slot, connectionSlotDecider)).state.holder;
    if (holder) {
      const r = await ctx.run(connectionDecider, connectionStream(holder), { type: 'rotate', tenant, data: { secret_ref: ref, cert_metadata: {}, expires_at: null, ...(metadata !== undefined ? { metadata } : {}) } }, { serialize: true, orgId: tenant.orgId, projectId: tenant.projectId });
      const rotated = r.events[0];
      if (rotated?.type === 'connection.credential_rotated') await ports.vault.delete(tenant.orgId, rotated.data.previous_secret_ref).catch(() => {});
      return holder;
    }
    const id = newId('ca');
    try {
      await ctx.run(connectionSlotDecider, slot, { type: 'claim', connectionId: id }, { serialize: true, maxAttempts: 1, orgId: tenant.orgId, projectId: tenant.projectId });
    } catch (err) {
      if (attempt < 3 && err instanceof Rejection && (err.code === 'slot_taken' || err.code === 'concurrency_conflict')) continue;
      throw err;
    }
    const data = {
      connection_id: id,
      org_id: tenant.orgId,
      project_id: tenant.projectId,
      server_id: serverId,
      auth_type: authType,
      user_id: userId,
      display_name: null,
      connection_metadata: {},
      cert_metadata: {},
      secret_ref: ref,
      expires_at: null,
      created_at: ports.now().toISOString(),
      ...(metadata !== undefined ? { metadata } : {}),
    };
    await ctx.run(connectionDecider, connectionStream(id), { type: 'create', data }, { expectedRevision: 'no_stream', orgId: tenant.orgId, projectId: tenant.projectId });
    return id;
  }
}

/** Revokes: the vault rows are purged, the row is kept; `already` when it was revoked before. */
export async function revokeConnection(ctx: ConnectionCtx, id: string): Promise<{ id: string; status: 'revoked'; already?: true }> {
  const { ports, tenant } = ctx;
  const c = await loadConnection(ports, tenant, id);
  if (c.status === 'revoked') return { id: c.id, status: 'revoked', already: true };
  // The secret material goes first: a failure after this point leaves a connection without a credential (verify answers 424), never a revoked one with one.
  await purge(ports, tenant.orgId, refsOf(c));
  const r = await ctx.run(connectionDecider, connectionStream(c.id), { type: 'revoke', tenant }, { serialize: true, projectId: tenant.projectId });
  await ctx.run(connectionSlotDecider, connectionSlotStream(tenant, c.serverId, c.userId), { type: 'release', connectionId: c.id }, { serialize: true, projectId: tenant.projectId });
  return r.changed ? { id: c.id, status: 'revoked' } : { id: c.id, status: 'revoked', already: true };
}

/** Merges into connection_metadata (a null value removes a key); no other field is editable. */
export async function updateConnectionMetadata(ctx: ConnectionCtx, id: string, body: Record<string, unknown>): Promise<ConnectionRow> {
  const { ports, tenant } = ctx;
  const c = await loadConnection(ports, tenant, id);
  const others = Object.keys(body).filter((k) => k !== 'connection_metadata');
  if (others.length > 0) throw new Rejection('fields_not_user_editable', 'only connection_metadata can be edited', { fields: others.slice(0, 20) });
  const patch = body.connection_metadata;
  if (patch === undefined) throw new Rejection('no_user_fields', 'give connection_metadata to update');
  const shaped = z.record(z.string().min(1).max(200), z.unknown()).safeParse(patch);
  if (!shaped.success) throw new Rejection('invalid_body', 'connection_metadata must be an object', { issues: shaped.error.issues.map((i) => ({ path: ['connection_metadata', ...i.path.map(String)], code: i.code, message: i.message })) });
  const merged: Record<string, unknown> = { ...c.connectionMetadata };
  for (const [k, v] of Object.entries(shaped.data)) if (v === null) delete merged[k];
  else merged[k] = v;
  const capped = ConnectionMetadata.safeParse(merged);
  if (!capped.success) throw new Rejection('invalid_body', 'connection_metadata would exceed its limits', { issues: capped.error.issues.map((i) => ({ path: ['connection_metadata'], code: i.code, message: i.message })) });
  try {
    await ctx.run(connectionDecider, connectionStream(c.id), { type: 'update_metadata', tenant, connectionMetadata: merged }, { conflictCode: 'metadata_update_failed', projectId: tenant.projectId });
  } catch (err) {
    if (err instanceof Rejection && err.code === 'concurrency_conflict') throw new Rejection('metadata_update_failed', 'the connection changed meanwhile; retry');
    throw err;
  }
  return (await readConnection(ports, tenant, c.id))!;
}

/** Sets or rotates the secret verifying inbound deliveries; a generated secret is answered once. */
export async function setConnectionWebhookSecret(ctx: ConnectionCtx, id: string, given: string | undefined): Promise<{ id: string; server_id: string; scheme: string; webhook_url: string; secret?: string }> {
  const { ports, tenant } = ctx;
  const c = await loadConnection(ports, tenant, id);
  const p = ports.providers.runtime.catalog.get(c.serverId);
  if (!p?.inbound_webhooks) throw new Rejection('provider_has_no_inbound_webhooks', `${c.serverId} sends no webhooks`);
  if (c.status === 'revoked') throw new Rejection('connection_not_active', 'the connection is revoked', { status: c.status });
  const generated = given === undefined;
  const secret = given ?? `whsec_${randomBytes(32).toString('base64')}`;
  if (Buffer.from(secret.slice(6), 'base64').length < 24) throw new Rejection('invalid_body', 'the secret must carry at least 24 bytes');
  let ref: string;
  try {
    ref = await ports.vault.put(tenant.orgId, 'connection_webhook_secret', Buffer.from(secret, 'utf8'));
  } catch (err) {
    throw vaultDown(err);
  }
  let r;
  try {
    r = await ctx.run(connectionDecider, connectionStream(c.id), { type: 'set_webhook_secret', tenant, ref }, { serialize: true, projectId: tenant.projectId });
  } catch (err) {
    await ports.vault.delete(tenant.orgId, ref).catch(() => {});
    throw err;
  }
  const prev = r.events[0]?.type === 'connection.webhook_secret_set' ? r.events[0].data.previous_webhook_secret_ref : null;
  if (prev) await ports.vault.delete(tenant.orgId, prev).catch(() => {});
  return { id: c.id, server_id: c.serverId, scheme: p.inbound_webhooks.scheme, webhook_url: `${ports.baseUrl}/v1/webhooks/${c.serverId}/${c.id}`, ...(generated ? { secret } : {}) };
}

/** Tests a candidate credential of the given auth type against the provider; nothing is written. */
export async function validateCredential(ports: Pick<Ports, 'providers'>, environment: Environment, authType: string, body: { server_id: string; secret: string | Record<string, unknown> }, requestId: string): Promise<VerifyOk> {
  const p = providerOf(ports, body.server_id);
  if (p.auth_type !== authType) throw new Rejection('auth_type_mismatch', `${p.id} uses ${p.auth_type}, not ${authType}`, { auth_type: p.auth_type });
  const checked = checkCredential(p, body.secret);
  return probeProvider(ports, p, environment, checked.credential, requestId);
}
