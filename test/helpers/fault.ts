import type { Queryable } from '../../src/postgres/db.ts';

// A fault at the server: writes of a kind to a table are refused with a message
// while the fault is on (it starts on). Real PostgreSQL refusing a real
// statement, as a constraint or a full disk would.

export type ServerFault = { off(): Promise<void>; remove(): Promise<void> };

/** `writes`: the trigger's events, e.g. 'UPDATE' or 'INSERT OR UPDATE'. */
export async function serverFault(db: Queryable, table: string, writes: string, message: string): Promise<ServerFault> {
  const name = `fault_${table}`;
  await db.query(`CREATE TABLE ${name} (active boolean NOT NULL); INSERT INTO ${name} VALUES (true)`);
  await db.query(`CREATE FUNCTION refuse_${table}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF (SELECT active FROM ${name}) THEN RAISE EXCEPTION '${message}'; END IF; RETURN NEW; END $$`);
  await db.query(`CREATE TRIGGER refuse_${table} BEFORE ${writes} ON ${table} FOR EACH ROW EXECUTE FUNCTION refuse_${table}()`);
  return {
    off: () => db.query(`UPDATE ${name} SET active = false`).then(() => undefined),
    remove: () => db.query(`DROP TRIGGER IF EXISTS refuse_${table} ON ${table}`).then(() => undefined),
  };
}
