import { isChecksummed, recoverAuthorizationSigner } from '../adapters/chain/signature.ts';
import type { Network } from '../adapters/chain/x402.ts';
import { Rejection } from '../eventstore/handler.ts';

// The verification steps of an EIP-3009 payment, shared by the facilitator
// route (spec 4.15) and the paying MCP gateway, in the facilitator's order:
// shape → addresses → signature (under the token's real domain) → time.
// Each refusal is an X402Refusal with the facilitator's code and HTTP status.

/** Allowed clock skew before validAfter, and the margin kept before validBefore (seconds). */
export const SKEW_SECONDS = 30n;
export const EXPIRY_MARGIN_SECONDS = 6n;

export class X402Refusal extends Rejection {
  constructor(
    readonly status: number,
    code: string,
    message: string,
    details?: Record<string, unknown>,
  ) {
    super(code, message, details);
  }
}

const DIGITS = /^(0|[1-9]\d{0,77})$/;
export const uint = (v: string | number, field: string): bigint => {
  const s = typeof v === 'number' ? (Number.isSafeInteger(v) && v >= 0 ? String(v) : '') : v;
  if (!DIGITS.test(s)) throw new X402Refusal(400, 'invalid_payload', `${field} must be plain decimal digits`, { field });
  return BigInt(s);
};

export type RawAuthorization = { from: string; to: string; value: string | number; validAfter: string | number; validBefore: string | number; nonce: string };
export type CheckedAuthorization = { from: `0x${string}`; to: `0x${string}`; value: bigint; validAfter: bigint; validBefore: bigint; nonce: `0x${string}` };

export function checkShape(a: RawAuthorization, extraAddresses: readonly (readonly [string, string])[] = []): CheckedAuthorization {
  const value = uint(a.value, 'authorization.value');
  const validAfter = uint(a.validAfter, 'authorization.validAfter');
  const validBefore = uint(a.validBefore, 'authorization.validBefore');
  for (const [field, addr] of [['authorization.from', a.from], ['authorization.to', a.to], ...extraAddresses] as const) {
    if (typeof addr !== 'string' || !isChecksummed(addr)) throw new X402Refusal(400, 'malformed_authorization', `${field} is not an EIP-55 checksummed address`, { field });
  }
  if (typeof a.nonce !== 'string' || !/^0x[0-9a-fA-F]{64}$/.test(a.nonce)) throw new X402Refusal(400, 'malformed_authorization', 'authorization.nonce must be 32 bytes of hex', { field: 'authorization.nonce' });
  return { from: a.from as `0x${string}`, to: a.to as `0x${string}`, value, validAfter, validBefore, nonce: a.nonce as `0x${string}` };
}

/** The signer, recovered under the network token's real EIP-712 domain (a wrong domain recovers another address). */
export async function checkSignature(network: Network, a: CheckedAuthorization, signature: string): Promise<string> {
  const signer = await recoverAuthorizationSigner({
    domain: { name: network.domainName, version: network.domainVersion, chainId: network.chainId, verifyingContract: network.token },
    message: a,
    signature,
  });
  if (!signer) throw new X402Refusal(401, 'bad_signature', 'the signature is malformed, high-s, or has an invalid v');
  if (signer !== a.from) throw new X402Refusal(401, 'signer_mismatch', 'the signature was not made by authorization.from (check the EIP-712 domain)', { recovered: signer });
  return signer;
}

/** The validity window against the service's own clock. */
export function checkTime(a: CheckedAuthorization, now: Date): void {
  const sec = BigInt(Math.floor(now.getTime() / 1000));
  if (a.validAfter > sec + SKEW_SECONDS) throw new X402Refusal(422, 'authorization_not_yet_valid', 'validAfter is in the future', { valid_after: a.validAfter.toString() });
  if (sec + EXPIRY_MARGIN_SECONDS >= a.validBefore) throw new X402Refusal(422, 'authorization_expired', 'validBefore has passed (or is too close to settle safely)', { valid_before: a.validBefore.toString() });
}
