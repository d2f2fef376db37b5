import { createHmac } from 'node:crypto';
import type { Address, Hex } from 'viem';
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from './signature.ts';

// Provisioned receiving addresses: one secp256k1 key per label (an MCP server,
// or an organization's platform wallet), derived from the organization's seed
// (kept in the vault) with HMAC-SHA256. The key is never stored; the sweep
// re-derives it to sign an EIP-3009 transfer that the facilitator submits (so
// provisioned addresses never need ETH for gas).

// viem's accounts, loaded on first use (a process that never provisions or sweeps does not pay for it).
let accounts: Promise<typeof import('viem/accounts')> | undefined;
const accountOf = async (key: Hex) => (await (accounts ??= import('viem/accounts'))).privateKeyToAccount(key);

const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

export function derivePaytoKey(seed: Uint8Array, label: string): Hex {
  for (let i = 0; ; i++) {
    const d = createHmac('sha256', seed).update(`agent-ledger/mcp-payto/v1\n${label}\n${i}`).digest('hex');
    const k = BigInt(`0x${d}`);
    if (k > 0n && k < N) return `0x${d}`;
  }
}

export const paytoAddress = async (seed: Uint8Array, label: string): Promise<Address> => (await accountOf(derivePaytoKey(seed, label))).address;

export type TransferMessage = { from: Address; to: Address; value: bigint; validAfter: bigint; validBefore: bigint; nonce: Hex };

/** The provisioned key's signature on a TransferWithAuthorization (deterministic: RFC 6979). */
export async function signPaytoTransfer(seed: Uint8Array, label: string, domain: { name: string; version: string; chainId: number; verifyingContract: string }, message: TransferMessage): Promise<Hex> {
  const account = await accountOf(derivePaytoKey(seed, label));
  return account.signTypedData({ domain: { ...domain, verifyingContract: domain.verifyingContract as Address }, types: TRANSFER_WITH_AUTHORIZATION_TYPES, primaryType: 'TransferWithAuthorization', message });
}
