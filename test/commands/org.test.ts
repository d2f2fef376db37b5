import t from 'tap';
import { orgDecider } from '../../commands/org.ts';
import type { DomainEvent } from '../../events/index.ts';
import { given } from '../helpers/decider.ts';

const now = '2026-11-21T12:00:00.000Z';
const created: DomainEvent[] = [
  { type: 'org.created', data: { org_id: 'org_1', name: 'Acme', created_at: now } },
  { type: 'project.created', data: { project_id: 'prj_default', name: 'Default', slug: 'default', environment: 'test', is_default: true, settings: {}, created_at: now } },
];
const second: DomainEvent = {
  type: 'project.created',
  data: { project_id: 'prj_b', name: 'B', slug: 'b', environment: 'live', is_default: false, settings: {}, created_at: now },
};

t.test('create_org makes the organization and its default project', async (t) => {
  given(t, orgDecider, []).when({ type: 'create_org', orgId: 'org_1', name: 'Acme', defaultProjectId: 'prj_default' }).then(created);
  given(t, orgDecider, created).when({ type: 'create_org', orgId: 'org_1', name: 'Acme', defaultProjectId: 'prj_x' }).rejects('org_exists');
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
