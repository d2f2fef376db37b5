import { parseEvent } from '../events/index.ts';
import type { Projection } from '../src/projector/projection.ts';

// Read model of agent identities and their keys (public parts only).

export const agentProjection: Projection = {
  name: 'agent',
  version: 2,
  tables: {
    agents: (t) => `CREATE TABLE ${t} (
      org_id text NOT NULL,
      handle text NOT NULL,
      did text NOT NULL UNIQUE,
      principal_ref text NOT NULL,
      display_name text,
      status text NOT NULL,
      created_at timestamptz NOT NULL,
      revoked_at timestamptz,
      position text COLLATE "C" NOT NULL,
      PRIMARY KEY (org_id, handle)
    );
    CREATE INDEX ON ${t} (org_id, created_at, handle)`,
    agent_keys: (t) => `CREATE TABLE ${t} (
      kid text PRIMARY KEY,
      org_id text NOT NULL,
      handle text NOT NULL,
      ordinal int NOT NULL,
      pubkey text NOT NULL,
      status text NOT NULL,
      created_at timestamptz NOT NULL,
      retired_at timestamptz,
      revoked_at timestamptz,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (org_id, handle, ordinal)`,
  },
  eventTypes: new Set(['agent.registered', 'agent.key_rotated', 'agent.key_revoked', 'agent.revoked']),

  async apply(tx, event, t) {
    const e = parseEvent(event.type, event.data);
    const org = event.metadata.org_id;
    const pos = event.position;
    switch (e.type) {
      case 'agent.registered':
        await tx.query(
          `INSERT INTO ${t.agents} (org_id, handle, did, principal_ref, display_name, status, created_at, position) VALUES ($1, $2, $3, $4, $5, 'active', $6, $7) ON CONFLICT DO NOTHING`,
          [org, e.data.agent_id, e.data.did, e.data.principal_ref, e.data.display_name, e.data.registered_at, pos],
        );
        await tx.query(
          `INSERT INTO ${t.agent_keys} (kid, org_id, handle, ordinal, pubkey, status, created_at, position) VALUES ($1, $2, $3, $4, $5, 'active', $6, $7) ON CONFLICT DO NOTHING`,
          [e.data.kid, org, e.data.agent_id, e.data.ordinal, e.data.pubkey, e.data.registered_at, pos],
        );
        return;
      case 'agent.key_rotated':
        await tx.query(`UPDATE ${t.agent_keys} SET status = 'retired', retired_at = $2, position = $3 WHERE kid = $1 AND position < $3 AND status = 'active'`, [e.data.retired_kid, e.data.rotated_at, pos]);
        await tx.query(
          `INSERT INTO ${t.agent_keys} (kid, org_id, handle, ordinal, pubkey, status, created_at, position) VALUES ($1, $2, $3, $4, $5, 'active', $6, $7) ON CONFLICT DO NOTHING`,
          [e.data.kid, org, e.data.agent_id, e.data.ordinal, e.data.pubkey, e.data.rotated_at, pos],
        );
        return;
      case 'agent.key_revoked':
        await tx.query(`UPDATE ${t.agent_keys} SET status = 'revoked', revoked_at = $2, position = $3 WHERE kid = $1 AND position < $3`, [e.data.kid, e.data.revoked_at, pos]);
        return;
      case 'agent.revoked':
        await tx.query(`UPDATE ${t.agents} SET status = 'revoked', revoked_at = $3, position = $4 WHERE org_id = $1 AND handle = $2 AND position < $4`, [org, e.data.agent_id, e.data.revoked_at, pos]);
        await tx.query(`UPDATE ${t.agent_keys} SET status = 'revoked', revoked_at = $2, position = $3 WHERE kid = ANY($1) AND position < $3`, [e.data.revoked_kids, e.data.revoked_at, pos]);
        return;
    }
  },
};
