import t from 'tap';
import { bootstrapOrg, checkedApp, platform, testApp } from '../helpers/app.ts';
import { startDeadUpstream, startUpstream } from '../helpers/mcp-upstream.ts';
import { freeLoopbackPort } from '../../src/postgres/embedded.ts';
import { SEAL_HEADROOM_BYTES } from '../../src/limits.ts';

// Monetized MCP servers: validation against real SDK upstreams (and dead and
// slow ones), registration with the global slug claim, prices, provisioned
// addresses, the vault, the listing patch, the 403 family and tenancy.

const timeouts = { connectMs: 10_000, listToolsMs: 10_000, callMs: 10_000 };
const { app, ledger } = await testApp(t, { mcp: { timeouts, gatewayUrl: 'https://gw.example.com' } });
const org = await bootstrapOrg(app, 'Merchant');
const other = await bootstrapOrg(app, 'Other');
const upstream = await startUpstream();
const slow = await startUpstream('slow_list');
const dead = await startDeadUpstream();
t.teardown(async () => {
  await upstream.close();
  await slow.close();
  await dead.close();
});

const admin = (o: typeof org) => ({ ...o.key, 'x-svc-user': o.ownerId });
const call = (method: string, url: string, o: typeof org, payload?: unknown, headers: Record<string, string> = admin(o)) =>
  app.inject({ method: method as 'POST', url, headers, ...(payload !== undefined ? { payload: payload as object } : {}) });
const body = (slug: string, extra: Record<string, unknown> = {}) => ({
  consumer_id: 'cons_1',
  name: 'Weather tools',
  slug,
  upstream_url: upstream.url,
  upstream_auth: { header: 'x-merchant-key', value: 'merchant-secret-123' },
  platform_fee_bps: 250,
  tools: [
    { tool_name: 'echo', description: 'Echo', price: '0.010000' },
    { tool_name: 'forecast', description: 'Forecast', price: '1.5' },
  ],
  ...extra,
});

t.test('validate lists the tools of a real MCP upstream; dead, slow and bad upstreams each give their error', async (t) => {
  const ok = await call('POST', '/v1/mcp-servers/validate', org, { upstream_url: upstream.url, auth: { header: 'x-merchant-key', value: 'k' } });
  t.equal(ok.statusCode, 200, ok.body);
  t.same(ok.json(), { valid: true, count: 2, tools: [{ name: 'echo', description: 'Echoes its text' }, { name: 'forecast', description: 'Weather for a city' }] });
  t.equal(upstream.authSeen.at(-1), 'k', 'the auth header reached the upstream');

  timeouts.connectMs = 300;
  const d = await call('POST', '/v1/mcp-servers/validate', org, { upstream_url: dead.url });
  t.same(d.json(), { valid: false, count: 0, tools: [], error: 'connect_timeout' });
  timeouts.connectMs = 10_000;

  timeouts.listToolsMs = 300;
  const s = await call('POST', '/v1/mcp-servers/validate', org, { upstream_url: slow.url });
  t.same(s.json(), { valid: false, count: 0, tools: [], error: 'list_tools_timeout' });
  timeouts.listToolsMs = 10_000;

  const closed = await call('POST', '/v1/mcp-servers/validate', org, { upstream_url: `http://127.0.0.1:${await freeLoopbackPort()}/mcp` });
  t.same(closed.json(), { valid: false, count: 0, tools: [], error: 'connect_failed' });

  t.same((await call('POST', '/v1/mcp-servers/validate', org, { upstream_url: 'ftp://example.com/mcp' })).json(), { valid: false, count: 0, tools: [], error: 'invalid_url' });
  const priv = await call('POST', '/v1/mcp-servers/validate', org, { upstream_url: 'http://10.0.0.7/mcp' });
  t.equal(priv.statusCode, 400);
  t.match(priv.json().error, { code: 'invalid_upstream_url', details: { upstream_url: 'http://10.0.0.7/mcp', reason: /private/ } });
  const bad = await call('POST', '/v1/mcp-servers/validate', org, { auth: {} });
  t.same([bad.statusCode, bad.json().error.code], [400, 'invalid_body']);
});

