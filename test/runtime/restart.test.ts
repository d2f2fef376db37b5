import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { x402Client } from '@x402/core/client';
import type { PaymentPayload, PaymentRequired } from '@x402/core/types';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { findChromium } from '../../src/adapters/browser/chromium.ts';
import { BASE_SEPOLIA_CHAIN_ID, BASE_SEPOLIA_USDC, SANDBOX_FACILITATOR_KEY } from '../../src/adapters/chain/local-chain.ts';
import { EvmSettlement } from '../../src/adapters/chain/settlement.ts';
import { freeLoopbackPort } from '../../src/postgres/embedded.ts';
import { startUpstream } from '../helpers/mcp-upstream.ts';
import { root, serviceDb, startService, type Service } from '../helpers/service.ts';
import { until } from '../helpers/wait.ts';
import { nodeArgs } from '../helpers/entry.ts';

// The README's walkthroughs, then a restart, as a newcomer does it: the
// service on a DATA_DIR, bootstrap, a browser signup run to `provisioned`, a
// Pix charge paid by its BR Code, a payer funded and a paid MCP gateway call;
// SIGTERM; the service again on the same DATA_DIR. The sandbox world must
// still be there: the same sandbox URLs, the outbox with its code, the signup
// connection's credential, the consumer's partner account and Pix key, the
// chain with its balances (equal to what the ledger recorded), and a nonce
// that lets the faucet and the gateway settle again.

