import { randomBytes } from 'node:crypto';
import type { Hex, PrivateKeyAccount } from 'viem';
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
