import t from 'tap';
import type { DomainEvent } from '../../events/index.ts';
import { oauthGrantDecider, s256, scopeHeld, sha256Hex } from '../../commands/oauth.ts';
import { given } from '../helpers/decider.ts';

// The grant decider, pure: a code is single use, bound to its client,
// redirect_uri and PKCE challenge, and lives until code_expires_at; refresh
// tokens rotate and a consumed one revokes the grant.

const verifier = 'v'.repeat(43);
const h = (s: string) => sha256Hex(s);
const created: DomainEvent = {
  type: 'oauth_grant.created',
  data: {
    grant_id: 'ogr_1',
    client_id: 'ocl_a',
    org_id: 'org_1',
    key_id: 'key_1',
    project_id: null,
    environment: 'test',
    scopes: ['projects:write'],
    redirect_uri: 'http://127.0.0.1/cb',
    code_challenge: s256(verifier),
    code_hash: h('code'),
    code_expires_at: '2026-11-21T12:01:00.000Z',
    created_at: '2026-11-21T12:00:00.000Z',
  },
};
const pair = (n: string) => ({ accessHash: h(`a${n}`), accessExpiresAt: '2026-11-21T13:00:00.000Z', refreshHash: h(`r${n}`), refreshExpiresAt: '2026-12-21T12:00:00.000Z' });
const redeem = { type: 'redeem' as const, codeHash: h('code'), clientId: 'ocl_a', redirectUri: 'http://127.0.0.1/cb', codeVerifier: verifier, keyActive: true, pair: pair('1') };
const redeemed: DomainEvent = {
  type: 'oauth_grant.code_redeemed',
  data: { grant_id: 'ogr_1', access_token_hash: h('a1'), access_expires_at: '2026-11-21T13:00:00.000Z', refresh_token_hash: h('r1'), refresh_expires_at: '2026-12-21T12:00:00.000Z', scopes: ['projects:write'], at: '2026-11-21T12:00:00.000Z' },
};
const refresh = (presented: string, n: string, scopes: string[] | null = null) => ({ type: 'refresh' as const, refreshHash: h(presented), clientId: 'ocl_a', scopes, keyActive: true, pair: pair(n) });
const revoked = (reason: 'code_replay' | 'refresh_token_reuse' | 'key_revoked', at = '2026-11-21T12:00:00.000Z'): DomainEvent => ({ type: 'oauth_grant.revoked', data: { grant_id: 'ogr_1', reason, at } });

t.test('redeem', async (t) => {
  given(t, oauthGrantDecider, [created]).when(redeem).then([redeemed]);
  given(t, oauthGrantDecider, [created], '2026-11-21T12:01:00.000Z').when(redeem).rejects('invalid_grant', 'expired at 60 s');
  given(t, oauthGrantDecider, [created]).when({ ...redeem, codeHash: h('other') }).rejects('invalid_grant', 'wrong code');
  given(t, oauthGrantDecider, [created]).when({ ...redeem, clientId: 'ocl_b' }).rejects('invalid_grant', 'another client');
  given(t, oauthGrantDecider, [created]).when({ ...redeem, redirectUri: 'http://127.0.0.1/cb/' }).rejects('invalid_grant', 'another redirect_uri');
  given(t, oauthGrantDecider, [created]).when({ ...redeem, codeVerifier: 'w'.repeat(43) }).rejects('invalid_grant', 'PKCE');
  given(t, oauthGrantDecider, [created]).when({ ...redeem, keyActive: false }).then([revoked('key_revoked')], 'a revoked key revokes the grant');
  given(t, oauthGrantDecider, [created, redeemed]).when(redeem).then([revoked('code_replay')], 'a replayed code revokes the grant');
  given(t, oauthGrantDecider, [created, redeemed, revoked('code_replay')]).when(redeem).then([], 'once');
});

t.test('refresh', async (t) => {
  const refreshed: DomainEvent = {
    type: 'oauth_grant.refreshed',
    data: { grant_id: 'ogr_1', previous_refresh_token_hash: h('r1'), access_token_hash: h('a2'), access_expires_at: '2026-11-21T13:00:00.000Z', refresh_token_hash: h('r2'), refresh_expires_at: '2026-12-21T12:00:00.000Z', scopes: ['projects:write'], at: '2026-11-21T12:00:00.000Z' },
  };
  given(t, oauthGrantDecider, [created, redeemed]).when(refresh('r1', '2')).then([refreshed]);
  given(t, oauthGrantDecider, [created, redeemed, refreshed]).when(refresh('r1', '3')).then([revoked('refresh_token_reuse')], 'a consumed refresh token revokes the grant');
  given(t, oauthGrantDecider, [created, redeemed, refreshed, revoked('refresh_token_reuse')]).when(refresh('r2', '3')).rejects('invalid_grant', 'the grant is revoked');
  given(t, oauthGrantDecider, [created, redeemed]).when(refresh('rX', '2')).rejects('invalid_grant', 'unknown refresh token');
  given(t, oauthGrantDecider, [created, redeemed]).when({ ...refresh('r1', '2'), clientId: 'ocl_b' }).rejects('invalid_grant', 'another client');
  given(t, oauthGrantDecider, [created, redeemed]).when(refresh('r1', '2', ['projects:*'])).rejects('invalid_scope', 'wider');
  given(t, oauthGrantDecider, [created, redeemed]).when(refresh('r1', '2', ['projects:read'])).then([{ ...refreshed, data: { ...refreshed.data, scopes: ['projects:read'] } } as DomainEvent], 'narrower');
  given(t, oauthGrantDecider, [created, redeemed], '2026-12-21T12:00:00.000Z').when(refresh('r1', '2')).rejects('invalid_grant', 'expired refresh token');
  given(t, oauthGrantDecider, []).when(refresh('r1', '2')).rejects('invalid_grant', 'no grant');
});

t.test('scopes', async (t) => {
  t.ok(scopeHeld(['*'], 'projects:write'));
  t.ok(scopeHeld(['projects:write'], 'projects:read'));
  t.notOk(scopeHeld(['projects:read'], 'projects:write'));
  t.notOk(scopeHeld(['projects:write'], 'projects:*'));
  t.notOk(scopeHeld(['projects:*'], '*'));
});
