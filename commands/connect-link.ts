import { createHash } from 'node:crypto';
import type { DomainEvent, EventDataOf } from '../events/index.ts';
import { type Decider, Rejection } from '../src/eventstore/handler.ts';

// An OAuth connect link: started (ten minutes to live), then consumed by the
// first callback in time (the link token is single use), then completed (a
// connection) or failed (the person denied, or the code exchange failed).
// A callback after expiry, or with a spent or unknown token, is refused and
// writes nothing.

/** Ten minutes (spec 8, connect link lifetime). */
export const CONNECT_LINK_TTL_MS = 10 * 60_000;

export const linkIdOf = (linkToken: string) => `cl_${createHash('sha256').update(linkToken).digest('hex').slice(0, 40)}`;
export const connectLinkStream = (linkId: string) => `connect_link-${linkId}`;

export type ConnectLink = EventDataOf<'connect_link.started'>;
export type ConnectLinkState = { status: 'none' } | { status: 'started' | 'consumed' | 'completed' | 'failed'; link: ConnectLink };

export type ConnectLinkCommand =
  | { type: 'start'; data: ConnectLink }
  | { type: 'consume' }
  | { type: 'complete'; connectionId: string; accountId: string | null }
  | { type: 'fail'; reason: string; detail: string | null };

export const connectLinkDecider: Decider<ConnectLinkState, ConnectLinkCommand> = {
  initialState: () => ({ status: 'none' }),
  evolve(state, event) {
    switch (event.type) {
      case 'connect_link.started':
        return { status: 'started', link: event.data };
      case 'connect_link.consumed':
        return state.status === 'none' ? state : { status: 'consumed', link: state.link };
      case 'connect_link.completed':
        return state.status === 'none' ? state : { status: 'completed', link: state.link };
      case 'connect_link.failed':
        return state.status === 'none' ? state : { status: 'failed', link: state.link };
      default:
        return state;
    }
  },
  decide(command, state, { now }): DomainEvent[] {
    if (command.type === 'start') {
      if (state.status !== 'none') throw new Rejection('link_exists', 'a link with this token exists');
      return [{ type: 'connect_link.started', data: command.data }];
    }
    if (state.status === 'none') throw new Rejection('link_token_unknown', 'no connect link has this state');
    const id = state.link.link_id;
    if (command.type === 'consume') {
      if (state.status !== 'started') throw new Rejection('link_token_used', 'this connect link was already used', { link_id: id });
      if (Date.parse(now) >= Date.parse(state.link.expires_at)) throw new Rejection('link_expired', 'this connect link expired', { expires_at: state.link.expires_at });
      return [{ type: 'connect_link.consumed', data: { link_id: id, at: now } }];
    }
    if (state.status !== 'consumed') throw new Rejection('invalid_transition', `the link is ${state.status}`, { from: state.status });
    if (command.type === 'complete') return [{ type: 'connect_link.completed', data: { link_id: id, connection_id: command.connectionId, account_id: command.accountId, at: now } }];
    return [{ type: 'connect_link.failed', data: { link_id: id, reason: command.reason, detail: command.detail, at: now } }];
  },
};
