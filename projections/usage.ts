import { parseEvent } from '../events/index.ts';
import type { Projection } from '../src/projector/projection.ts';

// Spends per project and per API key, for the dashboard's Usage page: one row
// per approved spend (`mandate.spend_approved`) with the project and the
// credential that made it (the event's actor: an API key, or a person or the
// system for a spend an approval ran). Summed per UTC day when read.

export const usageProjection: Projection = {
  name: 'usage',
  version: 1,
  tables: {
    usage_spends: (t) => `CREATE TABLE ${t} (
      transaction_id text PRIMARY KEY,
      org_id text NOT NULL,
      project_id text NOT NULL,
      actor_kind text NOT NULL,
      actor_id text NOT NULL,
      amount_minor numeric NOT NULL,
      currency text NOT NULL,
      at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (org_id, project_id, at);
    CREATE INDEX ON ${t} (org_id, actor_id, at)`,
  },
  eventTypes: new Set(['mandate.spend_approved']),
  async apply(tx, event, t) {
    const e = parseEvent(event.type, event.data);
    if (e.type !== 'mandate.spend_approved') return;
    const d = e.data;
    const m = event.metadata as { org_id: string; project_id: string | null; actor?: { kind?: string; id?: string } };
    await tx.query(
      `INSERT INTO ${t.usage_spends} (transaction_id, org_id, project_id, actor_kind, actor_id, amount_minor, currency, at, position)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (transaction_id) DO NOTHING`,
      [d.transaction_id, m.org_id, m.project_id ?? '', m.actor?.kind ?? 'system', m.actor?.id ?? '', d.amount_minor, d.currency, d.at, event.position],
    );
  },
};
