import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { OAUTH_PLATFORM_ORG, oauthClientDecider, oauthClientStream, oauthGrantDecider, oauthGrantStream, type IssuedPair, sha256Hex } from '../../commands/oauth.ts';
import { handleCommand, Rejection } from '../eventstore/handler.ts';
import { randomString } from '../ids.ts';
import { OAUTH_ACCESS_TTL_SECONDS, OAUTH_CLIENT_NAME_MAX_CHARS, OAUTH_REDIRECT_URI_MAX_CHARS, OAUTH_REDIRECT_URIS_MAX, OAUTH_REFRESH_TTL_MS } from '../limits.ts';
import { OAuthKeyRevocationReactor } from '../reactors/oauth-key-revocation.ts';
import { RawHttpError } from './errors.ts';
import { type OAuthShared, param, redirectUriProblem } from './oauth-common.ts';
import { grantOf, mintSecret } from './oauth-tokens.ts';
import { defineRoute, type AppDeps, READ_SIDE_HEADER } from './route.ts';

// OAuth 2.0 for remote clients (spec Part 4.1, Part 5 item 10): metadata
// (RFC 8414, RFC 9728), dynamic registration of public clients (RFC 7591),
// the token endpoint (RFC 6749, PKCE RFC 7636, refresh rotation per OAuth 2.1).
// The consent pages are in oauth-consent.ts. Errors here use RFC 6749 / 7591's
// own shape `{error, error_description}` (the string `error` of Part 7's exceptions).

const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };
const oauthError = (status: number, error: string, description: string) => new RawHttpError(status, { error, error_description: description }, { ...NO_STORE });

const OAuthError = z.object({ error: z.string(), error_description: z.string() });
const Strings = z.array(z.string());

