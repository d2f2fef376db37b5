import { z } from 'zod';
import { IsoTime } from './common.ts';

// Facts of the organization aggregate (stream `org-<org_id>`): the organization
// owns its project list, so "one default", "slug unique in the organization"
// and "not the last project" are decided in one stream.

// Users, project-level role overrides and API keys live in the same stream: a
// project's deletion revokes its keys in the same append, atomically.

export const OrgCreated = z.object({
  org_id: z.string(),
  name: z.string(),
  created_at: IsoTime,
});

export const ProjectCreated = z.object({
  project_id: z.string(),
  name: z.string(),
  slug: z.string(),
  environment: z.enum(['live', 'test']),
  is_default: z.boolean(),
  settings: z.record(z.string(), z.unknown()),
  created_at: IsoTime,
});

export const ProjectUpdated = z.object({
  project_id: z.string(),
  name: z.string().optional(),
  slug: z.string().optional(),
});

export const ProjectDefaultChanged = z.object({
  project_id: z.string(),
  previous_default_id: z.string().nullable(),
});

export const ProjectDeleted = z.object({
  project_id: z.string(),
});

export const Role = z.enum(['owner', 'admin', 'member']);

export const UserAdded = z.object({
  user_id: z.string(),
  email: z.string(),
  display_name: z.string().nullable(),
  role: Role,
  added_at: IsoTime,
});

/** An organization role changed (the dashboard's Team page; only an owner makes or unmakes an owner). */
export const UserRoleChanged = z.object({
  user_id: z.string(),
  role: Role,
  previous_role: Role,
});

/** A user left the organization (their project overrides are removed in the same append). */
export const UserRemoved = z.object({
  user_id: z.string(),
});

export const ProjectMemberSet = z.object({
  project_id: z.string(),
  user_id: z.string(),
  role: z.enum(['admin', 'member']),
});

export const ProjectMemberRemoved = z.object({
  project_id: z.string(),
  user_id: z.string(),
});

/** Only the key's hash and a display prefix are recorded; the key itself is shown once and never stored. */
export const ApiKeyCreated = z.object({
  key_id: z.string(),
  name: z.string(),
  environment: z.enum(['live', 'test']),
  project_id: z.string().nullable(),
  scopes: z.array(z.string()),
  key_hash: z.string().regex(/^[0-9a-f]{64}$/),
  key_prefix: z.string(),
  created_at: IsoTime,
});

export const ApiKeyRevoked = z.object({
  key_id: z.string(),
  reason: z.enum(['revoked', 'project_deleted']),
});

export const orgEvents = {
  'org.created': OrgCreated,
  'project.created': ProjectCreated,
  'project.updated': ProjectUpdated,
  'project.default_changed': ProjectDefaultChanged,
  'project.deleted': ProjectDeleted,
  'user.added': UserAdded,
  'user.role_changed': UserRoleChanged,
  'user.removed': UserRemoved,
  'project_member.set': ProjectMemberSet,
  'project_member.removed': ProjectMemberRemoved,
  'api_key.created': ApiKeyCreated,
  'api_key.revoked': ApiKeyRevoked,
} as const;
