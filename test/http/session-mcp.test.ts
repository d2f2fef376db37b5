import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import t from 'tap';
import { bootstrapOrg, testApp } from '../helpers/app.ts';

// The session's MCP endpoint driven by the SDK's own client over loopback:
// it lists the attached providers' tools and calls them; each call is a
// recorded tool call.

const { app, ledger, sandboxProviders } = await testApp(t, { providers: true });
const sb = sandboxProviders!;
const org = await bootstrapOrg(app, 'Mcp');
const other = await bootstrapOrg(app, 'NotMine');
await app.listen({ port: 0, host: '127.0.0.1' });
const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
await app.inject({ method: 'POST', url: '/v1/connections', headers: org.key, payload: { server_id: 'acme-payments', secret: sb.issueCredential('acme-payments') } });
const session = (await app.inject({ method: 'POST', url: '/v1/sessions', headers: org.key, payload: { servers: ['acme-payments', 'clima'], user_id: 'u1' } })).json();

async function connect(headers: Record<string, string>) {
  // The session body names the URL and headers; the caller adds its credential.
  const url = new URL(session.mcp.url.replace('http://127.0.0.1:8080', base));
  const client = new Client({ name: 'test-client', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: { ...session.mcp.headers, ...headers } } }));
  t.teardown(() => client.close());
  return client;
}

t.test('the MCP client lists and calls the session tools', async (t) => {
  const client = await connect(org.key);
  const { tools } = await client.listTools();
  t.same(tools.map((x) => x.name).sort(), ['acme-payments.create_charge', 'acme-payments.get_charge', 'acme-payments.list_charges', 'clima.get_forecast']);
  t.match(tools.find((x) => x.name === 'clima.get_forecast'), { inputSchema: { type: 'object', properties: { city: {} } } });
  const r = await client.callTool({ name: 'acme-payments.create_charge', arguments: { amount_minor: 700, currency: 'BRL' } });
  t.equal(r.isError, false);
  const sc = r.structuredContent as { tool_call_id: string; output: { id: string } };
  t.match(sc, { tool_call_id: /^tc_\d+$/, output: { id: /^ch_/, amount_minor: 700 } });
  const recorded = (await app.inject({ method: 'GET', url: `/v1/tool-calls/${sc.tool_call_id}`, headers: org.key })).json();
  t.match(recorded, { status: 'success', session_id: session.id, server_id: 'acme-payments', tool_name: 'create_charge' });
  const bad = await client.callTool({ name: 'acme-payments.get_charge', arguments: { charge_id: 'ch_missing' } });
  t.equal(bad.isError, true);
  t.match(bad.structuredContent, { tool_call_id: /^tc_/, error_code: 'provider_error' });
  const unknown = await client.callTool({ name: 'kambio.get_rate', arguments: {} });
  t.equal(unknown.isError, true, 'a server not attached to the session');
  await ledger.settle();
  const audit = (await app.inject({ method: 'GET', url: '/v1/audit-events?event_type=tool_call.', headers: org.key })).json().events.map((e: { event_type: string }) => e.event_type);
  t.ok(audit.includes('tool_call.succeeded') && audit.includes('tool_call.failed'));
});

t.test("another organization's key cannot reach the session", async (t) => {
  await t.rejects(connect(other.key));
  const r = await fetch(`${base}/v1/sessions/${session.id}/mcp`, { method: 'POST', headers: { ...other.key, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }) });
  t.equal(r.status, 404);
});

t.test('a GET (the client asking for a standalone SSE stream) answers 405 Allow: POST at once, and the service can close', async (t) => {
  const ctl = new AbortController();
  // Bounded: before, this request was never answered (and held the service's shutdown open).
  const bound = setTimeout(() => ctl.abort(), 30_000);
  const r = await fetch(`${base}/v1/sessions/${session.id}/mcp`, { headers: { ...org.key, accept: 'text/event-stream' }, signal: ctl.signal });
  clearTimeout(bound);
  t.equal(r.status, 405);
  t.equal(r.headers.get('allow'), 'POST');
  t.equal(((await r.json()) as { error: { code: string } }).error.code, 'method_not_allowed');
});
