import { randomUUID } from 'node:crypto';
import { approvalDecider, approvalPageUrl, approvalStream } from '../../commands/approval.ts';
import { counterDecider, counterStream, decisionDecider, decisionStream, ordered, type Policy, type PolicySet, policySetDecider, policiesStream } from '../../commands/policy.ts';
import type { CommandResult, Decider, HandleOptions } from '../eventstore/handler.ts';
import { cachedState, loadState, Rejection } from '../eventstore/handler.ts';
import type { AppendGuard, EventStore } from '../eventstore/port.ts';
import { newId } from '../ids.ts';
import { CONFIG_SCHEMAS, matches, WEEKDAYS } from './config.ts';

// The policy engine. Before a tool call, a mandate spend or an x402 execution,
// the organization's enabled policies are walked in `order`; the first
// decisive rule wins:
//   allow              → allowed (later rules are not consulted)
//   deny               → denied_by_policy
//   budget, rate-limit → consume from the rule's counter (exact under races);
//                        no room → budget_exceeded / rate_limited_by_policy
//   time-window        → outside the window → outside_time_window
//   approval-required  → an Approval is created; the call is held
// No decisive rule means allowed. Counters consumed on the way are released
// when a later rule denies or holds the call, or when the caller's action
// fails afterwards (`release`). A decisive evaluation, and any evaluation that
// moved a counter, is recorded as `policy.decided` in the audit chain.
//
// The rule set is read by folding the organization's policy stream, not a read
// model: a 2xx PATCH is enforced by the very next request on any instance.

export type Run = <S, C>(decider: Decider<S, C>, stream: string, command: C, opts?: HandleOptions<S> & { orgId?: string; projectId?: string | null }) => Promise<CommandResult<S>>;

export type PolicyCall = {
  orgId: string;
  projectId: string | null;
  sessionId?: string | null;
  agentId: string;
  /** `<server>/<tool>` for tool calls, `mandate.spend`, `x402.execute`. */
  toolName: string;
  /** The call's input, verbatim: what an approval executes later. */
  toolInput: Record<string, unknown>;
  amountMinor?: bigint | null;
  currency?: string | null;
  /** Set when executing a call a person approved: approval-required rules are passed. */
  approvedBy?: string | null;
};

export type Denial = { reason: string; ruleType: string; ruleId: string; approval_id?: string; expires_at?: string; approval_url?: string };

/** Evaluations of a guarded action (a spend, a tool call, an x402 execution) while the policies keep changing under it. */
export const POLICY_ATTEMPTS = 5;

export type PolicyOutcome =
  | {
      decision: 'allowed';
      ruleId: string | null;
      release(): Promise<void>;
      /** The policy set this was decided on: append the guarded action under it (GuardFailed: the set moved, evaluate again). */
      guard: AppendGuard;
    }
  | { decision: 'denied' | 'approval_required'; body: Denial };

type Held = { policyId: string; subject: string; reservationId: string };

function subjectOf(per: 'agent' | 'tool' | 'organization', call: PolicyCall): string {
  const raw = per === 'agent' ? `a:${call.agentId}` : per === 'tool' ? `t:${call.toolName}` : 'org';
  // Stream names stay short and free of separators whatever the agent or tool is called.
  return Buffer.from(raw).toString('base64url').slice(0, 120);
}

/** Whether `now` falls in the rule's local days and hours (wall clock of its IANA zone, DST included). */
export function insideWindow(config: { timezone: string; days: readonly string[]; start: string; end: string }, now: Date): boolean {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat('en-US', { timeZone: config.timezone, weekday: 'short', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' })
      .formatToParts(now)
      .map((p) => [p.type, p.value]),
  );
  const day = String(parts.weekday).toLowerCase().slice(0, 3);
  const minutes = Number(parts.hour) * 60 + Number(parts.minute);
  const toMin = (hhmm: string) => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));
  const start = toMin(config.start);
  const end = toMin(config.end);
  if (start < end) return config.days.includes(day) && minutes >= start && minutes < end;
  // Spans midnight: the part after midnight belongs to the previous day's window.
  if (minutes >= start) return config.days.includes(day);
  if (minutes < end) {
    const prev = WEEKDAYS[(WEEKDAYS.indexOf(day as (typeof WEEKDAYS)[number]) + 6) % 7]!;
    return config.days.includes(prev);
  }
  return false;
}

export class PolicyEngine {
  constructor(
    private readonly store: EventStore,
    private readonly now: () => Date,
    /** The service's public base URL: a hold's body then links the approval's page (`approval_url`). */
    private readonly baseUrl?: string,
  ) {}

  /** The organization's policies in evaluation order, folded from its stream. */
  async policies(orgId: string): Promise<Policy[]> {
    return (await this.policySet(orgId)).policies;
  }

  /**
   * The policies and the revision of the stream they fold up to. `fromCache`
   * takes this process's folded copy when it has one, without reading: only
   * for an action appended under the outcome's guard, which proves the copy
   * current (or fails, and the caller evaluates again without the cache).
   */
  async policySet(orgId: string, fromCache = false): Promise<{ policies: Policy[]; guard: AppendGuard }> {
    const stream = policiesStream(orgId);
    const hit = fromCache ? cachedState<PolicySet>(this.store, stream, policySetDecider) : undefined;
    const { state, revision } = hit ?? (await loadState(this.store, stream, policySetDecider));
    return { policies: ordered(state), guard: { stream, revision: revision ?? 'no_stream' } };
  }

