import { createHash, randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { CONNECT_LINK_TTL_MS, connectLinkDecider, connectLinkStream, linkIdOf } from '../../commands/connect-link.ts';
import { ProviderError } from '../adapters/providers/http-provider.ts';
import { loadState, Rejection } from '../eventstore/handler.ts';
import { upsertConnection } from '../usecases/connections.ts';
import { encodeCredential } from '../providers/credentials.ts';
import { credentialOfTokens, metadataOfTokens, oauthClientOf, oauthUrlsOf, requestToken, type OAuthTokenSet } from '../providers/oauth.ts';
import { ApiError } from './errors.ts';
import { defineRoute, type AppDeps } from './route.ts';
import { Timestamp } from './schemas.ts';

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

const StartBody = z.object({
  redirect_uri: z.url({ protocol: /^https?$/ }).max(2_000),
  server_id: z.string().min(1).max(64),
  user_id: z.string().min(1).max(128).regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces'),
  scopes: z.string().max(1_000).optional(),
});
const StartResponse = z.object({ authorize_url: z.string(), link_token: z.string(), expires_at: Timestamp }).meta({ id: 'ConnectLink' });

export async function connectLinkRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  for (const [url, operationId] of [['/v1/connections/start', 'startConnectLink'], ['/v1/connect/start', 'startConnectLinkAlias']] as const) {
    defineRoute(app, deps, {
      method: 'POST',
      url,
      operationId,
      summary: 'Start an OAuth connect link: the provider authorize URL, a single-use link token (the OAuth state) and its expiry, ten minutes from now',
      tags: ['connections'],
      auth: 'api_key',
      scope: 'connections:write',
      body: StartBody,
      responses: { 200: StartResponse },
      errors: [[400, 'invalid_body'], [400, 'invalid_scope'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'server_unknown'], [404, 'oauth_not_configured'], [500, 'oauth_client_not_configured'], [503, 'vault_unavailable']],
      async handler(ctx) {
        const { body, auth, deps } = ctx;
        const runtime = deps.providers.runtime;
        const p = runtime.catalog.get(body.server_id);
        if (!p) throw new ApiError(404, 'server_unknown', `no provider ${body.server_id} in the catalog`, { server_id: body.server_id });
        if (p.auth_type !== 'oauth' || !p.oauth) throw new ApiError(404, 'oauth_not_configured', `the catalog has no OAuth configuration for ${p.id}`, { server_id: p.id, auth_type: p.auth_type });
        const urls = oauthUrlsOf(p, auth.environment, runtime.sandbox);
        const client = oauthClientOf(p, auth.environment, runtime);
        if (!urls || !client) throw new ApiError(500, 'oauth_client_not_configured', `the platform's OAuth client for ${p.id} is not configured`, { server_id: p.id });
        const scopes = body.scopes === undefined ? p.oauth.scopes : body.scopes.split(/\s+/).filter(Boolean);
        const unknown = scopes.filter((s) => !p.oauth!.scopes.includes(s));
        if (unknown.length > 0 || scopes.length === 0) throw new ApiError(400, 'invalid_scope', `scopes must be among: ${p.oauth.scopes.join(' ')}`, { unknown: unknown.slice(0, 20), allowed: p.oauth.scopes });
        const linkToken = `lt_${b64url(32)}`;
        const verifier = b64url(48);
        const linkId = linkIdOf(linkToken);
        let verifierRef: string;
        try {
          verifierRef = await deps.vault.put(auth.orgId, 'connect_link_verifier', Buffer.from(verifier));
        } catch (err) {
          throw new ApiError(503, 'vault_unavailable', 'the vault could not be written; nothing was stored', { retriable: true, reason: err instanceof Error ? err.constructor.name : 'error' });
        }
        const now = deps.now();
        const expiresAt = new Date(now.getTime() + CONNECT_LINK_TTL_MS).toISOString();
        const data = {
          link_id: linkId,
          org_id: auth.orgId,
          project_id: auth.projectId,
          server_id: p.id,
          user_id: body.user_id,
          environment: auth.environment,
          redirect_uri: body.redirect_uri,
          scopes,
          verifier_ref: verifierRef,
          expires_at: expiresAt,
          created_at: now.toISOString(),
        };
        try {
          await ctx.run(connectLinkDecider, connectLinkStream(linkId), { type: 'start', data }, { expectedRevision: 'no_stream' });
        } catch (err) {
          await deps.vault.delete(auth.orgId, verifierRef).catch(() => {});
          throw err;
        }
        const authorize = new URL(urls.authorize);
        for (const [k, v] of Object.entries({
          response_type: 'code',
          client_id: client.client_id,
          redirect_uri: `${deps.baseUrl}${CALLBACK_PATH}`,
          scope: scopes.join(' '),
          state: linkToken,
          code_challenge: createHash('sha256').update(verifier).digest('base64url'),
          code_challenge_method: 'S256',
        }))
          authorize.searchParams.set(k, v);
        return { status: 200, body: { authorize_url: authorize.toString(), link_token: linkToken, expires_at: expiresAt } };
      },
    });
  }

  defineRoute(app, deps, {
    method: 'GET',
    url: CALLBACK_PATH,
    operationId: 'connectLinkCallback',
    summary: "The provider's OAuth redirect: spends the link token, exchanges the code (PKCE), stores the tokens, connects, and redirects to the link's redirect_uri",
    tags: ['connections'],
    auth: 'open',
    query: z.object({ state: z.string().min(1).max(200), code: z.string().min(1).max(2_000).optional(), error: z.string().max(200).optional() }),
    responses: { 302: null },
    errors: [[400, 'invalid_query'], [400, 'link_token_unknown'], [409, 'link_token_used'], [410, 'link_expired']],
    async handler(ctx) {
      const { query, deps } = ctx;
      const stream = connectLinkStream(linkIdOf(query.state));
      const { state } = await loadState(deps.store, stream, connectLinkDecider);
      if (state.status === 'none') throw new Rejection('link_token_unknown', 'no connect link has this state');
      const link = state.link;
      const tenant = { orgId: link.org_id, projectId: link.project_id };
      const opts = { orgId: link.org_id, projectId: link.project_id, serialize: true };
      // Spend the token first: refused (nothing written) when expired, spent or racing another callback.
      await ctx.run(connectLinkDecider, stream, { type: 'consume' }, opts);
      const verifier = await deps.vault.get(link.org_id, link.verifier_ref).catch(() => undefined);
      await deps.vault.delete(link.org_id, link.verifier_ref).catch(() => {});
      const back = (params: Record<string, string>) => {
        const u = new URL(link.redirect_uri);
        for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
        return { status: 302, headers: { location: u.toString() } };
      };
      const fail = async (reason: string, detail: string | null) => {
        await ctx.run(connectLinkDecider, stream, { type: 'fail', reason, detail }, opts);
        return back({ status: 'failed', error: reason });
      };
      if (query.error) return fail('access_denied', query.error.slice(0, 200));
      if (!query.code) return fail('code_missing', null);
      const p = deps.providers.runtime.catalog.get(link.server_id);
      const urls = p ? oauthUrlsOf(p, link.environment, deps.providers.runtime.sandbox) : undefined;
      const client = p ? oauthClientOf(p, link.environment, deps.providers.runtime) : undefined;
      if (!p || !urls || !client || !verifier) return fail('oauth_client_not_configured', null);
      let tokens: OAuthTokenSet;
      try {
        tokens = await requestToken(
          deps.providers.runtime.client,
          urls.token,
          { grant_type: 'authorization_code', code: query.code, redirect_uri: `${deps.baseUrl}${CALLBACK_PATH}`, client_id: client.client_id, client_secret: client.client_secret, code_verifier: verifier.toString() },
          deps.now(),
        );
      } catch (err) {
        if (!(err instanceof ProviderError)) throw err;
        return fail('token_exchange_failed', (err.extra.detail ?? err.message).slice(0, 500));
      }
      const ref = await deps.vault.put(link.org_id, `connection:${p.id}`, encodeCredential(credentialOfTokens(tokens, link.environment)));
      let connectionId: string;
      try {
        connectionId = await upsertConnection({ ports: deps, run: ctx.run.bind(ctx) }, tenant, p.id, link.user_id, ref, metadataOfTokens(tokens, ref));
      } catch (err) {
        await deps.vault.delete(link.org_id, ref).catch(() => {});
        throw err;
      }
      await ctx.run(connectLinkDecider, stream, { type: 'complete', connectionId, accountId: tokens.account_id }, opts);
      return back({ status: 'connected', connection_id: connectionId });
    },
  });
}
