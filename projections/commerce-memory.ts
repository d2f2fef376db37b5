import { discountBps } from '../commands/commerce-memory.ts';
import { parseEvent } from '../events/index.ts';
import type { RecordedEvent } from '../src/eventstore/port.ts';
import type { Queryable } from '../src/postgres/db.ts';
import type { Projection, TableNames } from '../src/projector/projection.ts';

// Read models of commerce memory. Besides the rows the lists serve
// (counterparties, interactions, negotiations), the insights read per-day and
// per-month buckets maintained here as interactions and negotiations arrive, so
// an insight over a window sums a few bucket rows plus at most two partial days
// of raw rows (projections/commerce-memory-insights.ts), never every
// interaction of the window.
//
// Buckets are incremented only when the source row was inserted (INSERT ... ON
// CONFLICT DO NOTHING RETURNING feeds the increments), so applying an event twice
// changes nothing. Days and months are UTC.

// A bucket is one counterparty (or item and outcome) in one day or month; the
// currencies seen there are a small sorted array, not a key, so a counterparty
// paying in three currencies is still one row per period.
const bucketTable = (unit: 'day' | 'month') => (t: string) => `CREATE TABLE ${t} (
      org_id text NOT NULL,
      project_id text NOT NULL,
      ${unit} date NOT NULL,
      counterparty_id text NOT NULL,
      counterparty_kind text NOT NULL,
      currencies text[] NOT NULL,
      interaction_count bigint NOT NULL,
      payment_count bigint NOT NULL,
      payment_minor numeric NOT NULL,
      PRIMARY KEY (org_id, project_id, ${unit}, counterparty_id)
    )`;

const negotiationBucketTable = (unit: 'day' | 'month') => (t: string) => `CREATE TABLE ${t} (
      org_id text NOT NULL,
      project_id text NOT NULL,
      ${unit} date NOT NULL,
      item_ref text NOT NULL,
      outcome text NOT NULL,
      currencies text[] NOT NULL,
      n bigint NOT NULL,
      discount_sample_n bigint NOT NULL,
      discount_bps_sum numeric NOT NULL,
      PRIMARY KEY (org_id, project_id, ${unit}, item_ref, outcome)
    );
    CREATE INDEX ON ${t} (org_id, project_id, item_ref, ${unit})`;

/** The sorted union of a bucket's currencies and the new ones (unchanged when nothing is new). */
const UNION_CURRENCIES = `CASE WHEN excluded.currencies <@ b.currencies THEN b.currencies
        ELSE ARRAY(SELECT DISTINCT x FROM unnest(b.currencies || excluded.currencies) AS x ORDER BY x) END`;
const CURRENCIES_OF = `coalesce(array_agg(DISTINCT currency ORDER BY currency) FILTER (WHERE currency IS NOT NULL), '{}')`;

