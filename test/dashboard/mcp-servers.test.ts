import t from 'tap';
import type { Hex } from 'viem';
import { x402Client, x402HTTPClient } from '@x402/core/client';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { findChromium } from '../../src/adapters/browser/chromium.ts';
import { freeLoopbackPort } from '../../src/postgres/embedded.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { startUpstream } from '../helpers/mcp-upstream.ts';
import { fundedPayer, registerPaidServer } from '../helpers/x402.ts';
import { chromium, signIn } from './browser.ts';
import { checkLook } from './look-checks.ts';

// MCP servers in real Chromium, over the real local EVM: a tool's price
// changed in the page is what the paying gateway asks next; the call paid at
// that price appears among the server's paid calls and in its earnings and
// platform fees per day; "Sweep the fees now" moves the fee on chain and the
// sweep's transfer is listed. Each page: axe-core clean, no sideways scroll.

if (!(await findChromium())) {
  t.skip('no Chromium found (CHROMIUM_PATH, /usr/bin/chromium or @sparticuz/chromium): the MCP servers page tests did not run', async () => {});
} else {
  const port = await freeLoopbackPort();
  const base = `http://127.0.0.1:${port}`;
  const { app, x402, sandboxProviders } = await testApp(t, { x402: true, providers: true, mcp: { gatewayUrl: base } });
  await app.listen({ host: '127.0.0.1', port });
  const upstream = await startUpstream();
  t.teardown(() => upstream.close());
  const org = await bootstrapOrg(app, 'Toolco');
  const server = await registerPaidServer(app, org, { slug: 'toolco-tools', price: '0.25', feeBps: 1000, upstreamUrl: upstream.url });
  const balance = (a: string) => x402!.test!.settlement.balanceOf(a as Hex);

  /** One echo call through the paying gateway, paid with the x402 reference client: what the 402 asked, and the answer's status. */
  async function paidEcho(text: string) {
    const payer = await fundedPayer(app, org);
    const pay = new x402HTTPClient(registerExactEvmScheme(new x402Client(), { signer: payer as never }));
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18', prefer: 'x402=http' };
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text } } });
    const first = await fetch(server.gateway_url, { method: 'POST', headers, body });
    const required = pay.getPaymentRequiredResponse((n) => first.headers.get(n), await first.json());
    const signature = pay.encodePaymentSignatureHeader(await pay.createPaymentPayload(required));
    const paid = await fetch(server.gateway_url, { method: 'POST', headers: { ...headers, ...signature }, body });
    await paid.text();
    return { asked: (required as unknown as { accepts: { amount: string }[] }).accepts[0]!.amount, status: paid.status };
  }

  const browser = await chromium(t);
  const page = await signIn(await browser.newContext({ locale: 'en-US' }), base, sandboxProviders!.url, 'owner+toolco@example.com');

  t.test('change a price in the page: the gateway asks it, and the paid call shows in calls and earnings', async (t) => {
    await page.goto(`${base}/dashboard/mcp-servers`);
    await checkLook(t, page, 'MCP servers');
    t.match(await page.textContent('#servers'), /Paid tools[\s\S]*toolco-tools[\s\S]*10\.00 %/);
    await page.click(`[data-server="${server.id}"]`);
    await page.waitForURL(`${base}/dashboard/mcp-servers/${server.id}`);
    t.equal(await page.textContent('[data-price="echo"]'), '0.25 USDC');
    await page.fill('#tools tr:has([data-price="echo"]) input[name="price"]', '0.5');
    await page.click('#set-price-echo');
    await page.waitForSelector('#notice:has-text("echo now costs 0.50 USDC a call")');
    const viaApi = (await app.inject({ method: 'GET', url: `/v1/mcp-servers/${server.id}`, headers: { ...org.key, 'x-svc-user': org.ownerId } })).json() as { tools: { tool_name: string; price: string }[] };
    t.equal(viaApi.tools.find((x) => x.tool_name === 'echo')!.price, '0.500000', '/v1 reads the new price');

    const before = await balance(server.payto_address);
    const call = await paidEcho('priced in the page');
    t.same(call, { asked: '500000', status: 200 }, 'the gateway asked the new price, and the call was answered');
    t.equal((await balance(server.payto_address)) - before, 500_000n, "the server's address got it on chain");

    await page.goto(`${base}/dashboard/mcp-servers/${server.id}`);
    await page.waitForSelector('#earnings-chart canvas');
    await checkLook(t, page, 'an MCP server');
    t.match(await page.textContent('#calls'), /echo[\s\S]*0\.50 USDC[\s\S]*0\.05 USDC[\s\S]*completed/);
    const today = new Date().toISOString().slice(0, 10);
    t.match(await page.textContent('#earnings-table'), new RegExp(`${today}[\\s\\S]*0\\.45 USDC[\\s\\S]*0\\.05 USDC`), 'earnings after fees, and the fee, today');
  });

  t.test('a bad price changes nothing and says what to type', async (t) => {
    await page.goto(`${base}/dashboard/mcp-servers/${server.id}`);
    await page.fill('#tools tr:has([data-price="echo"]) input[name="price"]', 'cheap');
    await page.click('#set-price-echo');
    await page.waitForSelector('#notice.error:has-text("is not a price")');
    t.equal(await page.textContent('[data-price="echo"]'), '0.50 USDC');
  });

  t.test('sweep the fees from the page: the transfer is on chain and listed', async (t) => {
    await page.goto(`${base}/dashboard/mcp-servers`);
    const before = await balance(server.payto_address);
    await page.click('#sweep');
    await page.waitForSelector('#notice:has-text("Swept 0.05 USDC from 1 server")');
    t.equal(before - (await balance(server.payto_address)), 50_000n, 'the fee left the server address');
    await page.goto(`${base}/dashboard/mcp-servers/${server.id}`);
    t.match(await page.textContent('#sweeps'), /0\.05 USDC[\s\S]*settled/);
  });
}
