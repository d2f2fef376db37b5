import type { DomainEvent } from '../events/index.ts';
import { type Decider, Rejection } from '../src/eventstore/handler.ts';
import type { Tenant } from './consumer.ts';

// A bank consent: pending → authorised; pending or authorised → revoked or
// expired (consumed is terminal too). One open consent per organization,
// consumer and bank is held by a slot stream whose claim is the reservation.

export const consentStream = (id: string) => `bank_consent-${id}`;
export const slotStream = (orgId: string, consumerId: string, bankId: string) => `bank_consent_slot-${orgId}.${consumerId}.${bankId}`;
export const orphanStream = (orgId: string) => `bank_consent_orphans-${orgId}`;

export type ConsentStatus = 'pending' | 'authorised' | 'revoked' | 'expired' | 'consumed';

export type Consent = {
  id: string;
  orgId: string;
  projectId: string;
  consumerId: string;
  bankId: string;
  bankConsentId: string;
  walletId: string | null;
  redirectUrl: string;
  status: ConsentStatus;
  tokenRef: string | null;
  expiresAt: string;
  imported: Set<string>;
};

export type ConsentState = { status: 'none' } | { status: 'exists'; c: Consent };

const TERMINAL: ConsentStatus[] = ['revoked', 'expired', 'consumed'];

export type ConsentCommand =
  | { type: 'initiate'; data: Extract<DomainEvent, { type: 'bank_consent.initiated' }>['data'] }
  | { type: 'authorise'; tenant: Tenant; tokenRef: string; tokenExpiresAt: string }
  | { type: 'close'; tenant: Tenant | null; to: 'revoked' | 'expired' }
  | { type: 'record'; events: DomainEvent[] }
  | {
      type: 'import_page';
      runId: string;
      page: number;
      transactions: { bank_transaction_id: string; amount_minor: string; currency: string; credit_debit: string; description: string; booked_at: string }[];
    };

export function ownConsent(state: ConsentState, t: Tenant): Consent {
  if (state.status === 'none' || state.c.orgId !== t.orgId || state.c.projectId !== t.projectId) throw new Rejection('not_found', 'bank consent not found');
  return state.c;
}

export function illegal(from: ConsentStatus, to: ConsentStatus): Rejection {
  return new Rejection('invalid_transition', `a consent cannot move from ${from} to ${to}`, { from, to });
}

export const consentDecider: Decider<ConsentState, ConsentCommand> = {
  initialState: () => ({ status: 'none' }),
  evolve(state, event) {
    if (event.type === 'bank_consent.initiated') {
      const d = event.data;
      return {
        status: 'exists',
        c: { id: d.consent_id, orgId: d.org_id, projectId: d.project_id, consumerId: d.consumer_id, bankId: d.bank_id, bankConsentId: d.bank_consent_id, walletId: d.wallet_id, redirectUrl: d.redirect_url, status: 'pending', tokenRef: null, expiresAt: d.expires_at, imported: new Set() },
      };
    }
    if (state.status !== 'exists') return state;
    const c = state.c;
    switch (event.type) {
      case 'bank_consent.authorised':
        return { status: 'exists', c: { ...c, status: 'authorised', tokenRef: event.data.token_ref } };
      case 'bank_consent.revoked':
        return { status: 'exists', c: { ...c, status: 'revoked' } };
      case 'bank_consent.expired':
        return { status: 'exists', c: { ...c, status: 'expired' } };
      case 'bank_consent.transactions_imported': {
        const imported = new Set(c.imported);
        for (const t of event.data.transactions) imported.add(t.bank_transaction_id);
        return { status: 'exists', c: { ...c, imported } };
      }
      default:
        return state;
    }
  },
  decide(command, state, { now }): DomainEvent[] {
    switch (command.type) {
      case 'initiate':
        if (state.status !== 'none') throw new Rejection('consent_exists', 'exists');
        return [{ type: 'bank_consent.initiated', data: command.data }];
      case 'authorise': {
        const c = ownConsent(state, command.tenant);
        if (c.status !== 'pending') throw illegal(c.status, 'authorised');
        return [{ type: 'bank_consent.authorised', data: { consent_id: c.id, token_ref: command.tokenRef, token_expires_at: command.tokenExpiresAt, authorized_at: now } }];
      }
      case 'close': {
        if (state.status === 'none') throw new Rejection('not_found', 'bank consent not found');
        const c = command.tenant ? ownConsent(state, command.tenant) : state.c;
        if (TERMINAL.includes(c.status)) {
          if (command.to === 'expired') return [];
          throw illegal(c.status, command.to);
        }
        const type = command.to === 'revoked' ? 'bank_consent.revoked' : 'bank_consent.expired';
        return [{ type, data: { consent_id: c.id, from: c.status as 'pending' | 'authorised', at: now } }];
      }
      case 'record':
        if (state.status === 'none') throw new Rejection('not_found', 'bank consent not found');
        return command.events;
      case 'import_page': {
        if (state.status === 'none') throw new Rejection('not_found', 'bank consent not found');
        // Deduplicated by the bank's transaction id against everything imported before.
        const seen = new Set<string>();
        const fresh = command.transactions.filter((t) => !state.c.imported.has(t.bank_transaction_id) && !seen.has(t.bank_transaction_id) && seen.add(t.bank_transaction_id));
        if (fresh.length === 0) return [];
        return [{ type: 'bank_consent.transactions_imported', data: { consent_id: state.c.id, run_id: command.runId, wallet_id: state.c.walletId, page: command.page, transactions: fresh } }];
      }
    }
  },
};

export type SlotState = { holder: { consentId: string; projectId: string } | null };
export type SlotCommand = { type: 'claim'; consentId: string; projectId: string } | { type: 'release'; consentId: string };

export const slotDecider: Decider<SlotState, SlotCommand> = {
  initialState: () => ({ holder: null }),
  evolve(state, event) {
    if (event.type === 'bank_consent_slot.claimed') return { holder: { consentId: event.data.consent_id, projectId: event.data.project_id } };
    if (event.type === 'bank_consent_slot.released' && state.holder?.consentId === event.data.consent_id) return { holder: null };
    return state;
  },
  decide(command, state, { now }): DomainEvent[] {
    if (command.type === 'claim') {
      if (state.holder) throw new Rejection('slot_taken', 'held', { holder: state.holder });
      return [{ type: 'bank_consent_slot.claimed', data: { consent_id: command.consentId, project_id: command.projectId, at: now } }];
    }
    if (state.holder?.consentId !== command.consentId) return [];
    return [{ type: 'bank_consent_slot.released', data: { consent_id: command.consentId, at: now } }];
  },
};

/** The organization's record of bank-side consents that no consent took over (for an operator to clean up). */
export const orphanDecider: Decider<null, { type: 'record'; bankId: string; bankConsentId: string; consumerId: string; reason: string }> = {
  initialState: () => null,
  evolve: (s) => s,
  decide: (c, _s, { now }) => [{ type: 'bank_consent.orphaned', data: { bank_id: c.bankId, bank_consent_id: c.bankConsentId, consumer_id: c.consumerId, reason: c.reason, at: now } }],
};
