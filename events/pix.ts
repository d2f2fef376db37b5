import { z } from 'zod';
import { IntString, IsoTime } from './common.ts';

// Facts of Pix. Streams: `pix_account-<consumer>` (the consumer's partner
// account at a PSP: funding source, contact verifications, keys),
// `pix_charge-<id>`, `pix_receivement-<psp>.<e2eid>`, and the replay guard
// `pix_notification-<psp>.<message id>`.

const Psp = z.enum(['sandbox', 'live']);

export const PixPartnerAccountOpened = z.object({
  consumer_id: z.string(),
  org_id: z.string(),
  project_id: z.string(),
  account_id: z.string(),
  psp: Psp,
  psp_account: z.string(),
  branch: z.string(),
  ispb: z.string(),
  document: z.string(),
  document_type: z.enum(['CPF', 'CNPJ']),
  /** `psp_kyc`: the PSP verified the document; `sandbox`: declared on a test key. */
  document_source: z.enum(['psp_kyc', 'sandbox']),
  opened_at: IsoTime,
});

export const PixFundingSourceActivated = z.object({
  consumer_id: z.string(),
  org_id: z.string(),
  project_id: z.string(),
  funding_source_id: z.string(),
  account_id: z.string(),
  currency: z.literal('BRL'),
  activated_at: IsoTime,
});

export const PixFundingSourceDeactivated = z.object({ consumer_id: z.string(), funding_source_id: z.string(), reason: z.string().nullable(), deactivated_at: IsoTime });

export const PixContactVerificationStarted = z.object({
  consumer_id: z.string(),
  verification_id: z.string(),
  channel: z.enum(['email', 'phone']),
  endpoint: z.string(),
  /** SHA-256 of the one-time code; the code itself is never recorded. */
  code_hash: z.string(),
  expires_at: IsoTime,
  started_at: IsoTime,
});
/** A wrong code was presented; after CONTACT_CODE_MAX_ATTEMPTS the verification is locked. */
export const PixContactVerificationFailed = z.object({ consumer_id: z.string(), verification_id: z.string(), attempts: z.number().int(), failed_at: IsoTime });
export const PixContactVerified = z.object({ consumer_id: z.string(), verification_id: z.string(), channel: z.enum(['email', 'phone']), endpoint: z.string(), verified_at: IsoTime });

const KeyRow = z.object({ key: z.string(), key_type: z.string() });
export const PixKeyRegistered = z.object({ consumer_id: z.string(), account_id: z.string(), key: z.string(), key_type: z.string(), registered_at: IsoTime });
export const PixKeyDeleted = z.object({ consumer_id: z.string(), account_id: z.string(), key: z.string(), deleted_at: IsoTime });
export const PixKeyRegistrationUncertain = z.object({ consumer_id: z.string(), account_id: z.string(), key_type: z.string(), key: z.string().nullable(), attempted_at: IsoTime });
/** The key cache set to the PSP's inventory: what appeared and what vanished. */
export const PixKeysReconciled = z.object({ consumer_id: z.string(), account_id: z.string(), added: z.array(KeyRow), removed: z.array(z.string()), inventory_count: z.number().int(), reconciled_at: IsoTime });

export const PixChargeCreated = z.object({
  charge_id: z.string(),
  org_id: z.string(),
  project_id: z.string(),
  consumer_id: z.string(),
  account_id: z.string(),
  psp: Psp,
  wallet_id: z.string(),
  amount_minor: IntString,
  currency: z.literal('BRL'),
  txid: z.string(),
  /** `dynamic`: a cob at the PSP; `static`: a BR Code carrying a txid, no cob. */
  kind: z.enum(['dynamic', 'static']),
  transaction_id: z.string().nullable(),
  client_request_id: z.string().nullable(),
  expires_at: IsoTime,
  created_at: IsoTime,
  /** The BR Code ("Pix Copia e Cola") a payer pays: the PSP's for a dynamic charge, ours for a static one; absent on charges recorded before it was kept. */
  br_code: z.string().nullable().optional(),
  /** A dynamic charge's payload location at the PSP (URL without scheme); null for a static one. */
  location: z.string().nullable().optional(),
});
export const PixChargeSettled = z.object({ charge_id: z.string(), end_to_end_id: z.string(), received_minor: IntString, settled_at: IsoTime });

export const Correlation = z.enum(['charge_matched', 'no_correlator_returned', 'no_charge_matched', 'charge_ambiguous', 'not_attempted']);

export const PixReceived = z.object({
  end_to_end_id: z.string(),
  org_id: z.string(),
  project_id: z.string(),
  consumer_id: z.string(),
  account_id: z.string(),
  psp: Psp,
  provider_transaction_type: z.string(),
  provider_transaction_id: z.string().nullable(),
  /** The PSP's amount as it sent it ("12.34"), and in minor units. */
  provider_amount: z.string(),
  received_minor: IntString,
  initiation_type: z.string().nullable(),
  txid: z.string().nullable(),
  paid_at: z.string(),
  correlation: Correlation,
  charge_id: z.string().nullable(),
  /** How the movement reached us: a PSP notification or a lookup. */
  source: z.enum(['notification', 'lookup']),
  received_at: IsoTime,
});
export const PixWalletCredited = z.object({ end_to_end_id: z.string(), consumer_id: z.string(), wallet_id: z.string(), charge_id: z.string(), currency: z.literal('BRL'), amount_minor: IntString, credited_at: IsoTime });
export const PixDevolutionRequested = z.object({
  end_to_end_id: z.string(),
  consumer_id: z.string(),
  devolution_id: z.string(),
  rtr_id: z.string().nullable(),
  amount_minor: IntString,
  /** Debited from this wallet when the receivement had credited it. */
  wallet_id: z.string().nullable(),
  status: z.string(),
  requested_at: IsoTime,
});

export const PixNotificationAccepted = z.object({ psp: Psp, message_id: z.string(), end_to_end_ids: z.array(z.string()), accepted_at: IsoTime });

export const pixEvents = {
  'pix.partner_account_opened': PixPartnerAccountOpened,
  'pix.funding_source_activated': PixFundingSourceActivated,
  'pix.funding_source_deactivated': PixFundingSourceDeactivated,
  'pix.contact_verification_started': PixContactVerificationStarted,
  'pix.contact_verification_failed': PixContactVerificationFailed,
  'pix.contact_verified': PixContactVerified,
  'pix.key_registered': PixKeyRegistered,
  'pix.key_deleted': PixKeyDeleted,
  'pix.key_registration_uncertain': PixKeyRegistrationUncertain,
  'pix.keys_reconciled': PixKeysReconciled,
  'pix.charge_created': PixChargeCreated,
  'pix.charge_settled': PixChargeSettled,
  'pix.received': PixReceived,
  'pix.wallet_credited': PixWalletCredited,
  'pix.devolution_requested': PixDevolutionRequested,
  'pix.notification_accepted': PixNotificationAccepted,
} as const;