  /**
   * `fromCache`: when this process's copy of the policies has no rule for the
   * call, the call is allowed on it without a read (the caller appends under the
   * returned guard). A copy with a matching rule is never acted on: rules consume
   * counters, record decisions and request approvals, so they are evaluated on a
   * fresh read, as without the option.
   */
  async evaluate(call: PolicyCall, run: Run, opts: { fromCache?: boolean } = {}): Promise<PolicyOutcome> {
    const applicable = (set: { policies: Policy[] }) => set.policies.filter((p) => p.enabled && matches(p.agents, call.agentId) && matches(p.tools, call.toolName));
    let set = await this.policySet(call.orgId, opts.fromCache ?? false);
    let rules = applicable(set);
    if (rules.length > 0 && opts.fromCache) {
      set = await this.policySet(call.orgId);
      rules = applicable(set);
    }
    const guard = set.guard;
    if (rules.length === 0) return { decision: 'allowed', ruleId: null, release: async () => {}, guard };
    const held: Held[] = [];
    const release = async () => {
      for (const h of held.splice(0)) await run(counterDecider, counterStream(h.policyId, h.subject), { type: 'release', policyId: h.policyId, subject: h.subject, reservationId: h.reservationId }, { serialize: true, orgId: call.orgId, projectId: call.projectId });
    };
    let outcome: PolicyOutcome | undefined;
    let decisive: Policy | null = null;
    for (const rule of rules) {
      const denial = (reason: string): PolicyOutcome => ({ decision: 'denied', body: { reason, ruleType: rule.type, ruleId: rule.id } });
      if (rule.type === 'allow') {
        outcome = { decision: 'allowed', ruleId: rule.id, release, guard };
      } else if (rule.type === 'deny') {
        outcome = denial('denied_by_policy');
      } else if (rule.type === 'budget' || rule.type === 'rate-limit') {
        let units: bigint;
        let limit: bigint;
        const windowSeconds = Number(rule.config.window_seconds);
        if (rule.type === 'budget') {
          const c = CONFIG_SCHEMAS.budget.parse(rule.config);
          if (call.amountMinor == null || call.currency !== c.currency) continue; // not a spend in this currency
          units = call.amountMinor;
          limit = BigInt(c.amount_minor);
        } else {
          units = 1n;
          limit = BigInt(CONFIG_SCHEMAS['rate-limit'].parse(rule.config).max_calls);
        }
        const per = CONFIG_SCHEMAS[rule.type].parse(rule.config).per;
        const h = { policyId: rule.id, subject: subjectOf(per, call), reservationId: randomUUID() };
        try {
          await run(counterDecider, counterStream(h.policyId, h.subject), { type: 'consume', ...h, units, limit, windowSeconds }, { serialize: true, orgId: call.orgId, projectId: call.projectId });
          held.push(h);
          continue;
        } catch (err) {
          if (!(err instanceof Rejection) || err.code !== 'policy_limit_reached') throw err;
          outcome = denial(rule.type === 'budget' ? 'budget_exceeded' : 'rate_limited_by_policy');
        }
      } else if (rule.type === 'time-window') {
        if (insideWindow(CONFIG_SCHEMAS['time-window'].parse(rule.config), this.now())) continue;
        outcome = denial('outside_time_window');
      } else if (rule.type === 'approval-required') {
        if (call.approvedBy) continue;
        const c = CONFIG_SCHEMAS['approval-required'].parse(rule.config);
        if (c.min_amount_minor !== undefined && call.amountMinor != null && call.amountMinor < BigInt(c.min_amount_minor)) continue;
        const approvalId = newId('apr');
        const created = this.now();
        const expiresAt = new Date(created.getTime() + c.approval_ttl_seconds * 1000).toISOString();
        await run(approvalDecider, approvalStream(approvalId), {
          type: 'request',
          event: {
            type: 'approval.requested',
            data: { approval_id: approvalId, org_id: call.orgId, project_id: call.projectId, session_id: call.sessionId ?? null, agent_id: call.agentId, matched_rule_id: rule.id, matched_rule_name: rule.name, tool_name: call.toolName, tool_input: call.toolInput, created_at: created.toISOString(), expires_at: expiresAt },
          },
        }, { orgId: call.orgId, projectId: call.projectId });
        outcome = {
          decision: 'approval_required',
          body: { reason: 'approval_required', ruleType: rule.type, ruleId: rule.id, approval_id: approvalId, expires_at: expiresAt, ...(this.baseUrl ? { approval_url: approvalPageUrl(this.baseUrl, approvalId) } : {}) },
        };
      }
      decisive = rule;
      break;
    }
    outcome ??= { decision: 'allowed', ruleId: null, release, guard };
    if (outcome.decision !== 'allowed') await release();
    if (decisive || held.length > 0) {
      const decisionId = newId('pdc');
      const denial = outcome.decision === 'allowed' ? null : outcome.body;
      await run(decisionDecider, decisionStream(decisionId), {
        type: 'record',
        event: {
          type: 'policy.decided',
          data: {
            decision_id: decisionId,
            org_id: call.orgId,
            decision: outcome.decision,
            rule_id: decisive?.id ?? null,
            rule_type: decisive?.type ?? null,
            reason: denial?.reason ?? null,
            agent_id: call.agentId,
            tool_name: call.toolName,
            amount_minor: call.amountMinor != null ? call.amountMinor.toString() : null,
            currency: call.currency ?? null,
            approval_id: denial?.approval_id ?? null,
            at: this.now().toISOString(),
          },
        },
      }, { orgId: call.orgId, projectId: call.projectId });
    }
    return outcome;
  }
}
