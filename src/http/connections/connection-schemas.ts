import { z } from 'zod';
import { Timestamp } from '../kernel/schemas.ts';

// The connection's response schema (no routes here): the connection routes and
// hosted connect's finish answer it.

export const ConnectionView = z
  .object({
    id: z.string(),
    user_id: z.string().nullable(),
    server_id: z.string(),
    auth_type: z.string(),
    status: z.enum(['pending', 'connected', 'revoked', 'expired']).describe('`pending` (the person has not finished connecting), `connected` (usable), `revoked` (for good; the vault rows are purged) or `expired` (its credential lapsed).'),
    display_name: z.string().nullable(),
    metadata: z.record(z.string(), z.unknown()).nullable(),
    connection_metadata: z.record(z.string(), z.unknown()),
    cert_metadata: z.record(z.string(), z.unknown()),
    created_at: Timestamp,
    connected_at: Timestamp.nullable(),
    revoked_at: Timestamp.nullable(),
    expires_at: Timestamp.nullable(),
  })
  .meta({ id: 'Connection' });
