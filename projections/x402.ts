import { parseEvent } from '../events/index.ts';
import type { Projection } from '../src/projector/projection.ts';

// Read model of foreign authorizations (x402).

export const x402Projection: Projection = {
  name: 'x402',
  version: 1,
  tables: {
    foreign_authorizations: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY,
      org_id text NOT NULL,
      project_id text NOT NULL,
      signer text NOT NULL,
      payee text NOT NULL,
      nonce text NOT NULL,
      value_atomic numeric NOT NULL,
      amount_minor numeric NOT NULL,
      asset text,
      chain_id int,
      network text,
      status text NOT NULL,
      mandate_id text NOT NULL,
      mandate_key text NOT NULL,
      execution_id text,
      receipt_id text,
      settlement_tx text,
      reject_code text,
      created_at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    )`,
  },
  eventTypes: new Set(['x402.authorization_verified', 'x402.executed', 'x402.rejected', 'x402.settlement_unknown']),
  async apply(tx, event, t) {
    const e = parseEvent(event.type, event.data);
    const pos = event.position;
    switch (e.type) {
      case 'x402.authorization_verified': {
        const d = e.data;
        await tx.query(
          `INSERT INTO ${t.foreign_authorizations} (id, org_id, project_id, signer, payee, nonce, value_atomic, amount_minor, asset, chain_id, network, status, mandate_id, mandate_key, created_at, position)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'verified', $12, $13, $14, $15) ON CONFLICT (id) DO NOTHING`,
          [d.foreign_authorization_id, d.org_id, d.project_id, d.signer, d.payee, d.nonce, d.value_atomic, d.amount_minor, d.asset, d.chain_id, d.network, d.mandate_id, d.mandate_key, d.at, pos],
        );
        return;
      }
      case 'x402.executed':
        await tx.query(`UPDATE ${t.foreign_authorizations} SET status = 'executed', execution_id = $2, receipt_id = $3, settlement_tx = $4, position = $5 WHERE id = $1 AND position < $5`, [e.data.foreign_authorization_id, e.data.execution_id, e.data.receipt_id, e.data.tx_hash, pos]);
        return;
      case 'x402.rejected':
        await tx.query(`UPDATE ${t.foreign_authorizations} SET status = 'rejected', reject_code = $2, settlement_tx = coalesce($3, settlement_tx), position = $4 WHERE id = $1 AND position < $4`, [e.data.foreign_authorization_id, e.data.reject_code, e.data.tx_hash, pos]);
        return;
      case 'x402.settlement_unknown':
        await tx.query(`UPDATE ${t.foreign_authorizations} SET settlement_tx = $2, position = $3 WHERE id = $1 AND position < $3`, [e.data.foreign_authorization_id, e.data.tx_hash, pos]);
        return;
    }
  },
};
