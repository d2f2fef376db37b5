import type { AppDeps } from '../kernel/route.ts';
import { OAUTH_CLIENT_NAME_MAX_CHARS, OAUTH_REDIRECT_URI_MAX_CHARS, OAUTH_REDIRECT_URIS_MAX } from '../../limits.ts';
import { Rejection } from '../../eventstore/handler.ts';
import { RawHttpError } from '../kernel/errors.ts';
import { redirectUriProblem } from '../../usecases/oauth-redirects.ts';
import { type OAuthShared, param } from './oauth-common.ts';
import { type ClientMetadata, oauthClientKnown } from '../../usecases/oauth-clients.ts';
import type { TokenRequest } from '../../usecases/oauth-tokens.ts';

// The OAuth endpoints' request parsing (no routes): a registration's client
// metadata (RFC 7591) and a token request's parameters (RFC 6749), each
// refused in the RFCs' own shape `{error, error_description}`, never cached.

export const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };
export const oauthError = (status: number, error: string, description: string) => new RawHttpError(status, { error, error_description: description }, { ...NO_STORE });

/** A grant's refusal (src/usecases/oauth-tokens.ts: `invalid_grant`, `invalid_scope`) as RFC 6749's 400; anything else as it was. */
export function oauthRefusal(err: unknown): unknown {
  return err instanceof Rejection && (err.code === 'invalid_grant' || err.code === 'invalid_scope') ? oauthError(400, err.code, err.message) : err;
}

/** The registration body (RFC 7591 client metadata), checked; the first problem is the RFC's 400. */
export function clientMetadata(body: unknown): ClientMetadata {
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
  return { redirectUris: [...new Set(uris as string[])], grantTypes, responseTypes, clientName };
}

/** The token request's parameters (form-encoded or JSON), checked, and its client known. */
export async function tokenRequest(deps: AppDeps, body: unknown, scopes: OAuthShared['scopes']): Promise<TokenRequest> {
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
  if (!(await oauthClientKnown(deps.db, clientId))) throw oauthError(401, 'invalid_client', 'unknown client_id');

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
  return { grantType, clientId, secret, requested, redirectUri, verifier };
}
