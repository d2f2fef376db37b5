import { randomUUID } from 'node:crypto';
import { PostgresEventStore } from '../src/eventstore/postgres.ts';
import { openDb } from '../src/postgres/db.ts';
import { benchPostgres, FLOOR_SQL } from './harness.ts';

// bench/append-floor: what one group-commit batch of 16 one-event appends costs
// on this machine, sequentially, against the floor of any design that orders
// the log with a lock held through COMMIT: lock the head row, insert 16 rows
// into a table shaped like es_events (same indexes), move the head, NOTIFY,
// commit (one WAL flush). Beside them, a plain 16-row insert and a one-row
// autocommit insert. 16 / floor is the most a serial log can reach with a
// closed loop of 16 writers (docs/performance.md).
// Run: npx tsx bench/append-floor.ts   (ROUNDS=800)

const ROUNDS = Number(process.env.ROUNDS ?? '800');
const N = 16;
const pgServer = await benchPostgres();
const payload = JSON.stringify({ amount_minor: '1250', currency: 'BRL', merchant: 'pix:merchant@example.com', note: 'x'.repeat(120) });
const meta = JSON.stringify({ org_id: 'org_bench' });
try {
  const db = openDb(await pgServer.database('bench_floor'), { max: 4 });
  const store = await PostgresEventStore.open(db);
  await db.query('CREATE TABLE raw_events (id bigserial PRIMARY KEY, stream text NOT NULL, type text NOT NULL, data json NOT NULL)');
  await db.query(FLOOR_SQL);
  const batch = (i: number) => [Array.from({ length: N }, (_, k) => `s-${i}-${k}`), Array.from({ length: N }, () => randomUUID()), Array(N).fill('bench.appended'), Array(N).fill(payload), Array(N).fill(meta)];
  const scenarios: [string, number, (i: number) => Promise<unknown>][] = [
    ['raw one-row insert (autocommit)', 1, () => db.query('INSERT INTO raw_events (stream, type, data) VALUES ($1, $2, $3)', ['s', 'bench.appended', payload])],
    [`raw ${N}-row insert (autocommit)`, N, () => db.query('INSERT INTO raw_events (stream, type, data) SELECT * FROM unnest($1::text[], $2::text[], $3::json[])', [Array(N).fill('s'), Array(N).fill('bench.appended'), Array(N).fill(payload)])],
    [`floor: lock, ${N} rows, head, NOTIFY`, N, (i) => db.query('SELECT floor_append($1, $2, $3, $4, $5)', batch(i))],
    [`es_append, ${N} appends (SQL only)`, N, (i) => {
      const [s, ids, t, d, m] = batch(i);
      // The statement the store sends (PostgresEventStore.APPEND_SQL): no guard, no link, the log's head as known.
      return db.query(PostgresEventStore.APPEND_SQL, [s, Array(N).fill('-3'), Array(N).fill(1), Array.from({ length: N }, (_, k) => k + 1), Array(N).fill(1), ids, t, `[${(d as string[]).join(',')}]`, `[${(m as string[]).join(',')}]`, Array(N).fill(null), Array(N).fill(null), null, Array(N).fill('org_bench'), Array(N).fill(null), Array(N).fill(null), Array(N).fill(null), '0'], { name: 'bench_es_append' });
    }],
    [`store: ${N} concurrent appendToStream`, N, (i) => Promise.all(Array.from({ length: N }, (_, k) => store.appendToStream(`st-${i}-${k}`, [{ type: 'bench.appended', data: JSON.parse(payload), metadata: { org_id: 'org_bench' } }])))],
  ];
  console.log(`\nbench/append-floor: ${ROUNDS} sequential rounds each, durable embedded PostgreSQL\n`);
  const p50s: number[] = [];
  for (const [name, events, run] of scenarios) {
    for (let i = 0; i < 50; i++) await run(-1 - i);
    const ts: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const t0 = performance.now();
      await run(i);
      ts.push(performance.now() - t0);
    }
    ts.sort((a, b) => a - b);
    const p50 = ts[ts.length >> 1]!;
    p50s.push(p50);
    console.log(`${name.padEnd(40)} p50 ${p50.toFixed(3).padStart(7)} ms   ${((events / p50) * 1000).toFixed(0).padStart(7)} events/s (${events} per round, one after another)`);
  }
  console.log(`\nfloor / one-row autocommit insert        ${(p50s[2]! / p50s[0]!).toFixed(2)}x the time for ${N}x the events`);
  console.log(`store round / floor                      ${(p50s[4]! / p50s[2]!).toFixed(2)}x`);
  await store.close();
  await db.close();
} finally {
  await pgServer.stop();
}
