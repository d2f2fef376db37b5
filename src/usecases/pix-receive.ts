import { pixChargeDecider, pixChargeStream, pixReceivementDecider, pixReceivementStream, type PixReceivementState } from '../../commands/pix.ts';
import { valorToMinor } from '../../commands/pix-format.ts';
import type { PspPix } from '../adapters/psp/port.ts';
import type { CommandResult, Decider } from '../eventstore/handler.ts';
import type { Ports } from './context.ts';

// Recording a received Pix, shared by the PSP's notification and by lookups
// (a charge or receivement read that finds a Pix we were not told about):
// record it once per end-to-end id, correlate it to a charge by txid, settle
// the charge, credit the wallet. Each step is idempotent, so a repeated
// notification completes whatever an interrupted one left undone and
// credits nothing twice.

export type AccountRow = { consumer_id: string; org_id: string; project_id: string; account_id: string; psp: 'sandbox' | 'live'; psp_account: string };
export type Runner = <S, C>(decider: Decider<S, C>, stream: string, command: C, opts: { orgId: string; projectId: string; expectedRevision?: 'no_stream' }) => Promise<CommandResult<S>>;

export async function correlate(ports: Pick<Ports, 'db'>, accountId: string, txid: string | null): Promise<{ correlation: 'charge_matched' | 'no_correlator_returned' | 'no_charge_matched' | 'charge_ambiguous'; chargeId: string | null }> {
  if (!txid) return { correlation: 'no_correlator_returned', chargeId: null };
  const { rows } = await ports.db.query<{ id: string }>('SELECT id FROM pix_charges WHERE account_id = $1 AND txid = $2 ORDER BY pix_charges.created_at LIMIT 2', [accountId, txid]);
  if (rows.length === 0) return { correlation: 'no_charge_matched', chargeId: null };
  if (rows.length > 1) return { correlation: 'charge_ambiguous', chargeId: null };
  return { correlation: 'charge_matched', chargeId: rows[0]!.id };
}

/** Records an inbound Pix of an account; nothing for a movement of another type. */
export async function recordReceivement(ports: Pick<Ports, 'db' | 'now'>, run: Runner, a: AccountRow, pix: PspPix, source: 'notification' | 'lookup'): Promise<boolean> {
  if (pix.tipo !== 'PIX_RECEBIDO') return false;
  const received = valorToMinor(pix.valor);
  if (received === null) return false;
  const tenant = { orgId: a.org_id, projectId: a.project_id };
  const stream = pixReceivementStream(a.psp, pix.endToEndId);
  const c = await correlate(ports, a.account_id, pix.txid);
  const r = await run(pixReceivementDecider, stream, {
    type: 'receive',
    data: {
      end_to_end_id: pix.endToEndId,
      org_id: a.org_id,
      project_id: a.project_id,
      consumer_id: a.consumer_id,
      account_id: a.account_id,
      psp: a.psp,
      provider_transaction_type: pix.tipo,
      provider_transaction_id: pix.idTransacao ?? null,
      provider_amount: pix.valor,
      received_minor: received.toString(),
      initiation_type: pix.tipoIniciacao ?? null,
      txid: pix.txid,
      paid_at: pix.horario,
      correlation: c.correlation,
      charge_id: c.chargeId,
      source,
      received_at: ports.now().toISOString(),
    },
  }, tenant);
  // The recorded correlation is the one that counts (a repeat may see other charges by now).
  const state = r.state as Extract<PixReceivementState, { status: 'received' }>;
  const chargeId = state.data.charge_id;
  if (state.data.correlation !== 'charge_matched' || !chargeId) return true;
  const charge = await run(pixChargeDecider, pixChargeStream(chargeId), { type: 'settle', endToEndId: pix.endToEndId, receivedMinor: state.data.received_minor }, tenant);
  if (charge.state.status === 'none') return true;
  await run(pixReceivementDecider, stream, { type: 'credit', walletId: charge.state.walletId, chargeId, amountMinor: state.data.received_minor }, tenant);
  return true;
}
