import { z } from 'zod';
import { IsoTime } from './common.ts';

// Facts of the organization aggregate (stream `org-<org_id>`): the organization
// owns its project list, so "one default", "slug unique in the organization"
// and "not the last project" are decided in one stream.

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

export const orgEvents = {
  'org.created': OrgCreated,
  'project.created': ProjectCreated,
  'project.updated': ProjectUpdated,
  'project.default_changed': ProjectDefaultChanged,
  'project.deleted': ProjectDeleted,
} as const;
