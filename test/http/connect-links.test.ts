import t from 'tap';
import { linkIdOf } from '../../commands/connect-link.ts';
import { decodeCredential } from '../../src/providers/credentials.ts';
import { ProviderTools } from '../../src/providers/tools.ts';
import { bootstrapOrg, testApp, testClock } from '../helpers/app.ts';

// OAuth connect links end to end against the sandbox provider's authorization
// server (contahub): start, the consent page driven over real HTTP, our
// callback (PKCE code exchange), a `connected` connection whose token works on
// a tool call through ProviderTools and is refreshed when expired; the link
// expires at ten minutes (injected clock) and is single use; refusals write
// nothing.

const clock = testClock();
const { app, ledger, vault, sandboxProviders, providerRuntime } = await testApp(t, { providers: true, now: clock.now });
const sb = sandboxProviders!;
const org = await bootstrapOrg(app, 'Links');
const other = await bootstrapOrg(app, 'Elsewhere');
const REDIRECT = 'https://app.example.com/connected';
const tools = new ProviderTools(ledger.db, vault, providerRuntime, { store: ledger.store, now: clock.now, waitFor: (p, ms) => ledger.readSide.waitFor(p, ms) });

async function written() {
  const { rows } = await ledger.db.query<{ n: number }>('SELECT count(*)::int AS n FROM vault_secrets');
  return { head: await ledger.store.headPosition(), vault: rows[0]!.n };
}
const start = (payload: Record<string, unknown>, url = '/v1/connections/start', headers = org.key) => app.inject({ method: 'POST', url, headers, payload });

/** The person on the provider's consent page, over real HTTP: reads the form, fills the e-mail, presses a button. */
async function consent(authorizeUrl: string, decision: 'allow' | 'deny', email = 'ana@contahub.example'): Promise<string> {
  const page = await fetch(authorizeUrl);
  const html = await page.text();
  if (page.status !== 200) throw new Error(`consent page ${page.status}: ${html}`);
  const form = new URLSearchParams();
  for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) form.set(m[1]!, m[2]!.replace(/&#(\d+);/g, (_x, n: string) => String.fromCharCode(Number(n))));
  form.set('email', email);
  form.set('decision', decision);
  const action = new URL(/<form method="post" action="([^"]+)"/.exec(html)![1]!, authorizeUrl);
  const r = await fetch(action, { method: 'POST', body: form, redirect: 'manual' });
  if (r.status !== 302) throw new Error(`consent submit ${r.status}: ${await r.text()}`);
  return r.headers.get('location')!;
}
/** Follows the provider's redirect into our callback (the app runs in-process). */
const callback = (location: string) => {
  const u = new URL(location);
  return app.inject({ method: 'GET', url: `${u.pathname}${u.search}` });
};

