import t from 'tap';
import { HttpProvider } from '../../src/adapters/providers/http-provider.ts';
import { Catalog } from '../../src/providers/catalog.ts';
import { ProviderTools } from '../../src/providers/tools.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';

// The internal tool-execution API the sessions/tool-calls family builds on:
// resolve a tool, find the connection, read its credential, execute against
// the sandbox providers through the HTTP adapter, typed errors.

const { app, ledger, vault, sandboxProviders } = await testApp(t, { providers: true });
const sb = sandboxProviders!;
const org = await bootstrapOrg(app, 'Tools');
const tools = new ProviderTools(ledger.db, vault, {
  catalog: Catalog.load(),
  client: new HttpProvider({ allow: { loopback: false, private: false }, extraCa: [sb.caPem], sandboxOrigins: [sb.url, sb.tlsUrl], timeoutMs: 2_000 }),
  sandbox: { http: sb.url, https: sb.tlsUrl },
});
const tenant = { orgId: org.orgId, projectId: org.projectId };
const secrets: string[] = [];
async function connect(server_id: string, extra: Record<string, unknown> = {}) {
  const secret = sb.issueCredential(server_id);
  secrets.push(...(typeof secret === 'string' ? [secret] : Object.values(secret).filter((v) => !v.includes('CERTIFICATE'))));
  const r = await app.inject({ method: 'POST', url: '/v1/connections', headers: org.key, payload: { server_id, secret, ...extra } });
  if (r.statusCode !== 201) throw new Error(r.body);
  return r.json();
}
const results: unknown[] = [];
const exec = async (serverId: string, toolName: string, input: unknown, userId: string | null = null) => {
  const r = await tools.execute({ tenant, environment: 'test', serverId, toolName, input, userId });
  results.push(r);
  return r;
};

const acme = await connect('acme-payments', { connection_metadata: { split_wallet_id: 'w_9' } });
await connect('nota-facil');
await connect('banco-seguro');
await connect('ledgerly', { user_id: 'alice' });
await connect('shipfast');
await connect('kambio');

t.test('resolve, find, read', async (t) => {
  t.equal(tools.resolveTool('acme-payments', 'create_charge')?.tool.request.path, '/v1/charges');
  t.equal(tools.resolveTool('acme-payments', 'nope'), undefined);
  t.equal(tools.resolveTool('nope', 'create_charge'), undefined);
  const c = await tools.findConnection(tenant, 'acme-payments', 'someone');
  t.equal(c?.id, acme.id, 'a project-wide connection serves any end user');
  t.equal(await tools.findConnection(tenant, 'acme-payments', 'someone', { exact: true }), undefined, 'exact: the user’s own only');
  t.equal(await tools.findConnection(tenant, 'ledgerly', 'bob'), undefined, 'per-user provider: no fallback');
  t.equal((await tools.findConnection(tenant, 'ledgerly', 'alice'))?.user_id, 'alice');
  t.equal(typeof (await tools.readCredential(c!)), 'string', 'the api key');
});

t.test('execute against every auth type', async (t) => {
  const charge = await exec('acme-payments', 'create_charge', { amount_minor: 1500, currency: 'BRL', description: 'tea' });
  t.match(charge, { ok: true, status: 201, connection_id: acme.id, output: { id: /^ch_/, amount_minor: 1500, metadata: { split_wallet_id: 'w_9' } } }, 'connection_metadata merged into the upstream body');
  const id = (charge as { output: { id: string } }).output.id;
  t.match(await exec('acme-payments', 'get_charge', { charge_id: id }), { ok: true, output: { id } }, 'path parameters from the input');
  t.match(await exec('acme-payments', 'list_charges', { limit: 5 }), { ok: true, output: { data: [{ id }] } }, 'query parameters on a GET');
  t.match(await exec('nota-facil', 'issue_invoice', { customer_document: '12345678909', amount_minor: 100 }), { ok: true, output: { status: 'authorized' } }, 'path secrets');
  t.match(await exec('banco-seguro', 'get_balance', {}), { ok: true, output: { currency: 'BRL' } }, 'mutual TLS');
  t.match(await exec('ledgerly', 'post_entry', { debit_account: 'cash', credit_account: 'sales', amount_minor: 10 }, 'alice'), { ok: true, output: { id: /^je_/ } }, 'HMAC-signed');
  t.match(await exec('shipfast', 'quote_shipment', { from_postal_code: '01000', to_postal_code: '20000', weight_grams: 1000 }), { ok: true, output: { price_minor: 750 } }, 'ES256 JWT');
  t.match(await exec('kambio', 'get_rate', { base: 'USD', quote: 'BRL' }), { ok: true, output: { rate: 5.3 } }, 'two headers');
  t.match(await exec('clima', 'get_forecast', { city: 'Recife' }), { ok: true, connection_id: null, output: { city: 'Recife' } }, 'no credential');
});

