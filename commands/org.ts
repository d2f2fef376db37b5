import type { DomainEvent } from '../events/index.ts';
import { type Decider, Rejection } from '../src/eventstore/handler.ts';

// The organization aggregate: the organization, its projects, users,
// project-level role overrides and API keys, decided in one stream.

export const orgStream = (orgId: string) => `org-${orgId}`;

export type Role = 'owner' | 'admin' | 'member';
export type ProjectState = { name: string; slug: string; environment: 'live' | 'test'; isDefault: boolean; createdAt: string; members: Map<string, 'admin' | 'member'> };
export type UserState = { email: string; role: Role };
export type KeyState = { projectId: string | null; revoked: boolean };

export type ActiveOrg = {
  status: 'active';
  orgId: string;
  name: string;
  projects: Map<string, ProjectState>;
  users: Map<string, UserState>;
  keys: Map<string, KeyState>;
};
export type OrgState = { status: 'none' } | ActiveOrg;

export type OrgCommand =
  | { type: 'create_org'; orgId: string; name: string; defaultProjectId: string; owner: { userId: string; email: string; displayName: string | null } }
  | { type: 'create_project'; projectId: string; name: string; slug: string; environment: 'live' | 'test'; settings: Record<string, unknown> }
  | { type: 'update_project'; projectId: string; name?: string; slug?: string; makeDefault?: boolean }
  | { type: 'delete_project'; projectId: string }
  | { type: 'add_user'; userId: string; email: string; displayName: string | null; role: 'admin' | 'member' }
  | { type: 'change_user_role'; userId: string; role: Role; actorRole: Role }
  | { type: 'remove_user'; userId: string; actorRole: Role }
  | { type: 'set_project_member'; projectId: string; userId: string; role: 'admin' | 'member' }
  | { type: 'remove_project_member'; projectId: string; userId: string }
  /** `worldProjectId`: the id of the project opened for the key's environment when the organization has none in it yet. */
  | { type: 'create_api_key'; keyId: string; name: string; environment: 'live' | 'test'; projectId: string | null; scopes: string[]; keyHash: string; keyPrefix: string; worldProjectId?: string }
  | { type: 'revoke_api_key'; keyId: string };

export const SLUG_PATTERN = /^[a-z0-9_-]{1,64}$/;
export const RESERVED_SLUGS = new Set(['default']);

function active(state: OrgState): ActiveOrg {
  if (state.status !== 'active') throw new Rejection('not_found', 'organization not found');
  return state;
}

function project(s: ActiveOrg, id: string): ProjectState {
  const p = s.projects.get(id);
  if (!p) throw new Rejection('not_found', 'project not found');
  return p;
}

function checkSlug(state: ActiveOrg, slug: string, except?: string) {
  if (!SLUG_PATTERN.test(slug)) throw new Rejection('slug_invalid', 'slug must be 1-64 lowercase letters, digits, _ or -');
  if (RESERVED_SLUGS.has(slug)) throw new Rejection('slug_reserved', `slug "${slug}" is reserved`);
  for (const [id, p] of state.projects) {
    if (id !== except && p.slug === slug) throw new Rejection('slug_conflict', `slug "${slug}" is taken in this organization`);
  }
}

/** `base`, or `base-2`, `base-3`, ...: the first slug no project of the organization holds. */
function freeSlug(s: ActiveOrg, base: string): string {
  const taken = new Set([...s.projects.values()].map((p) => p.slug));
  for (let n = 1; ; n++) {
    const slug = n === 1 ? base : `${base}-${n}`;
    if (!taken.has(slug)) return slug;
  }
}

const withProjects = (s: ActiveOrg, f: (m: Map<string, ProjectState>) => void): ActiveOrg => {
  const projects = new Map(s.projects);
  f(projects);
  return { ...s, projects };
};

function member(s: ActiveOrg, userId: string): UserState {
  const u = s.users.get(userId);
  if (!u) throw new Rejection('user_not_in_org', 'the user does not belong to this organization');
  return u;
}

/**
 * Who may touch an owner: only an owner makes, unmakes or removes one (an
 * admin manages admins and members), and the last owner stays (`to` null: removal).
 */
function ownerRules(s: ActiveOrg, from: Role, to: Role | null, actorRole: Role): void {
  if ((from === 'owner' || to === 'owner') && actorRole !== 'owner') throw new Rejection('owner_required', 'only an owner can make, change or remove an owner');
  if (from === 'owner' && to !== 'owner' && [...s.users.values()].filter((u) => u.role === 'owner').length <= 1) {
    throw new Rejection('last_owner', 'the organization needs at least one owner: make someone else owner first');
  }
}

