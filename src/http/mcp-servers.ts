import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Queryable } from '../postgres/db.ts';
import { actingRoleOf, getServer, HEADER_NAME, listServers, mcpConfigOf, type McpServerRow, patchServer, patchTool, registerServer, sweepPlatformFees, toolsOf, validateUpstream } from '../usecases/mcp-servers.ts';
import type { UseCaseCtx } from '../usecases/context.ts';
import { type ApiKeyAuth, ROLE_RANK, type Role } from './kernel/auth.ts';
import { RawHttpError } from './kernel/errors.ts';
import { defineRoute, type AppDeps } from './kernel/route.ts';
import { IdParam, Timestamp } from './kernel/schemas.ts';

// Monetized MCP servers (spec 2 "MCP server", 4.14): validate an upstream with
// a real MCP client, register a server (global slug claim, provisioned
// receiving address, prices in USDC atomic units, upstream auth in the vault),
// read and patch the listing, and sweep platform fees (src/usecases/mcp-servers.ts).
// Every route needs an API key with the route's scope and an admin named in `x-svc-user`.

const SLUG = /^[a-z0-9_-]{1,64}$/;

const Tool = z.object({ id: z.string(), tool_name: z.string(), description: z.string(), pricing_model: z.string(), price: z.string(), price_atomic: z.string(), active: z.boolean() }).meta({ id: 'McpTool' });
const ServerBase = z.object({
  id: z.string(),
  project_id: z.string(),
  slug: z.string(),
  name: z.string(),
  description: z.string(),
  overview_md: z.string(),
  category: z.string().nullable(),
  consumer_id: z.string().nullable(),
  upstream_url: z.string(),
  environment: z.enum(['live', 'test']),
  payto_kind: z.enum(['provisioned', 'split']),
  payto_address: z.string(),
  platform_fee_bps: z.number().int(),
  tool_count: z.number().int(),
  active: z.boolean(),
  gateway_url: z.string(),
  created_at: Timestamp,
});
const ServerView = ServerBase.extend({ tools: z.array(Tool).describe('The priced tools of the server, in the order given.') }).meta({ id: 'McpServer' });
const ServerListItem = ServerBase.meta({ id: 'McpServerListItem' });

const Price = z.union([z.string(), z.number()]).transform((v) => String(v));
const CreateBody = z.object({
  consumer_id: z.string().min(1).max(200),
  name: z.string().min(1).max(200),
  slug: z.string().regex(SLUG, 'lowercase letters, digits, _ and -, at most 64'),
  tools: z.array(z.object({ tool_name: z.string().min(1).max(128), description: z.string().max(4000).optional(), price: Price })).min(1).max(200).describe('The tools to sell, 1 to 200, each with its price per call.'),
  upstream_url: z.string().url().max(2048),
  upstream_auth: z
    .object({ header: z.string().regex(HEADER_NAME).describe('The header the gateway sends the credential in (e.g. `authorization`).'), value: z.string().min(1).max(8192).describe('Its value; kept in the vault, never read back.') })
    .optional()
    .describe('A credential the gateway adds to every call it forwards upstream.'),
  category: z.string().max(100).nullable().optional(),
  description: z.string().max(4000).optional(),
  overview_md: z.string().max(65_536).optional(),
  platform_fee_bps: z.number().int().min(0).max(10_000).optional(),
});

/** The 403 family of 4.14: the role of the admin named in `x-svc-user`, within the key's organization and project. */
async function requireAdmin(db: Queryable, req: FastifyRequest, auth: ApiKeyAuth): Promise<void> {
  const deny = (error: string, message: string) => new RawHttpError(403, { error, message, required: 'admin' });
  const h = req.headers['x-svc-user'];
  const userId = typeof h === 'string' ? h.trim() : '';
  if (!userId) throw deny('bearer_admin_role_missing', 'name the acting admin in x-svc-user');
  if (!/^[\x21-\x7e]{1,200}$/.test(userId)) throw deny('bearer_admin_user_not_member', 'x-svc-user is not a member of this organization');
  let acting: { role: string } | undefined;
  try {
    acting = await actingRoleOf(db, auth, userId);
  } catch {
    throw deny('bearer_admin_role_unresolved', 'the role of x-svc-user could not be resolved');
  }
  if (!acting) throw deny('bearer_admin_user_not_member', 'x-svc-user is not a member of this organization');
  const { role } = acting;
  if (!(role in ROLE_RANK)) throw deny('bearer_admin_role_unresolved', 'the role of x-svc-user could not be resolved');
  if (ROLE_RANK[role as Role] < ROLE_RANK.admin) throw new RawHttpError(403, { error: 'insufficient_role', required: 'admin' });
}

