import type { DomainEvent } from '../events/index.ts';
import { type Decider, Rejection } from '../src/eventstore/handler.ts';

// An approval: a call held by an approval-required rule until a person decides.
// pending → approved (then executed or execution_failed) | denied | expired.
// "Executed once" holds because only the append that moves pending → approved
// at the stream's revision wins, and only its caller executes the held call.

export const approvalStream = (id: string) => `approval-${id}`;

/** Where a person opens an approval to decide it: the dashboard's page, under the service's public base URL. */
export const approvalPageUrl = (baseUrl: string, id: string) => `${baseUrl.replace(/\/+$/, '')}/dashboard/approvals/${encodeURIComponent(id)}`;

export type ApprovalStatus = 'pending' | 'approved' | 'denied' | 'expired' | 'execution_failed';

export type Approval = {
  id: string;
  orgId: string;
  projectId: string | null;
  sessionId: string | null;
  agentId: string;
  ruleId: string;
  ruleName: string;
  toolName: string;
  toolInput: Record<string, unknown>;
  status: ApprovalStatus;
  createdAt: string;
  expiresAt: string;
  decidedAt: string | null;
  decidedBy: string | null;
  decisionReason: string | null;
  executedAt: string | null;
  executionResult: Record<string, unknown> | null;
};

export type ApprovalState = { status: 'none' } | { status: 'exists'; a: Approval };

export type ApprovalCommand =
  | { type: 'request'; event: Extract<DomainEvent, { type: 'approval.requested' }> }
  | { type: 'decide'; orgId: string; decision: 'approve' | 'deny'; by: string; reason: string | null }
  | { type: 'expire' }
  | { type: 'record_execution'; ok: boolean; result: Record<string, unknown> };

export const approvalDecider: Decider<ApprovalState, ApprovalCommand> = {
  initialState: () => ({ status: 'none' }),
  evolve(state, event) {
    if (event.type === 'approval.requested') {
      const d = event.data;
      return {
        status: 'exists',
        a: { id: d.approval_id, orgId: d.org_id, projectId: d.project_id, sessionId: d.session_id, agentId: d.agent_id, ruleId: d.matched_rule_id, ruleName: d.matched_rule_name, toolName: d.tool_name, toolInput: d.tool_input, status: 'pending', createdAt: d.created_at, expiresAt: d.expires_at, decidedAt: null, decidedBy: null, decisionReason: null, executedAt: null, executionResult: null },
      };
    }
    if (state.status !== 'exists') return state;
    const a = state.a;
    switch (event.type) {
      case 'approval.approved':
        return { status: 'exists', a: { ...a, status: 'approved', decidedAt: event.data.at, decidedBy: event.data.decided_by, decisionReason: event.data.decision_reason } };
      case 'approval.denied':
        return { status: 'exists', a: { ...a, status: 'denied', decidedAt: event.data.at, decidedBy: event.data.decided_by, decisionReason: event.data.decision_reason } };
      case 'approval.expired':
        return { status: 'exists', a: { ...a, status: 'expired' } };
      case 'approval.executed':
        return { status: 'exists', a: { ...a, executedAt: event.data.at, executionResult: event.data.execution_result } };
      case 'approval.execution_failed':
        return { status: 'exists', a: { ...a, status: 'execution_failed', executedAt: event.data.at, executionResult: event.data.execution_result } };
      default:
        return state;
    }
  },
  decide(command, state, { now }): DomainEvent[] {
    if (command.type === 'request') {
      if (state.status !== 'none') return [];
      return [command.event];
    }
    if (state.status !== 'exists') throw new Rejection('not_found', 'approval not found');
    const a = state.a;
    switch (command.type) {
      case 'decide': {
        if (a.orgId !== command.orgId) throw new Rejection('not_found', 'approval not found');
        if (a.status !== 'pending') throw new Rejection('approval_not_pending', `the approval is already ${a.status}`, { status: a.status });
        if (Date.parse(now) >= Date.parse(a.expiresAt)) throw new Rejection('approval_expired', 'the approval expired before it was decided', { expires_at: a.expiresAt });
        const data = { approval_id: a.id, decided_by: command.by, decision_reason: command.reason, at: now };
        return [command.decision === 'approve' ? { type: 'approval.approved', data } : { type: 'approval.denied', data }];
      }
      case 'expire':
        if (a.status !== 'pending' || Date.parse(now) < Date.parse(a.expiresAt)) return [];
        return [{ type: 'approval.expired', data: { approval_id: a.id, at: now } }];
      case 'record_execution': {
        if (a.status !== 'approved' || a.executedAt) return [];
        const data = { approval_id: a.id, execution_result: command.result, at: now };
        return [command.ok ? { type: 'approval.executed', data } : { type: 'approval.execution_failed', data }];
      }
    }
  },
};
