import { BankError, type Bank, type BankConsent, type BankTokens, type TransactionPage } from './port.ts';

// The HTTP bank adapter, modeled on the Open Finance Brasil consent flow:
// POST /consents → the person authorises at GET /authorise → the bank
// redirects back with code and state → POST /token → GET transactions, paged
// → DELETE /consents/{id}. The sandbox bank speaks the same protocol.

export type BankConfig = { baseUrl: string; clientId: string; clientSecret: string; timeoutMs?: number };

export class HttpBank implements Bank {
  constructor(
    readonly bankId: string,
    private readonly cfg: BankConfig,
  ) {}

  private async call(method: string, path: string, body?: unknown, bearer?: string): Promise<{ status: number; json: unknown }> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    headers.authorization = bearer ? `Bearer ${bearer}` : `Basic ${Buffer.from(`${this.cfg.clientId}:${this.cfg.clientSecret}`).toString('base64')}`;
    let res: Response;
    try {
      res = await fetch(new URL(path, this.cfg.baseUrl), { method, headers, body: body === undefined ? undefined : JSON.stringify(body), redirect: 'manual', signal: AbortSignal.timeout(this.cfg.timeoutMs ?? 10_000) });
    } catch (err) {
      const name = (err as Error).name;
      throw new BankError(name === 'TimeoutError' || name === 'AbortError' ? 'timeout' : 'unreachable', `bank ${this.bankId} is unreachable: ${(err as Error).message}`);
    }
    const text = await res.text();
    let json: unknown = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = null;
    }
    if (res.status >= 400) throw new BankError('refused', `bank ${this.bankId} answered ${res.status}`, res.status);
    return { status: res.status, json };
  }

  async createConsent(input: { scopes: string[]; redirectUrl: string; consumerRef: string }): Promise<BankConsent> {
    const { json } = await this.call('POST', '/consents', { data: { permissions: input.scopes, loggedUser: { document: { identification: input.consumerRef } }, redirectUri: input.redirectUrl } });
    const d = (json as { data?: { consentId?: string; status?: string; expirationDateTime?: string } })?.data;
    if (!d?.consentId || !d.expirationDateTime) throw new BankError('refused', `bank ${this.bankId} answered without a consent`);
    return { bankConsentId: d.consentId, status: d.status ?? 'AWAITING_AUTHORISATION', expiresAt: d.expirationDateTime };
  }

  authorisationUrl(bankConsentId: string, redirectUrl: string, state: string): string {
    const u = new URL('/authorise', this.cfg.baseUrl);
    u.searchParams.set('consent_id', bankConsentId);
    u.searchParams.set('redirect_uri', redirectUrl);
    u.searchParams.set('state', state);
    u.searchParams.set('client_id', this.cfg.clientId);
    return u.toString();
  }

  async exchangeCode(code: string, redirectUrl: string): Promise<BankTokens> {
    const { json } = await this.call('POST', '/token', { grant_type: 'authorization_code', code, redirect_uri: redirectUrl });
    const t = json as { access_token?: string; refresh_token?: string; expires_in?: number };
    if (!t?.access_token) throw new BankError('refused', `bank ${this.bankId} issued no token`);
    return { accessToken: t.access_token, refreshToken: t.refresh_token ?? null, expiresIn: t.expires_in ?? 3600 };
  }

  async transactions(bankConsentId: string, accessToken: string, page: number, range: { since?: string; until?: string }): Promise<TransactionPage> {
    const q = new URLSearchParams({ page: String(page), 'page-size': '25' });
    if (range.since) q.set('fromBookingDate', range.since);
    if (range.until) q.set('toBookingDate', range.until);
    const { json } = await this.call('GET', `/consents/${encodeURIComponent(bankConsentId)}/transactions?${q}`, undefined, accessToken);
    const j = json as { data?: TransactionPage['transactions']; meta?: { totalPages?: number } };
    return { transactions: j?.data ?? [], totalPages: j?.meta?.totalPages ?? 1 };
  }

  async deleteConsent(bankConsentId: string): Promise<void> {
    await this.call('DELETE', `/consents/${encodeURIComponent(bankConsentId)}`);
  }
}