const chromium = await findChromium();
const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'ledger-restart-'));
t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
const port = await freeLoopbackPort();
const env = { DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', SVC_ALLOW_PRIVATE_TARGETS: 'loopback', BROWSER_WORKER: chromium ? 'embedded' : 'none' };
const upstream = await startUpstream();
t.teardown(() => upstream.close());

let service: Service = await startService(env);
t.teardown(() => service.stop());
// On a failure, what the service said.
t.teardown(() => void (t.passing() || process.stderr.write(service.output().slice(-6000))));
process.on('exit', () => void writeFileSync('/tmp/s59-service.log', service.output()));
const api = service.url;

type Json = Record<string, any>;
async function call(method: string, url: string, headers: Record<string, string>, body?: unknown): Promise<{ status: number; body: Json }> {
  const r = await fetch(url.startsWith('http') ? url : `${api}${url}`, { method, headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) }, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  const text = await r.text();
  return { status: r.status, body: text ? (JSON.parse(text) as Json) : {} };
}

// bootstrap, as the README runs it, beside the running server (its DATA_DIR), in a terminal
// where the server's PORT was not set: the dashboard link is still the running server's.
const { PORT: _port, HOST: _host, ...cliEnv } = { ...process.env, ...env };
const boot = await promisify(execFile)(process.execPath, [...nodeArgs('src/cli.ts'), 'bootstrap', '--org-name', 'Acme', '--email', 'owner@acme.example'], { cwd: root, env: cliEnv });
const keys = JSON.parse(boot.stdout) as { org_id: string; user_id: string; test_api_key: string; database: string; dashboard_url: string };
const KEY = { authorization: `Bearer ${keys.test_api_key}` };
const ADMIN = { ...KEY, 'x-svc-user': keys.user_id };

const sandboxOf = async () => new URL((await call('GET', '/v1/providers/acme-payments', KEY)).body.sandbox_url as string).origin;
const SANDBOX = await sandboxOf();
const email = 'ana@example.com';
const outbox = async () => (await call('GET', `${SANDBOX}/_sandbox/outbox?email=${encodeURIComponent(email)}`, {})).body as { count: number; messages: { code: string }[] };
const toolCall = async () => {
  const session = await call('POST', '/v1/sessions', KEY, { servers: ['acme-payments'], user_id: 'ana' });
  return call('POST', `/v1/sessions/${session.body.id}/execute`, KEY, { tool: 'acme-payments/list_charges', input: {} });
};

/** A Pix charge of the consumer, paid by its BR Code through the sandbox's simulated payer; its status after. */
async function chargeAndPay(consumer: string, amount: number): Promise<{ created: number; status: string }> {
  const charge = await call('POST', `/v1/consumers/${consumer}/pix/charges`, KEY, { amount_minor: amount });
  if (charge.status !== 201) return { created: charge.status, status: JSON.stringify(charge.body) };
  const paid = await call('POST', '/v1/test/pix/payments', KEY, { consumer_id: consumer, br_code: charge.body.br_code });
  if (paid.status !== 201) return { created: 201, status: JSON.stringify(paid.body) };
  const view = await until(async () => {
    const c = await call('GET', `/v1/consumers/${consumer}/pix/charges/${charge.body.txid}`, KEY);
    return c.body.status !== 'pending' ? c.body : undefined;
  }, 'the charge leaves pending');
  return { created: 201, status: view.status as string };
}

/** One paid tools/call through the gateway (x402 over MCP _meta), answered with the settlement. */
async function paidGatewayCall(gatewayUrl: string, payer: ReturnType<typeof privateKeyToAccount>): Promise<{ isError: boolean; response?: Json }> {
  const client = new Client({ name: 'restart-agent', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(gatewayUrl)));
  try {
    const first = await client.callTool({ name: 'echo', arguments: { text: 'after all' } });
    const payload: PaymentPayload = await registerExactEvmScheme(new x402Client(), { signer: payer as never }).createPaymentPayload(first.structuredContent as unknown as PaymentRequired);
    const paid = await client.callTool({ name: 'echo', arguments: { text: 'after all' }, _meta: { 'x402/payment': payload } });
    return { isError: paid.isError === true, response: (paid._meta as Record<string, Json> | undefined)?.['x402/payment-response'] };
  } finally {
    await client.close();
  }
}

const payer = privateKeyToAccount(generatePrivateKey());
const faucet = (value: string) => call('POST', '/v1/test/x402/faucet', KEY, { address: payer.address, value_atomic: value });
let consumer = '';
let server: { id: string; payto_address: Hex; gateway_url: string } = { id: '', payto_address: '0x', gateway_url: '' };
let codeBefore: string | undefined;

t.test('the walkthroughs, before a restart', async (t) => {
  t.match(keys.database, `DATA_DIR=${dataDir}`, 'bootstrap names the database it wrote to');
  t.equal(keys.dashboard_url, `${api}/dashboard`, "bootstrap's dashboard link is the running server's, whatever PORT its own terminal has");
  t.match(service.output(), `providers ${SANDBOX}`, 'the start log prints the sandbox providers URL');
  t.match(service.output(), `${SANDBOX}/_sandbox/outbox.html`, 'and the outbox');

  // Walkthrough 1: a browser signup run to provisioned.
  if (chromium) {
    const run = (await call('POST', '/v1/connections/engine/start', KEY, { server_id: 'acme-payments', user_id: 'ana', email })).body;
    const status = (wanted: string[]) => until(async () => {
      const s = (await call('GET', `/v1/connections/engine/${run.run_id}/status`, KEY)).body;
      return wanted.includes(s.status) ? s : undefined;
    }, `the run reaches ${wanted.join(' or ')}`, 120_000);
    t.equal((await status(['needs_verification', 'failed'])).status, 'needs_verification');
    const code = (await outbox()).messages[0]!.code;
    t.equal((await call('POST', `/v1/connections/engine/${run.run_id}/verification`, KEY, { code })).status, 202);
    t.equal((await status(['provisioned', 'failed'])).status, 'provisioned');
    t.equal((await toolCall()).body.success, true, "the signup connection's tool call succeeds");
  }

  // Walkthrough 2: a Pix charge paid by its BR Code.
  consumer = (await call('POST', '/v1/consumers', KEY, { display_name: 'Ana Souza' })).body.id as string;
  t.equal((await call('POST', `/v1/consumers/${consumer}/pix/partner-account`, KEY, { document: '529.982.247-25' })).status, 201);
  t.equal((await call('POST', `/v1/consumers/${consumer}/pix-keys`, KEY, { key_type: 'EVP' })).status, 201);
  t.same(await chargeAndPay(consumer, 1990), { created: 201, status: 'settled' }, 'the first charge is paid');

  // A funded payer and a paid gateway call.
  t.equal((await faucet('5000000')).status, 200);
  server = (await call('POST', '/v1/mcp-servers', ADMIN, { consumer_id: 'cons_1', name: 'Paid tools', slug: 'restart-paid', upstream_url: upstream.url, platform_fee_bps: 250, tools: [{ tool_name: 'echo', description: 'Echo, paid', price: '0.01' }] })).body as typeof server;
  t.match(await paidGatewayCall(server.gateway_url, payer), { isError: false, response: { success: true } }, 'a paid gateway call settles');
  codeBefore = (await outbox()).messages[0]?.code;

});

t.test('after a restart on the same DATA_DIR, the sandbox world is still there', async (t) => {
  // Stop as an operator does, start again on the same DATA_DIR.
  t.equal(await service.stop(), 0, 'SIGTERM drains and exits 0');
  service = await startService(env);

  t.equal(await sandboxOf(), SANDBOX, 'the sandbox providers answer on the same URL');
  t.match(service.output(), /ready at http:\/\/127\.0\.0\.1:\d+ — API reference: \S+ — 1 organization in this database/, 'the ready line counts the organization instead of pointing to bootstrap');
  t.notMatch(service.output(), /npm run cli -- bootstrap/);
  if (chromium) {
    t.equal((await outbox()).messages[0]?.code, codeBefore, 'the outbox still holds the code');
    t.equal((await toolCall()).body.success, true, "the signup connection's credential still works");
  }
  t.same(await chargeAndPay(consumer, 2500), { created: 201, status: 'settled' }, "the walkthrough's consumer charges again, paid by its BR Code");
  t.equal((await faucet('1000000')).status, 200, 'the faucet settles');
  t.match(await paidGatewayCall(server.gateway_url, payer), { isError: false, response: { success: true } }, 'a paid gateway call settles');

  // The chain's balances equal the ledger's: what the payer got from the faucet less the calls the ledger recorded, and what the server earned.
  const rpc = /local chain RPC (http:\/\/127\.0\.0\.1:\d+)/.exec(service.output())![1]!;
  const chain = new EvmSettlement({ rpcUrl: rpc, chainId: BASE_SEPOLIA_CHAIN_ID, token: BASE_SEPOLIA_USDC, facilitatorKey: SANDBOX_FACILITATOR_KEY });
  const db = serviceDb(dataDir);
  await db.connect();
  t.teardown(() => db.end());
  const { rows } = await db.query<{ n: string; sum: string }>('SELECT count(*)::text AS n, coalesce(sum(price_atomic), 0)::text AS sum FROM mcp_calls WHERE server_id = $1', [server.id]);
  t.equal(rows[0]!.n, '2', 'the ledger recorded both paid calls');
  t.equal(await chain.balanceOf(server.payto_address), BigInt(rows[0]!.sum), "the server's address holds what the ledger recorded");
  t.equal(await chain.balanceOf(payer.address), 6_000_000n - BigInt(rows[0]!.sum), "the payer holds the faucet's grants less the recorded calls");
  if (!chromium) t.comment('no Chromium: the signup walkthrough was not run');
});