export const commerceMemoryProjection: Projection = {
  name: 'commerce-memory',
  version: 1,
  tables: {
    counterparties: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY,
      org_id text NOT NULL,
      project_id text NOT NULL,
      kind text NOT NULL,
      name text NOT NULL,
      identifier text,
      identifier_kind text,
      metadata jsonb NOT NULL,
      preferences jsonb NOT NULL DEFAULT '{}',
      preferences_updated_at timestamptz,
      created_at timestamptz NOT NULL,
      last_seen_at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (org_id, project_id, last_seen_at DESC, id);
    CREATE INDEX ON ${t} (org_id, project_id, identifier)`,
    interactions: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY,
      org_id text NOT NULL,
      project_id text NOT NULL,
      counterparty_id text NOT NULL,
      counterparty_kind text NOT NULL,
      kind text NOT NULL,
      occurred_at timestamptz NOT NULL,
      source text NOT NULL,
      source_ref text,
      agent_id text,
      amount_minor numeric,
      currency text,
      metadata jsonb NOT NULL,
      recorded_at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (org_id, project_id, occurred_at);
    CREATE INDEX ON ${t} (counterparty_id, occurred_at)`,
    counterparty_daily: bucketTable('day'),
    counterparty_monthly: bucketTable('month'),
    negotiations: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY,
      org_id text NOT NULL,
      project_id text NOT NULL,
      counterparty_id text NOT NULL,
      item_ref text NOT NULL,
      outcome text NOT NULL,
      currency text,
      list_price_minor numeric,
      final_price_minor numeric,
      discount_bps bigint,
      started_at timestamptz NOT NULL,
      ended_at timestamptz,
      metadata jsonb NOT NULL,
      created_at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (org_id, project_id, started_at);
    CREATE INDEX ON ${t} (org_id, project_id, item_ref, started_at)`,
    negotiation_daily: negotiationBucketTable('day'),
    negotiation_monthly: negotiationBucketTable('month'),
  },
  eventTypes: new Set(['counterparty.created', 'counterparty.merged', 'counterparty.preferences_set', 'interaction.recorded', 'negotiation.recorded']),
  async apply(tx, event, t) {
    await applyInOrder(tx, [event], t);
  },
  async applyBatch(tx, events, t) {
    await applyInOrder(tx, events, t);
  },
};

/** Runs of interactions and of negotiations go set-based; counterparty events, rarer, one by one, in log order. */
async function applyInOrder(tx: Queryable, events: readonly RecordedEvent[], t: TableNames): Promise<void> {
  let interactions: unknown[] = [];
  let negotiations: unknown[] = [];
  const flush = async () => {
    if (interactions.length > 0) await insertInteractions(tx, interactions, t);
    if (negotiations.length > 0) await insertNegotiations(tx, negotiations, t);
    interactions = [];
    negotiations = [];
  };
  for (const ev of events) {
    const e = parseEvent(ev.type, ev.data);
    const pos = ev.position;
    switch (e.type) {
      case 'interaction.recorded':
        interactions.push({ ...e.data, position: pos });
        break;
      case 'negotiation.recorded': {
        const d = e.data;
        const bps = discountBps(d.list_price_minor === null ? null : BigInt(d.list_price_minor), d.final_price_minor === null ? null : BigInt(d.final_price_minor));
        negotiations.push({ ...d, discount_bps: bps === null ? null : bps.toString(), position: pos });
        break;
      }
      case 'counterparty.created': {
        await flush();
        const d = e.data;
        await tx.query(
          `INSERT INTO ${t.counterparties} (id, org_id, project_id, kind, name, identifier, identifier_kind, metadata, created_at, last_seen_at, position)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10) ON CONFLICT (id) DO NOTHING`,
          [d.counterparty_id, d.org_id, d.project_id, d.kind, d.name, d.identifier, d.identifier_kind, JSON.stringify(d.metadata), d.created_at, pos],
        );
        break;
      }
      case 'counterparty.merged': {
        await flush();
        const d = e.data;
        await tx.query(`UPDATE ${t.counterparties} SET name = $2, metadata = $3, last_seen_at = greatest(last_seen_at, $4::timestamptz), position = $5 WHERE id = $1 AND position < $5`, [
          d.counterparty_id,
          d.name,
          JSON.stringify(d.metadata),
          d.at,
          pos,
        ]);
        break;
      }
      case 'counterparty.preferences_set': {
        await flush();
        const d = e.data;
        await tx.query(`UPDATE ${t.counterparties} SET preferences = $2, preferences_updated_at = $3, position = $4 WHERE id = $1 AND position < $4`, [d.counterparty_id, JSON.stringify(d.preferences), d.at, pos]);
        break;
      }
      default:
        break;
    }
  }
  await flush();
}

function bucketUpsert(table: string, unit: 'day' | 'month'): string {
  const expr = unit === 'day' ? `(occurred_at AT TIME ZONE 'UTC')::date` : `date_trunc('month', occurred_at AT TIME ZONE 'UTC')::date`;
  return `INSERT INTO ${table} AS b (org_id, project_id, ${unit}, counterparty_id, counterparty_kind, currencies, interaction_count, payment_count, payment_minor)
    SELECT org_id, project_id, ${expr}, counterparty_id, min(counterparty_kind), ${CURRENCIES_OF}, count(*), count(*) FILTER (WHERE kind = 'payment'),
      coalesce(sum(amount_minor) FILTER (WHERE kind = 'payment'), 0)
    FROM ins GROUP BY org_id, project_id, ${expr}, counterparty_id
    ON CONFLICT (org_id, project_id, ${unit}, counterparty_id) DO UPDATE SET
      currencies = ${UNION_CURRENCIES},
      interaction_count = b.interaction_count + excluded.interaction_count,
      payment_count = b.payment_count + excluded.payment_count,
      payment_minor = b.payment_minor + excluded.payment_minor`;
}

async function insertInteractions(tx: Queryable, rows: unknown[], t: TableNames): Promise<void> {
  await tx.query(
    `WITH x AS (
       SELECT * FROM json_to_recordset($1::json) AS x(interaction_id text, org_id text, project_id text, counterparty_id text, counterparty_kind text, kind text,
         occurred_at timestamptz, source text, source_ref text, agent_id text, amount_minor numeric, currency text, metadata jsonb, recorded_at timestamptz, position text)
     ),
     ins AS (
       INSERT INTO ${t.interactions} (id, org_id, project_id, counterparty_id, counterparty_kind, kind, occurred_at, source, source_ref, agent_id, amount_minor, currency, metadata, recorded_at, position)
       SELECT interaction_id, org_id, project_id, counterparty_id, counterparty_kind, kind, occurred_at, source, source_ref, agent_id, amount_minor, currency, metadata, recorded_at, position FROM x
       ON CONFLICT (id) DO NOTHING
       RETURNING org_id, project_id, counterparty_id, counterparty_kind, kind, occurred_at, amount_minor, currency
     ),
     d AS (${bucketUpsert(t.counterparty_daily!, 'day')}),
     m AS (${bucketUpsert(t.counterparty_monthly!, 'month')}),
     seen AS (
       UPDATE ${t.counterparties} AS c SET last_seen_at = s.at
       FROM (SELECT counterparty_id, max(occurred_at) AS at FROM ins GROUP BY counterparty_id) AS s
       WHERE c.id = s.counterparty_id AND s.at > c.last_seen_at
     )
     SELECT 1`,
    [JSON.stringify(rows)],
  );
}

function negotiationBucketUpsert(table: string, unit: 'day' | 'month'): string {
  const expr = unit === 'day' ? `(started_at AT TIME ZONE 'UTC')::date` : `date_trunc('month', started_at AT TIME ZONE 'UTC')::date`;
  return `INSERT INTO ${table} AS b (org_id, project_id, ${unit}, item_ref, outcome, currencies, n, discount_sample_n, discount_bps_sum)
    SELECT org_id, project_id, ${expr}, item_ref, outcome, ${CURRENCIES_OF}, count(*), count(discount_bps), coalesce(sum(discount_bps), 0)
    FROM ins GROUP BY org_id, project_id, ${expr}, item_ref, outcome
    ON CONFLICT (org_id, project_id, ${unit}, item_ref, outcome) DO UPDATE SET
      currencies = ${UNION_CURRENCIES},
      n = b.n + excluded.n,
      discount_sample_n = b.discount_sample_n + excluded.discount_sample_n,
      discount_bps_sum = b.discount_bps_sum + excluded.discount_bps_sum`;
}

async function insertNegotiations(tx: Queryable, rows: unknown[], t: TableNames): Promise<void> {
  await tx.query(
    `WITH x AS (
       SELECT * FROM json_to_recordset($1::json) AS x(negotiation_id text, org_id text, project_id text, counterparty_id text, item_ref text, outcome text, currency text,
         list_price_minor numeric, final_price_minor numeric, discount_bps bigint, started_at timestamptz, ended_at timestamptz, metadata jsonb, created_at timestamptz, position text)
     ),
     ins AS (
       INSERT INTO ${t.negotiations} (id, org_id, project_id, counterparty_id, item_ref, outcome, currency, list_price_minor, final_price_minor, discount_bps, started_at, ended_at, metadata, created_at, position)
       SELECT negotiation_id, org_id, project_id, counterparty_id, item_ref, outcome, currency, list_price_minor, final_price_minor, discount_bps, started_at, ended_at, metadata, created_at, position FROM x
       ON CONFLICT (id) DO NOTHING
       RETURNING org_id, project_id, item_ref, outcome, currency, discount_bps, started_at
     ),
     d AS (${negotiationBucketUpsert(t.negotiation_daily!, 'day')}),
     m AS (${negotiationBucketUpsert(t.negotiation_monthly!, 'month')})
     SELECT 1`,
    [JSON.stringify(rows)],
  );
}
