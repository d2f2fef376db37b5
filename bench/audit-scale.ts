import { generateSigningKey } from '../src/audit/note.ts';
import { Sealer } from '../src/audit/sealer.ts';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { checkpointStream } from '../src/audit/chain.ts';
import { monitorOnce } from '../src/audit/monitor.ts';
import { CompactRange, verifyInclusion } from '../src/audit/merkle.ts';
import { inclusionProofFromStore, readTile } from '../src/audit/tree.ts';
import { verifierKey } from '../src/audit/note.ts';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { verifyRange } from '../src/audit/windows.ts';
import { PostgresEventStore } from '../src/eventstore/postgres.ts';
import type { NewEvent } from '../src/eventstore/port.ts';
import { openDb } from '../src/postgres/db.ts';
import { migrateCheckpoints } from '../src/projector/checkpoints.ts';
import { benchPostgres } from './harness.ts';

// bench/audit-scale: the audit chain's costs as history grows. For chains of
// each size (default 1 000, 100 000 and 1 000 000 entries, sealed by the real
// sealer from real log events), it prints the inclusion-proof latency (p50,
// p99, read from the stored tree), the sealer's state per chain, the sealer's
// restart time for that chain, and the time of one steady-state verification
// pass (the hot window: the last WINDOW entries). Every figure is also printed
// as a ratio to the smallest chain, measured in the same run: proofs and
// restarts should stay within 2x from the smallest to the largest.
// Run: npm run bench:audit-scale   (SIZES=1000,100000,1000000 WINDOW=1000 PROOFS=300)

