import type { Db, Queryable, Transaction } from './db.ts';

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

// A schema change that finds nothing to do must take no lock on a busy table.
// `ALTER TABLE … ADD COLUMN IF NOT EXISTS` takes an ACCESS EXCLUSIVE lock
// before it looks, and `CREATE INDEX IF NOT EXISTS` a SHARE lock: queued
// behind the table's open transactions, the request stops every later
// statement on the table, including ones those transactions' own process is
// waiting for, and PostgreSQL sees no deadlock. An instance starting beside
// busy ones then stalls them all (docs/decisions.md, "Migrations beside
// running instances"). So each runs only when the catalog says it is needed.

/** Adds the columns `table` lacks (name, definition), in one ALTER, only if one is missing. */
export async function addMissingColumns(tx: Queryable, table: string, columns: readonly (readonly [name: string, definition: string])[]): Promise<void> {
  const { rows } = await tx.query<{ attname: string }>('SELECT attname FROM pg_attribute WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped', [table]);
  const present = new Set(rows.map((r) => r.attname));
  const missing = columns.filter(([name]) => !present.has(name));
  if (missing.length === 0) return;
  await tx.query(`ALTER TABLE ${table} ${missing.map(([name, definition]) => `ADD COLUMN IF NOT EXISTS ${name} ${definition}`).join(', ')}`);
}

/** Runs `ddl` (a CREATE INDEX) only when no relation is named `name` yet. */
export async function createMissingIndex(tx: Queryable, name: string, ddl: string): Promise<void> {
  const { rows } = await tx.query<{ found: string | null }>('SELECT to_regclass($1)::text AS found', [name]);
  if (rows[0]?.found == null) await tx.query(ddl);
}
