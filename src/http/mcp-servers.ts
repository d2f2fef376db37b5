import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { atomicToPrice, type McpServerCommand, mcpServerDecider, mcpServerStream, mcpSlugDecider, mcpSlugStream, priceToAtomic } from '../../commands/mcp.ts';
import { listUpstreamTools, UpstreamError } from '../adapters/mcp/upstream.ts';
import { checkResolved, checkUrl, UnsafeTarget } from '../adapters/outbound-http.ts';
import type { CommandContext } from '../eventstore/handler.ts';
import { defaultMcpConfig } from '../mcp/config.ts';
import { orgSeed, PaytoUnavailable, serverAddress } from '../mcp/payto.ts';
import { runSweep } from '../mcp/sweep.ts';
import type { Queryable } from '../postgres/db.ts';
import { type ApiKeyAuth, ROLE_RANK, type Role } from './auth.ts';
import { ApiError, RawHttpError } from './errors.ts';
import { newId } from './ids.ts';
import { defineRoute, type AppDeps } from './route.ts';
import { IdParam, Timestamp, isoText as TS } from './schemas.ts';

// Monetized MCP servers (spec 2 "MCP server", 4.14): validate an upstream with
// a real MCP client, register a server (global slug claim, provisioned
// receiving address, prices in USDC atomic units, upstream auth in the vault),
// read and patch the listing, and sweep platform fees. Every route needs an
// API key with the route's scope and an admin named in `x-svc-user`.

const SLUG = /^[a-z0-9_-]{1,64}$/;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;

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
const ServerView = ServerBase.extend({ tools: z.array(Tool) }).meta({ id: 'McpServer' });
const ServerListItem = ServerBase.meta({ id: 'McpServerListItem' });

const Price = z.union([z.string(), z.number()]).transform((v) => String(v));
const CreateBody = z.object({
  consumer_id: z.string().min(1).max(200),
  name: z.string().min(1).max(200),
  slug: z.string().regex(SLUG, 'lowercase letters, digits, _ and -, at most 64'),
  tools: z.array(z.object({ tool_name: z.string().min(1).max(128), description: z.string().max(4000).optional(), price: Price })).min(1).max(200),
  upstream_url: z.string().url().max(2048),
  upstream_auth: z.object({ header: z.string().regex(HEADER_NAME), value: z.string().min(1).max(8192) }).optional(),
  category: z.string().max(100).nullable().optional(),
  description: z.string().max(4000).optional(),
  overview_md: z.string().max(65_536).optional(),
  platform_fee_bps: z.number().int().min(0).max(10_000).optional(),
});

type Row = z.infer<typeof ServerBase> & { org_id: string };

const COLS = `id, org_id, project_id, slug, name, description, overview_md, category, consumer_id, upstream_url, environment, payto_kind, payto_address, platform_fee_bps, tool_count, active, ${TS('created_at')} AS created_at`;

export async function readServer(db: Queryable, auth: { orgId: string; projectId: string }, id: string) {
  const { rows } = await db.query<Omit<Row, 'gateway_url'>>(`SELECT ${COLS} FROM mcp_servers WHERE id = $1 AND org_id = $2 AND project_id = $3`, [id, auth.orgId, auth.projectId]);
  return rows[0];
}

async function toolsOf(db: Queryable, id: string) {
  const { rows } = await db.query<z.infer<typeof Tool>>(`SELECT id, tool_name, description, pricing_model, price, price_atomic::text, active FROM mcp_tools WHERE server_id = $1 ORDER BY ordinal`, [id]);
  return rows;
}

