import { atomicToPrice, type McpServerCommand, mcpServerDecider, mcpServerStream, mcpSlugDecider, mcpSlugStream, priceToAtomic } from '../../commands/mcp.ts';
import { listUpstreamTools, UpstreamError } from '../adapters/mcp/upstream.ts';
import { checkResolved, checkUrl, UnsafeTarget } from '../adapters/outbound-http.ts';
import { type CommandContext, Rejection } from '../eventstore/handler.ts';
import { newId } from '../ids.ts';
import { defaultMcpConfig, type McpConfig } from '../mcp/config.ts';
import { orgSeed, PaytoUnavailable, serverAddress } from '../mcp/payto.ts';
import { runSweep } from '../mcp/sweep.ts';
import { isoText as TS } from '../postgres/iso-text.ts';
import type { Queryable } from '../postgres/db.ts';
import type { Ports, UseCaseCtx } from './context.ts';

// Monetized MCP servers (spec 2 "MCP server", 4.14): validate an upstream with
// a real MCP client, register a server (global slug claim, provisioned
// receiving address, prices in USDC atomic units, upstream auth in the vault),
// read and patch the listing, and sweep platform fees.

export const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;

export type McpToolRow = { id: string; tool_name: string; description: string; pricing_model: string; price: string; price_atomic: string; active: boolean };
export type McpServerRow = {
  id: string;
  org_id: string;
  project_id: string;
  slug: string;
  name: string;
  description: string;
  overview_md: string;
  category: string | null;
  consumer_id: string | null;
  upstream_url: string;
  environment: 'live' | 'test';
  payto_kind: 'provisioned' | 'split';
  payto_address: string;
  platform_fee_bps: number;
  tool_count: number;
  active: boolean;
  created_at: string;
};

export const mcpConfigOf = (ports: Ports): McpConfig => ports.mcp ?? defaultMcpConfig(ports.baseUrl);

const COLS = `id, org_id, project_id, slug, name, description, overview_md, category, consumer_id, upstream_url, environment, payto_kind, payto_address, platform_fee_bps, tool_count, active, ${TS('created_at')} AS created_at`;

export async function readServer(db: Queryable, tenant: { orgId: string; projectId: string }, id: string): Promise<McpServerRow | undefined> {
  const { rows } = await db.query<McpServerRow>(`SELECT ${COLS} FROM mcp_servers WHERE id = $1 AND org_id = $2 AND project_id = $3`, [id, tenant.orgId, tenant.projectId]);
  return rows[0];
}

/** The tenant's server, or the rejection not_found. */
export async function getServer(ports: Ports, tenant: { orgId: string; projectId: string }, id: string): Promise<McpServerRow> {
  const row = await readServer(ports.db, tenant, id);
  if (!row) throw new Rejection('not_found', 'no such MCP server');
  return row;
}

export async function listServers(ports: Ports, tenant: { orgId: string; projectId: string }): Promise<McpServerRow[]> {
  const { rows } = await ports.db.query<McpServerRow>(`SELECT ${COLS} FROM mcp_servers WHERE org_id = $1 AND project_id = $2 ORDER BY mcp_servers.created_at DESC, id LIMIT 500`, [tenant.orgId, tenant.projectId]);
  return rows;
}

export async function toolsOf(db: Queryable, id: string): Promise<McpToolRow[]> {
  const { rows } = await db.query<McpToolRow>(`SELECT id, tool_name, description, pricing_model, price, price_atomic::text, active FROM mcp_tools WHERE server_id = $1 ORDER BY ordinal`, [id]);
  return rows;
}

/** The role in the tenant's project of a user named as the acting admin (an owner stays owner, else the project's override or the organization role); undefined when the user is not a member of the tenant's organization. */
export async function actingRoleOf(db: Queryable, tenant: { orgId: string; projectId: string }, userId: string): Promise<{ role: string } | undefined> {
  const { rows } = await db.query<{ org_id: string; role: string; override: string | null }>(
    `SELECT u.org_id, u.role, (SELECT m.role FROM project_members m WHERE m.project_id = $2 AND m.user_id = u.user_id AND NOT m.removed) AS override FROM users u WHERE u.user_id = $1`,
    [userId, tenant.projectId],
  );
  const u = rows[0];
  if (!u || u.org_id !== tenant.orgId) return undefined;
  return { role: u.role === 'owner' ? 'owner' : (u.override ?? u.role) };
}

