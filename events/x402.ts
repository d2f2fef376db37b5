import { z } from 'zod';
import { IntString, IsoTime } from './common.ts';

// Facts of the x402 facilitator. Streams: `x402_nonce-<signer>.<nonce>` (the
// replay guard), `x402_mandate-<key>` (the internal mandate an intent turns
// into, holding the caps), `fauth-<id>` (the foreign authorization itself).

export const X402NonceClaimed = z.object({ signer: z.string(), nonce: z.string(), foreign_authorization_id: z.string(), at: IsoTime });
export const X402NonceReleased = z.object({ foreign_authorization_id: z.string(), reason: z.string(), at: IsoTime });

export const X402MandateOpened = z.object({
  mandate_id: z.string(),
  org_id: z.string(),
  signer: z.string(),
  payee: z.string(),
  resource: z.string(),
  per_tx_cap_minor: IntString,
  total_cap_minor: IntString,
  at: IsoTime,
});
export const X402AmountReserved = z.object({ mandate_id: z.string(), foreign_authorization_id: z.string(), amount_minor: IntString, reserved_minor: IntString, at: IsoTime });
export const X402AmountReleased = z.object({ mandate_id: z.string(), foreign_authorization_id: z.string(), amount_minor: IntString, at: IsoTime });

export const X402AuthorizationVerified = z.object({
  foreign_authorization_id: z.string(),
  org_id: z.string(),
  project_id: z.string(),
  signer: z.string(),
  payee: z.string(),
  nonce: z.string(),
  value_atomic: IntString,
  amount_minor: IntString,
  asset: z.string(),
  chain_id: z.number().int(),
  network: z.enum(['base-sepolia', 'base']),
  mandate_id: z.string(),
  /** The key of the internal mandate's stream (`x402_mandate-<key>`). */
  mandate_key: z.string(),
  valid_after: IntString,
  valid_before: IntString,
  signature: z.string(),
  intent: z.record(z.string(), z.unknown()),
  at: IsoTime,
});
export const X402Executed = z.object({
  foreign_authorization_id: z.string(),
  execution_id: z.string(),
  tx_hash: z.string(),
  adapter: z.string(),
  receipt_id: z.string(),
  receipt: z.record(z.string(), z.unknown()),
  at: IsoTime,
});
export const X402Rejected = z.object({ foreign_authorization_id: z.string(), reject_code: z.string(), detail: z.string(), tx_hash: z.string().nullable(), at: IsoTime });
export const X402SettlementUnknown = z.object({ foreign_authorization_id: z.string(), tx_hash: z.string(), detail: z.string(), at: IsoTime });

export const x402Events = {
  'x402.nonce_claimed': X402NonceClaimed,
  'x402.nonce_released': X402NonceReleased,
  'x402.mandate_opened': X402MandateOpened,
  'x402.amount_reserved': X402AmountReserved,
  'x402.amount_released': X402AmountReleased,
  'x402.authorization_verified': X402AuthorizationVerified,
  'x402.executed': X402Executed,
  'x402.rejected': X402Rejected,
  'x402.settlement_unknown': X402SettlementUnknown,
} as const;
