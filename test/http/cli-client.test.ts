import t from 'tap';
import { bootstrapOrg, testApp, testClock } from '../helpers/app.ts';

// The product's command-line client (codespar-core packages/cli 0.6.0) against
// us: each call below is the shape the CLI sends, and each assertion reads
// the members the CLI reads (its src/commands/*.ts), not our docs.

const clock = testClock();
const { app, sandboxProviders } = await testApp(t, { providers: true, now: clock.now, sessionQuota: 20 });
const sb = sandboxProviders!;
const org = await bootstrapOrg(app, 'Cli');
const other = await bootstrapOrg(app, 'Elsewhere');

/** The CLI's ApiClient: Bearer key, JSON body, query members only when given. */
const api = (headers: Record<string, string>) => async (method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown) => {
  const r = await app.inject({ method, url: path, headers: { ...headers, 'content-type': 'application/json', 'user-agent': 'codespar-cli/0.6.0' }, ...(body !== undefined ? { payload: JSON.stringify(body) } : {}) });
  return { status: r.statusCode, body: r.body ? r.json() : undefined };
};
const cli = api(org.key);
await app.inject({ method: 'POST', url: '/v1/connections', headers: org.key, payload: { server_id: 'acme-payments', secret: sb.issueCredential('acme-payments') } });

t.test('login and whoami: the objects the CLI prints, beside our flat ids', async (t) => {
  const me = await cli('GET', '/v1/whoami');
  t.equal(me.status, 200);
  // login.ts: `Logged in as ${me.user?.email ?? me.user?.id}`, `Organization: ${me.organization.name}`
  t.equal(me.body.user.email, 'owner+cli@example.com');
  t.equal(me.body.user.id, org.ownerId);
  t.same(me.body.organization, { id: org.orgId, name: 'Cli' });
  t.match(me.body.project, { id: org.projectId, name: /./ });
  t.same(me.body.key.scopes, ['*']);
  t.equal(me.body.key.environment, 'test');
  t.match(me.body, { org_id: org.orgId, project_id: org.projectId, api_key_id: /^key_/, environment: 'test', scopes: ['*'] }, 'our members stay');
  const theirs = await api(other.key)('GET', '/v1/whoami');
  t.same(theirs.body.organization, { id: other.orgId, name: 'Elsewhere' });
});

t.test('servers list|show and tools list|show: the catalog in the CLI words', async (t) => {
  const list = await cli('GET', '/v1/servers');
  t.equal(list.status, 200);
  const acme = list.body.data.find((s: { id: string }) => s.id === 'acme-payments');
  t.match(acme, { id: 'acme-payments', name: /./, category: 'payments', region: 'BR', status: 'live', tool_count: 3 });
  const providers = (await cli('GET', '/v1/providers')).body;
  t.equal(list.body.data.length, providers.servers.length, 'the same rows as /v1/providers');
  t.ok((await cli('GET', '/v1/servers?category=payments&region=BR')).body.data.every((s: { category: string; region: string }) => s.category === 'payments' && s.region === 'BR'));
  t.same((await cli('GET', '/v1/servers?region=ZZ')).body.data, []);

  const show = await cli('GET', '/v1/servers/acme-payments');
  t.equal(show.status, 200);
  t.equal(show.body.tools.length, show.body.tool_count);
  t.match(show.body.tools[0], { name: /^[a-z_]+$/, description: /./ });
  const missing = await cli('GET', '/v1/servers/nope');
  t.equal(missing.status, 404);
  t.match(missing.body.error, { code: 'not_found', message: /GET \/v1\/servers/ });

  const tools = await cli('GET', '/v1/tools?server=acme-payments');
  t.same(tools.body.data.map((x: { server: string }) => x.server), ['acme-payments', 'acme-payments', 'acme-payments']);
  t.ok((await cli('GET', '/v1/tools')).body.data.length > tools.body.data.length);
  const tool = await cli('GET', '/v1/tools/create_charge');
  t.equal(tool.status, 200);
  t.match(tool.body, { name: 'create_charge', server: 'acme-payments', description: /./, input_schema: { type: 'object' } });
  t.equal((await cli('GET', '/v1/tools/acme-payments%2Fcreate_charge')).body.name, 'create_charge');
  t.equal((await cli('GET', '/v1/tools/create_charge?server=ledgerly')).status, 404);
  t.equal((await cli('GET', '/v1/tools/no_such_tool')).status, 404);
});

