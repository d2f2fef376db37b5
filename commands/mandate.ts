import type { DomainEvent } from '../events/index.ts';
import { type Decider, Rejection } from '../src/eventstore/handler.ts';
import type { Tenant } from './consumer.ts';

// The mandate: a person's allowance that an agent spends against. Its caps
// hold under any concurrency because every spend is decided against the
// stream's state and appended with the expected revision.

export const mandateStream = (id: string) => `mandate-${id}`;

export type MandateStatus = 'active' | 'paused' | 'revoked' | 'expired';

export type Mandate = {
  id: string;
  orgId: string;
  projectId: string;
  consumerId: string;
  agentId: string;
  purpose: string;
  displayName: string | null;
  intentNote: string | null;
  allowlist: string[];
  pinKind: 'pix-key' | 'merchant-id' | 'mcc';
  cap: bigint;
  perTx: bigint;
  currency: string;
  status: MandateStatus;
  expiresAt: string;
  createdAt: string;
  spent: bigint;
  card: { cardId: string; consumerId: string; boundAt: string } | null;
  /** Its currency slots, the first mirrored by cap/perTx/currency/spent above; a single-currency mandate has one. */
  slots: Slot[];
};

/** A currency slot: its grant, what was spent from it, and what transfers moved in and out (authorized = cap + in − out). */
export type Slot = { currency: string; rail: string | null; cap: bigint; perTx: bigint; spent: bigint; movedIn: bigint; movedOut: bigint; fundingSourceId: string | null };
export type SlotInput = { currency: string; rail: string | null; cap: bigint; perTx: bigint; fundingSourceId: string | null };

export const authorizedOf = (s: Slot) => s.cap + s.movedIn - s.movedOut;
export const availableOf = (s: Slot) => authorizedOf(s) - s.spent;

/** A transfer between two slots, quoted: the destination gains `credited`. */
export type Transfer = { transferId: string; from: string; to: string; amount: bigint; credited: bigint; rateNumerator: bigint; rateDenominator: bigint; engine: string; agentId: string | null; purpose: string | null };

export type MandateState = { status: 'none' } | { status: 'exists'; m: Mandate };

export type Spend = { transactionId: string; channel: 'api' | 'card'; amount: bigint; currency: string; merchant: string; description: string | null };

export type MandateCommand =
  | {
      type: 'create';
      mandateId: string;
      tenant: Tenant;
      consumerId: string;
      agentId: string;
      agentDid: string;
      /** Whether the agent is active now: the route reads the agent's stream. */
      agentActive: boolean;
      purpose: string;
      displayName: string | null;
      intentNote: string | null;
      allowlist: string[];
      pinKind: 'pix-key' | 'merchant-id' | 'mcc';
      cap: bigint;
      perTx: bigint;
      currency: string;
      expiresAt: string;
      /** Several currency slots (the first mirrors cap/perTx/currency); absent: one slot of those. */
      slots?: SlotInput[] | undefined;
      consentId?: string | undefined;
    }
  | { type: 'move'; tenant: Tenant; to: 'paused' | 'active' | 'revoked'; reason: string | null }
  | { type: 'spend'; tenant: Tenant; spend: Spend }
  | { type: 'expire' }
  | { type: 'bind_card'; tenant: Tenant; cardId: string; issuer: 'sandbox' | 'live' }
  | { type: 'revoke_card'; tenant: Tenant }
  | { type: 'transfer'; tenant: Tenant; transfer: Transfer };

/** Spend refusals, in the order they are checked, with their HTTP status. */
export const SPEND_CODES = {
  mandate_not_found: 404,
  mandate_already_revoked: 409,
  mandate_already_expired: 410,
  mandate_not_active: 409,
  currency_not_authorized: 403,
  merchant_not_allowed: 403,
  per_tx_cap_exceeded: 422,
  total_cap_exceeded: 422,
} as const;
export type SpendCode = keyof typeof SPEND_CODES;

const LEGAL: Record<'paused' | 'active' | 'revoked', MandateStatus[]> = { paused: ['active'], active: ['paused'], revoked: ['active', 'paused'] };
const EVENT_OF = { paused: 'mandate.paused', active: 'mandate.resumed', revoked: 'mandate.revoked' } as const;

/** The status a decision sees: past expires_at an active or paused mandate is expired, reactor or not. */
export function effectiveStatus(m: Mandate, now: string): MandateStatus {
  if ((m.status === 'active' || m.status === 'paused') && now >= m.expiresAt) return 'expired';
  return m.status;
}

export function own(state: MandateState, t: Tenant): Mandate {
  if (state.status === 'none' || state.m.orgId !== t.orgId || state.m.projectId !== t.projectId) throw new Rejection('mandate_not_found', 'mandate not found');
  return state.m;
}

export function normalizeMerchant(kind: Mandate['pinKind'], merchant: string): string {
  const m = merchant.trim();
  return kind === 'pix-key' ? m.toLowerCase() : m;
}

