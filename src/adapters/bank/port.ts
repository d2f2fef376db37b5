// The bank port (open finance). One HTTP client serves the sandbox bank and
// live banks alike; only the base URL and client credentials differ.

export type BankConsent = { bankConsentId: string; status: string; expiresAt: string };
export type BankTokens = { accessToken: string; refreshToken: string | null; expiresIn: number };
export type BankTransaction = { transactionId: string; amountMinor: string; currency: string; description: string; bookedAt: string; creditDebit: 'CREDIT' | 'DEBIT' };
export type TransactionPage = { transactions: BankTransaction[]; totalPages: number };

export class BankError extends Error {
  constructor(
    readonly reason: 'refused' | 'unreachable' | 'timeout',
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

export interface Bank {
  readonly bankId: string;
  createConsent(input: { scopes: string[]; redirectUrl: string; consumerRef: string }): Promise<BankConsent>;
  /** Where to send the person to authorise the consent. */
  authorisationUrl(bankConsentId: string, redirectUrl: string, state: string): string;
  exchangeCode(code: string, redirectUrl: string): Promise<BankTokens>;
  transactions(bankConsentId: string, accessToken: string, page: number, range: { since?: string; until?: string }): Promise<TransactionPage>;
  deleteConsent(bankConsentId: string): Promise<void>;
}
