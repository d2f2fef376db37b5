import { createHash, randomBytes } from 'node:crypto';
import { CONNECT_LINK_TTL_MS, connectLinkDecider, connectLinkStream, linkIdOf } from '../../commands/connect-link.ts';
import { ProviderError } from '../adapters/providers/http-provider.ts';
import { loadState, Rejection } from '../eventstore/handler.ts';
import { encodeCredential } from '../providers/credentials.ts';
import { credentialOfTokens, metadataOfTokens, oauthClientOf, oauthUrlsOf, requestToken, type OAuthTokenSet } from '../providers/oauth.ts';
import type { Environment } from '../providers/tools.ts';
import type { Ports, RunCommand, UseCaseCtx } from './context.ts';
import { upsertConnection } from './connections.ts';

// OAuth connect links (spec 4.4 `POST /v1/connections/start`, alias
// `POST /v1/connect/start`; spec 8: ten minutes). Start mints a single-use link
// token that is the OAuth `state`, a PKCE verifier (kept in the vault) and the
// provider's authorize URL. The provider sends the person back to our callback,
// which spends the link token (refusing an expired, spent or unknown one with
// nothing written), exchanges the code with the verifier, stores the token set
// in the vault, creates (or rotates) the connection as `connected` with
// `metadata` {scope, refresh_ref, account_id, token_expires_at}, and redirects
// to the caller's redirect_uri with `connection_id` (or `error`).

export const CALLBACK_PATH = '/v1/connections/callback';
const b64url = (n: number) => randomBytes(n).toString('base64url');

export type StartLinkInput = { redirect_uri: string; server_id: string; user_id: string; scopes?: string | undefined };

/** Mints a connect link: the provider's authorize URL, the link token (the OAuth state) and its expiry. */
export async function startConnectLink(ctx: Pick<UseCaseCtx, 'ports' | 'tenant' | 'run'>, environment: Environment, body: StartLinkInput): Promise<{ authorize_url: string; link_token: string; expires_at: string }> {
  const { ports, tenant } = ctx;
  const runtime = ports.providers.runtime;
  const p = runtime.catalog.get(body.server_id);
  if (!p) throw new Rejection('server_unknown', `no provider ${body.server_id} in the catalog`, { server_id: body.server_id });
  if (p.auth_type !== 'oauth' || !p.oauth) throw new Rejection('oauth_not_configured', `the catalog has no OAuth configuration for ${p.id}`, { server_id: p.id, auth_type: p.auth_type });
  const urls = oauthUrlsOf(p, environment, runtime.sandbox);
  const client = oauthClientOf(p, environment, runtime);
  if (!urls || !client) throw new Rejection('oauth_client_not_configured', `the platform's OAuth client for ${p.id} is not configured`, { server_id: p.id });
  const scopes = body.scopes === undefined ? p.oauth.scopes : body.scopes.split(/\s+/).filter(Boolean);
  const unknown = scopes.filter((s) => !p.oauth!.scopes.includes(s));
  if (unknown.length > 0 || scopes.length === 0) throw new Rejection('invalid_scope', `scopes must be among: ${p.oauth.scopes.join(' ')}`, { unknown: unknown.slice(0, 20), allowed: p.oauth.scopes });
  const linkToken = `lt_${b64url(32)}`;
  const verifier = b64url(48);
  const linkId = linkIdOf(linkToken);
  let verifierRef: string;
  try {
    verifierRef = await ports.vault.put(tenant.orgId, 'connect_link_verifier', Buffer.from(verifier));
  } catch (err) {
    throw new Rejection('vault_unavailable', 'the vault could not be written; nothing was stored', { retriable: true, reason: err instanceof Error ? err.constructor.name : 'error' });
  }
  const now = ports.now();
  const expiresAt = new Date(now.getTime() + CONNECT_LINK_TTL_MS).toISOString();
  const data = {
    link_id: linkId,
    org_id: tenant.orgId,
    project_id: tenant.projectId,
    server_id: p.id,
    user_id: body.user_id,
    environment,
    redirect_uri: body.redirect_uri,
    scopes,
    verifier_ref: verifierRef,
    expires_at: expiresAt,
    created_at: now.toISOString(),
  };
  try {
    await ctx.run(connectLinkDecider, connectLinkStream(linkId), { type: 'start', data }, { expectedRevision: 'no_stream' });
  } catch (err) {
    await ports.vault.delete(tenant.orgId, verifierRef).catch(() => {});
    throw err;
  }
  const authorize = new URL(urls.authorize);
  for (const [k, v] of Object.entries({
    response_type: 'code',
    client_id: client.client_id,
    redirect_uri: `${ports.baseUrl}${CALLBACK_PATH}`,
    scope: scopes.join(' '),
    state: linkToken,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
  }))
    authorize.searchParams.set(k, v);
  return { authorize_url: authorize.toString(), link_token: linkToken, expires_at: expiresAt };
}