function statusCode(m: Mandate, now: string): SpendCode | null {
  const status = effectiveStatus(m, now);
  if (status === 'revoked') return 'mandate_already_revoked';
  if (status === 'expired') return 'mandate_already_expired';
  if (status === 'paused') return 'mandate_not_active';
  return null;
}

/** The slot of a currency, if the mandate has one. */
export const slotOf = (m: Mandate, currency: string) => m.slots.find((x) => x.currency === currency);

function judge(m: Mandate, s: Spend, now: string): SpendCode | null {
  const st = statusCode(m, now);
  if (st) return st;
  // The slot of the spend's currency decides (no FX between slots).
  const slot = slotOf(m, s.currency);
  if (!slot) return 'currency_not_authorized';
  const merchant = normalizeMerchant(m.pinKind, s.merchant);
  if (!m.allowlist.some((a) => normalizeMerchant(m.pinKind, a) === merchant)) return 'merchant_not_allowed';
  if (s.amount > slot.perTx) return 'per_tx_cap_exceeded';
  if (slot.spent + s.amount > authorizedOf(slot)) return 'total_cap_exceeded';
  return null;
}

/** Transfer refusals recorded as declines (a source slot's caps, the mandate's status); input refusals are rejections. */
function judgeTransfer(m: Mandate, x: Transfer, now: string): SpendCode | null {
  const st = statusCode(m, now);
  if (st) return st;
  const from = slotOf(m, x.from)!;
  if (x.amount > from.perTx) return 'per_tx_cap_exceeded';
  if (x.amount > availableOf(from)) return 'total_cap_exceeded';
  return null;
}

/** Applies `f` to the slot of `currency` (the first slot also moves the mirrored members). */
function withSlot(m: Mandate, currency: string, f: (s: Slot) => Slot): Mandate {
  const i = m.slots.findIndex((x) => x.currency === currency);
  if (i < 0) return m;
  const slots = m.slots.map((x, j) => (j === i ? f(x) : x));
  return i === 0 ? { ...m, slots, spent: slots[0]!.spent } : { ...m, slots };
}

function expiredEvent(m: Mandate, now: string): DomainEvent {
  return { type: 'mandate.expired', data: { mandate_id: m.id, from: m.status, to: 'expired', reason: null, at: now } };
}

