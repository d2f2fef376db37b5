import { randomBytes } from 'node:crypto';
import type { Tenant } from '../../commands/consumer.ts';
import { type Endpoint, ownEndpoint, webhookDecider, webhookStream, type WebhookState } from '../../commands/webhook.ts';
import { checkResolved, checkUrl, UnsafeTarget } from '../adapters/outbound-http.ts';
import { loadState, Rejection } from '../eventstore/handler.ts';
import { newId } from '../ids.ts';
import { isoText as TS } from '../postgres/iso-text.ts';
import type { Ports, RunCommand } from './context.ts';

// Outbound webhook endpoints ("triggers", spec 4.13, 6): create, list, read,
// update, rotate the signing secret, delete. Shared by the routes and the
// project cascade.

/** Provider ids a trigger may be bound to with server_id. */
export const KNOWN_SERVERS = ['open-finance', 'pix', 'x402', 'card-issuer', 'mcp'] as const;
const SECRET_OVERLAP_MS = 24 * 60 * 60 * 1000;

/** An endpoint as the read model holds it (the HTTP answer's shape). */
export type EndpointRow = {
  id: string;
  org_id: string;
  project_id: string | null;
  server_id: string | null;
  name: string;
  event: string;
  webhook_url: string;
  status: 'active' | 'paused' | 'error';
  total_runs: number;
  last_run_at: string | null;
  signing_enabled: boolean;
  created_at: string;
};

type Ctx = { ports: Ports; run: RunCommand; tenant: Tenant };

const COLUMNS = `w.id, w.org_id, w.project_id, w.server_id, w.name, w.event, w.webhook_url, w.status, coalesce(s.total_runs, 0)::int AS total_runs, ${TS('s.last_run_at')} AS last_run_at, true AS signing_enabled, ${TS('w.created_at')} AS created_at`;

/** The tenant's endpoint, or undefined (deleted ones included). */
export async function findEndpoint(ports: Pick<Ports, 'db'>, tenant: Tenant, id: string): Promise<EndpointRow | undefined> {
  const { rows } = await ports.db.query<EndpointRow>(
    `SELECT ${COLUMNS} FROM webhook_endpoints w LEFT JOIN webhook_endpoint_stats s ON s.trigger_id = w.id WHERE w.id = $1 AND w.org_id = $2 AND w.project_id = $3 AND NOT w.deleted`,
    [id, tenant.orgId, tenant.projectId],
  );
  return rows[0];
}

/** The tenant's endpoint, or the rejection not_found. */
export async function readEndpoint(ports: Pick<Ports, 'db'>, tenant: Tenant, id: string): Promise<EndpointRow> {
  const e = await findEndpoint(ports, tenant, id);
  if (!e) throw new Rejection('not_found', 'webhook endpoint not found');
  return e;
}

function endpointRow(e: Endpoint, stats?: { total_runs: number; last_run_at: string | null }): EndpointRow {
  return { id: e.id, org_id: e.orgId, project_id: e.projectId, server_id: e.serverId, name: e.name, event: e.event, webhook_url: e.url, status: e.status, total_runs: stats?.total_runs ?? 0, last_run_at: stats?.last_run_at ?? null, signing_enabled: true, created_at: e.createdAt };
}

