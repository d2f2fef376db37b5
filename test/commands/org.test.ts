import t from 'tap';
import { type OrgCommand, orgDecider } from '../../commands/org.ts';
import type { DomainEvent } from '../../events/index.ts';
import { given } from '../helpers/decider.ts';

const now = '2026-11-21T12:00:00.000Z';
const owner = { userId: 'usr_owner', email: 'owner@example.com', displayName: 'Owner' };
const created: DomainEvent[] = [
  { type: 'org.created', data: { org_id: 'org_1', name: 'Acme', created_at: now } },
  { type: 'user.added', data: { user_id: 'usr_owner', email: 'owner@example.com', display_name: 'Owner', role: 'owner', added_at: now } },
  { type: 'project.created', data: { project_id: 'prj_default', name: 'Default', slug: 'default', environment: 'test', is_default: true, settings: {}, created_at: now } },
];
const second: DomainEvent = {
  type: 'project.created',
  data: { project_id: 'prj_b', name: 'B', slug: 'b', environment: 'live', is_default: false, settings: {}, created_at: now },
};

t.test('create_org makes the organization and its default project', async (t) => {
  given(t, orgDecider, []).when({ type: 'create_org', orgId: 'org_1', name: 'Acme', defaultProjectId: 'prj_default', owner }).then(created);
  given(t, orgDecider, created).when({ type: 'create_org', orgId: 'org_1', name: 'Acme', defaultProjectId: 'prj_x', owner }).rejects('org_exists');
});

t.test("the first key of an environment the organization has no project in opens one (test and live are two worlds)", async (t) => {
  const liveKey = (keyId: string, projectId: string | null): OrgCommand => ({ type: 'create_api_key', keyId, name: 'l', environment: 'live', projectId, scopes: ['*'], keyHash: 'b'.repeat(64), keyPrefix: 'sk_live_abcd', worldProjectId: 'prj_live' });
  const keyEvent = (keyId: string): DomainEvent => ({ type: 'api_key.created', data: { key_id: keyId, name: 'l', environment: 'live', project_id: null, scopes: ['*'], key_hash: 'b'.repeat(64), key_prefix: 'sk_live_abcd', created_at: now } });
  const opened: DomainEvent = { type: 'project.created', data: { project_id: 'prj_live', name: 'Live', slug: 'live', environment: 'live', is_default: false, settings: {}, created_at: now } };
  given(t, orgDecider, created).when(liveKey('key_l', null)).then([opened, keyEvent('key_l')]);
  given(t, orgDecider, [...created, opened, keyEvent('key_l')]).when(liveKey('key_m', null)).then([keyEvent('key_m')], 'the second live key opens nothing');
  given(t, orgDecider, [...created, second]).when(liveKey('key_m', null)).then([keyEvent('key_m')], 'a live project already there');
  const testLive: DomainEvent = { type: 'project.created', data: { project_id: 'prj_t', name: 'T', slug: 'live', environment: 'test', is_default: false, settings: {}, created_at: now } };
  given(t, orgDecider, [...created, testLive])
    .when(liveKey('key_l', null))
    .then([{ ...opened, data: { ...opened.data, slug: 'live-2' } } as DomainEvent, keyEvent('key_l')], 'a free slug');
  given(t, orgDecider, created)
    .when({ type: 'create_api_key', keyId: 'key_t', name: 't', environment: 'test', projectId: null, scopes: ['*'], keyHash: 'c'.repeat(64), keyPrefix: 'sk_test_abcd', worldProjectId: 'prj_x' })
    .then([{ type: 'api_key.created', data: { key_id: 'key_t', name: 't', environment: 'test', project_id: null, scopes: ['*'], key_hash: 'c'.repeat(64), key_prefix: 'sk_test_abcd', created_at: now } }], 'a test key: the default project is a test one');
});

t.test('create_project checks the slug rules', async (t) => {
  given(t, orgDecider, created)
    .when({ type: 'create_project', projectId: 'prj_b', name: 'B', slug: 'b', environment: 'live', settings: {} })
    .then([second]);
  given(t, orgDecider, created).when({ type: 'create_project', projectId: 'p', name: 'X', slug: 'Bad Slug', environment: 'test', settings: {} }).rejects('slug_invalid');
  given(t, orgDecider, created).when({ type: 'create_project', projectId: 'p', name: 'X', slug: 'x'.repeat(65), environment: 'test', settings: {} }).rejects('slug_invalid');
  given(t, orgDecider, created).when({ type: 'create_project', projectId: 'p', name: 'X', slug: 'default', environment: 'test', settings: {} }).rejects('slug_reserved');
  given(t, orgDecider, [...created, second]).when({ type: 'create_project', projectId: 'p', name: 'X', slug: 'b', environment: 'test', settings: {} }).rejects('slug_conflict');
  given(t, orgDecider, []).when({ type: 'create_project', projectId: 'p', name: 'X', slug: 'x', environment: 'test', settings: {} }).rejects('not_found');
});

