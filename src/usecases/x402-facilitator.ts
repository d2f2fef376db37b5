import { isChecksummed } from '../adapters/chain/signature.ts';
import { Rejection } from '../eventstore/handler.ts';
import { isoText as TS } from '../postgres/iso-text.ts';
import type { Ports } from './context.ts';

// The x402 facilitator's other use cases (spec 4.15): reading a foreign
// authorization back, and the sandbox faucet that mints test USDC on the local
// chain. The execution is src/usecases/x402.ts.

export type ForeignAuthorizationRow = {
  id: string;
  kind: 'x402';
  signer: string;
  payee: string;
  nonce: string;
  value_atomic: string;
  amount_minor: number;
  asset: string | null;
  chain_id: number | null;
  network: string | null;
  status: 'verified' | 'executed' | 'rejected';
  mandate_id: string;
  execution_id: string | null;
  receipt_id: string | null;
  settlement_tx: string | null;
  reject_code: string | null;
  created_at: string;
};

/** One foreign authorization of the organization (not_found for another organization's, and for refusals that wrote no row). */
export async function getForeignAuthorization(ports: Pick<Ports, 'db'>, orgId: string, id: string): Promise<ForeignAuthorizationRow> {
  const { rows } = await ports.db.query<ForeignAuthorizationRow>(
    `SELECT id, 'x402' AS kind, signer, payee, nonce, value_atomic::text, amount_minor::int, asset, chain_id, network, status, mandate_id, execution_id, receipt_id, settlement_tx, reject_code, ${TS('created_at')} AS created_at
     FROM foreign_authorizations WHERE id = $1 AND org_id = $2`,
    [id, orgId],
  );
  if (!rows[0]) throw new Rejection('not_found', 'foreign authorization not found');
  return rows[0];
}

/** Mints test USDC to an address on the test network (test keys only); answers the transaction and the new balance. */
export async function mintTestUsdc(ports: Pick<Ports, 'x402'>, environment: 'live' | 'test', address: string, valueAtomic: string) {
  if (environment !== 'test') throw new Rejection('sandbox_funding_not_permitted', 'the faucet takes test keys only');
  const net = ports.x402?.test;
  if (!net) throw new Rejection('facilitator_unavailable', 'no test network is configured', { retriable: true });
  if (!isChecksummed(address)) throw new Rejection('malformed_authorization', 'address is not an EIP-55 checksummed address', { field: 'address' });
  const txHash = await net.settlement.mint(address as `0x${string}`, BigInt(valueAtomic));
  const balance = await net.settlement.balanceOf(address as `0x${string}`);
  return { address, value_atomic: valueAtomic, tx_hash: txHash, balance_atomic: balance.toString() };
}
