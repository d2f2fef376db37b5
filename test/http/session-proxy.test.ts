import t from 'tap';
import { bootstrapOrg, testApp } from '../helpers/app.ts';

// POST /v1/sessions/{id}/proxy_execute against the sandbox providers (real
// loopback HTTP servers): what the provider received (path under its base,
// query, body, the caller's headers but never its authorization), the
// answer {status, data, headers, duration, proxy_call_id} whatever the
// provider's status, each call recorded and sealed without a secret, bad
// input refused with the field named and nothing sent, 424 without a
// connection, and the policies applied as to a tool call.

const { app, ledger, sandboxProviders } = await testApp(t, { providers: true });
const sb = sandboxProviders!;
const org = await bootstrapOrg(app, 'Proxy');
const acmeKey = sb.issueCredential('acme-payments') as string;
const nota = sb.issueCredential('nota-facil') as Record<string, string>;
const post = (url: string, payload: unknown, headers: Record<string, string> = org.key) => app.inject({ method: 'POST', url, headers, payload: payload as Record<string, unknown> });
for (const [server_id, secret] of [['acme-payments', acmeKey], ['nota-facil', nota]] as const) {
  const r = await post('/v1/connections', { server_id, secret });
  if (r.statusCode !== 201) throw new Error(r.body);
}
const session = (await post('/v1/sessions', { servers: ['acme-payments', 'nota-facil', 'ledgerly'], user_id: 'alice' })).json();
const proxy = (payload: Record<string, unknown>) => post(`/v1/sessions/${session.id}/proxy_execute`, payload);
const seenSince = (n: number) => sb.seen.slice(n);

t.test("a POST and a GET reach the provider's own API with the connection; the answer carries status, data, headers", async (t) => {
  const n = sb.seen.length;
  const r = await proxy({ server: 'acme-payments', endpoint: '/v1/charges', method: 'POST', body: { amount_minor: 990, currency: 'BRL', description: 'proxied' }, headers: { 'x-trace-id': 'trace-1', authorization: 'Bearer sk_stolen', 'x-api-key': 'not-mine', Cookie: 'a=b' } });
  t.equal(r.statusCode, 200, r.body);
  const body = r.json();
  t.same(Object.keys(body).sort(), ['data', 'duration', 'headers', 'proxy_call_id', 'status']);
  t.match(body, { status: 201, data: { id: /^ch_/, amount_minor: 990, currency: 'BRL' }, headers: { 'content-type': 'application/json' }, duration: Number, proxy_call_id: /^pxc_/ });
  const got = seenSince(n);
  t.equal(got.length, 1, 'one request sent');
  t.match(got[0], { slug: 'acme-payments', method: 'POST', path: '/acme-payments/v1/charges' });
  t.same(JSON.parse(got[0]!.body), { amount_minor: 990, currency: 'BRL', description: 'proxied' });
  t.equal(got[0]!.headers['x-trace-id'], 'trace-1', "the caller's own header passed");
  t.equal(got[0]!.headers['x-api-key'], acmeKey, "the connection's credential, not the caller's");
  t.notOk(got[0]!.headers.authorization, 'no authorization passed');
  t.notOk(got[0]!.headers.cookie, 'no cookie passed');

  const m = sb.seen.length;
  const list = await proxy({ server: 'acme-payments', endpoint: '/v1/charges', method: 'GET', params: { limit: 1 } });
  t.equal(list.statusCode, 200, list.body);
  t.match(list.json(), { status: 200, data: { data: [{ id: body.data.id }] } });
  t.equal(list.json().data.data.length, 1);
  t.match(seenSince(m), [{ method: 'GET', path: '/acme-payments/v1/charges?limit=1' }]);
});

t.test("the provider's error status is the caller's to read: 200 with status 404 and the provider's body", async (t) => {
  const r = await proxy({ server: 'acme-payments', endpoint: '/v1/charges/ch_nope', method: 'GET' });
  t.equal(r.statusCode, 200);
  t.match(r.json(), { status: 404, data: { error: 'not_found', message: 'no charge ch_nope' }, proxy_call_id: /^pxc_/ });
});

t.test('a path-secret provider: the secrets go in the path the adapter builds, never into the record', async (t) => {
  const n = sb.seen.length;
  const r = await proxy({ server: 'nota-facil', endpoint: '/company', method: 'GET' });
  t.equal(r.statusCode, 200, r.body);
  t.match(r.json(), { status: 200, data: { cnpj: '11222333000181' } });
  t.equal(seenSince(n)[0]!.path, `/nota-facil/${nota.company_token}/${nota.access_secret}/company`);
  await ledger.settle();
  const events = JSON.stringify((await ledger.db.query("SELECT event_type, data FROM es_events WHERE event_type LIKE 'proxy_call.%'")).rows);
  for (const secret of [acmeKey, nota.company_token!, nota.access_secret!, 'sk_stolen', 'not-mine']) t.notOk(events.includes(secret), 'no secret in any proxy call event');
  t.ok(events.includes('"endpoint":"/company"'), "the caller's path is recorded");
  t.ok(events.includes('"header_names":["x-trace-id"]'), 'header names only, the dropped ones absent');
});

