import t, { type Test } from 'tap';
import type { LightMyRequestResponse } from 'fastify';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { confirmConsent, consent, pkce, readConsentPage } from '../helpers/oauth.ts';

// Raw requests for every refusal the issue lists: the consent pages refuse
// with a 400 HTML page and no Location; registration and the token endpoint
// answer RFC 7591 / RFC 6749 JSON errors.

// Generous limits here: this file makes many requests from one address; the limits have their own test below.
const { app, ledger } = await testApp(t, { oauth: { rateLimit: { perAddress: { burst: 10_000, perSecond: 1_000 }, keyPaste: { maxFailures: 10_000, windowMs: 1_000 } } } });
const org = await bootstrapOrg(app, 'Refuse');
const form = { 'content-type': 'application/x-www-form-urlencoded' };

async function register(body: unknown) {
  return app.inject({ method: 'POST', url: '/oauth/register', payload: body as object });
}
const client = (await register({ redirect_uris: ['https://app.example/cb', 'http://localhost/cb'], client_name: 'Refusal client' })).json();
const other = (await register({ redirect_uris: ['https://other.example/cb'] })).json();
const p = await pkce();
const base = { client_id: client.client_id, redirect_uri: 'https://app.example/cb', response_type: 'code', code_challenge: p.challenge, code_challenge_method: 'S256', state: 's t&ate=1' };
const authorizeUrl = (over: Record<string, string | undefined>) => {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries({ ...base, ...over })) if (v !== undefined) q.set(k, v);
  return `/oauth/authorize?${q}`;
};

function securityHeaders(t: Test, res: LightMyRequestResponse) {
  t.equal(res.headers['x-frame-options'], 'DENY');
  t.match(String(res.headers['content-security-policy']), /frame-ancestors 'none'/);
  t.equal(res.headers['cache-control'], 'no-store');
  t.equal(res.headers['referrer-policy'], 'no-referrer');
}
function refusedPage(t: Test, res: LightMyRequestResponse, why: RegExp) {
  t.equal(res.statusCode, 400);
  t.equal(res.headers.location, undefined, 'never redirected');
  t.match(String(res.headers['content-type']), /^text\/html/);
  t.match(res.body, why);
  securityHeaders(t, res);
}

t.test('registration', async (t) => {
  t.equal(client.token_endpoint_auth_method, 'none');
  t.same(client.grant_types, ['authorization_code', 'refresh_token']);
  t.same(client.response_types, ['code']);
  for (const [uris, what] of [
    [['http://app.example/cb'], 'non-loopback http'],
    [['/cb'], 'relative'],
    [['https://app.example/cb#frag'], 'fragment'],
    [[], 'empty'],
    [undefined, 'missing'],
    [['ftp://app.example/cb'], 'another scheme'],
  ] as const) {
    const res = await register({ redirect_uris: uris });
    t.equal(res.statusCode, 400, what);
    t.equal(res.json().error, 'invalid_redirect_uri', what);
  }
  for (const uri of ['http://localhost:3000/cb', 'http://127.0.0.1/cb', 'http://[::1]:9/cb', 'https://app.example/cb']) t.equal((await register({ redirect_uris: [uri] })).statusCode, 201, uri);
  const bad = await register({ redirect_uris: ['https://app.example/cb'], token_endpoint_auth_method: 'client_secret_basic' });
  t.equal(bad.statusCode, 400);
  t.equal(bad.json().error, 'invalid_client_metadata');
  t.equal((await register({ redirect_uris: ['https://app.example/cb'], grant_types: ['password'] })).json().error, 'invalid_client_metadata');
  t.equal((await register({ redirect_uris: ['https://app.example/cb'], client_name: 7 })).json().error, 'invalid_client_metadata');
  const long = await register({ redirect_uris: ['https://app.example/cb'], client_name: 'é'.repeat(300) });
  t.equal(long.statusCode, 201);
  t.equal(long.json().client_name, 'é'.repeat(256), 'client_name truncated to 256 characters');
});

