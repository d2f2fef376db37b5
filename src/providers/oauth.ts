import { connectionDecider, connectionStream } from '../../commands/connection.ts';
import { ProviderError, type Credential, type HttpProvider } from '../adapters/providers/http-provider.ts';
import type { Vault } from '../adapters/vault.ts';
import { handleCommand } from '../eventstore/handler.ts';
import type { EventStore, Position } from '../eventstore/port.ts';
import type { ConnectionRecord } from '../../projections/connection.ts';
import type { ProviderDef, SandboxUrls } from './catalog.ts';
import { encodeCredential } from './credentials.ts';

// OAuth for `oauth` catalog providers: where the authorization server is (the
// catalog's URLs, or the sandbox provider's own server for a `sandbox:` test
// endpoint), the platform's client at each provider, the code exchange (PKCE)
// and the refresh grant. The stored credential of an OAuth connection is the
// token set {access_token, refresh_token, expires_at, environment}; its
// metadata (public) is {scope, refresh_ref, account_id, token_expires_at}.

/** The platform's registered client at a provider (client_secret is configuration, never an event). */
export type OAuthClientConfig = { client_id: string; client_secret: string };
export type OAuthClients = Record<string, OAuthClientConfig>;
export type OAuthTokenSet = { access_token: string; refresh_token: string | null; expires_at: string | null; scope: string; account_id: string | null };

/** Access tokens are refreshed this long before they expire. */
export const REFRESH_SKEW_MS = 30_000;

export function oauthUrlsOf(p: ProviderDef, environment: 'live' | 'test', sandbox: SandboxUrls | undefined): { authorize: string; token: string } | undefined {
  if (p.auth_type !== 'oauth' || !p.oauth) return undefined;
  const e = p.endpoints[environment];
  if (e === 'sandbox:') return sandbox ? { authorize: `${sandbox.http}/${p.id}/oauth/authorize`, token: `${sandbox.http}/${p.id}/oauth/token` } : undefined;
  return { authorize: p.oauth.authorize_url, token: p.oauth.token_url };
}

/** The platform's OAuth clients: at providers' own URLs (PROVIDER_OAUTH_CLIENTS) and at the sandbox providers. */
export type PlatformOAuthClients = { oauthClients?: OAuthClients | undefined; sandboxOAuthClients?: OAuthClients | undefined };

/**
 * The client to present at the URLs oauthUrlsOf gives for this environment: the sandbox's own client where
 * the endpoint is the sandbox, else the configured one (a live connect never carries a sandbox client).
 */
export function oauthClientOf(p: ProviderDef, environment: 'live' | 'test', clients: PlatformOAuthClients | undefined): OAuthClientConfig | undefined {
  return (p.endpoints[environment] === 'sandbox:' ? clients?.sandboxOAuthClients : clients?.oauthClients)?.[p.id];
}

function tokenSetOf(json: Record<string, unknown>, now: Date, previous?: { refresh_token: string | null; scope: string; account_id: string | null }): OAuthTokenSet {
  if (typeof json.access_token !== 'string' || json.access_token === '') throw new ProviderError('status', 'the token endpoint answered no access_token');
  const expiresIn = typeof json.expires_in === 'number' && json.expires_in > 0 ? json.expires_in : null;
  return {
    access_token: json.access_token,
    refresh_token: typeof json.refresh_token === 'string' ? json.refresh_token : (previous?.refresh_token ?? null),
    expires_at: expiresIn ? new Date(now.getTime() + expiresIn * 1000).toISOString() : null,
    scope: typeof json.scope === 'string' ? json.scope : (previous?.scope ?? ''),
    account_id: typeof json.account_id === 'string' ? json.account_id : (previous?.account_id ?? null),
  };
}

