import http from 'node:http';
import t from 'tap';
import type { Hex } from 'viem';
import { x402Client, x402HTTPClient } from '@x402/core/client';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { startUpstream } from '../helpers/mcp-upstream.ts';
import { fundedPayer, registerPaidServer } from '../helpers/x402.ts';
import { freeLoopbackPort } from '../../src/postgres/embedded.ts';

// Both MCP surfaces (the session endpoint and the paying gateway) under one
// browser rule (issue 40 item 3, issue 44 item 4): a foreign Origin, or a
// foreign Host on a loopback listener (DNS rebinding), answers 403 before
// anything runs; the service's own origin and MCP_ALLOWED_ORIGINS pass and
// get CORS, preflights included.

const ALLOWED = 'https://agent-console.example';
const port = await freeLoopbackPort();
const base = `http://127.0.0.1:${port}`;
const { app, ledger, x402, sandboxProviders } = await testApp(t, { x402: true, providers: true, mcp: { gatewayUrl: base, allowedOrigins: [ALLOWED] } });
await app.listen({ host: '127.0.0.1', port });
const upstream = await startUpstream();
t.teardown(() => upstream.close());
const org = await bootstrapOrg(app, 'Origins');
const balance = (a: string) => x402!.test!.settlement.balanceOf(a as Hex);

/** One request over a real socket, with exactly the headers given (Host included). */
function send(method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const text = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request({ host: '127.0.0.1', port, method, path, headers: { ...(text ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) } : {}), ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(text);
  });
}
const code = (r: { body: string }) => (JSON.parse(r.body) as { error: { code: string } }).error.code;
const MCP = { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };

t.test('the gateway: a foreign Origin or Host is refused before any payment is looked at; allowed origins get CORS', async (t) => {
  const server = await registerPaidServer(app, org, { slug: 'origin-gw', price: '0.05', feeBps: 0, upstreamUrl: upstream.url });
  const path = new URL(server.gateway_url).pathname;
  const payer = await fundedPayer(app, org);
  const pay = new x402HTTPClient(registerExactEvmScheme(new x402Client(), { signer: payer as never }));
  const call = (text: string) => ({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text } } });
  const first = await send('POST', path, { ...MCP, prefer: 'x402=http' }, call('x'));
  t.equal(first.status, 402, 'no Origin (a non-browser client) passes');
  const signature = pay.encodePaymentSignatureHeader(await pay.createPaymentPayload(pay.getPaymentRequiredResponse((n) => first.headers[n.toLowerCase()] as string, JSON.parse(first.body))));
  const before = await balance(payer.address);
  const settled = async () => (await ledger.store.readAll({ maxCount: 100_000 })).filter((e) => e.type === 'mcp_call.settled').length;

  // A valid payment from a foreign origin, under a foreign host, or from an opaque origin: 403, nothing settled, the upstream not called.
  for (const [headers, expected] of [
    [{ origin: 'https://evil.example' }, 'origin_not_allowed'],
    [{ origin: 'null' }, 'origin_not_allowed'],
    [{ origin: `${ALLOWED}.evil.example` }, 'origin_not_allowed'],
    [{ host: `rebound.evil.example:${port}` }, 'host_not_allowed'],
  ] as const) {
    const r = await send('POST', path, { ...MCP, ...signature, ...headers }, call('forbidden'));
    t.same([r.status, code(r)], [403, expected], JSON.stringify(headers));
    t.notOk(r.headers['access-control-allow-origin'], 'no CORS grant');
  }
  t.equal(await balance(payer.address), before, 'nothing moved');
  t.equal(await settled(), 0, 'nothing settled');
  t.notOk(upstream.calls.includes('echo:forbidden'), 'the upstream was not called');
  t.equal((await send('GET', path, { origin: 'https://evil.example' })).status, 403, 'the GET too');

  // The same payment from the configured origin: it runs, with CORS exposing what an MCP client reads.
  const ok = await send('POST', path, { ...MCP, ...signature, origin: ALLOWED, host: `localhost:${port}` }, call('allowed'));
  t.equal(ok.status, 200, ok.body);
  t.equal(ok.headers['access-control-allow-origin'], ALLOWED);
  const exposed = String(ok.headers['access-control-expose-headers']).split(/,\s*/);
  for (const h of ['mcp-session-id', 'mcp-protocol-version', 'payment-required', 'payment-response']) t.ok(exposed.includes(h), `exposes ${h}`);
  t.ok(ok.headers['payment-response'], 'settled over HTTP');
  t.equal(before - (await balance(payer.address)), 50_000n);
  t.ok(upstream.calls.includes('echo:allowed'));
  // The service's own origin passes too.
  const own = await send('POST', path, { ...MCP, origin: base }, { jsonrpc: '2.0', id: 2, method: 'ping' });
  t.same([own.status, own.headers['access-control-allow-origin']], [200, base]);

  // Preflights: the configured origin gets the methods and headers; another origin is refused.
  const pre = await send('OPTIONS', path, { origin: ALLOWED, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type, mcp-protocol-version, payment-signature' });
  t.equal(pre.status, 204);
  t.equal(pre.headers['access-control-allow-origin'], ALLOWED);
  t.match(pre.headers['access-control-allow-methods'], /POST/);
  const allowedHeaders = String(pre.headers['access-control-allow-headers']).split(/,\s*/);
  for (const h of ['content-type', 'accept', 'mcp-session-id', 'mcp-protocol-version', 'payment-signature', 'x-payment']) t.ok(allowedHeaders.includes(h), `allows ${h}`);
  const refused = await send('OPTIONS', path, { origin: 'https://evil.example', 'access-control-request-method': 'POST' });
  t.same([refused.status, code(refused)], [403, 'origin_not_allowed']);
  t.notOk(refused.headers['access-control-allow-origin']);
});

