import { consentDecider, consentStream, type Consent, type ConsentState, orphanDecider, orphanStream, ownConsent, slotDecider, slotStream, illegal } from '../../commands/bank-consent.ts';
import { BankError, type Bank } from '../adapters/bank/port.ts';
import { loadState, Rejection } from '../eventstore/handler.ts';
import { namedConsumer } from './consumers.ts';
import { newId } from '../ids.ts';
import { isoText as TS } from '../postgres/iso-text.ts';
import type { Ports, RunCommand, Tenant } from './context.ts';
import { ListFilter } from './list-filter.ts';

// Bank consents (open finance, spec 4.6): initiation at the bank with one open
// consent per consumer and bank in the organization (the slot), the callback
// that authorises it, the statement import, revocation and the reads.

export const RECON_CYCLE_SECONDS = 3_600;

export type ConsentStatusName = 'pending' | 'authorised' | 'revoked' | 'expired' | 'consumed';
export type BankConsentRow = {
  id: string;
  bank_id: string;
  consumer_id: string;
  status: ConsentStatusName;
  scopes: string[];
  authorisation_url: string | null;
  bank_consent_id: string | null;
  authorized_at: string | null;
  consumed_at: string | null;
  revoked_at: string | null;
  expires_at: string | null;
  token_expires_at: string | null;
  wallet_id: string | null;
  metadata: Record<string, unknown>;
  created_at: string;
};

const COLUMNS = `id, bank_id, consumer_id, status, scopes, authorisation_url, bank_consent_id, ${TS('authorized_at')} AS authorized_at, ${TS('consumed_at')} AS consumed_at,
  ${TS('revoked_at')} AS revoked_at, ${TS('expires_at')} AS expires_at, ${TS('token_expires_at')} AS token_expires_at, wallet_id, metadata, ${TS('created_at')} AS created_at`;

type ConsentPorts = Pick<Ports, 'db' | 'store' | 'banks' | 'vault' | 'now'>;

async function readConsent(ports: Pick<Ports, 'db'>, tenant: Tenant, id: string): Promise<BankConsentRow | undefined> {
  const { rows } = await ports.db.query<BankConsentRow>(`SELECT ${COLUMNS} FROM bank_consents WHERE id = $1 AND org_id = $2 AND project_id = $3`, [id, tenant.orgId, tenant.projectId]);
  return rows[0];
}

/** The project's consent (a sibling project's is not found). */
export async function getBankConsent(ports: Pick<Ports, 'db'>, tenant: Tenant, id: string): Promise<BankConsentRow> {
  const v = await readConsent(ports, tenant, id);
  if (!v) throw new Rejection('not_found', 'bank consent not found');
  return v;
}

function bankOf(ports: Pick<Ports, 'banks'>, bankId: string): Bank {
  const bank = ports.banks.get(bankId);
  if (!bank) throw new Rejection('unknown_bank', `no bank is configured with bank_id ${bankId}`, { bank_id: bankId });
  return bank;
}

const bankCode = (err: BankError) => (err.reason === 'refused' ? 'bank_refused' : 'bank_unavailable');

function bankFailure(err: unknown, what: string): never {
  if (err instanceof BankError) throw new Rejection(bankCode(err), `${what}: ${err.message}`, { reason: err.reason, ...(err.status ? { bank_status: err.status } : {}) });
  throw err;
}

export type CreateConsentInput = { bank_id: string; consumer_id: string; redirect_url: string; scopes: string[]; wallet_id?: string | undefined };

