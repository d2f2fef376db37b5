import { parseEvent } from '../events/index.ts';
import type { Projection } from '../src/projector/projection.ts';

// Read model of directed-pay consents (issue 58): minted, and submitted once
// into a mandate. The token is never here (the events hold only its hash).

export const directedConsentProjection: Projection = {
  name: 'directed_consent',
  version: 1,
  tables: {
    directed_consents: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY,
      org_id text NOT NULL,
      project_id text NOT NULL,
      agent_id text NOT NULL,
      intent jsonb NOT NULL,
      status text NOT NULL,
      consumer_id text,
      mandate_id text,
      expires_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL,
      submitted_at timestamptz,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (org_id, project_id, created_at)`,
  },
  eventTypes: new Set(['directed_consent.initiated', 'directed_consent.submitted']),
  async apply(tx, event, t) {
    const e = parseEvent(event.type, event.data);
    const pos = event.position;
    if (e.type === 'directed_consent.initiated') {
      const d = e.data;
      await tx.query(
        `INSERT INTO ${t.directed_consents} (id, org_id, project_id, agent_id, intent, status, expires_at, created_at, position) VALUES ($1, $2, $3, $4, $5, 'pending', $6, $7, $8) ON CONFLICT (id) DO NOTHING`,
        [d.consent_id, d.org_id, d.project_id, d.agent_id, JSON.stringify(d.intent), d.expires_at, d.created_at, pos],
      );
    } else if (e.type === 'directed_consent.submitted') {
      const d = e.data;
      await tx.query(`UPDATE ${t.directed_consents} SET status = 'submitted', consumer_id = $2, mandate_id = $3, submitted_at = $4, position = $5 WHERE id = $1 AND position < $5`, [d.consent_id, d.consumer_id, d.mandate_id, d.at, pos]);
    }
  },
};
