import { createHash } from 'node:crypto';
import type { DomainEvent, EventDataOf } from '../events/index.ts';
import { type Decider, Rejection } from '../src/eventstore/handler.ts';
import type { Tenant } from './consumer.ts';

// Commerce memory: counterparties (merged by identifier within a project),
// interactions (idempotent by (source, source_ref) within a project), their
// negotiations and preferences. The two uniqueness rules are claim streams whose
// existence is the reservation; no read model enforces anything.

export type CounterpartyKind = 'supplier' | 'customer' | 'agent_peer';
export type IdentifierKind = 'cnpj' | 'cpf' | 'email' | 'phone' | 'wallet_address' | 'other';
export type InteractionSource = 'agent_execute' | 'webhook' | 'manual' | 'backfill';

export const counterpartyStream = (id: string) => `counterparty-${id}`;
export const interactionStream = (id: string) => `interaction-${id}`;
export const negotiationStream = (id: string) => `negotiation-${id}`;

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

/**
 * The stored form of an identifier, the one merging compares: trimmed; e-mail
 * and wallet addresses lowercased; CPF/CNPJ and phone numbers without their
 * punctuation (dots, dashes, slashes, spaces, parentheses).
 */
export function normalizeIdentifier(kind: IdentifierKind, identifier: string): string {
  const v = identifier.trim();
  switch (kind) {
    case 'email':
    case 'wallet_address':
      return v.toLowerCase();
    case 'cnpj':
    case 'cpf':
      return v.replace(/[.\-/\s]/g, '');
    case 'phone':
      return v.replace(/[\s().-]/g, '');
    default:
      return v;
  }
}

export const identifierHash = (projectId: string, kind: IdentifierKind, identifier: string) => sha256(`${projectId}\n${kind}\n${identifier}`).slice(0, 40);
export const identifierClaimStream = (projectId: string, kind: IdentifierKind, identifier: string) =>
  `counterparty_identifier-${projectId}.${kind}.${identifierHash(projectId, kind, identifier)}`;

export const sourceRefHash = (projectId: string, source: InteractionSource, sourceRef: string) => sha256(`${projectId}\n${source}\n${sourceRef}`).slice(0, 40);
export const sourceRefClaimStream = (projectId: string, source: InteractionSource, sourceRef: string) =>
  `interaction_source_ref-${projectId}.${source}.${sourceRefHash(projectId, source, sourceRef)}`;

// ---------------------------------------------------------------------------
// Counterparty

export type Counterparty = {
  id: string;
  orgId: string;
  projectId: string;
  kind: CounterpartyKind;
  name: string;
  identifier: string | null;
  identifierKind: IdentifierKind | null;
  metadata: Record<string, unknown>;
  createdAt: string;
  lastSeenAt: string;
  preferences: Record<string, unknown>;
  preferencesUpdatedAt: string | null;
};
export type CounterpartyState = { status: 'none' } | { status: 'exists'; c: Counterparty };

export type CounterpartyCommand =
  | {
      /** Creates the counterparty, or (when it exists: the identifier was claimed for it) merges into it. */
      type: 'register';
      counterpartyId: string;
      tenant: Tenant;
      kind: CounterpartyKind;
      name: string;
      identifier: string | null;
      identifierKind: IdentifierKind | null;
      metadata: Record<string, unknown>;
    }
  | { type: 'set_preferences'; tenant: Tenant; preferences: Record<string, unknown> };

export function ownCounterparty(state: CounterpartyState, t: Tenant): Counterparty {
  if (state.status === 'none' || state.c.orgId !== t.orgId || state.c.projectId !== t.projectId) throw new Rejection('counterparty_not_found', 'counterparty not found');
  return state.c;
}

export const counterpartyDecider: Decider<CounterpartyState, CounterpartyCommand> = {
  initialState: () => ({ status: 'none' }),
  evolve(state, event) {
    switch (event.type) {
      case 'counterparty.created': {
        const d = event.data;
        return {
          status: 'exists',
          c: {
            id: d.counterparty_id,
            orgId: d.org_id,
            projectId: d.project_id,
            kind: d.kind,
            name: d.name,
            identifier: d.identifier,
            identifierKind: d.identifier_kind,
            metadata: d.metadata,
            createdAt: d.created_at,
            lastSeenAt: d.created_at,
            preferences: {},
            preferencesUpdatedAt: null,
          },
        };
      }
      case 'counterparty.merged':
        if (state.status === 'none') return state;
        return { status: 'exists', c: { ...state.c, name: event.data.name, metadata: event.data.metadata, lastSeenAt: event.data.at > state.c.lastSeenAt ? event.data.at : state.c.lastSeenAt } };
      case 'counterparty.preferences_set':
        if (state.status === 'none') return state;
        return { status: 'exists', c: { ...state.c, preferences: event.data.preferences, preferencesUpdatedAt: event.data.at } };
      default:
        return state;
    }
  },
  decide(command, state, { now }): DomainEvent[] {
    switch (command.type) {
      case 'register': {
        if (state.status === 'none') {
          return [
            {
              type: 'counterparty.created',
              data: {
                counterparty_id: command.counterpartyId,
                org_id: command.tenant.orgId,
                project_id: command.tenant.projectId,
                kind: command.kind,
                name: command.name,
                identifier: command.identifier,
                identifier_kind: command.identifierKind,
                metadata: command.metadata,
                created_at: now,
              },
            },
          ];
        }
        const c = ownCounterparty(state, command.tenant);
        // A merge keeps id, kind, identifier, identifier_kind and created_at; it
        // takes the new name, merges metadata shallowly (new keys win) and bumps last_seen_at.
        return [{ type: 'counterparty.merged', data: { counterparty_id: c.id, name: command.name, metadata: { ...c.metadata, ...command.metadata }, at: now } }];
      }
      case 'set_preferences': {
        const c = ownCounterparty(state, command.tenant);
        return [{ type: 'counterparty.preferences_set', data: { counterparty_id: c.id, preferences: command.preferences, at: now } }];
      }
    }
  },
};

