import t from 'tap';
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { x402Client, x402HTTPClient } from '@x402/core/client';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { bootstrapOrg, testApp, testClock } from '../helpers/app.ts';
import { startUpstream } from '../helpers/mcp-upstream.ts';
import { freeLoopbackPort } from '../../src/postgres/embedded.ts';
import { BASE_SEPOLIA_USDC } from '../../src/adapters/chain/local-chain.ts';
import { SimulatedCrash, type McpConfig } from '../../src/mcp/config.ts';

// The paying gateway over real sockets: a real SDK MCP client calls a priced
// tool through /mcp/<slug>, gets the x402 requirements, pays with the x402
// reference client packages, and gets the upstream's answer; balances on the
// local chain move by exactly the price. Then the fees and their sweep.

const port = await freeLoopbackPort();
const base = `http://127.0.0.1:${port}`;
const clock = testClock();
const faults: NonNullable<McpConfig['faults']> = {};
const { app, ledger, x402 } = await testApp(t, { x402: true, now: clock.now, mcp: { gatewayUrl: base, faults, timeouts: { connectMs: 10_000, listToolsMs: 10_000, callMs: 10_000 } } });
await app.listen({ host: '127.0.0.1', port });
const upstream = await startUpstream();
t.teardown(() => upstream.close());
const chain = x402!.test!.settlement;
const balance = (a: string) => chain.balanceOf(a as Hex);

const org = await bootstrapOrg(app, 'Gateway');
const admin = (o: typeof org) => ({ ...o.key, 'x-svc-user': o.ownerId });
async function createServer(o: typeof org, slug: string, price: string, fee_bps: number, upstreamUrl = upstream.url) {
  const r = await app.inject({
    method: 'POST',
    url: '/v1/mcp-servers',
    headers: admin(o),
    payload: { consumer_id: 'cons_1', name: 'Paid tools', slug, upstream_url: upstreamUrl, upstream_auth: { header: 'x-merchant-key', value: 'm-secret' }, platform_fee_bps: fee_bps, tools: [{ tool_name: 'echo', description: 'Echo, paid', price }, { tool_name: 'forecast', price: '0.5' }] },
  });
  if (r.statusCode !== 201) throw new Error(r.body);
  return r.json() as { id: string; payto_address: string; gateway_url: string };
}
async function fundedPayer(o: typeof org) {
  const payer = privateKeyToAccount(generatePrivateKey());
  const f = await app.inject({ method: 'POST', url: '/v1/test/x402/faucet', headers: o.key, payload: { address: payer.address, value_atomic: '5000000' } });
  if (f.statusCode !== 200) throw new Error(f.body);
  return payer;
}

/** A fetch that pays over x402's HTTP transport (asking for the 402 with `Prefer: x402=http`) with the x402 reference client, remembering what it saw. */
function payingFetch(payer: ReturnType<typeof privateKeyToAccount>) {
  const http = new x402HTTPClient(registerExactEvmScheme(new x402Client(), { signer: payer as never }));
  const seen: { required: Record<string, unknown>[]; signatures: Record<string, string>[]; responses: Record<string, unknown>[] } = { required: [], signatures: [], responses: [] };
  const settled = (res: Response) => {
    if (res.headers.get('payment-response')) seen.responses.push(http.getPaymentSettleResponse((n) => res.headers.get(n)) as unknown as Record<string, unknown>);
    return res;
  };
  const f = async (input: string | URL | Request, given?: RequestInit): Promise<Response> => {
    const init = { ...given, headers: new Headers(given?.headers) };
    init.headers.set('prefer', 'x402=http');
    const res = await fetch(input, init);
    if (res.status !== 402) return settled(res);
    const body = await res.json().catch(() => undefined);
    const required = http.getPaymentRequiredResponse((n) => res.headers.get(n), body);
    seen.required.push(required as unknown as Record<string, unknown>);
    const payload = await http.createPaymentPayload(required);
    const sig = http.encodePaymentSignatureHeader(payload);
    seen.signatures.push(sig);
    const headers = new Headers(init?.headers);
    for (const [k, v] of Object.entries(sig)) headers.set(k, v);
    return settled(await fetch(input, { ...init, headers }));
  };
  return { fetch: f as typeof fetch, seen };
}

