import type { DomainEvent } from '../events/index.ts';
import type { PolicyType } from '../events/policy.ts';
import { type Decider, Rejection } from '../src/eventstore/handler.ts';

// Policies: the organization's ordered rule set is one aggregate, so "order",
// "reorder is atomic" and "an id of another organization is absent" are
// decided in one stream. Counters and decisions have streams of their own.

export const policiesStream = (orgId: string) => `policies-${orgId}`;
export const counterStream = (policyId: string, subject: string) => `policy_counter-${policyId}.${subject}`;
export const decisionStream = (decisionId: string) => `policy_decision-${decisionId}`;

export type Policy = {
  id: string;
  name: string;
  type: PolicyType;
  config: Record<string, unknown>;
  agents: string[];
  tools: string[];
  enabled: boolean;
  order: number;
  createdAt: string;
  updatedAt: string;
};

export type PolicySet = { orgId: string | null; policies: Map<string, Policy> };

export type PolicyFields = { name: string; type: PolicyType; config: Record<string, unknown>; agents: string[]; tools: string[]; enabled: boolean };

export type PolicyCommand =
  | { type: 'create'; orgId: string; policyId: string; fields: PolicyFields }
  | { type: 'update'; policyId: string; changes: Partial<PolicyFields> }
  | { type: 'delete'; policyId: string }
  | { type: 'reorder'; orgId: string; ids: string[] };

/** Policies in evaluation order. */
export function ordered(set: PolicySet): Policy[] {
  return [...set.policies.values()].sort((a, b) => a.order - b.order || a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
}

function own(set: PolicySet, id: string): Policy {
  const p = set.policies.get(id);
  if (!p) throw new Rejection('not_found', 'policy not found');
  return p;
}

export const policySetDecider: Decider<PolicySet, PolicyCommand> = {
  initialState: () => ({ orgId: null, policies: new Map() }),
  evolve(state, event) {
    const policies = new Map(state.policies);
    switch (event.type) {
      case 'policy.created': {
        const d = event.data;
        policies.set(d.policy_id, { id: d.policy_id, name: d.name, type: d.type, config: d.config, agents: d.agents, tools: d.tools, enabled: d.enabled, order: d.order, createdAt: d.at, updatedAt: d.at });
        return { orgId: d.org_id, policies };
      }
      case 'policy.updated': {
        const d = event.data;
        const p = policies.get(d.policy_id);
        if (!p) return state;
        const { policy_id: _id, at, ...changes } = d;
        policies.set(d.policy_id, { ...p, ...changes, updatedAt: at });
        return { ...state, policies };
      }
      case 'policy.deleted':
        policies.delete(event.data.policy_id);
        return { ...state, policies };
      case 'policy.reordered': {
        event.data.ids.forEach((id, i) => {
          const p = policies.get(id);
          if (p) policies.set(id, { ...p, order: i + 1, updatedAt: event.data.at });
        });
        return { ...state, policies };
      }
      default:
        return state;
    }
  },
  decide(command, state, { now }): DomainEvent[] {
    switch (command.type) {
      case 'create': {
        const max = Math.max(0, ...[...state.policies.values()].map((p) => p.order));
        return [{ type: 'policy.created', data: { policy_id: command.policyId, org_id: command.orgId, ...command.fields, order: max + 1, at: now } }];
      }
      case 'update': {
        own(state, command.policyId);
        return [{ type: 'policy.updated', data: { policy_id: command.policyId, ...command.changes, at: now } }];
      }
      case 'delete':
        own(state, command.policyId);
        return [{ type: 'policy.deleted', data: { policy_id: command.policyId, at: now } }];
      case 'reorder': {
        const seen = new Set<string>();
        for (const id of command.ids) {
          own(state, id);
          if (seen.has(id)) throw new Rejection('invalid_body', 'an id is listed twice', { id });
          seen.add(id);
        }
        // Listed ids first, in the given order; the others keep their relative order after them.
        const rest = ordered(state).filter((p) => !seen.has(p.id)).map((p) => p.id);
        return [{ type: 'policy.reordered', data: { org_id: command.orgId, ids: [...command.ids, ...rest], at: now } }];
      }
    }
  },
};

// A counter of one budget or rate-limit rule for one subject. Every call's
// usage is an event; the limit holds exactly under concurrency because each
// consumption is decided on the stream's state and appended at its revision.

export type CounterState = { entries: { reservation: string; units: bigint; at: string }[]; released: Set<string> };
export type CounterCommand =
  | { type: 'consume'; policyId: string; subject: string; reservationId: string; units: bigint; limit: bigint; windowSeconds: number }
  | { type: 'release'; policyId: string; subject: string; reservationId: string };

/** Units used inside the rolling window ending at `now` (exclusive of entries at or before its start). */
export function usedIn(state: CounterState, now: string, windowSeconds: number): bigint {
  const start = Date.parse(now) - windowSeconds * 1000;
  let sum = 0n;
  for (const e of state.entries) if (!state.released.has(e.reservation) && Date.parse(e.at) > start) sum += e.units;
  return sum;
}

export const counterDecider: Decider<CounterState, CounterCommand> = {
  initialState: () => ({ entries: [], released: new Set() }),
  evolve(state, event) {
    if (event.type === 'policy.counter_consumed') return { ...state, entries: [...state.entries, { reservation: event.data.reservation_id, units: BigInt(event.data.units), at: event.data.at }] };
    if (event.type === 'policy.counter_released') return { ...state, released: new Set([...state.released, event.data.reservation_id]) };
    return state;
  },
  decide(command, state, { now }): DomainEvent[] {
    if (command.type === 'consume') {
      if (usedIn(state, now, command.windowSeconds) + command.units > command.limit) throw new Rejection('policy_limit_reached', 'the rule has no room left in its window');
      return [{ type: 'policy.counter_consumed', data: { policy_id: command.policyId, subject: command.subject, units: command.units.toString(), reservation_id: command.reservationId, at: now } }];
    }
    const held = state.entries.some((e) => e.reservation === command.reservationId);
    if (!held || state.released.has(command.reservationId)) return [];
    return [{ type: 'policy.counter_released', data: { policy_id: command.policyId, subject: command.subject, reservation_id: command.reservationId, at: now } }];
  },
};

// One decisive evaluation: recorded once, in a stream of its own.
export type DecisionCommand = { type: 'record'; event: Extract<DomainEvent, { type: 'policy.decided' }> };
export const decisionDecider: Decider<{ recorded: boolean }, DecisionCommand> = {
  initialState: () => ({ recorded: false }),
  evolve: (_s, e) => (e.type === 'policy.decided' ? { recorded: true } : _s),
  decide: (command, state) => (state.recorded ? [] : [command.event]),
};
