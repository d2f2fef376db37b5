import { parseEvent } from '../events/index.ts';
import type { Projection } from '../src/projector/projection.ts';

// Read model of mandates, their authorization history (every spend decision,
// approved or declined) and the cards bound to them.

export const mandateProjection: Projection = {
  name: 'mandate',
  version: 2,
  tables: {
    mandates: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY,
      org_id text NOT NULL,
      project_id text NOT NULL,
      consumer_id text NOT NULL,
      agent_id text NOT NULL,
      purpose text NOT NULL,
      display_name text,
      intent_note text,
      merchant_allowlist jsonb NOT NULL,
      merchant_pin_kind text NOT NULL,
      cap_minor numeric NOT NULL,
      per_tx_cap_minor numeric NOT NULL,
      spent_minor numeric NOT NULL DEFAULT 0,
      currency text NOT NULL,
      status text NOT NULL,
      expires_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (org_id, project_id, created_at);
    CREATE INDEX ON ${t} (consumer_id);
    CREATE INDEX ON ${t} (org_id, project_id, consumer_id, created_at, id);
    CREATE INDEX ON ${t} (org_id, project_id, agent_id, created_at, id);
    CREATE INDEX ON ${t} (expires_at) WHERE status IN ('active', 'paused')`,
    mandate_authorizations: (t) => `CREATE TABLE ${t} (
      transaction_id text PRIMARY KEY,
      mandate_id text NOT NULL,
      org_id text NOT NULL,
      channel text NOT NULL,
      amount_minor numeric NOT NULL,
      currency text NOT NULL,
      merchant text NOT NULL,
      decision text NOT NULL,
      code text,
      spent_minor numeric,
      at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (mandate_id, position)`,
    mandate_cards: (t) => `CREATE TABLE ${t} (
      card_id text PRIMARY KEY,
      mandate_id text NOT NULL,
      org_id text NOT NULL,
      project_id text NOT NULL,
      consumer_id text NOT NULL,
      status text NOT NULL,
      bound_at timestamptz NOT NULL,
      revoked_at timestamptz,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (mandate_id)`,
  },
  eventTypes: new Set([
    'mandate.created',
    'mandate.paused',
    'mandate.resumed',
    'mandate.revoked',
    'mandate.expired',
    'mandate.spend_approved',
    'mandate.spend_declined',
    'mandate.card_bound',
    'mandate.card_revoked',
  ]),
  async apply(tx, event, t) {
    const e = parseEvent(event.type, event.data);
    const pos = event.position;
    const org = event.metadata.org_id;
    switch (e.type) {
      case 'mandate.created': {
        const d = e.data;
        await tx.query(
          `INSERT INTO ${t.mandates} (id, org_id, project_id, consumer_id, agent_id, purpose, display_name, intent_note, merchant_allowlist, merchant_pin_kind,
             cap_minor, per_tx_cap_minor, currency, status, expires_at, created_at, position)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 'active', $14, $15, $16) ON CONFLICT (id) DO NOTHING`,
          [d.mandate_id, d.org_id, d.project_id, d.consumer_id, d.agent_id, d.purpose, d.display_name, d.intent_note, JSON.stringify(d.merchant_allowlist), d.merchant_pin_kind, d.cap_minor, d.per_tx_cap_minor, d.currency, d.expires_at, d.created_at, pos],
        );
        return;
      }
      case 'mandate.paused':
      case 'mandate.resumed':
      case 'mandate.revoked':
      case 'mandate.expired':
        await tx.query(`UPDATE ${t.mandates} SET status = $2, position = $3 WHERE id = $1 AND position < $3`, [e.data.mandate_id, e.data.to, pos]);
        return;
      case 'mandate.spend_approved':
      case 'mandate.spend_declined': {
        const d = e.data;
        const approved = e.type === 'mandate.spend_approved';
        await tx.query(
          `INSERT INTO ${t.mandate_authorizations} (transaction_id, mandate_id, org_id, channel, amount_minor, currency, merchant, decision, code, spent_minor, at, position)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (transaction_id) DO NOTHING`,
          [d.transaction_id, d.mandate_id, org, d.channel, d.amount_minor, d.currency, d.merchant, approved ? 'approved' : 'declined', approved ? null : (d as { code: string }).code, approved ? (d as { spent_minor: string }).spent_minor : null, d.at, pos],
        );
        if (e.type === 'mandate.spend_approved') {
          // The row's spent is its first slot's (its currency); another slot's spends live in mandate_slots.
          await tx.query(`UPDATE ${t.mandates} SET spent_minor = $2, position = $3 WHERE id = $1 AND position < $3 AND currency = $4`, [d.mandate_id, e.data.spent_minor, pos, d.currency]);
        }
        return;
      }
      case 'mandate.card_bound': {
        const d = e.data;
        const { rows } = await tx.query<{ project_id: string }>(`SELECT project_id FROM ${t.mandates} WHERE id = $1`, [d.mandate_id]);
        await tx.query(
          `INSERT INTO ${t.mandate_cards} (card_id, mandate_id, org_id, project_id, consumer_id, status, bound_at, position) VALUES ($1, $2, $3, $4, $5, 'active', $6, $7) ON CONFLICT (card_id) DO NOTHING`,
          [d.card_id, d.mandate_id, org, rows[0]?.project_id ?? event.metadata.project_id ?? '', d.consumer_id, d.bound_at, pos],
        );
        return;
      }
      case 'mandate.card_revoked':
        await tx.query(`UPDATE ${t.mandate_cards} SET status = 'revoked', revoked_at = $2, position = $3 WHERE card_id = $1 AND position < $3`, [e.data.card_id, e.data.revoked_at, pos]);
        return;
    }
  },
};

/**
 * The set-based form, with the same result as applying the events one by one:
 * new mandates in one INSERT, every authorization in one INSERT, the moves and
 * spends of each mandate folded into one UPDATE; card events, rare, in order.
 */
mandateProjection.applyBatch = async (tx, events, t) => {
  const created: unknown[] = [];
  const auths: unknown[] = [];
  // spent: by currency (the row takes its own currency's: its first slot's).
  const latest = new Map<string, { status?: string; spent?: Record<string, string>; position: string }>();
  const cards: typeof events[number][] = [];
  for (const ev of events) {
    const e = parseEvent(ev.type, ev.data);
    switch (e.type) {
      case 'mandate.created': {
        const d = e.data;
        created.push({ ...d, merchant_allowlist: JSON.stringify(d.merchant_allowlist), position: ev.position });
        break;
      }
      case 'mandate.paused':
      case 'mandate.resumed':
      case 'mandate.revoked':
      case 'mandate.expired': {
        const cur = latest.get(e.data.mandate_id) ?? { position: ev.position };
        latest.set(e.data.mandate_id, { ...cur, status: e.data.to, position: ev.position });
        break;
      }
      case 'mandate.spend_approved':
      case 'mandate.spend_declined': {
        const d = e.data;
        const approved = e.type === 'mandate.spend_approved';
        auths.push({ transaction_id: d.transaction_id, mandate_id: d.mandate_id, org_id: ev.metadata.org_id, channel: d.channel, amount_minor: d.amount_minor, currency: d.currency, merchant: d.merchant, decision: approved ? 'approved' : 'declined', code: approved ? null : (d as { code: string }).code, spent_minor: approved ? (d as { spent_minor: string }).spent_minor : null, at: d.at, position: ev.position });
        if (e.type === 'mandate.spend_approved') {
          const cur = latest.get(d.mandate_id) ?? { position: ev.position };
          latest.set(d.mandate_id, { ...cur, spent: { ...cur.spent, [d.currency]: e.data.spent_minor }, position: ev.position });
        }
        break;
      }
      default:
        cards.push(ev);
    }
  }
  // Every statement is issued before any answer is awaited (mandateProjection.pipelined).
  const issued: Promise<unknown>[] = [];
  if (created.length > 0) {
    issued.push(tx.query(
      `INSERT INTO ${t.mandates} (id, org_id, project_id, consumer_id, agent_id, purpose, display_name, intent_note, merchant_allowlist, merchant_pin_kind,
         cap_minor, per_tx_cap_minor, currency, status, expires_at, created_at, position)
       SELECT mandate_id, org_id, project_id, consumer_id, agent_id, purpose, display_name, intent_note, merchant_allowlist::jsonb, merchant_pin_kind,
         cap_minor::numeric, per_tx_cap_minor::numeric, currency, 'active', expires_at, created_at, position
       FROM json_to_recordset($1::json) AS x(mandate_id text, org_id text, project_id text, consumer_id text, agent_id text, purpose text, display_name text, intent_note text,
         merchant_allowlist text, merchant_pin_kind text, cap_minor text, per_tx_cap_minor text, currency text, expires_at timestamptz, created_at timestamptz, position text)
       ON CONFLICT (id) DO NOTHING`,
      [JSON.stringify(created)],
    ));
  }
  const insertAuths = `INSERT INTO ${t.mandate_authorizations} (transaction_id, mandate_id, org_id, channel, amount_minor, currency, merchant, decision, code, spent_minor, at, position)
       SELECT transaction_id, mandate_id, org_id, channel, amount_minor::numeric, currency, merchant, decision, code, spent_minor::numeric, at, position
       FROM json_to_recordset($1::json) AS x(transaction_id text, mandate_id text, org_id text, channel text, amount_minor text, currency text, merchant text, decision text, code text, spent_minor text, at timestamptz, position text)
       ON CONFLICT (transaction_id) DO NOTHING`;
  // The ids again as an array: the planner then reads the mandates by key (it
  // guesses a hundred rows for json_to_recordset, and on a small or bloated
  // table chose to scan all of it for a hash join, every batch).
  const updateMandates = (p: string, ids: string) => `UPDATE ${t.mandates} AS m SET status = coalesce(x.status, m.status), spent_minor = coalesce((x.spent::jsonb ->> m.currency)::numeric, m.spent_minor), position = x.position
       FROM json_to_recordset(${p}::json) AS x(id text, status text, spent text, position text)
       WHERE m.id = x.id AND m.id = ANY(${ids}::text[]) AND m.position < x.position`;
  const moves = JSON.stringify([...latest].map(([id, v]) => ({ id, ...v, spent: v.spent ? JSON.stringify(v.spent) : undefined })));
  const ids = [...latest.keys()];
  // Prepared once per connection and table pair: planning them each batch cost a
  // tenth of a millisecond, under the log's lock.
  // Named by the mandates table alone (its authorizations table goes with it, live or
  // rebuilt): a name past PostgreSQL's 63 characters would be cut, and warned about.
  const name = (kind: string) => ({ name: `mandate_batch_${kind}:${t.mandates}` });
  if (auths.length > 0 && latest.size > 0) {
    // One statement for both (a spend's usual pair): they write different tables,
    // and the mandates inserted above are already visible to it.
    issued.push(tx.query(`WITH inserted AS (${insertAuths}) ${updateMandates('$2', '$3')}`, [JSON.stringify(auths), moves, ids], name('both_v4')));
  } else if (auths.length > 0) {
    issued.push(tx.query(insertAuths, [JSON.stringify(auths)], name('auths_v2')));
  } else if (latest.size > 0) {
    issued.push(tx.query(updateMandates('$1', '$2'), [moves, ids], name('moves_v3')));
  }
  // Observed below; a failure of one is the batch's failure.
  for (const q of issued) q.catch(() => {});
  await Promise.all(issued);
  for (const ev of cards) await mandateProjection.apply(tx, ev, t);
};

/** Card events read the mandate's row first; everything else goes out in the statements above. */
mandateProjection.pipelined = (events) => !events.some((e) => e.type === 'mandate.card_bound' || e.type === 'mandate.card_revoked');