async function mcpClient(url: string, f: typeof fetch) {
  const client = new Client({ name: 'paying-agent', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: f }));
  return client;
}

t.test('a real MCP client pays for a priced tool through the gateway', async (t) => {
  const server = await createServer(org, 'paid-weather', '0.012345', 250);
  t.equal(server.gateway_url, `${base}/mcp/paid-weather`);
  const payer = await fundedPayer(org);
  const paying = payingFetch(payer);
  const client = await mcpClient(server.gateway_url, paying.fetch);
  t.teardown(() => client.close());

  // tools/list passes through, each tool with its price.
  const listed = await client.listTools();
  t.same(listed.tools.map((x) => [x.name, (x._meta as Record<string, { price_atomic: string }>)['x402/price']!.price_atomic]), [['echo', '12345'], ['forecast', '500000']]);
  t.equal(paying.seen.required.length, 0, 'listing is free');

  const before = { payer: await balance(payer.address), server: await balance(server.payto_address) };
  const result = await client.callTool({ name: 'echo', arguments: { text: 'hello' } });
  t.same(result.content, [{ type: 'text', text: 'echo: hello' }], "the upstream's answer");
  t.same(upstream.calls.at(-1), 'echo:hello');
  t.equal(upstream.authSeen.at(-1), 'm-secret', 'the upstream credential from the vault');

  // The 402 it got first: x402 v2, exact, Base Sepolia, USDC, payTo the server, the price.
  t.equal(paying.seen.required.length, 1);
  t.match(paying.seen.required[0], { x402Version: 2, accepts: [{ scheme: 'exact', network: 'eip155:84532', asset: BASE_SEPOLIA_USDC, payTo: server.payto_address, amount: '12345', extra: { name: 'USDC', version: '2' } }] });
  t.match(paying.seen.responses[0], { success: true, payer: payer.address, transaction: /^0x[0-9a-f]{64}$/, network: 'eip155:84532' });

  t.equal(before.payer - (await balance(payer.address)), 12_345n, "the payer's balance fell by exactly the price");
  t.equal((await balance(server.payto_address)) - before.server, 12_345n, "the server's address rose by exactly the price");

  // The paid call is an event with its settlement.
  const settled = (await ledger.store.readAll({ maxCount: 100_000 })).filter((e) => e.type === 'mcp_call.settled');
  t.match(settled.at(-1)!.data, { server_id: server.id, tool_name: 'echo', payer: payer.address, pay_to: server.payto_address, price_atomic: '12345', platform_fee_bps: 250, fee_atomic: '308', network: 'base-sepolia', tx_hash: (paying.seen.responses[0] as { transaction: string }).transaction });

  // A replayed payment is refused, and moves nothing.
  const replay = await fetch(server.gateway_url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18', ...paying.seen.signatures[0] },
    body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'echo', arguments: { text: 'again' } } }),
  });
  t.equal(replay.status, 402);
  const again = JSON.parse(Buffer.from(replay.headers.get('payment-required')!, 'base64').toString('utf8'));
  t.equal(again.error, 'authorization_already_used');
  t.equal(before.payer - (await balance(payer.address)), 12_345n, 'still one payment');
  t.notOk(upstream.calls.includes('echo:again'), 'the upstream was not called');

  // The v1 body names the network base-sepolia, for X-PAYMENT clients.
  const bare = await fetch(server.gateway_url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', prefer: 'x402=http' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'x' } } }) });
  t.equal(bare.status, 402);
  t.match(await bare.json(), { x402Version: 1, error: 'payment_required', accepts: [{ scheme: 'exact', network: 'base-sepolia', maxAmountRequired: '12345', payTo: server.payto_address, asset: BASE_SEPOLIA_USDC }] });
});