/** Initiate a consent at the bank: the slot taken (or the bank-side consent recorded as an orphan), then the consent written and read back. */
export async function createBankConsent(ports: ConsentPorts, run: RunCommand, tenant: Tenant, body: CreateConsentInput): Promise<BankConsentRow> {
  const bank = bankOf(ports, body.bank_id);
  await namedConsumer(ports, tenant, body.consumer_id);
  const slot = slotStream(tenant.orgId, body.consumer_id, body.bank_id);
  const held = (holder: { projectId: string; consentId: string }) =>
    holder.projectId === tenant.projectId
      ? new Rejection('consent_active_for_consumer', 'this project already holds an open consent for the consumer at this bank; revoke it first', { consent_id: holder.consentId })
      : new Rejection('bank_consent_held_elsewhere', 'another project of the organization holds an open consent for this consumer at this bank', {
          remediation: 'revoke the open consent from the project that holds it, then retry',
          retriable: false,
        });
  const before = (await loadState(ports.store, slot, slotDecider)).state;
  if (before.holder) throw held(before.holder);
  const consentId = newId('ofb');
  let bc;
  try {
    bc = await bank.createConsent({ scopes: body.scopes, redirectUrl: body.redirect_url, consumerRef: body.consumer_id });
  } catch (err) {
    bankFailure(err, 'the bank refused or could not be reached; nothing was written');
  }
  // The bank-side consent exists now: take the slot, or record the orphan.
  const orphan = async (reason: string) => {
    await run(orphanDecider, orphanStream(tenant.orgId), { type: 'record', bankId: body.bank_id, bankConsentId: bc.bankConsentId, consumerId: body.consumer_id, reason }, { expectedRevision: 'any' });
  };
  try {
    await run(slotDecider, slot, { type: 'claim', consentId, projectId: tenant.projectId }, { serialize: true, maxAttempts: 10 });
  } catch (err) {
    if (err instanceof Rejection && err.code === 'slot_taken') {
      await orphan('slot_taken');
      throw held((err.details as { holder: { projectId: string; consentId: string } }).holder);
    }
    await orphan('consent_lock_timeout');
    throw new Rejection('consent_lock_timeout', 'the consent slot could not be taken in time; a bank-side consent was created and recorded as an orphan', { retriable: true });
  }
  const data = {
    consent_id: consentId,
    org_id: tenant.orgId,
    project_id: tenant.projectId,
    consumer_id: body.consumer_id,
    bank_id: body.bank_id,
    bank_consent_id: bc.bankConsentId,
    scopes: body.scopes,
    redirect_url: body.redirect_url,
    authorisation_url: bank.authorisationUrl(bc.bankConsentId, body.redirect_url, consentId),
    wallet_id: body.wallet_id ?? null,
    expires_at: bc.expiresAt,
    created_at: ports.now().toISOString(),
  };
  await run(consentDecider, consentStream(consentId), { type: 'initiate', data }, { expectedRevision: 'no_stream' });
  // Written and acknowledged, yet not readable (the read side did not catch up in time): the spec's 500, never a 404.
  const created = await readConsent(ports, tenant, consentId);
  if (!created) throw new Rejection('consent_disappeared', 'the consent was written but cannot be read yet: read it by id (GET) before creating another', { consent_id: consentId, retriable: false });
  return created;
}

/** Finalise with the code the bank returned: pending → authorised, the tokens in the vault. */
export async function authoriseBankConsent(ports: ConsentPorts, run: RunCommand, tenant: Tenant, id: string, authCode: string): Promise<BankConsentRow> {
  const c = ownConsent((await loadState(ports.store, consentStream(id), consentDecider)).state, tenant);
  if (c.status !== 'pending') throw illegal(c.status, 'authorised');
  if (!c.bankConsentId) throw new Rejection('missing_bank_consent_id', 'the consent has no bank-side id');
  let tokens;
  try {
    tokens = await bankOf(ports, c.bankId).exchangeCode(authCode, c.redirectUrl);
  } catch (err) {
    bankFailure(err, 'the bank refused the code or could not be reached; the consent stays pending');
  }
  const tokenRef = await ports.vault.put(tenant.orgId, 'bank_tokens', Buffer.from(JSON.stringify(tokens)));
  await run(consentDecider, consentStream(c.id), { type: 'authorise', tenant, tokenRef, tokenExpiresAt: new Date(ports.now().getTime() + tokens.expiresIn * 1000).toISOString() }, { serialize: true });
  return getBankConsent(ports, tenant, c.id);
}

