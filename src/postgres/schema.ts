import type { Db, Transaction } from './db.ts';

// Every schema change (CREATE … IF NOT EXISTS, ALTER … ADD COLUMN IF NOT
// EXISTS) runs here: in a transaction holding one advisory lock shared by
// every instance. Without it, instances starting together on an empty
// database race on the same DDL (PostgreSQL answers one of them with a
// unique violation on pg_type, or "already exists") and that instance dies
// at start. With it, the first creates, the others wait and find it done.

const SCHEMA_LOCK = 'agent-ledger:schema';

export async function migrate(db: Db, fn: (tx: Transaction) => Promise<unknown>): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [SCHEMA_LOCK]);
    await fn(tx);
  });
}
