import type { DomainEvent, EventDataOf } from '../events/index.ts';
import type { HostedMerchant } from '../events/hosted-connect.ts';
import { type Decider, Rejection } from '../src/eventstore/handler.ts';
import type { Tenant } from './consumer.ts';

// A hosted-browser connect session (spec 4.16): open (a worker context on the
// merchant's login page, the person logs in through our live view) → finished
// (the login captured as a connection; the session id is spent) or expired
// (idle deadline, lifetime, or the context was lost). A start the worker
// refused is recorded as failed and never opens. The session id is bound to
// the organization and project that started it: anyone else's is not found.

export const hostedConnectStream = (sessionId: string) => `hosted_connect-${sessionId}`;

export type HostedSession = EventDataOf<'hosted_connect.started'> & { status: 'open' | 'finished' | 'expired'; connectionId: string | null };
export type HostedConnectState = { status: 'none' } | { status: 'failed'; merchant: HostedMerchant; org_id: string; project_id: string } | { status: 'exists'; s: HostedSession };

export type HostedConnectCommand =
  | { type: 'start'; data: EventDataOf<'hosted_connect.started'> }
  | { type: 'fail_start'; data: Omit<EventDataOf<'hosted_connect.failed'>, 'at'> }
  | { type: 'finish'; tenant: Tenant; merchant: HostedMerchant; connectionId: string }
  | { type: 'expire'; reason: EventDataOf<'hosted_connect.expired'>['reason'] };

/** The open or spent session of this tenant at this merchant; anything else is not found (nothing revealed). */
export function ownSession(state: HostedConnectState, t: Tenant, merchant: HostedMerchant): HostedSession {
  if (state.status !== 'exists' || state.s.org_id !== t.orgId || state.s.project_id !== t.projectId || state.s.merchant !== merchant) throw new Rejection('not_found', 'hosted connect session not found');
  return state.s;
}

/** Why a session that is not open cannot be finished: spent (409) or ended (410). */
export function usable(s: HostedSession): void {
  if (s.status === 'finished') throw new Rejection('session_used', 'this session id was already used to finish a connect', { connection_id: s.connectionId });
  if (s.status === 'expired') throw new Rejection('session_expired', 'the hosted browser session ended before it was finished; start a new one');
}

export const hostedConnectDecider: Decider<HostedConnectState, HostedConnectCommand> = {
  initialState: () => ({ status: 'none' }),
  evolve(state, event) {
    switch (event.type) {
      case 'hosted_connect.started':
        return { status: 'exists', s: { ...event.data, status: 'open', connectionId: null } };
      case 'hosted_connect.failed':
        return { status: 'failed', merchant: event.data.merchant, org_id: event.data.org_id, project_id: event.data.project_id };
      case 'hosted_connect.finished':
        return state.status === 'exists' ? { status: 'exists', s: { ...state.s, status: 'finished', connectionId: event.data.connection_id } } : state;
      case 'hosted_connect.expired':
        return state.status === 'exists' ? { status: 'exists', s: { ...state.s, status: 'expired' } } : state;
      default:
        return state;
    }
  },
  decide(command, state, { now }): DomainEvent[] {
    switch (command.type) {
      case 'start':
        if (state.status !== 'none') throw new Rejection('session_exists', 'a hosted connect session with this id exists');
        return [{ type: 'hosted_connect.started', data: command.data }];
      case 'fail_start':
        if (state.status !== 'none') throw new Rejection('session_exists', 'a hosted connect session with this id exists');
        return [{ type: 'hosted_connect.failed', data: { ...command.data, at: now } }];
      case 'finish': {
        const s = ownSession(state, command.tenant, command.merchant);
        usable(s);
        return [{ type: 'hosted_connect.finished', data: { session_id: s.session_id, connection_id: command.connectionId, at: now } }];
      }
      case 'expire':
        if (state.status !== 'exists' || state.s.status !== 'open') return [];
        return [{ type: 'hosted_connect.expired', data: { session_id: state.s.session_id, reason: command.reason, at: now } }];
    }
  },
};