/** Import the statement page by page, deduplicated by the bank's transaction id; a failed page keeps the pages before it. */
export async function refreshBankStatement(ports: ConsentPorts, run: RunCommand, tenant: Tenant, id: string, range: { since?: string | undefined; until?: string | undefined }) {
  const c = ownConsent((await loadState(ports.store, consentStream(id), consentDecider)).state, tenant);
  if (c.status !== 'authorised') throw new Rejection('consent_not_authorised', 'the consent is not authorised', { status: c.status });
  const secret = c.tokenRef ? await ports.vault.get(tenant.orgId, c.tokenRef) : undefined;
  if (!secret || !c.bankConsentId) throw new Rejection('consent_missing_tokens', 'no access token or bank-side id is stored for this consent');
  const { accessToken } = JSON.parse(secret.toString('utf8')) as { accessToken: string };
  const bank = bankOf(ports, c.bankId);
  const runId = newId('run');
  const stream = consentStream(c.id);
  const at = () => ports.now().toISOString();
  const record = (events: Parameters<typeof consentDecider.decide>[0] & { type: 'record' }) => run(consentDecider, stream, events, { serialize: true });
  await record({ type: 'record', events: [{ type: 'bank_consent.statement_refresh_started', data: { consent_id: c.id, run_id: runId, since: range.since ?? null, until: range.until ?? null, at: at() } }] });
  let imported = 0;
  let duplicates = 0;
  for (let page = 1, pages = 1; page <= pages; page++) {
    let result;
    try {
      result = await bank.transactions(c.bankConsentId, accessToken, page, { ...(range.since ? { since: range.since } : {}), ...(range.until ? { until: range.until } : {}) });
    } catch (err) {
      await record({ type: 'record', events: [{ type: 'bank_consent.statement_refresh_failed', data: { consent_id: c.id, run_id: runId, imported, duplicates, failed_page: page, error: (err as Error).message, at: at() } }] });
      if (err instanceof BankError) throw new Rejection(bankCode(err), `the bank failed on page ${page}; pages before it are kept, a retry imports only what is missing`, { run_id: runId, imported, duplicates, failed_page: page });
      throw err;
    }
    pages = result.totalPages;
    const txs = result.transactions.map((t) => ({ bank_transaction_id: t.transactionId, amount_minor: t.amountMinor, currency: t.currency, credit_debit: t.creditDebit, description: t.description, booked_at: t.bookedAt }));
    const r = await run(consentDecider, stream, { type: 'import_page', runId, page, transactions: txs }, { serialize: true });
    const fresh = r.events[0]?.type === 'bank_consent.transactions_imported' ? r.events[0].data.transactions.length : 0;
    imported += fresh;
    duplicates += txs.length - fresh;
  }
  await record({ type: 'record', events: [{ type: 'bank_consent.statement_refresh_completed', data: { consent_id: c.id, run_id: runId, imported, duplicates, at: at() } }] });
  return { consent_id: c.id, run_id: runId, imported, duplicates, next_recon_cycle_within_seconds: RECON_CYCLE_SECONDS };
}

/** Revoke: the bank-side consent deleted (already gone is fine), the consent closed and the slot released. */
export async function revokeBankConsent(ports: ConsentPorts, run: RunCommand, tenant: Tenant, id: string): Promise<BankConsentRow> {
  const c: Consent = ownConsent((await loadState(ports.store, consentStream(id), consentDecider)).state as ConsentState, tenant);
  if (['revoked', 'expired', 'consumed'].includes(c.status)) throw illegal(c.status, 'revoked');
  try {
    await bankOf(ports, c.bankId).deleteConsent(c.bankConsentId);
  } catch (err) {
    if (!(err instanceof BankError && err.status === 404)) bankFailure(err, 'the bank could not delete the consent; nothing changed');
  }
  await run(consentDecider, consentStream(c.id), { type: 'close', tenant, to: 'revoked' }, { serialize: true });
  await run(slotDecider, slotStream(c.orgId, c.consumerId, c.bankId), { type: 'release', consentId: c.id }, { serialize: true });
  return getBankConsent(ports, tenant, c.id);
}

/** The project's consents, newest first. */
export async function listBankConsents(ports: Pick<Ports, 'db'>, tenant: Tenant, q: { consumer_id?: string | undefined; status?: ConsentStatusName | undefined; limit: number }): Promise<BankConsentRow[]> {
  const f = new ListFilter(tenant, q.limit);
  if (q.consumer_id) f.add('consumer_id = ?', q.consumer_id);
  if (q.status) f.add('status = ?', q.status);
  const { rows } = await ports.db.query<BankConsentRow>(`SELECT ${COLUMNS} FROM bank_consents WHERE ${f.where} ORDER BY bank_consents.created_at DESC, id LIMIT $3`, f.params);
  return rows;
}