export const orgDecider: Decider<OrgState, OrgCommand> = {
  initialState: () => ({ status: 'none' }),

  evolve(state, event) {
    if (event.type === 'org.created') {
      return { status: 'active', orgId: event.data.org_id, name: event.data.name, projects: new Map(), users: new Map(), keys: new Map() };
    }
    if (state.status !== 'active') return state;
    const s = state;
    switch (event.type) {
      case 'project.created':
        return withProjects(s, (m) =>
          m.set(event.data.project_id, { name: event.data.name, slug: event.data.slug, environment: event.data.environment, isDefault: event.data.is_default, createdAt: event.data.created_at, members: new Map() }),
        );
      case 'project.updated':
        return withProjects(s, (m) => {
          const p = m.get(event.data.project_id);
          if (p) m.set(event.data.project_id, { ...p, name: event.data.name ?? p.name, slug: event.data.slug ?? p.slug });
        });
      case 'project.default_changed':
        return withProjects(s, (m) => {
          for (const [id, p] of m) m.set(id, { ...p, isDefault: id === event.data.project_id });
        });
      case 'project.deleted':
        return withProjects(s, (m) => m.delete(event.data.project_id));
      case 'project_member.set':
      case 'project_member.removed':
        return withProjects(s, (m) => {
          const p = m.get(event.data.project_id);
          if (!p) return;
          const members = new Map(p.members);
          if (event.type === 'project_member.set') members.set(event.data.user_id, event.data.role);
          else members.delete(event.data.user_id);
          m.set(event.data.project_id, { ...p, members });
        });
      case 'user.added': {
        const users = new Map(s.users);
        users.set(event.data.user_id, { email: event.data.email, role: event.data.role });
        return { ...s, users };
      }
      case 'user.role_changed': {
        const users = new Map(s.users);
        const u = users.get(event.data.user_id);
        if (u) users.set(event.data.user_id, { ...u, role: event.data.role });
        return { ...s, users };
      }
      case 'user.removed': {
        const users = new Map(s.users);
        users.delete(event.data.user_id);
        return { ...s, users };
      }
      case 'api_key.created': {
        const keys = new Map(s.keys);
        keys.set(event.data.key_id, { projectId: event.data.project_id, revoked: false });
        return { ...s, keys };
      }
      case 'api_key.revoked': {
        const keys = new Map(s.keys);
        const k = keys.get(event.data.key_id);
        if (k) keys.set(event.data.key_id, { ...k, revoked: true });
        return { ...s, keys };
      }
      default:
        return state;
    }
  },

  decide(command, state, { now }): DomainEvent[] {
    if (command.type === 'create_org') {
      if (state.status !== 'none') throw new Rejection('org_exists', 'organization already exists');
      return [
        { type: 'org.created', data: { org_id: command.orgId, name: command.name, created_at: now } },
        { type: 'user.added', data: { user_id: command.owner.userId, email: command.owner.email, display_name: command.owner.displayName, role: 'owner', added_at: now } },
        {
          type: 'project.created',
          data: { project_id: command.defaultProjectId, name: 'Default', slug: 'default', environment: 'test', is_default: true, settings: {}, created_at: now },
        },
      ];
    }
    const s = active(state);
    switch (command.type) {
      case 'create_project':
        checkSlug(s, command.slug);
        return [
          {
            type: 'project.created',
            data: { project_id: command.projectId, name: command.name, slug: command.slug, environment: command.environment, is_default: false, settings: command.settings, created_at: now },
          },
        ];
      case 'update_project': {
        const p = project(s, command.projectId);
        const out: DomainEvent[] = [];
        const name = command.name !== undefined && command.name !== p.name ? command.name : undefined;
        const slug = command.slug !== undefined && command.slug !== p.slug ? command.slug : undefined;
        if (slug !== undefined) checkSlug(s, slug, command.projectId);
        if (name !== undefined || slug !== undefined) {
          out.push({ type: 'project.updated', data: { project_id: command.projectId, ...(name !== undefined ? { name } : {}), ...(slug !== undefined ? { slug } : {}) } });
        }
        if (command.makeDefault && !p.isDefault) {
          const previous = [...s.projects].find(([, q]) => q.isDefault)?.[0] ?? null;
          out.push({ type: 'project.default_changed', data: { project_id: command.projectId, previous_default_id: previous } });
        }
        return out;
      }
      case 'delete_project': {
        const p = project(s, command.projectId);
        if (s.projects.size <= 1) throw new Rejection('cannot_delete_last_project', 'an organization keeps at least one project');
        if (p.isDefault) throw new Rejection('cannot_delete_default', 'the default project cannot be deleted; promote another first');
        // The cascade: the project's keys are revoked in the same append.
        const revoked: DomainEvent[] = [...s.keys]
          .filter(([, k]) => k.projectId === command.projectId && !k.revoked)
          .map(([keyId]) => ({ type: 'api_key.revoked', data: { key_id: keyId, reason: 'project_deleted' } }));
        return [...revoked, { type: 'project.deleted', data: { project_id: command.projectId } }];
      }
      case 'add_user': {
        const email = command.email.toLowerCase();
        for (const u of s.users.values()) if (u.email === email) throw new Rejection('user_exists', 'a user with this email already belongs to the organization');
        return [{ type: 'user.added', data: { user_id: command.userId, email, display_name: command.displayName, role: command.role, added_at: now } }];
      }
      case 'change_user_role': {
        const u = member(s, command.userId);
        if (u.role === command.role) return [];
        ownerRules(s, u.role, command.role, command.actorRole);
        return [{ type: 'user.role_changed', data: { user_id: command.userId, role: command.role, previous_role: u.role } }];
      }
      case 'remove_user': {
        const u = member(s, command.userId);
        ownerRules(s, u.role, null, command.actorRole);
        // The user's project overrides go in the same append.
        const overrides: DomainEvent[] = [...s.projects]
          .filter(([, p]) => p.members.has(command.userId))
          .map(([projectId]) => ({ type: 'project_member.removed', data: { project_id: projectId, user_id: command.userId } }));
        return [...overrides, { type: 'user.removed', data: { user_id: command.userId } }];
      }
      case 'set_project_member': {
        const p = project(s, command.projectId);
        const u = s.users.get(command.userId);
        if (!u) throw new Rejection('user_not_in_org', 'the user does not belong to this organization');
        if (u.role === 'owner') throw new Rejection('cannot_override_owner', "an owner's role cannot be overridden");
        if (p.members.get(command.userId) === command.role) return [];
        return [{ type: 'project_member.set', data: { project_id: command.projectId, user_id: command.userId, role: command.role } }];
      }
      case 'remove_project_member': {
        const p = project(s, command.projectId);
        if (!p.members.has(command.userId)) return [];
        return [{ type: 'project_member.removed', data: { project_id: command.projectId, user_id: command.userId } }];
      }
      case 'create_api_key': {
        // Test and live are two worlds (docs/decisions.md, "Issue 60: errors and environments"):
        // a key acts only in projects of its environment, so it is bound to one of them only,
        // and the first key of an environment the organization has no project in opens one.
        const env = command.environment;
        if (command.projectId !== null) {
          const p = project(s, command.projectId);
          if (p.environment !== env) throw new Rejection('environment_mismatch', `project ${command.projectId} is a ${p.environment} project: a ${env} key acts only in ${env} projects; bind it to a ${env} project, or create a ${p.environment} key`, { environment: env, project_environment: p.environment });
        }
        const opened: DomainEvent[] =
          command.projectId === null && command.worldProjectId !== undefined && ![...s.projects.values()].some((p) => p.environment === env)
            ? [{ type: 'project.created', data: { project_id: command.worldProjectId, name: env === 'live' ? 'Live' : 'Test', slug: freeSlug(s, env), environment: env, is_default: false, settings: {}, created_at: now } }]
            : [];
        return [
          ...opened,
          {
            type: 'api_key.created',
            data: {
              key_id: command.keyId,
              name: command.name,
              environment: command.environment,
              project_id: command.projectId,
              scopes: command.scopes,
              key_hash: command.keyHash,
              key_prefix: command.keyPrefix,
              created_at: now,
            },
          },
        ];
      }
      case 'revoke_api_key': {
        const k = s.keys.get(command.keyId);
        if (!k) throw new Rejection('not_found', 'API key not found');
        if (k.revoked) return [];
        return [{ type: 'api_key.revoked', data: { key_id: command.keyId, reason: 'revoked' } }];
      }
    }
  },
};
