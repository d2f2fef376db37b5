import { createHmac, timingSafeEqual } from 'node:crypto';
import { pixNotificationDecider, pixNotificationStream, pixReceivementDecider, pixReceivementStream, type PixReceivementState } from '../../commands/pix.ts';
import { minorToValor } from '../../commands/pix-format.ts';
import type { PspPix } from '../adapters/psp/port.ts';
import { loadState, Rejection } from '../eventstore/handler.ts';
import { randomString } from '../ids.ts';
import type { Ports, RunCommand, Tenant } from './context.ts';
import { loadAccount, notConfigured, pspOf, PspError } from './pix-common.ts';
import { type AccountRow, recordReceivement } from './pix-receive.ts';

// Receivements: the PSP's notifications of received Pix (verified the
// Standard Webhooks way: HMAC-SHA256 over "<id>.<timestamp>.<body>", the
// timestamp within 5 minutes of our clock, a message id accepted once), the
// lookup of one receivement by end-to-end id with its devolutions, and a
// devolution.

export const NOTIFICATION_TOLERANCE_S = 300;

/** Spec Part 8: 16 to 64 alphanumerics; checked once the consumer is known, so another tenant's consumer answers 404 first. */
const END_TO_END_ID = /^[A-Za-z0-9]{16,64}$/;
function checkEndToEndId(id: string): void {
  if (!END_TO_END_ID.test(id)) throw new Rejection('invalid_params', 'the path is invalid', { issues: [{ path: ['endToEndId'], code: 'invalid_format', message: '16 to 64 letters and digits' }] });
}

const DEVOLUTION_STATUS: Record<string, string> = { EM_PROCESSAMENTO: 'processing', DEVOLVIDO: 'returned', NAO_REALIZADO: 'failed' };
const devolutionStatus = (s: string) => DEVOLUTION_STATUS[s] ?? s.toLowerCase();

const accountRow = async (ports: Pick<Ports, 'db'>, psp: string, pspAccount: string) =>
  (await ports.db.query<AccountRow>('SELECT consumer_id, org_id, project_id, account_id, psp, psp_account FROM pix_accounts WHERE psp = $1 AND psp_account = $2', [psp, pspAccount])).rows[0];

/** Standard Webhooks verification with our clock; true when one `v1,` signature matches. */
export function verifySignature(secret: string, id: string, timestamp: string, body: string, header: string): boolean {
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest();
  return header.split(' ').some((part) => {
    const [v, sig] = part.split(',');
    if (v !== 'v1' || !sig) return false;
    const got = Buffer.from(sig, 'base64');
    return got.length === expected.length && timingSafeEqual(got, expected);
  });
}

/** A PSP's notification as it came: its Standard Webhooks headers ('' when absent), the exact body text, and the parsed items. */
export type PixNotification = { psp: 'sandbox' | 'live'; id: string; timestamp: string; signature: string; raw: string; pix: { endToEndId: string }[] };

/** Verifies a notification and records each notified Pix the PSP confirms on one of our accounts; the message id is accepted once. */
export async function receivePixNotification(ports: Pick<Ports, 'db' | 'store' | 'pix' | 'now'>, run: RunCommand, n: PixNotification): Promise<{ recorded: string[]; ignored: string[] }> {
  const psp = n.psp === 'live' ? ports.pix.live : ports.pix.sandbox;
  if (!psp || !psp.webhookSecret) throw new Rejection('not_found', 'no such PSP');
  const { id, timestamp: ts } = n;
  if (!id || !/^\d{1,12}$/.test(ts) || !verifySignature(psp.webhookSecret, id, ts, n.raw, n.signature)) throw new Rejection('invalid_signature', 'the notification signature does not verify');
  if (Math.abs(ports.now().getTime() / 1000 - Number(ts)) > NOTIFICATION_TOLERANCE_S) throw new Rejection('timestamp_out_of_tolerance', `the notification timestamp is more than ${NOTIFICATION_TOLERANCE_S} seconds from our clock`);
  const guard = pixNotificationStream(n.psp, id.slice(0, 200));
  if ((await loadState(ports.store, guard, pixNotificationDecider)).state.seen) throw new Rejection('webhook_replayed', 'this notification was already received');
  const recorded: string[] = [];
  const ignored: string[] = [];
  let owner: AccountRow | undefined;
  for (const item of n.pix) {
    // The notification says what happened; the PSP's record says to which account, and confirms it.
    let pix: PspPix | null;
    try {
      pix = await psp.getPix(item.endToEndId);
    } catch {
      throw new Rejection('provider_error', 'the PSP did not confirm the notified Pix; deliver again later', { reason: 'provider_did_not_answer', retriable: true });
    }
    const account = pix ? await accountRow(ports, n.psp, pix.account) : undefined;
    if (!pix || !account) {
      ignored.push(item.endToEndId);
      continue;
    }
    owner ??= account;
    if (await recordReceivement(ports, (d, s, c, o) => run(d, s, c, o), account, pix, 'notification')) recorded.push(item.endToEndId);
    else ignored.push(item.endToEndId);
  }
  if (owner) await run(pixNotificationDecider, guard, { type: 'accept', psp: n.psp, messageId: id, endToEndIds: recorded }, { orgId: owner.org_id, projectId: owner.project_id, expectedRevision: 'no_stream' });
  return { recorded, ignored };
}

export type Correlation = 'charge_matched' | 'no_correlator_returned' | 'no_charge_matched' | 'charge_ambiguous' | 'not_attempted';

