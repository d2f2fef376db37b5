import { parseEvent } from '../events/index.ts';
import type { Projection } from '../src/projector/projection.ts';

// Read models of Pix: partner accounts, funding sources (the Pix wallets),
// the key cache, charges, receivements and devolutions. Balances are sums over
// receivement and devolution rows (keyed by end-to-end id and devolution id),
// never counters, so applying an event twice changes nothing.

export const pixProjection: Projection = {
  name: 'pix',
  version: 3,
  tables: {
    pix_accounts: (t) => `CREATE TABLE ${t} (
      consumer_id text PRIMARY KEY, org_id text NOT NULL, project_id text NOT NULL, account_id text NOT NULL, psp text NOT NULL,
      psp_account text NOT NULL, document text NOT NULL, document_type text NOT NULL, document_source text NOT NULL, opened_at timestamptz NOT NULL)`,
    pix_funding_sources: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY, consumer_id text NOT NULL, org_id text NOT NULL, project_id text NOT NULL, account_id text NOT NULL,
      currency text NOT NULL, status text NOT NULL, created_at timestamptz NOT NULL);
    CREATE INDEX ON ${t} (consumer_id)`,
    pix_contact_verifications: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY, consumer_id text NOT NULL, channel text NOT NULL, endpoint text NOT NULL, expires_at timestamptz NOT NULL, verified_at timestamptz, started_at timestamptz NOT NULL)`,
    pix_keys: (t) => `CREATE TABLE ${t} (
      consumer_id text NOT NULL, key text NOT NULL, key_type text NOT NULL, registered_at timestamptz NOT NULL, PRIMARY KEY (consumer_id, key))`,
    pix_charges: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY, org_id text NOT NULL, project_id text NOT NULL, consumer_id text NOT NULL, account_id text NOT NULL, psp text NOT NULL,
      wallet_id text NOT NULL, amount_minor numeric NOT NULL, currency text NOT NULL, txid text NOT NULL, kind text NOT NULL,
      transaction_id text, client_request_id text, status text NOT NULL, end_to_end_id text, expires_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL, settled_at timestamptz, br_code text, location text);
    CREATE INDEX ON ${t} (consumer_id, created_at, id); CREATE INDEX ON ${t} (account_id, txid)`,
    pix_receivements: (t) => `CREATE TABLE ${t} (
      psp text NOT NULL, end_to_end_id text NOT NULL, org_id text NOT NULL, project_id text NOT NULL, consumer_id text NOT NULL, account_id text NOT NULL,
      provider_transaction_type text NOT NULL, provider_transaction_id text, provider_amount text NOT NULL, received_minor numeric NOT NULL,
      initiation_type text, txid text, paid_at text NOT NULL, correlation text NOT NULL, charge_id text, source text NOT NULL,
      wallet_id text, credited_minor numeric, received_at timestamptz NOT NULL, PRIMARY KEY (psp, end_to_end_id));
    CREATE INDEX ON ${t} (consumer_id, received_at, end_to_end_id)`,
    pix_devolutions: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY, end_to_end_id text NOT NULL, consumer_id text NOT NULL, rtr_id text, amount_minor numeric NOT NULL,
      wallet_id text, status text NOT NULL, requested_at timestamptz NOT NULL);
    CREATE INDEX ON ${t} (end_to_end_id)`,
  },
  eventTypes: new Set([
    'pix.partner_account_opened', 'pix.funding_source_activated', 'pix.funding_source_deactivated', 'pix.contact_verification_started', 'pix.contact_verified',
    'pix.key_registered', 'pix.key_deleted', 'pix.keys_reconciled', 'pix.charge_created', 'pix.charge_settled', 'pix.received', 'pix.wallet_credited', 'pix.devolution_requested',
  ]),
  async apply(tx, event, t) {
    const e = parseEvent(event.type, event.data);
    switch (e.type) {
      case 'pix.partner_account_opened': {
        const d = e.data;
        await tx.query(`INSERT INTO ${t.pix_accounts} VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10) ON CONFLICT DO NOTHING`, [d.consumer_id, d.org_id, d.project_id, d.account_id, d.psp, d.psp_account, d.document, d.document_type, d.document_source, d.opened_at]);
        return;
      }
      case 'pix.funding_source_activated': {
        const d = e.data;
        await tx.query(`INSERT INTO ${t.pix_funding_sources} VALUES ($1,$2,$3,$4,$5,$6,'active',$7) ON CONFLICT (id) DO UPDATE SET status = 'active'`, [d.funding_source_id, d.consumer_id, d.org_id, d.project_id, d.account_id, d.currency, d.activated_at]);
        return;
      }
      case 'pix.funding_source_deactivated':
        await tx.query(`UPDATE ${t.pix_funding_sources} SET status = 'inactive' WHERE id = $1`, [e.data.funding_source_id]);
        return;
      case 'pix.contact_verification_started': {
        const d = e.data;
        await tx.query(`INSERT INTO ${t.pix_contact_verifications} VALUES ($1,$2,$3,$4,$5,NULL,$6) ON CONFLICT DO NOTHING`, [d.verification_id, d.consumer_id, d.channel, d.endpoint, d.expires_at, d.started_at]);
        return;
      }
      case 'pix.contact_verified':
        await tx.query(`UPDATE ${t.pix_contact_verifications} SET verified_at = $2 WHERE id = $1`, [e.data.verification_id, e.data.verified_at]);
        return;
      case 'pix.key_registered':
        await tx.query(`INSERT INTO ${t.pix_keys} VALUES ($1,$2,$3,$4) ON CONFLICT DO NOTHING`, [e.data.consumer_id, e.data.key, e.data.key_type, e.data.registered_at]);
        return;
      case 'pix.key_deleted':
        await tx.query(`DELETE FROM ${t.pix_keys} WHERE consumer_id = $1 AND key = $2`, [e.data.consumer_id, e.data.key]);
        return;
      case 'pix.keys_reconciled':
        if (e.data.removed.length) await tx.query(`DELETE FROM ${t.pix_keys} WHERE consumer_id = $1 AND key = ANY($2)`, [e.data.consumer_id, e.data.removed]);
        for (const a of e.data.added) await tx.query(`INSERT INTO ${t.pix_keys} VALUES ($1,$2,$3,$4) ON CONFLICT DO NOTHING`, [e.data.consumer_id, a.key, a.key_type, e.data.reconciled_at]);
        return;
      case 'pix.charge_created': {
        const d = e.data;
        await tx.query(
          `INSERT INTO ${t.pix_charges} (id, org_id, project_id, consumer_id, account_id, psp, wallet_id, amount_minor, currency, txid, kind, transaction_id, client_request_id, status, expires_at, created_at, br_code, location)
           VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,'pending',$14,$15,$16,$17) ON CONFLICT DO NOTHING`,
          [d.charge_id, d.org_id, d.project_id, d.consumer_id, d.account_id, d.psp, d.wallet_id, d.amount_minor, d.currency, d.txid, d.kind, d.transaction_id, d.client_request_id, d.expires_at, d.created_at, d.br_code ?? null, d.location ?? null],
        );
        return;
      }
      case 'pix.charge_settled':
        await tx.query(`UPDATE ${t.pix_charges} SET status = 'settled', end_to_end_id = $2, settled_at = $3 WHERE id = $1`, [e.data.charge_id, e.data.end_to_end_id, e.data.settled_at]);
        return;
      case 'pix.received': {
        const d = e.data;
        await tx.query(
          `INSERT INTO ${t.pix_receivements} (psp, end_to_end_id, org_id, project_id, consumer_id, account_id, provider_transaction_type, provider_transaction_id, provider_amount, received_minor, initiation_type, txid, paid_at, correlation, charge_id, source, received_at)
           VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17) ON CONFLICT DO NOTHING`,
          [d.psp, d.end_to_end_id, d.org_id, d.project_id, d.consumer_id, d.account_id, d.provider_transaction_type, d.provider_transaction_id, d.provider_amount, d.received_minor, d.initiation_type, d.txid, d.paid_at, d.correlation, d.charge_id, d.source, d.received_at],
        );
        return;
      }
      case 'pix.wallet_credited': {
        // The stream is pix_receivement-<psp>.<e2eid>: the psp is in its name.
        const psp = event.streamName.slice('pix_receivement-'.length).split('.')[0];
        await tx.query(`UPDATE ${t.pix_receivements} SET wallet_id = $3, credited_minor = $4 WHERE psp = $1 AND end_to_end_id = $2`, [psp, e.data.end_to_end_id, e.data.wallet_id, e.data.amount_minor]);
        return;
      }
      case 'pix.devolution_requested': {
        const d = e.data;
        await tx.query(`INSERT INTO ${t.pix_devolutions} VALUES ($1,$2,$3,$4,$5,$6,$7,$8) ON CONFLICT DO NOTHING`, [d.devolution_id, d.end_to_end_id, d.consumer_id, d.rtr_id, d.amount_minor, d.wallet_id, d.status, d.requested_at]);
        return;
      }
    }
  },
};

/**
 * The Pix wallets of a consumer (one per active or inactive Pix funding
 * source): credited by receivements, debited by devolutions. The consumer
 * wallet view adds these beside its mandate rows.
 */
export const PIX_WALLET_SQL = `
  SELECT fs.id AS funding_source_id, fs.currency, fs.status,
    (coalesce((SELECT sum(credited_minor) FROM pix_receivements r WHERE r.wallet_id = fs.id), 0)
     - coalesce((SELECT sum(amount_minor) FROM pix_devolutions d WHERE d.wallet_id = fs.id), 0))::text AS balance_minor
  FROM pix_funding_sources fs WHERE fs.consumer_id = $1 AND fs.org_id = $2 AND fs.project_id = $3 ORDER BY fs.created_at, fs.id`;