t.test('authorize: refusals are 400 pages, never redirects', async (t) => {
  refusedPage(t, await app.inject({ method: 'GET', url: authorizeUrl({ code_challenge_method: 'plain' }) }), /S256/);
  refusedPage(t, await app.inject({ method: 'GET', url: authorizeUrl({ code_challenge_method: undefined }) }), /code_challenge_method/);
  refusedPage(t, await app.inject({ method: 'GET', url: authorizeUrl({ code_challenge: undefined }) }), /code_challenge is missing/);
  refusedPage(t, await app.inject({ method: 'GET', url: authorizeUrl({ code_challenge: 'short' }) }), /43 to 128/);
  refusedPage(t, await app.inject({ method: 'GET', url: authorizeUrl({ redirect_uri: 'https://evil.example/cb' }) }), /redirect_uri/);
  refusedPage(t, await app.inject({ method: 'GET', url: authorizeUrl({ redirect_uri: 'https://app.example/cb/' }) }), /redirect_uri/);
  refusedPage(t, await app.inject({ method: 'GET', url: authorizeUrl({ redirect_uri: 'https://app.example:8443/cb' }) }), /redirect_uri/);
  refusedPage(t, await app.inject({ method: 'GET', url: authorizeUrl({ redirect_uri: 'http://localhost:5000/cb/' }) }), /redirect_uri/);
  refusedPage(t, await app.inject({ method: 'GET', url: authorizeUrl({ client_id: 'ocl_nope' }) }), /not registered/);
  refusedPage(t, await app.inject({ method: 'GET', url: authorizeUrl({ client_id: other.client_id }) }), /redirect_uri/);
  refusedPage(t, await app.inject({ method: 'GET', url: authorizeUrl({ response_type: 'token' }) }), /response_type/);
  refusedPage(t, await app.inject({ method: 'GET', url: authorizeUrl({ scope: 'nonsense:read' }) }), /Unknown scope/);
  refusedPage(t, await app.inject({ method: 'GET', url: `${authorizeUrl({})}&state=again` }), /more than once/);
  const ok = await app.inject({ method: 'GET', url: authorizeUrl({ redirect_uri: 'http://localhost:5000/cb' }) });
  t.equal(ok.statusCode, 200, 'a loopback redirect on any port');
  securityHeaders(t, ok);
  t.match(String(ok.headers['set-cookie']), /HttpOnly; SameSite=Strict/);
});

async function openForm(over: Record<string, string | undefined> = {}) {
  const page = await app.inject({ method: 'GET', url: authorizeUrl(over) });
  t.equal(page.statusCode, 200);
  return readConsentPage(page);
}
const post = (fields: Record<string, string>, cookie?: string) =>
  app.inject({ method: 'POST', url: '/oauth/authorize', headers: { ...form, ...(cookie ? { cookie } : {}) }, payload: new URLSearchParams(fields).toString() });
/** The form with a pasted key, then Allow on the confirmation it leads to. */
const allow = async (fields: Record<string, string>, cookie: string) => confirmConsent(app, await post(fields, cookie), cookie);

t.test('consent: cookie, handle, key, scope', async (t) => {
  const a = await openForm();
  refusedPage(t, await post({ ...a.fields, api_key: org.testKey, decision: 'allow' }), /cookie/);
  refusedPage(t, await post({ ...a.fields, api_key: org.testKey, decision: 'allow' }, 'oauth_consent=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'), /cookie/);
  const done = await allow({ ...a.fields, api_key: org.testKey, decision: 'allow' }, a.cookie);
  t.equal(done.statusCode, 302, 'the form with its cookie succeeds (a refusal without the cookie did not consume the handle)');
  securityHeaders(t, done);
  const loc = new URL(String(done.headers.location));
  t.equal(`${loc.origin}${loc.pathname}`, 'https://app.example/cb');
  t.equal(loc.searchParams.get('state'), 's t&ate=1', 'state verbatim');
  t.equal(loc.searchParams.get('iss'), 'http://127.0.0.1:8080');
  t.match(loc.searchParams.get('code'), /^oac_/);
  refusedPage(t, await post({ ...a.fields, api_key: org.testKey, decision: 'allow' }, a.cookie), /already used/);

  const b = await openForm();
  refusedPage(t, await post({ ...b.fields, api_key: 'sk_test_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', decision: 'allow' }, b.cookie), /API key is not valid/);
  const c = await openForm();
  refusedPage(t, await post({ ...c.fields, api_key: 'not a key', decision: 'allow' }, c.cookie), /API key is not valid/);

  // A key holding only projects:read cannot grant projects:write.
  const narrow = (await app.inject({ method: 'POST', url: '/v1/api-keys', headers: org.owner, payload: { name: 'narrow', environment: 'test', scopes: ['projects:read'] } })).json();
  const d = await openForm({ scope: 'projects:write' });
  refusedPage(t, await post({ ...d.fields, api_key: narrow.key, decision: 'allow' }, d.cookie), /more than this API key holds/);
  const e = await openForm({ scope: '*' });
  refusedPage(t, await post({ ...e.fields, api_key: narrow.key, decision: 'allow' }, e.cookie), /more than this API key holds/);
  const f = await openForm({ scope: 'projects:read' });
  t.equal((await allow({ ...f.fields, api_key: narrow.key, decision: 'allow' }, f.cookie)).statusCode, 302, 'within the key');

  // A revoked key.
  const gone = (await app.inject({ method: 'POST', url: '/v1/api-keys', headers: org.owner, payload: { name: 'gone', environment: 'test' } })).json();
  await app.inject({ method: 'DELETE', url: `/v1/api-keys/${gone.id}`, headers: org.owner });
  const g = await openForm();
  refusedPage(t, await post({ ...g.fields, api_key: gone.key, decision: 'allow' }, g.cookie), /API key is not valid/);

  refusedPage(t, await post({ handle: 'x', api_key: org.testKey }, a.cookie), /incomplete/);
  refusedPage(t, await app.inject({ method: 'POST', url: '/oauth/authorize', payload: { handle: 'x' } }), /cannot be completed|incomplete/);
  // No pasted key in any event.
  const all = await ledger.store.readAll({ maxCount: 10_000 });
  t.notOk(JSON.stringify(all.map((x) => [x.data, x.metadata])).includes(org.testKey.slice(8)), 'the pasted key is never recorded');
});