/** The token, registration and metadata endpoints; the consent pages (oauth-consent.ts) are mounted beside them with the same `shared`. */
export async function oauthRoutes(app: FastifyInstance, deps: AppDeps, shared: OAuthShared): Promise<void> {
  const { urls, limits, scopes } = shared;

  // Grants of a revoked key are revoked as facts (authentication refuses them at once anyway).
  const revoker = new OAuthKeyRevocationReactor(deps.db, deps.store, deps.now);
  revoker.start();
  app.addHook('onClose', () => revoker.stop());

  defineRoute(app, deps, {
    method: 'GET',
    url: '/.well-known/oauth-authorization-server',
    operationId: 'getOAuthAuthorizationServerMetadata',
    summary: 'OAuth 2.0 authorization server metadata (RFC 8414)',
    tags: ['oauth'],
    auth: 'open',
    responses: {
      200: z.object({
        issuer: z.string(),
        authorization_endpoint: z.string(),
        token_endpoint: z.string(),
        registration_endpoint: z.string(),
        response_types_supported: Strings,
        grant_types_supported: Strings,
        code_challenge_methods_supported: Strings,
        token_endpoint_auth_methods_supported: Strings,
        scopes_supported: Strings,
        authorization_response_iss_parameter_supported: z.literal(true),
      }),
    },
    async handler() {
      return {
        status: 200,
        body: {
          issuer: urls.issuer,
          authorization_endpoint: urls.authorize,
          token_endpoint: urls.token,
          registration_endpoint: urls.register,
          response_types_supported: ['code'],
          grant_types_supported: ['authorization_code', 'refresh_token'],
          code_challenge_methods_supported: ['S256'],
          token_endpoint_auth_methods_supported: ['none'],
          scopes_supported: scopes(),
          authorization_response_iss_parameter_supported: true,
        },
      };
    },
  });

  const ResourceMetadata = z.object({ resource: z.string(), authorization_servers: Strings, scopes_supported: Strings, bearer_methods_supported: Strings, resource_name: z.string() });
  // The /v1 API's metadata at its RFC 9728 address, and the origin's at the bare address.
  for (const [url, resource, op] of [
    ['/.well-known/oauth-protected-resource/v1', urls.resource, 'getOAuthProtectedResourceMetadataV1'],
    ['/.well-known/oauth-protected-resource', urls.issuer, 'getOAuthProtectedResourceMetadata'],
  ] as const) {
    defineRoute(app, deps, {
      method: 'GET',
      url,
      operationId: op,
      summary: 'OAuth 2.0 protected resource metadata of the /v1 API (RFC 9728)',
      tags: ['oauth'],
      auth: 'open',
      responses: { 200: ResourceMetadata },
      async handler() {
        return { status: 200, body: { resource, authorization_servers: [urls.issuer], scopes_supported: scopes(), bearer_methods_supported: ['header'], resource_name: 'Agent commerce API' } };
      },
    });
  }

  const Client = z.object({
    client_id: z.string(),
    client_name: z.string().optional(),
    grant_types: Strings,
    redirect_uris: Strings,
    response_types: Strings,
    token_endpoint_auth_method: z.literal('none'),
  });
  defineRoute(app, deps, {
    method: 'POST',
    url: '/oauth/register',
    operationId: 'registerOAuthClient',
    summary: 'Dynamic client registration of a public client (RFC 7591)',
    tags: ['oauth'],
    auth: 'open',
    responses: { 201: Client, 400: OAuthError },
    errors: [
      [400, 'invalid_redirect_uri'],
      [400, 'invalid_client_metadata'],
      [429, 'rate_limited'],
    ],
    async handler({ req, run }) {
      limits.take('register', req);
      const body = req.body;
      const bad = (error: string, d: string) => oauthError(400, error, d);
      if (typeof body !== 'object' || body === null || Array.isArray(body)) throw bad('invalid_client_metadata', 'the body must be a JSON object of client metadata');
      const m = body as Record<string, unknown>;
      const uris = m.redirect_uris;
      if (!Array.isArray(uris) || uris.length === 0) throw bad('invalid_redirect_uri', 'redirect_uris must be a non-empty array');
      if (uris.length > OAUTH_REDIRECT_URIS_MAX) throw bad('invalid_redirect_uri', `at most ${OAUTH_REDIRECT_URIS_MAX} redirect URIs`);
      for (const u of uris) {
        if (typeof u !== 'string' || u.length > OAUTH_REDIRECT_URI_MAX_CHARS) throw bad('invalid_redirect_uri', 'each redirect URI must be a string');
        const problem = redirectUriProblem(u);
        if (problem) throw bad('invalid_redirect_uri', problem);
      }
      const list = (name: string, allowed: readonly string[], dflt: string[]): string[] => {
        const v = m[name];
        if (v === undefined) return dflt;
        if (!Array.isArray(v) || v.length === 0 || v.some((x) => typeof x !== 'string' || !allowed.includes(x))) throw bad('invalid_client_metadata', `${name} may hold only ${allowed.join(', ')}`);
        return [...new Set(v as string[])];
      };
      const grantTypes = list('grant_types', ['authorization_code', 'refresh_token'], ['authorization_code', 'refresh_token']);
      if (!grantTypes.includes('authorization_code')) throw bad('invalid_client_metadata', 'grant_types must include authorization_code');
      const responseTypes = list('response_types', ['code'], ['code']);
      if (m.token_endpoint_auth_method !== undefined && m.token_endpoint_auth_method !== 'none') throw bad('invalid_client_metadata', 'only public clients are registered: token_endpoint_auth_method must be none');
      if (m.client_name !== undefined && m.client_name !== null && typeof m.client_name !== 'string') throw bad('invalid_client_metadata', 'client_name must be a string');
      // Part 8: truncated to 256 characters (code points, so no surrogate is split).
      const clientName = typeof m.client_name === 'string' && m.client_name !== '' ? Array.from(m.client_name).slice(0, OAUTH_CLIENT_NAME_MAX_CHARS).join('') : null;
      const clientId = `ocl_${randomString(24)}`;
      const redirectUris = [...new Set(uris as string[])];
      await run(oauthClientDecider, oauthClientStream(clientId), { type: 'register', clientId, clientName, redirectUris, grantTypes, responseTypes }, { orgId: OAUTH_PLATFORM_ORG, projectId: null, expectedRevision: 'no_stream' });
      return {
        status: 201,
        headers: NO_STORE,
        body: { client_id: clientId, ...(clientName !== null ? { client_name: clientName } : {}), grant_types: grantTypes, redirect_uris: redirectUris, response_types: responseTypes, token_endpoint_auth_method: 'none' as const },
      };
    },
  });

  const TokenResponse = z.object({ access_token: z.string(), token_type: z.literal('Bearer'), expires_in: z.number().int(), refresh_token: z.string(), scope: z.string() });
  defineRoute(app, deps, {
    method: 'POST',
    url: '/oauth/token',
    operationId: 'oauthToken',
    summary: 'Token endpoint: authorization_code (PKCE S256) and refresh_token grants; form-encoded, JSON accepted',
    tags: ['oauth'],
    auth: 'open',
    responses: { 200: TokenResponse, 400: OAuthError, 401: OAuthError },
    errors: [
      [400, 'invalid_grant'],
      [400, 'invalid_request'],
      [400, 'unsupported_grant_type'],
      [400, 'invalid_scope'],
      [401, 'invalid_client'],
      [429, 'rate_limited'],
    ],
    async handler({ req, reply }) {
      limits.take('token', req);
      const body = req.body;
      const p = (name: string): string | undefined => {
        const v = param(body, name);
        if (v === null) throw oauthError(400, 'invalid_request', `${name} must be given once, as a string`);
        return v;
      };
      const need = (name: string): string => {
        const v = p(name);
        if (v === undefined || v === '') throw oauthError(400, 'invalid_request', `${name} is required`);
        return v;
      };
      const grantType = need('grant_type');
      if (grantType !== 'authorization_code' && grantType !== 'refresh_token') throw oauthError(400, 'unsupported_grant_type', 'grant_type must be authorization_code or refresh_token');
      const clientId = need('client_id');
      const client = await deps.db.query('SELECT 1 FROM oauth_clients WHERE client_id = $1', [clientId]);
      if (client.rowCount === 0) throw oauthError(401, 'invalid_client', 'unknown client_id');

      const secret = need(grantType === 'authorization_code' ? 'code' : 'refresh_token');
      let requested: string[] | null = null;
      let redirectUri = '';
      let verifier = '';
      if (grantType === 'authorization_code') {
        verifier = need('code_verifier');
        redirectUri = need('redirect_uri');
      } else {
        const scope = p('scope');
        if (scope !== undefined) {
          requested = [...new Set(scope.split(' ').filter((s) => s !== ''))];
          if (requested.length === 0 || requested.some((s) => !scopes().includes(s))) throw oauthError(400, 'invalid_scope', 'scope names an unknown scope');
        }
      }
      const grantId = grantOf(grantType === 'authorization_code' ? 'code' : 'refresh', secret);
      if (!grantId) throw oauthError(400, 'invalid_grant', grantType === 'authorization_code' ? 'the code is invalid' : 'the refresh token is invalid');
      const { rows } = await deps.db.query<{ org_id: string; project_id: string | null; key_id: string; key_active: boolean }>(
        `SELECT g.org_id, g.project_id, g.key_id, (k.key_id IS NOT NULL AND k.revoked_at IS NULL) AS key_active
         FROM oauth_grants g LEFT JOIN api_keys k ON k.key_id = g.key_id WHERE g.grant_id = $1`,
        [grantId],
      );
      const g = rows[0];
      if (!g) throw oauthError(400, 'invalid_grant', grantType === 'authorization_code' ? 'the code is invalid' : 'the refresh token is invalid');

      const at = deps.now();
      const access = mintSecret('access', grantId);
      const refresh = mintSecret('refresh', grantId);
      const pair: IssuedPair = {
        accessHash: sha256Hex(access),
        accessExpiresAt: new Date(at.getTime() + OAUTH_ACCESS_TTL_SECONDS * 1000).toISOString(),
        refreshHash: sha256Hex(refresh),
        refreshExpiresAt: new Date(at.getTime() + OAUTH_REFRESH_TTL_MS).toISOString(),
      };
      const command =
        grantType === 'authorization_code'
          ? { type: 'redeem' as const, codeHash: sha256Hex(secret), clientId, redirectUri, codeVerifier: verifier, keyActive: g.key_active, pair }
          : { type: 'refresh' as const, refreshHash: sha256Hex(secret), clientId, scopes: requested, keyActive: g.key_active, pair };
      let result;
      try {
        result = await handleCommand(deps.store, oauthGrantDecider, oauthGrantStream(grantId), command, {
          orgId: g.org_id,
          projectId: g.project_id,
          actor: { kind: 'api_key', id: g.key_id },
          requestId: String(req.id),
          now: () => at,
        }, { serialize: true });
      } catch (err) {
        if (err instanceof Rejection && (err.code === 'invalid_grant' || err.code === 'invalid_scope')) throw oauthError(400, err.code, err.message);
        throw err;
      }
      if (result.lastPosition && !(await deps.readSide.waitFor(result.lastPosition, deps.readWaitMs))) reply.header(READ_SIDE_HEADER, 'behind');
      const issued = result.events[0];
      if (issued?.type !== 'oauth_grant.code_redeemed' && issued?.type !== 'oauth_grant.refreshed') {
        // A replayed code or a consumed refresh token: the grant is now revoked (RFC 6749 §4.1.2, OAuth 2.1 §4.3.1).
        const why = issued?.type === 'oauth_grant.revoked' && issued.data.reason === 'key_revoked' ? 'the API key behind this grant is revoked' : 'the grant is revoked';
        throw oauthError(400, 'invalid_grant', grantType === 'authorization_code' && result.state.status === 'exists' && result.state.g.codeUsed ? 'the code was already used; every token issued from it is revoked' : why);
      }
      return {
        status: 200,
        headers: NO_STORE,
        body: { access_token: access, token_type: 'Bearer' as const, expires_in: OAUTH_ACCESS_TTL_SECONDS, refresh_token: refresh, scope: issued.data.scopes.join(' ') },
      };
    },
  });

}
