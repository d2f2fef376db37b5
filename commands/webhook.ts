import type { DomainEvent } from '../events/index.ts';
import { type Decider, Rejection } from '../src/eventstore/handler.ts';
import type { Tenant } from './consumer.ts';

// An outbound webhook endpoint: active, paused (by request) or error (paused
// by the dispatcher after consecutive dead deliveries). A PATCH may set active
// or paused; deletion is final.

export const webhookStream = (id: string) => `webhook_endpoint-${id}`;

export type WebhookStatus = 'active' | 'paused' | 'error';

export type Endpoint = {
  id: string;
  orgId: string;
  projectId: string;
  name: string;
  event: string;
  url: string;
  serverId: string | null;
  secretRef: string;
  previousSecret: { ref: string; validUntil: string } | null;
  status: WebhookStatus;
  createdAt: string;
};

export type WebhookState = { status: 'none' } | { status: 'exists'; e: Endpoint } | { status: 'deleted' };

export type WebhookCommand =
  | { type: 'create'; id: string; tenant: Tenant; name: string; event: string; url: string; serverId: string | null; secretRef: string }
  | { type: 'update'; tenant: Tenant; name?: string; url?: string; status?: 'active' | 'paused' }
  | { type: 'auto_pause' }
  | { type: 'rotate_secret'; tenant: Tenant; secretRef: string; overlapMs: number }
  | { type: 'delete'; tenant: Tenant };

export function ownEndpoint(state: WebhookState, t: Tenant): Endpoint {
  if (state.status !== 'exists' || state.e.orgId !== t.orgId || state.e.projectId !== t.projectId) throw new Rejection('not_found', 'webhook endpoint not found');
  return state.e;
}

export const webhookDecider: Decider<WebhookState, WebhookCommand> = {
  initialState: () => ({ status: 'none' }),
  evolve(state, event) {
    if (event.type === 'webhook_endpoint.created') {
      const d = event.data;
      return {
        status: 'exists',
        e: { id: d.trigger_id, orgId: d.org_id, projectId: d.project_id, name: d.name, event: d.event, url: d.webhook_url, serverId: d.server_id, secretRef: d.secret_ref, previousSecret: null, status: 'active', createdAt: d.created_at },
      };
    }
    if (event.type === 'webhook_endpoint.deleted') return { status: 'deleted' };
    if (state.status !== 'exists') return state;
    const e = state.e;
    switch (event.type) {
      case 'webhook_endpoint.updated':
        return { status: 'exists', e: { ...e, name: event.data.name ?? e.name, url: event.data.webhook_url ?? e.url } };
      case 'webhook_endpoint.status_changed':
        return { status: 'exists', e: { ...e, status: event.data.to } };
      case 'webhook_endpoint.secret_rotated':
        return { status: 'exists', e: { ...e, secretRef: event.data.secret_ref, previousSecret: { ref: event.data.previous_secret_ref, validUntil: event.data.previous_valid_until } } };
      default:
        return state;
    }
  },
  decide(command, state, { now }): DomainEvent[] {
    switch (command.type) {
      case 'create':
        if (state.status !== 'none') throw new Rejection('webhook_endpoint_exists', 'exists');
        return [
          {
            type: 'webhook_endpoint.created',
            data: { trigger_id: command.id, org_id: command.tenant.orgId, project_id: command.tenant.projectId, name: command.name, event: command.event, webhook_url: command.url, server_id: command.serverId, secret_ref: command.secretRef, created_at: now },
          },
        ];
      case 'update': {
        const e = ownEndpoint(state, command.tenant);
        const out: DomainEvent[] = [];
        const name = command.name !== undefined && command.name !== e.name ? command.name : undefined;
        const url = command.url !== undefined && command.url !== e.url ? command.url : undefined;
        if (name !== undefined || url !== undefined) out.push({ type: 'webhook_endpoint.updated', data: { trigger_id: e.id, ...(name !== undefined ? { name } : {}), ...(url !== undefined ? { webhook_url: url } : {}) } });
        if (command.status !== undefined && command.status !== e.status) {
          out.push({ type: 'webhook_endpoint.status_changed', data: { trigger_id: e.id, from: e.status, to: command.status, reason: 'requested', at: now } });
        }
        return out;
      }
      case 'auto_pause':
        if (state.status !== 'exists' || state.e.status !== 'active') return [];
        return [{ type: 'webhook_endpoint.status_changed', data: { trigger_id: state.e.id, from: 'active', to: 'error', reason: 'consecutive_dead_deliveries', at: now } }];
      case 'rotate_secret': {
        const e = ownEndpoint(state, command.tenant);
        const validUntil = new Date(Date.parse(now) + command.overlapMs).toISOString();
        return [{ type: 'webhook_endpoint.secret_rotated', data: { trigger_id: e.id, secret_ref: command.secretRef, previous_secret_ref: e.secretRef, previous_valid_until: validUntil, at: now } }];
      }
      case 'delete': {
        if (state.status === 'deleted') return []; // deleting again changes nothing (the project cascade may repeat it)
        const e = ownEndpoint(state, command.tenant);
        return [{ type: 'webhook_endpoint.deleted', data: { trigger_id: e.id, at: now } }];
      }
    }
  },
};