/** The 403 family of 4.14: the role of the admin named in `x-svc-user`, within the key's organization and project. */
async function requireAdmin(db: Queryable, req: FastifyRequest, auth: ApiKeyAuth): Promise<void> {
  const deny = (error: string, message: string) => new RawHttpError(403, { error, message, required: 'admin' });
  const h = req.headers['x-svc-user'];
  const userId = typeof h === 'string' ? h.trim() : '';
  if (!userId) throw deny('bearer_admin_role_missing', 'name the acting admin in x-svc-user');
  if (!/^[\x21-\x7e]{1,200}$/.test(userId)) throw deny('bearer_admin_user_not_member', 'x-svc-user is not a member of this organization');
  let role: string | undefined;
  try {
    const { rows } = await db.query<{ org_id: string; role: string; override: string | null }>(
      `SELECT u.org_id, u.role, (SELECT m.role FROM project_members m WHERE m.project_id = $2 AND m.user_id = u.user_id AND NOT m.removed) AS override FROM users u WHERE u.user_id = $1`,
      [userId, auth.projectId],
    );
    const u = rows[0];
    if (!u || u.org_id !== auth.orgId) throw deny('bearer_admin_user_not_member', 'x-svc-user is not a member of this organization');
    role = u.role === 'owner' ? 'owner' : (u.override ?? u.role);
  } catch (err) {
    if (err instanceof RawHttpError) throw err;
    throw deny('bearer_admin_role_unresolved', 'the role of x-svc-user could not be resolved');
  }
  if (!(role in ROLE_RANK)) throw deny('bearer_admin_role_unresolved', 'the role of x-svc-user could not be resolved');
  if (ROLE_RANK[role as Role] < ROLE_RANK.admin) throw new RawHttpError(403, { error: 'insufficient_role', required: 'admin' });
}

/** The scope gate's own refusals, beyond the key lacking the scope (403 forbidden from the authenticator). */
function scopeGate(auth: ApiKeyAuth, scope: string | undefined): void {
  if (!scope) throw new RawHttpError(403, { error: 'route_scope_unresolved', message: 'this route maps to no scope', status: 403 });
  if (!Array.isArray(auth.scopes) || auth.scopes.length === 0 || auth.scopes.some((s) => typeof s !== 'string')) throw new RawHttpError(403, { error: 'scopes_unresolved', message: 'the scopes of this API key could not be resolved', status: 403 });
}

const FORBIDDEN_FAMILY = [
  [403, 'forbidden'],
  [403, 'scopes_unresolved'],
  [403, 'route_scope_unresolved'],
  [403, 'insufficient_role'],
  [403, 'bearer_admin_role_missing'],
  [403, 'bearer_admin_user_not_member'],
  [403, 'bearer_admin_role_unresolved'],
] as const;

/** Refuses an upstream URL the outbound guard would refuse, with the spec's details. */
async function guardUpstream(deps: AppDeps, raw: string, resolve: boolean): Promise<URL> {
  try {
    const url = checkUrl(raw, deps.webhookTargets);
    // Registration checks the URL itself; validation also what its name resolves to (and
    // every connection is checked again at connect time by the guarded client).
    if (resolve) await checkResolved(url.hostname, deps.webhookTargets).catch((err: unknown) => {
      if (err instanceof UnsafeTarget) throw err;
      throw new UnsafeTarget(`the host does not resolve: ${(err as Error).message}`);
    });
    return url;
  } catch (err) {
    if (err instanceof UnsafeTarget) throw new ApiError(400, 'invalid_upstream_url', `the upstream URL is refused: ${err.reason}`, { upstream_url: raw, reason: err.reason });
    throw err;
  }
}

