import type { Db } from '../../postgres/db.ts';
import { addMissingColumns, migrate } from '../../postgres/schema.ts';

// One sender per facilitator account across every instance: a transaction is
// sent under an advisory lock on (chain, account), with the nonce taken as the
// larger of the last one this service used (kept in PostgreSQL) plus one and
// the chain's pending count. Instances then never send two transactions with
// one nonce ("nonce too low"), and an RPC node that is slow to count a
// just-sent transaction as pending cannot make them reuse one either.
//
// A chain can also go backwards: a local chain restarted empty, or restored
// from a state file older than its last blocks. The remembered nonce is then
// ahead of the chain, and a transaction sent with it waits forever for the gap
// before it. So the gate also remembers the chain it sent on (the genesis
// block's hash and the highest block seen); a different genesis or a lower
// height is a reset: the nonce is taken from the chain again, and `onReset`
// is told (the runtime opens an incident naming the settlements whose
// transactions the chain no longer holds).

/** Where a chain stands: its genesis block's hash and its latest block number. */
export type ChainHead = { genesis: string; height: number };

/** A chain found behind what the service saw: what was remembered, what the chain says now. */
export type ChainReset = { chainId: number; account: string; previous: ChainHead; current: ChainHead; rememberedNonce: number; chainNonce: number };

/** What the gate asks of the chain: the account's pending transaction count, and (to notice a reset) the chain's head. */
export type ChainView = { pending: () => Promise<number>; head?: () => Promise<ChainHead> };

/** Runs `send` with the nonce it must use, one at a time per account across instances. */
export type NonceGate = <T>(chainId: number, account: string, chain: ChainView, send: (nonce: number) => Promise<T>) => Promise<T>;

export async function migrateNonces(db: Db): Promise<void> {
  await migrate(db, async (tx) => {
    await tx.query(`CREATE TABLE IF NOT EXISTS facilitator_nonces (
      chain_id bigint NOT NULL,
      account text NOT NULL,
      next_nonce bigint NOT NULL,
      PRIMARY KEY (chain_id, account)
    )`);
    await addMissingColumns(tx, 'facilitator_nonces', [
      ['genesis_hash', 'text'],
      ['height', 'bigint'],
    ]);
  });
}

export function postgresNonceGate(db: Db, opts: { onReset?: (r: ChainReset) => void } = {}): NonceGate {
  let ready: Promise<void> | undefined;
  return async (chainId, account, chain, send) => {
    ready ??= migrateNonces(db).catch((err) => {
      ready = undefined;
      throw err;
    });
    await ready;
    const key = account.toLowerCase();
    let reset: ChainReset | undefined;
    const result = await db.transaction(async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`facilitator-nonce:${chainId}:${key}`]);
      const { rows } = await tx.query<{ n: string; genesis: string | null; height: string | null }>('SELECT next_nonce::text AS n, genesis_hash AS genesis, height::text AS height FROM facilitator_nonces WHERE chain_id = $1 AND account = $2', [chainId, key]);
      const row = rows[0];
      const head = chain.head ? await chain.head() : undefined;
      const pending = await chain.pending();
      const remembered = Number(row?.n ?? 0);
      if (head && row?.genesis && row.height !== null && (row.genesis !== head.genesis || head.height < Number(row.height))) {
        reset = { chainId, account: key, previous: { genesis: row.genesis, height: Number(row.height) }, current: head, rememberedNonce: remembered, chainNonce: pending };
      }
      const nonce = reset ? pending : Math.max(remembered, pending);
      // A send that throws was not broadcast: the nonce stays free (the transaction rolls back).
      const sent = await send(nonce);
      // After a reset the chain's count replaces the remembered one; otherwise it only grows.
      await tx.query(
        `INSERT INTO facilitator_nonces (chain_id, account, next_nonce, genesis_hash, height) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (chain_id, account) DO UPDATE SET
           next_nonce = CASE WHEN $6 THEN EXCLUDED.next_nonce ELSE GREATEST(facilitator_nonces.next_nonce, EXCLUDED.next_nonce) END,
           genesis_hash = coalesce(EXCLUDED.genesis_hash, facilitator_nonces.genesis_hash),
           height = CASE WHEN $6 OR facilitator_nonces.height IS NULL THEN EXCLUDED.height ELSE GREATEST(facilitator_nonces.height, EXCLUDED.height) END`,
        [chainId, key, nonce + 1, head?.genesis ?? null, head?.height ?? null, reset !== undefined],
      );
      return sent;
    });
    if (reset) opts.onReset?.(reset);
    return result;
  };
}
