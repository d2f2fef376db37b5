import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { generateSigningKey } from '../src/audit/note.ts';
import { forgetStates } from '../src/eventstore/handler.ts';
import { PostgresEventStore } from '../src/eventstore/postgres.ts';
import { attachSnapshots, detachSnapshots, snapshotsOf } from '../src/eventstore/snapshots.ts';
import type { NewEvent } from '../src/eventstore/port.ts';
import { openDb } from '../src/postgres/db.ts';
import { startReadSide } from '../src/readside.ts';
import { benchPostgres } from './harness.ts';
import { benchOrg } from './spend-app.ts';

// bench/stream-length: a spend on one mandate whose stream already holds 10,
// 1 000 and 100 000 events (approved spends), over loopback HTTP with one
// connection, in the same run. A command's cost should not grow with its
// stream: target p50 within 1.5x across the three.
// Then the first spend after a restart (the process's folded states
// forgotten), without snapshots and from the snapshot the snapshotter took.
// Run: npm run bench:stream-length   (BENCH_SECONDS=5, LENGTHS=10,1000,100000)

const seconds = Number(process.env.BENCH_SECONDS ?? '5');
const LENGTHS = (process.env.LENGTHS ?? '10,1000,100000').split(',').map(Number);

async function load(cfg: object): Promise<{ requests: number; rps: number; p50_ms: number; p99_ms: number; unexpected: number; samples: string[] }> {
  const file = path.join(os.tmpdir(), `load-${randomBytes(4).toString('hex')}.json`);
  await fs.writeFile(file, JSON.stringify(cfg));
  const child = spawn(process.execPath, ['--import=tsx', 'bench/load.ts', file], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  await new Promise((r) => child.on('exit', r));
  await fs.rm(file, { force: true });
  return JSON.parse(out);
}

const pgServer = await benchPostgres();
try {
  const db = openDb(await pgServer.database('bench_stream'), { max: 10 });
  const store = await PostgresEventStore.open(db);
  const readSide = await startReadSide(db, store, { signingKey: generateSigningKey('bench'), origin: 'agent-ledger/audit' });
  const { app, auth, mandate: newMandate, spendOn } = await benchOrg(db, store, readSide);
  const ours = await app.listen({ host: '127.0.0.1', port: 0 });
  const rows: string[] = [];
  const restarts: string[] = [];
  const p50s: number[] = [];
  const spendOnce = async (mandateId: string): Promise<number> => {
    const t0 = performance.now();
    const r = await spendOn(mandateId);
    if (r.statusCode !== 201) throw new Error(r.body);
    return performance.now() - t0;
  };
  for (const n of LENGTHS) {
    const mandate = await newMandate('1000000000000');
    const spend = await spendOn(mandate.id);
    if (spend.statusCode !== 201) throw new Error(spend.body);
    // The history: copies of that approved spend, appended straight to the stream.
    const stream = `mandate-${mandate.id}`;
    const [last] = await store.readStream(stream, { direction: 'backwards', maxCount: 1 });
    let revision = last!.revision;
    let spent = BigInt((last!.data as { spent_minor: string }).spent_minor);
    process.stderr.write(`writing ${n} events to ${stream}...\n`);
    for (let written = Number(revision) + 1; written < n; ) {
      const k = Math.min(1000, n - written);
      const events: NewEvent[] = Array.from({ length: k }, () => {
        spent += 1n;
        return { type: last!.type, data: { ...last!.data, transaction_id: `txn_${randomUUID().replace(/-/g, '')}`, spent_minor: spent.toString(), remaining_minor: (1000000000000n - spent).toString() }, metadata: last!.metadata };
      });
      revision = (await store.appendToStream(stream, events, { expectedRevision: revision })).nextExpectedRevision;
      written += k;
    }
    if (!(await readSide.waitFor(await store.headPosition(), 120_000))) throw new Error('read side behind');
    // One spend first: the process folds the history once (as after a restart), then from its cached state.
    const warm = Date.now();
    await spendOn(mandate.id);
    process.stderr.write(`first spend after writing the history: ${Date.now() - warm} ms\n`);
    // A restart: the process forgets every folded state. First without snapshots (as before them)...
    const snapshots = snapshotsOf(store)!;
    detachSnapshots(store, snapshots);
    forgetStates(store);
    const cold = await spendOnce(mandate.id);
    attachSnapshots(store, snapshots);
    // ...then from the snapshot, once the snapshotter has followed the log to its head.
    if (!(await readSide.snapshotter.waitFor(await store.headPosition(), 120_000))) throw new Error('snapshotter behind');
    forgetStates(store);
    const fromSnapshot = await spendOnce(mandate.id);
    restarts.push(`${String(n).padStart(7)} prior events   first spend after a restart: without snapshots ${cold.toFixed(1)} ms, from a snapshot ${fromSnapshot.toFixed(1)} ms${n >= 100_000 ? `  (goal <= 50 ms: ${fromSnapshot <= 50 ? 'met' : 'NOT met'})` : ''}`);
    const r = await load({ target: ours, connections: 1, seconds, mode: 'spends', headers: auth, mandateIds: [mandate.id] });
    p50s.push(r.p50_ms);
    rows.push(`${String(n).padStart(7)} prior events   ${r.rps.toFixed(0).padStart(6)} req/s   p50 ${r.p50_ms.toFixed(1)} ms   p99 ${r.p99_ms.toFixed(1)} ms   unexpected ${r.unexpected}`);
  }
  console.log(`\nbench/stream-length: spends on one mandate, 1 connection, ${seconds} s each, loopback HTTP\n`);
  for (const r of rows) console.log(r);
  console.log('');
  for (const r of restarts) console.log(r);
  const spread = Math.max(...p50s) / Math.min(...p50s);
  console.log(`\np50 spread (max / min)  ${spread.toFixed(2)}x  (target <= 1.5: ${spread <= 1.5 ? 'met' : 'NOT met'})`);
  await app.close();
  await readSide.stop();
  await store.close();
  await db.close();
} finally {
  await pgServer.stop();
}