t.test('update_project: rename, reslug, promote; a no-op writes nothing', async (t) => {
  given(t, orgDecider, [...created, second]).when({ type: 'update_project', projectId: 'prj_b', name: 'B' }).then([], 'same name: no events');
  given(t, orgDecider, [...created, second])
    .when({ type: 'update_project', projectId: 'prj_b', name: 'Bee', makeDefault: true })
    .then([
      { type: 'project.updated', data: { project_id: 'prj_b', name: 'Bee' } },
      { type: 'project.default_changed', data: { project_id: 'prj_b', previous_default_id: 'prj_default' } },
    ]);
  given(t, orgDecider, created).when({ type: 'update_project', projectId: 'prj_default', makeDefault: true }).then([], 'already default');
  given(t, orgDecider, [...created, second]).when({ type: 'update_project', projectId: 'prj_b', slug: 'default' }).rejects('slug_reserved');
  given(t, orgDecider, created).when({ type: 'update_project', projectId: 'nope', name: 'x' }).rejects('not_found');
});

t.test('delete_project guards', async (t) => {
  given(t, orgDecider, [...created, second]).when({ type: 'delete_project', projectId: 'prj_b' }).then([{ type: 'project.deleted', data: { project_id: 'prj_b' } }]);
  given(t, orgDecider, [...created, second]).when({ type: 'delete_project', projectId: 'prj_default' }).rejects('cannot_delete_default');
  const promoted: DomainEvent[] = [...created, second, { type: 'project.default_changed', data: { project_id: 'prj_b', previous_default_id: 'prj_default' } }];
  given(t, orgDecider, promoted).when({ type: 'delete_project', projectId: 'prj_default' }).then([{ type: 'project.deleted', data: { project_id: 'prj_default' } }]);
  const alone: DomainEvent[] = [...promoted, { type: 'project.deleted', data: { project_id: 'prj_default' } }];
  given(t, orgDecider, alone).when({ type: 'delete_project', projectId: 'prj_b' }).rejects('cannot_delete_last_project');
  given(t, orgDecider, created).when({ type: 'delete_project', projectId: 'prj_default' }).rejects('cannot_delete_last_project');
  given(t, orgDecider, created).when({ type: 'delete_project', projectId: 'missing' }).rejects('not_found');
});

