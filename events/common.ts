import { z } from 'zod';

// Shapes shared by every event: the metadata envelope and small value types.

export const Actor = z.object({
  kind: z.enum(['api_key', 'user', 'agent', 'system']),
  id: z.string().min(1),
});
export type Actor = z.infer<typeof Actor>;

export const EventMeta = z.object({
  org_id: z.string().min(1),
  project_id: z.string().min(1).nullable(),
  actor: Actor,
  request_id: z.string().nullable(),
  correlation_id: z.string().nullable(),
  causation_id: z.string().nullable(),
  occurred_at: z.string().datetime({ offset: true }),
  schema_version: z.number().int().positive(),
});
export type EventMeta = z.infer<typeof EventMeta>;

export const IsoTime = z.string().datetime({ offset: true });
/** Money and other integers beyond 2^53 travel as decimal strings. */
export const IntString = z.string().regex(/^-?\d+$/);
