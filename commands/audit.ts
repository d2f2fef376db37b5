import type { DomainEvent } from '../events/index.ts';
import { type Decider, Rejection } from '../src/eventstore/handler.ts';

// The audit surface's own facts: an organization's verification thresholds
// (stream `audit_config-<org>`) and incidents (stream `audit_incident-<id>`,
// the id derived from the break, so one break opens exactly one incident).

export const auditConfigStream = (orgId: string) => `audit_config-${orgId}`;
export const incidentStream = (id: string) => `audit_incident-${id}`;

export type Thresholds = {
  verification_window_days: number;
  hot_window_days: number;
  hot_max_staleness_seconds: number;
  warm_window_days: number;
  warm_max_staleness_seconds: number;
  cold_max_staleness_seconds: number;
};

/** Defaults (docs/api.md): a week hot re-verified hourly, a month warm daily, the rest weekly, 90 days in scope. */
export const DEFAULT_THRESHOLDS: Thresholds = {
  verification_window_days: 90,
  hot_window_days: 7,
  hot_max_staleness_seconds: 3_600,
  warm_window_days: 30,
  warm_max_staleness_seconds: 86_400,
  cold_max_staleness_seconds: 604_800,
};

/** The regulatory ceiling of hot_max_staleness_seconds: 72 hours (spec Part 8). */
export const HOT_STALENESS_CEILING_SECONDS = 259_200;

export type AuditConfigState = { thresholds: Thresholds; initialWalkAt: string | null; touched: boolean };

export type AuditConfigCommand = { type: 'update'; orgId: string; patch: Partial<Thresholds> } | { type: 'initial_walk_completed'; orgId: string; tipSequence: number };

export const auditConfigDecider: Decider<AuditConfigState, AuditConfigCommand> = {
  initialState: () => ({ thresholds: { ...DEFAULT_THRESHOLDS }, initialWalkAt: null, touched: false }),
  evolve(state, event) {
    if (event.type === 'audit.config_updated') {
      const { org_id: _o, at: _a, ...patch } = event.data;
      const defined = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined)) as Partial<Thresholds>;
      return { ...state, thresholds: { ...state.thresholds, ...defined }, touched: true };
    }
    if (event.type === 'audit.initial_walk_completed') return { ...state, initialWalkAt: state.initialWalkAt ?? event.data.at, touched: true };
    return state;
  },
  decide(command, state, { now }): DomainEvent[] {
    if (command.type === 'initial_walk_completed') {
      if (state.initialWalkAt) return [];
      return [{ type: 'audit.initial_walk_completed', data: { org_id: command.orgId, tip_sequence: command.tipSequence, at: now } }];
    }
    const merged = { ...state.thresholds, ...command.patch };
    if (merged.hot_max_staleness_seconds > HOT_STALENESS_CEILING_SECONDS) {
      throw new Rejection('regulatory_minimum_violation', `hot_max_staleness_seconds may be at most ${HOT_STALENESS_CEILING_SECONDS} (72 hours)`, { limit: HOT_STALENESS_CEILING_SECONDS });
    }
    if (!(merged.hot_window_days <= merged.warm_window_days && merged.warm_window_days <= merged.verification_window_days)) {
      throw new Rejection('window_ordering_invalid', 'windows must satisfy hot_window_days <= warm_window_days <= verification_window_days', {
        limit: { hot_window_days: merged.hot_window_days, warm_window_days: merged.warm_window_days, verification_window_days: merged.verification_window_days },
      });
    }
    const changed = Object.fromEntries(Object.entries(command.patch).filter(([k, v]) => state.thresholds[k as keyof Thresholds] !== v));
    if (Object.keys(changed).length === 0) return [];
    return [{ type: 'audit.config_updated', data: { org_id: command.orgId, ...changed, at: now } }];
  },
};

export type IncidentState =
  | { status: 'none' }
  | { status: 'open' | 'acknowledged'; id: string; orgId: string; detectedAt: string; detectedAtSequence: number };

export type Acknowledgement = {
  personal_data_affected: boolean;
  resolution_summary: string;
  anpd_notification_status: 'not_required' | 'notified';
  incident_reference: string | null;
  affected_from_sequence: number | null;
  affected_to_sequence: number | null;
};

export type IncidentCommand =
  | { type: 'open'; incidentId: string; orgId: string; kind: string; sequence: number; detail: string }
  | { type: 'acknowledge'; orgId: string; ack: Acknowledgement; by: string };

export const incidentDecider: Decider<IncidentState, IncidentCommand> = {
  initialState: () => ({ status: 'none' }),
  evolve(state, event) {
    if (event.type === 'audit.incident_opened') {
      return { status: 'open', id: event.data.incident_id, orgId: event.data.org_id, detectedAt: event.data.detected_at, detectedAtSequence: event.data.detected_at_sequence };
    }
    if (event.type === 'audit.incident_acknowledged' && state.status !== 'none') return { ...state, status: 'acknowledged' };
    return state;
  },
  decide(command, state, { now }): DomainEvent[] {
    if (command.type === 'open') {
      if (state.status !== 'none') return [];
      return [{ type: 'audit.incident_opened', data: { incident_id: command.incidentId, org_id: command.orgId, kind: command.kind, detected_at_sequence: command.sequence, detail: command.detail, detected_at: now } }];
    }
    if (state.status === 'none' || state.orgId !== command.orgId) throw new Rejection('not_found', 'incident not found');
    if (state.status === 'acknowledged') throw new Rejection('incident_already_acknowledged', 'the incident is already acknowledged');
    return [{ type: 'audit.incident_acknowledged', data: { incident_id: state.id, ...command.ack, acknowledged_by: command.by, acknowledged_at: now } }];
  },
};

/** One witness's cosignatures of an organization's checkpoints: `audit_cosignature-<org>-<hash of the witness name>`. */
export const cosignatureStream = (orgId: string, witnessTag: string) => `audit_cosignature-${orgId}-${witnessTag}`;

export type CosignatureState = { size: number };
export type CosignatureCommand = {
  type: 'record';
  orgId: string;
  origin: string;
  size: number;
  rootHash: string;
  witness: string;
  witnessKey: string;
  cosignature: string;
  timestamp: number;
};

/**
 * Records a witness's cosignature once per size, and only of a size larger than
 * the last one recorded (a witness cosigns an ever-growing tree): with several
 * instances submitting, the stream's revision decides which record stands.
 */
export const cosignatureDecider: Decider<CosignatureState, CosignatureCommand> = {
  initialState: () => ({ size: -1 }),
  evolve: (state, event) => (event.type === 'audit.checkpoint_cosigned' ? { size: Math.max(state.size, event.data.size) } : state),
  decide(c, state, { now }): DomainEvent[] {
    if (c.size <= state.size) return [];
    return [
      {
        type: 'audit.checkpoint_cosigned',
        data: { org_id: c.orgId, origin: c.origin, size: c.size, root_hash: c.rootHash, witness: c.witness, witness_key: c.witnessKey, cosignature: c.cosignature, timestamp: c.timestamp, cosigned_at: now },
      },
    ];
  },
};
