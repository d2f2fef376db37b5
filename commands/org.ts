import type { DomainEvent } from '../events/index.ts';
import { type Decider, Rejection } from '../src/eventstore/handler.ts';

// The organization aggregate: the organization and its project list.

export const orgStream = (orgId: string) => `org-${orgId}`;

export type ProjectState = { name: string; slug: string; environment: 'live' | 'test'; isDefault: boolean };

export type OrgState =
  | { status: 'none' }
  | { status: 'active'; orgId: string; name: string; projects: Map<string, ProjectState> };

export type OrgCommand =
  | { type: 'create_org'; orgId: string; name: string; defaultProjectId: string }
  | { type: 'create_project'; projectId: string; name: string; slug: string; environment: 'live' | 'test'; settings: Record<string, unknown> }
  | { type: 'update_project'; projectId: string; name?: string; slug?: string; makeDefault?: boolean }
  | { type: 'delete_project'; projectId: string };

export const SLUG_PATTERN = /^[a-z0-9_-]{1,64}$/;
export const RESERVED_SLUGS = new Set(['default']);

export const orgRejections = ['org_exists', 'not_found', 'slug_invalid', 'slug_reserved', 'slug_conflict', 'cannot_delete_default', 'cannot_delete_last_project'] as const;

function active(state: OrgState): Extract<OrgState, { status: 'active' }> {
  if (state.status !== 'active') throw new Rejection('not_found', 'organization not found');
  return state;
}

function checkSlug(state: Extract<OrgState, { status: 'active' }>, slug: string, except?: string) {
  if (!SLUG_PATTERN.test(slug)) throw new Rejection('slug_invalid', 'slug must be 1-64 lowercase letters, digits, _ or -');
  if (RESERVED_SLUGS.has(slug)) throw new Rejection('slug_reserved', `slug "${slug}" is reserved`);
  for (const [id, p] of state.projects) {
    if (id !== except && p.slug === slug) throw new Rejection('slug_conflict', `slug "${slug}" is taken in this organization`);
  }
}

export const orgDecider: Decider<OrgState, OrgCommand> = {
  initialState: () => ({ status: 'none' }),

  evolve(state, event) {
    switch (event.type) {
      case 'org.created':
        return { status: 'active', orgId: event.data.org_id, name: event.data.name, projects: new Map() };
      case 'project.created': {
        const s = active(state);
        const projects = new Map(s.projects);
        projects.set(event.data.project_id, { name: event.data.name, slug: event.data.slug, environment: event.data.environment, isDefault: event.data.is_default });
        return { ...s, projects };
      }
      case 'project.updated': {
        const s = active(state);
        const p = s.projects.get(event.data.project_id);
        if (!p) return s;
        const projects = new Map(s.projects);
        projects.set(event.data.project_id, { ...p, name: event.data.name ?? p.name, slug: event.data.slug ?? p.slug });
        return { ...s, projects };
      }
      case 'project.default_changed': {
        const s = active(state);
        const projects = new Map<string, ProjectState>();
        for (const [id, p] of s.projects) projects.set(id, { ...p, isDefault: id === event.data.project_id });
        return { ...s, projects };
      }
      case 'project.deleted': {
        const s = active(state);
        const projects = new Map(s.projects);
        projects.delete(event.data.project_id);
        return { ...s, projects };
      }
      default:
        return state;
    }
  },

  decide(command, state, { now }): DomainEvent[] {
    switch (command.type) {
      case 'create_org': {
        if (state.status !== 'none') throw new Rejection('org_exists', 'organization already exists');
        return [
          { type: 'org.created', data: { org_id: command.orgId, name: command.name, created_at: now } },
          {
            type: 'project.created',
            data: { project_id: command.defaultProjectId, name: 'Default', slug: 'default', environment: 'test', is_default: true, settings: {}, created_at: now },
          },
        ];
      }
      case 'create_project': {
        const s = active(state);
        checkSlug(s, command.slug);
        return [
          {
            type: 'project.created',
            data: { project_id: command.projectId, name: command.name, slug: command.slug, environment: command.environment, is_default: false, settings: command.settings, created_at: now },
          },
        ];
      }
      case 'update_project': {
        const s = active(state);
        const p = s.projects.get(command.projectId);
        if (!p) throw new Rejection('not_found', 'project not found');
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
        const s = active(state);
        const p = s.projects.get(command.projectId);
        if (!p) throw new Rejection('not_found', 'project not found');
        if (s.projects.size <= 1) throw new Rejection('cannot_delete_last_project', 'an organization keeps at least one project');
        if (p.isDefault) throw new Rejection('cannot_delete_default', 'the default project cannot be deleted; promote another first');
        return [{ type: 'project.deleted', data: { project_id: command.projectId } }];
      }
    }
  },
};
