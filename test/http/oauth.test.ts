import t from 'tap';
import * as oauth from 'oauth4webapi';
import { bootstrapOrg, testApp, testClock } from '../helpers/app.ts';
import { authorizeUrl, clientOptions, consent, ISSUER, pkce } from '../helpers/oauth.ts';

// oauth4webapi (the npm registry's strict OAuth client) drives the whole flow:
// discovery, registration, authorize with PKCE through the consent form,
// code exchange, a /v1 call, refresh rotation, refresh reuse, code replay.

const clock = testClock();
const { app, ledger } = await testApp(t, { now: clock.now });
const org = await bootstrapOrg(app, 'Oauthco');
const opts = clientOptions(app);
const issuer = new URL(ISSUER);

const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { ...opts, algorithm: 'oauth2' }));
const reg = await oauth.dynamicClientRegistrationRequest(as, { redirect_uris: ['http://127.0.0.1/callback'], client_name: 'Test IDE', token_endpoint_auth_method: 'none' }, opts);
const registeredStatus = reg.status;
const client: oauth.Client = await oauth.processDynamicClientRegistrationResponse(reg);
// A loopback redirect on another port than the registered one (RFC 8252 §7.3).
const redirectUri = 'http://127.0.0.1:53123/callback';

async function authorize(scope?: string) {
  const p = await pkce();
  const state = oauth.generateRandomState();
  const url = authorizeUrl(as, { client_id: client.client_id, redirect_uri: redirectUri, response_type: 'code', code_challenge: p.challenge, code_challenge_method: 'S256', state, ...(scope ? { scope } : {}) });
  const res = await consent(app, url, org.testKey);
  if (res.statusCode !== 302) throw new Error(`consent answered ${res.statusCode}: ${res.body}`);
  const location = new URL(String(res.headers.location));
  const params = oauth.validateAuthResponse(as, client, location, state);
  return { params, location, p };
}

async function exchange(params: URLSearchParams, verifier: string) {
  const res = await oauth.authorizationCodeGrantRequest(as, client, oauth.None(), params, redirectUri, verifier, opts);
  return oauth.processAuthorizationCodeResponse(as, client, res);
}

/** GET /v1/whoami with the bearer; a 401 comes back as oauth4webapi reports it: a challenge naming our resource metadata. */
async function whoami(accessToken: string): Promise<Response> {
  try {
    return await oauth.protectedResourceRequest(accessToken, 'GET', new URL(`${ISSUER}/v1/whoami`), new Headers(), null, opts);
  } catch (err) {
    if (err instanceof oauth.WWWAuthenticateChallengeError) {
      if (err.cause[0]?.parameters.resource_metadata !== `${ISSUER}/.well-known/oauth-protected-resource/v1`) throw err;
      return err.response;
    }
    throw err;
  }
}

async function refresh(refreshToken: string) {
  return oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, oauth.None(), refreshToken, opts));
}

async function oauthErrorOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (err instanceof oauth.ResponseBodyError) return err.error;
    throw err;
  }
  throw new Error('expected an OAuth error');
}

t.test('discovery and registration', async (t) => {
  t.equal(as.issuer, ISSUER, 'issuer is the base URL exactly');
  t.same(as.code_challenge_methods_supported, ['S256']);
  t.same(as.token_endpoint_auth_methods_supported, ['none']);
  t.same(as.grant_types_supported, ['authorization_code', 'refresh_token']);
  t.same(as.response_types_supported, ['code']);
  t.equal(as.authorization_response_iss_parameter_supported, true);
  t.ok(as.scopes_supported?.includes('*') && as.scopes_supported.includes('projects:read'), 'scopes_supported is the scope vocabulary');
  t.equal(registeredStatus, 201);
  t.equal(client.token_endpoint_auth_method, 'none');
  t.equal(client.client_name, 'Test IDE');
  // RFC 9728: the /v1 resource names this server.
  const rs = await oauth.processResourceDiscoveryResponse(new URL(`${ISSUER}/v1`), await oauth.resourceDiscoveryRequest(new URL(`${ISSUER}/v1`), opts));
  t.same(rs.authorization_servers, [ISSUER]);
});

