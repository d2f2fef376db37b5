import type { AddressInfo } from 'node:net';
import { EventSource } from 'eventsource';
import t from 'tap';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { scriptedModel } from '../helpers/scripted-model.ts';

// The agent loop with a scripted model on loopback speaking chat completions:
// a message becomes two tool calls, both recorded and sealed in the audit
// chain, answered in the product client's shape {message, tool_calls,
// iterations}; the same loop streams as SSE (read with the `eventsource`
// client over a real port): user_message, tool_use/tool_result per call,
// assistant_text, done; error when the model fails; without a model, 501.
// Every data object names its `type`; tool_result is the client's
// ToolCallRecord (also as `toolCall`), done repeats itself as `result`.

const { app, ledger, sandboxProviders } = await testApp(t, { providers: true });
await app.listen({ port: 0, host: '127.0.0.1' });
const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
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
// A second model asks for a tool the session does not attach, then answers.
const wrongTool = await scriptedModel([{ tool_calls: [{ name: 'kambio__get_rate', arguments: { base: 'USD', quote: 'BRL' } }] }, { content: 'I could not reach the rates.' }], KEY);
t.teardown(() => wrongTool.close());

type Got = { event: string; id: string; data: Record<string, unknown> };
/** sendStream as the product client does it: POST with Accept: text/event-stream, read by an SSE client until done or error. */
async function sendStream(message: string): Promise<Got[]> {
  const got: Got[] = [];
  await new Promise<void>((resolve, reject) => {
    const es = new EventSource(`${base}/v1/sessions/${session.id}/send`, {
      fetch: (input, init) => fetch(input, { ...init, method: 'POST', body: JSON.stringify({ message }), headers: { ...(init?.headers ?? {}), ...org.key, 'content-type': 'application/json', accept: 'text/event-stream' } }),
    });
    for (const event of ['user_message', 'assistant_text', 'tool_use', 'tool_result', 'error', 'done']) {
      es.addEventListener(event, (e) => {
        got.push({ event, id: e.lastEventId, data: JSON.parse(e.data) });
        if (event === 'done' || event === 'error') {
          es.close();
          resolve();
        }
      });
    }
    es.onerror = (e) => {
      if (es.readyState === EventSource.CLOSED) reject(new Error(`the stream failed: ${e.message ?? ''}`));
    };
  });
  return got;
}

t.test('without a model: 501 not_wired', async (t) => {
  delete process.env.MODEL_BASE_URL;
  const r = await send('hello');
  t.equal(r.statusCode, 501);
  t.equal(r.json().error.code, 'not_wired');
});

t.test('a message becomes two tool calls, both recorded and sealed; the answer is {message, tool_calls, iterations}', async (t) => {
  Object.assign(process.env, { MODEL_BASE_URL: model.url, MODEL_API_KEY: KEY, MODEL_NAME: 'scripted-1' });
  const r = await send('Will it rain in Recife? If so buy me an umbrella for 12 reais.');
  t.equal(r.statusCode, 200, r.body);
  const body = r.json();
  t.same(Object.keys(body).sort(), ['iterations', 'message', 'tool_calls']);
  t.equal(body.message, 'Rain in Recife; I bought you an umbrella.');
  t.equal(body.iterations, 2, 'two model turns');
  t.equal(body.tool_calls.length, 2);
  for (const c of body.tool_calls) t.same(Object.keys(c).sort(), ['duration_ms', 'error_code', 'id', 'input', 'output', 'server_id', 'status', 'tool_name']);
  t.match(body.tool_calls, [
    { id: /^tc_\d+$/, tool_name: 'get_forecast', server_id: 'clima', status: 'success', duration_ms: Number, input: { city: 'Recife' }, output: { city: 'Recife' }, error_code: null },
    { id: /^tc_\d+$/, tool_name: 'create_charge', server_id: 'acme-payments', status: 'success', duration_ms: Number, input: { amount_minor: 1200, currency: 'BRL' }, output: { amount_minor: 1200, id: /^ch_/ }, error_code: null },
  ]);
  t.equal(model.requests.length, 2);
  t.match(model.requests[0]!.body, { model: 'scripted-1', messages: [{ role: 'system' }, { role: 'user', content: /umbrella/ }] });
  t.ok(model.requests[0]!.body.tools!.some((x) => x.function.name === 'acme-payments__create_charge'));
  t.same(model.requests[1]!.body.messages.filter((m) => m.role === 'tool').map((m) => m.tool_call_id), ['call_1_0', 'call_1_1'], 'the results went back to the model');
  for (const c of body.tool_calls) {
    t.match((await app.inject({ method: 'GET', url: `/v1/tool-calls/${c.id}`, headers: org.key })).json(), { status: 'success', session_id: session.id, server_id: c.server_id, tool_name: c.tool_name, duration_ms: c.duration_ms });
  }
  await ledger.settle();
  const audit = (await app.inject({ method: 'GET', url: '/v1/audit-events?event_type=tool_call.succeeded', headers: org.key })).json().events as { payload: unknown }[];
  const sealed = JSON.stringify(audit);
  for (const c of body.tool_calls) t.ok(sealed.includes(c.id), `${c.id} is in the audit chain`);
  t.ok((await ledger.readSide.verifier.verifyOrg(org.orgId)).ok, 'the chain verifies');
  t.notOk(JSON.stringify(await ledger.db.query('SELECT data FROM es_events')).includes(KEY), 'the model key is in no event');
});

