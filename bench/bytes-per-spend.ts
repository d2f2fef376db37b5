import { generateSigningKey } from '../src/audit/note.ts';
import { Sealer } from '../src/audit/sealer.ts';
import { PostgresEventStore } from '../src/eventstore/postgres.ts';
import { openDb } from '../src/postgres/db.ts';
import { startReadSide } from '../src/readside.ts';
import { benchPostgres } from './harness.ts';
import { spendApp } from './spend-app.ts';

// bench/bytes-per-spend: the bytes a durable PostgreSQL stores per
// acknowledged spend (issue 57's goal: <= 2 950 B), measured from outside:
// pg_total_relation_size (table, TOAST and indexes) of every table before and
// after N sequential spends through the app, once the read side has caught
// up, divided by N. Grouped as the issue counts them: the log (es_events), the
// audit tables (audit_*), and every other table.
// Three databases in one run: the audit chain in version 1 (an entry event per
// fact), in version 2 (each fact carries its link, AUDIT_FORMAT=2), then the
// chain off (WITHOUT_AUDIT_CHAIN's experiment: no entry sealed), the floor the
// chain's bytes are measured against.
// Run: npm run bench:bytes-per-spend   (SPENDS=3000)

const SPENDS = Number(process.env.SPENDS ?? '3000');

type Sizes = Map<string, number>;

async function sizes(db: ReturnType<typeof openDb>): Promise<Sizes> {
  const { rows } = await db.query<{ name: string; bytes: string }>(
    `SELECT c.relname AS name, pg_total_relation_size(c.oid)::text AS bytes FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.relkind IN ('r', 'p') AND n.nspname = current_schema()`,
  );
  return new Map(rows.map((r) => [r.name, Number(r.bytes)]));
}

const group = (table: string) => (table === 'es_events' ? 'the log (es_events)' : table.startsWith('audit_') ? 'audit tables' : 'other tables');

async function measure(pg: Awaited<ReturnType<typeof benchPostgres>>, name: string, format: 1 | 2 = 1): Promise<Map<string, number>> {
  const db = openDb(await pg.database(name), { max: 10 });
  const store = await PostgresEventStore.open(db);
  const readSide = await startReadSide(db, store, { signingKey: generateSigningKey('bench'), origin: 'agent-ledger/audit', format }, undefined, { inline: true });
  try {
    const { app, spend } = await spendApp(db, store, readSide);
    for (let i = 0; i < 50; i++) await spend();
    await readSide.waitFor(await store.headPosition(), 60_000);
    const before = await sizes(db);
    for (let i = 0; i < SPENDS; i++) {
      const r = await spend();
      if (r.statusCode !== 201) throw new Error(r.body);
    }
    await readSide.waitFor(await store.headPosition(), 60_000);
    const after = await sizes(db);
    await app.close();
    const per = new Map<string, number>();
    for (const [table, bytes] of after) {
      const d = (bytes - (before.get(table) ?? 0)) / SPENDS;
      if (d !== 0) per.set(table, d);
    }
    return per;
  } finally {
    await readSide.stop();
    await store.close();
    await db.close();
  }
}

function print(title: string, per: Map<string, number>): number {
  const total = [...per.values()].reduce((a, b) => a + b, 0);
  console.log(`\n${title}: ${total.toFixed(0)} B per acknowledged spend`);
  const groups = new Map<string, number>();
  for (const [t, b] of per) groups.set(group(t), (groups.get(group(t)) ?? 0) + b);
  for (const [g, b] of [...groups].sort((a, b) => b[1] - a[1])) console.log(`  ${g.padEnd(24)} ${b.toFixed(0).padStart(6)} B`);
  for (const [t, b] of [...per].sort((a, b) => b[1] - a[1])) console.log(`    ${t.padEnd(36)} ${b.toFixed(0).padStart(6)} B`);
  return total;
}

const pg = await benchPostgres();
try {
  console.log(`bench/bytes-per-spend: ${SPENDS} sequential spends on one mandate, durable embedded PostgreSQL, sizes once the read side caught up`);
  const chain = print('the audit chain on, version 1 (an entry event per fact)', await measure(pg, 'bytes_chain'));
  const v2 = print('the audit chain on, version 2 (each fact carries its link; AUDIT_FORMAT=2)', await measure(pg, 'bytes_chain_v2', 2));
  // The chain off, in this process only, for the second database (bench/http-command's WITHOUT_AUDIT_CHAIN).
  Sealer.prototype.sealInline = async () => ({ written: [], forget: () => {}, landed: () => {}, alongside: false });
  const off = print('the audit chain off (floor)', await measure(pg, 'bytes_off'));
  console.log(`\nthe chain's share, version 1: ${(chain - off).toFixed(0)} B per spend (${(chain / off).toFixed(2)}x of the floor); version 2: ${(v2 - off).toFixed(0)} B (${(v2 / off).toFixed(2)}x)`);
  console.log(`version 2 / version 1: ${(v2 / chain).toFixed(2)}x; goal (issue 57) <= 2950 B with the chain: ${v2 <= 2950 ? 'met' : 'NOT met'} (${v2.toFixed(0)} B)`);
} finally {
  await pg.stop();
}