t.test('code, /v1 call, refresh rotation, refresh reuse revokes the grant', async (t) => {
  const { location } = await authorize('projects:read');
  t.equal(location.port, '53123', 'redirected to the loopback port the client asked for');
  t.equal(location.searchParams.get('iss'), ISSUER);
  const first = await authorizeAndExchange();
  const me = await whoami(first.access_token);
  t.equal(me.status, 200, 'the bearer authenticates /v1');
  const body = (await me.json()) as { org_id: string; environment: string; scopes: string[] };
  t.equal(body.org_id, org.orgId);
  t.equal(body.environment, 'test');
  t.same(body.scopes, ['projects:read'], 'narrowed to the granted scope');
  t.equal(first.token_type, 'bearer');
  t.equal(first.expires_in, 3600);
  t.equal(first.scope, 'projects:read');
  t.equal((await app.inject({ method: 'GET', url: '/v1/projects', headers: { authorization: `Bearer ${first.access_token}` } })).statusCode, 200, 'a route within the scope');
  const outside = await app.inject({ method: 'POST', url: '/v1/projects', headers: { authorization: `Bearer ${first.access_token}` }, payload: { name: 'x', slug: 'x' } });
  t.equal(outside.statusCode, 403, 'a route outside the granted scope is forbidden');
  t.equal(outside.json().error, 'forbidden');

  const second = await refresh(first.refresh_token!);
  t.not(second.refresh_token, first.refresh_token, 'the refresh token rotates');
  t.equal((await whoami(second.access_token)).status, 200);
  t.equal((await whoami(first.access_token)).status, 401, 'the previous access token ends with its rotation');

  t.equal(await oauthErrorOf(refresh(first.refresh_token!)), 'invalid_grant', 'a consumed refresh token is refused');
  t.equal((await whoami(second.access_token)).status, 401, 'and its reuse revoked the current access token');
  t.equal(await oauthErrorOf(refresh(second.refresh_token!)), 'invalid_grant', 'and the current refresh token');

  async function authorizeAndExchange() {
    const a = await authorize('projects:read');
    return exchange(a.params, a.p.verifier);
  }
});

t.test('code replay: invalid_grant, and the tokens issued from the code stop working', async (t) => {
  const { params, p } = await authorize();
  const tokens = await exchange(params, p.verifier);
  t.equal(tokens.scope, '*', "no scope asked: the key's scopes");
  t.equal((await whoami(tokens.access_token)).status, 200);
  t.equal(await oauthErrorOf(exchange(params, p.verifier)), 'invalid_grant');
  const after = await whoami(tokens.access_token);
  t.equal(after.status, 401);
  t.same(await after.json(), { error: 'unauthorized' }, 'the bare 401 body');
  t.match(after.headers.get('www-authenticate'), /^Bearer resource_metadata="http:\/\/127\.0\.0\.1:8080\/\.well-known\/oauth-protected-resource\/v1", error="invalid_token", error_description="the access token is unknown, expired or revoked[^"]*"$/);
  t.equal(await oauthErrorOf(refresh(tokens.refresh_token!)), 'invalid_grant');
});

t.test('a code lives 60 seconds', async (t) => {
  const { params, p } = await authorize();
  clock.advance(61_000);
  t.equal(await oauthErrorOf(exchange(params, p.verifier)), 'invalid_grant');
});

t.test('an access token expires after expires_in', async (t) => {
  const { params, p } = await authorize();
  const tokens = await exchange(params, p.verifier);
  clock.advance(3_601_000);
  t.equal((await whoami(tokens.access_token)).status, 401);
  const again = await refresh(tokens.refresh_token!);
  t.equal((await whoami(again.access_token)).status, 200, 'a refresh gives a fresh one');
});

t.test('deny redirects with access_denied', async (t) => {
  const p = await pkce();
  const url = authorizeUrl(as, { client_id: client.client_id, redirect_uri: redirectUri, response_type: 'code', code_challenge: p.challenge, code_challenge_method: 'S256', state: 'xyz' });
  const res = await consent(app, url, '', 'deny');
  t.equal(res.statusCode, 302);
  const loc = new URL(String(res.headers.location));
  t.equal(loc.searchParams.get('error'), 'access_denied');
  t.equal(loc.searchParams.get('state'), 'xyz');
  t.throws(() => oauth.validateAuthResponse(as, client, loc, 'xyz'), oauth.AuthorizationResponseError);
});

