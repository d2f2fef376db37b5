import { z } from 'zod';
import { IsoTime } from './common.ts';

// Facts of OAuth 2.0 for remote clients (spec Part 4.1, Part 5 item 10).
// Streams: `oauth_client-<client_id>` (a registered public client; organization
// `platform`, since a client belongs to no organization until a person grants
// it a key) and `oauth_grant-<grant_id>` (one consent: its code, then its
// rotating token pair; in the key's organization, so its audit chain).
// Codes, tokens and pasted keys never appear: only ids and SHA-256 hashes.

const Hash = z.string().regex(/^[0-9a-f]{64}$/);

export const OAuthClientRegistered = z.object({
  client_id: z.string(),
  client_name: z.string().nullable(),
  redirect_uris: z.array(z.string()),
  grant_types: z.array(z.string()),
  response_types: z.array(z.string()),
  token_endpoint_auth_method: z.literal('none'),
  registered_at: IsoTime,
});

export const OAuthGrantCreated = z.object({
  grant_id: z.string(),
  client_id: z.string(),
  org_id: z.string(),
  key_id: z.string(),
  /** The pasted key's project binding (null: an organization-wide key). */
  project_id: z.string().nullable(),
  environment: z.enum(['live', 'test']),
  scopes: z.array(z.string()),
  redirect_uri: z.string(),
  code_challenge: z.string(),
  code_hash: Hash,
  code_expires_at: IsoTime,
  created_at: IsoTime,
});

export const OAuthGrantCodeRedeemed = z.object({
  grant_id: z.string(),
  access_token_hash: Hash,
  access_expires_at: IsoTime,
  refresh_token_hash: Hash,
  refresh_expires_at: IsoTime,
  scopes: z.array(z.string()),
  at: IsoTime,
});

export const OAuthGrantRefreshed = z.object({
  grant_id: z.string(),
  previous_refresh_token_hash: Hash,
  access_token_hash: Hash,
  access_expires_at: IsoTime,
  refresh_token_hash: Hash,
  refresh_expires_at: IsoTime,
  scopes: z.array(z.string()),
  at: IsoTime,
});

export const OAuthRevokeReason = z.enum(['refresh_token_reuse', 'code_replay', 'key_revoked']);

export const OAuthGrantRevoked = z.object({ grant_id: z.string(), reason: OAuthRevokeReason, at: IsoTime });

export const oauthEvents = {
  'oauth_client.registered': OAuthClientRegistered,
  'oauth_grant.created': OAuthGrantCreated,
  'oauth_grant.code_redeemed': OAuthGrantCodeRedeemed,
  'oauth_grant.refreshed': OAuthGrantRefreshed,
  'oauth_grant.revoked': OAuthGrantRevoked,
} as const;
