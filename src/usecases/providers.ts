import type { Credential } from '../adapters/providers/http-provider.ts';
import { Rejection } from '../eventstore/handler.ts';
import { baseUrlOf, type ProviderDef } from '../providers/catalog.ts';
import { toolErrorOf, type Environment, type ToolError } from '../providers/tools.ts';
import type { Ports } from './context.ts';

// Verify-connection (spec 4.5): a probe of the provider with a credential
// (stored or candidate). A failure is the rejection `verify_failed` whose
// details are the spec's body {ok: false, error: <code>, message, request_id,
// ...}; the HTTP layer answers it whole with the status of its code
// (src/http/kernel/errors.ts), and a signup run records it as its probe result.
// Also the catalog's reads: the search, one row, a connection's fields.

export type VerifyOk = { ok: true; provider: string; account?: { id: string; name: string; extras: Record<string, unknown> }; latency_ms: number };

/** The rejection of a failed verify: its details are the spec's body; 502 carries `status` only when the provider answered. */
export function verifyFailure(e: ToolError, requestId: string): Rejection {
  const code = e.code === 'provider_error' ? 'provider_unreachable' : e.code;
  return new Rejection('verify_failed', e.message, {
    ok: false,
    error: code,
    message: e.message,
    ...(e.detail !== undefined ? { detail: e.detail } : {}),
    ...(e.code === 'provider_error' && e.status !== undefined ? { status: e.status } : {}),
    ...(e.location !== undefined ? { location: e.location } : {}),
    request_id: requestId,
  });
}

/** The catalog rows matching a category, a country and a free-text q (over id, name, description, category and tool names), and the catalog's size. */
export function searchCatalog(ports: Pick<Ports, 'providers'>, filter: { category?: string | undefined; country?: string | undefined; q?: string | undefined }): { total: number; servers: ProviderDef[] } {
  const catalog = ports.providers.runtime.catalog;
  const q = filter.q?.trim().toLowerCase();
  const servers = catalog.providers.filter(
    (p) =>
      (!filter.category || p.category === filter.category.toLowerCase()) &&
      (!filter.country || p.country === filter.country.toUpperCase()) &&
      (!q || [p.id, p.name, p.description ?? '', p.category, ...p.tools.map((t) => t.name)].some((s) => s.toLowerCase().includes(q))),
  );
  return { total: catalog.providers.length, servers };
}

/** A catalog row by slug, or the rejection `not_found`. */
export function catalogEntry(ports: Pick<Ports, 'providers'>, slug: string): ProviderDef {
  const p = ports.providers.runtime.catalog.get(slug);
  if (!p) throw new Rejection('not_found', 'provider not found');
  return p;
}

/** What a connection to a provider needs in an environment: the fields in render order, the base URL, the OAuth authorize URL. */
export function connectionSchema(ports: Pick<Ports, 'providers'>, slug: string, environment: Environment) {
  const p = catalogEntry(ports, slug);
  return {
    server_id: p.id,
    auth_type: p.auth_type,
    environment,
    base_url: baseUrlOf(p, environment, ports.providers.runtime.sandbox),
    fields: p.fields.map((f) => ({ name: f.name, kind: f.kind, label: f.label, header_name: f.header_name })),
    oauth_authorize_url: p.auth_type === 'oauth' ? (p.oauth?.authorize_url ?? null) : null,
  };
}

/** The provider of a catalog slug, or the rejection `server_unknown` (404). */
export function providerOf(ports: Pick<Ports, 'providers'>, serverId: string): ProviderDef {
  const p = ports.providers.runtime.catalog.get(serverId);
  if (!p) throw new Rejection('server_unknown', `no provider ${serverId} in the catalog`, { server_id: serverId });
  return p;
}

/** Probes a provider with a credential (stored or candidate); the 200 body, or throws `verify_failed`. */
export async function probeProvider(ports: Pick<Ports, 'providers'>, p: ProviderDef, environment: Environment, credential: Credential | undefined, requestId: string): Promise<VerifyOk> {
  if (!p.verify) throw verifyFailure({ code: 'verify_unsupported', message: `${p.id} (${p.auth_type}) has no verification probe`, retriable: false }, requestId);
  const base = baseUrlOf(p, environment, ports.providers.runtime.sandbox);
  if (!base) throw verifyFailure({ code: 'endpoint_missing', message: `the catalog has no ${environment} endpoint for ${p.id}`, retriable: false }, requestId);
  try {
    const r = await ports.providers.runtime.client.request(p, base, credential, { method: p.verify.method, path: p.verify.path });
    const j = r.json as Record<string, unknown> | null;
    const account =
      p.verify.probe === 'account' && j && typeof j === 'object' && (typeof j.id === 'string' || typeof j.id === 'number')
        ? { id: String(j.id), name: typeof j.name === 'string' ? j.name : '', extras: Object.fromEntries(Object.entries(j).filter(([k]) => k !== 'id' && k !== 'name')) }
        : undefined;
    return { ok: true, provider: p.id, ...(account ? { account } : {}), latency_ms: r.latencyMs };
  } catch (err) {
    throw verifyFailure(toolErrorOf(err), requestId);
  }
}

/** Verifies the stored connection of a provider: the project-wide one, or exactly the one of userId. */
export async function verifyConnection(ports: Pick<Ports, 'providers'>, p: ProviderDef, tenant: { orgId: string; projectId: string; environment: Environment }, userId: string | null, requestId: string): Promise<VerifyOk> {
  if (!p.verify) throw verifyFailure({ code: 'verify_unsupported', message: `${p.id} (${p.auth_type}) has no verification probe`, retriable: false }, requestId);
  if (!baseUrlOf(p, tenant.environment, ports.providers.runtime.sandbox)) throw verifyFailure({ code: 'endpoint_missing', message: `the catalog has no ${tenant.environment} endpoint for ${p.id}`, retriable: false }, requestId);
  const cred = await ports.providers.credentialFor(p, tenant, userId, { exact: true });
  if (!cred.ok) throw verifyFailure(cred.error, requestId);
  return probeProvider(ports, p, tenant.environment, cred.credential, requestId);
}