t.test('create: 201 with tools, atomic prices, a provisioned address, the gateway URL; the secret only in the vault', async (t) => {
  const r = await call('POST', '/v1/mcp-servers', org, body('weather'));
  t.equal(r.statusCode, 201, r.body);
  const s = r.json();
  t.match(s, {
    id: /^mcs_/,
    project_id: org.projectId,
    slug: 'weather',
    name: 'Weather tools',
    description: '',
    overview_md: '',
    category: null,
    consumer_id: 'cons_1',
    upstream_url: upstream.url,
    environment: 'test',
    payto_kind: 'provisioned',
    payto_address: /^0x[0-9a-fA-F]{40}$/,
    platform_fee_bps: 250,
    tool_count: 2,
    active: true,
    gateway_url: 'https://gw.example.com/mcp/weather',
  });
  t.same(
    s.tools.map((x: Record<string, unknown>) => [x.tool_name, x.price, x.price_atomic, x.pricing_model, x.active]),
    [
      ['echo', '0.010000', '10000', 'per_call', true],
      ['forecast', '1.500000', '1500000', 'per_call', true],
    ],
  );
  t.notOk(JSON.stringify(s).includes('merchant-secret-123'), 'no secret in the response');
  const events = await ledger.store.readStream(`mcp_server-${s.id}`);
  t.notOk(JSON.stringify(events.map((e) => e.data)).includes('merchant-secret-123'), 'no secret in the log');
  t.match(events[0]!.data, { upstream_auth: { header: 'x-merchant-key', vault_ref: /^vault_/ } });

  // A second server gets another address.
  const r2 = await call('POST', '/v1/mcp-servers', org, body('weather-2'));
  t.not(r2.json().payto_address, s.payto_address);

  // Reads: list without tools, one with tools; the gateway URL rebuilt on read.
  const list = (await call('GET', '/v1/mcp-servers', org)).json();
  t.equal(list.mcp_servers.length, 2);
  t.notOk('tools' in list.mcp_servers[0]);
  t.same((await call('GET', `/v1/mcp-servers/${s.id}`, org)).json(), s);
});

t.test('create refusals write nothing', async (t) => {
  const head = await ledger.store.headPosition();
  const cases: [unknown, number, string][] = [
    [body('dup', { tools: [{ tool_name: 'a', price: '0.1' }, { tool_name: 'a', price: '0.2' }] }), 400, 'slug_conflict'],
    [body('weather'), 400, 'slug_conflict'],
    [body('p0', { tools: [{ tool_name: 'a', price: '0' }] }), 400, 'invalid_body'],
    [body('p7', { tools: [{ tool_name: 'a', price: '0.0000001' }] }), 400, 'invalid_body'],
    [body('pneg', { tools: [{ tool_name: 'a', price: '-1' }] }), 400, 'invalid_body'],
    [body('Bad Slug'), 400, 'invalid_body'],
    [body('x'.repeat(65)), 400, 'invalid_body'],
    [body('fee', { platform_fee_bps: 10_001 }), 400, 'invalid_body'],
    [body('priv', { upstream_url: 'http://192.168.1.5/mcp' }), 400, 'invalid_upstream_url'],
    [{ name: 'x' }, 400, 'invalid_body'],
  ];
  for (const [b, status, code] of cases) {
    const r = await call('POST', '/v1/mcp-servers', org, b);
    t.same([r.statusCode, r.json().error?.code], [status, code], code);
  }
  const written = (await ledger.store.readAll({ after: head, maxCount: 1000 })).filter((e) => e.type.startsWith('mcp_server') || e.type.startsWith('mcp_slug'));
  t.same(written, [], 'nothing written');
});

