import { z } from 'zod';
import { IsoTime } from './common.ts';

// Facts of hosted-browser connect sessions (stream `hosted_connect-<session
// id>`, spec 4.16): a browser-worker context opened on a merchant's login page
// for a person to log in through our live view; finish captures the logged-in
// state into the vault as a connection. Ids only: no cookie, no storage state,
// no live-view token ever appears here.

export const HOSTED_MERCHANTS = ['merchant-a', 'merchant-b'] as const;
export type HostedMerchant = (typeof HOSTED_MERCHANTS)[number];

const Merchant = z.enum(HOSTED_MERCHANTS);

export const HostedConnectStarted = z.object({
  session_id: z.string(),
  context_id: z.string(),
  merchant: Merchant,
  org_id: z.string(),
  project_id: z.string(),
  created_at: IsoTime,
});
/** The worker refused or failed before a session could open (502 to the caller; a retry mints a new session). */
export const HostedConnectFailed = z.object({
  session_id: z.string(),
  merchant: Merchant,
  org_id: z.string(),
  project_id: z.string(),
  code: z.string(),
  detail: z.string().nullable(),
  at: IsoTime,
});
/** The captured login is a connection (its secret in the vault); the session is spent. */
export const HostedConnectFinished = z.object({ session_id: z.string(), connection_id: z.string(), at: IsoTime });
/** The open context ended without a finish: idle deadline, lifetime, taken back for an organization under its share while nobody watched it (`reclaimed`), or the process lost it (restart). */
export const HostedConnectExpired = z.object({ session_id: z.string(), reason: z.enum(['idle', 'lifetime', 'reclaimed', 'context_lost']), at: IsoTime });

export const hostedConnectEvents = {
  'hosted_connect.started': HostedConnectStarted,
  'hosted_connect.failed': HostedConnectFailed,
  'hosted_connect.finished': HostedConnectFinished,
  'hosted_connect.expired': HostedConnectExpired,
} as const;
