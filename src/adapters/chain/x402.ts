import * as ed from '@noble/ed25519';
import type { EvmSettlement } from './settlement.ts';
import { canonicalize } from '../../audit/hash.ts';
import type { SigningKey } from '../../audit/note.ts';

// The x402 facilitator's configuration (its networks and receipt key) and its
// receipt signature: shared by the HTTP routes, the settlement reactor and the
// paying MCP gateway, so it lives below all of them.

export type Network = { name: 'base-sepolia' | 'base'; chainId: number; token: string; domainName: string; domainVersion: string; settlement: EvmSettlement; adapter: string };
export type X402Deps = {
  /** By credential environment: test → base-sepolia, live → base (absent unless the operator enabled mainnet). */
  test: Network | undefined;
  live: Network | undefined;
  /** Per-execution ceiling on mainnet, in USD cents. */
  mainnetCeilingMinor: bigint;
  receiptKey: SigningKey;
  receiptKid: string;
};

export function signReceipt(x: X402Deps, body: Record<string, unknown>): Record<string, unknown> {
  const signature = Buffer.from(ed.sign(Buffer.from(canonicalize(body), 'utf8'), x.receiptKey.secretKey)).toString('base64url');
  return { ...body, alg: 'EdDSA', kid: x.receiptKid, signature };
}

export function receiptJwks(x: X402Deps) {
  return { keys: [{ kty: 'OKP', crv: 'Ed25519', x: Buffer.from(x.receiptKey.publicKey).toString('base64url'), kid: x.receiptKid, use: 'sig', alg: 'EdDSA' }] };
}
