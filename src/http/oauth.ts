import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { OAUTH_PLATFORM_ORG, oauthClientDecider, oauthClientStream, oauthGrantDecider, oauthGrantStream, type IssuedPair, sha256Hex } from '../../commands/oauth.ts';
import { handleCommand, Rejection } from '../eventstore/handler.ts';
import { randomString } from '../ids.ts';
import { OAUTH_ACCESS_TTL_SECONDS, OAUTH_REFRESH_TTL_MS } from '../limits.ts';
import { OAuthKeyRevocationReactor } from '../reactors/oauth-key-revocation.ts';
import type { OAuthShared } from './oauth-common.ts';
import { clientMetadata, NO_STORE, oauthError, tokenRequest } from './oauth-requests.ts';
import { grantOf, mintSecret } from '../usecases/oauth-tokens.ts';
import { defineRoute, type AppDeps, READ_SIDE_HEADER } from './route.ts';

// OAuth 2.0 for remote clients (spec Part 4.1, Part 5 item 10): metadata
// (RFC 8414, RFC 9728), dynamic registration of public clients (RFC 7591),
// the token endpoint (RFC 6749, PKCE RFC 7636, refresh rotation per OAuth 2.1).
// The consent pages are in oauth-consent.ts. Errors here use RFC 6749 / 7591's
// own shape `{error, error_description}` (the string `error` of Part 7's exceptions).

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
      limits.take('register', req);
      const { redirectUris, grantTypes, responseTypes, clientName } = clientMetadata(req.body);
      const clientId = `ocl_${randomString(24)}`;
      await run(oauthClientDecider, oauthClientStream(clientId), { type: 'register', clientId, clientName, redirectUris, grantTypes, responseTypes }, { orgId: OAUTH_PLATFORM_ORG, projectId: null, expectedRevision: 'no_stream' });
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
      [429, 'rate_limited'],
    ],
    async handler({ req, reply }) {
      limits.take('token', req);
      const { grantType, clientId, secret, requested, redirectUri, verifier } = await tokenRequest(deps, req.body, scopes);
      const grantId = grantOf(grantType === 'authorization_code' ? 'code' : 'refresh', secret);
      if (!grantId) throw oauthError(400, 'invalid_grant', grantType === 'authorization_code' ? 'the code is invalid' : 'the refresh token is invalid');
      const { rows } = await deps.db.query<{ org_id: string; project_id: string | null; key_id: string; key_active: boolean }>(
        `SELECT g.org_id, g.project_id, g.key_id, (k.key_id IS NOT NULL AND k.revoked_at IS NULL) AS key_active
         FROM oauth_grants g LEFT JOIN api_keys k ON k.key_id = g.key_id WHERE g.grant_id = $1`,
        [grantId],
      );
      const g = rows[0];
      if (!g) throw oauthError(400, 'invalid_grant', grantType === 'authorization_code' ? 'the code is invalid' : 'the refresh token is invalid');

      const { result, access, refresh } = await redeem(deps, String(req.id), grantId, g, grantType === 'authorization_code' ? { type: 'redeem', codeHash: sha256Hex(secret), clientId, redirectUri, codeVerifier: verifier } : { type: 'refresh', refreshHash: sha256Hex(secret), clientId, scopes: requested });
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

type GrantCommand = { type: 'redeem'; codeHash: string; clientId: string; redirectUri: string; codeVerifier: string } | { type: 'refresh'; refreshHash: string; clientId: string; scopes: string[] | null };

/** A new access and refresh pair for the grant, recorded by the grant's decider (which may refuse or revoke). */
async function redeem(deps: AppDeps, requestId: string, grantId: string, g: { org_id: string; project_id: string | null; key_id: string; key_active: boolean }, cmd: GrantCommand) {
  const at = deps.now();
  const access = mintSecret('access', grantId);
  const refresh = mintSecret('refresh', grantId);
  const pair: IssuedPair = {
    accessHash: sha256Hex(access),
    accessExpiresAt: new Date(at.getTime() + OAUTH_ACCESS_TTL_SECONDS * 1000).toISOString(),
    refreshHash: sha256Hex(refresh),
    refreshExpiresAt: new Date(at.getTime() + OAUTH_REFRESH_TTL_MS).toISOString(),
  };
  const command = { ...cmd, keyActive: g.key_active, pair };
  let result;
  try {
    result = await handleCommand(deps.store, oauthGrantDecider, oauthGrantStream(grantId), command, {
      orgId: g.org_id,
      projectId: g.project_id,
      actor: { kind: 'api_key', id: g.key_id },
      requestId,
      now: () => at,
    }, { serialize: true });
  } catch (err) {
    if (err instanceof Rejection && (err.code === 'invalid_grant' || err.code === 'invalid_scope')) throw oauthError(400, err.code, err.message);
    throw err;
  }
  return { result, access, refresh };
}
