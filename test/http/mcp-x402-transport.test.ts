import t from 'tap';
import type { Hex } from 'viem';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { x402Client, x402HTTPClient } from '@x402/core/client';
import type { PaymentPayload, PaymentRequired } from '@x402/core/types';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { bootstrapOrg, testApp, testClock } from '../helpers/app.ts';
import { startUpstream } from '../helpers/mcp-upstream.ts';
import { fundedPayer, registerPaidServer } from '../helpers/x402.ts';
import { freeLoopbackPort } from '../../src/postgres/embedded.ts';
import { BASE_SEPOLIA_USDC } from '../../src/adapters/chain/local-chain.ts';

// x402's MCP transport (specs/transports-v2/mcp.md) on the paying gateway,
// driven by the MCP SDK's own client, unmodified: the price comes back as the
// tool's result (isError, PaymentRequired in structuredContent), the payment
// is built with the x402 reference packages and sent in
// _meta["x402/payment"], the settlement comes back in
// _meta["x402/payment-response"]. Then the same call paid over x402's HTTP
// transport: one settlement path, each payment settled once.

const port = await freeLoopbackPort();
const base = `http://127.0.0.1:${port}`;
const clock = testClock();
const { app, ledger, x402 } = await testApp(t, { x402: true, now: clock.now, mcp: { gatewayUrl: base, timeouts: { connectMs: 10_000, listToolsMs: 10_000, callMs: 10_000 } } });
await app.listen({ host: '127.0.0.1', port });
const upstream = await startUpstream();
t.teardown(() => upstream.close());
const chain = x402!.test!.settlement;
const balance = (a: string) => chain.balanceOf(a as Hex);
const org = await bootstrapOrg(app, 'McpPayers');

async function sdkClient(url: string, fetchImpl?: typeof fetch) {
  const client = new Client({ name: 'plain-mcp-agent', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), fetchImpl ? { fetch: fetchImpl } : {}));
  t.teardown(() => client.close());
  return client;
}
const text = (r: Record<string, unknown>) => ((r.content as { type: string; text: string }[])[0]!).text;
const settledEvents = async () => (await ledger.store.readAll({ maxCount: 100_000 })).filter((e) => e.type === 'mcp_call.settled');

t.test('an MCP client reads the price from the MCP answer, pays in _meta, and gets the result with the settlement', async (t) => {
  const server = await registerPaidServer(app, org, { slug: 'mcp-paid', price: '0.012345', feeBps: 250, upstreamUrl: upstream.url });
  const payer = await fundedPayer(app, org);
  const x402 = registerExactEvmScheme(new x402Client(), { signer: payer as never });
  const client = await sdkClient(server.gateway_url);

  // Unpaid: a tool result, isError, the PaymentRequired in structuredContent and, identical, as the text.
  const first = await client.callTool({ name: 'echo', arguments: { text: 'over mcp' } });
  t.equal(first.isError, true);
  const required = first.structuredContent as unknown as PaymentRequired;
  t.same(JSON.parse(text(first)), required, 'content[0].text is the same PaymentRequired');
  t.match(required, { x402Version: 2, error: 'payment_required', resource: { url: server.gateway_url }, accepts: [{ scheme: 'exact', network: 'eip155:84532', asset: BASE_SEPOLIA_USDC, payTo: server.payto_address, amount: '12345', extra: { name: 'USDC', version: '2' } }] });
  t.notOk(upstream.calls.includes('echo:over mcp'), 'the upstream was not called unpaid');
  t.equal((await settledEvents()).length, 0, 'nothing settled');

  // Paid in _meta["x402/payment"]: the upstream's answer, the settlement in _meta["x402/payment-response"].
  const payload: PaymentPayload = await x402.createPaymentPayload(required);
  const before = { payer: await balance(payer.address), server: await balance(server.payto_address) };
  const paid = await client.callTool({ name: 'echo', arguments: { text: 'over mcp' }, _meta: { 'x402/payment': payload } });
  t.notOk(paid.isError);
  t.same(paid.content, [{ type: 'text', text: 'echo: over mcp' }], "the upstream's answer");
  const response = (paid._meta as Record<string, Record<string, unknown>>)['x402/payment-response']!;
  t.match(response, { success: true, payer: payer.address, transaction: /^0x[0-9a-f]{64}$/, network: 'eip155:84532' });
  t.equal(before.payer - (await balance(payer.address)), 12_345n, "the payer's balance fell by exactly the price");
  t.equal((await balance(server.payto_address)) - before.server, 12_345n, "the server's address rose by exactly the price");
  const events = await settledEvents();
  t.equal(events.length, 1);
  t.match(events[0]!.data, { server_id: server.id, tool_name: 'echo', payer: payer.address, price_atomic: '12345', platform_fee_bps: 250, fee_atomic: '308', tx_hash: response.transaction, x402_version: 2 });
  const { rows } = await ledger.db.query<{ fee_atomic: string; status: string }>(`SELECT fee_atomic::text, status FROM mcp_calls WHERE server_id = $1`, [server.id]);
  t.same(rows, [{ fee_atomic: '308', status: 'completed' }], 'the fee split: floor(12345 × 250 / 10000)');

  // The same payload again: refused as the PaymentRequired with the reason; nothing moves, the upstream is not called.
  const replay = await client.callTool({ name: 'echo', arguments: { text: 'replayed' }, _meta: { 'x402/payment': payload } });
  t.equal(replay.isError, true);
  t.match(replay.structuredContent, { x402Version: 2, error: 'authorization_already_used', accepts: [{ payTo: server.payto_address }] });
  t.equal(before.payer - (await balance(payer.address)), 12_345n, 'still one payment');
  t.notOk(upstream.calls.includes('echo:replayed'));

  // A payment for another amount, or not a PaymentPayload at all: refused before any money moves.
  const cheap = await x402.createPaymentPayload({ ...required, accepts: [{ ...required.accepts[0]!, amount: '1' }] });
  const wrong = await client.callTool({ name: 'echo', arguments: { text: 'cheap' }, _meta: { 'x402/payment': cheap } });
  t.match(wrong.structuredContent, { error: 'amount_mismatch' });
  const garbage = await client.callTool({ name: 'echo', arguments: { text: 'garbage' }, _meta: { 'x402/payment': 'not a payload' } });
  t.match(garbage.structuredContent, { error: 'invalid_payment' });
  t.equal(before.payer - (await balance(payer.address)), 12_345n, 'nothing more moved');
  t.equal((await settledEvents()).length, 1);
});