/** The scope gate's own refusals, beyond the key lacking the scope (403 forbidden from the authenticator). */
function scopeGate(auth: ApiKeyAuth, scope: string | undefined): void {
  if (!scope) throw new RawHttpError(403, { error: 'route_scope_unresolved', message: 'this route maps to no scope', status: 403 });
  if (!Array.isArray(auth.scopes) || auth.scopes.length === 0 || auth.scopes.some((s) => typeof s !== 'string')) throw new RawHttpError(403, { error: 'scopes_unresolved', message: 'the scopes of this API key could not be resolved', status: 403 });
}

const FORBIDDEN_FAMILY = [
  [403, 'forbidden'], [403, 'scopes_unresolved'], [403, 'route_scope_unresolved'], [403, 'insufficient_role'],
  [403, 'bearer_admin_role_missing'], [403, 'bearer_admin_user_not_member'], [403, 'bearer_admin_role_unresolved'],
] as const;

/** A request's use-case context: the key's tenant, the key as the actor. */
function useCase(ctx: { deps: AppDeps; auth: ApiKeyAuth; req: FastifyRequest; run: UseCaseCtx['run'] }): UseCaseCtx {
  return { ports: ctx.deps, tenant: { orgId: ctx.auth.orgId, projectId: ctx.auth.projectId }, actor: { kind: 'api_key', id: ctx.auth.keyId }, requestId: String(ctx.req.id), run: ctx.run };
}

/** A server as the routes answer it: without its organization, with its gateway URL, and its tools when asked. */
function serverViewOf(deps: AppDeps) {
  const cfg = mcpConfigOf(deps);
  const gateway = (slug: string) => `${cfg.gatewayUrl.replace(/\/+$/, '')}/mcp/${slug}`;
  return async (row: McpServerRow, withTools: boolean) => {
    const { org_id: _o, ...rest } = row;
    const base = { ...rest, gateway_url: gateway(row.slug) };
    return withTools ? { ...base, tools: await toolsOf(deps.db, row.id) } : base;
  };
}
type ServerViewOf = ReturnType<typeof serverViewOf>;

/** Every route's authorization: the scope gate, then the admin named in `x-svc-user`. */
async function guard(deps: AppDeps, req: FastifyRequest, auth: ApiKeyAuth, scope: string): Promise<void> {
  scopeGate(auth, scope);
  await requireAdmin(deps.db, req, auth);
}

export async function mcpServerRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const view = serverViewOf(deps);
  mcpServerListingRoutes(app, deps, view);
  mcpServerChangeRoutes(app, deps, view);
}

