import { parseEvent } from '../events/index.ts';
import type { Projection } from '../src/projector/projection.ts';

// Read model of bank consents and the statement lines imported through them.

export const bankConsentProjection: Projection = {
  name: 'bank_consent',
  version: 2,
  tables: {
    bank_consents: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY,
      org_id text NOT NULL,
      project_id text NOT NULL,
      consumer_id text NOT NULL,
      bank_id text NOT NULL,
      status text NOT NULL,
      scopes jsonb NOT NULL,
      authorisation_url text,
      bank_consent_id text,
      authorized_at timestamptz,
      consumed_at timestamptz,
      revoked_at timestamptz,
      expires_at timestamptz,
      token_expires_at timestamptz,
      wallet_id text,
      metadata jsonb NOT NULL DEFAULT '{}',
      created_at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (org_id, project_id, created_at);
    CREATE INDEX ON ${t} (consumer_id, created_at);
    CREATE INDEX ON ${t} (expires_at) WHERE status IN ('pending', 'authorised')`,
    bank_statement_lines: (t) => `CREATE TABLE ${t} (
      consent_id text NOT NULL,
      bank_transaction_id text NOT NULL,
      org_id text NOT NULL,
      wallet_id text,
      run_id text NOT NULL,
      amount_minor numeric NOT NULL,
      currency text NOT NULL,
      credit_debit text NOT NULL,
      description text NOT NULL,
      booked_at timestamptz NOT NULL,
      PRIMARY KEY (consent_id, bank_transaction_id)
    );
    CREATE INDEX ON ${t} (consent_id, booked_at, bank_transaction_id)`,
  },
  eventTypes: new Set(['bank_consent.initiated', 'bank_consent.authorised', 'bank_consent.revoked', 'bank_consent.expired', 'bank_consent.transactions_imported']),
  async apply(tx, event, t) {
    const e = parseEvent(event.type, event.data);
    const pos = event.position;
    switch (e.type) {
      case 'bank_consent.initiated': {
        const d = e.data;
        await tx.query(
          `INSERT INTO ${t.bank_consents} (id, org_id, project_id, consumer_id, bank_id, status, scopes, authorisation_url, bank_consent_id, expires_at, wallet_id, created_at, position)
           VALUES ($1, $2, $3, $4, $5, 'pending', $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (id) DO NOTHING`,
          [d.consent_id, d.org_id, d.project_id, d.consumer_id, d.bank_id, JSON.stringify(d.scopes), d.authorisation_url, d.bank_consent_id, d.expires_at, d.wallet_id, d.created_at, pos],
        );
        return;
      }
      case 'bank_consent.authorised':
        await tx.query(`UPDATE ${t.bank_consents} SET status = 'authorised', authorized_at = $2, token_expires_at = $3, position = $4 WHERE id = $1 AND position < $4`, [e.data.consent_id, e.data.authorized_at, e.data.token_expires_at, pos]);
        return;
      case 'bank_consent.revoked':
        await tx.query(`UPDATE ${t.bank_consents} SET status = 'revoked', revoked_at = $2, position = $3 WHERE id = $1 AND position < $3`, [e.data.consent_id, e.data.at, pos]);
        return;
      case 'bank_consent.expired':
        await tx.query(`UPDATE ${t.bank_consents} SET status = 'expired', position = $2 WHERE id = $1 AND position < $2`, [e.data.consent_id, pos]);
        return;
      case 'bank_consent.transactions_imported':
        await tx.query(
          `INSERT INTO ${t.bank_statement_lines} (consent_id, bank_transaction_id, org_id, wallet_id, run_id, amount_minor, currency, credit_debit, description, booked_at)
           SELECT $1, x.bank_transaction_id, $2, $3, $4, x.amount_minor::numeric, x.currency, x.credit_debit, x.description, x.booked_at
           FROM json_to_recordset($5::json) AS x(bank_transaction_id text, amount_minor text, currency text, credit_debit text, description text, booked_at timestamptz)
           ON CONFLICT DO NOTHING`,
          [e.data.consent_id, event.metadata.org_id, e.data.wallet_id, e.data.run_id, JSON.stringify(e.data.transactions)],
        );
        return;
    }
  },
};