// ---------------------------------------------------------------------------
// Claims: the first claimant's id stays; later claims change nothing and read it.

export type ClaimState = { status: 'none' } | { status: 'claimed'; id: string };

export const identifierClaimDecider: Decider<ClaimState, { type: 'claim'; counterpartyId: string; projectId: string; identifierKind: IdentifierKind; identifierHash: string }> = {
  initialState: () => ({ status: 'none' }),
  evolve: (state, event) => (event.type === 'counterparty_identifier.claimed' ? { status: 'claimed', id: event.data.counterparty_id } : state),
  decide(command, state, { now }) {
    if (state.status === 'claimed') return [];
    return [
      {
        type: 'counterparty_identifier.claimed',
        data: { counterparty_id: command.counterpartyId, project_id: command.projectId, identifier_kind: command.identifierKind, identifier_hash: command.identifierHash, at: now },
      },
    ];
  },
};

export const sourceRefClaimDecider: Decider<ClaimState, { type: 'claim'; interactionId: string; projectId: string; source: InteractionSource; sourceRefHash: string }> = {
  initialState: () => ({ status: 'none' }),
  evolve: (state, event) => (event.type === 'interaction_source_ref.claimed' ? { status: 'claimed', id: event.data.interaction_id } : state),
  decide(command, state, { now }) {
    if (state.status === 'claimed') return [];
    return [{ type: 'interaction_source_ref.claimed', data: { interaction_id: command.interactionId, project_id: command.projectId, source: command.source, source_ref_hash: command.sourceRefHash, at: now } }];
  },
};

// ---------------------------------------------------------------------------
// Interaction: recorded once; recording an existing one changes nothing (the idempotent replay).

export type Interaction = EventDataOf<'interaction.recorded'>;
export type InteractionState = { status: 'none' } | { status: 'exists'; i: Interaction };
export type InteractionCommand = { type: 'record'; interaction: Omit<Interaction, 'recorded_at' | 'occurred_at'> & { occurred_at: string | null } };

export const interactionDecider: Decider<InteractionState, InteractionCommand> = {
  initialState: () => ({ status: 'none' }),
  evolve: (state, event) => (event.type === 'interaction.recorded' ? { status: 'exists', i: event.data } : state),
  decide(command, state, { now }) {
    if (state.status === 'exists') return [];
    const i = command.interaction;
    return [{ type: 'interaction.recorded', data: { ...i, occurred_at: i.occurred_at ?? now, recorded_at: now } }];
  },
};

// ---------------------------------------------------------------------------
// Negotiation: a record of one negotiation over an item, with its outcome and prices.

export type Negotiation = EventDataOf<'negotiation.recorded'>;
export type NegotiationState = { status: 'none' } | { status: 'exists'; n: Negotiation };
export type NegotiationCommand = { type: 'record'; negotiation: Omit<Negotiation, 'created_at' | 'started_at'> & { started_at: string | null } };

export const negotiationDecider: Decider<NegotiationState, NegotiationCommand> = {
  initialState: () => ({ status: 'none' }),
  evolve: (state, event) => (event.type === 'negotiation.recorded' ? { status: 'exists', n: event.data } : state),
  decide(command, state, { now }) {
    if (state.status === 'exists') throw new Rejection('negotiation_exists', 'negotiation exists');
    const n = command.negotiation;
    return [{ type: 'negotiation.recorded', data: { ...n, started_at: n.started_at ?? now, created_at: now } }];
  },
};

/**
 * The discount of a negotiation in basis points of the list price, rounded
 * down; null unless both prices are known and the list price is positive.
 * The one definition the read model and the tests share by value, not by code.
 */
export function discountBps(listMinor: bigint | null, finalMinor: bigint | null): bigint | null {
  if (listMinor === null || finalMinor === null || listMinor <= 0n) return null;
  const num = (listMinor - finalMinor) * 10_000n;
  // Floor division for negative discounts too (a final price above the list price).
  return num >= 0n ? num / listMinor : -((-num + listMinor - 1n) / listMinor);
}
