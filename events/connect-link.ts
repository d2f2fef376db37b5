import { z } from 'zod';
import { IsoTime } from './common.ts';

// Facts of OAuth connect links (stream `connect_link-<link id>`, the link id a
// hash of the link token, which is also the OAuth `state`). The PKCE verifier
// is in the vault (`verifier_ref`); the link token itself is never stored.

export const ConnectLinkStarted = z.object({
  link_id: z.string(),
  org_id: z.string(),
  project_id: z.string(),
  server_id: z.string(),
  user_id: z.string(),
  environment: z.enum(['live', 'test']),
  redirect_uri: z.string(),
  scopes: z.array(z.string()),
  verifier_ref: z.string(),
  expires_at: IsoTime,
  created_at: IsoTime,
});
/** The callback arrived in time: the link token is spent (single use) before the code is exchanged. */
export const ConnectLinkConsumed = z.object({ link_id: z.string(), at: IsoTime });
export const ConnectLinkCompleted = z.object({ link_id: z.string(), connection_id: z.string(), account_id: z.string().nullable(), at: IsoTime });
export const ConnectLinkFailed = z.object({ link_id: z.string(), reason: z.string(), detail: z.string().nullable(), at: IsoTime });

export const connectLinkEvents = {
  'connect_link.started': ConnectLinkStarted,
  'connect_link.consumed': ConnectLinkConsumed,
  'connect_link.completed': ConnectLinkCompleted,
  'connect_link.failed': ConnectLinkFailed,
} as const;