t.test('a payment that does not match the requirements is refused before any money moves', async (t) => {
  const server = await createServer(org, 'paid-strict', '0.3', 0);
  const payer = await fundedPayer(org);
  const http = new x402HTTPClient(registerExactEvmScheme(new x402Client(), { signer: payer as never }));
  const rpc = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'strict' } } });
  const hdrs = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', prefer: 'x402=http' };
  const first = await fetch(server.gateway_url, { method: 'POST', headers: hdrs, body: rpc });
  const required = http.getPaymentRequiredResponse((n) => first.headers.get(n), await first.json()) as unknown as { accepts: Record<string, unknown>[] };
  const before = await balance(payer.address);
  for (const [change, code] of [
    [{ amount: '1' }, 'amount_mismatch'],
    [{ payTo: payer.address }, 'payee_authorization_mismatch'],
  ] as const) {
    const tampered = { ...required, accepts: [{ ...required.accepts[0], ...change }] };
    const payload = await http.createPaymentPayload(tampered as never);
    const r = await fetch(server.gateway_url, { method: 'POST', headers: { ...hdrs, ...http.encodePaymentSignatureHeader(payload) }, body: rpc });
    t.equal(r.status, 402);
    t.equal(JSON.parse(Buffer.from(r.headers.get('payment-required')!, 'base64').toString('utf8')).error, code, code);
  }
  const garbled = await fetch(server.gateway_url, { method: 'POST', headers: { ...hdrs, 'payment-signature': 'not base64 json!' }, body: rpc });
  t.same([garbled.status, JSON.parse(Buffer.from(garbled.headers.get('payment-required')!, 'base64').toString('utf8')).error], [402, 'invalid_payment']);
  t.equal(await balance(payer.address), before, 'nothing moved');
  t.notOk(upstream.calls.includes('echo:strict'), 'the upstream was not called');
  const unknown = await fetch(`${base}/mcp/no-such-server`, { method: 'POST', headers: hdrs, body: rpc });
  t.same([unknown.status, ((await unknown.json()) as { error: { code: string } }).error.code], [404, 'not_found']);
});

t.test('a v1 X-PAYMENT is accepted too', async (t) => {
  const server = await createServer(org, 'paid-v1', '0.2', 100);
  const payer = await fundedPayer(org);
  const { ExactEvmSchemeV1 } = (await import('@x402/evm/exact/v1/client')) as unknown as { ExactEvmSchemeV1: new (s: unknown) => { createPaymentPayload(v: number, r: unknown): Promise<Record<string, unknown>> } };
  const bare = await fetch(server.gateway_url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', prefer: 'x402=http' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'v1' } } }) });
  const reqs = ((await bare.json()) as { accepts: unknown[] }).accepts[0];
  const created = await new ExactEvmSchemeV1(payer).createPaymentPayload(1, reqs);
  const header = Buffer.from(JSON.stringify({ x402Version: 1, scheme: 'exact', network: 'base-sepolia', ...created })).toString('base64');
  const before = await balance(server.payto_address);
  const r = await fetch(server.gateway_url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'x-payment': header }, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'echo', arguments: { text: 'v1' } } }) });
  t.equal(r.status, 200, await r.clone().text());
  t.match(await r.json(), { result: { content: [{ type: 'text', text: 'echo: v1' }] } });
  t.ok(r.headers.get('x-payment-response'));
  t.equal((await balance(server.payto_address)) - before, 200_000n);
});