const sizes = (process.env.SIZES ?? '1000,100000,1000000').split(',').map(Number);
const windowSize = Number(process.env.WINDOW ?? '1000');
const proofs = Number(process.env.PROOFS ?? '300');
const origin = 'agent-ledger/audit';
const pgServer = await benchPostgres();
type Row = { n: number; p50: number; p99: number; stateBytes: number; edge: number; restartMs: number; passMs: number; monitorRate: number; baselineRate: number };
const rows: Row[] = [];
try {
  const db = openDb(await pgServer.database('bench_audit_scale'), { max: 8 });
  const store = await PostgresEventStore.open(db);
  await migrateCheckpoints(db);
  const key = generateSigningKey('bench-audit');
  for (const total of sizes) {
    const org = `org_scale_${total}`;
    const sealer = new Sealer(db, store, { signingKey: key, origin, checkpointEveryEntries: 1 << 30, checkpointIntervalMs: 3_600_000 });
    process.stderr.write(`${org}: writing and sealing ${total} events...\n`);
    const meta = { org_id: org, project_id: 'prj_bench', actor: { kind: 'api_key', id: 'key_bench' }, request_id: null, correlation_id: null, causation_id: null, occurred_at: '2026-11-21T12:00:00.000Z', schema_version: 1 };
    let after = await store.headPosition();
    for (let i = 0; i < total; i += 2000) {
      const events: NewEvent[] = [];
      for (let k = i; k < Math.min(total, i + 2000); k++) {
        events.push({ type: 'project.created', data: { project_id: `prj_${k}`, name: `P${k}`, slug: `p-${k}`, environment: 'test', is_default: false, settings: {}, created_at: '2026-11-21T12:00:00.000Z' }, metadata: meta as never });
      }
      await store.appendToStream(`org-${org}-${i}`, events);
      for (;;) {
        const page = await store.readAll({ after, maxCount: 500, filter: { streamPrefixes: [`org-${org}`] } });
        if (page.length === 0) break;
        await sealer.seal(page);
        after = page[page.length - 1]!.position;
      }
      if (i % 100_000 === 0 && i > 0) process.stderr.write(`  ${i}\n`);
    }
    await sealer.checkpointAll(true);

    // Restart: a new sealer loads the chain from its stored state.
    const restarts: number[] = [];
    for (let r = 0; r < 20; r++) {
      const fresh = new Sealer(db, store, { signingKey: key, origin });
      const t0 = process.hrtime.bigint();
      await (fresh as unknown as { loadChain(o: string): Promise<unknown> }).loadChain(org);
      restarts.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    const state = (await db.query<{ right_edge: Record<string, string>; bytes: number }>('SELECT right_edge, pg_column_size(audit_chain_state.*) AS bytes FROM audit_chain_state WHERE org_id = $1', [org])).rows[0]!;

    // Proofs: random entries against the full tree, each checked.
    const lat: number[] = [];
    const { rows: hashes } = await db.query<{ i: string; hash: Buffer }>('SELECT idx::text AS i, hash FROM audit_tree_nodes WHERE org_id = $1 AND level = 0 AND idx = ANY($2::bigint[])', [org, Array.from({ length: proofs }, () => Math.floor(Math.random() * total))]);
    const root = (await db.query<{ h: string }>('SELECT checkpoint_root AS h FROM audit_chain_state WHERE org_id = $1', [org])).rows[0]!.h;
    for (const h of hashes) {
      const t0 = process.hrtime.bigint();
      const proof = await inclusionProofFromStore(db, org, Number(h.i), total);
      lat.push(Number(process.hrtime.bigint() - t0) / 1e6);
      if (!verifyInclusion(Number(h.i), total, h.hash, proof, Buffer.from(root, 'hex'))) throw new Error(`proof of ${h.i} does not verify`);
    }
    lat.sort((a, b) => a - b);
    restarts.sort((a, b) => a - b);

    // One steady-state verification pass: the hot window at the tip.
    const t0 = process.hrtime.bigint();
    const report = await verifyRange(store, db, org, Math.max(1, total - windowSize + 1), total, key, origin);
    const passMs = Number(process.hrtime.bigint() - t0) / 1e6;
    if (report.problems.length > 0) throw new Error(`verification found ${JSON.stringify(report.problems[0])}`);
    // The monitor's catch-up from nothing, over HTTP on loopback (the service's checkpoint and tile
    // answers, served here from the same stored tree), against its baseline: hashing the same tiles in memory.
    const [cpEvent] = await store.readStream(checkpointStream(org), { direction: 'backwards', maxCount: 1 });
    const note = (cpEvent!.data as { note: string }).note;
    const server = http.createServer((req, res) => {
      void (async () => {
        const url = new URL(req.url ?? '/', 'http://bench');
        if (url.pathname === '/v1/audit-events/checkpoint') {
          res.writeHead(200, { 'content-type': 'application/json' });
          return res.end(JSON.stringify({ note, cosigned: null }));
        }
        const m = /^\/v1\/audit-events\/tile\/0\/(\d+)$/.exec(url.pathname);
        if (!m) return res.writeHead(404).end();
        const width = Number(url.searchParams.get('width') ?? 256);
        const hashes = await readTile(db, org, 0, Number(m[1]), width);
        res.writeHead(hashes.length === width ? 200 : 404, { 'content-type': 'application/octet-stream' });
        res.end(Buffer.concat(hashes));
      })();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const stateDir = await fs.mkdtemp(path.join(os.tmpdir(), 'bench-monitor-'));
    const m0 = process.hrtime.bigint();
    const mon = await monitorOnce({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, apiKey: 'bench', orgId: org, stateFile: path.join(stateDir, 'state.json'), logKey: verifierKey(key.name, key.publicKey) });
    const monitorSecs = Number(process.hrtime.bigint() - m0) / 1e9;
    server.close();
    await fs.rm(stateDir, { recursive: true, force: true });
    if (!mon.ok || mon.size !== total) throw new Error(`monitor: ${JSON.stringify(mon)}`);
    const tiles: Buffer[] = [];
    for (let n = 0; n * 256 < total; n++) tiles.push(Buffer.concat(await readTile(db, org, 0, n, Math.min(256, total - n * 256))));
    const b0 = process.hrtime.bigint();
    const range = new CompactRange();
    for (const tile of tiles) for (let i = 0; i < tile.length; i += 32) range.append(tile.subarray(i, i + 32));
    range.root();
    const baselineSecs = Number(process.hrtime.bigint() - b0) / 1e9;
    rows.push({ n: total, p50: lat[Math.floor(lat.length / 2)]!, p99: lat[Math.min(lat.length - 1, Math.floor(lat.length * 0.99))]!, stateBytes: state.bytes, edge: Object.keys(state.right_edge).length, restartMs: restarts[Math.floor(restarts.length / 2)]!, passMs, monitorRate: total / monitorSecs, baselineRate: total / baselineSecs });
  }
  const base = rows[0]!;
  console.log(`\nbench/audit-scale: ${proofs} inclusion proofs per chain, restart = median of 20 loads, pass = verify the last ${windowSize} entries (sources included)\n`);
  console.log('entries     proof p50 ms  proof p99 ms  state B  edge  restart ms  pass ms   | proof p50 ×  restart ×  pass ×');
  for (const r of rows) {
    console.log(
      `${String(r.n).padEnd(10)}  ${r.p50.toFixed(2).padStart(12)}  ${r.p99.toFixed(2).padStart(12)}  ${String(r.stateBytes).padStart(7)}  ${String(r.edge).padStart(4)}  ${r.restartMs.toFixed(2).padStart(10)}  ${r.passMs.toFixed(0).padStart(7)}   | ${(r.p50 / base.p50).toFixed(2).padStart(11)}  ${(r.restartMs / base.restartMs).toFixed(2).padStart(9)}  ${(r.passMs / base.passMs).toFixed(2).padStart(6)}`,
    );
  }
  console.log('\n(× = ratio to the smallest chain in this run; state B = the sealer\'s stored state row for the chain, edge = hashes kept in memory)');
  console.log('\nmonitor catch-up (from nothing, tiles over HTTP on loopback, every root recomputed) against its baseline (the same tiles hashed in memory):');
  console.log('entries     monitor entries/s  baseline entries/s  monitor / baseline');
  for (const r of rows) console.log(`${String(r.n).padEnd(10)}  ${r.monitorRate.toFixed(0).padStart(17)}  ${r.baselineRate.toFixed(0).padStart(18)}  ${(r.monitorRate / r.baselineRate).toFixed(3).padStart(18)}`);
  await store.close();
  await db.close();
} finally {
  await pgServer.stop();
}
