import t from 'tap';
import { AuditVerifier } from '../../src/audit/health.ts';
import { migrateTree } from '../../src/audit/tree.ts';
import { migrateCheckpoints } from '../../src/projector/checkpoints.ts';
import { migrateWebhooks } from '../../src/reactors/webhooks.ts';
import { migrateConsent } from '../../src/usecases/oauth-consent.ts';
import { testDatabase } from '../helpers/db.ts';

// An instance that starts beside running ones runs every migration again on
// a schema that is already up to date. It must take no lock a writer's open
// transaction holds up: a queued ALTER TABLE or CREATE INDEX stops every later
// statement on the table, including ones the writer's own process waits for,
// and the instances hang without PostgreSQL seeing a deadlock (found in the
// rolling-restart test: an ALTER TABLE waiting, every statement behind it
// waiting, one transaction idle).

const migrations = (db: Parameters<typeof migrateTree>[0]) => [migrateCheckpoints(db), migrateTree(db), AuditVerifier.migrate(db), migrateWebhooks(db), migrateConsent(db)];
const tables = ['checkpoints', 'audit_chain_state', 'audit_verification', 'webhook_deliveries', 'webhook_attempts', 'oauth_consent_requests'];

t.test('migrations on an up-to-date schema wait for no writer', async (t) => {
  const { db } = await testDatabase(t);
  for (const m of migrations(db)) await m;
  // A writer's transaction, open on every table the migrations touch (the lock every INSERT and UPDATE takes).
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let holding!: () => void;
  const held = new Promise<void>((r) => (holding = r));
  let writerPid = 0;
  const writer = db.transaction(async (tx) => {
    writerPid = (await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    await tx.query(`LOCK TABLE ${tables.join(', ')} IN ROW EXCLUSIVE MODE`);
    holding();
    await released;
  });
  try {
    await held;
    let done = false;
    const again = Promise.all(migrations(db)).then(() => (done = true));
    again.catch(() => {});
    // Either the migrations finish, or one of their statements is seen waiting for a lock.
    let waiting = 0;
    while (!done) {
      // Sessions held up by the writer's: not the run's other files on the same server (test/run.ts), nor the
      // migrations queued on their own schema lock (src/postgres/schema.ts) behind one another.
      waiting = Number((await db.query<{ n: string }>('SELECT count(*)::text AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [writerPid])).rows[0]!.n);
      if (waiting > 0) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    t.equal(waiting, 0, 'no statement of the migrations waited for the writer');
    t.ok(done, 'the migrations finished while the writer held its transaction open');
    release();
    await again;
  } finally {
    release();
    await writer;
  }
  // A column that is missing is still added.
  await db.query('ALTER TABLE checkpoints DROP COLUMN applied_position');
  await migrateCheckpoints(db);
  const { rows } = await db.query<{ n: string }>(`SELECT count(*)::text AS n FROM pg_attribute WHERE attrelid = 'checkpoints'::regclass AND attname = 'applied_position' AND NOT attisdropped`);
  t.equal(rows[0]!.n, '1', 'a missing column is added');
  await db.query('DROP INDEX webhook_deliveries_due');
  await migrateWebhooks(db);
  t.ok((await db.query<{ r: string | null }>(`SELECT to_regclass('webhook_deliveries_due')::text AS r`)).rows[0]!.r, 'a missing index is created');
});
