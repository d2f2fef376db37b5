import type { Queryable } from './db.ts';

// Settings of the database that make an acknowledged commit not durable: with
// fsync=off a crash can lose or corrupt anything; with synchronous_commit=off
// (or local, without a synchronous standby) a crash or a failover can lose
// the last commits already acknowledged. The service notices such a loss and
// heals (src/recovery.ts), but the writes are gone: it says so at start.

/** One warning line per setting that makes acknowledgements not durable (none when all are safe). */
export async function durabilityWarnings(db: Queryable): Promise<string[]> {
  const { rows } = await db.query<{ name: string; setting: string }>(`SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit')`);
  const setting = (name: string) => rows.find((r) => r.name === name)?.setting;
  const warnings: string[] = [];
  if (setting('fsync') === 'off') {
    warnings.push('the database runs with fsync=off: a crash can lose or corrupt acknowledged writes; run it with fsync=on (docs/deployment.md, "When the database goes backwards")');
  }
  if (setting('synchronous_commit') === 'off') {
    warnings.push('the database runs with synchronous_commit=off: a crash or failover can lose the last acknowledged writes; run it with synchronous_commit=on (docs/deployment.md, "When the database goes backwards")');
  }
  return warnings;
}
