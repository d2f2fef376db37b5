import { z } from 'zod';
import { authorizedOf, effectiveStatus, type Mandate } from '../../../commands/mandate.ts';
import { Timestamp } from '../kernel/schemas.ts';

// The wire shapes of mandates (spec 4.7): the mandate, a spend's answer, the
// card and its authorizations.

export const MandateView = z
  .object({
    id: z.string(),
    consumer_id: z.string(),
    agent_id: z.string(),
    purpose: z.string(),
    display_name: z.string().nullable(),
    intent_note: z.string().nullable(),
    merchant_allowlist: z.array(z.string()),
    merchant_pin_kind: z.enum(['pix-key', 'merchant-id', 'mcc']),
    cap_minor: z.string(),
    per_tx_cap_minor: z.string(),
    currency: z.string(),
    status: z.enum(['active', 'paused', 'revoked', 'expired']).describe('`active` (spends are authorized), `paused` (refused until resumed), `revoked` (for good) or `expired` (past `expires_at`).'),
    expires_at: Timestamp,
    created_at: Timestamp,
    slots: z
      .array(
        z.object({
          currency: z.string(),
          rail: z.string().nullable(),
          cap_minor: z.string(),
          per_tx_cap_minor: z.string(),
          authorized_minor: z.string().meta({ description: 'cap_minor plus what transfers moved in, less what they moved out' }),
          spent_minor: z.string(),
          available_minor: z.string(),
          funding_source_id: z.string().nullable(),
        }),
      )
      .optional()
      .meta({ description: 'Its currency slots, each with its own caps (no FX); the first is the one cap_minor/currency above describe' }),
  })
  .meta({ id: 'Mandate' });
type MandateView = z.infer<typeof MandateView>;

export function mandateView(m: Mandate, now: string): MandateView {
  return {
    id: m.id,
    consumer_id: m.consumerId,
    agent_id: m.agentId,
    purpose: m.purpose,
    display_name: m.displayName,
    intent_note: m.intentNote,
    merchant_allowlist: m.allowlist,
    merchant_pin_kind: m.pinKind,
    cap_minor: m.cap.toString(),
    per_tx_cap_minor: m.perTx.toString(),
    currency: m.currency,
    status: effectiveStatus(m, now),
    expires_at: m.expiresAt,
    created_at: m.createdAt,
    slots: m.slots.map((x) => ({
      currency: x.currency,
      rail: x.rail,
      cap_minor: x.cap.toString(),
      per_tx_cap_minor: x.perTx.toString(),
      authorized_minor: authorizedOf(x).toString(),
      spent_minor: x.spent.toString(),
      available_minor: (authorizedOf(x) - x.spent).toString(),
      funding_source_id: x.fundingSourceId,
    })),
  };
}

export const SpendResult = z.object({
  transaction_id: z.string(),
  mandate_id: z.string(),
  amount_minor: z.string(),
  currency: z.string().meta({ description: "The slot's currency the spend drew (a payee spend: the one its payee's kind picked)" }),
  merchant: z.string(),
  decision: z.literal('approved'),
  remaining_minor: z.string().meta({ description: "What is left in the spend's currency slot" }),
  at: Timestamp,
  payee: z.string().optional().meta({ description: 'A payee spend: the payee, as sent' }),
  rail: z.string().nullable().optional().meta({ description: "A payee spend: the slot's rail" }),
  agent_id: z.string().optional().meta({ description: "A payee spend: the mandate's agent" }),
});
export const Card = z.object({ card_id: z.string(), consumer_id: z.string(), status: z.string().describe('The card\'s state at the card network: `active` once bound.'), bound_at: Timestamp });
export const Authorization = z.object({ transaction_id: z.string(), amount_minor: z.string(), currency: z.string(), decision: z.enum(['approved', 'declined']), at: Timestamp });
