import { createHash, timingSafeEqual } from 'node:crypto';
import type { DomainEvent } from '../events/index.ts';
import { type Decider, Rejection } from '../src/eventstore/handler.ts';

// OAuth 2.0 for remote clients: a registered public client, and a grant (one
// consent) that carries a single-use code and then a rotating token pair.
// Rejections use RFC 6749's codes directly (`invalid_grant`, `invalid_scope`):
// the token endpoint answers them in RFC 6749's shape.

export const oauthClientStream = (clientId: string) => `oauth_client-${clientId}`;
export const oauthGrantStream = (grantId: string) => `oauth_grant-${grantId}`;
/** The organization of client registrations: a client belongs to none. */
export const OAUTH_PLATFORM_ORG = 'platform';

export const sha256Hex = (s: string) => createHash('sha256').update(s).digest('hex');

/** Constant-time comparison of two hex SHA-256 digests. */
export function sameHash(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === 32 && y.length === 32 && timingSafeEqual(x, y);
}

/** RFC 7636 §4.2: BASE64URL(SHA256(ASCII(code_verifier))). */
export const s256 = (verifier: string) => createHash('sha256').update(verifier, 'ascii').digest('base64url');
/** RFC 7636 §4.1: 43 to 128 unreserved characters (the challenge has the same alphabet). */
export const PKCE_VALUE = /^[A-Za-z0-9\-._~]{43,128}$/;

/** Whether `held` covers `needed`: `*`, the exact scope, `<family>:*`, or for a read the family's write (as API keys, docs/api.md). */
export function scopeHeld(held: readonly string[], needed: string): boolean {
  const [family] = needed.split(':');
  return held.includes('*') || held.includes(needed) || held.includes(`${family}:*`) || (needed.endsWith(':read') && held.includes(`${family}:write`));
}

// --- client ---

export type OAuthClientState = { status: 'none' } | { status: 'registered'; clientId: string };
export type OAuthClientCommand = { type: 'register'; clientId: string; clientName: string | null; redirectUris: string[]; grantTypes: string[]; responseTypes: string[] };

export const oauthClientDecider: Decider<OAuthClientState, OAuthClientCommand> = {
  initialState: () => ({ status: 'none' }),
  evolve: (state, e) => (e.type === 'oauth_client.registered' ? { status: 'registered', clientId: e.data.client_id } : state),
  decide(c, state, { now }) {
    if (state.status !== 'none') throw new Rejection('client_exists', 'client id already registered');
    return [
      {
        type: 'oauth_client.registered',
        data: { client_id: c.clientId, client_name: c.clientName, redirect_uris: c.redirectUris, grant_types: c.grantTypes, response_types: c.responseTypes, token_endpoint_auth_method: 'none', registered_at: now },
      },
    ];
  },
};

// --- grant ---

export type Grant = {
  grantId: string;
  clientId: string;
  orgId: string;
  keyId: string;
  projectId: string | null;
  environment: 'live' | 'test';
  /** What the person granted; a refresh may narrow a token, never widen past this. */
  scopes: string[];
  redirectUri: string;
  codeChallenge: string;
  codeHash: string;
  codeExpiresAt: string;
  codeUsed: boolean;
  refreshHash: string | null;
  refreshExpiresAt: string | null;
  /** Refresh tokens already rotated away: presenting one again revokes the grant. */
  usedRefreshHashes: string[];
  revoked: boolean;
};

export type OAuthGrantState = { status: 'none' } | { status: 'exists'; g: Grant };

export type IssuedPair = { accessHash: string; accessExpiresAt: string; refreshHash: string; refreshExpiresAt: string };

export type OAuthGrantCommand =
  | {
      type: 'create';
      grantId: string;
      clientId: string;
      orgId: string;
      keyId: string;
      projectId: string | null;
      environment: 'live' | 'test';
      scopes: string[];
      redirectUri: string;
      codeChallenge: string;
      codeHash: string;
      codeExpiresAt: string;
    }
  | { type: 'redeem'; codeHash: string; clientId: string; redirectUri: string; codeVerifier: string; keyActive: boolean; pair: IssuedPair }
  | { type: 'refresh'; refreshHash: string; clientId: string; scopes: string[] | null; keyActive: boolean; pair: IssuedPair }
  | { type: 'revoke'; reason: 'refresh_token_reuse' | 'code_replay' | 'key_revoked' };

const invalidGrant = (message: string) => new Rejection('invalid_grant', message);

function revoke(g: Grant, reason: 'refresh_token_reuse' | 'code_replay' | 'key_revoked', now: string): DomainEvent[] {
  return g.revoked ? [] : [{ type: 'oauth_grant.revoked', data: { grant_id: g.grantId, reason, at: now } }];
}