export const mandateDecider: Decider<MandateState, MandateCommand> = {
  initialState: () => ({ status: 'none' }),
  // A busy mandate's stream grows with every spend: a cold load starts from a snapshot.
  // 2: the state holds currency slots.
  snapshot: { name: 'mandate', version: 2, streamPrefix: mandateStream('') },

  evolve(state, event) {
    if (event.type === 'mandate.created') {
      const d = event.data;
      return {
        status: 'exists',
        m: {
          id: d.mandate_id,
          orgId: d.org_id,
          projectId: d.project_id,
          consumerId: d.consumer_id,
          agentId: d.agent_id,
          purpose: d.purpose,
          displayName: d.display_name,
          intentNote: d.intent_note,
          allowlist: d.merchant_allowlist,
          pinKind: d.merchant_pin_kind,
          cap: BigInt(d.cap_minor),
          perTx: BigInt(d.per_tx_cap_minor),
          currency: d.currency,
          status: 'active',
          expiresAt: d.expires_at,
          createdAt: d.created_at,
          spent: 0n,
          card: null,
          slots: (d.slots ?? [{ currency: d.currency, rail: null, cap_minor: d.cap_minor, per_tx_cap_minor: d.per_tx_cap_minor, funding_source_id: null }]).map((x) => ({
            currency: x.currency,
            rail: x.rail,
            cap: BigInt(x.cap_minor),
            perTx: BigInt(x.per_tx_cap_minor),
            spent: 0n,
            movedIn: 0n,
            movedOut: 0n,
            fundingSourceId: x.funding_source_id,
          })),
        },
      };
    }
    if (state.status === 'none') return state;
    const m = state.m;
    switch (event.type) {
      case 'mandate.paused':
      case 'mandate.resumed':
      case 'mandate.revoked':
      case 'mandate.expired':
        return { status: 'exists', m: { ...m, status: event.data.to } };
      case 'mandate.spend_approved': {
        const spent = BigInt(event.data.spent_minor);
        return { status: 'exists', m: withSlot(m, event.data.currency, (x) => ({ ...x, spent })) };
      }
      case 'mandate.transfer_executed': {
        const d = event.data;
        const out = withSlot(m, d.from_currency, (x) => ({ ...x, movedOut: x.movedOut + BigInt(d.amount_minor) }));
        return { status: 'exists', m: withSlot(out, d.to_currency, (x) => ({ ...x, movedIn: x.movedIn + BigInt(d.credited_minor) })) };
      }
      case 'mandate.card_bound':
        return { status: 'exists', m: { ...m, card: { cardId: event.data.card_id, consumerId: event.data.consumer_id, boundAt: event.data.bound_at } } };
      case 'mandate.card_revoked':
        return { status: 'exists', m: { ...m, card: null } };
      default:
        return state;
    }
  },

  decide(command, state, { now }): DomainEvent[] {
    switch (command.type) {
      case 'create': {
        if (state.status !== 'none') throw new Rejection('mandate_exists', 'mandate exists');
        if (!command.agentActive) throw new Rejection('mandate_agent_key_invalid', 'the agent is unknown, revoked, or has no active key');
        return [
          {
            type: 'mandate.created',
            data: {
              mandate_id: command.mandateId,
              org_id: command.tenant.orgId,
              project_id: command.tenant.projectId,
              consumer_id: command.consumerId,
              agent_id: command.agentId,
              agent_did: command.agentDid,
              purpose: command.purpose,
              display_name: command.displayName,
              intent_note: command.intentNote,
              merchant_allowlist: command.allowlist,
              merchant_pin_kind: command.pinKind,
              cap_minor: command.cap.toString(),
              per_tx_cap_minor: command.perTx.toString(),
              currency: command.currency as 'BRL',
              expires_at: command.expiresAt,
              created_at: now,
              ...(command.slots
                ? {
                    slots: command.slots.map((x) => ({ currency: x.currency as 'BRL', rail: x.rail, cap_minor: x.cap.toString(), per_tx_cap_minor: x.perTx.toString(), funding_source_id: x.fundingSourceId })),
                  }
                : {}),
              ...(command.consentId ? { consent_id: command.consentId } : {}),
            },
          },
        ];
      }
      case 'transfer': {
        const m = own(state, command.tenant);
        const x = command.transfer;
        if (x.from === x.to) throw new Rejection('same_slot_transfer', `${x.from} to ${x.to} is the same slot: name two different currencies`);
        for (const c of [x.from, x.to]) {
          if (!slotOf(m, c)) throw new Rejection('currency_not_authorized', `the mandate has no ${c} slot`, { currency: c, slots: m.slots.map((s) => s.currency) });
        }
        const base = { mandate_id: m.id, transfer_id: x.transferId, from_currency: x.from as 'BRL', to_currency: x.to as 'BRL', amount_minor: x.amount.toString(), at: now };
        const code = judgeTransfer(m, x, now);
        const expiry = effectiveStatus(m, now) === 'expired' && m.status !== 'expired' ? [expiredEvent(m, now)] : [];
        if (code) return [...expiry, { type: 'mandate.transfer_declined', data: { ...base, code } }];
        const left = availableOf(slotOf(m, x.from)!) - x.amount;
        return [
          {
            type: 'mandate.transfer_executed',
            data: {
              ...base,
              credited_minor: x.credited.toString(),
              rate_numerator: x.rateNumerator.toString(),
              rate_denominator: x.rateDenominator.toString(),
              engine: x.engine,
              agent_id: x.agentId,
              purpose: x.purpose,
              from_available_minor: left.toString(),
            },
          },
        ];
      }
      case 'move': {
        const m = own(state, command.tenant);
        const from = effectiveStatus(m, now);
        if (from === command.to) return [];
        if (!LEGAL[command.to].includes(from)) throw new Rejection('invalid_transition', `a mandate cannot move from ${from} to ${command.to}`, { from, to: command.to });
        return [{ type: EVENT_OF[command.to], data: { mandate_id: m.id, from, to: command.to, reason: command.reason, at: now } }];
      }
      case 'expire': {
        if (state.status === 'none') return [];
        const m = state.m;
        return effectiveStatus(m, now) === 'expired' && m.status !== 'expired' ? [expiredEvent(m, now)] : [];
      }
      case 'spend': {
        const m = own(state, command.tenant);
        const s = command.spend;
        const base = { mandate_id: m.id, transaction_id: s.transactionId, channel: s.channel, amount_minor: s.amount.toString(), currency: s.currency, merchant: s.merchant, description: s.description, at: now };
        const code = judge(m, s, now);
        // A decision past expires_at records the expiry it observed.
        const expiry = effectiveStatus(m, now) === 'expired' && m.status !== 'expired' ? [expiredEvent(m, now)] : [];
        if (code) return [...expiry, { type: 'mandate.spend_declined', data: { ...base, code } }];
        const slot = slotOf(m, s.currency)!;
        const spent = slot.spent + s.amount;
        return [{ type: 'mandate.spend_approved', data: { ...base, spent_minor: spent.toString(), remaining_minor: (authorizedOf(slot) - spent).toString() } }];
      }
      case 'bind_card': {
        const m = own(state, command.tenant);
        if (m.card) return [];
        const status = effectiveStatus(m, now);
        if (status !== 'active') throw new Rejection('mandate_not_active', `a ${status} mandate cannot get a card`, { status });
        return [{ type: 'mandate.card_bound', data: { mandate_id: m.id, card_id: command.cardId, consumer_id: m.consumerId, issuer: command.issuer, bound_at: now } }];
      }
      case 'revoke_card': {
        const m = own(state, command.tenant);
        if (!m.card) throw new Rejection('no_active_card', 'the mandate has no active card');
        return [{ type: 'mandate.card_revoked', data: { mandate_id: m.id, card_id: m.card.cardId, revoked_at: now } }];
      }
    }
  },
};
