import type { DomainEvent, EventDataOf } from '../events/index.ts';
import { type Decider, Rejection } from '../src/eventstore/handler.ts';
import type { Tenant } from './consumer.ts';

// A session: an end user's set of attached providers, active until closed.
// The organization's open sessions are counted on one quota stream (a claim
// per session, released on close). Deleted (with its project) is terminal:
// the session and its tool calls leave the read side; deleting again changes
// nothing. A tool call: running, then success or error, once.

export const sessionStream = (id: string) => `session-${id}`;
export const sessionQuotaStream = (orgId: string) => `session_quota-${orgId}`;
export const toolCallStream = (id: string) => `tool_call-${id.replace(/^tc_/, '')}`;
export const proxyCallStream = (id: string) => `proxy_call-${id}`;

export type SessionState = { status: 'none' } | { status: 'active' | 'closed' | 'deleted'; id: string; orgId: string; projectId: string };
export type SessionCommand = { type: 'create'; data: EventDataOf<'session.created'> } | { type: 'close'; tenant: Tenant } | { type: 'delete'; tenant: Tenant; reason: 'project_deleted' };

export const sessionDecider: Decider<SessionState, SessionCommand> = {
  initialState: () => ({ status: 'none' }),
  evolve(state, e) {
    if (e.type === 'session.created') return { status: 'active', id: e.data.session_id, orgId: e.data.org_id, projectId: e.data.project_id };
    if (e.type === 'session.closed' && (state.status === 'active' || state.status === 'closed')) return { ...state, status: 'closed' };
    if (e.type === 'session.deleted' && state.status !== 'none') return { ...state, status: 'deleted' };
    return state;
  },
  decide(cmd, state, { now }): DomainEvent[] {
    if (cmd.type === 'create') {
      if (state.status !== 'none') throw new Rejection('concurrency_conflict', 'the session exists');
      return [{ type: 'session.created', data: cmd.data }];
    }
    if (state.status === 'none' || state.orgId !== cmd.tenant.orgId || state.projectId !== cmd.tenant.projectId) throw new Rejection('not_found', 'session not found');
    if (cmd.type === 'delete') return state.status === 'deleted' ? [] : [{ type: 'session.deleted', data: { session_id: state.id, reason: cmd.reason, at: now } }];
    if (state.status === 'deleted') throw new Rejection('not_found', 'session not found');
    if (state.status === 'closed') return [];
    return [{ type: 'session.closed', data: { session_id: state.id, at: now } }];
  },
};

export type QuotaState = { open: ReadonlySet<string> };
export type QuotaCommand = { type: 'claim'; sessionId: string; limit: number } | { type: 'release'; sessionId: string };

export const sessionQuotaDecider: Decider<QuotaState, QuotaCommand> = {
  initialState: () => ({ open: new Set() }),
  evolve(state, e) {
    if (e.type === 'session_quota.claimed') return { open: new Set([...state.open, e.data.session_id]) };
    if (e.type === 'session_quota.released') {
      const open = new Set(state.open);
      open.delete(e.data.session_id);
      return { open };
    }
    return state;
  },
  decide(cmd, state, { now }): DomainEvent[] {
    if (cmd.type === 'claim') {
      if (state.open.has(cmd.sessionId)) return [];
      if (state.open.size >= cmd.limit) throw new Rejection('quota_exceeded', 'the organization has reached its open-session quota', { limit: cmd.limit, current: state.open.size });
      return [{ type: 'session_quota.claimed', data: { session_id: cmd.sessionId, limit: cmd.limit, at: now } }];
    }
    if (!state.open.has(cmd.sessionId)) return [];
    return [{ type: 'session_quota.released', data: { session_id: cmd.sessionId, at: now } }];
  },
};

export type ToolCallState = { status: 'none' | 'running' | 'success' | 'error' };
export type ToolCallCommand =
  | { type: 'start'; data: EventDataOf<'tool_call.started'> }
  | { type: 'succeed'; data: EventDataOf<'tool_call.succeeded'> }
  | { type: 'fail'; data: EventDataOf<'tool_call.failed'> };

export const toolCallDecider: Decider<ToolCallState, ToolCallCommand> = {
  initialState: () => ({ status: 'none' }),
  evolve(state, e) {
    if (e.type === 'tool_call.started') return { status: 'running' };
    if (e.type === 'tool_call.succeeded') return { status: 'success' };
    if (e.type === 'tool_call.failed') return { status: 'error' };
    return state;
  },
  decide(cmd, state): DomainEvent[] {
    if (cmd.type === 'start') {
      if (state.status !== 'none') throw new Rejection('concurrency_conflict', 'the tool call exists');
      return [{ type: 'tool_call.started', data: cmd.data }];
    }
    if (state.status !== 'running') throw new Rejection('invalid_transition', `the tool call is ${state.status}`);
    return cmd.type === 'succeed' ? [{ type: 'tool_call.succeeded', data: cmd.data }] : [{ type: 'tool_call.failed', data: cmd.data }];
  },
};

export type ProxyCallState = { status: 'none' | 'running' | 'completed' | 'failed' };
export type ProxyCallCommand =
  | { type: 'start'; data: EventDataOf<'proxy_call.started'> }
  | { type: 'complete'; data: EventDataOf<'proxy_call.completed'> }
  | { type: 'fail'; data: EventDataOf<'proxy_call.failed'> };

/** A proxy call: running, then completed (the provider answered) or failed (not reached), once. */
export const proxyCallDecider: Decider<ProxyCallState, ProxyCallCommand> = {
  initialState: () => ({ status: 'none' }),
  evolve(state, e) {
    if (e.type === 'proxy_call.started') return { status: 'running' };
    if (e.type === 'proxy_call.completed') return { status: 'completed' };
    if (e.type === 'proxy_call.failed') return { status: 'failed' };
    return state;
  },
  decide(cmd, state): DomainEvent[] {
    if (cmd.type === 'start') {
      if (state.status !== 'none') throw new Rejection('concurrency_conflict', 'the proxy call exists');
      return [{ type: 'proxy_call.started', data: cmd.data }];
    }
    if (state.status !== 'running') throw new Rejection('invalid_transition', `the proxy call is ${state.status}`);
    return cmd.type === 'complete' ? [{ type: 'proxy_call.completed', data: cmd.data }] : [{ type: 'proxy_call.failed', data: cmd.data }];
  },
};