t.test('a settled call whose upstream fails is recorded refundable', async (t) => {
  const server = await createServer(org, 'paid-failing', '0.01', 0);
  const payer = await fundedPayer(org);
  const paying = payingFetch(payer);
  const client = await mcpClient(server.gateway_url, paying.fetch);
  t.teardown(() => client.close());
  upstream.failCalls = true;
  const r = await client.callTool({ name: 'echo', arguments: { text: 'boom' } });
  upstream.failCalls = false;
  t.equal(r.isError, true);
  const callId = (r._meta as { call_id: string; 'x402/refundable': boolean }).call_id;
  t.equal((r._meta as Record<string, unknown>)['x402/refundable'], true);
  const events = (await ledger.store.readStream(`mcp_call-${callId}`)).map((e) => e.type);
  t.same(events, ['mcp_call.settled', 'mcp_call.upstream_failed']);
  const { rows } = await ledger.db.query(`SELECT status, refundable, error FROM mcp_calls WHERE id = $1`, [callId]);
  t.same(rows[0], { status: 'upstream_failed', refundable: true, error: 'tool_error' });

  // An upstream that is gone after payment: the same record.
  const gone = await createServer(org, 'paid-gone', '0.01', 0, `http://127.0.0.1:${await freeLoopbackPort()}/mcp`);
  const c2 = await mcpClient(gone.gateway_url, paying.fetch).catch((e: Error) => e);
  t.ok(c2 instanceof Client, 'initialize needs no upstream');
  if (c2 instanceof Client) {
    const r2 = await c2.callTool({ name: 'echo', arguments: { text: 'x' } });
    t.equal(r2.isError, true);
    const id2 = (r2._meta as { call_id: string }).call_id;
    t.same((await ledger.store.readStream(`mcp_call-${id2}`)).map((e) => [e.type, (e.data as { error?: string }).error]), [['mcp_call.settled', undefined], ['mcp_call.upstream_failed', 'connect_failed']]);
    await c2.close();
  }
});