t.test('typed errors', async (t) => {
  t.match(await exec('nope', 'x', {}), { ok: false, error: { code: 'server_unknown' } });
  t.match(await exec('acme-payments', 'refund', {}), { ok: false, error: { code: 'tool_unknown' } });
  t.match(await exec('acme-payments', 'create_charge', { currency: 'XXX', extra: 1 }), { ok: false, error: { code: 'invalid_input', issues: [{ path: ['amount_minor'] }, { path: ['currency'] }, { path: ['extra'] }] } });
  t.match(await exec('ledgerly', 'list_entries', {}, 'bob'), { ok: false, error: { code: 'not_connected', retriable: false } });
  t.match(await exec('contahub', 'list_accounts', {}), { ok: false, error: { code: 'not_connected' } });
  t.match(await exec('acme-payments', 'get_charge', { charge_id: 'ch_missing' }), { ok: false, error: { code: 'provider_error', status: 404, retriable: false } });
  sb.faults.set('kambio', '5xx');
  t.match(await exec('kambio', 'get_rate', { base: 'USD', quote: 'EUR' }), { ok: false, error: { code: 'provider_error', status: 503, retriable: true } });
  sb.faults.set('kambio', '401');
  t.match(await exec('kambio', 'get_rate', { base: 'USD', quote: 'EUR' }), { ok: false, error: { code: 'credential_rejected', detail: 'API key revoked by the provider' } });
  sb.faults.set('kambio', 'redirect');
  t.match(await exec('kambio', 'get_rate', { base: 'USD', quote: 'EUR' }), { ok: false, error: { code: 'redirect_not_followed' } });
  sb.faults.delete('kambio');
  const live = await tools.execute({ tenant, environment: 'live', serverId: 'clima', toolName: 'get_forecast', input: { city: 'x' } });
  t.match(live, { ok: false, error: { code: 'provider_unreachable', retriable: true } }, 'the live endpoint through the guarded client');
  t.match(await tools.execute({ tenant, environment: 'test', serverId: 'cdp-wallet', toolName: 'get_wallet', input: {} }), { ok: false, error: { code: 'not_connected' } });
  const k = (await app.inject({ method: 'GET', url: '/v1/connections?server_id=kambio', headers: org.key })).json().connections[0];
  await app.inject({ method: 'POST', url: `/v1/connections/${k.id}/revoke`, headers: org.key });
  t.match(await exec('kambio', 'get_rate', { base: 'USD', quote: 'EUR' }), { ok: false, error: { code: 'not_connected' } }, 'revoked: not connected');
});

t.test('the guarded client refuses loopback outside the sandbox origins', async (t) => {
  const strict = new ProviderTools(ledger.db, vault, { catalog: Catalog.load(), client: new HttpProvider({ allow: { loopback: false, private: false } }), sandbox: { http: sb.url, https: sb.tlsUrl } });
  t.match(await strict.execute({ tenant, environment: 'test', serverId: 'clima', toolName: 'get_forecast', input: { city: 'x' } }), { ok: false, error: { code: 'provider_unreachable', message: /loopback/ } });
});

