import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { OAUTH_ACCESS_TTL_SECONDS } from '../../limits.ts';
import { OAuthKeyRevocationReactor } from '../../reactors/oauth-key-revocation.ts';
import type { OAuthShared } from './oauth-common.ts';
import { clientMetadata, NO_STORE, oauthError, oauthRefusal, tokenRequest } from './oauth-requests.ts';
import { registerOAuthClient } from '../../usecases/oauth-clients.ts';
import { redeemToken } from '../../usecases/oauth-tokens.ts';
import { defineRoute, type AppDeps, READ_SIDE_HEADER } from '../kernel/route.ts';

// OAuth 2.0 for remote clients (spec Part 4.1, Part 5 item 10): metadata
// (RFC 8414, RFC 9728), dynamic registration of public clients (RFC 7591),
// the token endpoint (RFC 6749, PKCE RFC 7636, refresh rotation per OAuth 2.1).
// The consent pages are in oauth-consent.ts; the registration and the token
// redemption are use cases (src/usecases/oauth-clients.ts, oauth-tokens.ts).
// Errors here use RFC 6749 / 7591's own shape `{error, error_description}`
// (the string `error` of Part 7's exceptions).

const OAuthError = z.object({ error: z.string(), error_description: z.string() });
const Strings = z.array(z.string());

/** The token, registration and metadata endpoints; the consent pages (oauth-consent.ts) are mounted beside them with the same `shared`. */
export async function oauthRoutes(app: FastifyInstance, deps: AppDeps, shared: OAuthShared): Promise<void> {
  // Grants of a revoked key are revoked as facts (authentication refuses them at once anyway).
  const revoker = new OAuthKeyRevocationReactor(deps.db, deps.store, deps.now);
  revoker.start();
  app.addHook('onClose', () => revoker.stop());

  metadataRoutes(app, deps, shared);
  registrationRoute(app, deps, shared);
  tokenRoute(app, deps, shared);
}

/** Authorization server (RFC 8414) and protected resource (RFC 9728) metadata. */
function metadataRoutes(app: FastifyInstance, deps: AppDeps, { urls, scopes }: OAuthShared): void {
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

}

/** Dynamic client registration of public clients (RFC 7591). */
function registrationRoute(app: FastifyInstance, deps: AppDeps, { limits }: OAuthShared): void {
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
      await limits.take('register', req);
      const m = clientMetadata(req.body);
      const clientId = await registerOAuthClient(run, m);
      const { redirectUris, grantTypes, responseTypes, clientName } = m;
      return {
        status: 201,
        headers: NO_STORE,
        body: { client_id: clientId, ...(clientName !== null ? { client_name: clientName } : {}), grant_types: grantTypes, redirect_uris: redirectUris, response_types: responseTypes, token_endpoint_auth_method: 'none' as const },
      };
    },
  });
}

/** The token endpoint: authorization_code (PKCE S256) and refresh_token grants. */
function tokenRoute(app: FastifyInstance, deps: AppDeps, { limits, scopes }: OAuthShared): void {
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
      [415, 'invalid_request'],
      [429, 'rate_limited'],
    ],
    async handler({ req, reply }) {
      await limits.take('token', req);
      const request = await tokenRequest(deps, req.body, scopes);
      const r = await redeemToken(deps, String(req.id), request).catch((err: unknown) => {
        throw oauthRefusal(err);
      });
      if (r.behind) reply.header(READ_SIDE_HEADER, 'behind');
      if (r.kind === 'revoked') throw oauthError(400, 'invalid_grant', r.reason);
      return {
        status: 200,
        headers: NO_STORE,
        body: { access_token: r.access, token_type: 'Bearer' as const, expires_in: OAUTH_ACCESS_TTL_SECONDS, refresh_token: r.refresh, scope: r.scopes.join(' ') },
      };
    },
  });
}