t.test('fees: N paid calls accrue exactly the fee; the sweep moves exactly that sum; one lock; a crash transfers once', async (t) => {
  const feeOrg = await bootstrapOrg(app, 'Fees');
  const price = 12_345n;
  const bps = 250;
  const a = await createServer(feeOrg, 'fees-a', '0.012345', bps);
  const b = await createServer(feeOrg, 'fees-b', '0.012345', bps);
  const payer = await fundedPayer(feeOrg);
  const paying = payingFetch(payer);
  const N = 3;
  for (const s of [a, b]) {
    const client = await mcpClient(s.gateway_url, paying.fetch);
    for (let i = 0; i < N; i++) await client.callTool({ name: 'echo', arguments: { text: `${s.id}-${i}` } });
    await client.close();
  }
  const perCall = (price * BigInt(bps)) / 10_000n; // 308.625 → 308, rounded down per call
  t.equal(perCall, 308n);
  const { rows } = await ledger.db.query<{ fee: string }>(`SELECT sum(fee_atomic)::text AS fee FROM mcp_calls WHERE org_id = $1`, [feeOrg.orgId]);
  t.equal(rows[0]!.fee, (perCall * BigInt(2 * N)).toString(), 'accrued exactly N × floor(price × bps / 10000) per server');

  // Two concurrent sweeps: the first holds the lock while the second asks.
  let entered!: () => void;
  let release!: () => void;
  const inside = new Promise<void>((r) => (entered = r));
  const gate = new Promise<void>((r) => (release = r));
  faults.afterAcquire = async () => {
    faults.afterAcquire = undefined;
    entered();
    await gate;
  };
  // The first one crashes after its first transfer settled on chain, before recording it.
  faults.afterBroadcast = async () => {
    faults.afterBroadcast = undefined;
    throw new SimulatedCrash('killed');
  };
  const sweep = () => app.inject({ method: 'POST', url: '/v1/mcp-servers/platform-fees/sweep', headers: admin(feeOrg) });
  const first = sweep();
  await inside;
  const second = await sweep();
  t.same([second.statusCode, second.json().error.code], [409, 'sweep_in_progress'], 'one sweep at a time');
  release();
  const crashed = await first;
  t.equal(crashed.statusCode, 503, 'the crashed pass reports failure');

  // Which wallet: derived from the organization's seed; find it from the intent.
  const intents = (await ledger.store.readStream(`mcp_sweep-${feeOrg.orgId}`)).filter((e) => e.type === 'mcp_sweep.transfer_intended');
  t.equal(intents.length, 2, 'one intent per server');
  const wallet = intents[0]!.data.destination as string;
  const afterCrash = await balance(wallet);
  t.equal(afterCrash, perCall * BigInt(N), 'the crashed holder moved one transfer before dying');

  // While the dead holder's lease runs, the lock stays taken; after it, a restart resumes.
  t.equal((await sweep()).statusCode, 409, 'the lease of the crashed holder still holds');
  clock.advance(121_000);
  const resumed = await sweep();
  t.equal(resumed.statusCode, 200, resumed.body);
  const total = perCall * BigInt(2 * N);
  t.match(resumed.json(), { swept: 2, total_atomic: total.toString(), partner_wallet: wallet });
  t.same(resumed.json().transfers.map((x: { source: string; amount_atomic: string; status: string }) => [x.source, x.amount_atomic, x.status]).sort(), [
    [a.payto_address, (perCall * BigInt(N)).toString(), 'settled'],
    [b.payto_address, (perCall * BigInt(N)).toString(), 'settled'],
  ].sort());
  t.equal(await balance(wallet), total, 'the platform wallet holds exactly the accrued fees: the crashed transfer happened once');
  t.equal(await balance(a.payto_address), price * BigInt(N) - perCall * BigInt(N), 'server a keeps the price minus the fee');
  t.equal(await balance(b.payto_address), price * BigInt(N) - perCall * BigInt(N));
  const settledEvents = (await ledger.store.readStream(`mcp_sweep-${feeOrg.orgId}`)).filter((e) => e.type === 'mcp_sweep.transfer_settled');
  t.same(settledEvents.map((e) => e.data.reconciled).sort(), [false, true], 'one reconciled from the chain, one sent');

  // Nothing left: 200 with nothing swept and no partner_wallet.
  const empty = await sweep();
  t.same(empty.json(), { swept: 0, total_atomic: '0', transfers: [] });
  t.equal(await balance(wallet), total, 'no second transfer');

  // A further paid call accrues again, and only that is swept.
  const client = await mcpClient(a.gateway_url, paying.fetch);
  await client.callTool({ name: 'echo', arguments: { text: 'more' } });
  await client.close();
  const more = await sweep();
  t.match(more.json(), { swept: 1, total_atomic: perCall.toString(), transfers: [{ source: a.payto_address, amount_atomic: perCall.toString(), status: 'settled' }] });
  t.equal(await balance(wallet), total + perCall);

  // A chain that does not answer: 503, the intent stays open, the lock is released; the next sweep finishes it once.
  const c2 = await mcpClient(b.gateway_url, paying.fetch);
  await c2.callTool({ name: 'echo', arguments: { text: 'down' } });
  await c2.close();
  const { EvmSettlement } = await import('../../src/adapters/chain/settlement.ts');
  const net = x402!.test!;
  const original = net.settlement;
  net.settlement = new EvmSettlement({ rpcUrl: 'http://127.0.0.1:9', chainId: 84532, token: BASE_SEPOLIA_USDC as Hex, facilitatorKey: generatePrivateKey(), receiptTimeoutMs: 500 });
  const down = await sweep();
  net.settlement = original;
  t.same([down.statusCode, down.json().error.code], [503, 'sweep_failed']);
  t.equal(await balance(wallet), total + perCall, 'nothing moved');
  const after = await sweep();
  t.match(after.json(), { swept: 1, total_atomic: perCall.toString(), transfers: [{ source: b.payto_address, amount_atomic: perCall.toString(), status: 'settled' }] });
  t.equal(await balance(wallet), total + 2n * perCall, 'moved once');
});
