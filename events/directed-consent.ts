import { z } from 'zod';
import { IntString, IsoTime } from './common.ts';
import { Currency, MerchantPinKind } from './mandate.ts';

// Facts of a directed-pay consent (stream `directed_consent-<id>`, issue 58):
// an organization mints a one-shot token carrying a mandate's intent; the
// consumer side submits it once, which creates the mandate (one funding source
// per currency slot). The token itself is never recorded: only its SHA-256.

export const ConsentSlot = z.object({ currency: Currency, rail: z.string(), cap_minor: IntString, per_tx_cap_minor: IntString });

export const DirectedConsentIntent = z.object({
  purpose: z.string(),
  cap_minor: IntString,
  per_tx_cap_minor: IntString,
  currency: Currency,
  mandate_ttl_seconds: z.number().int().positive(),
  merchant_allowlist: z.array(z.string()).min(1),
  merchant_pin_kind: MerchantPinKind,
  slots: z.array(ConsentSlot).min(1).max(8).nullable(),
});

export const DirectedConsentInitiated = z.object({
  consent_id: z.string(),
  org_id: z.string(),
  project_id: z.string(),
  agent_id: z.string(),
  intent: DirectedConsentIntent,
  token_sha256: z.string().regex(/^[0-9a-f]{64}$/),
  expires_at: IsoTime,
  created_at: IsoTime,
});

export const DirectedConsentSubmitted = z.object({
  consent_id: z.string(),
  consumer_id: z.string(),
  mandate_id: z.string(),
  funding_sources: z.array(z.object({ id: z.string(), currency: Currency, rail: z.string() })),
  at: IsoTime,
});

export const directedConsentEvents = {
  'directed_consent.initiated': DirectedConsentInitiated,
  'directed_consent.submitted': DirectedConsentSubmitted,
} as const;
