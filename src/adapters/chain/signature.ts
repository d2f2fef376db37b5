import { getAddress, type Hex, isAddress, recoverTypedDataAddress } from 'viem';

// EIP-712 TransferWithAuthorization signatures, recovered with viem.

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

export const isChecksummed = (a: string) => isAddress(a, { strict: false }) && getAddress(a) === a;

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
