import t from 'tap';
import { Catalog, AUTH_TYPES } from '../../src/providers/catalog.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';

// The catalog routes and verify-connection's whole matrix, against the
// sandbox providers and their fault modes.

const { app, sandboxProviders } = await testApp(t, { providers: true, providerTimeoutMs: 1_500 });
const sb = sandboxProviders!;
const org = await bootstrapOrg(app, 'Prov');
const live = { authorization: `Bearer ${org.liveKey}` };
const get = (url: string, headers = org.key) => app.inject({ method: 'GET', url, headers });
const verify = (slug: string, headers = org.key) => app.inject({ method: 'POST', url: `/v1/providers/${slug}/verify-connection`, headers });

t.test('the shipped catalog covers every auth type and validates', async (t) => {
  const c = Catalog.load();
  t.same([...new Set(c.providers.map((p) => p.auth_type))].sort(), [...AUTH_TYPES].sort(), 'every auth_type has a provider');
  t.ok(c.providers.every((p) => p.auth_type === 'api_key' && p.tools.length === 0 ? p.id === 'old-erp' : p.tools.length > 0), 'providers carry tools');
  t.throws(() => Catalog.parse({ version: 1, recipes: [], providers: [{ ...c.get('acme-payments'), fields: [] }] }), 'an api_key provider without its field is refused');
  t.throws(() => Catalog.parse({ version: 1, recipes: [], providers: [{ ...c.get('clima'), tools: [{ name: 'x', description: 'd', request: { method: 'GET', path: '/' }, input_schema: { type: 'object', oneOf: [] } }] }] }), 'a schema outside the subset is refused');
  t.throws(() => Catalog.parse({ version: 2, recipes: [], providers: [] }), 'an unknown catalog version is refused');
});

t.test('GET /v1/providers filters by category, country and q', async (t) => {
  const all = (await get('/v1/providers')).json();
  t.equal(all.total, all.servers.length);
  t.equal(all.filtered, all.total);
  t.ok(all.total >= 9);
  const br = (await get('/v1/providers?country=BR&category=accounting')).json();
  t.same(br.servers.map((s: { id: string }) => s.id), ['contahub']);
  t.equal(br.total, all.total, 'total counts the whole catalog');
  t.equal(br.filtered, 1);
  const q = (await get('/v1/providers?q=charge')).json();
  t.same(q.servers.map((s: { id: string }) => s.id), ['acme-payments'], 'q matches tool names too');
  t.equal((await get('/v1/providers?q=' + 'x'.repeat(300))).statusCode, 400);
  const acme = all.servers.find((s: { id: string }) => s.id === 'acme-payments');
  t.match(acme, { auth_type: 'api_key', tools_count: 3, sandbox_available: true, sandbox_url: `${sb.url}/acme-payments`, engine_provisionable: true, engine_status: 'available', provider_logo_fallback_url: 'https://acme-payments.example/favicon.ico' });
  const cdp = all.servers.find((s: { id: string }) => s.id === 'cdp-wallet');
  t.match(cdp, { sandbox_available: false, sandbox_url: null, provider_homepage: null });
  t.equal((await get('/v1/providers', {})).statusCode, 401);
});

t.test('GET /v1/providers/{slug} and its auth schema', async (t) => {
  const p = (await get('/v1/providers/ledgerly')).json();
  t.same(p.tools.map((x: { name: string }) => x.name), ['post_entry', 'list_entries']);
  t.equal(p.tools[0].input_schema.type, 'object');
  t.equal((await get('/v1/providers/nope')).statusCode, 404);
  const s = (await get('/v1/providers/kambio/auth-schema')).json();
  t.same(s, {
    server_id: 'kambio',
    auth_type: 'two_header',
    environment: 'test',
    base_url: `${sb.url}/kambio`,
    fields: [
      { name: 'client_id', kind: 'text', label: 'Client id', header_name: 'x-client-id' },
      { name: 'client_secret', kind: 'secret', label: 'Client secret', header_name: 'x-client-secret' },
    ],
    oauth_authorize_url: null,
  });
  const l = (await get('/v1/providers/kambio/auth-schema', live)).json();
  t.same([l.environment, l.base_url], ['live', 'https://api.kambio.example'], 'environment from the credential');
  t.equal((await get('/v1/providers/old-erp/auth-schema')).json().base_url, '', 'no endpoint row: empty base_url');
  t.equal((await get('/v1/providers/contahub/auth-schema')).json().oauth_authorize_url, 'https://auth.contahub.example/oauth/authorize');
  t.equal((await get('/v1/providers/nope/auth-schema')).statusCode, 404);
});

