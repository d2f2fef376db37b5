import { z } from 'zod';
import { IntString, IsoTime } from './common.ts';

// Facts of policies (rules that bound what agents may do) and approvals.
//
// Streams:
//   policies-<org>                      the organization's ordered policy set (order, reorder atomic)
//   policy_counter-<policy>.<subject>   usage against one budget or rate-limit rule (exact under races)
//   policy_decision-<id>                one decisive evaluation, sealed in the audit chain
//   approval-<id>                       a held call waiting for a person

export const PolicyType = z.enum(['allow', 'deny', 'budget', 'rate-limit', 'time-window', 'approval-required']);
export type PolicyType = z.infer<typeof PolicyType>;

export const PolicyCreated = z.object({
  policy_id: z.string(),
  org_id: z.string(),
  name: z.string(),
  type: PolicyType,
  config: z.record(z.string(), z.unknown()),
  agents: z.array(z.string()),
  tools: z.array(z.string()),
  enabled: z.boolean(),
  order: z.number().int(),
  at: IsoTime,
});

export const PolicyUpdated = z.object({
  policy_id: z.string(),
  name: z.string().optional(),
  type: PolicyType.optional(),
  config: z.record(z.string(), z.unknown()).optional(),
  agents: z.array(z.string()).optional(),
  tools: z.array(z.string()).optional(),
  enabled: z.boolean().optional(),
  at: IsoTime,
});

export const PolicyDeleted = z.object({ policy_id: z.string(), at: IsoTime });

/** The whole new order of the organization's policies: ids in ascending order. */
export const PoliciesReordered = z.object({ org_id: z.string(), ids: z.array(z.string()), at: IsoTime });

export const CounterConsumed = z.object({
  policy_id: z.string(),
  subject: z.string(),
  /** What one call costs against the rule: an amount in minor units (budget) or 1 (rate-limit). */
  units: IntString,
  reservation_id: z.string(),
  at: IsoTime,
});
export const CounterReleased = z.object({ policy_id: z.string(), subject: z.string(), reservation_id: z.string(), at: IsoTime });

export const PolicyDecision = z.enum(['allowed', 'denied', 'approval_required']);
export const PolicyDecided = z.object({
  decision_id: z.string(),
  org_id: z.string(),
  decision: PolicyDecision,
  /** null when no enabled rule was decisive (the call passes by default; counters may have moved). */
  rule_id: z.string().nullable(),
  rule_type: PolicyType.nullable(),
  reason: z.string().nullable(),
  agent_id: z.string(),
  tool_name: z.string(),
  amount_minor: IntString.nullable(),
  currency: z.string().nullable(),
  approval_id: z.string().nullable(),
  at: IsoTime,
});

export const ApprovalRequested = z.object({
  approval_id: z.string(),
  org_id: z.string(),
  project_id: z.string().nullable(),
  session_id: z.string().nullable(),
  agent_id: z.string(),
  matched_rule_id: z.string(),
  matched_rule_name: z.string(),
  tool_name: z.string(),
  tool_input: z.record(z.string(), z.unknown()),
  created_at: IsoTime,
  expires_at: IsoTime,
});
export const ApprovalDecided = z.object({
  approval_id: z.string(),
  decided_by: z.string(),
  decision_reason: z.string().nullable(),
  at: IsoTime,
});
export const ApprovalExpired = z.object({ approval_id: z.string(), at: IsoTime });
export const ApprovalExecuted = z.object({ approval_id: z.string(), execution_result: z.record(z.string(), z.unknown()), at: IsoTime });

export const policyEvents = {
  'policy.created': PolicyCreated,
  'policy.updated': PolicyUpdated,
  'policy.deleted': PolicyDeleted,
  'policy.reordered': PoliciesReordered,
  'policy.counter_consumed': CounterConsumed,
  'policy.counter_released': CounterReleased,
  'policy.decided': PolicyDecided,
  'approval.requested': ApprovalRequested,
  'approval.approved': ApprovalDecided,
  'approval.denied': ApprovalDecided,
  'approval.expired': ApprovalExpired,
  'approval.executed': ApprovalExecuted,
  'approval.execution_failed': ApprovalExecuted,
} as const;