export type CallbackInput = { state: string; code?: string | undefined; error?: string | undefined };

/**
 * The provider's redirect: spends the link token, exchanges the code (PKCE),
 * stores the tokens and connects. Answers where to send the person back: the
 * link's redirect_uri with `connection_id`, or with `error`.
 */
export async function completeConnectLink(ports: Ports, run: RunCommand, query: CallbackInput): Promise<string> {
  const stream = connectLinkStream(linkIdOf(query.state));
  const { state } = await loadState(ports.store, stream, connectLinkDecider);
  if (state.status === 'none') throw new Rejection('link_token_unknown', 'no connect link has this state');
  const link = state.link;
  const tenant = { orgId: link.org_id, projectId: link.project_id };
  const opts = { orgId: link.org_id, projectId: link.project_id, serialize: true };
  // Spend the token first: refused (nothing written) when expired, spent or racing another callback.
  await run(connectLinkDecider, stream, { type: 'consume' }, opts);
  const verifier = await ports.vault.get(link.org_id, link.verifier_ref).catch(() => undefined);
  await ports.vault.delete(link.org_id, link.verifier_ref).catch(() => {});
  const back = (params: Record<string, string>) => {
    const u = new URL(link.redirect_uri);
    for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
    return u.toString();
  };
  const fail = async (reason: string, detail: string | null) => {
    await run(connectLinkDecider, stream, { type: 'fail', reason, detail }, opts);
    return back({ status: 'failed', error: reason });
  };
  if (query.error) return fail('access_denied', query.error.slice(0, 200));
  if (!query.code) return fail('code_missing', null);
  const p = ports.providers.runtime.catalog.get(link.server_id);
  const urls = p ? oauthUrlsOf(p, link.environment, ports.providers.runtime.sandbox) : undefined;
  const client = p ? oauthClientOf(p, link.environment, ports.providers.runtime) : undefined;
  if (!p || !urls || !client || !verifier) return fail('oauth_client_not_configured', null);
  let tokens: OAuthTokenSet;
  try {
    tokens = await requestToken(
      ports.providers.runtime.client,
      urls.token,
      { grant_type: 'authorization_code', code: query.code, redirect_uri: `${ports.baseUrl}${CALLBACK_PATH}`, client_id: client.client_id, client_secret: client.client_secret, code_verifier: verifier.toString() },
      ports.now(),
    );
  } catch (err) {
    if (!(err instanceof ProviderError)) throw err;
    return fail('token_exchange_failed', (err.extra.detail ?? err.message).slice(0, 500));
  }
  const ref = await ports.vault.put(link.org_id, `connection:${p.id}`, encodeCredential(credentialOfTokens(tokens, link.environment)));
  let connectionId: string;
  try {
    connectionId = await upsertConnection({ ports, run }, tenant, p.id, link.user_id, ref, metadataOfTokens(tokens, ref));
  } catch (err) {
    await ports.vault.delete(link.org_id, ref).catch(() => {});
    throw err;
  }
  await run(connectLinkDecider, stream, { type: 'complete', connectionId, accountId: tokens.account_id }, opts);
  return back({ status: 'connected', connection_id: connectionId });
}