t.test('the session MCP endpoint: a foreign Origin or Host is refused before the call runs; the configured origin gets CORS', async (t) => {
  const sb = sandboxProviders!;
  await app.inject({ method: 'POST', url: '/v1/connections', headers: org.key, payload: { server_id: 'acme-payments', secret: sb.issueCredential('acme-payments') } });
  const s = await app.inject({ method: 'POST', url: '/v1/sessions', headers: org.key, payload: { servers: ['acme-payments'], user_id: 'u1' } });
  t.equal(s.statusCode, 201, s.body);
  const path = `/v1/sessions/${s.json().id}/mcp`;
  const call = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'acme-payments.create_charge', arguments: { amount_minor: 900, currency: 'BRL' } } };
  const toolCalls = async () => (await ledger.store.readAll({ maxCount: 100_000 })).filter((e) => e.type.startsWith('tool_call.')).length;
  const before = await toolCalls();
  for (const [headers, expected] of [
    [{ origin: 'https://evil.example' }, 'origin_not_allowed'],
    [{ host: `rebound.evil.example:${port}` }, 'host_not_allowed'],
  ] as const) {
    const r = await send('POST', path, { ...MCP, ...org.key, ...headers }, call);
    t.same([r.status, code(r)], [403, expected], JSON.stringify(headers));
  }
  t.equal(await toolCalls(), before, 'no tool call recorded');
  t.equal((await send('GET', path, { ...org.key, origin: 'https://evil.example' })).status, 403, 'the GET too');

  const ok = await send('POST', path, { ...MCP, ...org.key, origin: ALLOWED }, call);
  t.equal(ok.status, 200, ok.body);
  t.equal(ok.headers['access-control-allow-origin'], ALLOWED);
  t.match(JSON.parse(ok.body), { result: { isError: false, structuredContent: { tool_call_id: /^tc_/ } } });
  t.ok((await toolCalls()) > before, 'the allowed call ran and was recorded');

  const pre = await send('OPTIONS', path, { origin: ALLOWED, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' });
  t.equal(pre.status, 204);
  t.ok(String(pre.headers['access-control-allow-headers']).split(/,\s*/).includes('authorization'));
  t.equal((await send('OPTIONS', path, { origin: 'https://evil.example', 'access-control-request-method': 'POST' })).status, 403);
});