/** Validate an upstream, register a server, list, read. */
function mcpServerListingRoutes(app: FastifyInstance, deps: AppDeps, view: ServerViewOf): void {
  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/mcp-servers/validate',
    operationId: 'validateMcpUpstream',
    summary: 'Connect to an upstream MCP server (Streamable HTTP) and list its tools, within timeouts',
    tags: ['mcp-servers'],
    auth: 'api_key',
    scope: 'mcp:write',
    actingUser: true,
    body: z.object({ upstream_url: z.string().url().max(2048), auth: z.record(z.string(), z.unknown()).optional().describe('The credential to try, as `upstream_auth` of a create: `{header, value}`.') }),
    responses: { 200: z.object({ valid: z.boolean(), count: z.number().int().describe('How many tools the upstream lists.'), tools: z.array(z.object({ name: z.string(), description: z.string() })).describe('The tools the upstream lists (its `tools/list`).'), error: z.string().optional() }) },
    errors: [[400, 'invalid_body'], [400, 'invalid_upstream_url'], ...FORBIDDEN_FAMILY],
    authorize: ({ auth, req }) => guard(deps, req, auth, 'mcp:write'),
    async handler({ body }) {
      return { status: 200, body: await validateUpstream(deps, body.upstream_url, body.auth as { header?: unknown; value?: unknown } | undefined) };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/mcp-servers',
    operationId: 'createMcpServer',
    summary: 'Register a monetized MCP server with priced tools; its slug is claimed across all tenants',
    tags: ['mcp-servers'],
    auth: 'api_key',
    scope: 'mcp:write',
    actingUser: true,
    body: CreateBody,
    responses: { 201: ServerView },
    errors: [[400, 'invalid_body'], [400, 'invalid_upstream_url'], [400, 'slug_conflict'], ...FORBIDDEN_FAMILY, [503, 'payto_provisioning_failed'], [503, 'vault_unavailable']],
    authorize: ({ auth, req }) => guard(deps, req, auth, 'mcp:write'),
    async handler(ctx) {
      return { status: 201, body: await view(await registerServer(useCase(ctx), ctx.auth.environment, ctx.body), true) };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/mcp-servers',
    operationId: 'listMcpServers',
    summary: 'The MCP servers of the project (without tools)',
    tags: ['mcp-servers'],
    auth: 'api_key',
    scope: 'mcp:read',
    actingUser: true,
    responses: { 200: z.object({ mcp_servers: z.array(ServerListItem) }) },
    errors: [...FORBIDDEN_FAMILY],
    authorize: ({ auth, req }) => guard(deps, req, auth, 'mcp:read'),
    async handler({ auth }) {
      return { status: 200, body: { mcp_servers: await Promise.all((await listServers(deps, auth)).map((r) => view(r, false))) } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/mcp-servers/:id',
    operationId: 'getMcpServer',
    summary: 'One MCP server with its tools',
    tags: ['mcp-servers'],
    auth: 'api_key',
    scope: 'mcp:read',
    actingUser: true,
    params: z.object({ id: IdParam }),
    responses: { 200: ServerView },
    errors: [...FORBIDDEN_FAMILY, [404, 'not_found']],
    authorize: ({ auth, req }) => guard(deps, req, auth, 'mcp:read'),
    async handler({ auth, params }) {
      return { status: 200, body: await view(await getServer(deps, auth, params.id), true) };
    },
  });
}

/** The listing patches (server, tool) and the platform-fee sweep. */
function mcpServerChangeRoutes(app: FastifyInstance, deps: AppDeps, view: ServerViewOf): void {
  defineRoute(app, deps, {
    method: 'PATCH',
    url: '/v1/mcp-servers/:id',
    operationId: 'patchMcpServer',
    summary: 'The listing patch: active flag, name, description, overview, category',
    tags: ['mcp-servers'],
    auth: 'api_key',
    scope: 'mcp:write',
    actingUser: true,
    params: z.object({ id: IdParam }),
    body: z.object({ active: z.boolean().optional(), name: z.string().min(1).max(200).optional(), description: z.string().max(4000).optional(), overview_md: z.string().max(65_536).optional(), category: z.string().max(100).nullable().optional() }).strict(),
    responses: { 200: ServerView },
    errors: [[400, 'invalid_body'], ...FORBIDDEN_FAMILY, [404, 'not_found']],
    authorize: ({ auth, req }) => guard(deps, req, auth, 'mcp:write'),
    async handler(ctx) {
      return { status: 200, body: await view(await patchServer(useCase(ctx), ctx.params.id, ctx.body), true) };
    },
  });

  defineRoute(app, deps, {
    method: 'PATCH',
    url: '/v1/mcp-servers/:id/tools/:tool',
    operationId: 'patchMcpTool',
    summary: 'The listing patch of one tool: active flag, price, description',
    tags: ['mcp-servers'],
    auth: 'api_key',
    scope: 'mcp:write',
    actingUser: true,
    params: z.object({ id: IdParam, tool: z.string().min(1).max(128) }),
    body: z.object({ active: z.boolean().optional(), price: Price.optional(), description: z.string().max(4000).optional() }).strict(),
    responses: { 200: ServerView },
    errors: [[400, 'invalid_body'], ...FORBIDDEN_FAMILY, [404, 'not_found'], [404, 'tool_not_found']],
    authorize: ({ auth, req }) => guard(deps, req, auth, 'mcp:write'),
    async handler(ctx) {
      return { status: 200, body: await view(await patchTool(useCase(ctx), ctx.params.id, ctx.params.tool, ctx.body), true) };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/mcp-servers/platform-fees/sweep',
    operationId: 'sweepMcpPlatformFees',
    summary: 'Move every unswept platform fee of the organization on chain to its platform wallet',
    tags: ['mcp-servers'],
    auth: 'api_key',
    scope: 'mcp:write',
    actingUser: true,
    bodyOptional: true,
    responses: {
      200: z.object({
        swept: z.number().int().describe('How many transfers settled in this sweep.'),
        total_atomic: z.string(),
        partner_wallet: z.string().optional().describe('The platform wallet the fees went to; absent when there was nothing to sweep.'),
        transfers: z
          .array(z.object({ source: z.string().describe("The server's provisioned address the fee left."), amount_atomic: z.string(), status: z.string().describe('`intended` (recorded, not yet settled), `settled` (on chain) or `failed`.') }))
          .describe('One transfer per server with unswept fees.'),
      }),
    },
    errors: [...FORBIDDEN_FAMILY, [409, 'sweep_in_progress'], [503, 'sweep_failed']],
    authorize: ({ auth, req }) => guard(deps, req, auth, 'mcp:write'),
    async handler(ctx) {
      return { status: 200, body: await sweepPlatformFees(useCase(ctx)) };
    },
  });
}
