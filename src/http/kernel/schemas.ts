import { z } from 'zod';

// Shapes shared by several routes.

export const ErrorEnvelope = z
  .object({
    error: z.object({ code: z.string(), message: z.string(), details: z.record(z.string(), z.unknown()).optional() }),
    request_id: z.string(),
  })
  .meta({ id: 'ErrorEnvelope' });

export const Timestamp = z.string().meta({ format: 'date-time' });

/**
 * An instant as ISO 8601 with an offset (a query's or a body's), normalized to
 * a Date; bounded to what every reader (PostgreSQL's timestamptz included) holds.
 */
export const Instant = z.iso
  .datetime({ offset: true })
  .refine((s) => {
    const y = new Date(s).getUTCFullYear();
    // A text that is no date at all has its issue already.
    return Number.isNaN(y) || (y >= 1970 && y <= 9999);
  }, 'a time between 1970 and 9999')
  .transform((s) => new Date(s));

export const Project = z
  .object({
    id: z.string(),
    org_id: z.string(),
    name: z.string(),
    slug: z.string(),
    is_default: z.boolean(),
    environment: z.enum(['live', 'test']),
    created_at: Timestamp,
  })
  .meta({ id: 'Project' });
export type Project = z.infer<typeof Project>;

/** Query booleans arrive as strings. */
export const QueryBool = z.enum(['true', 'false']).transform((v) => v === 'true');

/** An id path segment: printable, bounded; anything else is simply not found. */
export const IdParam = z.string().min(1).max(200);

/** SQL rendering a timestamptz column as the API's ISO 8601 text (lives below src/http, for the use cases' reads). */
export { isoText } from '../../postgres/iso-text.ts';

/** The consumer's path parameter of the Pix routes. */
export const ConsumerParams = z.object({ consumerId: z.string().min(1).max(200) });
