import { getPostgreSQLEventStore } from '@event-driven-io/emmett-postgresql';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { genesisHash } from '../src/audit/chain.ts';
import { ChainLinker } from '../src/audit/linker.ts';
import type { NewEvent } from '../src/eventstore/port.ts';
import { PostgresEventStore } from '../src/eventstore/postgres.ts';
import { openDb } from '../src/postgres/db.ts';
import { bareGroupCommit, benchPostgres, FLOOR_SQL, benchSeconds, closedLoop, printTable, ratio, type LoadResult } from './harness.ts';
import { ESDB_DISCLAIMER, esdbStoreForBench, storeArg } from './esdb.ts';

// bench/append: events/s appending one event per call, against the same
// durable embedded PostgreSQL in one run:
//   baseline: raw single-row INSERT (autocommit), 1 and 16 connections
//   ceilings, the same 16 writers through a bare group commit: one multi-row
//     INSERT per batch (no order, no revisions); the floor of a lock-ordered
//     log (lock the head, insert at its positions, move it, NOTIFY), no revisions
//   Emmett's PostgreSQL event store, 1 and 16 writers
//   our Postgres adapter, 1 and 16 writers
//   the same with the organization's audit chain in version 2: each event
//     linked into the chain by the store's writer in its own append
//     (docs/audit-chain.md, "Version 2"), where version 1 seals it afterwards
// Run: npm run bench:append   (BENCH_SECONDS=5 by default per scenario)
// `-- --store esdb` adds our EventStoreDB adapter through the official client
// (against ESDB_URL, else the protocol double on loopback).

const seconds = benchSeconds();
const pgServer = await benchPostgres();
const payload = { amount_minor: '1250', currency: 'BRL', merchant: 'pix:merchant@example.com', note: 'x'.repeat(120) };
const results: Record<string, LoadResult> = {};

