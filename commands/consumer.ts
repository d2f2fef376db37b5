import type { DomainEvent } from '../events/index.ts';
import { type Decider, Rejection } from '../src/eventstore/handler.ts';

// A consumer (titular): a person the organization knows. It is recorded under
// the project that created it (its home project) and is visible from every
// project of its organization (docs/decisions.md, "A consumer across projects").

export const consumerStream = (id: string) => `consumer-${id}`;

export type ConsumerState =
  | { status: 'none' }
  | { status: 'unverified'; id: string; orgId: string; projectId: string; displayName: string | null; metadata: Record<string, unknown>; taxType: string | null; createdAt: string };

export type Tenant = { orgId: string; projectId: string };

export type ConsumerCommand =
  | { type: 'create'; consumerId: string; tenant: Tenant; displayName: string | null; metadata: Record<string, unknown> }
  | { type: 'update'; tenant: Tenant; displayName?: string | null; metadata?: Record<string, unknown>; taxType?: 'PJ' | 'MEI' | 'ME' | 'PF' };

/** The consumer, if it belongs to the tenant's organization (any project of it); another organization's consumer is simply not found. */
export function ownConsumer(state: ConsumerState, t: Tenant): Extract<ConsumerState, { status: 'unverified' }> {
  if (state.status === 'none' || state.orgId !== t.orgId) throw new Rejection('not_found', 'consumer not found');
  return state;
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

export const consumerDecider: Decider<ConsumerState, ConsumerCommand> = {
  initialState: () => ({ status: 'none' }),
  evolve(state, event) {
    switch (event.type) {
      case 'consumer.created':
        return {
          status: 'unverified',
          id: event.data.consumer_id,
          orgId: event.data.org_id,
          projectId: event.data.project_id,
          displayName: event.data.display_name,
          metadata: event.data.metadata,
          taxType: null,
          createdAt: event.data.created_at,
        };
      case 'consumer.updated':
        if (state.status === 'none') return state;
        return {
          ...state,
          ...(event.data.display_name !== undefined ? { displayName: event.data.display_name } : {}),
          ...(event.data.metadata !== undefined ? { metadata: event.data.metadata } : {}),
          ...(event.data.tax_type !== undefined ? { taxType: event.data.tax_type } : {}),
        };
      default:
        return state;
    }
  },
  decide(command, state, { now }): DomainEvent[] {
    switch (command.type) {
      case 'create':
        if (state.status !== 'none') throw new Rejection('consumer_exists', 'consumer exists');
        return [
          {
            type: 'consumer.created',
            data: { consumer_id: command.consumerId, org_id: command.tenant.orgId, project_id: command.tenant.projectId, display_name: command.displayName, metadata: command.metadata, created_at: now },
          },
        ];
      case 'update': {
        const s = ownConsumer(state, command.tenant);
        const patch: { display_name?: string | null; metadata?: Record<string, unknown>; tax_type?: 'PJ' | 'MEI' | 'ME' | 'PF' } = {};
        if (command.displayName !== undefined && command.displayName !== s.displayName) patch.display_name = command.displayName;
        if (command.metadata !== undefined && !same(command.metadata, s.metadata)) patch.metadata = command.metadata;
        if (command.taxType !== undefined && command.taxType !== s.taxType) patch.tax_type = command.taxType;
        if (Object.keys(patch).length === 0) return [];
        return [{ type: 'consumer.updated', data: { consumer_id: s.id, ...patch } }];
      }
    }
  },
};