t.test('start: shape, ten minutes, the sandbox authorize URL with PKCE; refusals write nothing', async (t) => {
  const before = clock.now().getTime();
  const r = await start({ redirect_uri: REDIRECT, server_id: 'contahub', user_id: 'ana' });
  t.equal(r.statusCode, 200, r.body);
  const b = r.json();
  t.match(b, { authorize_url: String, link_token: /^lt_/, expires_at: String });
  const ttl = Date.parse(b.expires_at) - before;
  t.ok(ttl >= 600_000 && ttl < 601_000, `expires_at is ten minutes after the call (${ttl} ms)`);
  const u = new URL(b.authorize_url);
  t.equal(`${u.origin}${u.pathname}`, `${sb.url}/contahub/oauth/authorize`, 'the sandbox provider’s authorization server');
  t.equal(u.searchParams.get('state'), b.link_token, 'the link token is the OAuth state');
  t.equal(u.searchParams.get('code_challenge_method'), 'S256');
  t.equal(u.searchParams.get('redirect_uri'), 'http://127.0.0.1:8080/v1/connections/callback');
  t.equal(u.searchParams.get('scope'), 'ledger.read ledger.write', 'the catalog scopes by default');
  const alias = await start({ redirect_uri: REDIRECT, server_id: 'contahub', user_id: 'ana', scopes: 'ledger.read' }, '/v1/connect/start');
  t.equal(alias.statusCode, 200, 'POST /v1/connect/start is the same operation');
  t.equal(new URL(alias.json().authorize_url).searchParams.get('scope'), 'ledger.read');

  for (const [payload, status, code] of [
    [{ redirect_uri: REDIRECT, server_id: 'acme-payments', user_id: 'ana' }, 404, 'oauth_not_configured'],
    [{ redirect_uri: REDIRECT, server_id: 'nope', user_id: 'ana' }, 404, 'server_unknown'],
    [{ redirect_uri: REDIRECT, server_id: 'contahub', user_id: 'ana', scopes: 'ledger.read admin' }, 400, 'invalid_scope'],
    [{ redirect_uri: REDIRECT, server_id: 'contahub' }, 400, 'invalid_body'],
    [{ redirect_uri: 'not a uri', server_id: 'contahub', user_id: 'ana' }, 400, 'invalid_body'],
    [{ server_id: 'contahub', user_id: 'ana' }, 400, 'invalid_body'],
  ] as const) {
    const w = await written();
    const res = await start(payload);
    t.equal(res.statusCode, status, `${code}: ${status}`);
    t.equal(res.json().error.code, code);
    t.same(await written(), w, `${code}: nothing written`);
  }
});

t.test('500 when the platform has no OAuth client for the provider', async (t) => {
  const bare = await testApp(t, {});
  const o = await bootstrapOrg(bare.app, 'Bare');
  const r = await bare.app.inject({ method: 'POST', url: '/v1/connections/start', headers: o.key, payload: { redirect_uri: REDIRECT, server_id: 'contahub', user_id: 'ana' } });
  t.equal(r.statusCode, 500);
  t.equal(r.json().error.code, 'oauth_client_not_configured');
});

t.test('a live link presents the configured client (PROVIDER_OAUTH_CLIENTS) at the real provider; a test link the sandbox\'s own', async (t) => {
  const configured = { client_id: 'contahub-platform-client', client_secret: 'not-the-sandbox-secret' };
  const f = await testApp(t, { providers: true, providerOAuthClients: { contahub: configured } });
  const o = await bootstrapOrg(f.app, 'Configured');
  const body = { redirect_uri: REDIRECT, server_id: 'contahub', user_id: 'ana' };
  const live = await f.app.inject({ method: 'POST', url: '/v1/connections/start', headers: { authorization: `Bearer ${o.liveKey}` }, payload: body });
  t.equal(live.statusCode, 200, live.body);
  const liveUrl = new URL(live.json().authorize_url);
  t.equal(liveUrl.origin + liveUrl.pathname, 'https://auth.contahub.example/oauth/authorize');
  t.equal(liveUrl.searchParams.get('client_id'), configured.client_id, 'the sandbox client never reaches the real provider');
  const test = await f.app.inject({ method: 'POST', url: '/v1/connections/start', headers: o.key, payload: body });
  t.equal(test.statusCode, 200, test.body);
  const testUrl = new URL(test.json().authorize_url);
  t.equal(testUrl.origin, f.sandboxProviders!.url);
  t.equal(testUrl.searchParams.get('client_id'), f.providerRuntime.sandboxOAuthClients!.contahub!.client_id);
});

