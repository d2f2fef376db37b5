import { pixChargeDecider, pixChargeStream } from '../../commands/pix.ts';
import { minorToValor } from '../../commands/pix-format.ts';
import { emvText, staticBrCode } from '../../commands/pix-brcode.ts';
import type { PspCob } from '../adapters/psp/port.ts';
import { Rejection } from '../eventstore/handler.ts';
import { newId, randomString } from '../ids.ts';
import { isoText as TS } from '../postgres/iso-text.ts';
import type { Ports, RunCommand, Tenant } from './context.ts';
import { readConsumer } from './consumers.ts';
import { consumerNotFound, loadAccount, notConfigured, pspOf, PspError } from './pix-common.ts';
import { type AccountRow, recordReceivement, type Runner } from './pix-receive.ts';

// Pix charges of a consumer's Pix wallet. A dynamic charge is a `cob` at the
// PSP (txid of 32 alphanumerics); a static one is a BR Code carrying a txid the
// PSP does not know (no client request id, several may share a txid). Each
// holds its BR Code ("Pix Copia e Cola": the PSP's for a dynamic charge, ours
// for a static one). Read by charge id, mint transaction id (the txid, or the
// transaction_id given at creation) or client request id; a pending dynamic
// charge is checked with the PSP on read, and a Pix the PSP reports for it is
// recorded as if notified.

export type ChargeRow = { charge_id: string; consumer_id: string; br_code: string | null; location: string | null; status: string; amount_minor: string; currency: string; wallet_id: string; created_at: string; settled_at: string | null; transaction_id: string | null; client_request_id: string | null; txid: string; kind: 'dynamic' | 'static'; end_to_end_id: string | null; expires_at: string; account_id: string; psp: 'sandbox' | 'live' };
export type ChargeProvider = { result: string; identity_verified: boolean };

const COLUMNS = `id AS charge_id, consumer_id, br_code, location, status, amount_minor::text, currency, wallet_id, ${TS('created_at')} AS created_at, ${TS('settled_at')} AS settled_at, transaction_id, client_request_id, txid, kind, end_to_end_id, ${TS('expires_at')} AS expires_at, account_id, psp`;

/** A pending charge past its expiry reads as expired. */
export function chargeStatusOf(r: ChargeRow, now: Date): string {
  if (r.status === 'pending' && Date.parse(r.expires_at) <= now.getTime()) return 'expired';
  return r.status;
}

export async function readCharges(ports: Pick<Ports, 'db'>, tenant: Tenant, consumerId: string, reference: string): Promise<ChargeRow[]> {
  const { rows } = await ports.db.query<ChargeRow>(
    `SELECT ${COLUMNS} FROM pix_charges WHERE consumer_id = $1 AND org_id = $2 AND project_id = $3 AND (id = $4 OR txid = $4 OR transaction_id = $4 OR client_request_id = $4) ORDER BY pix_charges.created_at, id LIMIT 10`,
    [consumerId, tenant.orgId, tenant.projectId, reference],
  );
  return rows;
}

export type CreateChargeInput = { amount_minor: number; transaction_id?: string | undefined; client_request_id?: string | undefined; static?: boolean | undefined; txid?: string | undefined; merchant_city?: string | undefined; expires_in_seconds?: number | undefined };

/** Create a charge crediting the consumer's active Pix wallet: a cob at the PSP (dynamic) or a static BR Code. */
export async function createPixCharge(ports: Pick<Ports, 'db' | 'store' | 'pix' | 'now'>, run: RunCommand, tenant: Tenant, consumerId: string, body: CreateChargeInput): Promise<ChargeRow> {
  const a = await loadAccount(ports, tenant, consumerId);
  const wallet = Object.entries(a.fundingSources).find(([, active]) => active)?.[0];
  if (!wallet) throw new Rejection('wallet_not_active', 'the consumer has no active Pix funding source');
  const id = newId('pxc');
  const now = ports.now();
  const expiresIn = body.expires_in_seconds ?? 3600;
  const chave = Object.keys(a.keys)[0];
  if (!chave) throw new Rejection('pix_key_required', 'a charge needs a Pix key on the account (the BR Code names it, or the PSP charges to it): register one first');
  let txid: string;
  let brCode: string | null;
  let location: string | null = null;
  if (body.static) {
    txid = body.txid ?? randomString(25);
    const holder = (await readConsumer(ports, tenant, a.consumerId))?.display_name ?? '';
    brCode = staticBrCode({ key: chave, txid, amount: minorToValor(BigInt(body.amount_minor)), merchantName: emvText(holder, 25, 'RECEBEDOR'), merchantCity: body.merchant_city ?? 'SAO PAULO' });
  } else {
    txid = randomString(32);
    try {
      // The PSP draws the payload location and the BR Code naming it; we keep what it answered.
      const cob = await pspOf(ports, a.psp).createCob({ txid, valor: minorToValor(BigInt(body.amount_minor)), chave, expiracao: expiresIn });
      brCode = cob.pixCopiaECola;
      location = cob.location;
    } catch (err) {
      notConfigured(err);
      const e = err instanceof PspError ? err : null;
      throw new Rejection('provider_error', 'the PSP did not create the charge', { retriable: e?.reason !== 'refused', provider_status: e?.status ?? null, provider_code: e?.code ?? null });
    }
  }
  await run(pixChargeDecider, pixChargeStream(id), {
    type: 'create',
    data: {
      charge_id: id, org_id: tenant.orgId, project_id: tenant.projectId, consumer_id: a.consumerId, account_id: a.accountId, psp: a.psp, wallet_id: wallet,
      amount_minor: String(body.amount_minor), currency: 'BRL', txid, kind: body.static ? 'static' : 'dynamic', transaction_id: body.transaction_id ?? null,
      client_request_id: body.static ? null : (body.client_request_id ?? null), expires_at: new Date(now.getTime() + expiresIn * 1000).toISOString(), created_at: now.toISOString(),
      br_code: brCode, location,
    },
  }, { expectedRevision: 'no_stream' });
  const [row] = await readCharges(ports, tenant, a.consumerId, id);
  return row!;
}

