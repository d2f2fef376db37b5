import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { openDb, type Db } from '../../src/postgres/db.ts';
import { startEmbeddedPostgres, type EmbeddedServer } from '../../src/postgres/embedded.ts';

// Every test file gets its own database on the run's embedded PostgreSQL
// (started by test/run.ts, which `npm test` runs). A file run alone starts a
// server of its own. A database asked for with `schema: true` (a ledger's)
// is copied from the run's schema template when the run made one: the
// service's tables, functions and indexes, every table empty, as migrating
// an empty database leaves them before its seed rows (which the stores and
// the read side insert again, idempotently, when they open on it). The
// migrations still run on it and find nothing to do.

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

/** The run's schema template (test/run.ts), named to the files through the environment. */
export const TEMPLATE_ENV = 'TEST_PG_TEMPLATE';

/** What testDatabase made, by its teardown: how the template is kept instead of dropped. */
const made = new WeakMap<() => unknown, { name: string; close(): Promise<void> }>();

/**
 * A fresh database; dropped (and a private server stopped) when `t` ends.
 * `schema: true` starts it from the run's schema template, if any (a
 * database the service's migrations will run on anyway); otherwise it is
 * empty, as `CREATE DATABASE` makes it.
 */
export async function testDatabase(t: Teardown, opts: { poolMax?: number; schema?: boolean } = {}): Promise<TestDatabase> {
  const admin = await adminUrl();
  const name = `t_${randomBytes(6).toString('hex')}`;
  const template = opts.schema ? process.env[TEMPLATE_ENV] : undefined;
  const client = new pg.Client({ connectionString: admin.url });
  await client.connect();
  // FILE_COPY copies the template's files: 0.03 s of the server's CPU a database, against 0.23 s for
  // PostgreSQL's default (WAL_LOG, every page written again through the WAL), hundreds of times a run.
  await client.query(`CREATE DATABASE ${name}${template ? ` TEMPLATE ${pg.escapeIdentifier(template)}` : ''} STRATEGY FILE_COPY`);
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
  made.set(drop, { name, close: () => db.close().catch(() => {}) });
  t.teardown(drop);
  return { url: url.toString(), db, drop };
}

/**
 * Makes the schema template `template` on the server at `adminUrl`: `build`
 * opens what a test opens on a fresh database (the migrations run), then
 * everything it opened is closed, the database is kept under the template's
 * name and its tables are emptied (sequences restarted).
 */
export async function makeSchemaTemplate(adminUrl: string, template: string, build: (t: Teardown) => Promise<unknown>): Promise<void> {
  const fns: (() => unknown)[] = [];
  await build({ teardown: (fn) => void fns.push(fn) });
  let kept: string | undefined;
  // Last registered first, as tap runs them; testDatabase's own drop only closes its pool here.
  for (const fn of fns.reverse()) {
    const db = made.get(fn);
    if (!db) await fn();
    else if (kept) throw new Error('the schema template is built on one database');
    else {
      await db.close();
      kept = db.name;
    }
  }
  if (!kept) throw new Error('the schema template build opened no test database');
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(template)} WITH (FORCE)`);
    await admin.query(`ALTER DATABASE ${kept} RENAME TO ${pg.escapeIdentifier(template)}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${template}`;
  const c = new pg.Client({ connectionString: url.toString() });
  await c.connect();
  try {
    const { rows } = await c.query<{ t: string }>(`SELECT format('%I.%I', schemaname, tablename) AS t FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')`);
    if (rows.length) await c.query(`TRUNCATE ${rows.map((r) => r.t).join(', ')} RESTART IDENTITY`);
  } finally {
    await c.end();
  }
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
