import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import t, { type Test } from 'tap';
import { DuplicateEventId, WrongExpectedRevision } from '../../src/eventstore/port.ts';
import { formatPosition, PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { testDatabase } from '../helpers/db.ts';
import { until } from '../helpers/wait.ts';
import { ev } from './conformance.ts';
import { nodeArgs } from '../helpers/entry.ts';

// Properties of the Postgres log beyond the port's conformance suite: group
// commit, gapless positions under delayed commits, and crash atomicity.

const { url, db } = await testDatabase(t);
const store = await PostgresEventStore.open(db);
t.teardown(() => store.close());

async function assertGapless(t: Test) {
  const { rows } = await db.query<{ n: string; max: string | null; head: string }>(
    'SELECT count(*) AS n, max(position) AS max, (SELECT position FROM es_log_head) AS head FROM es_events',
  );
  const r = rows[0]!;
  t.equal(r.n, r.max ?? '0', 'positions 1..max with no gap');
  t.equal(r.head, r.max ?? '0', 'log head equals the last position');
}

t.test('group commit: mixed correct and stale expectations each get their own answer', async (t) => {
  const streams = Array.from({ length: 40 }, (_, i) => `gc-${i}-${randomUUID().slice(0, 6)}`);
  for (const s of streams) await store.appendToStream(s, [ev('test.base')], { expectedRevision: 'no_stream' });
  // Every stream gets one correct append (expects 0) and one stale one (expects 5), all at once.
  const calls = streams.flatMap((s) => [
    { s, ok: true, p: store.appendToStream(s, [ev('test.good'), ev('test.good')], { expectedRevision: 0n }) },
    { s, ok: false, p: store.appendToStream(s, [ev('test.stale')], { expectedRevision: 5n }) },
  ]);
  const settled = await Promise.allSettled(calls.map((c) => c.p));
  settled.forEach((r, i) => {
    const c = calls[i]!;
    if (c.ok) {
      t.equal(r.status, 'fulfilled', `correct append on ${c.s} landed`);
    } else {
      t.equal(r.status, 'rejected');
      const err = (r as PromiseRejectedResult).reason;
      t.ok(err instanceof WrongExpectedRevision && err.stream === c.s, 'its own WrongExpectedRevision');
    }
  });
  for (const s of streams) t.same((await store.readStream(s)).map((e) => e.type), ['test.base', 'test.good', 'test.good']);
  const { rows } = await db.query<{ n: string }>('SELECT count(DISTINCT position)::text AS n FROM es_events');
  t.ok(Number(rows[0]!.n) > 0);
  await assertGapless(t);
});

t.test('a duplicate event id fails alone, its batch neighbours land', async (t) => {
  const id = randomUUID();
  await store.appendToStream(`dup-${id}`, [{ ...ev('test.a'), id }]);
  const neighbours = Array.from({ length: 20 }, (_, i) => store.appendToStream(`dup-n-${i}-${id}`, [ev('test.n')]));
  const dup = store.appendToStream(`dup-other-${id}`, [{ ...ev('test.b'), id }]);
  const res = await Promise.allSettled([...neighbours, dup]);
  t.equal(res.slice(0, 20).filter((r) => r.status === 'fulfilled').length, 20);
  const last = res[20]!;
  t.ok(last.status === 'rejected' && last.reason instanceof DuplicateEventId);
  t.same(await store.readStream(`dup-other-${id}`), []);
  await assertGapless(t);
});

t.test('delayed commits inside the append transaction never let a reader skip an event', async (t) => {
  // Eight writers call es_append inside their own transactions and sleep a random
  // while before COMMIT, so commit order would differ from call order if positions
  // were not taken under the log-head lock.
  const prefix = `delay-${randomUUID().slice(0, 6)}`;
  const start = await store.headPosition();
  const ac = new AbortController();
  const seen: string[] = [];
  const sub = (async () => {
    for await (const item of store.subscribeToAll({ after: start, filter: { streamPrefixes: [prefix] }, signal: ac.signal })) {
      if (item.kind === 'event') seen.push(item.event.position);
      if (seen.length >= 800) break;
    }
  })();
  await Promise.all(
    Array.from({ length: 8 }, async (_, w) => {
      for (let i = 0; i < 100; i++) {
        await db.transaction(async (tx) => {
          await tx.query('SELECT * FROM es_append($1::text[], $2::bigint[], $3::int[], $4::int[], $5::int[], $6::uuid[], $7::text[], $8::json, $9::json, $10::text[], $11::bigint[], NULL, $12::text[], $13::bigint[], $14::text[], $15::text[])', [
            [`${prefix}-${w}`],
            ['-3'],
            [1],
            [1],
            [1],
            [randomUUID()],
            ['test.delayed'],
            JSON.stringify([{ w, i }]),
            JSON.stringify([{ org_id: 'org_t' }]),
            [null],
            [null],
            ['org_t'],
            [null],
            [null],
            [null],
          ]);
          await tx.query('SELECT pg_sleep($1)', [Math.random() * 0.004]);
        });
      }
    }),
  );
  const timer = setTimeout(() => ac.abort(), 30_000);
  await sub;
  clearTimeout(timer);
  t.equal(seen.length, 800);
  t.equal(new Set(seen).size, 800);
  t.ok(seen.every((p, i) => i === 0 || seen[i - 1]! < p), 'strictly increasing');
  await assertGapless(t);
});

t.test('killing the process mid-append leaves each append whole or absent', async (t) => {
  const child = spawn(process.execPath, [...nodeArgs('test/fixtures/append-forever.ts'), url], { stdio: ['ignore', 'pipe', 'inherit'] });
  const acked: string[] = [];
  let buf = '';
  await new Promise<void>((resolve) => {
    child.stdout.on('data', (chunk: Buffer) => {
      buf += chunk.toString();
      const lines = buf.split('\n');
      buf = lines.pop() ?? '';
      acked.push(...lines.filter(Boolean));
      if (acked.length >= 40) resolve();
    });
  });
  child.kill('SIGKILL');
  await new Promise((r) => child.on('exit', r));
  // Wait until the server has noticed the dead connections and rolled back what was in flight.
  await until(
    async () => (await db.query<{ n: string }>(`SELECT count(*)::text AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL`)).rows[0]!.n === '0',
    'the killed writer’s transactions to end',
  );
  const { rows } = await db.query<{ stream_name: string; n: string }>(
    `SELECT stream_name, count(*)::text AS n FROM es_events WHERE stream_name LIKE 'kill-%' GROUP BY stream_name`,
  );
  t.ok(rows.length >= acked.length, 'every acknowledged append is there');
  t.ok(rows.every((r) => r.n === '50'), 'no stream holds part of an append');
  const present = new Set(rows.map((r) => r.stream_name));
  t.ok(acked.every((s) => present.has(s)), 'acknowledged appends survived the kill');
  await assertGapless(t);
  t.equal(await store.headPosition(), formatPosition(BigInt((await db.query<{ m: string }>('SELECT max(position)::text AS m FROM es_events')).rows[0]!.m)));
});
