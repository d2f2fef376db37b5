import type { Db } from '../../postgres/db.ts';
import { migrate } from '../../postgres/schema.ts';

// One sender per facilitator account across every instance: a transaction is
// sent under an advisory lock on (chain, account), with the nonce taken as the
// larger of the last one this service used (kept in PostgreSQL) plus one and
// the chain's pending count. Instances then never send two transactions with
// one nonce ("nonce too low"), and an RPC node that is slow to count a
// just-sent transaction as pending cannot make them reuse one either.

/** Runs `send` with the nonce it must use, one at a time per account across instances. */
export type NonceGate = <T>(chainId: number, account: string, pending: () => Promise<number>, send: (nonce: number) => Promise<T>) => Promise<T>;

export async function migrateNonces(db: Db): Promise<void> {
  await migrate(db, (tx) => tx.query(`CREATE TABLE IF NOT EXISTS facilitator_nonces (
    chain_id bigint NOT NULL,
    account text NOT NULL,
    next_nonce bigint NOT NULL,
    PRIMARY KEY (chain_id, account)
  )`));
}

export function postgresNonceGate(db: Db): NonceGate {
  let ready: Promise<void> | undefined;
  return async (chainId, account, pending, send) => {
    ready ??= migrateNonces(db).catch((err) => {
      ready = undefined;
      throw err;
    });
    await ready;
    const key = account.toLowerCase();
    return db.transaction(async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`facilitator-nonce:${chainId}:${key}`]);
      const { rows } = await tx.query<{ n: string }>('SELECT next_nonce::text AS n FROM facilitator_nonces WHERE chain_id = $1 AND account = $2', [chainId, key]);
      const nonce = Math.max(Number(rows[0]?.n ?? 0), await pending());
      // A send that throws was not broadcast: the nonce stays free (the transaction rolls back).
      const result = await send(nonce);
      await tx.query(
        `INSERT INTO facilitator_nonces (chain_id, account, next_nonce) VALUES ($1, $2, $3)
         ON CONFLICT (chain_id, account) DO UPDATE SET next_nonce = GREATEST(facilitator_nonces.next_nonce, EXCLUDED.next_nonce)`,
        [chainId, key, nonce + 1],
      );
      return result;
    });
  };
}