t.test('each call is recorded and sealed: started then completed, in the audit chain, which verifies', async (t) => {
  const r = (await proxy({ server: 'acme-payments', endpoint: '/v1/account', method: 'GET' })).json();
  await ledger.settle();
  const audit = (await app.inject({ method: 'GET', url: '/v1/audit-events?event_type=proxy_call.&limit=200', headers: org.key })).json().events as { event_type: string; payload: { proxy_call_id?: string } }[];
  const mine = audit.filter((e) => JSON.stringify(e).includes(r.proxy_call_id));
  t.same(mine.map((e) => e.event_type).sort(), ['proxy_call.completed', 'proxy_call.started']);
  t.ok((await ledger.readSide.verifier.verifyOrg(org.orgId)).ok, 'the chain verifies');
});

t.test('bad input: 400 naming the field, nothing sent, nothing written', async (t) => {
  const n = sb.seen.length;
  const head = await ledger.store.headPosition();
  const cases: [Record<string, unknown>, string][] = [
    [{ endpoint: 'http://169.254.169.254/latest/meta-data' }, 'endpoint'],
    [{ endpoint: `${sb.url}/acme-payments/v1/charges` }, 'endpoint'],
    [{ endpoint: '//evil.example/v1/charges' }, 'endpoint'],
    [{ endpoint: '/v1/../../clima/forecast' }, 'endpoint'],
    [{ endpoint: '/v1/charges/..' }, 'endpoint'],
    [{ endpoint: '/v1%2fcharges' }, 'endpoint'],
    [{ endpoint: '/v1%2Fcharges' }, 'endpoint'],
    [{ endpoint: '/v1/%2e%2e/x' }, 'endpoint'],
    [{ endpoint: 'v1/charges' }, 'endpoint'],
    [{ endpoint: '/v1\\charges' }, 'endpoint'],
    [{ method: 'TRACE' }, 'method'],
    [{ method: 'OPTIONS' }, 'method'],
    [{ server: 'kambio' }, 'server'],
    [{ server: 'nope' }, 'server'],
    [{ headers: { 'bad header': 'x' } }, 'headers'],
    [{ headers: { 'x-ok': 'a\r\nx-injected: 1' } }, 'headers'],
  ];
  for (const [change, field] of cases) {
    const r = await proxy({ server: 'acme-payments', endpoint: '/v1/charges', method: 'GET', ...change });
    t.equal(r.statusCode, 400, `${JSON.stringify(change)}: ${r.body}`);
    t.equal(r.json().error.code, 'invalid_body');
    t.equal(r.json().error.details.issues[0].path[0], field, `${JSON.stringify(change)} names ${field}`);
  }
  t.equal(sb.seen.length, n, 'nothing sent');
  t.same(await ledger.store.headPosition(), head, 'nothing written');
});

t.test('no connection: 424 not_connected, nothing sent or written', async (t) => {
  const n = sb.seen.length;
  const head = await ledger.store.headPosition();
  const r = await proxy({ server: 'ledgerly', endpoint: '/entries', method: 'GET' });
  t.equal(r.statusCode, 424);
  t.equal(r.json().error.code, 'not_connected');
  t.equal(sb.seen.length, n);
  t.same(await ledger.store.headPosition(), head);
});

t.test('policies apply as to a tool call: a deny sends nothing; an approval-required call runs once when approved', async (t) => {
  const deny = (await post('/v1/policies', { name: 'no proxying for alice', type: 'deny', agents: ['alice'], tools: ['acme-payments/*'] })).json();
  const n = sb.seen.length;
  const denied = await proxy({ server: 'acme-payments', endpoint: '/v1/charges', method: 'GET' });
  t.equal(denied.statusCode, 403);
  t.same(denied.json(), { reason: 'denied_by_policy', ruleType: 'deny', ruleId: deny.id });
  t.equal(sb.seen.length, n, 'nothing sent');
  await app.inject({ method: 'DELETE', url: `/v1/policies/${deny.id}`, headers: org.key });

  const rule = (await post('/v1/policies', { name: 'a person approves proxied charges', type: 'approval-required', tools: ['acme-payments/proxy_execute'] })).json();
  const held = await proxy({ server: 'acme-payments', endpoint: '/v1/charges', method: 'POST', body: { amount_minor: 4200, currency: 'BRL' } });
  t.equal(held.statusCode, 403);
  t.match(held.json(), { reason: 'approval_required', ruleId: rule.id, approval_id: /^apr_/ });
  t.equal(sb.seen.length, n, 'held: nothing sent');
  const decided = await post(`/v1/approvals/${held.json().approval_id}/decide`, { decision: 'approve', reason: 'ok' }, org.owner);
  t.equal(decided.statusCode, 200, decided.body);
  t.match(decided.json(), { status: 'approved', execution_result: { proxy_call_id: /^pxc_/, status: 201, data: { amount_minor: 4200 } } });
  t.match(seenSince(n), [{ method: 'POST', path: '/acme-payments/v1/charges' }], 'sent once, when approved');
  await app.inject({ method: 'DELETE', url: `/v1/policies/${rule.id}`, headers: org.key });
});
