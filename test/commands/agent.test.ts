import t from 'tap';
import { agentDecider } from '../../commands/agent.ts';
import type { DomainEvent } from '../../events/index.ts';
import { given } from '../helpers/decider.ts';

// The key lifecycle: register → rotate → rotate → revoke key → revoke agent,
// with each illegal move rejected with its code.

const now = '2026-11-21T12:00:00.000Z';
const did = 'did:web:example.com:org_1:buyer';
const key = (n: number) => ({ pubkey: `pub${n}`, privateKeyRef: `vault_${n}` });
const registered: DomainEvent = {
  type: 'agent.registered',
  data: { agent_id: 'buyer', did, principal_ref: 'p', display_name: null, kid: `${did}#1`, ordinal: 1, pubkey: 'pub1', private_key_ref: 'vault_1', registered_at: now },
};
const rotated = (n: number): DomainEvent => ({
  type: 'agent.key_rotated',
  data: { agent_id: 'buyer', kid: `${did}#${n}`, ordinal: n, pubkey: `pub${n}`, private_key_ref: `vault_${n}`, retired_kid: `${did}#${n - 1}`, rotated_at: now },
});

t.test('the lifecycle, step by step', async (t) => {
  given(t, agentDecider, []).when({ type: 'register', handle: 'buyer', did, principalRef: 'p', displayName: null, key: key(1) }).then([registered]);
  given(t, agentDecider, [registered]).when({ type: 'rotate', key: key(2) }).then([rotated(2)], 'first rotation retires #1');
  given(t, agentDecider, [registered, rotated(2)]).when({ type: 'rotate', key: key(3) }).then([rotated(3)], 'second rotation retires #2');
  const h = [registered, rotated(2), rotated(3)];
  given(t, agentDecider, h).when({ type: 'revoke_key', kid: `${did}#1` }).then([{ type: 'agent.key_revoked', data: { agent_id: 'buyer', kid: `${did}#1`, revoked_at: now } }], 'a retired key can be revoked');
  const h2: DomainEvent[] = [...h, { type: 'agent.key_revoked', data: { agent_id: 'buyer', kid: `${did}#1`, revoked_at: now } }];
  given(t, agentDecider, h2)
    .when({ type: 'revoke_agent' })
    .then([{ type: 'agent.revoked', data: { agent_id: 'buyer', did, revoked_kids: [`${did}#2`, `${did}#3`], revoked_at: now } }], 'the rest, in creation order');
});

t.test('illegal moves', async (t) => {
  given(t, agentDecider, [registered]).when({ type: 'register', handle: 'buyer', did, principalRef: 'p', displayName: null, key: key(9) }).rejects('agent_exists');
  given(t, agentDecider, []).when({ type: 'register', handle: 'bad handle', did, principalRef: 'p', displayName: null, key: key(1) }).rejects('invalid_did_segment');
  given(t, agentDecider, []).when({ type: 'rotate', key: key(1) }).rejects('agent_not_found');
  given(t, agentDecider, []).when({ type: 'revoke_agent' }).rejects('agent_not_found');
  given(t, agentDecider, [registered]).when({ type: 'revoke_key', kid: `${did}#7` }).rejects('key_not_found');
  const keyGone: DomainEvent[] = [registered, { type: 'agent.key_revoked', data: { agent_id: 'buyer', kid: `${did}#1`, revoked_at: now } }];
  given(t, agentDecider, keyGone).when({ type: 'revoke_key', kid: `${did}#1` }).rejects('key_already_revoked');
  given(t, agentDecider, keyGone).when({ type: 'rotate', key: key(2) }).rejects('no_active_key', 'nothing active to rotate');
  const gone: DomainEvent[] = [registered, { type: 'agent.revoked', data: { agent_id: 'buyer', did, revoked_kids: [`${did}#1`], revoked_at: now } }];
  given(t, agentDecider, gone).when({ type: 'revoke_agent' }).rejects('agent_already_revoked');
  given(t, agentDecider, gone).when({ type: 'rotate', key: key(2) }).rejects('no_active_key');
});