t.test('a wrong key: the form again with the error beside the field; a valid one: the confirmation naming the organization and environment', async (t) => {
  const a = await openForm({ scope: 'projects:read mandates:write' });
  const wrong = await post({ ...a.fields, api_key: `sk_test_${'B'.repeat(32)}`, decision: 'allow' }, a.cookie);
  t.equal(wrong.statusCode, 400);
  t.equal(wrong.headers.location, undefined, 'never redirected');
  t.match(wrong.body, /<span class="field-error" id="api_key-error">.*This API key is not valid/);
  t.notOk(wrong.body.includes('start again'), 'not "start again"');
  t.match(wrong.body, /Read projects and their settings.*projects:read.*Read and change mandates and their cards.*mandates:write/s, 'the scopes in words beside their codes, as on the first page');
  const again = readConsentPage(wrong);
  t.not(again.fields.handle, a.fields.handle, 'a fresh form');
  const confirm = await post({ ...again.fields, api_key: org.liveKey, decision: 'allow' }, a.cookie);
  t.equal(confirm.statusCode, 200, confirm.body);
  t.match(confirm.body, /<td id="grant-org">Refuse<\/td>/, 'the organization');
  t.match(confirm.body, /<td id="grant-environment"><span class="badge badge-danger">Live<\/span> live data: real money moves<\/td>/, 'the environment');
  t.match(confirm.body, /<button type="submit" name="decision" value="allow" class="btn btn-primary">Allow<\/button>/, 'Allow is the primary button');
  t.notOk(confirm.body.includes(org.liveKey), 'the key is not on the page');
  const done = await confirmConsent(app, confirm, a.cookie);
  t.equal(done.statusCode, 302);
  t.match(new URL(String(done.headers.location)).searchParams.get('code'), /^oac_/);
});

async function code(clientId = client.client_id, redirect = 'https://app.example/cb') {
  const page = await openForm({ client_id: clientId, redirect_uri: redirect });
  const res = await allow({ ...page.fields, api_key: org.testKey, decision: 'allow' }, page.cookie);
  return new URL(String(res.headers.location)).searchParams.get('code')!;
}
const token = (fields: Record<string, string>) => app.inject({ method: 'POST', url: '/oauth/token', headers: form, payload: new URLSearchParams(fields).toString() });
function oauthError(t: Test, res: LightMyRequestResponse, error: string, status = 400) {
  t.equal(res.statusCode, status, error);
  t.equal(res.json().error, error);
  t.type(res.json().error_description, 'string');
  t.equal(res.headers['cache-control'], 'no-store');
}