export async function mcpServerRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const cfg = deps.mcp ?? defaultMcpConfig(deps.baseUrl);
  const gateway = (slug: string) => `${cfg.gatewayUrl.replace(/\/+$/, '')}/mcp/${slug}`;
  const view = async (row: Omit<Row, 'gateway_url'>, withTools: boolean) => {
    const { org_id: _o, ...rest } = row;
    const base = { ...rest, gateway_url: gateway(row.slug) };
    return withTools ? { ...base, tools: await toolsOf(deps.db, row.id) } : base;
  };
  const guard = async (req: FastifyRequest, auth: ApiKeyAuth, scope: string) => {
    scopeGate(auth, scope);
    await requireAdmin(deps.db, req, auth);
  };

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/mcp-servers/validate',
    operationId: 'validateMcpUpstream',
    summary: 'Connect to an upstream MCP server (Streamable HTTP) and list its tools, within timeouts',
    tags: ['mcp-servers'],
    auth: 'api_key',
    scope: 'mcp:write',
    actingUser: true,
    body: z.object({ upstream_url: z.string().url().max(2048), auth: z.record(z.string(), z.unknown()).optional() }),
    responses: { 200: z.object({ valid: z.boolean(), count: z.number().int(), tools: z.array(z.object({ name: z.string(), description: z.string() })), error: z.string().optional() }) },
    errors: [[400, 'invalid_body'], [400, 'invalid_upstream_url'], ...FORBIDDEN_FAMILY],
    authorize: ({ auth, req }) => guard(req, auth, 'mcp:write'),
    async handler({ auth, body }) {
      const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(body.upstream_url)?.[1]?.toLowerCase();
      if (scheme !== 'http' && scheme !== 'https') return { status: 200, body: { valid: false, count: 0, tools: [], error: 'invalid_url' } };
      await guardUpstream(deps, body.upstream_url, true);
      const headers: Record<string, string> = {};
      const a = body.auth as { header?: unknown; value?: unknown } | undefined;
      if (a && typeof a.header === 'string' && typeof a.value === 'string' && HEADER_NAME.test(a.header)) headers[a.header] = a.value;
      try {
        const tools = await listUpstreamTools({ url: body.upstream_url, headers }, deps.webhookTargets, cfg.timeouts);
        return { status: 200, body: { valid: true, count: tools.length, tools } };
      } catch (err) {
        if (err instanceof UpstreamError) return { status: 200, body: { valid: false, count: 0, tools: [], error: err.code } };
        throw err;
      }
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
    authorize: ({ auth, req }) => guard(req, auth, 'mcp:write'),
    async handler({ auth, body, req, run }) {
      const tools = body.tools.map((t, i) => {
        const atomic = priceToAtomic(t.price);
        if (atomic === null) throw new ApiError(400, 'invalid_body', 'a tool price must be a positive USDC amount with at most six decimals', { issues: [{ path: ['tools', i, 'price'], code: 'invalid_price', message: 'positive, six decimal places' }] });
        return { id: newId('mct'), tool_name: t.tool_name, description: t.description ?? '', pricing_model: 'per_call' as const, price: atomicToPrice(atomic), price_atomic: atomic.toString(), active: true };
      });
      const names = new Set<string>();
      for (const t of tools) {
        if (names.has(t.tool_name)) throw new ApiError(400, 'slug_conflict', `the tool name ${t.tool_name} is repeated`, { tool_name: t.tool_name });
        names.add(t.tool_name);
      }
      await guardUpstream(deps, body.upstream_url, false);
      const serverId = newId('mcs');
      const cctx: CommandContext = { orgId: auth.orgId, projectId: auth.projectId, actor: { kind: 'api_key', id: auth.keyId }, requestId: String(req.id), now: deps.now };
      // Provision first: a failure leaves nothing behind.
      let payto: string;
      try {
        payto = serverAddress(await orgSeed(deps.store, deps.vault, cctx), serverId);
      } catch (err) {
        if (err instanceof PaytoUnavailable) throw new ApiError(503, 'payto_provisioning_failed', 'the receiving address could not be provisioned; nothing was created', { retriable: true });
        throw err;
      }
      let upstreamAuth: { header: string; vault_ref: string } | null = null;
      if (body.upstream_auth) {
        try {
          upstreamAuth = { header: body.upstream_auth.header, vault_ref: await deps.vault.put(auth.orgId, 'mcp_upstream_auth', Buffer.from(body.upstream_auth.value, 'utf8')) };
        } catch {
          throw new ApiError(503, 'vault_unavailable', 'the upstream credential could not be stored; nothing was created', { retriable: true });
        }
      }
      const create: McpServerCommand = {
        type: 'create',
        data: {
          server_id: serverId,
          org_id: auth.orgId,
          project_id: auth.projectId,
          slug: body.slug,
          name: body.name,
          description: body.description ?? '',
          overview_md: body.overview_md ?? '',
          category: body.category ?? null,
          consumer_id: body.consumer_id,
          upstream_url: body.upstream_url,
          upstream_auth: upstreamAuth,
          environment: auth.environment,
          payto_kind: 'provisioned',
          payto_address: payto,
          platform_fee_bps: body.platform_fee_bps ?? 0,
          tools,
        },
      };
      try {
        // The server's events must fit one append of the store (413 otherwise):
        // checked before the slug is claimed, so a refusal leaves no claim behind.
        await run(mcpServerDecider, mcpServerStream(serverId), create, { checkOnly: true });
        await run(mcpSlugDecider, mcpSlugStream(body.slug), { slug: body.slug, serverId, orgId: auth.orgId });
      } catch (err) {
        if (upstreamAuth) await deps.vault.delete(auth.orgId, upstreamAuth.vault_ref).catch(() => {});
        throw err;
      }
      await run(mcpServerDecider, mcpServerStream(serverId), create);
      const row = await readServer(deps.db, auth, serverId);
      return { status: 201, body: await view(row!, true) };
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
    authorize: ({ auth, req }) => guard(req, auth, 'mcp:read'),
    async handler({ auth }) {
      const { rows } = await deps.db.query<Omit<Row, 'gateway_url'>>(`SELECT ${COLS} FROM mcp_servers WHERE org_id = $1 AND project_id = $2 ORDER BY created_at DESC, id LIMIT 500`, [auth.orgId, auth.projectId]);
      return { status: 200, body: { mcp_servers: await Promise.all(rows.map((r) => view(r, false))) } };
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
    authorize: ({ auth, req }) => guard(req, auth, 'mcp:read'),
    async handler({ auth, params }) {
      const row = await readServer(deps.db, auth, params.id);
      if (!row) throw new ApiError(404, 'not_found', 'no such MCP server');
      return { status: 200, body: await view(row, true) };
    },
  });

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
    authorize: ({ auth, req }) => guard(req, auth, 'mcp:write'),
    async handler({ auth, params, body, run }) {
      if (!(await readServer(deps.db, auth, params.id))) throw new ApiError(404, 'not_found', 'no such MCP server');
      await run(mcpServerDecider, mcpServerStream(params.id), { type: 'update', changes: body });
      return { status: 200, body: await view((await readServer(deps.db, auth, params.id))!, true) };
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
    authorize: ({ auth, req }) => guard(req, auth, 'mcp:write'),
    async handler({ auth, params, body, run }) {
      if (!(await readServer(deps.db, auth, params.id))) throw new ApiError(404, 'not_found', 'no such MCP server');
      let price: { price: string; price_atomic: string } | undefined;
      if (body.price !== undefined) {
        const atomic = priceToAtomic(body.price);
        if (atomic === null) throw new ApiError(400, 'invalid_body', 'a tool price must be a positive USDC amount with at most six decimals', { issues: [{ path: ['price'], code: 'invalid_price', message: 'positive, six decimal places' }] });
        price = { price: atomicToPrice(atomic), price_atomic: atomic.toString() };
      }
      await run(mcpServerDecider, mcpServerStream(params.id), { type: 'update_tool', toolName: params.tool, changes: { active: body.active, description: body.description, ...price } });
      return { status: 200, body: await view((await readServer(deps.db, auth, params.id))!, true) };
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
      200: z.object({ swept: z.number().int(), total_atomic: z.string(), partner_wallet: z.string().optional(), transfers: z.array(z.object({ source: z.string(), amount_atomic: z.string(), status: z.string() })) }),
    },
    errors: [...FORBIDDEN_FAMILY, [409, 'sweep_in_progress'], [503, 'sweep_failed']],
    authorize: ({ auth, req }) => guard(req, auth, 'mcp:write'),
    async handler({ auth, req }) {
      const cctx: CommandContext = { orgId: auth.orgId, projectId: auth.projectId, actor: { kind: 'api_key', id: auth.keyId }, requestId: String(req.id), now: deps.now };
      let out;
      try {
        out = await runSweep({ db: deps.db, store: deps.store, vault: deps.vault, x402: deps.x402, mcp: cfg, waitFor: (p) => deps.readSide.waitFor(p, deps.readWaitMs) }, cctx);
      } catch (err) {
        if ((err as { code?: string }).code === 'sweep_in_progress') throw new ApiError(409, 'sweep_in_progress', 'another sweep holds the lock; retry later');
        throw new ApiError(503, 'sweep_failed', `the sweep pass failed: ${(err as Error).message}`.slice(0, 300), { retriable: true });
      }
      if (out.kind === 'failed') throw new ApiError(503, 'sweep_failed', `the sweep pass failed: ${out.body.reason}`, { retriable: true, transfers: out.body.transfers });
      return { status: 200, body: out.body };
    },
  });
}
