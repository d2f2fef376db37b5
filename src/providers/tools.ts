import { connectionById, liveConnection, type ConnectionRecord } from '../../projections/connection.ts';
import { ProviderError, type Credential, type HttpProvider } from '../adapters/providers/http-provider.ts';
import type { Vault } from '../adapters/vault.ts';
import type { Queryable } from '../postgres/db.ts';
import { baseUrlOf, type Catalog, type ProviderDef, type SandboxUrls, type ToolDef } from './catalog.ts';
import { decodeCredential } from './credentials.ts';
import { validate, type InputIssue } from './json-schema.ts';
import { needsRefresh, refreshConnection, type OAuthClients, type OAuthRefreshDeps } from './oauth.ts';

/**
 * The internal tool-execution API (for sessions and tool calls).
 *
 *   const tools = new ProviderTools(db, vault, runtime);
 *   tools.resolveTool('acme-payments', 'create_charge')      // {provider, tool} | undefined
 *   await tools.findConnection(tenant, 'acme-payments', userId) // live ConnectionRecord | undefined
 *     (the user's own; else the project-wide one when the provider's connection_scope is `project`; `{exact: true}` for the user's only)
 *   await tools.readCredential(connection)                   // Credential | undefined (purged / unknown)
 *   await tools.execute({ tenant, environment, serverId, toolName, input, userId })
 *     → { ok: true, output, status, latency_ms, connection_id }
 *     | { ok: false, error: { code, message, retriable, status?, detail?, issues? } }
 *
 * `execute` never throws for a provider's or a caller's fault: it resolves the
 * tool in the catalog, validates the input against the tool's input schema,
 * finds the end user's (or the project-wide) live connection, reads its
 * credential from the vault, builds the request from the tool's method and
 * path template (path `{params}` from the input; the rest as the query of a
 * GET, else merged with the connection's connection_metadata into the JSON
 * body), and sends it through the provider HTTP adapter (guarded outbound
 * client, the provider's auth_type applied). Error codes:
 *   server_unknown, tool_unknown, invalid_input (issues), not_connected,
 *   endpoint_missing, verify_unsupported (cdp), credential_rejected (provider 401/403, detail),
 *   redirect_not_followed, provider_error (other provider status, retriable when 5xx/429),
 *   provider_unreachable (transport or timeout, retriable).
 * Secrets never appear in a result.
 */

export type ProviderRuntime = {
  catalog: Catalog;
  client: HttpProvider;
  sandbox: SandboxUrls | undefined;
  /** The platform's OAuth client at each `oauth` provider's own authorize/token URLs (PROVIDER_OAUTH_CLIENTS); none configured when absent. */
  oauthClients?: OAuthClients;
  /** The clients registered at the sandbox providers, used where a provider's endpoint is the sandbox (`sandbox:`). */
  sandboxOAuthClients?: OAuthClients;
};
export type Tenant = { orgId: string; projectId: string };
export type Environment = 'live' | 'test';

export type ToolErrorCode =
  | 'server_unknown'
  | 'tool_unknown'
  | 'invalid_input'
  | 'not_connected'
  | 'endpoint_missing'
  | 'verify_unsupported'
  | 'credential_rejected'
  | 'redirect_not_followed'
  | 'provider_error'
  | 'provider_unreachable';
export type ToolError = { code: ToolErrorCode; message: string; retriable: boolean; status?: number; detail?: string; location?: string; issues?: InputIssue[] };
export type ToolResult = { ok: true; output: unknown; status: number; latency_ms: number; connection_id: string | null } | { ok: false; error: ToolError };

/** Maps an adapter failure onto the typed error of a tool call or a probe. */
export function toolErrorOf(err: unknown): ToolError {
  if (!(err instanceof ProviderError)) throw err;
  const x = err.extra;
  switch (err.kind) {
    case 'rejected':
      return { code: 'credential_rejected', message: err.message, retriable: false, ...(x.status ? { status: x.status } : {}), ...(x.detail ? { detail: x.detail } : {}) };
    case 'redirect':
      return { code: 'redirect_not_followed', message: err.message, retriable: false, ...(x.status ? { status: x.status } : {}), ...(x.location ? { location: x.location } : {}) };
    case 'status':
      return { code: 'provider_error', message: err.message, retriable: (x.status ?? 0) >= 500 || x.status === 429, ...(x.status ? { status: x.status } : {}), ...(x.detail ? { detail: x.detail } : {}) };
    case 'endpoint_missing':
      return { code: 'endpoint_missing', message: err.message, retriable: false };
    case 'unsupported':
      return { code: 'verify_unsupported', message: err.message, retriable: false };
    case 'credential_unusable':
      return { code: 'not_connected', message: err.message, retriable: false };
    default:
      return { code: 'provider_unreachable', message: err.message, retriable: true };
  }
}