t.test('token endpoint refusals', async (t) => {
  const exchange = (c: string, over: Record<string, string> = {}) => token({ grant_type: 'authorization_code', code: c, code_verifier: p.verifier, redirect_uri: 'https://app.example/cb', client_id: client.client_id, ...over });
  oauthError(t, await token({ grant_type: 'password', username: 'a', password: 'b', client_id: client.client_id }), 'unsupported_grant_type');
  oauthError(t, await token({ client_id: client.client_id }), 'invalid_request');
  oauthError(t, await token({ grant_type: 'authorization_code', client_id: client.client_id, code: 'x' }), 'invalid_request');
  oauthError(t, await exchange('oac_garbage'), 'invalid_grant');
  oauthError(t, await exchange(await code(), { client_id: 'ocl_unknown' }), 'invalid_client', 401);

  const c1 = await code();
  oauthError(t, await exchange(c1, { code_verifier: (await pkce()).verifier }), 'invalid_grant');
  oauthError(t, await exchange(c1, { code_verifier: 'short' }), 'invalid_grant');
  oauthError(t, await exchange(c1, { redirect_uri: 'https://app.example/cb/' }), 'invalid_grant');
  // A code presented by another (registered) client.
  oauthError(t, await exchange(c1, { client_id: other.client_id }), 'invalid_grant');
  const good = await exchange(c1);
  t.equal(good.statusCode, 200, 'the right verifier, client and redirect_uri (failed attempts did not consume the code)');
  t.equal(good.headers['cache-control'], 'no-store');
  t.same(Object.keys(good.json()).sort(), ['access_token', 'expires_in', 'refresh_token', 'scope', 'token_type']);
  t.equal(good.json().token_type, 'Bearer');
  t.equal(good.json().expires_in, 3600);

  // JSON is accepted too.
  const c2 = await code();
  const viaJson = await app.inject({ method: 'POST', url: '/oauth/token', payload: { grant_type: 'authorization_code', code: c2, code_verifier: p.verifier, redirect_uri: 'https://app.example/cb', client_id: client.client_id } });
  t.equal(viaJson.statusCode, 200);
  const rt = viaJson.json().refresh_token;
  oauthError(t, await token({ grant_type: 'refresh_token', refresh_token: rt, client_id: other.client_id }), 'invalid_grant');
  oauthError(t, await token({ grant_type: 'refresh_token', refresh_token: rt, client_id: client.client_id, scope: 'nonsense:x' }), 'invalid_scope');
  // Narrowing on refresh is allowed; widening past the grant is invalid_scope.
  const narrowed = await token({ grant_type: 'refresh_token', refresh_token: rt, client_id: client.client_id, scope: 'projects:read' });
  t.equal(narrowed.statusCode, 200);
  t.equal(narrowed.json().scope, 'projects:read');
  const c3page = await openForm({ scope: 'projects:read' });
  const c3 = new URL(String((await allow({ ...c3page.fields, api_key: org.testKey }, c3page.cookie)).headers.location)).searchParams.get('code')!;
  const small = (await exchange(c3)).json();
  oauthError(t, await token({ grant_type: 'refresh_token', refresh_token: small.refresh_token, client_id: client.client_id, scope: 'projects:write' }), 'invalid_scope');
  oauthError(t, await app.inject({ method: 'POST', url: '/oauth/token', headers: form, payload: `grant_type=refresh_token&refresh_token=${small.refresh_token}&refresh_token=x&client_id=${client.client_id}` }), 'invalid_request');
  // A body that cannot be read answers in the OAuth shape too (it was the API's envelope).
  oauthError(t, await app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/json' }, payload: '{"grant_type":"authorization_code"' }), 'invalid_request');
  oauthError(t, await app.inject({ method: 'POST', url: '/oauth/register', headers: { 'content-type': 'application/json' }, payload: '{"redirect_uris":' }), 'invalid_client_metadata');
  const typed = await app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'text/plain' }, payload: 'grant_type=x' });
  t.same([typed.statusCode, typed.json().error], [415, 'invalid_request'], 'an unreadable media type: its status, the OAuth shape');
});

t.test('a bad bearer on /v1 keeps the bare 401 and names the resource metadata', async (t) => {
  for (const auth of ['Bearer oat_AAAAAAAAAAAAAAAA_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', 'Bearer nope', undefined]) {
    const res = await app.inject({ method: 'GET', url: '/v1/whoami', headers: auth ? { authorization: auth } : {} });
    t.equal(res.statusCode, 401);
    t.same(res.json(), { error: 'unauthorized' });
    // RFC 9728's resource metadata first; then (RFC 6750) which mistake it was, with no error code when nothing was sent.
    t.match(res.headers['www-authenticate'], /^Bearer resource_metadata="http:\/\/127\.0\.0\.1:8080\/\.well-known\/oauth-protected-resource\/v1", (error="invalid_token", )?error_description="[^"]+"$/);
    t.equal(/error="invalid_token"/.test(String(res.headers['www-authenticate'])), auth !== undefined);
  }
  const meta = (await app.inject({ method: 'GET', url: '/.well-known/oauth-protected-resource/v1' })).json();
  t.equal(meta.resource, 'http://127.0.0.1:8080/v1');
  t.same(meta.authorization_servers, ['http://127.0.0.1:8080']);
});

