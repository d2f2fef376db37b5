import { mandateDecider, mandateStream, type MandateState } from '../../commands/mandate.ts';
import { rampFor, SANDBOX_ROUTES, sandboxRamp } from '../adapters/ramp/ramp.ts';
import { Rejection } from '../eventstore/handler.ts';
import { newId } from '../ids.ts';
import { consumerNotFound, readConsumer } from './consumers.ts';
import { type SpendCtx, underMandatePolicy } from './mandates.ts';

// Transfers between a consumer's currency slots (issue 58, the product
// client's `transfer <consumer> --from BRL --to USDC --amount N [--execute]`):
// without `execute` a quote (nothing written); with it, the move decided on
// the mandate's stream holding both slots, under the organization's policies
// (tool name `wallet.transfer`, the mandate's agent), as a
// `mandate.transfer_executed` (or a recorded `mandate.transfer_declined` for
// the source slot's caps or the mandate's status). Value moves through the
// ramp at its quoted rate (src/adapters/ramp/ramp.ts), never a synthetic FX.
// Refused with nothing written: the same currency both sides
// (`same_slot_transfer`), a currency the wallet has no slot for
// (`currency_not_authorized`, 422 here), a pair the ramp does not trade
// (`unsupported_transfer_route`), a live key (`not_wired`).

export type TransferInput = { from_currency: string; to_currency: string; amount_minor: string; execute?: boolean | undefined; agent_id?: string | undefined; purpose?: string | undefined; mandate_id?: string | undefined };

type SlotRow = { mandate_id: string; agent_id: string; currency: string; rail: string | null; available: string; per_tx: string };

export type TransferPlan = {
  consumer_id: string;
  mandate_id: string;
  route: string;
  converts: boolean;
  engine: string | null;
  executable: boolean;
  executed: boolean;
  from: { currency: string; rail: string | null; amount_minor: number; cap_available_minor: number };
  to: { currency: string; rail: string | null; amount_minor: number | null };
  rate: { numerator: string; denominator: string } | null;
  note: string;
  transaction_id?: string;
  status?: 'completed';
  money_moved?: boolean;
};

/** The calling project's counted mandates of the consumer holding a slot of `from` (and of `to`), newest first. */
async function candidateSlots(c: SpendCtx, consumerId: string, currencies: string[], mandateId: string | undefined): Promise<SlotRow[]> {
  const { rows } = await c.ports.db.query<SlotRow>(
    `SELECT s.mandate_id, m.agent_id, s.currency, s.rail, (s.cap_minor + s.moved_in_minor - s.moved_out_minor - s.spent_minor)::text AS available, s.per_tx_cap_minor::text AS per_tx
     FROM mandates m JOIN mandate_slots s ON s.mandate_id = m.id
     WHERE m.consumer_id = $1 AND m.org_id = $2 AND m.project_id = $3 AND m.status IN ('active', 'paused') AND m.expires_at > $4 AND s.currency = ANY($5::text[])
       AND ($6::text IS NULL OR m.id = $6)
     ORDER BY m.created_at DESC, m.id DESC`,
    [consumerId, c.tenant.orgId, c.tenant.projectId, c.ports.now().toISOString(), currencies, mandateId ?? null],
  );
  return rows;
}

const unslotted = (currency: string, why: string) => new Rejection('currency_not_authorized', `${why}: the wallet has no ${currency} slot to move value ${why.startsWith('from') ? 'out of' : 'into'}; create a mandate with a ${currency} slot`, { currency });