t.test('sendStream: user_message, tool_use and tool_result per call, assistant_text, done, in order (eventsource client)', async (t) => {
  model.reset();
  const got = await sendStream('again please');
  t.same(got.map((g) => g.event), ['user_message', 'tool_use', 'tool_result', 'tool_use', 'tool_result', 'assistant_text', 'done']);
  t.same(got.map((g) => g.id), ['1', '2', '3', '4', '5', '6', '7'], 'every event has an id, in order');
  for (const g of got) t.equal(g.data.type, g.event, `${g.event}: the data names its type (the Python client dispatches on it)`);
  t.same(got[0]!.data, { type: 'user_message', content: 'again please' });
  t.same(got[1]!.data, { type: 'tool_use', id: 'call_1_0', name: 'clima/get_forecast', input: { city: 'Recife' } });
  // tool_result is the client's ToolCallRecord (id: the recorded tc_ call), the stream's own members beside it, and the record again as toolCall.
  const RECORD = ['duration_ms', 'error_code', 'id', 'input', 'output', 'server_id', 'status', 'tool_name'];
  t.match(got[2]!.data, { id: /^tc_\d+$/, tool_name: 'get_forecast', server_id: 'clima', status: 'success', duration_ms: Number, input: { city: 'Recife' }, output: { city: 'Recife' }, error_code: null });
  t.match(got[2]!.data, { name: 'clima/get_forecast', is_error: false, tool_call_id: got[2]!.data.id, call_id: 'call_1_0', error_message: null });
  t.same(got[2]!.data.toolCall, Object.fromEntries(RECORD.map((k) => [k, got[2]!.data[k]])), 'toolCall is the record');
  t.same(Object.keys(got[2]!.data.toolCall as object).sort(), RECORD);
  t.match(got[3]!.data, { id: 'call_1_1', name: 'acme-payments/create_charge', input: { amount_minor: 1200 } });
  t.match(got[4]!.data, { id: /^tc_\d+$/, tool_name: 'create_charge', server_id: 'acme-payments', status: 'success', output: { id: /^ch_/ }, call_id: 'call_1_1', is_error: false, toolCall: { tool_name: 'create_charge', output: { id: /^ch_/ } } });
  t.same(got[5]!.data, { type: 'assistant_text', content: 'Rain in Recife; I bought you an umbrella.', iteration: 2 }, 'the turn it was said in');
  const done = got[6]!.data as { message: string; tool_calls: { id: string }[]; iterations: number; result: unknown };
  t.match(done, { message: 'Rain in Recife; I bought you an umbrella.', iterations: 2 });
  t.same(done.tool_calls.map((c) => c.id), [got[2]!.data.id, got[4]!.data.id], 'done lists the recorded calls the stream showed');
  t.same(done.tool_calls, [got[2]!.data.toolCall, got[4]!.data.toolCall], 'the same records');
  t.same(done.result, { message: done.message, tool_calls: done.tool_calls, iterations: done.iterations }, 'result is the answer');
});

t.test('a tool the model may not call: an error result in both forms, the loop goes on', async (t) => {
  process.env.MODEL_BASE_URL = wrongTool.url;
  const r = await send('rate?');
  t.equal(r.statusCode, 200, r.body);
  t.match(r.json(), { message: 'I could not reach the rates.', iterations: 2, tool_calls: [{ id: null, tool_name: 'get_rate', server_id: 'kambio', status: 'error', duration_ms: null, input: { base: 'USD' }, output: null, error_code: 'server_unknown' }] });
  wrongTool.reset();
  const got = await sendStream('rate?');
  t.same(got.map((g) => g.event), ['user_message', 'tool_use', 'tool_result', 'assistant_text', 'done']);
  const record = { id: null, tool_name: 'get_rate', server_id: 'kambio', status: 'error', duration_ms: null, input: { base: 'USD', quote: 'BRL' }, output: null, error_code: 'server_unknown' };
  t.match(got[2]!.data, { ...record, type: 'tool_result', name: 'kambio/get_rate', is_error: true, tool_call_id: null, call_id: 'call_1_0', error_message: /kambio/ });
  t.same(got[2]!.data.toolCall, record);
  process.env.MODEL_BASE_URL = model.url;
});

t.test('a model that fails: 502 model_error, and an error event {error, message} on the stream', async (t) => {
  process.env.MODEL_API_KEY = 'wrong';
  const r = await send('hi');
  t.equal(r.statusCode, 502);
  t.equal(r.json().error.code, 'model_error');
  const got = await sendStream('hi');
  t.same(got.map((g) => g.event), ['user_message', 'error']);
  t.match(got[1]!.data, { error: 'model_error', message: /./ });
  t.same(Object.keys(got[1]!.data).sort(), ['error', 'message', 'type']);
  delete process.env.MODEL_BASE_URL;
});
