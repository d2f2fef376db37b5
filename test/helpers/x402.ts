import { randomBytes } from 'node:crypto';
import type { Hex, PrivateKeyAccount } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from '../../src/adapters/chain/signature.ts';
import { BASE_SEPOLIA_CHAIN_ID, BASE_SEPOLIA_USDC } from '../../src/adapters/chain/local-chain.ts';

/**
 * The body of POST /v1/facilitator/x402/executions: a USDC
 * TransferWithAuthorization on the local chain signed by `payer` for `value`
 * atomic units to `payee` (valid from a minute ago for an hour, a fresh
 * nonce), with its intent (`intent` overrides the resource and caps).
 */
export async function signedExecution(payer: PrivateKeyAccount, payee: Hex, value: bigint, intent: Record<string, string> = {}) {
  const now = BigInt(Math.floor(Date.now() / 1000));
  const message = { from: payer.address, to: payee, value, validAfter: now - 60n, validBefore: now + 3600n, nonce: `0x${randomBytes(32).toString('hex')}` as Hex };
  const domain = { name: 'USDC', version: '2', chainId: BASE_SEPOLIA_CHAIN_ID, verifyingContract: BASE_SEPOLIA_USDC as Hex };
  const signature = await payer.signTypedData({ domain, types: TRANSFER_WITH_AUTHORIZATION_TYPES, primaryType: 'TransferWithAuthorization', message });
  return {
    authorization: { ...message, value: message.value.toString(), validAfter: message.validAfter.toString(), validBefore: message.validBefore.toString() },
    domain,
    signature,
    intent: { payee, resource: 'https://api.example.com/report', max_amount_minor: '100000', total_cap_minor: '1000000', ...intent },
  };
}

type Injector = { inject(o: { method: 'POST'; url: string; headers: Record<string, string>; payload?: unknown }): Promise<{ statusCode: number; body: string; json(): any }> };
type OrgKeys = { key: Record<string, string>; ownerId: string };

/** A monetized MCP server registered through the API (an admin in x-svc-user), its tools echo and forecast priced. */
export async function registerPaidServer(app: Injector, org: OrgKeys, o: { slug: string; price: string; feeBps: number; upstreamUrl: string }) {
  const r = await app.inject({
    method: 'POST',
    url: '/v1/mcp-servers',
    headers: { ...org.key, 'x-svc-user': org.ownerId },
    payload: { consumer_id: 'cons_1', name: 'Paid tools', slug: o.slug, upstream_url: o.upstreamUrl, platform_fee_bps: o.feeBps, tools: [{ tool_name: 'echo', description: 'Echo, paid', price: o.price }, { tool_name: 'forecast', price: '0.5' }] },
  });
  if (r.statusCode !== 201) throw new Error(r.body);
  return r.json() as { id: string; payto_address: string; gateway_url: string };
}

/** A fresh payer holding 5 test USDC on the local chain (the faucet). */
export async function fundedPayer(app: Injector, org: OrgKeys): Promise<PrivateKeyAccount> {
  const payer = privateKeyToAccount(generatePrivateKey());
  const f = await app.inject({ method: 'POST', url: '/v1/test/x402/faucet', headers: org.key, payload: { address: payer.address, value_atomic: '5000000' } });
  if (f.statusCode !== 200) throw new Error(f.body);
  return payer;
}