/** The one charge a reference names (of a consumer of the organization). */
async function oneCharge(ports: Pick<Ports, 'db'>, tenant: Tenant, consumerId: string, reference: string): Promise<ChargeRow> {
  if (!(await readConsumer(ports, tenant, consumerId))) throw consumerNotFound();
  const rows = await readCharges(ports, tenant, consumerId, reference);
  if (rows.length === 0) throw new Rejection('not_found', 'charge not found');
  if (new Set(rows.map((r) => r.charge_id)).size > 1) throw new Rejection('charge_reference_ambiguous', 'the reference matches several charges; use the charge id', { matches: rows.length, charge_ids: rows.map((r) => r.charge_id) });
  return rows[0]!;
}

/** Read a charge; a pending dynamic one is checked with the PSP, and a Pix it reports is recorded. */
export async function getPixCharge(ports: Pick<Ports, 'db' | 'pix' | 'now'>, run: RunCommand, tenant: Tenant, consumerId: string, reference: string): Promise<{ row: ChargeRow; provider: ChargeProvider | null }> {
  let row = await oneCharge(ports, tenant, consumerId, reference);
  if (row.kind === 'static' || chargeStatusOf(row, ports.now()) !== 'pending') return { row, provider: null };
  let cob: PspCob;
  try {
    cob = await pspOf(ports, row.psp).getCob(row.txid);
  } catch (err) {
    notConfigured(err);
    throw new Rejection('provider_error', 'the PSP did not answer about this charge', { reason: 'provider_did_not_answer', retriable: true });
  }
  if (cob.txid !== row.txid) throw new Rejection('provider_error', 'the PSP answered for a different cob', { reason: 'provider_answered_for_different_cob', retriable: true });
  const { rows: acc } = await ports.db.query<AccountRow>('SELECT consumer_id, org_id, project_id, account_id, psp, psp_account FROM pix_accounts WHERE account_id = $1', [row.account_id]);
  const keys = await ports.db.query('SELECT 1 FROM pix_keys WHERE consumer_id = $1 AND key = $2', [consumerId, cob.chave]);
  // A Pix the PSP reports for this cob that we were not notified of: record it now.
  if (acc[0] && cob.pix.length > 0) {
    const runner: Runner = (d, s, c, o) => run(d, s, c, o);
    for (const p of cob.pix) if (p.account === acc[0].psp_account) await recordReceivement(ports, runner, acc[0], p, 'lookup');
    row = (await readCharges(ports, tenant, consumerId, row.charge_id))[0]!;
  }
  return { row, provider: { result: cob.status, identity_verified: keys.rowCount === 1 } };
}

/** The BR Code of the charge a reference names. */
export async function chargeBrCode(ports: Pick<Ports, 'db'>, tenant: Tenant, consumerId: string, reference: string): Promise<string> {
  const brCode = (await oneCharge(ports, tenant, consumerId, reference)).br_code;
  if (!brCode) throw new Rejection('not_found', 'this charge was recorded without a BR Code');
  return brCode;
}

export type TestPaymentInput = { consumer_id: string; charge_reference?: string | undefined; br_code?: string | undefined; key?: string | undefined; txid?: string | undefined; amount_minor?: number | undefined; deliveries?: number | undefined };

/** A simulated payer pays a charge, a BR Code or a key at the sandbox PSP, which notifies the service. */
export async function simulatePixPayment(ports: Pick<Ports, 'db' | 'store' | 'pix'>, tenant: Tenant, body: TestPaymentInput): Promise<{ end_to_end_id: string; deliveries: number[] }> {
  const a = await loadAccount(ports, tenant, body.consumer_id);
  let input: { txid?: string; chave?: string; valor?: string; pixCopiaECola?: string; entregas?: number } = { entregas: body.deliveries ?? 1 };
  if (body.br_code !== undefined) input = { ...input, pixCopiaECola: body.br_code, ...(body.amount_minor !== undefined ? { valor: minorToValor(BigInt(body.amount_minor)) } : {}) };
  else if (body.charge_reference !== undefined) {
    const rows = await readCharges(ports, tenant, body.consumer_id, body.charge_reference);
    if (rows.length === 0) throw new Rejection('not_found', 'charge not found');
    if (rows.length > 1) throw new Rejection('charge_reference_ambiguous', 'the reference matches several charges');
    const c = rows[0]!;
    input = c.kind === 'dynamic' ? { ...input, txid: c.txid } : { ...input, txid: c.txid, chave: Object.keys(a.keys)[0] ?? '', valor: minorToValor(BigInt(body.amount_minor ?? c.amount_minor)) };
  } else input = { ...input, chave: body.key!, valor: minorToValor(BigInt(body.amount_minor ?? 100)), ...(body.txid ? { txid: body.txid } : {}) };
  try {
    const r = await pspOf(ports, 'sandbox').simulatePayment(input);
    return { end_to_end_id: r.endToEndId, deliveries: r.deliveries };
  } catch (err) {
    throw new Rejection('payment_refused', 'the sandbox PSP refused the payment', { provider_code: err instanceof PspError ? err.code : null });
  }
}