export class ProviderTools {
  constructor(
    private readonly db: Queryable,
    private readonly vault: Vault,
    readonly runtime: ProviderRuntime,
    /** With the event store, an expired OAuth access token is refreshed before use (and the rotation recorded). */
    private readonly refresh?: Pick<OAuthRefreshDeps, 'store' | 'now' | 'waitFor'>,
  ) {}

  resolveTool(serverId: string, toolName: string): { provider: ProviderDef; tool: ToolDef } | undefined {
    return this.runtime.catalog.tool(serverId, toolName);
  }

  baseUrl(p: ProviderDef, environment: Environment): string {
    return baseUrlOf(p, environment, this.runtime.sandbox);
  }

  /** The live connection used for a call: the user's own, else a project-wide one when the provider allows it. */
  findConnection(t: Tenant, serverId: string, userId: string | null, opts: { exact?: boolean } = {}): Promise<ConnectionRecord | undefined> {
    const p = this.runtime.catalog.get(serverId);
    if (!p) return Promise.resolve(undefined);
    return liveConnection(this.db, t, serverId, userId, !opts.exact && p.connection_scope === 'project');
  }

  connectionById(id: string): Promise<ConnectionRecord | undefined> {
    return connectionById(this.db, id);
  }

  /** The credential of a live connection; undefined when its vault row is gone (revoked, deleted) or unreadable. */
  async readCredential(c: ConnectionRecord): Promise<Credential | undefined> {
    if (c.status !== 'connected' || !c.secret_ref) return undefined;
    const raw = await this.vault.get(c.org_id, c.secret_ref).catch(() => undefined);
    return raw ? decodeCredential(raw) : undefined;
  }

  /** Resolves the connection and credential a provider call needs (none for auth_type none). */
  async credentialFor(p: ProviderDef, t: Tenant, userId: string | null, opts: { exact?: boolean } = {}): Promise<{ ok: true; credential: Credential | undefined; connectionId: string | null } | { ok: false; error: ToolError }> {
    if (p.auth_type === 'none') return { ok: true, credential: undefined, connectionId: null };
    const c = await this.findConnection(t, p.id, userId, opts);
    let credential = c ? await this.readCredential(c) : undefined;
    if (c && p.auth_type === 'oauth' && this.refresh && needsRefresh(credential, this.refresh.now())) {
      const d = { ...this.refresh, vault: this.vault, client: this.runtime.client, clients: this.runtime, sandbox: this.runtime.sandbox };
      credential = (await refreshConnection(d, p, c, credential as Record<string, string>)) ?? credential;
    }
    if (!c || !credential) return { ok: false, error: { code: 'not_connected', message: `no live connection to ${p.id}${userId ? ` for user ${userId}` : ''}`, retriable: false } };
    return { ok: true, credential, connectionId: c.id };
  }

  async execute(call: { tenant: Tenant; environment: Environment; serverId: string; toolName: string; input: unknown; userId?: string | null }): Promise<ToolResult> {
    const p = this.runtime.catalog.get(call.serverId);
    if (!p) return { ok: false, error: { code: 'server_unknown', message: `no provider ${call.serverId} in the catalog`, retriable: false } };
    const tool = p.tools.find((t) => t.name === call.toolName);
    if (!tool) return { ok: false, error: { code: 'tool_unknown', message: `${p.id} has no tool ${call.toolName}`, retriable: false } };
    const issues = validate(tool.input_schema, call.input);
    if (issues.length > 0) return { ok: false, error: { code: 'invalid_input', message: `the input does not match ${tool.name}'s input schema`, retriable: false, issues } };
    const cred = await this.credentialFor(p, call.tenant, call.userId ?? null);
    if (!cred.ok) return cred;
    const input = { ...(call.input as Record<string, unknown>) };
    const path = tool.request.path.replace(/\{([a-z0-9_]+)\}/g, (_m, n: string) => {
      const v = input[n];
      delete input[n];
      return encodeURIComponent(String(v ?? ''));
    });
    const c = cred.connectionId ? await this.connectionById(cred.connectionId) : undefined;
    const merchant = c?.connection_metadata ?? {};
    const isGet = tool.request.method === 'GET' || tool.request.method === 'DELETE';
    const request = isGet
      ? { method: tool.request.method, path, query: Object.fromEntries(Object.entries(input).map(([k, v]) => [k, String(v)])) }
      : { method: tool.request.method, path, body: Object.keys(merchant).length ? { ...input, metadata: merchant } : input };
    try {
      const r = await this.runtime.client.request(p, this.baseUrl(p, call.environment), cred.credential, request);
      return { ok: true, output: r.json, status: r.status, latency_ms: r.latencyMs, connection_id: cred.connectionId };
    } catch (err) {
      return { ok: false, error: toolErrorOf(err) };
    }
  }
}