/** Posts a grant to the token endpoint; a refusal throws ProviderError('rejected') with the provider's words. */
export async function requestToken(client: HttpProvider, tokenUrl: string, form: Record<string, string>, now: Date, previous?: Parameters<typeof tokenSetOf>[2]): Promise<OAuthTokenSet> {
  const r = await client.postForm(tokenUrl, form);
  if (r.status !== 200) {
    const words = [r.json.error, r.json.error_description].filter((x) => typeof x === 'string').join(': ').slice(0, 500);
    throw new ProviderError(r.status === 400 || r.status === 401 ? 'rejected' : 'status', `the token endpoint answered ${r.status}`, { status: r.status, ...(words ? { detail: words } : {}) });
  }
  return tokenSetOf(r.json, now, previous);
}

export const credentialOfTokens = (t: OAuthTokenSet, environment: 'live' | 'test'): Credential => ({
  access_token: t.access_token,
  ...(t.refresh_token ? { refresh_token: t.refresh_token } : {}),
  ...(t.expires_at ? { expires_at: t.expires_at } : {}),
  environment,
});
export const metadataOfTokens = (t: OAuthTokenSet, secretRef: string) => ({ scope: t.scope, refresh_ref: t.refresh_token ? secretRef : null, account_id: t.account_id, token_expires_at: t.expires_at });

export type OAuthRefreshDeps = {
  store: EventStore;
  vault: Vault;
  client: HttpProvider;
  clients: PlatformOAuthClients;
  sandbox: SandboxUrls | undefined;
  now: () => Date;
  waitFor?: (p: Position, ms: number) => Promise<boolean>;
};

export function needsRefresh(cred: Credential | undefined, now: Date): boolean {
  return typeof cred === 'object' && typeof cred.expires_at === 'string' && typeof cred.refresh_token === 'string' && Date.parse(cred.expires_at) - REFRESH_SKEW_MS <= now.getTime();
}

/**
 * Refreshes an expired access token: the refresh grant at the provider, the new
 * token set in the vault, `connection.credential_rotated` (new secret_ref and
 * metadata), the old vault row removed. Undefined when it cannot (no client,
 * provider refusal): the caller goes on with what it has.
 */
export async function refreshConnection(d: OAuthRefreshDeps, p: ProviderDef, c: ConnectionRecord, cred: Record<string, string>): Promise<Credential | undefined> {
  const environment = cred.environment === 'live' ? 'live' : 'test';
  const urls = oauthUrlsOf(p, environment, d.sandbox);
  const client = oauthClientOf(p, environment, d.clients);
  if (!urls || !client || !cred.refresh_token) return undefined;
  const now = d.now();
  let tokens: OAuthTokenSet;
  try {
    tokens = await requestToken(d.client, urls.token, { grant_type: 'refresh_token', refresh_token: cred.refresh_token, client_id: client.client_id, client_secret: client.client_secret }, now, {
      refresh_token: cred.refresh_token,
      scope: '',
      account_id: null,
    });
  } catch (err) {
    if (err instanceof ProviderError) return undefined;
    throw err;
  }
  const credential = credentialOfTokens(tokens, environment);
  const ref = await d.vault.put(c.org_id, `connection:${p.id}`, encodeCredential(credential));
  const tenant = { orgId: c.org_id, projectId: c.project_id };
  const before = c.metadata ?? {};
  const meta = { ...before, ...metadataOfTokens(tokens, ref), ...(tokens.scope ? {} : { scope: before.scope ?? '' }), ...(tokens.account_id ? {} : { account_id: before.account_id ?? null }) };
  try {
    const r = await handleCommand(
      d.store,
      connectionDecider,
      connectionStream(c.id),
      { type: 'rotate', tenant, data: { secret_ref: ref, cert_metadata: {}, expires_at: null, metadata: meta } },
      { orgId: c.org_id, projectId: c.project_id, actor: { kind: 'system', id: 'oauth-refresh' }, requestId: null, now: d.now },
      { serialize: true },
    );
    if (r.lastPosition && d.waitFor) await d.waitFor(r.lastPosition, 5_000);
    const rotated = r.events[0];
    if (rotated?.type === 'connection.credential_rotated') await d.vault.delete(c.org_id, rotated.data.previous_secret_ref).catch(() => {});
  } catch {
    await d.vault.delete(c.org_id, ref).catch(() => {});
    return undefined;
  }
  return credential;
}