t.test('link → consent → callback → a connected connection whose token works, refreshed when expired; the link is single use', async (t) => {
  const link = (await start({ redirect_uri: REDIRECT, server_id: 'contahub', user_id: 'ana' })).json();
  const location = await consent(link.authorize_url, 'allow');
  t.match(location, /^http:\/\/127\.0\.0\.1:8080\/v1\/connections\/callback\?/, 'the provider redirects to our callback');
  t.equal(new URL(location).searchParams.get('state'), link.link_token);
  const cb = await callback(location);
  t.equal(cb.statusCode, 302, cb.body);
  const back = new URL(cb.headers.location as string);
  t.equal(`${back.origin}${back.pathname}`, REDIRECT, 'redirected to the link’s redirect_uri');
  t.equal(back.searchParams.get('status'), 'connected');
  const id = back.searchParams.get('connection_id')!;
  const c = (await app.inject({ method: 'GET', url: `/v1/connections/${id}`, headers: org.key })).json();
  t.match(c, { id, server_id: 'contahub', auth_type: 'oauth', user_id: 'ana', status: 'connected', metadata: { scope: 'ledger.read ledger.write', refresh_ref: /^vault_/, account_id: /^acct_/ } });
  t.equal((await app.inject({ method: 'GET', url: `/v1/connections/${id}`, headers: other.key })).statusCode, 404, 'another organization does not see it');
  const linkEvents = (await ledger.store.readAll({ maxCount: 100_000 })).filter((e) => e.type.startsWith('connect_link.') && (e.data as { link_id: string }).link_id === linkIdOf(link.link_token));
  t.same(linkEvents.map((e) => e.type), ['connect_link.started', 'connect_link.consumed', 'connect_link.completed'], 'each step is an event');

  // The token set is in the vault; no event, response or the connection row carries it.
  const stored = decodeCredential((await vault.get(org.orgId, c.metadata.refresh_ref))!) as Record<string, string>;
  t.match(stored, { access_token: /^at_/, refresh_token: /^rt_/, environment: 'test' });
  const texts = (await ledger.store.readAll({ maxCount: 100_000 })).map((e) => JSON.stringify(e.data)).join('\n') + cb.body + JSON.stringify(c) + String(cb.headers.location);
  t.notOk(texts.includes(stored.access_token!) || texts.includes(stored.refresh_token!), 'no token in an event, a response or a redirect');

  // The token works on a tool call through ProviderTools.
  const tenant = { orgId: org.orgId, projectId: org.projectId };
  const ok = await tools.execute({ tenant, environment: 'test', serverId: 'contahub', toolName: 'list_accounts', input: {}, userId: 'ana' });
  t.match(ok, { ok: true, status: 200, connection_id: id, output: { data: [{ code: '1.1' }] } });
  t.same(sb.oauth.grants, ['authorization_code'], 'no refresh while the token is fresh');

  // Reuse of the link token: refused, nothing written.
  const w = await written();
  const again = await callback(location);
  t.equal(again.statusCode, 409);
  t.equal(again.json().error.code, 'link_token_used');
  t.same(await written(), w, 'the reused link token wrote nothing');

  // Two hours on: the access token has expired at the provider; the call refreshes first.
  clock.advance(2 * 3600_000);
  const refreshed = await tools.execute({ tenant, environment: 'test', serverId: 'contahub', toolName: 'list_accounts', input: {}, userId: 'ana' });
  t.match(refreshed, { ok: true, status: 200, connection_id: id }, 'the call succeeds with a refreshed token');
  t.same(sb.oauth.grants, ['authorization_code', 'refresh_token'], 'the refresh grant was used');
  const after = (await app.inject({ method: 'GET', url: `/v1/connections/${id}`, headers: org.key })).json();
  t.not(after.metadata.refresh_ref, c.metadata.refresh_ref, 'the new token set has its own vault row');
  t.ok(Date.parse(after.metadata.token_expires_at) > clock.now().getTime(), 'the new access token expires in the future');
  t.equal(await vault.get(org.orgId, c.metadata.refresh_ref), undefined, 'the old token set is gone from the vault');
  const rotations = (await ledger.store.readStream(`connection-${id}`)).map((e) => e.type);
  t.same(rotations, ['connection.created', 'connection.credential_rotated'], 'the refresh is an event');

  // A second link for the same user updates the same connection in place.
  const link2 = (await start({ redirect_uri: REDIRECT, server_id: 'contahub', user_id: 'ana', scopes: 'ledger.read' })).json();
  const cb2 = await callback(await consent(link2.authorize_url, 'allow'));
  t.equal(new URL(cb2.headers.location as string).searchParams.get('connection_id'), id, 'the live connection is updated, not duplicated');
  t.equal((await app.inject({ method: 'GET', url: `/v1/connections/${id}`, headers: org.key })).json().metadata.scope, 'ledger.read');
});

