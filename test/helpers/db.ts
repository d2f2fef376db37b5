import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { openDb, type Db } from '../../src/postgres/db.ts';
import { startEmbeddedPostgres, type EmbeddedServer } from '../../src/postgres/embedded.ts';

// Every test file gets its own database on the run's embedded PostgreSQL
// (started by test/run.ts). A file run alone starts a server of its own.

let own: Promise<{ server: EmbeddedServer; dir: string }> | undefined;
let openCount = 0;

async function adminUrl(): Promise<{ url: string; stop?: () => Promise<void> }> {
  const shared = process.env.TEST_PG_ADMIN_URL;
  if (shared) return { url: shared };
  own ??= (async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ledger-test-'));
    await fs.chmod(dir, 0o755);
    return { server: await startEmbeddedPostgres({ dataDir: dir, durable: false }), dir };
  })();
  const { server, dir } = await own;
  openCount++;
  return {
    url: server.adminUrl,
    stop: async () => {
      if (--openCount > 0) return;
      own = undefined;
      await server.stop();
      await fs.rm(dir, { recursive: true, force: true });
    },
  };
}

export type TestDatabase = { url: string; db: Db; drop(): Promise<void> };

type Teardown = { teardown(fn: () => unknown): void };

/**
 * The pools' size when a test does not choose one. TEST_POOL_MAX=1 runs the
 * suites on pools of one connection, where any transaction that waits for a
 * second connection of its own pool never finishes (docs/decisions.md, "An
 * append transaction waits for nothing outside itself").
 */
export const testPoolMax = (fallback: number): number => {
  const n = Number(process.env.TEST_POOL_MAX);
  return Number.isInteger(n) && n > 0 ? n : fallback;
};

/** A fresh database; dropped (and a private server stopped) when `t` ends. */
export async function testDatabase(t: Teardown, opts: { poolMax?: number } = {}): Promise<TestDatabase> {
  const admin = await adminUrl();
  const name = `t_${randomBytes(6).toString('hex')}`;
  const client = new pg.Client({ connectionString: admin.url });
  await client.connect();
  await client.query(`CREATE DATABASE ${name}`);
  await client.end();
  const url = new URL(admin.url);
  url.pathname = `/${name}`;
  const db = openDb(url.toString(), { max: opts.poolMax ?? testPoolMax(20) });
  let dropped = false;
  const drop = async () => {
    if (dropped) return;
    dropped = true;
    await db.close().catch(() => {});
    const c = new pg.Client({ connectionString: admin.url });
    await c.connect();
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await c.end();
    await admin.stop?.();
  };
  t.teardown(drop);
  return { url: url.toString(), db, drop };
}

/**
 * Two Postgres event stores on one fresh database, each with its own pool (and
 * so its own caches and local tail): two service processes, as far as the log
 * can tell. Closed when `t` ends.
 */
export async function twoStores(t: Teardown): Promise<{ db: Db; storeA: PostgresEventStore; storeB: PostgresEventStore }> {
  const { url, db } = await testDatabase(t);
  const dbB = openDb(url, { max: testPoolMax(5) });
  const storeA = await PostgresEventStore.open(db);
  const storeB = await PostgresEventStore.open(dbB);
  t.teardown(async () => {
    await storeA.close();
    await storeB.close();
    await dbB.close();
  });
  return { db, storeA, storeB };
}