const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`;
const secretBytes = (s: string) => Buffer.from(s.slice('whsec_'.length), 'base64');

async function safeUrl(ports: Ports, raw: string): Promise<string> {
  try {
    const url = checkUrl(raw, ports.webhookTargets);
    await checkResolved(url.hostname, ports.webhookTargets).catch((err: unknown) => {
      if (err instanceof UnsafeTarget) throw err;
      // An unresolvable name is checked again at every delivery; let it through here.
    });
    return url.toString();
  } catch (err) {
    if (err instanceof UnsafeTarget) throw new Rejection('invalid_webhook_url', `webhook_url is refused: ${err.reason}`, { reason: err.reason });
    throw err;
  }
}

/** Subscribes a URL to one event type; the signing secret (whsec_) is returned this once. */
export async function createEndpoint(c: Ctx, b: { event: string; name: string; webhook_url: string; server_id?: string | undefined }): Promise<EndpointRow & { secret: string }> {
  const { ports, tenant, run } = c;
  if (b.server_id !== undefined && !(KNOWN_SERVERS as readonly string[]).includes(b.server_id) && !ports.providers.runtime.catalog.get(b.server_id)) throw new Rejection('unknown_server', `server_id names no known provider (${KNOWN_SERVERS.join(', ')}, or a catalog provider id)`);
  const url = await safeUrl(ports, b.webhook_url);
  const id = newId('trg');
  const secret = newSecret();
  const secretRef = await ports.vault.put(tenant.orgId, 'webhook_signing_secret', secretBytes(secret));
  try {
    const r = await run(webhookDecider, webhookStream(id), { type: 'create', id, tenant, name: b.name, event: b.event, url, serverId: b.server_id ?? null, secretRef }, { expectedRevision: 'no_stream' });
    return { ...endpointRow((r.state as Extract<WebhookState, { status: 'exists' }>).e), secret };
  } catch (err) {
    await ports.vault.delete(tenant.orgId, secretRef).catch(() => {});
    throw err;
  }
}

export type EndpointQuery = { before?: string | undefined; event?: string | undefined; server_id?: string | undefined; status?: EndpointRow['status'] | undefined; limit: number };

/** Endpoints, newest first; `before` is the id of the last endpoint of the previous page. */
export async function listEndpoints(ports: Ports, tenant: Tenant, q: EndpointQuery): Promise<{ triggers: EndpointRow[]; next_before: string | null }> {
  const params: unknown[] = [tenant.orgId, tenant.projectId, q.limit];
  let where = 'w.org_id = $1 AND w.project_id = $2 AND NOT w.deleted';
  const add = (sql: string, v: unknown) => {
    params.push(v);
    where += ` AND ${sql.replace('?', `$${params.length}`)}`;
  };
  if (q.before) add('w.created_position < coalesce((SELECT created_position FROM webhook_endpoints WHERE id = ?), \'\')', q.before);
  if (q.event) add('w.event = ?', q.event);
  if (q.server_id) add('w.server_id = ?', q.server_id);
  if (q.status) add('w.status = ?', q.status);
  const { rows } = await ports.db.query<EndpointRow>(`SELECT ${COLUMNS} FROM webhook_endpoints w LEFT JOIN webhook_endpoint_stats s ON s.trigger_id = w.id WHERE ${where} ORDER BY w.created_position DESC LIMIT $3`, params);
  return { triggers: rows, next_before: rows.length === q.limit ? rows[rows.length - 1]!.id : null };
}

/** Sets status active or paused (reactivating drains what waited), renames, or changes the URL. */
export async function updateEndpoint(c: Ctx, id: string, b: { status?: 'active' | 'paused' | undefined; name?: string | undefined; webhook_url?: string | undefined }): Promise<EndpointRow> {
  const { ports, tenant, run } = c;
  const url = b.webhook_url !== undefined ? await safeUrl(ports, b.webhook_url) : undefined;
  const r = await run(webhookDecider, webhookStream(id), { type: 'update', tenant, ...(b.name !== undefined ? { name: b.name } : {}), ...(url !== undefined ? { url } : {}), ...(b.status ? { status: b.status } : {}) });
  if (b.status === 'active') await ports.db.query('UPDATE webhook_endpoint_stats SET consecutive_dead = 0 WHERE trigger_id = $1', [id]);
  return (await findEndpoint(ports, tenant, id)) ?? endpointRow(ownEndpoint(r.state, tenant));
}

/** A new signing secret, returned this once; the previous one keeps signing beside it for 24 hours. */
export async function rotateEndpointSecret(c: Ctx, id: string): Promise<{ id: string; secret: string; previous_secret_valid_until: string }> {
  const { ports, tenant, run } = c;
  const { state } = await loadState(ports.store, webhookStream(id), webhookDecider);
  ownEndpoint(state, tenant);
  const secret = newSecret();
  const secretRef = await ports.vault.put(tenant.orgId, 'webhook_signing_secret', secretBytes(secret));
  const r = await run(webhookDecider, webhookStream(id), { type: 'rotate_secret', tenant, secretRef, overlapMs: SECRET_OVERLAP_MS });
  const e = r.events[0]!;
  return { id, secret, previous_secret_valid_until: e.type === 'webhook_endpoint.secret_rotated' ? e.data.previous_valid_until : '' };
}

/** DELETE /v1/webhook-endpoints/{id}: the tenant's endpoint, deleted as below. */
export async function removeEndpoint(c: Ctx, id: string): Promise<void> {
  const { state } = await loadState(c.ports.store, webhookStream(id), webhookDecider);
  await deleteWebhookEndpoint(c.ports, c.run, c.tenant, ownEndpoint(state, c.tenant));
}

/**
 * Deletes an endpoint: its signing secrets (current and previous) are purged
 * first (`secret_purge_failed`, nothing deleted, when they cannot be), then
 * `webhook_endpoint.deleted`. Used by DELETE /v1/webhook-endpoints/{id} and by
 * the project cascade; repeating it after a crash changes nothing already done.
 */
export async function deleteWebhookEndpoint(ports: Pick<Ports, 'vault'>, run: RunCommand, tenant: Tenant, e: Endpoint): Promise<void> {
  try {
    await ports.vault.delete(tenant.orgId, e.secretRef);
    if (e.previousSecret) await ports.vault.delete(tenant.orgId, e.previousSecret.ref);
  } catch {
    throw new Rejection('secret_purge_failed', 'the signing secret could not be purged; nothing was deleted', { retriable: true });
  }
  await run(webhookDecider, webhookStream(e.id), { type: 'delete', tenant }, { serialize: true, orgId: tenant.orgId, projectId: tenant.projectId });
}
