import { z } from 'zod';
import { IsoTime } from './common.ts';

// Facts of open-finance bank consents (stream `bank_consent-<ofb_id>`) and of
// the slot that holds the one open consent per organization, consumer and bank
// (stream `bank_consent_slot-<org>.<consumer>.<bank>`). Tokens are in the vault.

export const BankConsentInitiated = z.object({
  consent_id: z.string(),
  org_id: z.string(),
  project_id: z.string(),
  consumer_id: z.string(),
  bank_id: z.string(),
  bank_consent_id: z.string(),
  scopes: z.array(z.string()),
  redirect_url: z.string(),
  authorisation_url: z.string(),
  wallet_id: z.string().nullable(),
  expires_at: IsoTime,
  created_at: IsoTime,
});

export const BankConsentAuthorised = z.object({ consent_id: z.string(), token_ref: z.string(), token_expires_at: IsoTime, authorized_at: IsoTime });
export const BankConsentClosed = z.object({ consent_id: z.string(), from: z.enum(['pending', 'authorised']), at: IsoTime });

export const StatementRefreshStarted = z.object({ consent_id: z.string(), run_id: z.string(), since: z.string().nullable(), until: z.string().nullable(), at: IsoTime });
export const StatementTransactionsImported = z.object({
  consent_id: z.string(),
  run_id: z.string(),
  wallet_id: z.string().nullable(),
  page: z.number().int(),
  transactions: z.array(z.object({ bank_transaction_id: z.string(), amount_minor: z.string(), currency: z.string(), credit_debit: z.string(), description: z.string(), booked_at: z.string() })),
});
export const StatementRefreshCompleted = z.object({ consent_id: z.string(), run_id: z.string(), imported: z.number().int(), duplicates: z.number().int(), at: IsoTime });
export const StatementRefreshFailed = z.object({ consent_id: z.string(), run_id: z.string(), imported: z.number().int(), duplicates: z.number().int(), failed_page: z.number().int(), error: z.string(), at: IsoTime });

export const SlotClaimed = z.object({ consent_id: z.string(), project_id: z.string(), at: IsoTime });
export const SlotReleased = z.object({ consent_id: z.string(), at: IsoTime });
export const BankConsentOrphaned = z.object({ bank_id: z.string(), bank_consent_id: z.string(), consumer_id: z.string(), reason: z.string(), at: IsoTime });

export const bankConsentEvents = {
  'bank_consent.initiated': BankConsentInitiated,
  'bank_consent.authorised': BankConsentAuthorised,
  'bank_consent.revoked': BankConsentClosed,
  'bank_consent.expired': BankConsentClosed,
  'bank_consent.statement_refresh_started': StatementRefreshStarted,
  'bank_consent.transactions_imported': StatementTransactionsImported,
  'bank_consent.statement_refresh_completed': StatementRefreshCompleted,
  'bank_consent.statement_refresh_failed': StatementRefreshFailed,
  'bank_consent_slot.claimed': SlotClaimed,
  'bank_consent_slot.released': SlotReleased,
  'bank_consent.orphaned': BankConsentOrphaned,
} as const;