t.test('rate limits per client address, and on key paste', async (t) => {
  const { app: limited } = await testApp(t, { oauth: { rateLimit: { perAddress: { burst: 3, perSecond: 0.001 }, keyPaste: { maxFailures: 2, windowMs: 3_600_000 } } } });
  const statuses = [];
  for (let i = 0; i < 4; i++) statuses.push((await limited.inject({ method: 'POST', url: '/oauth/register', payload: { redirect_uris: ['https://a.example/cb'] } })).statusCode);
  t.same(statuses, [201, 201, 201, 429]);
  const res = await limited.inject({ method: 'POST', url: '/oauth/register', payload: { redirect_uris: ['https://a.example/cb'] } });
  t.equal(res.json().error, 'rate_limited');
  t.ok(res.headers['retry-after']);
  const other = await limited.inject({ method: 'POST', url: '/oauth/register', remoteAddress: '127.0.0.9', payload: { redirect_uris: ['https://a.example/cb'] } });
  t.equal(other.statusCode, 201, 'another address has its own bucket');
  const tokenStatuses = [];
  for (let i = 0; i < 4; i++) tokenStatuses.push((await limited.inject({ method: 'POST', url: '/oauth/token', headers: form, payload: 'grant_type=password' })).statusCode);
  t.same(tokenStatuses, [400, 400, 400, 429]);

  // Key paste: a burst of wrong keys, then 429 (a page), even with a fresh form.
  const { app: paste } = await testApp(t, { oauth: { rateLimit: { perAddress: { burst: 1000, perSecond: 1000 }, keyPaste: { maxFailures: 2, windowMs: 3_600_000 } } } });
  const c = (await paste.inject({ method: 'POST', url: '/oauth/register', payload: { redirect_uris: ['https://a.example/cb'] } })).json();
  const url = `/oauth/authorize?${new URLSearchParams({ client_id: c.client_id, redirect_uri: 'https://a.example/cb', response_type: 'code', code_challenge: p.challenge, code_challenge_method: 'S256' })}`;
  const got: number[] = [];
  for (let i = 0; i < 3; i++) got.push((await consent(paste, `http://x${url}`, 'sk_test_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA')).statusCode);
  t.same(got, [400, 400, 429]);
});

t.test('the consent pages under random input: always a page, never a 5xx', async (t) => {
  const fc = (await import('fast-check')).default;
  const value = fc.oneof(fc.string({ maxLength: 30 }), fc.constantFrom('', 'S256', 'plain', 'code', client.client_id, 'https://app.example/cb', 'http://localhost:1/cb', p.challenge, '%00', '<script>'));
  const params = fc.dictionary(fc.constantFrom('client_id', 'redirect_uri', 'response_type', 'code_challenge', 'code_challenge_method', 'scope', 'state', 'handle', 'api_key', 'decision', 'x'), value, { maxKeys: 8 });
  const contentType = fc.constantFrom('application/x-www-form-urlencoded', 'application/json', 'text/plain', '');
  await fc.assert(
    fc.asyncProperty(params, params, contentType, fc.boolean(), async (q, b, ct, withCookie) => {
      const get = await app.inject({ method: 'GET', url: `/oauth/authorize?${new URLSearchParams(q)}` });
      const body = ct === 'application/json' ? JSON.stringify(b) : new URLSearchParams(b).toString();
      const postRes = await app.inject({ method: 'POST', url: '/oauth/authorize', headers: { ...(ct ? { 'content-type': ct } : {}), ...(withCookie ? { cookie: 'oauth_consent=x' } : {}) }, payload: body });
      for (const res of [get, postRes]) {
        if (res.statusCode >= 500) throw new Error(`${res.statusCode}: ${res.body.slice(0, 200)}`);
        if (res.statusCode === 302) throw new Error('a random request was redirected');
        if (!String(res.headers['content-type']).startsWith('text/html')) throw new Error(`not a page: ${res.statusCode} ${res.headers['content-type']}`);
        if (res.headers['x-frame-options'] !== 'DENY') throw new Error('no security headers');
      }
    }),
    { numRuns: Number(process.env.FUZZ_RUNS ?? '50') },
  );
  t.pass('pages only');
});