t.test('the slug is global: concurrent creates of one slug by two organizations, one wins', async (t) => {
  const results = await Promise.all([
    ...Array.from({ length: 4 }, () => call('POST', '/v1/mcp-servers', org, body('contested'))),
    ...Array.from({ length: 4 }, () => call('POST', '/v1/mcp-servers', other, body('contested'))),
  ]);
  const codes = results.map((r) => r.statusCode).sort();
  t.same(codes, [201, 400, 400, 400, 400, 400, 400, 400], results.map((r) => r.body.slice(0, 120)).join('\n'));
  t.ok(results.filter((r) => r.statusCode === 400).every((r) => r.json().error.code === 'slug_conflict'));
  const claim = await ledger.store.readStream('mcp_slug-contested');
  t.equal(claim.length, 1, 'one claim event');
});

t.test('the listing patch: server and tool', async (t) => {
  const s = (await call('POST', '/v1/mcp-servers', org, body('patchme'))).json();
  const p = await call('PATCH', `/v1/mcp-servers/${s.id}`, org, { active: false, description: 'now described' });
  t.equal(p.statusCode, 200, p.body);
  t.match(p.json(), { active: false, description: 'now described', tools: [{ tool_name: 'echo' }, { tool_name: 'forecast' }] });
  const tp = await call('PATCH', `/v1/mcp-servers/${s.id}/tools/echo`, org, { price: '0.25', active: false });
  t.equal(tp.statusCode, 200, tp.body);
  t.match(tp.json().tools[0], { tool_name: 'echo', price: '0.250000', price_atomic: '250000', active: false });
  t.equal(tp.json().tool_count, 2, 'tool_count never recomputed');
  t.same([(await call('PATCH', `/v1/mcp-servers/${s.id}/tools/nope`, org, { active: true })).statusCode], [404]);
  t.same((await call('PATCH', `/v1/mcp-servers/${s.id}/tools/echo`, org, { price: '0' })).json().error.code, 'invalid_body');
});

t.test('the 403 family', async (t) => {
  const member = (await app.inject({ method: 'POST', url: '/v1/team/members', headers: org.owner, payload: { email: 'member@example.com', role: 'member' } })).json();
  const memberId = member.user_id as string;
  const restricted = (await app.inject({ method: 'POST', url: '/v1/api-keys', headers: org.owner, payload: { name: 'r', environment: 'test', scopes: ['projects:read'] } })).json().key;
  const urls: [string, string][] = [
    ['GET', '/v1/mcp-servers'],
    ['POST', '/v1/mcp-servers/validate'],
    ['POST', '/v1/mcp-servers/platform-fees/sweep'],
  ];
  for (const [m, u] of urls) {
    const payload = m === 'POST' ? (u.endsWith('validate') ? { upstream_url: upstream.url } : {}) : undefined;
    const missing = await call(m, u, org, payload, org.key);
    t.same([missing.statusCode, missing.json().error], [403, 'bearer_admin_role_missing'], `${u}: no x-svc-user`);
    const notMember = await call(m, u, org, payload, { ...org.key, 'x-svc-user': other.ownerId });
    t.same([notMember.statusCode, notMember.json().error], [403, 'bearer_admin_user_not_member'], `${u}: another org's user`);
    if (memberId) {
      const weak = await call(m, u, org, payload, { ...org.key, 'x-svc-user': memberId });
      t.same([weak.statusCode, weak.json().error], [403, 'insufficient_role'], `${u}: a member`);
    }
    const scoped = await call(m, u, org, payload, { authorization: `Bearer ${restricted}`, 'x-svc-user': org.ownerId });
    t.same([scoped.statusCode, scoped.json().error], [403, 'forbidden'], `${u}: a key without the scope`);
  }
  t.ok(memberId, 'a member user exists');
  t.equal((await call('GET', '/v1/mcp-servers', org, undefined, { ...platform, 'x-svc-user': org.ownerId })).statusCode, 401, 'the platform secret is not an API key');
});