t.test('execute with a bare tool name and --server; sessions list|show|close and the logs', async (t) => {
  // execute.ts: cs.create(user, {servers: [opts.server]}); session.execute(toolName, input) sends {tool, input}.
  const s = await cli('POST', '/v1/sessions', { servers: ['acme-payments'], user_id: 'cli-user' });
  t.equal(s.status, 201);
  const id = s.body.id;
  t.equal(s.body.tool_call_count, 0);
  for (const amount of [100, 200, 300]) {
    const x = await cli('POST', `/v1/sessions/${id}/execute`, { tool: 'create_charge', input: { amount_minor: amount, currency: 'BRL', description: 'tea' } });
    t.equal(x.status, 200, JSON.stringify(x.body));
    t.match(x.body, { success: true, server: 'acme-payments', tool: 'create_charge' });
  }
  const named = await cli('POST', `/v1/sessions/${id}/execute`, { tool: 'get_charge', server: 'nope', input: {} });
  t.equal(named.status, 404, 'a server beside the name that is not attached');
  const unknown = await cli('POST', `/v1/sessions/${id}/execute`, { tool: 'post_entry', input: {} });
  t.equal(unknown.status, 400, 'a bare name no attached server has');
  t.match(unknown.body.error, { code: 'invalid_body', message: /no server attached/ });

  // sessions.ts show: session.tool_call_count
  const shown = await cli('GET', `/v1/sessions/${id}`);
  t.equal(shown.body.tool_call_count, 3);
  // sessions.ts show --logs: {data: [{tool, server, status, duration_ms, called_at}]}
  const logs = await cli('GET', `/v1/sessions/${id}/logs`);
  t.equal(logs.status, 200);
  t.same(logs.body.data.map((l: { tool: string; server: string; status: string }) => [l.tool, l.server, l.status]), Array(3).fill(['create_charge', 'acme-payments', 'success']));
  t.ok(logs.body.data.every((l: { id: string; duration_ms: number; called_at: string }) => /^tc_\d+$/.test(l.id) && Number.isInteger(l.duration_ms) && !Number.isNaN(Date.parse(l.called_at))));
  t.equal((await api(other.key)('GET', `/v1/sessions/${id}/logs`)).status, 404, "another organization's session");

  // sessions.ts list: GET /v1/sessions?status=&limit= → {data: [{id, user_id, status, servers, tool_call_count, created_at}]}
  const more: string[] = [];
  for (let i = 0; i < 3; i++) {
    clock.advance(1000);
    more.push((await cli('POST', '/v1/sessions', { servers: [], user_id: `u${i}` })).body.id);
  }
  const page1 = await cli('GET', '/v1/sessions?status=active&limit=2');
  t.equal(page1.status, 200);
  t.same(page1.body.data.map((x: { id: string }) => x.id), [more[2], more[1]], 'newest first');
  const page2 = await cli('GET', `/v1/sessions?status=active&limit=2&cursor=${page1.body.next_cursor}`);
  t.same(page2.body.data.map((x: { id: string }) => x.id), [more[0], id]);
  t.equal(page2.body.next_cursor, null);
  t.match(page2.body.data[1], { id, user_id: 'cli-user', status: 'active', servers: ['acme-payments'], tool_call_count: 3, created_at: /Z$/ });
  t.equal((await cli('GET', '/v1/sessions?cursor=garbage')).status, 400);
  t.same((await api(other.key)('GET', '/v1/sessions')).body.data, [], 'tenancy');

  // sessions.ts close: POST /v1/sessions/{id}/close
  const closed = await cli('POST', `/v1/sessions/${id}/close`);
  t.equal(closed.status, 200);
  t.match(closed.body, { id, status: 'closed', closed_at: /Z$/ });
  t.equal((await cli('POST', `/v1/sessions/${id}/close`, {})).status, 200, 'twice is a no-op (an empty body, as the client sends it, too)');
  t.same((await cli('GET', '/v1/sessions?status=closed')).body.data.map((x: { id: string }) => x.id), [id]);
  t.equal((await api(other.key)('POST', `/v1/sessions/${id}/close`)).status, 404);
});

t.test("docs/api.md maps every CLI command to routes the served OpenAPI document has", async (t) => {
  const { readFile } = await import('node:fs/promises');
  const md = await readFile(new URL('../../docs/api.md', import.meta.url), 'utf8');
  const section = md.slice(md.indexOf('## The product\'s command-line client (0.6.0)'));
  const rows = section.split('\n').filter((l) => l.startsWith('| `'));
  const commands = rows.map((r) => r.split('|')[1]!.trim());
  // The CLI's 29 commands (its src/index.ts), each in a row.
  for (const c of ['login', 'whoami', 'logout', 'servers list', 'servers show', 'tools list', 'tools show', 'execute', 'sessions list', 'sessions show', 'sessions close', 'connect list', 'mandate create', 'mandate verify', 'spend', 'wallet', 'transfer', 'payment-status', 'verification-status', 'logs tail', 'init', 'discover', 'charge', 'ship', 'ledger', 'issue', 'wizard']) {
    t.ok(commands.some((x) => x.includes(`\`${c}`) || x.includes(`${c}\``) || x.includes(` ${c}`)), `${c} has a row`);
  }
  const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json() as { paths: Record<string, Record<string, unknown>> };
  const routes = [...section.matchAll(/`(GET|POST|DELETE) (\/v1\/[^` ?\[]+)/g)].map((m) => [m[1]!.toLowerCase(), m[2]!.replace(/\/$/, '')] as const);
  t.ok(routes.length >= 20, 'the table names its routes');
  for (const [method, path] of routes) t.ok(doc.paths[path]?.[method], `${method.toUpperCase()} ${path} is in the served OpenAPI document`);
});
