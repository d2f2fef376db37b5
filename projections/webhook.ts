import { parseEvent } from '../events/index.ts';
import type { Projection } from '../src/projector/projection.ts';

// Read model of webhook endpoints. created_position lets the dispatcher match
// an event only with endpoints that existed before it.

export const webhookProjection: Projection = {
  name: 'webhook',
  version: 1,
  tables: {
    webhook_endpoints: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY,
      org_id text NOT NULL,
      project_id text NOT NULL,
      name text NOT NULL,
      event text NOT NULL,
      webhook_url text NOT NULL,
      server_id text,
      status text NOT NULL,
      secret_ref text NOT NULL,
      previous_secret_ref text,
      previous_valid_until timestamptz,
      created_at timestamptz NOT NULL,
      created_position text COLLATE "C" NOT NULL,
      deleted boolean NOT NULL DEFAULT false,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (org_id, event) WHERE NOT deleted;
    CREATE INDEX ON ${t} (org_id, project_id, created_position)`,
  },
  eventTypes: new Set(['webhook_endpoint.created', 'webhook_endpoint.updated', 'webhook_endpoint.status_changed', 'webhook_endpoint.secret_rotated', 'webhook_endpoint.deleted']),
  async apply(tx, event, t) {
    const e = parseEvent(event.type, event.data);
    const pos = event.position;
    switch (e.type) {
      case 'webhook_endpoint.created': {
        const d = e.data;
        await tx.query(
          `INSERT INTO ${t.webhook_endpoints} (id, org_id, project_id, name, event, webhook_url, server_id, status, secret_ref, created_at, created_position, position)
           VALUES ($1, $2, $3, $4, $5, $6, $7, 'active', $8, $9, $10, $10) ON CONFLICT (id) DO NOTHING`,
          [d.trigger_id, d.org_id, d.project_id, d.name, d.event, d.webhook_url, d.server_id, d.secret_ref, d.created_at, pos],
        );
        return;
      }
      case 'webhook_endpoint.updated':
        await tx.query(`UPDATE ${t.webhook_endpoints} SET name = coalesce($2, name), webhook_url = coalesce($3, webhook_url), position = $4 WHERE id = $1 AND position < $4`, [e.data.trigger_id, e.data.name ?? null, e.data.webhook_url ?? null, pos]);
        return;
      case 'webhook_endpoint.status_changed':
        await tx.query(`UPDATE ${t.webhook_endpoints} SET status = $2, position = $3 WHERE id = $1 AND position < $3`, [e.data.trigger_id, e.data.to, pos]);
        return;
      case 'webhook_endpoint.secret_rotated':
        await tx.query(`UPDATE ${t.webhook_endpoints} SET secret_ref = $2, previous_secret_ref = $3, previous_valid_until = $4, position = $5 WHERE id = $1 AND position < $5`, [e.data.trigger_id, e.data.secret_ref, e.data.previous_secret_ref, e.data.previous_valid_until, pos]);
        return;
      case 'webhook_endpoint.deleted':
        await tx.query(`UPDATE ${t.webhook_endpoints} SET deleted = true, position = $2 WHERE id = $1 AND position < $2`, [e.data.trigger_id, pos]);
        return;
    }
  },
};
