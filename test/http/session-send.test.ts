import t from 'tap';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { scriptedModel } from '../helpers/scripted-model.ts';

// The agent loop with a scripted model on loopback speaking chat completions:
// a message becomes two tool calls, both recorded and sealed in the audit
// chain; the same loop streams its steps as SSE; without a model, 501.

const { app, ledger, sandboxProviders } = await testApp(t, { providers: true });
const sb = sandboxProviders!;
const org = await bootstrapOrg(app, 'Agent');
await app.inject({ method: 'POST', url: '/v1/connections', headers: org.key, payload: { server_id: 'acme-payments', secret: sb.issueCredential('acme-payments') } });
const session = (await app.inject({ method: 'POST', url: '/v1/sessions', headers: org.key, payload: { servers: ['acme-payments', 'clima'], user_id: 'u1' } })).json();
const send = (message: string, headers: Record<string, string> = {}) => app.inject({ method: 'POST', url: `/v1/sessions/${session.id}/send`, headers: { ...org.key, ...headers }, payload: { message } });

const KEY = 'sk-test-model-key-0123456789';
const model = await scriptedModel(
  [
    { tool_calls: [{ name: 'clima__get_forecast', arguments: { city: 'Recife' } }, { name: 'acme-payments__create_charge', arguments: { amount_minor: 1200, currency: 'BRL', description: 'umbrella' } }] },
    { content: 'Rain in Recife; I bought you an umbrella.' },
  ],
  KEY,
);
t.teardown(() => model.close());

t.test('without a model: 501 not_wired', async (t) => {
  delete process.env.MODEL_BASE_URL;
  const r = await send('hello');
  t.equal(r.statusCode, 501);
  t.equal(r.json().error.code, 'not_wired');
});

t.test('a message becomes two tool calls, both recorded and sealed', async (t) => {
  Object.assign(process.env, { MODEL_BASE_URL: model.url, MODEL_API_KEY: KEY, MODEL_NAME: 'scripted-1' });
  const r = await send('Will it rain in Recife? If so buy me an umbrella for 12 reais.');
  t.equal(r.statusCode, 200, r.body);
  const body = r.json();
  t.equal(body.message, 'Rain in Recife; I bought you an umbrella.');
  t.match(body.steps, [
    { type: 'tool_call', tool: 'clima/get_forecast', status: 'success', tool_call_id: /^tc_\d+$/, output: { city: 'Recife' } },
    { type: 'tool_call', tool: 'acme-payments/create_charge', status: 'success', tool_call_id: /^tc_\d+$/, output: { amount_minor: 1200 } },
    { type: 'message' },
  ]);
  t.equal(model.requests.length, 2);
  t.match(model.requests[0]!.body, { model: 'scripted-1', messages: [{ role: 'system' }, { role: 'user', content: /umbrella/ }] });
  t.ok(model.requests[0]!.body.tools!.some((x) => x.function.name === 'acme-payments__create_charge'));
  t.same(model.requests[1]!.body.messages.filter((m) => m.role === 'tool').map((m) => m.tool_call_id), ['call_1_0', 'call_1_1'], 'the results went back to the model');
  for (const s of body.steps.slice(0, 2)) {
    t.match((await app.inject({ method: 'GET', url: `/v1/tool-calls/${s.tool_call_id}`, headers: org.key })).json(), { status: 'success', session_id: session.id });
  }
  await ledger.settle();
  const audit = (await app.inject({ method: 'GET', url: '/v1/audit-events?event_type=tool_call.succeeded', headers: org.key })).json().events as { payload: unknown }[];
  const sealed = JSON.stringify(audit);
  for (const s of body.steps.slice(0, 2)) t.ok(sealed.includes(s.tool_call_id), `${s.tool_call_id} is in the audit chain`);
  t.ok((await ledger.readSide.verifier.verifyOrg(org.orgId)).ok, 'the chain verifies');
  t.notOk(JSON.stringify(await ledger.db.query('SELECT data FROM es_events')).includes(KEY), 'the model key is in no event');
});

t.test('Accept: text/event-stream streams the steps', async (t) => {
  model.reset();
  const r = await send('again please', { accept: 'text/event-stream' });
  t.equal(r.statusCode, 200);
  t.match(r.headers['content-type'], /^text\/event-stream/);
  const events = [...r.body.matchAll(/event: (\w+)\nid: (\d+)\n/g)].map((m) => m[1]);
  t.same(events, ['tool_call', 'tool_call', 'message', 'done']);
});

t.test('a model that fails answers 502 model_error', async (t) => {
  process.env.MODEL_API_KEY = 'wrong';
  const r = await send('hi');
  t.equal(r.statusCode, 502);
  t.equal(r.json().error.code, 'model_error');
  delete process.env.MODEL_BASE_URL;
});