t.test('no secret in any result', async (t) => {
  const text = JSON.stringify(results);
  t.ok(results.length > 15 && secrets.length > 8);
  t.same(secrets.filter((s) => s.split('\n').some((line) => line.length >= 16 && !line.startsWith('-----') && text.includes(line))), []);
});

t.test('tool inputs are checked against the whole JSON Schema (Ajv), not a subset', async (t) => {
  // A catalog whose list_charges carries schema features the old subset refused or ignored.
  const raw = JSON.parse(JSON.stringify({ version: 1, recipes: [...Catalog.load().recipes], providers: Catalog.load().providers }));
  const acmeDef = raw.providers.find((p: { id: string }) => p.id === 'acme-payments');
  acmeDef.tools.find((tl: { name: string }) => tl.name === 'list_charges').input_schema = {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    $defs: { cursor: { type: 'string', pattern: '^ch_[0-9a-z]+$' } },
    properties: {
      limit: { type: 'integer', minimum: 1, maximum: 100 },
      after: { $ref: '#/$defs/cursor' },
      since: { type: 'string', format: 'date-time' },
      status: { oneOf: [{ const: 'succeeded' }, { const: 'refunded' }] },
      order: { enum: ['asc', 'desc'] },
      order_by: { type: 'string' },
    },
    if: { required: ['order'] },
    then: { required: ['order_by'] },
    additionalProperties: false,
  };
  const draft07 = {
    $schema: 'http://json-schema.org/draft-07/schema#',
    type: 'object',
    definitions: { id: { type: 'string', pattern: '^ch_' } },
    properties: { charge_id: { $ref: '#/definitions/id' } },
    required: ['charge_id'],
  };
  acmeDef.tools.find((tl: { name: string }) => tl.name === 'get_charge').input_schema = draft07;
  const catalog = Catalog.parse(raw); // the old loader refused every keyword outside its subset
  const rich = new ProviderTools(ledger.db, vault, { ...tools.runtime, catalog });
  const run = (toolName: string, input: unknown) => rich.execute({ tenant, environment: 'test', serverId: 'acme-payments', toolName, input });
  const refused = async (input: unknown, path: (string | number)[], why: string) => {
    const r = await run('list_charges', input);
    t.match(r, { ok: false, error: { code: 'invalid_input' } }, why);
    t.ok(!r.ok && r.error.issues?.some((i) => JSON.stringify(i.path) === JSON.stringify(path)), `${why}: the issue names ${path.join('.') || 'the root'}`);
  };
  await refused({ after: 'nope' }, ['after'], 'pattern through $ref/$defs');
  await refused({ since: 'yesterday' }, ['since'], 'format date-time');
  await refused({ status: 'pending' }, ['status'], 'oneOf');
  await refused({ order: 'asc' }, ['order_by'], 'if/then');
  await refused({ limit: 5, nope: 1 }, ['nope'], 'additionalProperties still');
  t.match(await run('list_charges', { limit: 5, after: 'ch_1', since: '2025-01-02T03:04:05Z', status: 'succeeded', order: 'asc', order_by: 'created' }), { ok: true, status: 200 }, 'a conforming input reaches the provider');
  t.match(await run('get_charge', { charge_id: 'x_1' }), { ok: false, error: { code: 'invalid_input', issues: [{ path: ['charge_id'], message: /pattern/ }] } }, 'a draft-07 schema (definitions, $ref) is read as draft-07');
  t.throws(() => Catalog.parse({ ...raw, providers: [{ ...acmeDef, tools: [{ ...acmeDef.tools[0], input_schema: { type: 'object', properties: { a: { $ref: '#/$defs/missing' } } } }] }] }), 'a schema with an unresolvable $ref is refused by the loader');
  t.throws(() => Catalog.parse({ ...raw, providers: [{ ...acmeDef, tools: [{ ...acmeDef.tools[0], input_schema: { type: 'object', properties: { a: { type: 'strin' } } } }] }] }), 'an invalid schema is refused by the loader');
});
