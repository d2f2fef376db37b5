import { parseEvent } from '../events/index.ts';
import type { Queryable } from '../src/postgres/db.ts';
import type { Projection } from '../src/projector/projection.ts';

// Read model of provider connections. secret_ref and webhook_secret_ref are
// vault references for the service's own use (tool calls, inbound webhook
// verification); no route returns them. A deleted connection's row is removed.

export const connectionProjection: Projection = {
  name: 'connection',
  version: 1,
  tables: {
    connections: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY,
      org_id text NOT NULL,
      project_id text NOT NULL,
      user_id text,
      server_id text NOT NULL,
      auth_type text NOT NULL,
      status text NOT NULL,
      display_name text,
      metadata jsonb,
      connection_metadata jsonb NOT NULL DEFAULT '{}',
      cert_metadata jsonb NOT NULL DEFAULT '{}',
      secret_ref text,
      webhook_secret_ref text,
      created_at timestamptz NOT NULL,
      connected_at timestamptz,
      revoked_at timestamptz,
      expires_at timestamptz,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (org_id, project_id, created_at);
    CREATE INDEX ON ${t} (org_id, project_id, server_id, user_id)`,
  },
  eventTypes: new Set(['connection.created', 'connection.credential_rotated', 'connection.revoked', 'connection.metadata_updated', 'connection.webhook_secret_set', 'connection.deleted']),
  async apply(tx, event, t) {
    const e = parseEvent(event.type, event.data);
    const pos = event.position;
    const T = t.connections;
    switch (e.type) {
      case 'connection.created': {
        const d = e.data;
        await tx.query(
          `INSERT INTO ${T} (id, org_id, project_id, user_id, server_id, auth_type, status, display_name, connection_metadata, cert_metadata, secret_ref, created_at, connected_at, expires_at, position, metadata)
           VALUES ($1, $2, $3, $4, $5, $6, 'connected', $7, $8, $9, $10, $11, $11, $12, $13, $14) ON CONFLICT (id) DO NOTHING`,
          [d.connection_id, d.org_id, d.project_id, d.user_id, d.server_id, d.auth_type, d.display_name, JSON.stringify(d.connection_metadata), JSON.stringify(d.cert_metadata), d.secret_ref, d.created_at, d.expires_at, pos, d.metadata ? JSON.stringify(d.metadata) : null],
        );
        return;
      }
      case 'connection.credential_rotated': {
        const d = e.data;
        await tx.query(
          `UPDATE ${T} SET secret_ref = $2, cert_metadata = $3, expires_at = $4, connected_at = $5,
             display_name = CASE WHEN $6::boolean THEN $7 ELSE display_name END, connection_metadata = coalesce($8::jsonb, connection_metadata), position = $9,
             metadata = coalesce($10::jsonb, metadata)
           WHERE id = $1 AND position < $9`,
          [d.connection_id, d.secret_ref, JSON.stringify(d.cert_metadata), d.expires_at, d.at, d.display_name !== undefined, d.display_name ?? null, d.connection_metadata ? JSON.stringify(d.connection_metadata) : null, pos, d.metadata ? JSON.stringify(d.metadata) : null],
        );
        return;
      }
      case 'connection.revoked':
        await tx.query(`UPDATE ${T} SET status = 'revoked', revoked_at = $2, secret_ref = NULL, webhook_secret_ref = NULL, position = $3 WHERE id = $1 AND position < $3`, [e.data.connection_id, e.data.at, pos]);
        return;
      case 'connection.metadata_updated':
        await tx.query(`UPDATE ${T} SET connection_metadata = $2, position = $3 WHERE id = $1 AND position < $3`, [e.data.connection_id, JSON.stringify(e.data.connection_metadata), pos]);
        return;
      case 'connection.webhook_secret_set':
        await tx.query(`UPDATE ${T} SET webhook_secret_ref = $2, position = $3 WHERE id = $1 AND position < $3`, [e.data.connection_id, e.data.webhook_secret_ref, pos]);
        return;
      case 'connection.deleted':
        await tx.query(`DELETE FROM ${T} WHERE id = $1`, [e.data.connection_id]);
        return;
    }
  },
};

/** The internal row of a connection (vault references included): for the service's own use, never a response. */
export type ConnectionRecord = {
  id: string;
  org_id: string;
  project_id: string;
  user_id: string | null;
  server_id: string;
  auth_type: string;
  status: string;
  connection_metadata: Record<string, unknown>;
  secret_ref: string | null;
  webhook_secret_ref: string | null;
  /** Provider metadata (OAuth scope, refresh_ref, account_id); null for a pasted key. */
  metadata?: Record<string, unknown> | null;
};
const RECORD = 'id, org_id, project_id, user_id, server_id, auth_type, status, connection_metadata, secret_ref, webhook_secret_ref, metadata';

/** A connection by id, whatever its tenant (inbound webhooks authenticate by signature, not by credential). */
export async function connectionById(db: Queryable, id: string): Promise<ConnectionRecord | undefined> {
  const { rows } = await db.query<ConnectionRecord>(`SELECT ${RECORD} FROM connections WHERE id = $1`, [id]);
  return rows[0];
}

/**
 * The live (connected) connection a tenant holds for a server: the end user's
 * own when `userId` is given, else (or when the user has none and the server
 * allows project-wide connections) the project-wide one.
 */
export async function liveConnection(db: Queryable, t: { orgId: string; projectId: string }, serverId: string, userId: string | null, allowProjectWide: boolean): Promise<ConnectionRecord | undefined> {
  const { rows } = await db.query<ConnectionRecord>(
    `SELECT ${RECORD} FROM connections
     WHERE org_id = $1 AND project_id = $2 AND server_id = $3 AND status = 'connected'
       AND (user_id IS NOT DISTINCT FROM $4 OR ($5 AND user_id IS NULL))
     ORDER BY (user_id IS NOT DISTINCT FROM $4) DESC, connections.created_at DESC LIMIT 1`,
    [t.orgId, t.projectId, serverId, userId, allowProjectWide],
  );
  return rows[0];
}
