import { parseEvent } from '../events/index.ts';
import type { Projection } from '../src/projector/projection.ts';

// Read model of OAuth clients (the consent page, the token endpoint's client
// check) and grants (bearer access-token authentication: the current access
// token's hash, its expiry and scopes, and whether the grant stands).

export const oauthProjection: Projection = {
  name: 'oauth',
  version: 1,
  tables: {
    oauth_clients: (t) => `CREATE TABLE ${t} (
      client_id text PRIMARY KEY,
      client_name text,
      redirect_uris jsonb NOT NULL,
      grant_types jsonb NOT NULL,
      response_types jsonb NOT NULL,
      registered_at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    )`,
    oauth_grants: (t) => `CREATE TABLE ${t} (
      grant_id text PRIMARY KEY,
      client_id text NOT NULL,
      org_id text NOT NULL,
      key_id text NOT NULL,
      project_id text,
      environment text NOT NULL,
      granted_scopes jsonb NOT NULL,
      token_scopes jsonb,
      status text NOT NULL,
      access_token_hash text,
      access_expires_at timestamptz,
      revoke_reason text,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (key_id) WHERE status <> 'revoked'`,
  },
  eventTypes: new Set(['oauth_client.registered', 'oauth_grant.created', 'oauth_grant.code_redeemed', 'oauth_grant.refreshed', 'oauth_grant.revoked']),
  async apply(tx, event, t) {
    const e = parseEvent(event.type, event.data);
    const pos = event.position;
    switch (e.type) {
      case 'oauth_client.registered': {
        const d = e.data;
        await tx.query(
          `INSERT INTO ${t.oauth_clients} (client_id, client_name, redirect_uris, grant_types, response_types, registered_at, position)
           VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (client_id) DO NOTHING`,
          [d.client_id, d.client_name, JSON.stringify(d.redirect_uris), JSON.stringify(d.grant_types), JSON.stringify(d.response_types), d.registered_at, pos],
        );
        return;
      }
      case 'oauth_grant.created': {
        const d = e.data;
        await tx.query(
          `INSERT INTO ${t.oauth_grants} (grant_id, client_id, org_id, key_id, project_id, environment, granted_scopes, status, created_at, updated_at, position)
           VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $8, $9) ON CONFLICT (grant_id) DO NOTHING`,
          [d.grant_id, d.client_id, d.org_id, d.key_id, d.project_id, d.environment, JSON.stringify(d.scopes), d.created_at, pos],
        );
        return;
      }
      case 'oauth_grant.code_redeemed':
      case 'oauth_grant.refreshed': {
        const d = e.data;
        await tx.query(
          `UPDATE ${t.oauth_grants} SET status = 'active', access_token_hash = $2, access_expires_at = $3, token_scopes = $4, updated_at = $5, position = $6
           WHERE grant_id = $1 AND position < $6 AND status <> 'revoked'`,
          [d.grant_id, d.access_token_hash, d.access_expires_at, JSON.stringify(d.scopes), d.at, pos],
        );
        return;
      }
      case 'oauth_grant.revoked':
        await tx.query(
          `UPDATE ${t.oauth_grants} SET status = 'revoked', access_token_hash = NULL, revoke_reason = $2, updated_at = $3, position = $4 WHERE grant_id = $1 AND position < $4`,
          [e.data.grant_id, e.data.reason, e.data.at, pos],
        );
        return;
    }
  },
};