try {
  // Baseline: raw INSERT.
  const rawUrl = await pgServer.database('bench_raw');
  const rawPool = new pg.Pool({ connectionString: rawUrl, max: 16 });
  await rawPool.query('CREATE TABLE raw_events (id bigserial PRIMARY KEY, stream text NOT NULL, type text NOT NULL, data jsonb NOT NULL)');
  for (const n of [1, 16]) {
    results[`raw${n}`] = await closedLoop(`raw INSERT, ${n} conn`, n, seconds, async (w) => {
      await rawPool.query('INSERT INTO raw_events (stream, type, data) VALUES ($1, $2, $3)', [`s-${w}`, 'bench.appended', JSON.stringify(payload)]);
      return 1;
    });
  }
  // Ceilings, the same 16 writers through a bare group commit (bench/harness.ts):
  // one multi-row INSERT per batch with no order at all; then the floor of a
  // lock-ordered log (head row locked, rows at its positions, head moved,
  // NOTIFY: FLOOR_SQL, shared with bench/append-floor), with no revision checked.
  await rawPool.query(FLOOR_SQL);
  const rawPayload = JSON.stringify(payload);
  const bare = bareGroupCommit<string>((rows) =>
    rawPool.query('INSERT INTO raw_events (stream, type, data) SELECT s, $2, d FROM unnest($1::text[], $3::jsonb[]) AS x(s, d)', [rows.map((_, i) => `s-${i}`), 'bench.appended', rows]),
  );
  results.ceiling16 = await closedLoop('ceiling: bare group commit, 16 writers', 16, seconds, async () => {
    await bare(rawPayload);
    return 1;
  });
  const meta = JSON.stringify({ org_id: 'org_bench' });
  const floor = bareGroupCommit<string>((rows) =>
    rawPool.query('SELECT floor_append($1, $2, $3, $4, $5)', [rows.map((_, i) => `f-${i}`), rows.map(() => randomUUID()), rows.map(() => 'bench.appended'), rows, rows.map(() => meta)]),
  );
  results.floor16 = await closedLoop('floor: lock-ordered group commit, 16 writers', 16, seconds, async () => {
    await floor(rawPayload);
    return 1;
  });
  await rawPool.end();

  // Emmett.
  const emmettUrl = await pgServer.database('bench_emmett');
  const emmettPool = new pg.Pool({ connectionString: emmettUrl, max: 16 });
  const emmett = getPostgreSQLEventStore(emmettUrl, { connectionOptions: { pool: emmettPool } } as never);
  await emmett.schema.migrate();
  for (const n of [1, 16]) {
    results[`emmett${n}`] = await closedLoop(`Emmett, ${n} writer${n > 1 ? 's' : ''}`, n, seconds, async (w) => {
      await emmett.appendToStream(`bench-${n}-${w}`, [{ type: 'bench.appended', data: payload }]);
      return 1;
    });
  }
  await emmett.close();
  await emmettPool.end().catch(() => {});

  // Ours.
  const oursUrl = await pgServer.database('bench_ours');
  const db = openDb(oursUrl, { max: 16 });
  const store = await PostgresEventStore.open(db);
  for (const n of [1, 16]) {
    results[`ours${n}`] = await closedLoop(`ours, ${n} writer${n > 1 ? 's' : ''}`, n, seconds, async (w) => {
      await store.appendToStream(`bench-${n}-${w}`, [{ type: 'bench.appended', data: payload, metadata: { org_id: 'org_bench' } }]);
      return 1;
    });
  }
  const { rows } = await db.query<{ n: string; max: string }>('SELECT count(*)::text AS n, max(position)::text AS max FROM es_events');
  // Ours, the chain in version 2: the organization switched first (entry 1), then every append linked.
  const v2Db = openDb(await pgServer.database('bench_ours_v2'), { max: 16 });
  const v2Store = await PostgresEventStore.open(v2Db);
  const sw = ChainLinker.switchEvent('org_bench', 1, genesisHash('org_bench'), randomUUID(), new Date().toISOString());
  await v2Store.appendToStream(sw.stream, [sw.event as NewEvent], { expectedRevision: 'no_stream' });
  for (const n of [1, 16]) {
    results[`oursV2${n}`] = await closedLoop(`ours, chain v2 (linked), ${n} writer${n > 1 ? 's' : ''}`, n, seconds, async (w) => {
      await v2Store.appendToStream(`bench-${n}-${w}`, [{ type: 'bench.appended', data: payload, metadata: { org_id: 'org_bench' } }]);
      return 1;
    });
  }
  const linked = (await v2Db.query<{ n: string; head: string }>(`SELECT count(*)::text AS n, (SELECT sequence::text FROM audit_chain_head WHERE org_id = 'org_bench') AS head FROM es_events WHERE metadata->>'audit_link' IS NOT NULL`)).rows[0]!;
  await v2Store.close();
  await v2Db.close();
  if (storeArg() === 'esdb') {
    const esdb = await esdbStoreForBench();
    for (const n of [1, 16]) {
      results[`esdb${n}`] = await closedLoop(`EventStoreDB adapter, ${n} writer${n > 1 ? 's' : ''}`, n, seconds, async (w) => {
        await esdb.store.appendToStream(`bench-${n}-${w}`, [{ type: 'bench.appended', data: payload, metadata: { org_id: 'org_bench' } }]);
        return 1;
      });
    }
    await esdb.stop();
  }
  await store.close();
  await db.close();

  console.log(`\nbench/append: one event per append, ${seconds} s per scenario, durable embedded PostgreSQL\n`);
  printTable('events', Object.values(results));
  console.log('');
  ratio('ours/Emmett, 16 writers', results.ours16!, results.emmett16!, 3);
  ratio('ours 16 writers / raw INSERT 16 conn', results.ours16!, results.raw16!);
  ratio('ceiling (bare group commit) / raw INSERT 16 conn', results.ceiling16!, results.raw16!);
  ratio('floor (lock-ordered group commit) / raw INSERT 16 conn', results.floor16!, results.raw16!);
  ratio('ours 16 writers / floor', results.ours16!, results.floor16!, 0.85);
  ratio('ours, chain v2, 16 writers / floor', results.oursV216!, results.floor16!, 0.85);
  ratio('ours, chain v2 / without the chain, 16 writers', results.oursV216!, results.ours16!);
  ratio('ours, chain v2 / without the chain, 1 writer', results.oursV21!, results.ours1!);
  ratio('ours/Emmett, 1 writer', results.ours1!, results.emmett1!);
  ratio('ours 1 writer / raw INSERT 1 conn', results.ours1!, results.raw1!);
  if (results.esdb16) {
    ratio('EventStoreDB adapter / ours Postgres, 16 writers', results.esdb16, results.ours16!);
    ratio('EventStoreDB adapter / ours Postgres, 1 writer', results.esdb1!, results.ours1!);
    console.log(ESDB_DISCLAIMER);
  }
  console.log(`\nlog check: ${rows[0]!.n} events, max position ${rows[0]!.max} (${rows[0]!.n === rows[0]!.max ? 'gapless' : 'GAP'})`);
  console.log(`chain v2 check: ${linked.n} linked events, the chain's head at ${linked.head} (${Number(linked.n) === Number(linked.head) ? 'every entry linked, gapless' : 'MISMATCH'})`);
} finally {
  await pgServer.stop();
}
