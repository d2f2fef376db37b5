import { type IssuedPair, oauthGrantDecider, oauthGrantStream, sha256Hex } from '../../commands/oauth.ts';
import { handleCommand, Rejection } from '../eventstore/handler.ts';
import { randomString } from '../ids.ts';
import { OAUTH_ACCESS_TTL_SECONDS, OAUTH_REFRESH_TTL_MS } from '../limits.ts';
import type { Ports } from './context.ts';

// The shapes of OAuth secrets. Each names its grant (`ogr_<16>`) so the server
// finds the grant without a lookup by secret, then compares the SHA-256 of the
// whole secret in constant time. 43 characters of 62 carry ~256 bits.
//
// The token endpoint's redemption (RFC 6749, PKCE RFC 7636, refresh rotation
// per OAuth 2.1): the grant a secret names, a new pair recorded by the grant's
// decider (which checks the code, its PKCE verifier and redirect URI, or the
// refresh token and its scopes, and may refuse or revoke). A refusal is a
// Rejection with RFC 6749's code (`invalid_grant`, `invalid_scope`); the HTTP
// layer answers it in RFC 6749's shape.

const SECRET_CHARS = 43;
export type SecretKind = 'code' | 'access' | 'refresh';
const PREFIX: Record<SecretKind, string> = { code: 'oac', access: 'oat', refresh: 'ort' };
const PATTERN: Record<SecretKind, RegExp> = {
  code: /^oac_([A-Za-z0-9]{16})_[A-Za-z0-9]{43}$/,
  access: /^oat_([A-Za-z0-9]{16})_[A-Za-z0-9]{43}$/,
  refresh: /^ort_([A-Za-z0-9]{16})_[A-Za-z0-9]{43}$/,
};

export const newGrantId = () => `ogr_${randomString(16)}`;

export function mintSecret(kind: SecretKind, grantId: string): string {
  return `${PREFIX[kind]}_${grantId.slice(4)}_${randomString(SECRET_CHARS)}`;
}

/** The grant a well-formed secret names, or null. */
export function grantOf(kind: SecretKind, secret: string): string | null {
  const m = PATTERN[kind].exec(secret);
  return m ? `ogr_${m[1]}` : null;
}

export const ACCESS_TOKEN_PATTERN = PATTERN.access;

/** A checked token request (src/http/oauth/oauth-requests.ts); redirectUri and verifier are the code's, requested the refresh's narrower scopes. */
export type TokenRequest = { grantType: 'authorization_code' | 'refresh_token'; clientId: string; secret: string; requested: string[] | null; redirectUri: string; verifier: string };

/** A new pair with its scopes, or the grant revoked by this request (a replayed code, a consumed refresh token); `behind` when the read side had not caught up. */
export type Redemption = { behind: boolean } & ({ kind: 'issued'; access: string; refresh: string; scopes: string[] } | { kind: 'revoked'; reason: string });

type GrantRow = { org_id: string; project_id: string | null; key_id: string; key_active: boolean };
type GrantCommand = { type: 'redeem'; codeHash: string; clientId: string; redirectUri: string; codeVerifier: string } | { type: 'refresh'; refreshHash: string; clientId: string; scopes: string[] | null };

/** Redeems a code or rotates a refresh token. An unknown secret, or the decider's refusal, is a Rejection `invalid_grant` (or `invalid_scope`). */
export async function redeemToken(ports: Pick<Ports, 'db' | 'store' | 'now' | 'readSide' | 'readWaitMs'>, requestId: string, t: TokenRequest): Promise<Redemption> {
  const code = t.grantType === 'authorization_code';
  const grantId = grantOf(code ? 'code' : 'refresh', t.secret);
  if (!grantId) throw new Rejection('invalid_grant', code ? 'the code is invalid' : 'the refresh token is invalid');
  const { rows } = await ports.db.query<GrantRow>(
    `SELECT g.org_id, g.project_id, g.key_id, (k.key_id IS NOT NULL AND k.revoked_at IS NULL) AS key_active
     FROM oauth_grants g LEFT JOIN api_keys k ON k.key_id = g.key_id WHERE g.grant_id = $1`,
    [grantId],
  );
  const g = rows[0];
  if (!g) throw new Rejection('invalid_grant', code ? 'the code is invalid' : 'the refresh token is invalid');

  const cmd: GrantCommand = code
    ? { type: 'redeem', codeHash: sha256Hex(t.secret), clientId: t.clientId, redirectUri: t.redirectUri, codeVerifier: t.verifier }
    : { type: 'refresh', refreshHash: sha256Hex(t.secret), clientId: t.clientId, scopes: t.requested };
  const { result, access, refresh } = await issuePair(ports, requestId, grantId, g, cmd);
  const behind = !!result.lastPosition && !(await ports.readSide.waitFor(result.lastPosition, ports.readWaitMs));
  const issued = result.events[0];
  if (issued?.type !== 'oauth_grant.code_redeemed' && issued?.type !== 'oauth_grant.refreshed') {
    // A replayed code or a consumed refresh token: the grant is now revoked (RFC 6749 §4.1.2, OAuth 2.1 §4.3.1).
    const why = issued?.type === 'oauth_grant.revoked' && issued.data.reason === 'key_revoked' ? 'the API key behind this grant is revoked' : 'the grant is revoked';
    return { kind: 'revoked', behind, reason: code && result.state.status === 'exists' && result.state.g.codeUsed ? 'the code was already used; every token issued from it is revoked' : why };
  }
  return { kind: 'issued', behind, access, refresh, scopes: issued.data.scopes };
}

/** A new access and refresh pair for the grant, recorded by the grant's decider (which may refuse or revoke). */
async function issuePair(ports: Pick<Ports, 'store' | 'now'>, requestId: string, grantId: string, g: GrantRow, cmd: GrantCommand) {
  const at = ports.now();
  const access = mintSecret('access', grantId);
  const refresh = mintSecret('refresh', grantId);
  const pair: IssuedPair = {
    accessHash: sha256Hex(access),
    accessExpiresAt: new Date(at.getTime() + OAUTH_ACCESS_TTL_SECONDS * 1000).toISOString(),
    refreshHash: sha256Hex(refresh),
    refreshExpiresAt: new Date(at.getTime() + OAUTH_REFRESH_TTL_MS).toISOString(),
  };
  const command = { ...cmd, keyActive: g.key_active, pair };
  const result = await handleCommand(ports.store, oauthGrantDecider, oauthGrantStream(grantId), command, {
    orgId: g.org_id,
    projectId: g.project_id,
    actor: { kind: 'api_key', id: g.key_id },
    requestId,
    now: () => at,
  }, { serialize: true });
  return { result, access, refresh };
}