t.test('verify-connection: the matrix', async (t) => {
  const conn = await app.inject({ method: 'POST', url: '/v1/connections', headers: org.key, payload: { server_id: 'acme-payments', secret: sb.issueCredential('acme-payments', 'Matrix Ltd') } });
  t.equal(conn.statusCode, 201);
  const ok = await verify('acme-payments');
  t.equal(ok.statusCode, 200);
  t.match(ok.json(), { ok: true, provider: 'acme-payments', account: { id: /^acct_/, name: 'Matrix Ltd', extras: { plan: 'sandbox', country: 'BR' } }, latency_ms: Number });
  const generic = await verify('clima');
  t.same([generic.statusCode, 'account' in generic.json()], [200, false], 'the generic probe carries no account');

  const rows: [string, string | null, number, Record<string, unknown>][] = [
    ['5xx', null, 502, { ok: false, error: 'provider_unreachable', status: 503 }],
    ['401', null, 401, { ok: false, error: 'credential_rejected', detail: 'API key revoked by the provider' }],
    ['redirect', null, 409, { ok: false, error: 'redirect_not_followed', location: 'https://login.acme-payments.example/moved' }],
    ['slow', null, 502, { ok: false, error: 'provider_unreachable' }],
  ];
  for (const [fault, , status, body] of rows) {
    sb.faults.set('acme-payments', fault as 'slow');
    const r = await verify('acme-payments');
    sb.faults.delete('acme-payments');
    sb.releaseSlow();
    t.equal(r.statusCode, status, `fault ${fault}: ${status}`);
    t.match(r.json(), body, `fault ${fault}: body`);
    if (fault === 'slow') t.notOk('status' in r.json(), 'a timeout has no status member (the provider did not answer)');
    t.match(r.json(), { request_id: String });
  }
  // A wrong stored credential: the provider's own words.
  const otherProject = (await app.inject({ method: 'POST', url: '/v1/projects', headers: org.key, payload: { name: 'P2', slug: 'p2' } })).json();
  const p2 = { ...org.key, 'x-svc-project': otherProject.id };
  await app.inject({ method: 'POST', url: '/v1/connections', headers: p2, payload: { server_id: 'acme-payments', secret: 'acme_sk_not_a_real_key' } });
  const rej = await verify('acme-payments', p2);
  t.same([rej.statusCode, rej.json().error, rej.json().detail], [401, 'credential_rejected', 'Invalid API key provided']);

  const none = await verify('kambio');
  t.same([none.statusCode, none.json().error], [424, 'not_connected']);
  const unsupported = await verify('cdp-wallet');
  t.same([unsupported.statusCode, unsupported.json().error], [501, 'verify_unsupported']);
  const missing = await verify('old-erp');
  t.same([missing.statusCode, missing.json().error], [503, 'endpoint_missing']);
  const liveMissing = await verify('cdp-wallet', live);
  t.equal(liveMissing.statusCode, 501);
  const unknown = await verify('no-such-provider');
  t.equal(unknown.statusCode, 404);
  t.same(unknown.json(), { error: 'not_found', server_id: 'no-such-provider' }, 'bare shape, no ok key');
  const recipe = await verify('legacy-shop');
  t.equal(recipe.statusCode, 404);
  t.same(recipe.json(), { ok: false, error: 'server_unknown', server_id: 'legacy-shop' }, 'a recipe without a catalog row');
  // A live key reaches the provider's real base URL through the guarded client: here it cannot resolve.
  await app.inject({ method: 'POST', url: '/v1/connections', headers: live, payload: { server_id: 'kambio', secret: { client_id: 'a', client_secret: 'b' } } });
  const liveR = await verify('kambio', live);
  t.same([liveR.statusCode, liveR.json().error, 'status' in liveR.json()], [502, 'provider_unreachable', false]);
});

t.test('verify-connection per auth type over real authentication', async (t) => {
  for (const slug of ['nota-facil', 'banco-seguro', 'shipfast', 'kambio']) {
    await app.inject({ method: 'POST', url: '/v1/connections', headers: org.key, payload: { server_id: slug, secret: sb.issueCredential(slug) } });
    const r = await verify(slug);
    t.equal(r.statusCode, 200, `${slug}: ${r.body}`);
  }
  const mtls = sb.seen.filter((s) => s.slug === 'banco-seguro');
  t.ok(mtls.length > 0, 'the mTLS provider was reached over HTTPS with a client certificate');
  const jwt = sb.seen.find((s) => s.slug === 'shipfast');
  t.match(jwt?.headers.authorization, /^Bearer [\w-]+\.[\w-]+\.[\w-]+$/, 'an ES256 JWT');
});