t.test('revoking the key revokes its grants', async (t) => {
  const owner = org.owner;
  const created = (await app.inject({ method: 'POST', url: '/v1/api-keys', headers: owner, payload: { name: 'ide', environment: 'test' } })).json();
  const p = await pkce();
  const url = authorizeUrl(as, { client_id: client.client_id, redirect_uri: redirectUri, response_type: 'code', code_challenge: p.challenge, code_challenge_method: 'S256' });
  const res = await consent(app, url, created.key);
  const params = oauth.validateAuthResponse(as, client, new URL(String(res.headers.location)), oauth.expectNoState);
  const tokens = await exchange(params, p.verifier);
  t.equal((await whoami(tokens.access_token)).status, 200);
  t.equal((await app.inject({ method: 'DELETE', url: `/v1/api-keys/${created.id}`, headers: owner })).statusCode, 200);
  t.equal((await whoami(tokens.access_token)).status, 401, 'at once');
  t.equal(await oauthErrorOf(refresh(tokens.refresh_token!)), 'invalid_grant');
  // The revocation is a fact of the grant's stream.
  const grantId = `ogr_${tokens.access_token.split('_')[1]}`;
  const events = await ledger.store.readStream(`oauth_grant-${grantId}`);
  t.same(events.map((e) => e.type), ['oauth_grant.created', 'oauth_grant.code_redeemed', 'oauth_grant.revoked']);
  t.equal((events[2]!.data as { reason: string }).reason, 'key_revoked');
});

t.test('the revocation reactor records key_revoked for a grant nobody touches', async (t) => {
  const created = (await app.inject({ method: 'POST', url: '/v1/api-keys', headers: org.owner, payload: { name: 'idle', environment: 'test' } })).json();
  const p = await pkce();
  const url = authorizeUrl(as, { client_id: client.client_id, redirect_uri: redirectUri, response_type: 'code', code_challenge: p.challenge, code_challenge_method: 'S256' });
  const params = oauth.validateAuthResponse(as, client, new URL(String((await consent(app, url, created.key)).headers.location)), oauth.expectNoState);
  const tokens = await exchange(params, p.verifier);
  const stream = `oauth_grant-ogr_${tokens.access_token.split('_')[1]}`;
  await app.inject({ method: 'DELETE', url: `/v1/api-keys/${created.id}`, headers: org.owner });
  // The reactor runs on an interval: wait for the fact, bounded.
  let types: string[] = [];
  for (let i = 0; i < 300 && !types.includes('oauth_grant.revoked'); i++) {
    types = (await ledger.store.readStream(stream)).map((e) => e.type);
    if (!types.includes('oauth_grant.revoked')) await new Promise((r) => setTimeout(r, 100));
  }
  t.same(types, ['oauth_grant.created', 'oauth_grant.code_redeemed', 'oauth_grant.revoked']);
});

t.test('events carry only ids and hashes; grants are sealed in the organization audit chain', async (t) => {
  await ledger.settle();
  const all = await ledger.store.readAll({ maxCount: 10_000 });
  const oauthEvents = all.filter((e) => e.type.startsWith('oauth_'));
  const types = new Set(oauthEvents.map((e) => e.type));
  for (const ty of ['oauth_client.registered', 'oauth_grant.created', 'oauth_grant.code_redeemed', 'oauth_grant.refreshed', 'oauth_grant.revoked']) t.ok(types.has(ty), ty);
  const text = JSON.stringify(oauthEvents.map((e) => ({ data: e.data, metadata: e.metadata })));
  t.notMatch(text, /oa[ct]_[A-Za-z0-9]{16}_|ort_[A-Za-z0-9]{16}_|sk_(test|live)_/, 'no code, token or key in clear');
  const audit = await app.inject({ method: 'GET', url: '/v1/audit-events?limit=200', headers: org.key });
  t.equal(audit.statusCode, 200);
  const auditTypes = new Set((audit.json().data ?? audit.json().events ?? audit.json().audit_events ?? []).map((e: { event_type: string }) => e.event_type));
  t.ok(auditTypes.has('oauth_grant.created'), `the grant is in the audit chain (${[...auditTypes].join(',')})`);
});
