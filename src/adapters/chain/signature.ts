import { keccak_256 } from '@noble/hashes/sha3.js';
import type { Hex } from 'viem';

// EIP-712 TransferWithAuthorization signatures, recovered with viem (loaded on
// first use: ~0.4 s of CPU that a process which never checks a signature does
// not pay). The EIP-55 check runs on every payment's shape, synchronously, so
// it is computed here from its definition (keccak-256 of the lowercase hex).

const SECP256K1_HALF_N = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n;

/** EIP-3009's typed data (the same for every USDC deployment). */
export const TRANSFER_WITH_AUTHORIZATION_TYPES = {
  TransferWithAuthorization: [
    { name: 'from', type: 'address' },
    { name: 'to', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'validAfter', type: 'uint256' },
    { name: 'validBefore', type: 'uint256' },
    { name: 'nonce', type: 'bytes32' },
  ],
} as const;

/** EIP-55: 0x and 40 hex digits, each letter upper case exactly when its nibble of keccak-256(lowercase hex) is 8 or more. */
export function isChecksummed(a: string): boolean {
  if (!/^0x[0-9a-fA-F]{40}$/.test(a)) return false;
  const lower = a.slice(2).toLowerCase();
  const hash = keccak_256(new TextEncoder().encode(lower));
  let expected = '0x';
  for (let i = 0; i < 40; i++) {
    const nibble = (hash[i >> 1]! >> (i % 2 ? 0 : 4)) & 0xf;
    expected += nibble >= 8 ? lower.charAt(i).toUpperCase() : lower.charAt(i);
  }
  return expected === a;
}

let viem: Promise<typeof import('viem')> | undefined;

export type TypedAuthorization = {
  domain: { name: string; version: string; chainId: number; verifyingContract: string };
  message: { from: string; to: string; value: bigint; validAfter: bigint; validBefore: bigint; nonce: string };
  signature: string;
};

/** The recovered signer, or null when the signature is malformed, high-s, or v is not 27/28. */
export async function recoverAuthorizationSigner(a: TypedAuthorization): Promise<string | null> {
  if (!/^0x[0-9a-fA-F]{130}$/.test(a.signature)) return null;
  const s = BigInt(`0x${a.signature.slice(66, 130)}`);
  const v = parseInt(a.signature.slice(130, 132), 16);
  if (s > SECP256K1_HALF_N || (v !== 27 && v !== 28)) return null;
  const { recoverTypedDataAddress } = await (viem ??= import('viem'));
  try {
    return await recoverTypedDataAddress({
      domain: { ...a.domain, verifyingContract: a.domain.verifyingContract as Hex },
      types: TRANSFER_WITH_AUTHORIZATION_TYPES,
      primaryType: 'TransferWithAuthorization',
      message: { ...a.message, from: a.message.from as Hex, to: a.message.to as Hex, nonce: a.message.nonce as Hex },
      signature: a.signature as Hex,
    });
  } catch {
    return null;
  }
}
