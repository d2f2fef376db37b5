import { Rejection } from '../eventstore/handler.ts';
import type { Denial } from '../policy/evaluator.ts';

/**
 * A policy's denial or hold as a rejection: `policy_denied` or
 * `approval_required`, the denial body (reason, ruleType, ruleId, and the
 * approval's id and expiry when held) as its details. src/http/kernel/errors.ts
 * answers both with the spec's bare 403 of that body (Part 7).
 */
export function policyRefusal(outcome: { decision: 'denied' | 'approval_required'; body: Denial }): Rejection {
  const held = outcome.decision === 'approval_required';
  return new Rejection(held ? 'approval_required' : 'policy_denied', `the call was ${held ? 'held for approval' : 'denied'} by policy ${outcome.body.ruleId}`, outcome.body);
}