/** Refuses an upstream URL the outbound guard would refuse, with the spec's details. */
async function guardUpstream(ports: Ports, raw: string, resolve: boolean): Promise<URL> {
  try {
    const url = checkUrl(raw, ports.webhookTargets);
    // Registration checks the URL itself; validation also what its name resolves to (and
    // every connection is checked again at connect time by the guarded client).
    if (resolve) await checkResolved(url.hostname, ports.webhookTargets).catch((err: unknown) => {
      if (err instanceof UnsafeTarget) throw err;
      throw new UnsafeTarget(`the host does not resolve: ${(err as Error).message}`);
    });
    return url;
  } catch (err) {
    if (err instanceof UnsafeTarget) throw new Rejection('invalid_upstream_url', `the upstream URL is refused: ${err.reason}`, { upstream_url: raw, reason: err.reason });
    throw err;
  }
}

export type Validation = { valid: boolean; count: number; tools: { name: string; description: string }[]; error?: string };

/** Connects to an upstream (Streamable HTTP) and lists its tools, within the configured timeouts. */
export async function validateUpstream(ports: Ports, upstreamUrl: string, auth: { header?: unknown; value?: unknown } | undefined): Promise<Validation> {
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(upstreamUrl)?.[1]?.toLowerCase();
  if (scheme !== 'http' && scheme !== 'https') return { valid: false, count: 0, tools: [], error: 'invalid_url' };
  await guardUpstream(ports, upstreamUrl, true);
  const headers: Record<string, string> = {};
  if (auth && typeof auth.header === 'string' && typeof auth.value === 'string' && HEADER_NAME.test(auth.header)) headers[auth.header] = auth.value;
  try {
    const tools = await listUpstreamTools({ url: upstreamUrl, headers }, ports.webhookTargets, mcpConfigOf(ports).timeouts);
    return { valid: true, count: tools.length, tools };
  } catch (err) {
    if (err instanceof UpstreamError) return { valid: false, count: 0, tools: [], error: err.code };
    throw err;
  }
}

export type RegisterInput = {
  consumer_id: string;
  name: string;
  slug: string;
  tools: { tool_name: string; description?: string | undefined; price: string }[];
  upstream_url: string;
  upstream_auth?: { header: string; value: string } | undefined;
  category?: string | null | undefined;
  description?: string | undefined;
  overview_md?: string | undefined;
  platform_fee_bps?: number | undefined;
};

const badPrice = (path: (string | number)[]) =>
  new Rejection('invalid_body', 'a tool price must be a positive USDC amount with at most six decimals', { issues: [{ path, code: 'invalid_price', message: 'positive, six decimal places' }] });

function pricedTools(tools: RegisterInput['tools']) {
  const out = tools.map((t, i) => {
    const atomic = priceToAtomic(t.price);
    if (atomic === null) throw badPrice(['tools', i, 'price']);
    return { id: newId('mct'), tool_name: t.tool_name, description: t.description ?? '', pricing_model: 'per_call' as const, price: atomicToPrice(atomic), price_atomic: atomic.toString(), active: true };
  });
  const names = new Set<string>();
  for (const t of out) {
    if (names.has(t.tool_name)) throw new Rejection('slug_conflict', `the tool name ${t.tool_name} is repeated`, { tool_name: t.tool_name });
    names.add(t.tool_name);
  }
  return out;
}

const commandContext = (c: UseCaseCtx): CommandContext => ({ orgId: c.tenant.orgId, projectId: c.tenant.projectId, actor: c.actor, requestId: c.requestId, now: c.ports.now });

