import { parseEvent } from '../events/index.ts';
import type { RecordedEvent } from '../src/eventstore/port.ts';
import { arrayLiteral } from '../src/postgres/array-literal.ts';
import type { Queryable } from '../src/postgres/db.ts';
import type { Projection, TableNames } from '../src/projector/projection.ts';

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
    await insertRows(tx, [event], t);
  },
};

/** The rows of approved spends, one statement for any number of them (a replayed one changes nothing). */
function insertRows(tx: Queryable, events: readonly RecordedEvent[], t: TableNames): Promise<unknown> {
  const cols: string[][] = [[], [], [], [], [], [], [], [], []];
  for (const event of events) {
    const e = parseEvent(event.type, event.data);
    if (e.type !== 'mandate.spend_approved') continue;
    const d = e.data;
    const m = event.metadata as { org_id: string; project_id: string | null; actor?: { kind?: string; id?: string } };
    [d.transaction_id, m.org_id, m.project_id ?? '', m.actor?.kind ?? 'system', m.actor?.id ?? '', d.amount_minor, d.currency, d.at, event.position].forEach((v, i) => cols[i]!.push(String(v)));
  }
  if (cols[0]!.length === 0) return Promise.resolve();
  return tx.query(
    `INSERT INTO ${t.usage_spends} (transaction_id, org_id, project_id, actor_kind, actor_id, amount_minor, currency, at, position)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::numeric[], $7::text[], $8::timestamptz[], $9::text[])
     ON CONFLICT (transaction_id) DO NOTHING`,
    cols.map(arrayLiteral),
  );
}

/** The batch form: one statement, issued without waiting for an answer first (pipelined), so the inline followers commit right behind it. */
usageProjection.applyBatch = async (tx, events, t) => {
  await insertRows(tx, events, t);
};
usageProjection.pipelined = () => true;
