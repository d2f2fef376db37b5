import { parseEvent } from '../events/index.ts';
import type { RecordedEvent } from '../src/eventstore/port.ts';
import { arrayLiteral } from '../src/postgres/array-literal.ts';
import type { Projection, TableNames } from '../src/projector/projection.ts';

// Read model of mandates' currency slots (issue 58) and the transfers between
// them: one row per mandate and currency (a single-currency mandate has one),
// with its grant, what was spent from it and what transfers moved in and out.
// The wallet view and the payee routing of spends read it. Rows carry the log
// position of the last event applied; an older event never overwrites.

export const mandateSlotProjection: Projection = {
  name: 'mandate_slot',
  version: 1,
  tables: {
    mandate_slots: (t) => `CREATE TABLE ${t} (
      mandate_id text NOT NULL,
      currency text NOT NULL,
      idx integer NOT NULL,
      org_id text NOT NULL,
      project_id text NOT NULL,
      consumer_id text NOT NULL,
      rail text,
      cap_minor numeric NOT NULL,
      per_tx_cap_minor numeric NOT NULL,
      spent_minor numeric NOT NULL DEFAULT 0,
      moved_in_minor numeric NOT NULL DEFAULT 0,
      moved_out_minor numeric NOT NULL DEFAULT 0,
      funding_source_id text,
      position text COLLATE "C" NOT NULL,
      PRIMARY KEY (mandate_id, currency)
    );
    CREATE INDEX ON ${t} (consumer_id)`,
    mandate_transfers: (t) => `CREATE TABLE ${t} (
      transfer_id text PRIMARY KEY,
      mandate_id text NOT NULL,
      org_id text NOT NULL,
      from_currency text NOT NULL,
      to_currency text NOT NULL,
      amount_minor numeric NOT NULL,
      credited_minor numeric,
      engine text,
      decision text NOT NULL,
      code text,
      at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (mandate_id, position)`,
  },
  eventTypes: new Set(['mandate.created', 'mandate.spend_approved', 'mandate.transfer_executed', 'mandate.transfer_declined']),
  async apply(tx, event, t) {
    for (const [sql, params] of statements(event, t)) await tx.query(sql, params);
  },
};

type Statement = [string, unknown[]];

/** The statements of one event, independent of any answer: a batch issues them all before awaiting (pipelined). */
function statements(event: RecordedEvent, t: TableNames): Statement[] {
  const e = parseEvent(event.type, event.data);
  const pos = event.position;
  const org = event.metadata.org_id;
  switch (e.type) {
    case 'mandate.created': {
      const d = e.data;
      const slots = d.slots ?? [{ currency: d.currency, rail: null, cap_minor: d.cap_minor, per_tx_cap_minor: d.per_tx_cap_minor, funding_source_id: null }];
      return [
        [
          `INSERT INTO ${t.mandate_slots} (mandate_id, currency, idx, org_id, project_id, consumer_id, rail, cap_minor, per_tx_cap_minor, funding_source_id, position)
           SELECT $1, x.currency, x.idx, $2, $3, $4, x.rail, x.cap_minor::numeric, x.per_tx_cap_minor::numeric, x.funding_source_id, $5
           FROM json_to_recordset($6::json) AS x(currency text, idx int, rail text, cap_minor text, per_tx_cap_minor text, funding_source_id text)
           ON CONFLICT (mandate_id, currency) DO NOTHING`,
          [d.mandate_id, d.org_id, d.project_id, d.consumer_id, pos, JSON.stringify(slots.map((s, idx) => ({ ...s, idx })))],
        ],
      ];
    }
    case 'mandate.spend_approved':
      // The slot's spent after the spend (absolute), guarded by position: applied twice, or late, it changes nothing.
      return [[`UPDATE ${t.mandate_slots} SET spent_minor = $3, position = $4 WHERE mandate_id = $1 AND currency = $2 AND position < $4`, [e.data.mandate_id, e.data.currency, e.data.spent_minor, pos]]];
    case 'mandate.transfer_executed': {
      const d = e.data;
      return [
        [`UPDATE ${t.mandate_slots} SET moved_out_minor = moved_out_minor + $3, position = $4 WHERE mandate_id = $1 AND currency = $2 AND position < $4`, [d.mandate_id, d.from_currency, d.amount_minor, pos]],
        [`UPDATE ${t.mandate_slots} SET moved_in_minor = moved_in_minor + $3, position = $4 WHERE mandate_id = $1 AND currency = $2 AND position < $4`, [d.mandate_id, d.to_currency, d.credited_minor, pos]],
        [
          `INSERT INTO ${t.mandate_transfers} (transfer_id, mandate_id, org_id, from_currency, to_currency, amount_minor, credited_minor, engine, decision, at, position)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'executed', $9, $10) ON CONFLICT (transfer_id) DO NOTHING`,
          [d.transfer_id, d.mandate_id, org, d.from_currency, d.to_currency, d.amount_minor, d.credited_minor, d.engine, d.at, pos],
        ],
      ];
    }
    case 'mandate.transfer_declined': {
      const d = e.data;
      return [
        [
          `INSERT INTO ${t.mandate_transfers} (transfer_id, mandate_id, org_id, from_currency, to_currency, amount_minor, decision, code, at, position)
           VALUES ($1, $2, $3, $4, $5, $6, 'declined', $7, $8, $9) ON CONFLICT (transfer_id) DO NOTHING`,
          [d.transfer_id, d.mandate_id, org, d.from_currency, d.to_currency, d.amount_minor, d.code, d.at, pos],
        ],
      ];
    }
    default:
      return [];
  }
}

/**
 * The batch form: every statement of every event issued in log order before
 * any answer is awaited (one connection runs them in that order), so the
 * inline followers keep committing right behind them.
 */
mandateSlotProjection.applyBatch = async (tx, events, t) => {
  const all: Statement[] = [];
  // Consecutive approved spends (a group commit's usual batch) become one statement.
  for (let i = 0; i < events.length; ) {
    let j = i;
    while (j < events.length && events[j]!.type === 'mandate.spend_approved') j++;
    if (j - i > 1) {
      all.push(spentStatement(events.slice(i, j), t));
      i = j;
    } else {
      all.push(...statements(events[i]!, t));
      i++;
    }
  }
  const issued = all.map(([sql, params]) => tx.query(sql, params));
  for (const q of issued) q.catch(() => {});
  await Promise.all(issued);
};

/**
 * Approved spends in one statement: what applying them one by one leaves.
 * Each sets its slot's spent (absolute) if the row is older than the event,
 * so of a slot's spends in the run only the latest (highest position) can
 * decide the row, and it does exactly when it is newer than the row.
 */
function spentStatement(events: readonly RecordedEvent[], t: TableNames): Statement {
  const cols: string[][] = [[], [], [], []];
  for (const ev of events) {
    const e = parseEvent(ev.type, ev.data);
    if (e.type !== 'mandate.spend_approved') continue;
    [e.data.mandate_id, e.data.currency, e.data.spent_minor, ev.position].forEach((v, i) => cols[i]!.push(v));
  }
  return [
    `UPDATE ${t.mandate_slots} AS s SET spent_minor = v.spent::numeric, position = v.pos
     FROM (SELECT DISTINCT ON (m, c) m, c, spent, pos FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS x(m, c, spent, pos) ORDER BY m, c, pos COLLATE "C" DESC) v
     WHERE s.mandate_id = v.m AND s.currency = v.c AND s.position < v.pos COLLATE "C"`,
    cols.map(arrayLiteral),
  ];
}
mandateSlotProjection.pipelined = () => true;