t.test('users, project members and API keys', async (t) => {
  given(t, orgDecider, created)
    .when({ type: 'add_user', userId: 'usr_2', email: 'Ana@Example.com', displayName: null, role: 'admin' })
    .then([{ type: 'user.added', data: { user_id: 'usr_2', email: 'ana@example.com', display_name: null, role: 'admin', added_at: now } }]);
  given(t, orgDecider, created).when({ type: 'add_user', userId: 'usr_3', email: 'OWNER@example.com', displayName: null, role: 'member' }).rejects('user_exists');
  given(t, orgDecider, created).when({ type: 'set_project_member', projectId: 'prj_default', userId: 'usr_owner', role: 'member' }).rejects('cannot_override_owner');
  given(t, orgDecider, created).when({ type: 'set_project_member', projectId: 'prj_default', userId: 'usr_nobody', role: 'member' }).rejects('user_not_in_org');
  given(t, orgDecider, created).when({ type: 'remove_project_member', projectId: 'prj_default', userId: 'usr_nobody' }).then([], 'removing an absent override writes nothing');
  const key: DomainEvent = {
    type: 'api_key.created',
    data: { key_id: 'key_1', name: 'k', environment: 'live', project_id: 'prj_b', scopes: ['*'], key_hash: 'a'.repeat(64), key_prefix: 'sk_live_abcd', created_at: now },
  };
  given(t, orgDecider, [...created, second])
    .when({ type: 'create_api_key', keyId: 'key_1', name: 'k', environment: 'live', projectId: 'prj_b', scopes: ['*'], keyHash: 'a'.repeat(64), keyPrefix: 'sk_live_abcd', worldProjectId: 'prj_w' })
    .then([key], 'bound to a live project: no project opened');
  given(t, orgDecider, [...created, second])
    .when({ type: 'create_api_key', keyId: 'key_1', name: 'k', environment: 'test', projectId: 'prj_b', scopes: ['*'], keyHash: 'a'.repeat(64), keyPrefix: 'sk_test_abcd' })
    .rejects('environment_mismatch', 'a test key is never bound to a live project');
  given(t, orgDecider, created)
    .when({ type: 'create_api_key', keyId: 'key_1', name: 'k', environment: 'test', projectId: 'prj_nope', scopes: ['*'], keyHash: 'a'.repeat(64), keyPrefix: 'x' })
    .rejects('not_found');
  given(t, orgDecider, [...created, second, key]).when({ type: 'revoke_api_key', keyId: 'key_1' }).then([{ type: 'api_key.revoked', data: { key_id: 'key_1', reason: 'revoked' } }]);
  given(t, orgDecider, [...created, second, key, { type: 'api_key.revoked', data: { key_id: 'key_1', reason: 'revoked' } }]).when({ type: 'revoke_api_key', keyId: 'key_1' }).then([], 'revoking twice writes nothing');
  given(t, orgDecider, [...created, second, key])
    .when({ type: 'delete_project', projectId: 'prj_b' })
    .then([
      { type: 'api_key.revoked', data: { key_id: 'key_1', reason: 'project_deleted' } },
      { type: 'project.deleted', data: { project_id: 'prj_b' } },
    ], 'deleting a project revokes its keys in the same append');
});

t.test('change_user_role and remove_user: only an owner touches an owner; the last owner stays', async (t) => {
  const bia: DomainEvent = { type: 'user.added', data: { user_id: 'usr_bia', email: 'bia@example.com', display_name: null, role: 'member', added_at: now } };
  const override: DomainEvent = { type: 'project_member.set', data: { project_id: 'prj_default', user_id: 'usr_bia', role: 'admin' } };
  const team = [...created, bia];
  given(t, orgDecider, team).when({ type: 'change_user_role', userId: 'usr_bia', role: 'admin', actorRole: 'admin' }).then([{ type: 'user.role_changed', data: { user_id: 'usr_bia', role: 'admin', previous_role: 'member' } }]);
  given(t, orgDecider, team).when({ type: 'change_user_role', userId: 'usr_bia', role: 'member', actorRole: 'admin' }).then([], 'the same role: no events');
  given(t, orgDecider, team).when({ type: 'change_user_role', userId: 'usr_bia', role: 'owner', actorRole: 'admin' }).rejects('owner_required');
  given(t, orgDecider, team).when({ type: 'change_user_role', userId: 'usr_bia', role: 'owner', actorRole: 'owner' }).then([{ type: 'user.role_changed', data: { user_id: 'usr_bia', role: 'owner', previous_role: 'member' } }]);
  given(t, orgDecider, team).when({ type: 'change_user_role', userId: 'usr_owner', role: 'admin', actorRole: 'admin' }).rejects('owner_required');
  given(t, orgDecider, team).when({ type: 'change_user_role', userId: 'usr_owner', role: 'admin', actorRole: 'owner' }).rejects('last_owner');
  given(t, orgDecider, team).when({ type: 'change_user_role', userId: 'usr_nobody', role: 'admin', actorRole: 'owner' }).rejects('user_not_in_org');
  given(t, orgDecider, team).when({ type: 'remove_user', userId: 'usr_owner', actorRole: 'owner' }).rejects('last_owner');
  given(t, orgDecider, [...team, override])
    .when({ type: 'remove_user', userId: 'usr_bia', actorRole: 'admin' })
    .then([
      { type: 'project_member.removed', data: { project_id: 'prj_default', user_id: 'usr_bia' } },
      { type: 'user.removed', data: { user_id: 'usr_bia' } },
    ], 'the overrides go in the same append');
  const removed: DomainEvent = { type: 'user.removed', data: { user_id: 'usr_bia' } };
  given(t, orgDecider, [...team, removed]).when({ type: 'add_user', userId: 'usr_bia2', email: 'bia@example.com', displayName: null, role: 'member' }).then([{ type: 'user.added', data: { user_id: 'usr_bia2', email: 'bia@example.com', display_name: null, role: 'member', added_at: now } }], 'a removed address can be invited again');
});
