import t from 'tap';
import { connectionDecider, connectionSlotDecider, webhookReceiptDecider } from '../../commands/connection.ts';
import type { DomainEvent } from '../../events/index.ts';
import { given } from '../helpers/decider.ts';

// The connection decider, its slot and the inbound-webhook receipt, pure.

const now = '2026-11-21T12:00:00.000Z';
const tenant = { orgId: 'org_1', projectId: 'prj_1' };
const created: DomainEvent = {
  type: 'connection.created',
  data: { connection_id: 'ca_1', org_id: 'org_1', project_id: 'prj_1', server_id: 'acme-payments', auth_type: 'api_key', user_id: null, display_name: null, connection_metadata: {}, cert_metadata: {}, secret_ref: 'vault_a', expires_at: null, created_at: now },
};
const withHook: DomainEvent = { type: 'connection.webhook_secret_set', data: { connection_id: 'ca_1', webhook_secret_ref: 'vault_w', previous_webhook_secret_ref: null, at: now } };
const revoked: DomainEvent = { type: 'connection.revoked', data: { connection_id: 'ca_1', from: 'connected', purged_refs: ['vault_a', 'vault_w'], at: now } };

t.test('connection', async (t) => {
  given(t, connectionDecider, []).when({ type: 'create', data: created.data as never }).then([created]);
  given(t, connectionDecider, [created]).when({ type: 'create', data: created.data as never }).rejects('connection_exists');
  given(t, connectionDecider, [created]).when({ type: 'rotate', tenant, data: { secret_ref: 'vault_b', cert_metadata: {}, expires_at: null } }).then([
    { type: 'connection.credential_rotated', data: { connection_id: 'ca_1', previous_secret_ref: 'vault_a', secret_ref: 'vault_b', cert_metadata: {}, expires_at: null, at: now } },
  ]);
  given(t, connectionDecider, [created, revoked]).when({ type: 'rotate', tenant, data: { secret_ref: 'vault_b', cert_metadata: {}, expires_at: null } }).rejects('connection_not_active');
  given(t, connectionDecider, [created, withHook]).when({ type: 'revoke', tenant }).then([revoked], 'revoke names every vault row it purges');
  given(t, connectionDecider, [created, withHook, revoked]).when({ type: 'revoke', tenant }).then([], 'revoking again changes nothing');
  given(t, connectionDecider, [created]).when({ type: 'revoke', tenant: { orgId: 'org_2', projectId: 'prj_1' } }).rejects('not_found', 'another organization');
  given(t, connectionDecider, [created]).when({ type: 'revoke', tenant: { orgId: 'org_1', projectId: 'prj_2' } }).rejects('not_found', 'another project');
  given(t, connectionDecider, [created, revoked]).when({ type: 'update_metadata', tenant, connectionMetadata: { a: 1 } }).rejects('metadata_update_failed');
  given(t, connectionDecider, [created]).when({ type: 'update_metadata', tenant, connectionMetadata: {} }).then([], 'unchanged metadata');
  given(t, connectionDecider, [created, revoked]).when({ type: 'set_webhook_secret', tenant, ref: 'vault_x' }).rejects('connection_not_active');
  given(t, connectionDecider, [created, withHook]).when({ type: 'delete', tenant }).then([{ type: 'connection.deleted', data: { connection_id: 'ca_1', purged_refs: ['vault_a', 'vault_w'], at: now } }]);
  const deleted: DomainEvent = { type: 'connection.deleted', data: { connection_id: 'ca_1', purged_refs: [], at: now } };
  given(t, connectionDecider, [created, deleted]).when({ type: 'delete', tenant }).then([], 'deleting again changes nothing (the project cascade repeats it)');
  given(t, connectionDecider, [created, deleted]).when({ type: 'revoke', tenant }).rejects('not_found', 'deleted is gone');
});

t.test('slot and receipt', async (t) => {
  given(t, connectionSlotDecider, []).when({ type: 'claim', connectionId: 'ca_1' }).then([{ type: 'connection_slot.claimed', data: { connection_id: 'ca_1', at: now } }]);
  given(t, connectionSlotDecider, [{ type: 'connection_slot.claimed', data: { connection_id: 'ca_1', at: now } }]).when({ type: 'claim', connectionId: 'ca_2' }).rejects('slot_taken');
  given(t, connectionSlotDecider, [{ type: 'connection_slot.claimed', data: { connection_id: 'ca_1', at: now } }]).when({ type: 'release', connectionId: 'ca_2' }).then([], 'only the holder releases');
  const rcv = { connection_id: 'ca_1', server_id: 'acme-payments', delivery_id: 'msg_1', provider_event_type: null, payload: {}, received_at: now };
  given(t, webhookReceiptDecider, []).when({ type: 'receive', data: rcv }).then([{ type: 'connection.webhook_received', data: rcv }]);
  given(t, webhookReceiptDecider, [{ type: 'connection.webhook_received', data: rcv }]).when({ type: 'receive', data: rcv }).rejects('webhook_replayed');
});
