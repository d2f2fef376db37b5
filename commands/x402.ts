import type { DomainEvent } from '../events/index.ts';
import { type Decider, Rejection } from '../src/eventstore/handler.ts';

// The facilitator's deciders: the replay guard (one live claim per signer and
// nonce), the internal mandate (caps from the first intent, reservations
// serialized on its stream so caps hold under concurrency), and the foreign
// authorization row: verified → executed | rejected.

export const nonceStream = (signer: string, nonce: string) => `x402_nonce-${signer.toLowerCase()}.${nonce.toLowerCase()}`;
export const x402MandateStream = (key: string) => `x402_mandate-${key}`;
export const fauthStream = (id: string) => `fauth-${id}`;

export type NonceState = { holder: string | null };
export const nonceDecider: Decider<NonceState, { type: 'claim'; signer: string; nonce: string; fauthId: string } | { type: 'release'; fauthId: string; reason: string }> = {
  initialState: () => ({ holder: null }),
  evolve: (s, e) => (e.type === 'x402.nonce_claimed' ? { holder: e.data.foreign_authorization_id } : e.type === 'x402.nonce_released' ? { holder: null } : s),
  decide(c, s, { now }): DomainEvent[] {
    if (c.type === 'claim') {
      if (s.holder) throw new Rejection('authorization_already_used', 'this (signer, nonce) authorization was already submitted', { foreign_authorization_id: s.holder });
      return [{ type: 'x402.nonce_claimed', data: { signer: c.signer, nonce: c.nonce, foreign_authorization_id: c.fauthId, at: now } }];
    }
    if (s.holder !== c.fauthId) return [];
    return [{ type: 'x402.nonce_released', data: { foreign_authorization_id: c.fauthId, reason: c.reason, at: now } }];
  },
};

export type X402Mandate = { id: string; perTx: bigint; total: bigint; reserved: bigint } | null;
export type X402MandateCommand =
  | { type: 'reserve'; open: { mandateId: string; orgId: string; signer: string; payee: string; resource: string; perTx: bigint; total: bigint }; fauthId: string; amount: bigint }
  | { type: 'release'; fauthId: string; amount: bigint };

export const x402MandateDecider: Decider<X402Mandate, X402MandateCommand> = {
  initialState: () => null,
  evolve(s, e) {
    if (e.type === 'x402.mandate_opened') return { id: e.data.mandate_id, perTx: BigInt(e.data.per_tx_cap_minor), total: BigInt(e.data.total_cap_minor), reserved: 0n };
    if (!s) return s;
    if (e.type === 'x402.amount_reserved') return { ...s, reserved: BigInt(e.data.reserved_minor) };
    if (e.type === 'x402.amount_released') return { ...s, reserved: s.reserved - BigInt(e.data.amount_minor) };
    return s;
  },
  decide(c, s, { now }): DomainEvent[] {
    if (c.type === 'release') {
      if (!s) return [];
      return [{ type: 'x402.amount_released', data: { mandate_id: s.id, foreign_authorization_id: c.fauthId, amount_minor: c.amount.toString(), at: now } }];
    }
    const out: DomainEvent[] = [];
    let m = s;
    if (!m) {
      // The first intent fixes the caps of the mandate it turns into.
      const o = c.open;
      out.push({ type: 'x402.mandate_opened', data: { mandate_id: o.mandateId, org_id: o.orgId, signer: o.signer, payee: o.payee, resource: o.resource, per_tx_cap_minor: o.perTx.toString(), total_cap_minor: o.total.toString(), at: now } });
      m = { id: o.mandateId, perTx: o.perTx, total: o.total, reserved: 0n };
    }
    if (c.amount > m.perTx) throw new Rejection('per_tx_cap_exceeded', `amount_minor ${c.amount} exceeds the per-transaction cap ${m.perTx}`, { mandate_id: m.id });
    if (m.reserved + c.amount > m.total) throw new Rejection('total_cap_exceeded', `the mandate's total cap ${m.total} would be exceeded`, { mandate_id: m.id });
    out.push({ type: 'x402.amount_reserved', data: { mandate_id: m.id, foreign_authorization_id: c.fauthId, amount_minor: c.amount.toString(), reserved_minor: (m.reserved + c.amount).toString(), at: now } });
    return out;
  },
};

export type FauthState = { status: 'none' | 'verified' | 'executed' | 'rejected' | 'unknown' };
export const fauthDecider: Decider<FauthState, { type: 'record'; events: DomainEvent[] }> = {
  initialState: () => ({ status: 'none' }),
  evolve(s, e) {
    switch (e.type) {
      case 'x402.authorization_verified':
        return { status: 'verified' };
      case 'x402.executed':
        return { status: 'executed' };
      case 'x402.rejected':
        return { status: 'rejected' };
      case 'x402.settlement_unknown':
        return { status: 'unknown' };
      default:
        return s;
    }
  },
  decide(c, s): DomainEvent[] {
    if (s.status === 'executed' || s.status === 'rejected') throw new Rejection('fauth_final', 'the authorization is already final');
    return c.events;
  },
};
