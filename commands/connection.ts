import { createHash } from 'node:crypto';
import type { DomainEvent, EventDataOf } from '../events/index.ts';
import { type Decider, Rejection } from '../src/eventstore/handler.ts';
import type { Tenant } from './consumer.ts';

// A provider connection: connected when a credential is registered; the
// credential may be rotated in place; revoked is terminal (its vault rows are
// purged with it; the row stays for audit); deleted removes it from the read
// model (the events stay, the secret material is gone). One live connection
// per organization, project, server and end user is held by a slot stream.

export const connectionStream = (id: string) => `connection-${id}`;
export const connectionSlotStream = (t: Tenant, serverId: string, userId: string | null) => `connection_slot-${t.orgId}.${t.projectId}.${serverId}.${userId ?? '-'}`;
/** The receipt of one inbound delivery; its existence refuses a replay of the same delivery id. */
export const webhookReceiptStream = (connectionId: string, deliveryId: string) => `connection_webhook-${connectionId}.${createHash('sha256').update(deliveryId).digest('hex').slice(0, 32)}`;

export type ConnectionStatus = 'pending' | 'connected' | 'revoked' | 'expired';

export type Connection = {
  id: string;
  orgId: string;
  projectId: string;
  serverId: string;
  authType: string;
  userId: string | null;
  status: ConnectionStatus;
  secretRef: string | null;
  webhookSecretRef: string | null;
  connectionMetadata: Record<string, unknown>;
};

export type ConnectionState = { status: 'none' } | { status: 'exists'; c: Connection } | { status: 'deleted' };

export type ConnectionCommand =
  | { type: 'create'; data: EventDataOf<'connection.created'> }
  | { type: 'rotate'; tenant: Tenant; data: Omit<EventDataOf<'connection.credential_rotated'>, 'connection_id' | 'previous_secret_ref' | 'at'> }
  | { type: 'revoke'; tenant: Tenant }
  | { type: 'update_metadata'; tenant: Tenant; connectionMetadata: Record<string, unknown> }
  | { type: 'set_webhook_secret'; tenant: Tenant; ref: string }
  | { type: 'delete'; tenant: Tenant };

/** The connection, if it belongs to the tenant; another tenant's connection is simply not found. */
export function ownConnection(state: ConnectionState, t: Tenant): Connection {
  if (state.status !== 'exists' || state.c.orgId !== t.orgId || state.c.projectId !== t.projectId) throw new Rejection('not_found', 'connection not found');
  return state.c;
}

/** Vault references a connection holds (purged on revoke and delete). */
export const refsOf = (c: Connection) => [c.secretRef, c.webhookSecretRef].filter((r): r is string => r !== null);

export const connectionDecider: Decider<ConnectionState, ConnectionCommand> = {
  initialState: () => ({ status: 'none' }),
  evolve(state, event) {
    if (event.type === 'connection.created') {
      const d = event.data;
      return { status: 'exists', c: { id: d.connection_id, orgId: d.org_id, projectId: d.project_id, serverId: d.server_id, authType: d.auth_type, userId: d.user_id, status: 'connected', secretRef: d.secret_ref, webhookSecretRef: null, connectionMetadata: d.connection_metadata } };
    }
    if (event.type === 'connection.deleted') return { status: 'deleted' };
    if (state.status !== 'exists') return state;
    const c = state.c;
    switch (event.type) {
      case 'connection.credential_rotated':
        return { status: 'exists', c: { ...c, secretRef: event.data.secret_ref, connectionMetadata: event.data.connection_metadata ?? c.connectionMetadata } };
      case 'connection.revoked':
        return { status: 'exists', c: { ...c, status: 'revoked', secretRef: null, webhookSecretRef: null } };
      case 'connection.metadata_updated':
        return { status: 'exists', c: { ...c, connectionMetadata: event.data.connection_metadata } };
      case 'connection.webhook_secret_set':
        return { status: 'exists', c: { ...c, webhookSecretRef: event.data.webhook_secret_ref } };
      default:
        return state;
    }
  },
  decide(command, state, { now }): DomainEvent[] {
    switch (command.type) {
      case 'create':
        if (state.status !== 'none') throw new Rejection('connection_exists', 'a connection with this id exists');
        return [{ type: 'connection.created', data: command.data }];
      case 'rotate': {
        const c = ownConnection(state, command.tenant);
        if (c.status !== 'connected' || !c.secretRef) throw new Rejection('connection_not_active', 'the connection is not active', { status: c.status });
        return [{ type: 'connection.credential_rotated', data: { connection_id: c.id, previous_secret_ref: c.secretRef, ...command.data, at: now } }];
      }
      case 'revoke': {
        const c = ownConnection(state, command.tenant);
        if (c.status === 'revoked') return [];
        return [{ type: 'connection.revoked', data: { connection_id: c.id, from: c.status, purged_refs: refsOf(c), at: now } }];
      }
      case 'update_metadata': {
        const c = ownConnection(state, command.tenant);
        if (c.status === 'revoked') throw new Rejection('metadata_update_failed', 'the connection is revoked; its metadata cannot change', { status: c.status });
        if (JSON.stringify(c.connectionMetadata) === JSON.stringify(command.connectionMetadata)) return [];
        return [{ type: 'connection.metadata_updated', data: { connection_id: c.id, connection_metadata: command.connectionMetadata, at: now } }];
      }
      case 'set_webhook_secret': {
        const c = ownConnection(state, command.tenant);
        if (c.status === 'revoked') throw new Rejection('connection_not_active', 'the connection is revoked', { status: c.status });
        return [{ type: 'connection.webhook_secret_set', data: { connection_id: c.id, webhook_secret_ref: command.ref, previous_webhook_secret_ref: c.webhookSecretRef, at: now } }];
      }
      case 'delete': {
        if (state.status === 'deleted') return []; // deleting again changes nothing (the project cascade may repeat it)
        const c = ownConnection(state, command.tenant);
        return [{ type: 'connection.deleted', data: { connection_id: c.id, purged_refs: refsOf(c), at: now } }];
      }
    }
  },
};

export type SlotState = { holder: string | null };
export type SlotCommand = { type: 'claim'; connectionId: string } | { type: 'release'; connectionId: string };

export const connectionSlotDecider: Decider<SlotState, SlotCommand> = {
  initialState: () => ({ holder: null }),
  evolve(state, event) {
    if (event.type === 'connection_slot.claimed') return { holder: event.data.connection_id };
    if (event.type === 'connection_slot.released' && state.holder === event.data.connection_id) return { holder: null };
    return state;
  },
  decide(command, state, { now }): DomainEvent[] {
    if (command.type === 'claim') {
      if (state.holder) throw new Rejection('slot_taken', 'held', { holder: state.holder });
      return [{ type: 'connection_slot.claimed', data: { connection_id: command.connectionId, at: now } }];
    }
    if (state.holder !== command.connectionId) return [];
    return [{ type: 'connection_slot.released', data: { connection_id: command.connectionId, at: now } }];
  },
};

export type ReceiptState = { received: boolean };
export const webhookReceiptDecider: Decider<ReceiptState, { type: 'receive'; data: EventDataOf<'connection.webhook_received'> }> = {
  initialState: () => ({ received: false }),
  evolve: (_s, e) => (e.type === 'connection.webhook_received' ? { received: true } : _s),
  decide(command, state) {
    if (state.received) throw new Rejection('webhook_replayed', 'this delivery id was already received', { delivery_id: command.data.delivery_id });
    return [{ type: 'connection.webhook_received', data: command.data }];
  },
};