t.test('a callback after ten minutes is refused and writes nothing; in time it succeeds', async (t) => {
  const late = (await start({ redirect_uri: REDIRECT, server_id: 'contahub', user_id: 'bia' })).json();
  const lateLocation = await consent(late.authorize_url, 'allow', 'bia@contahub.example');
  const onTime = (await start({ redirect_uri: REDIRECT, server_id: 'contahub', user_id: 'caio' })).json();
  const onTimeLocation = await consent(onTime.authorize_url, 'allow', 'caio@contahub.example');
  clock.advance(9 * 60_000 + 30_000);
  const ok = await callback(onTimeLocation);
  t.equal(new URL(ok.headers.location as string).searchParams.get('status'), 'connected', 'nine and a half minutes: still valid');
  clock.advance(30_000);
  const w = await written();
  const r = await callback(lateLocation);
  t.equal(r.statusCode, 410);
  t.equal(r.json().error.code, 'link_expired');
  t.same(await written(), w, 'nothing written');
  t.equal((await app.inject({ method: 'GET', url: '/v1/connections?user_id=bia', headers: org.key })).json().connections.length, 0, 'no connection');
});

t.test('the person denies: the link fails, redirected with error, no connection; unknown state refused', async (t) => {
  const link = (await start({ redirect_uri: REDIRECT, server_id: 'contahub', user_id: 'dora' })).json();
  const r = await callback(await consent(link.authorize_url, 'deny'));
  t.equal(r.statusCode, 302);
  const back = new URL(r.headers.location as string);
  t.equal(back.searchParams.get('error'), 'access_denied');
  t.equal((await app.inject({ method: 'GET', url: '/v1/connections?user_id=dora', headers: org.key })).json().connections.length, 0);
  const w = await written();
  const unknown = await app.inject({ method: 'GET', url: '/v1/connections/callback?state=lt_forged&code=x' });
  t.equal(unknown.statusCode, 400);
  t.equal(unknown.json().error.code, 'link_token_unknown');
  t.same(await written(), w);
});

t.test('the sandbox token endpoint enforces PKCE and single-use codes', async (t) => {
  const link = (await start({ redirect_uri: REDIRECT, server_id: 'contahub', user_id: 'eva' })).json();
  const code = new URL(await consent(link.authorize_url, 'allow', 'eva@contahub.example')).searchParams.get('code')!;
  const client = providerRuntime.sandboxOAuthClients!.contahub!;
  const form = { grant_type: 'authorization_code', code, redirect_uri: 'http://127.0.0.1:8080/v1/connections/callback', client_id: client.client_id, client_secret: client.client_secret, code_verifier: 'x'.repeat(50) };
  const bad = await fetch(`${sb.url}/contahub/oauth/token`, { method: 'POST', body: new URLSearchParams(form) });
  t.equal(bad.status, 400);
  t.match(await bad.json(), { error: 'invalid_grant', error_description: /PKCE/ });
  const reused = await fetch(`${sb.url}/contahub/oauth/token`, { method: 'POST', body: new URLSearchParams(form) });
  t.match(await reused.json(), { error: 'invalid_grant', error_description: /used/ }, 'a code is single use, even after a failed exchange');
  const page = await fetch(link.authorize_url.replace(/code_challenge=[^&]+/, 'code_challenge=short'));
  t.equal(page.status, 400, 'an authorize request without a valid S256 challenge is refused on the page, not redirected');
});