/** One Pix movement of the consumer's account by end-to-end id, recorded if we were not told of it, with its correlation and devolutions. */
export async function getReceivement(ports: Pick<Ports, 'db' | 'store' | 'pix' | 'now'>, run: RunCommand, tenant: Tenant, consumerId: string, endToEndId: string) {
  const a = await loadAccount(ports, tenant, consumerId);
  checkEndToEndId(endToEndId);
  if (!Object.values(a.fundingSources).some(Boolean)) throw new Rejection('no_active_funding_source', 'the consumer has no active Pix funding source');
  let pix: PspPix | null;
  try {
    pix = await pspOf(ports, a.psp).getPix(endToEndId);
  } catch (err) {
    notConfigured(err);
    throw new Rejection('provider_error', 'the PSP did not answer', { reason: err instanceof PspError && err.reason === 'malformed' ? 'provider_answer_unreadable' : 'provider_did_not_answer', retriable: true });
  }
  if (!pix || pix.account !== a.pspAccount) throw new Rejection('not_found', 'no such movement on this account');
  if (pix.tipo !== 'PIX_RECEBIDO') {
    return {
      end_to_end_id: pix.endToEndId, received: false, provider_transaction_type: pix.tipo, provider_transaction_id: pix.idTransacao ?? null, provider_amount: pix.valor,
      initiation_type: pix.tipoIniciacao ?? null, transaction_id_brcode: pix.txid, transaction_identification: pix.txid, correlation: 'not_attempted' as Correlation,
      charge_id: null, charge_status: null, amount_minor: null, wallet_id: null, wallet_credited: false, devolutions: [] as { devolution_id: string; status: string; amount_minor: number }[],
    };
  }
  const row: AccountRow = { consumer_id: a.consumerId, org_id: a.orgId, project_id: a.projectId, account_id: a.accountId, psp: a.psp, psp_account: a.pspAccount };
  await recordReceivement(ports, (d, s, c, o) => run(d, s, c, o), row, pix, 'lookup');
  const { rows } = await ports.db.query<{ correlation: string; charge_id: string | null; charge_status: string | null; charge_amount: string | null; wallet_id: string | null; provider_transaction_id: string | null; initiation_type: string | null; txid: string | null; provider_amount: string }>(
    `SELECT r.correlation, r.charge_id, c.status AS charge_status, c.amount_minor::text AS charge_amount, r.wallet_id, r.provider_transaction_id, r.initiation_type, r.txid, r.provider_amount
     FROM pix_receivements r LEFT JOIN pix_charges c ON c.id = r.charge_id WHERE r.psp = $1 AND r.end_to_end_id = $2 AND r.account_id = $3`,
    [a.psp, pix.endToEndId, a.accountId],
  );
  const r = rows[0];
  if (!r) throw new Rejection('not_found', 'no such movement on this account');
  const devs = await ports.db.query<{ id: string; status: string; amount_minor: string }>('SELECT id, status, amount_minor::text FROM pix_devolutions WHERE end_to_end_id = $1 AND consumer_id = $2 ORDER BY pix_devolutions.requested_at, id', [pix.endToEndId, a.consumerId]);
  const providerStatus = new Map(pix.devolucoes.map((d) => [d.id, d.status]));
  return {
    end_to_end_id: pix.endToEndId, received: true, provider_transaction_type: pix.tipo, provider_transaction_id: r.provider_transaction_id, provider_amount: r.provider_amount,
    initiation_type: r.initiation_type, transaction_id_brcode: r.txid, transaction_identification: pix.txid, correlation: r.correlation as Correlation,
    charge_id: r.charge_id, charge_status: r.charge_status, amount_minor: r.charge_amount === null ? null : Number(r.charge_amount), wallet_id: r.wallet_id, wallet_credited: r.wallet_id !== null,
    devolutions: devs.rows.map((d) => ({ devolution_id: d.id, status: devolutionStatus(providerStatus.get(d.id) ?? d.status), amount_minor: Number(d.amount_minor) })),
  };
}

/** Returns all or part of a received Pix to its payer (a devolução) and debits the wallet it credited. */
export async function createDevolution(ports: Pick<Ports, 'db' | 'store' | 'pix'>, run: RunCommand, tenant: Tenant, consumerId: string, endToEndId: string, amountMinor: number) {
  const a = await loadAccount(ports, tenant, consumerId);
  checkEndToEndId(endToEndId);
  const stream = pixReceivementStream(a.psp, endToEndId);
  const { state } = await loadState<PixReceivementState>(ports.store, stream, pixReceivementDecider);
  if (state.status === 'none' || state.data.account_id !== a.accountId) throw new Rejection('not_found', 'no such receivement on this account');
  const id = randomString(24);
  let d;
  try {
    d = await pspOf(ports, a.psp).devolve(endToEndId, id, minorToValor(BigInt(amountMinor)));
  } catch (err) {
    notConfigured(err);
    if (err instanceof PspError && err.reason === 'refused') throw new Rejection('devolution_refused', 'the PSP refused the devolution', { provider_status: err.status, provider_code: err.code });
    throw new Rejection('provider_error', 'the PSP did not answer the devolution', { reason: 'provider_did_not_answer', retriable: true });
  }
  const walletId = (await ports.db.query<{ wallet_id: string | null }>('SELECT wallet_id FROM pix_receivements WHERE psp = $1 AND end_to_end_id = $2', [a.psp, endToEndId])).rows[0]?.wallet_id ?? null;
  await run(pixReceivementDecider, stream, { type: 'devolve', devolutionId: id, rtrId: d.rtrId ?? null, amountMinor: String(amountMinor), status: devolutionStatus(d.status), walletId });
  return { end_to_end_id: endToEndId, devolution_id: id, status: devolutionStatus(d.status), amount_minor: amountMinor };
}