export async function transferBetweenSlots(c: SpendCtx, environment: 'live' | 'test', consumerId: string, input: TransferInput): Promise<TransferPlan> {
  const consumer = await readConsumer(c.ports, c.tenant, consumerId);
  if (!consumer) throw consumerNotFound();
  const from = input.from_currency;
  const to = input.to_currency;
  if (from === to) throw new Rejection('same_slot_transfer', `${from} to ${to} is the same slot: a transfer moves value between two currencies`);
  const slots = await candidateSlots(c, consumer.id, [from, to], input.mandate_id);
  const byMandate = new Map<string, SlotRow[]>();
  for (const s of slots) byMandate.set(s.mandate_id, [...(byMandate.get(s.mandate_id) ?? []), s]);
  if (!slots.some((s) => s.currency === from)) throw unslotted(from, `from_currency ${from}`);
  if (!slots.some((s) => s.currency === to)) throw unslotted(to, `to_currency ${to}`);
  const pair = [...byMandate.values()].find((ss) => ss.some((s) => s.currency === from) && ss.some((s) => s.currency === to));
  if (!pair) throw new Rejection('currency_not_authorized', `no one mandate of this consumer holds both a ${from} and a ${to} slot; a transfer moves value within one mandate`, { currencies: [from, to] });
  const src = pair.find((s) => s.currency === from)!;
  const dst = pair.find((s) => s.currency === to)!;
  // The route is the ramp's: a pair it does not trade has none, in any environment.
  const q = sandboxRamp.quote(from, to);
  if (!q) throw new Rejection('unsupported_transfer_route', `the ramp does not trade ${from} → ${to}; routes: ${SANDBOX_ROUTES.join(', ')}`, { from_currency: from, to_currency: to });
  const ramp = rampFor(environment);
  const amount = BigInt(input.amount_minor);
  const credited = (amount * q.numerator) / q.denominator;
  if (credited === 0n) throw new Rejection('transfer_amount_too_small', `${amount} ${from} minor units buy less than one ${to} minor unit at the quoted rate: move more`);
  const plan: TransferPlan = {
    consumer_id: consumer.id,
    mandate_id: src.mandate_id,
    route: `${from}->${to}`,
    converts: true,
    engine: ramp ? ramp.engine : null,
    executable: ramp !== null,
    executed: false,
    from: { currency: from, rail: src.rail, amount_minor: Number(amount), cap_available_minor: Number(src.available) },
    to: { currency: to, rail: dst.rail, amount_minor: ramp ? Number(credited) : null },
    rate: ramp ? { numerator: q.numerator.toString(), denominator: q.denominator.toString() } : null,
    note: ramp ? `${ramp.engine} quotes ${q.numerator}/${q.denominator} ${to} per ${from} minor unit; caps stay per currency` : 'no live ramp is configured: this route cannot be executed with a live key',
  };
  if (!input.execute) return plan;
  if (!ramp) throw new Rejection('not_wired', 'no live ramp is configured; transfers execute with test keys (the sandbox ramp)');
  if (input.agent_id !== undefined && input.agent_id !== src.agent_id) throw new Rejection('mandate_agent_mismatch', `agent_id ${input.agent_id} is not the agent this mandate authorizes`, { field: 'agent_id' });
  const transferId = newId('trf');
  const toolInput = { mandate_id: src.mandate_id, consumer_id: consumer.id, from_currency: from, to_currency: to, amount_minor: input.amount_minor };
  const r = await underMandatePolicy(c, src.agent_id, { toolName: 'wallet.transfer', toolInput, amountMinor: amount, currency: from, approvedBy: null }, (guard) =>
    c.run(
      mandateDecider,
      mandateStream(src.mandate_id),
      {
        type: 'transfer',
        tenant: c.tenant,
        transfer: { transferId, from, to, amount, credited, rateNumerator: q.numerator, rateDenominator: q.denominator, engine: ramp.engine, agentId: input.agent_id ?? null, purpose: input.purpose ?? null },
      },
      { serialize: true, orgId: c.tenant.orgId, projectId: c.tenant.projectId, ...(guard ? { guard } : {}) },
    ).then((res) => outcome(res)),
  );
  return { ...plan, executed: true, transaction_id: r.transfer_id, status: 'completed', money_moved: true, from: { ...plan.from, cap_available_minor: Number(r.from_available_minor) } };
}

/** The transfer's decision: executed, else its decline as a rejection (the decline is recorded). */
function outcome(r: { state: MandateState; events: { type: string; data: unknown }[] }): { transfer_id: string; from_available_minor: string } {
  const e = r.events[r.events.length - 1]!;
  const d = e.data as { transfer_id: string; code?: string; from_available_minor?: string };
  if (e.type === 'mandate.transfer_declined') throw new Rejection(d.code!, `the transfer was declined: ${d.code!.replaceAll('_', ' ')}`, { transfer_id: d.transfer_id, decision: 'declined' });
  return { transfer_id: d.transfer_id, from_available_minor: d.from_available_minor! };
}
