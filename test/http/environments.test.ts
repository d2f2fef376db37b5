import t from 'tap';
import { bootstrapOrg, testApp } from '../helpers/app.ts';

// Test and live are two worlds (issue 60, Errors; docs/decisions.md "Issue 60:
// errors and environments"): a project lives in one environment and a key acts
// only in projects of its own, so a live key and a test key of one organization
// list disjoint data, and a live key naming a test record finds nothing there
// (404 as an absent one, nothing written), never a provider's error.

const { app, ledger } = await testApp(t);
const org = await bootstrapOrg(app, 'Worlds');
const test = { authorization: `Bearer ${org.testKey}` };
const live = { authorization: `Bearer ${org.liveKey}` };
const inject = (method: 'GET' | 'POST' | 'PATCH', url: string, headers: Record<string, string>, payload?: unknown) => app.inject({ method, url, headers, ...(payload !== undefined ? { payload: payload as object } : {}) });
const head = () => ledger.store.headPosition();
const strip = ({ request_id: _r, ...rest }: Record<string, unknown>) => rest;

const mandateBody = (consumerId: string) => ({
  consumer_id: consumerId,
  agent_id: 'buyer',
  purpose: 'p',
  merchant_allowlist: ['m'],
  merchant_pin_kind: 'merchant-id',
  cap_minor: '100',
  per_tx_cap_minor: '10',
  currency: 'BRL',
  expires_at: Math.floor(Date.now() / 1000) + 3600,
});

await inject('POST', '/v1/agents', test, { agent_id: 'buyer', principal_ref: 'person-1' });
const testConsumer = (await inject('POST', '/v1/consumers', test, { display_name: 'Test Ana' })).json().id as string;
const liveConsumer = (await inject('POST', '/v1/consumers', live, { display_name: 'Live Bia' })).json().id as string;
const testMandate = (await inject('POST', '/v1/mandates', test, mandateBody(testConsumer))).json().id as string;
const testHook = (await inject('POST', '/v1/webhook-endpoints', test, { event: 'consumer.created', name: 'test hook', webhook_url: 'https://hooks.example.com/test' })).json().id as string;
const testSession = (await inject('POST', '/v1/sessions', test, { servers: ['clima'], user_id: 'u1' })).json().id as string;

t.test('each key acts in a project of its environment', async (t) => {
  const whoTest = (await inject('GET', '/v1/whoami', test)).json();
  const whoLive = (await inject('GET', '/v1/whoami', live)).json();
  t.equal(whoTest.project_id, org.projectId, 'the test key: the default (test) project');
  t.not(whoLive.project_id, org.projectId, 'the live key: not the test default project');
  const p = (await inject('GET', `/v1/projects/${whoLive.project_id}`, test)).json();
  t.match(p, { environment: 'live', slug: 'live', is_default: false }, 'the project the first live key opened');
});

t.test('lists are disjoint', async (t) => {
  const ids = async (url: string, headers: Record<string, string>, field: string) => ((await inject('GET', url, headers)).json()[field] as { id: string }[]).map((x) => x.id);
  t.same(await ids('/v1/consumers', test, 'consumers'), [testConsumer], 'the test key lists the test consumer only');
  t.same(await ids('/v1/consumers', live, 'consumers'), [liveConsumer], 'the live key lists the live consumer only');
  t.same(await ids('/v1/mandates', live, 'mandates'), [], 'no test mandate in live');
  t.same(await ids('/v1/mandates', test, 'mandates'), [testMandate]);
  const hooks = async (headers: Record<string, string>) => JSON.stringify((await inject('GET', '/v1/webhook-endpoints', headers)).json());
  t.ok((await hooks(test)).includes(testHook));
  t.notOk((await hooks(live)).includes(testHook), 'no test webhook endpoint in live');
  const sessions = async (headers: Record<string, string>) => JSON.stringify((await inject('GET', '/v1/sessions', headers)).json());
  t.ok((await sessions(test)).includes(testSession));
  t.notOk((await sessions(live)).includes(testSession), 'no test session in live');
});

t.test('a live key naming a test record finds nothing there: 404 as an absent one, nothing written', async (t) => {
  const before = await head();
  const cases: [string, 'GET' | 'POST' | 'PATCH', string, string, unknown?][] = [
    ['read the test consumer', 'GET', `/v1/consumers/${testConsumer}`, '/v1/consumers/cns_absentAbsent0000'],
    ['update the test consumer', 'PATCH', `/v1/consumers/${testConsumer}`, '/v1/consumers/cns_absentAbsent0000', { display_name: 'Live mix' }],
    ['its wallet', 'GET', `/v1/consumers/${testConsumer}/wallet`, '/v1/consumers/cns_absentAbsent0000/wallet'],
    ['read the test mandate', 'GET', `/v1/mandates/${testMandate}`, '/v1/mandates/mdt_absentAbsent0000'],
    ['open a Pix partner account for the test consumer', 'POST', `/v1/consumers/${testConsumer}/pix/partner-account`, '/v1/consumers/cns_absentAbsent0000/pix/partner-account', { document: '529.982.247-25' }],
    ['list its Pix keys', 'GET', `/v1/consumers/${testConsumer}/pix-keys`, '/v1/consumers/cns_absentAbsent0000/pix-keys'],
    ['read the test webhook endpoint', 'GET', `/v1/webhook-endpoints/${testHook}`, '/v1/webhook-endpoints/trg_absentAbsent0000'],
    ['read the test session', 'GET', `/v1/sessions/${testSession}`, '/v1/sessions/ses_absentAbsent0000'],
  ];
  for (const [what, method, url, absentUrl, body] of cases) {
    const mixed = await inject(method, url, live, body);
    const absent = await inject(method, absentUrl, live, body);
    t.equal(mixed.statusCode, 404, `${what}: ${mixed.body}`);
    t.same(strip(mixed.json()), strip(absent.json()), `${what}: the same answer as an absent id`);
  }
  const mandate = await inject('POST', '/v1/mandates', live, mandateBody(testConsumer));
  t.equal(mandate.statusCode, 404, 'a live mandate for the test consumer');
  t.match(mandate.json(), { error: { code: 'not_found', details: { field: 'consumer_id' } } });
  t.equal(await head(), before, 'nothing written');
  t.equal((await inject('GET', `/v1/consumers/${testConsumer}`, test)).json().display_name, 'Test Ana', 'the test consumer untouched');
});

t.test('naming a project of the other environment is refused, naming both environments', async (t) => {
  const r = await inject('GET', '/v1/consumers', { ...live, 'x-svc-project': org.projectId });
  t.equal(r.statusCode, 403);
  t.same(r.json(), {
    error: 'forbidden',
    message: 'x-svc-project names a test project and this is a live key: a live key acts only in live projects; use a test key for it',
    status: 403,
  });
  const before = await head();
  const bound = await inject('POST', '/v1/api-keys', org.owner, { name: 'mixed', environment: 'live', project_id: org.projectId });
  t.equal(bound.statusCode, 400, bound.body);
  t.match(bound.json(), { error: { code: 'environment_mismatch', message: /is a test project: a live key acts only in live projects/, details: { environment: 'live', project_environment: 'test' } } });
  t.equal(await head(), before, 'no key written');
});
