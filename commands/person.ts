import type { DomainEvent } from '../events/index.ts';
import { type Decider, Rejection } from '../src/eventstore/handler.ts';
import { PASSKEYS_MAX } from '../src/limits.ts';

// A person's dashboard access (one stream per user): sign-ins, sign-outs and
// the passkeys they registered. The sessions themselves are operational rows
// (src/dashboard/session.ts); the log records that they began and ended.

export const personStream = (userId: string) => `person-${userId}`;

export type Passkey = { credentialId: string; publicKey: string; counter: number; transports: string[]; name: string; addedAt: string };
export type PersonState = { passkeys: Map<string, Passkey> };

export type PersonCommand =
  | { type: 'sign_in'; userId: string; sessionId: string; method: 'code' | 'passkey'; passkeyId: string | null }
  | { type: 'sign_out'; userId: string; sessionId: string; everywhere: boolean }
  | { type: 'add_passkey'; userId: string; passkeyId: string; credentialId: string; publicKey: string; counter: number; transports: string[]; name: string }
  | { type: 'remove_passkey'; userId: string; passkeyId: string };

export const personDecider: Decider<PersonState, PersonCommand> = {
  initialState: () => ({ passkeys: new Map() }),
  evolve(state, event: DomainEvent): PersonState {
    switch (event.type) {
      case 'user.passkey_added': {
        const passkeys = new Map(state.passkeys);
        const d = event.data;
        passkeys.set(d.passkey_id, { credentialId: d.credential_id, publicKey: d.public_key, counter: d.counter, transports: d.transports, name: d.name, addedAt: d.added_at });
        return { passkeys };
      }
      case 'user.passkey_removed': {
        const passkeys = new Map(state.passkeys);
        passkeys.delete(event.data.passkey_id);
        return { passkeys };
      }
      default:
        return state;
    }
  },
  decide(command, state, { now }): DomainEvent[] {
    switch (command.type) {
      case 'sign_in':
        return [{ type: 'user.signed_in', data: { user_id: command.userId, session_id: command.sessionId, method: command.method, passkey_id: command.passkeyId, signed_in_at: now } }];
      case 'sign_out':
        return [{ type: 'user.signed_out', data: { user_id: command.userId, session_id: command.sessionId, everywhere: command.everywhere, signed_out_at: now } }];
      case 'add_passkey': {
        if (state.passkeys.size >= PASSKEYS_MAX) throw new Rejection('passkey_limit', `a person may hold at most ${PASSKEYS_MAX} passkeys; remove one first`);
        for (const p of state.passkeys.values()) if (p.credentialId === command.credentialId) return [];
        const { userId, passkeyId, credentialId, publicKey, counter, transports, name } = command;
        return [{ type: 'user.passkey_added', data: { user_id: userId, passkey_id: passkeyId, credential_id: credentialId, public_key: publicKey, counter, transports, name, added_at: now } }];
      }
      case 'remove_passkey':
        if (!state.passkeys.has(command.passkeyId)) return [];
        return [{ type: 'user.passkey_removed', data: { user_id: command.userId, passkey_id: command.passkeyId } }];
    }
  },
};