t.test('tenancy: another organization’s server answers like an absent one', async (t) => {
  const s = (await call('POST', '/v1/mcp-servers', org, body('mine'))).json();
  const theirs = await call('GET', `/v1/mcp-servers/${s.id}`, other);
  const absent = await call('GET', '/v1/mcp-servers/mcs_nope', other);
  t.equal(theirs.statusCode, 404);
  t.same({ ...theirs.json(), request_id: null }, { ...absent.json(), request_id: null });
  t.equal((await call('PATCH', `/v1/mcp-servers/${s.id}`, other, { active: false })).statusCode, 404);
  t.equal((await call('PATCH', `/v1/mcp-servers/${s.id}/tools/echo`, other, { active: false })).statusCode, 404);
  t.notOk((await call('GET', '/v1/mcp-servers', other)).json().mcp_servers.some((x: { id: string }) => x.id === s.id));
});

t.test('a receiving address that cannot be provisioned: 503, nothing created', async (t) => {
  // The same log and database, served with another vault master key: the organization's seed cannot be read.
  const { Vault } = await import('../../src/adapters/vault.ts');
  const { randomBytes } = await import('node:crypto');
  const { SERVICE_SECRET } = await import('../helpers/app.ts');
  const wrongKey = await checkedApp(t, { vault: await Vault.open(ledger.db, randomBytes(32)), db: ledger.db, store: ledger.store, readSide: ledger.readSide, serviceSecret: SERVICE_SECRET, baseUrl: 'http://x', logLevel: 'silent', webhookTargets: { loopback: true, private: false } });
  t.teardown(() => wrongKey.close());
  const head = await ledger.store.headPosition();
  const r = await wrongKey.inject({ method: 'POST', url: '/v1/mcp-servers', headers: admin(org), payload: body('unprovisioned') });
  t.same([r.statusCode, r.json().error.code], [503, 'payto_provisioning_failed']);
  const written = (await ledger.store.readAll({ after: head, maxCount: 1000 })).filter((e) => e.type.startsWith('mcp_'));
  t.same(written, [], 'nothing written');
  t.equal((await call('POST', '/v1/mcp-servers', org, body('unprovisioned'))).statusCode, 201, 'the slug is still free');
});

t.test("a body within the HTTP limit whose server would not fit one append of the event store: 413, no slug claimed, nothing written", async (t) => {
  const head = await ledger.store.headPosition();
  const limit = ledger.store.maxAppendBytes;
  // Tool descriptions of 3-byte characters: the body stays under the HTTP
  // limit, the create event (each tool with its id and prices, the server's
  // fields, the metadata) passes the store's largest append.
  const tool = (i: number, chars: number) => ({ tool_name: `t${i}`, description: '€'.repeat(chars), price: '0.010000' });
  const big = body('too-big', { tools: Array.from({ length: 86 }, (_, i) => tool(i, 4000)) });
  const bytes = () => Buffer.byteLength(JSON.stringify(big));
  big.tools.push(tool(86, Math.floor((1_048_576 - 512 - bytes()) / 3)));
  t.ok(bytes() < 1_048_576 && bytes() > 1_048_576 - 1024, `the body is ${bytes()} bytes, under the HTTP limit`);
  const r = await call('POST', '/v1/mcp-servers', org, big);
  t.equal(r.statusCode, 413, r.body.slice(0, 300));
  // One event of a sealed stream must leave room below the limit for its audit entry.
  t.match(r.json(), { error: { code: 'payload_too_large', message: /event store accepts in one append/, details: { max_append_bytes: limit - SEAL_HEADROOM_BYTES } } });
  const written = (await ledger.store.readAll({ after: head, maxCount: 1000 })).filter((e) => e.type.startsWith('mcp_server') || e.type.startsWith('mcp_slug'));
  t.same(written, [], 'nothing written: no server, no slug claim');
  const again = await call('POST', '/v1/mcp-servers', org, body('too-big'));
  t.equal(again.statusCode, 201, 'the slug was left free');
});
