import { z } from 'zod';
import { IntString, IsoTime } from './common.ts';

// Facts of a mandate (a person's allowance an agent spends against), stream
// `mandate-<id>`. Amounts are integer minor units as decimal strings.

export const MerchantPinKind = z.enum(['pix-key', 'merchant-id', 'mcc']);
export const Currency = z.enum(['BRL', 'USD', 'MXN', 'COP', 'ARS', 'USDC', 'BRLA']);

/**
 * One currency slot of a mandate (issue 58: the product's unified wallet): its
 * own caps, no FX between slots; a spend is routed to the slot of its payee's
 * currency. `funding_source_id`: the source a directed-pay consent provisioned
 * for the slot, or null.
 */
export const MandateSlot = z.object({
  currency: Currency,
  rail: z.string().nullable(),
  cap_minor: IntString,
  per_tx_cap_minor: IntString,
  funding_source_id: z.string().nullable(),
});

export const MandateCreated = z.object({
  mandate_id: z.string(),
  org_id: z.string(),
  project_id: z.string(),
  consumer_id: z.string(),
  agent_id: z.string(),
  agent_did: z.string(),
  purpose: z.string(),
  display_name: z.string().nullable(),
  intent_note: z.string().nullable(),
  merchant_allowlist: z.array(z.string()).min(1),
  merchant_pin_kind: MerchantPinKind,
  cap_minor: IntString,
  per_tx_cap_minor: IntString,
  currency: Currency,
  expires_at: IsoTime,
  created_at: IsoTime,
  /** A multi-currency mandate's slots, the first mirrored by the members above; absent: one slot, those members. */
  slots: z.array(MandateSlot).min(1).max(8).optional(),
  /** The directed-pay consent that created it, when one did. */
  consent_id: z.string().optional(),
});

/** pause, resume and revoke: the evidence of the move, with its reason (never echoed by the API). */
export const MandateMoved = z.object({
  mandate_id: z.string(),
  from: z.enum(['active', 'paused', 'revoked', 'expired']),
  to: z.enum(['active', 'paused', 'revoked', 'expired']),
  reason: z.string().nullable(),
  at: IsoTime,
});

export const SpendChannel = z.enum(['api', 'card']);

export const MandateSpendApproved = z.object({
  mandate_id: z.string(),
  transaction_id: z.string(),
  channel: SpendChannel,
  amount_minor: IntString,
  currency: z.string(),
  merchant: z.string(),
  description: z.string().nullable(),
  spent_minor: IntString,
  remaining_minor: IntString,
  at: IsoTime,
});

export const MandateSpendDeclined = z.object({
  mandate_id: z.string(),
  transaction_id: z.string(),
  channel: SpendChannel,
  amount_minor: IntString,
  currency: z.string(),
  merchant: z.string(),
  description: z.string().nullable(),
  code: z.string(),
  at: IsoTime,
});

export const MandateCardBound = z.object({
  mandate_id: z.string(),
  card_id: z.string(),
  consumer_id: z.string(),
  issuer: z.enum(['sandbox', 'live']),
  bound_at: IsoTime,
});

export const MandateCardRevoked = z.object({
  mandate_id: z.string(),
  card_id: z.string(),
  revoked_at: IsoTime,
});

/** Value moved between two slots of a mandate through a ramp at its quoted rate (no synthetic FX): the source slot gives `amount_minor`, the destination gains `credited_minor`. */
export const MandateTransferExecuted = z.object({
  mandate_id: z.string(),
  transfer_id: z.string(),
  from_currency: Currency,
  to_currency: Currency,
  amount_minor: IntString,
  credited_minor: IntString,
  /** The quoted rate as a fraction of minor units: credited = floor(amount × numerator / denominator). */
  rate_numerator: IntString,
  rate_denominator: IntString,
  engine: z.string(),
  agent_id: z.string().nullable(),
  purpose: z.string().nullable(),
  /** The source slot's availability after the move. */
  from_available_minor: IntString,
  at: IsoTime,
});

export const MandateTransferDeclined = z.object({
  mandate_id: z.string(),
  transfer_id: z.string(),
  from_currency: Currency,
  to_currency: Currency,
  amount_minor: IntString,
  code: z.string(),
  at: IsoTime,
});

export const mandateEvents = {
  'mandate.created': MandateCreated,
  'mandate.paused': MandateMoved,
  'mandate.resumed': MandateMoved,
  'mandate.revoked': MandateMoved,
  'mandate.expired': MandateMoved,
  'mandate.spend_approved': MandateSpendApproved,
  'mandate.spend_declined': MandateSpendDeclined,
  'mandate.card_bound': MandateCardBound,
  'mandate.card_revoked': MandateCardRevoked,
  'mandate.transfer_executed': MandateTransferExecuted,
  'mandate.transfer_declined': MandateTransferDeclined,
} as const;