t.test('an upstream failing after an MCP payment is recorded refundable, as on the HTTP path', async (t) => {
  const server = await registerPaidServer(app, org, { slug: 'mcp-failing', price: '0.01', feeBps: 100, upstreamUrl: upstream.url });
  const payer = await fundedPayer(app, org);
  const x402 = registerExactEvmScheme(new x402Client(), { signer: payer as never });
  const client = await sdkClient(server.gateway_url);
  const first = await client.callTool({ name: 'echo', arguments: { text: 'boom' } });
  const payload = await x402.createPaymentPayload(first.structuredContent as unknown as PaymentRequired);
  upstream.failCalls = true;
  const r = await client.callTool({ name: 'echo', arguments: { text: 'boom' }, _meta: { 'x402/payment': payload } });
  upstream.failCalls = false;
  t.equal(r.isError, true);
  const meta = r._meta as { call_id: string; 'x402/refundable': boolean; 'x402/payment-response': { transaction: string } };
  t.equal(meta['x402/refundable'], true);
  t.match(meta['x402/payment-response'], { success: true, payer: payer.address });
  t.same((await ledger.store.readStream(`mcp_call-${meta.call_id}`)).map((e) => e.type), ['mcp_call.settled', 'mcp_call.upstream_failed']);
  const { rows } = await ledger.db.query(`SELECT status, refundable, error, tx_hash FROM mcp_calls WHERE id = $1`, [meta.call_id]);
  t.same(rows[0], { status: 'upstream_failed', refundable: true, error: 'tool_error', tx_hash: meta['x402/payment-response'].transaction });
});

