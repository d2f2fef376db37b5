import { createHash, randomInt } from 'node:crypto';
import { CONTACT_CODE_MAX_ATTEMPTS, CONTACT_CODE_TTL_MS, CONTACT_VERIFICATION_WINDOW, type PixAccount, pixAccountDecider, pixAccountStream } from '../../commands/pix.ts';
import { canonicalKey, documentDigits, documentType } from '../../commands/pix-format.ts';
import { loadState, Rejection } from '../eventstore/handler.ts';
import { newId } from '../ids.ts';
import type { Ports, RunCommand, Tenant } from './context.ts';
import { readConsumer } from './consumers.ts';
import { consumerNotFound, loadAccount, notConfigured, pspNameFor, pspOf, PspError } from './pix-common.ts';

// A consumer's Pix partner account (see docs/decisions.md): the PSP opens it
// for a consumer whose document (CPF or CNPJ) its KYC verifies, and a Pix
// funding source is activated with it; on test keys a sandbox account opens
// with a declared document. E-mail and phone keys need a recent contact
// verification: a one-time code sent to the endpoint and confirmed.

/** The credential a Pix use case serves: its tenant, and its environment (test keys reach the sandbox PSP). */
export type PixTenant = Tenant & { environment: 'live' | 'test' };

/** Opens the consumer's account at the PSP (`psp_kyc`: its KYC verifies the document) or at the sandbox PSP (`sandbox`: test keys only). */
export async function openPartnerAccount(ports: Pick<Ports, 'db' | 'store' | 'pix'>, run: RunCommand, tenant: PixTenant, consumerId: string, rawDocument: string, source: 'psp_kyc' | 'sandbox'): Promise<PixAccount> {
  if (source === 'sandbox' && tenant.environment !== 'test') throw new Rejection('sandbox_funding_not_permitted', 'sandbox partner accounts take test keys only');
  const consumer = await readConsumer(ports, tenant, consumerId);
  if (!consumer) throw consumerNotFound();
  const document = documentDigits(rawDocument);
  const type = documentType(document);
  if (!type) throw new Rejection('invalid_body', 'document is not a valid CPF or CNPJ (check digits)', { issues: [{ path: ['document'], code: 'invalid_document', message: 'not a valid CPF or CNPJ' }] });
  const existing = await loadState(ports.store, pixAccountStream(consumerId), pixAccountDecider);
  if (existing.state.status === 'open') throw new Rejection('partner_account_exists', 'the consumer already has a partner account', { account_id: existing.state.accountId });
  const pspName = source === 'sandbox' ? 'sandbox' : pspNameFor(tenant);
  const psp = pspOf(ports, pspName);
  let opened;
  try {
    opened = await psp.openAccount({ document, name: consumer.display_name, verifyDocument: source === 'psp_kyc' });
  } catch (err) {
    notConfigured(err);
    if (err instanceof PspError && err.reason === 'refused') throw new Rejection('partner_account_refused', 'the PSP refused to open the account', { provider_status: err.status, provider_code: err.code });
    throw new Rejection('provider_error', 'the PSP did not open the account; retry', { retriable: true, reason: err instanceof PspError ? err.reason : 'error' });
  }
  const r = await run(pixAccountDecider, pixAccountStream(consumerId), {
    type: 'open',
    tenant,
    consumerId,
    accountId: newId('pxa'),
    fundingSourceId: newId('fs'),
    psp: pspName,
    pspAccount: opened.account,
    branch: opened.branch,
    ispb: opened.ispb,
    document,
    documentType: type,
    documentSource: source,
  });
  return r.state as PixAccount;
}

/** Deactivates a Pix funding source of the consumer's account; whether it changed anything. */
export async function deactivateFundingSource(ports: Pick<Ports, 'db' | 'store'>, run: RunCommand, tenant: Tenant, consumerId: string, fundingSourceId: string, reason: string | null): Promise<boolean> {
  await loadAccount(ports, tenant, consumerId);
  const r = await run(pixAccountDecider, pixAccountStream(consumerId), { type: 'deactivate_funding_source', tenant, fundingSourceId, reason });
  return r.changed;
}

const codeHash = (verificationId: string, code: string) => createHash('sha256').update(`${verificationId}:${code}`).digest('hex');

/** Sends a one-time code to an e-mail or phone the consumer wants as a Pix key; only the sandbox answers it (no sender is wired for live keys). */
export async function startContactVerification(ports: Pick<Ports, 'db' | 'store' | 'now'>, run: RunCommand, tenant: PixTenant, consumerId: string, channel: 'email' | 'phone', endpoint: string) {
  const c = canonicalKey(channel === 'email' ? 'EMAIL' : 'PHONE', endpoint);
  if (!c.ok) throw new Rejection('pix_key_invalid', c.reason, { key_type: channel === 'email' ? 'EMAIL' : 'PHONE' });
  await loadAccount(ports, tenant, consumerId);
  // No e-mail or SMS sender is wired: a live key cannot deliver the code.
  if (tenant.environment !== 'test') throw new Rejection('not_wired', 'no e-mail or SMS sender is configured for contact verification');
  const id = newId('pcv');
  const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
  const expiresAt = new Date(ports.now().getTime() + CONTACT_CODE_TTL_MS).toISOString();
  await run(pixAccountDecider, pixAccountStream(consumerId), { type: 'start_contact_verification', tenant, verificationId: id, channel, endpoint: c.key, codeHash: codeHash(id, code), expiresAt });
  return { verification_id: id, channel, endpoint: c.key, expires_at: expiresAt, window: CONTACT_VERIFICATION_WINDOW, verified_at: null, sandbox_code: code };
}

/** Confirms the one-time code; the endpoint then counts as verified for the window. */
export async function confirmContactVerification(ports: Pick<Ports, 'db' | 'store'>, run: RunCommand, tenant: Tenant, consumerId: string, verificationId: string, code: string) {
  await loadAccount(ports, tenant, consumerId);
  const r = await run(pixAccountDecider, pixAccountStream(consumerId), { type: 'confirm_contact_verification', tenant, verificationId, codeHash: codeHash(verificationId, code) });
  const v = (r.state as PixAccount).verifications[verificationId]!;
  if (!v.verifiedAt) throw new Rejection('contact_verification_code_mismatch', 'the code does not match', { attempts_left: Math.max(0, CONTACT_CODE_MAX_ATTEMPTS - v.attempts) });
  return { verification_id: verificationId, channel: v.channel, endpoint: v.endpoint, expires_at: v.expiresAt, window: CONTACT_VERIFICATION_WINDOW, verified_at: v.verifiedAt };
}