/** Registers a server: provisioned address first, then the upstream credential, the slug claim and the server (a refusal leaves nothing behind). */
export async function registerServer(c: UseCaseCtx, environment: 'live' | 'test', body: RegisterInput): Promise<McpServerRow> {
  const { ports, tenant, run } = c;
  const tools = pricedTools(body.tools);
  await guardUpstream(ports, body.upstream_url, false);
  const serverId = newId('mcs');
  // Provision first: a failure leaves nothing behind.
  let payto: string;
  try {
    payto = await serverAddress(await orgSeed(ports.store, ports.vault, commandContext(c)), serverId);
  } catch (err) {
    if (err instanceof PaytoUnavailable) throw new Rejection('payto_provisioning_failed', 'the receiving address could not be provisioned; nothing was created', { retriable: true });
    throw err;
  }
  let upstreamAuth: { header: string; vault_ref: string } | null = null;
  if (body.upstream_auth) {
    try {
      upstreamAuth = { header: body.upstream_auth.header, vault_ref: await ports.vault.put(tenant.orgId, 'mcp_upstream_auth', Buffer.from(body.upstream_auth.value, 'utf8')) };
    } catch {
      throw new Rejection('vault_unavailable', 'the upstream credential could not be stored; nothing was created', { retriable: true });
    }
  }
  const create: McpServerCommand = {
    type: 'create',
    data: {
      server_id: serverId,
      org_id: tenant.orgId,
      project_id: tenant.projectId,
      slug: body.slug,
      name: body.name,
      description: body.description ?? '',
      overview_md: body.overview_md ?? '',
      category: body.category ?? null,
      consumer_id: body.consumer_id,
      upstream_url: body.upstream_url,
      upstream_auth: upstreamAuth,
      environment,
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
    await run(mcpSlugDecider, mcpSlugStream(body.slug), { slug: body.slug, serverId, orgId: tenant.orgId });
  } catch (err) {
    if (upstreamAuth) await ports.vault.delete(tenant.orgId, upstreamAuth.vault_ref).catch(() => {});
    throw err;
  }
  await run(mcpServerDecider, mcpServerStream(serverId), create);
  return (await readServer(ports.db, tenant, serverId))!;
}

export type ServerPatch = { active?: boolean | undefined; name?: string | undefined; description?: string | undefined; overview_md?: string | undefined; category?: string | null | undefined };

/** The listing patch: active flag, name, description, overview, category. */
export async function patchServer(c: UseCaseCtx, id: string, changes: ServerPatch): Promise<McpServerRow> {
  await getServer(c.ports, c.tenant, id);
  await c.run(mcpServerDecider, mcpServerStream(id), { type: 'update', changes });
  return (await readServer(c.ports.db, c.tenant, id))!;
}

/** The listing patch of one tool: active flag, price, description. */
export async function patchTool(c: UseCaseCtx, id: string, toolName: string, changes: { active?: boolean | undefined; price?: string | undefined; description?: string | undefined }): Promise<McpServerRow> {
  await getServer(c.ports, c.tenant, id);
  let price: { price: string; price_atomic: string } | undefined;
  if (changes.price !== undefined) {
    const atomic = priceToAtomic(changes.price);
    if (atomic === null) throw badPrice(['price']);
    price = { price: atomicToPrice(atomic), price_atomic: atomic.toString() };
  }
  await c.run(mcpServerDecider, mcpServerStream(id), { type: 'update_tool', toolName, changes: { active: changes.active, description: changes.description, ...price } });
  return (await readServer(c.ports.db, c.tenant, id))!;
}

/** Moves every unswept platform fee of the organization on chain to its platform wallet. */
export async function sweepPlatformFees(c: UseCaseCtx) {
  const { ports } = c;
  let out;
  try {
    out = await runSweep({ db: ports.db, store: ports.store, vault: ports.vault, x402: ports.x402, mcp: mcpConfigOf(ports), waitFor: (p) => ports.readSide.waitFor(p, ports.readWaitMs) }, commandContext(c));
  } catch (err) {
    if ((err as { code?: string }).code === 'sweep_in_progress') throw new Rejection('sweep_in_progress', 'another sweep holds the lock; retry later');
    throw new Rejection('sweep_failed', `the sweep pass failed: ${(err as Error).message}`.slice(0, 300), { retriable: true });
  }
  if (out.kind === 'failed') throw new Rejection('sweep_failed', `the sweep pass failed: ${out.body.reason}`, { retriable: true, transfers: out.body.transfers });
  return out.body;
}