export const oauthGrantDecider: Decider<OAuthGrantState, OAuthGrantCommand> = {
  initialState: () => ({ status: 'none' }),
  evolve(state, e) {
    if (e.type === 'oauth_grant.created') {
      const d = e.data;
      return {
        status: 'exists',
        g: {
          grantId: d.grant_id,
          clientId: d.client_id,
          orgId: d.org_id,
          keyId: d.key_id,
          projectId: d.project_id,
          environment: d.environment,
          scopes: d.scopes,
          redirectUri: d.redirect_uri,
          codeChallenge: d.code_challenge,
          codeHash: d.code_hash,
          codeExpiresAt: d.code_expires_at,
          codeUsed: false,
          refreshHash: null,
          refreshExpiresAt: null,
          usedRefreshHashes: [],
          revoked: false,
        },
      };
    }
    if (state.status !== 'exists') return state;
    const g = state.g;
    switch (e.type) {
      case 'oauth_grant.code_redeemed':
        return { status: 'exists', g: { ...g, codeUsed: true, refreshHash: e.data.refresh_token_hash, refreshExpiresAt: e.data.refresh_expires_at } };
      case 'oauth_grant.refreshed':
        return { status: 'exists', g: { ...g, refreshHash: e.data.refresh_token_hash, refreshExpiresAt: e.data.refresh_expires_at, usedRefreshHashes: [...g.usedRefreshHashes, e.data.previous_refresh_token_hash] } };
      case 'oauth_grant.revoked':
        return { status: 'exists', g: { ...g, revoked: true } };
      default:
        return state;
    }
  },
  decide(c, state, { now }) {
    if (c.type === 'create') {
      if (state.status !== 'none') throw new Rejection('grant_exists', 'grant id already used');
      return [
        {
          type: 'oauth_grant.created',
          data: {
            grant_id: c.grantId,
            client_id: c.clientId,
            org_id: c.orgId,
            key_id: c.keyId,
            project_id: c.projectId,
            environment: c.environment,
            scopes: c.scopes,
            redirect_uri: c.redirectUri,
            code_challenge: c.codeChallenge,
            code_hash: c.codeHash,
            code_expires_at: c.codeExpiresAt,
            created_at: now,
          },
        },
      ];
    }
    if (state.status !== 'exists') throw invalidGrant('unknown grant');
    const g = state.g;
    switch (c.type) {
      case 'revoke':
        return revoke(g, c.reason, now);
      case 'redeem': {
        if (!sameHash(c.codeHash, g.codeHash)) throw invalidGrant('the code is invalid');
        // RFC 6749 §4.1.2: a code used twice is refused and every token issued from it revoked.
        if (g.codeUsed) return revoke(g, 'code_replay', now);
        if (g.revoked) throw invalidGrant('the grant is revoked');
        if (Date.parse(now) >= Date.parse(g.codeExpiresAt)) throw invalidGrant('the code has expired');
        if (c.clientId !== g.clientId) throw invalidGrant('the code was issued to another client');
        if (c.redirectUri !== g.redirectUri) throw invalidGrant('redirect_uri differs from the one the code was issued for');
        if (!PKCE_VALUE.test(c.codeVerifier) || s256(c.codeVerifier) !== g.codeChallenge) throw invalidGrant('PKCE verification failed');
        if (!c.keyActive) return revoke(g, 'key_revoked', now);
        const p = c.pair;
        return [
          {
            type: 'oauth_grant.code_redeemed',
            data: { grant_id: g.grantId, access_token_hash: p.accessHash, access_expires_at: p.accessExpiresAt, refresh_token_hash: p.refreshHash, refresh_expires_at: p.refreshExpiresAt, scopes: g.scopes, at: now },
          },
        ];
      }
      case 'refresh': {
        if (g.revoked) throw invalidGrant('the grant is revoked');
        if (c.clientId !== g.clientId) throw invalidGrant('the refresh token was issued to another client');
        if (g.usedRefreshHashes.some((h) => sameHash(h, c.refreshHash))) return revoke(g, 'refresh_token_reuse', now);
        if (!g.refreshHash || !sameHash(g.refreshHash, c.refreshHash)) throw invalidGrant('the refresh token is invalid');
        if (g.refreshExpiresAt && Date.parse(now) >= Date.parse(g.refreshExpiresAt)) throw invalidGrant('the refresh token has expired');
        if (!c.keyActive) return revoke(g, 'key_revoked', now);
        const scopes = c.scopes ?? g.scopes;
        if (scopes.some((s) => !scopeHeld(g.scopes, s))) throw new Rejection('invalid_scope', 'the requested scope exceeds the scope granted');
        const p = c.pair;
        return [
          {
            type: 'oauth_grant.refreshed',
            data: {
              grant_id: g.grantId,
              previous_refresh_token_hash: c.refreshHash,
              access_token_hash: p.accessHash,
              access_expires_at: p.accessExpiresAt,
              refresh_token_hash: p.refreshHash,
              refresh_expires_at: p.refreshExpiresAt,
              scopes,
              at: now,
            },
          },
        ];
      }
    }
  },
};
