import type { DomainEvent } from '../events/index.ts';
import { type Decider, Rejection } from '../src/eventstore/handler.ts';

// An agent identity and its Ed25519 keys. Key lifecycle: active → retired (by
// rotation: still verifies earlier signatures, can no longer sign) → revoked.

export const agentStream = (orgId: string, handle: string) => `agent-${orgId}.${handle}`;

/** Characters a did:web path segment can hold without percent-encoding. */
export const DID_SEGMENT = /^[A-Za-z0-9._-]{1,64}$/;

export type KeyStatus = 'active' | 'retired' | 'revoked';
export type AgentKey = { kid: string; ordinal: number; pubkey: string; privateKeyRef: string; status: KeyStatus; createdAt: string; retiredAt: string | null; revokedAt: string | null };

export type AgentState =
  | { status: 'none' }
  | { status: 'active' | 'revoked'; handle: string; did: string; principalRef: string; displayName: string | null; keys: AgentKey[]; createdAt: string; revokedAt: string | null };

export type NewKey = { pubkey: string; privateKeyRef: string };

export type AgentCommand =
  | { type: 'register'; handle: string; did: string; principalRef: string; displayName: string | null; key: NewKey }
  | { type: 'rotate'; key: NewKey }
  | { type: 'revoke_key'; kid: string }
  | { type: 'revoke_agent' };

export const kidOf = (did: string, ordinal: number) => `${did}#${ordinal}`;

function existing(state: AgentState): Exclude<AgentState, { status: 'none' }> {
  if (state.status === 'none') throw new Rejection('agent_not_found', 'agent not found');
  return state;
}

export const agentDecider: Decider<AgentState, AgentCommand> = {
  initialState: () => ({ status: 'none' }),

  evolve(state, event) {
    switch (event.type) {
      case 'agent.registered': {
        const d = event.data;
        return {
          status: 'active',
          handle: d.agent_id,
          did: d.did,
          principalRef: d.principal_ref,
          displayName: d.display_name,
          keys: [{ kid: d.kid, ordinal: d.ordinal, pubkey: d.pubkey, privateKeyRef: d.private_key_ref, status: 'active', createdAt: d.registered_at, retiredAt: null, revokedAt: null }],
          createdAt: d.registered_at,
          revokedAt: null,
        };
      }
      case 'agent.key_rotated': {
        if (state.status === 'none') return state;
        const d = event.data;
        const keys = state.keys.map((k) => (k.kid === d.retired_kid ? { ...k, status: 'retired' as const, retiredAt: d.rotated_at } : k));
        keys.push({ kid: d.kid, ordinal: d.ordinal, pubkey: d.pubkey, privateKeyRef: d.private_key_ref, status: 'active', createdAt: d.rotated_at, retiredAt: null, revokedAt: null });
        return { ...state, keys };
      }
      case 'agent.key_revoked': {
        if (state.status === 'none') return state;
        const d = event.data;
        return { ...state, keys: state.keys.map((k) => (k.kid === d.kid ? { ...k, status: 'revoked' as const, revokedAt: d.revoked_at } : k)) };
      }
      case 'agent.revoked': {
        if (state.status === 'none') return state;
        const d = event.data;
        const keys = state.keys.map((k) => (d.revoked_kids.includes(k.kid) ? { ...k, status: 'revoked' as const, revokedAt: d.revoked_at } : k));
        return { ...state, status: 'revoked', keys, revokedAt: d.revoked_at };
      }
      default:
        return state;
    }
  },

  decide(command, state, { now }): DomainEvent[] {
    switch (command.type) {
      case 'register': {
        if (state.status !== 'none') throw new Rejection('agent_exists', 'this handle (and its did:web) is taken');
        if (!DID_SEGMENT.test(command.handle)) throw new Rejection('invalid_did_segment', 'agent_id holds characters a did:web cannot hold');
        return [
          {
            type: 'agent.registered',
            data: {
              agent_id: command.handle,
              did: command.did,
              principal_ref: command.principalRef,
              display_name: command.displayName,
              kid: kidOf(command.did, 1),
              ordinal: 1,
              pubkey: command.key.pubkey,
              private_key_ref: command.key.privateKeyRef,
              registered_at: now,
            },
          },
        ];
      }
      case 'rotate': {
        const s = existing(state);
        const active = s.keys.find((k) => k.status === 'active');
        if (s.status === 'revoked' || !active) throw new Rejection('no_active_key', 'the agent has no active key to rotate');
        const ordinal = Math.max(...s.keys.map((k) => k.ordinal)) + 1;
        return [
          {
            type: 'agent.key_rotated',
            data: { agent_id: s.handle, kid: kidOf(s.did, ordinal), ordinal, pubkey: command.key.pubkey, private_key_ref: command.key.privateKeyRef, retired_kid: active.kid, rotated_at: now },
          },
        ];
      }
      case 'revoke_key': {
        const s = existing(state);
        const key = s.keys.find((k) => k.kid === command.kid);
        if (!key) throw new Rejection('key_not_found', 'no such key for this agent');
        if (key.status === 'revoked') throw new Rejection('key_already_revoked', 'the key is already revoked', { kid: key.kid, revoked_at: key.revokedAt });
        return [{ type: 'agent.key_revoked', data: { agent_id: s.handle, kid: key.kid, revoked_at: now } }];
      }
      case 'revoke_agent': {
        const s = existing(state);
        if (s.status === 'revoked') throw new Rejection('agent_already_revoked', 'the agent is already revoked', { revoked_at: s.revokedAt });
        const kids = [...s.keys].sort((a, b) => a.ordinal - b.ordinal).filter((k) => k.status !== 'revoked').map((k) => k.kid);
        return [{ type: 'agent.revoked', data: { agent_id: s.handle, did: s.did, revoked_kids: kids, revoked_at: now } }];
      }
    }
  },
};