t.test('the same call paid over HTTP and over MCP settles once each; a payment settled one way is refused the other way', async (t) => {
  const server = await registerPaidServer(app, org, { slug: 'mcp-both', price: '0.2', feeBps: 500, upstreamUrl: upstream.url });
  const payer = await fundedPayer(app, org);
  const x402 = registerExactEvmScheme(new x402Client(), { signer: payer as never });
  const http = new x402HTTPClient(x402);
  const before = await balance(payer.address);

  // Over HTTP: a fetch that asks for the 402 (Prefer: x402=http) and pays with PAYMENT-SIGNATURE.
  let httpSignature: Record<string, string> = {};
  let httpSettle: Record<string, unknown> = {};
  const payingFetch = (async (input: string | URL | Request, given?: RequestInit) => {
    const init = { ...given, headers: new Headers(given?.headers) };
    init.headers.set('prefer', 'x402=http');
    const res = await fetch(input, init);
    if (res.status !== 402) return res;
    const required = http.getPaymentRequiredResponse((n) => res.headers.get(n), await res.json());
    httpSignature = http.encodePaymentSignatureHeader(await http.createPaymentPayload(required));
    for (const [k, v] of Object.entries(httpSignature)) init.headers.set(k, v);
    const paid = await fetch(input, init);
    httpSettle = http.getPaymentSettleResponse((n) => paid.headers.get(n)) as unknown as Record<string, unknown>;
    return paid;
  }) as typeof fetch;
  const overHttp = await (await sdkClient(server.gateway_url, payingFetch)).callTool({ name: 'echo', arguments: { text: 'same' } });
  t.same(overHttp.content, [{ type: 'text', text: 'echo: same' }]);

  // Over MCP.
  const mcp = await sdkClient(server.gateway_url);
  const required = (await mcp.callTool({ name: 'echo', arguments: { text: 'same' } })).structuredContent as unknown as PaymentRequired;
  const payload = await x402.createPaymentPayload(required);
  const overMcp = await mcp.callTool({ name: 'echo', arguments: { text: 'same' }, _meta: { 'x402/payment': payload } });
  t.same(overMcp.content, [{ type: 'text', text: 'echo: same' }]);
  const mcpTx = (overMcp._meta as Record<string, { transaction: string }>)['x402/payment-response']!.transaction;

  t.not(httpSettle.transaction, mcpTx, 'two payments, two transactions');
  const events = (await settledEvents()).filter((e) => e.data.server_id === server.id);
  t.same(events.map((e) => e.data.tx_hash).sort(), [httpSettle.transaction, mcpTx].sort(), 'each settled once, in the log');
  const { rows } = await ledger.db.query<{ tx_hash: string }>(`SELECT tx_hash FROM mcp_calls WHERE server_id = $1`, [server.id]);
  t.same(rows.map((r) => r.tx_hash).sort(), [httpSettle.transaction, mcpTx].sort(), "each once in the server's payments");
  t.equal(before - (await balance(payer.address)), 400_000n, 'twice the price, no more');

  // The MCP payment sent again as a header, the HTTP payment sent again in _meta: both refused, nothing moves.
  const rpc = (id: number, meta?: unknown) => JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { text: 'crossed' }, ...(meta ? { _meta: { 'x402/payment': meta } } : {}) } });
  const hdrs = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };
  const asHeader = await fetch(server.gateway_url, { method: 'POST', headers: { ...hdrs, ...http.encodePaymentSignatureHeader(payload) }, body: rpc(1) });
  t.equal(asHeader.status, 402);
  t.equal(JSON.parse(Buffer.from(asHeader.headers.get('payment-required')!, 'base64').toString('utf8')).error, 'authorization_already_used');
  const httpPayload = JSON.parse(Buffer.from(Object.values(httpSignature)[0]!, 'base64').toString('utf8'));
  const asMeta = await fetch(server.gateway_url, { method: 'POST', headers: hdrs, body: rpc(2, httpPayload) });
  t.equal(asMeta.status, 200);
  t.match(((await asMeta.json()) as { result: unknown }).result, { isError: true, structuredContent: { error: 'authorization_already_used' } });
  t.equal(before - (await balance(payer.address)), 400_000n, 'nothing more moved');
  t.notOk(upstream.calls.includes('echo:crossed'));
  t.equal((await settledEvents()).filter((e) => e.data.server_id === server.id).length, 2);
});

t.test('the OpenAPI document says what the gateway answers and who may call /v1/mcp-servers', async (t) => {
  const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json() as { paths: Record<string, Record<string, { security: unknown; description?: string; responses: Record<string, { headers?: Record<string, unknown>; content?: Record<string, { schema: { $ref?: string } }> }> }>>; components: { schemas: Record<string, { properties: Record<string, unknown> }> } };
  const gw = doc.paths['/mcp/{slug}']!.post!;
  t.ok(gw.responses['402']!.headers!['PAYMENT-REQUIRED'], 'the 402 names its PAYMENT-REQUIRED header');
  t.equal(gw.responses['402']!.content!['application/json']!.schema.$ref, '#/components/schemas/X402PaymentRequiredV1', 'the 402 body is the x402 object, not the error envelope');
  t.same(Object.keys(doc.components.schemas.X402PaymentRequiredV1!.properties).sort(), ['accepts', 'error', 'x402Version']);
  t.ok(gw.responses['200']!.headers!['PAYMENT-RESPONSE']);
  t.match(gw.description, /_meta\["x402\/payment"\]/);
  t.ok(doc.paths['/mcp/{slug}']!.options, 'the CORS preflight is an operation');
  const family = Object.entries(doc.paths).filter(([p]) => p.startsWith('/v1/mcp-servers')).flatMap(([p, ops]) => Object.entries(ops).map(([m, op]) => [`${m} ${p}`, op.security] as const));
  t.equal(family.length, 7);
  for (const [op, security] of family) t.same(security, [{ apiKey: [], actingUser: [] }], `${op}: an API key and x-svc-user, together`);
});
