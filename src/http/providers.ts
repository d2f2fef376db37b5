import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { baseUrlOf, type ProviderDef } from '../providers/catalog.ts';
import { catalogEntry, connectionSchema, searchCatalog, verifyConnection } from '../usecases/providers.ts';
import { RawHttpError, VERIFY_ERRORS } from './kernel/errors.ts';
import { defineRoute, type AppDeps } from './kernel/route.ts';

// The provider catalog (spec 4.5) and verify-connection: a probe of the
// provider with the stored credential (src/usecases/providers.ts, with the
// catalog's reads), answered with the spec's matrix (verify_failed in
// src/http/kernel/errors.ts).

export const ProviderView = z
  .object({
    id: z.string(),
    name: z.string(),
    pkg: z.string(),
    category: z.string(),
    country: z.string(),
    auth_type: z.string(),
    description: z.string().nullable(),
    tools_count: z.number().int(),
    status: z.string().describe('The provider in the catalog: `active`, `beta` (works, may change) or `deprecated` (will leave the catalog).'),
    sandbox_available: z.boolean(),
    sandbox_url: z.string().nullable(),
    subaccount_provisionable: z.boolean(),
    engine_provisionable: z.boolean(),
    engine_status: z.enum(['none', 'available', 'quarantined']),
    provider_docs_url: z.string().nullable(),
    provider_homepage: z.string().nullable(),
    provider_logo_url: z.string().nullable(),
    provider_logo_fallback_url: z.string().nullable(),
  })
  .meta({ id: 'Provider' });

const ToolView = z.object({ name: z.string(), description: z.string(), input_schema: z.record(z.string(), z.unknown()) });

const AuthSchemaView = z
  .object({
    server_id: z.string(),
    auth_type: z.string(),
    environment: z.enum(['live', 'test']),
    base_url: z.string(),
    fields: z
      .array(z.object({ name: z.string(), kind: z.string().describe('How the field is entered and kept: `secret`, `path_secret` (a secret inside the request path), `text`, `certificate` or `private_key`.'), label: z.string(), header_name: z.string().nullable() }))
      .describe('The fields a connection of this provider asks for, in order.'),
    oauth_authorize_url: z.string().nullable(),
  })
  .meta({ id: 'ProviderAuthSchema' });

const VerifyOk = z.object({ ok: z.literal(true), provider: z.string(), account: z.object({ id: z.string(), name: z.string(), extras: z.record(z.string(), z.unknown()) }).optional(), latency_ms: z.number().int() });

export function providerView(deps: AppDeps, p: ProviderDef): z.infer<typeof ProviderView> {
  const sandbox = p.endpoints.test === 'sandbox:' || p.endpoints.test === 'sandbox-tls:';
  const sandboxUrl = sandbox ? baseUrlOf(p, 'test', deps.providers.runtime.sandbox) : '';
  return {
    id: p.id,
    name: p.name,
    pkg: p.pkg,
    category: p.category,
    country: p.country,
    auth_type: p.auth_type,
    description: p.description,
    tools_count: p.tools.length,
    status: p.status,
    sandbox_available: sandbox,
    sandbox_url: sandboxUrl || null,
    subaccount_provisionable: p.subaccount_provisionable,
    engine_provisionable: p.engine === 'available',
    engine_status: p.engine,
    provider_docs_url: p.docs_url,
    provider_homepage: p.homepage,
    provider_logo_url: p.logo_url,
    provider_logo_fallback_url: p.homepage ? new URL('/favicon.ico', p.homepage).toString() : null,
  };
}

const Slug = z.string().min(1).max(200);

/** The bare 404 of verify for a slug with no catalog row: a recipe the engine knows, or nothing at all. */
function unknownServer(deps: AppDeps, slug: string): RawHttpError {
  if (deps.providers.runtime.catalog.recipes.has(slug)) return new RawHttpError(404, { ok: false, error: 'server_unknown', server_id: slug });
  return new RawHttpError(404, { error: 'not_found', server_id: slug });
}

export async function providerRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  providerCatalogRoutes(app, deps);
  providerVerifyRoutes(app, deps);
}

/** The catalog: the search, one row with its tools, a connection’s fields. */
function providerCatalogRoutes(app: FastifyInstance, deps: AppDeps): void {
  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/providers',
    operationId: 'listProviders',
    summary: 'The provider catalog, filtered by category, country and a free-text q',
    tags: ['providers'],
    auth: 'api_key',
    scope: 'providers:read',
    query: z.object({ category: z.string().max(100).optional(), country: z.string().max(100).optional(), q: z.string().max(200).optional() }),
    responses: { 200: z.object({ total: z.number().int().describe('How many providers the catalog holds.'), filtered: z.number().int().describe('How many match the filters (the length of `servers`).'), servers: z.array(ProviderView) }) },
    errors: [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden']],
    async handler({ query, deps }) {
      const { total, servers } = searchCatalog(deps, query);
      return { status: 200, body: { total, filtered: servers.length, servers: servers.map((p) => providerView(deps, p)) } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/providers/:slug',
    operationId: 'getProvider',
    summary: 'One catalog row, with its tools (name, description, JSON input schema)',
    tags: ['providers'],
    auth: 'api_key',
    scope: 'providers:read',
    params: z.object({ slug: Slug }),
    responses: { 200: ProviderView.extend({ tools: z.array(ToolView).describe('The tools a session can call at this provider.') }) },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler({ params, deps }) {
      const p = catalogEntry(deps, params.slug);
      return { status: 200, body: { ...providerView(deps, p), tools: p.tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.input_schema as unknown as Record<string, unknown> })) } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/providers/:slug/auth-schema',
    operationId: 'getProviderAuthSchema',
    summary: 'The fields a connection needs, in render order, for the caller’s environment',
    tags: ['providers'],
    auth: 'api_key',
    scope: 'providers:read',
    params: z.object({ slug: Slug }),
    responses: { 200: AuthSchemaView },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler({ params, auth, deps }) {
      return { status: 200, body: connectionSchema(deps, params.slug, auth.environment) };
    },
  });
}

/** Verify-connection, answered with the spec’s matrix. */
function providerVerifyRoutes(app: FastifyInstance, deps: AppDeps): void {
  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/providers/:slug/verify-connection',
    operationId: 'verifyProviderConnection',
    summary: 'Probe the provider with the stored credential: the project-wide connection, or the one of user_id',
    tags: ['providers'],
    auth: 'api_key',
    scope: 'connections:write',
    params: z.object({ slug: Slug }),
    query: z.object({ user_id: z.string().min(1).max(128).optional() }),
    bodyOptional: true,
    responses: { 200: VerifyOk },
    errors: VERIFY_ERRORS,
    async handler({ params, query, auth, deps, req }) {
      const p = deps.providers.runtime.catalog.get(params.slug);
      if (!p) throw unknownServer(deps, params.slug);
      return { status: 200, body: await verifyConnection(deps, p, auth, query.user_id ?? null, String(req.id)) };
    },
  });
}
