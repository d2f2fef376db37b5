import t from 'tap';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { consent, pkce } from '../helpers/oauth.ts';

// An access token is its key, narrowed: the same organization, project
// binding and environment. Another organization's resources answer exactly
// as absent ones.

const { app } = await testApp(t, { oauth: { rateLimit: { perAddress: { burst: 10_000, perSecond: 1_000 }, keyPaste: { maxFailures: 10_000, windowMs: 1_000 } } } });
const a = await bootstrapOrg(app, 'Alpha');
const b = await bootstrapOrg(app, 'Beta');
const client = (await app.inject({ method: 'POST', url: '/oauth/register', payload: { redirect_uris: ['http://127.0.0.1/cb'] } })).json();

async function tokenFor(apiKey: string, scope?: string): Promise<Record<string, string>> {
  const p = await pkce();
  const q = new URLSearchParams({ client_id: client.client_id, redirect_uri: 'http://127.0.0.1/cb', response_type: 'code', code_challenge: p.challenge, code_challenge_method: 'S256', ...(scope ? { scope } : {}) });
  const res = await consent(app, `http://127.0.0.1:8080/oauth/authorize?${q}`, apiKey);
  if (res.statusCode !== 302) throw new Error(res.body);
  const code = new URL(String(res.headers.location)).searchParams.get('code')!;
  const tok = await app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: p.verifier, redirect_uri: 'http://127.0.0.1/cb', client_id: client.client_id }).toString() });
  if (tok.statusCode !== 200) throw new Error(tok.body);
  return { authorization: `Bearer ${tok.json().access_token}` };
}

t.test("organization A's token never sees B", async (t) => {
  const bConsumer = (await app.inject({ method: 'POST', url: '/v1/consumers', headers: b.key, payload: {} })).json();
  const aConsumer = (await app.inject({ method: 'POST', url: '/v1/consumers', headers: a.key, payload: {} })).json();
  const aToken = await tokenFor(a.testKey);
  const who = (await app.inject({ method: 'GET', url: '/v1/whoami', headers: aToken })).json();
  t.equal(who.org_id, a.orgId);
  t.equal((await app.inject({ method: 'GET', url: `/v1/consumers/${aConsumer.id}`, headers: aToken })).statusCode, 200, 'its own');
  const theirs = await app.inject({ method: 'GET', url: `/v1/consumers/${bConsumer.id}`, headers: aToken });
  const absent = await app.inject({ method: 'GET', url: `/v1/consumers/${bConsumer.id.slice(0, -3)}zzz`, headers: aToken });
  t.equal(theirs.statusCode, 404);
  t.same({ ...theirs.json(), request_id: '' }, { ...absent.json(), request_id: '' }, 'exactly as an absent one');
  t.equal((await app.inject({ method: 'GET', url: '/v1/projects', headers: { ...aToken, 'x-svc-project': b.projectId } })).statusCode, 403, "B's project header is refused as for A's key");
});

t.test("a project-bound key's token stays bound", async (t) => {
  const p2 = (await app.inject({ method: 'POST', url: '/v1/projects', headers: a.key, payload: { name: 'Second', slug: 'second' } })).json();
  const bound = (await app.inject({ method: 'POST', url: '/v1/api-keys', headers: a.owner, payload: { name: 'bound', environment: 'test', project_id: p2.id } })).json();
  const tok = await tokenFor(bound.key);
  const who = (await app.inject({ method: 'GET', url: '/v1/whoami', headers: tok })).json();
  t.equal(who.project_id, p2.id);
  const elsewhere = await app.inject({ method: 'GET', url: '/v1/whoami', headers: { ...tok, 'x-svc-project': a.projectId } });
  const keyElsewhere = await app.inject({ method: 'GET', url: '/v1/whoami', headers: { authorization: `Bearer ${bound.key}`, 'x-svc-project': a.projectId } });
  t.equal(elsewhere.statusCode, 403);
  t.same(elsewhere.json(), keyElsewhere.json(), 'the same refusal as the key');
  // The organization-scoped family refuses a project-bound key; so its token.
  const orgScoped = await app.inject({ method: 'GET', url: `/v1/orgs/${a.orgId}/agents`, headers: tok });
  t.equal(orgScoped.statusCode, (await app.inject({ method: 'GET', url: `/v1/orgs/${a.orgId}/agents`, headers: { authorization: `Bearer ${bound.key}` } })).statusCode);
});

t.test("a test key's token stays in test; a live key's in live", async (t) => {
  const testTok = await tokenFor(a.testKey);
  const liveTok = await tokenFor(a.liveKey);
  t.equal((await app.inject({ method: 'GET', url: '/v1/whoami', headers: testTok })).json().environment, 'test');
  t.equal((await app.inject({ method: 'GET', url: '/v1/whoami', headers: liveTok })).json().environment, 'live');
});

t.test('a token never reaches the service-auth subtree', async (t) => {
  const tok = await tokenFor(a.testKey);
  const res = await app.inject({ method: 'GET', url: '/v1/api-keys', headers: tok });
  t.equal(res.statusCode, 401);
  t.same(res.json(), { error: 'unauthorized' });
});

t.test('an access token acts as its key on the routes that also take the platform credential (sessions, connections)', async (t) => {
  const token = await tokenFor(a.testKey);
  const missing = await app.inject({ method: 'GET', url: '/v1/sessions/ses_0000000000000000', headers: token });
  t.equal(missing.statusCode, 404, 'authenticated: the session is simply absent');
  const list = await app.inject({ method: 'GET', url: '/v1/connections', headers: token });
  t.equal(list.statusCode, 200);
  const narrow = await tokenFor(a.testKey, 'projects:read');
  const refused = await app.inject({ method: 'GET', url: '/v1/sessions/ses_0000000000000000', headers: narrow });
  t.equal(refused.statusCode, 403, 'a scope the grant lacks');
  t.equal(refused.json().error, 'forbidden');
  const forged = await app.inject({ method: 'GET', url: '/v1/sessions/ses_0000000000000000', headers: { authorization: `${token.authorization!.slice(0, -4)}zzzz` } });
  t.equal(forged.statusCode, 401);
  t.same(forged.json(), { error: 'unauthorized' });
});
