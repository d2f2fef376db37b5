import { generateSigningKey } from '../src/audit/note.ts';
import { Sealer } from '../src/audit/sealer.ts';
import { verifyInclusion } from '../src/audit/merkle.ts';
import { inclusionProofFromStore } from '../src/audit/tree.ts';
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
type Row = { n: number; p50: number; p99: number; stateBytes: number; edge: number; restartMs: number; passMs: number };
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
    for (let i = 0; i < total; i += 5000) {
      const events: NewEvent[] = [];
      for (let k = i; k < Math.min(total, i + 5000); k++) {
        events.push({ type: 'project.created', data: { project_id: `prj_${k}`, name: `P${k}`, slug: `p-${k}`, environment: 'test', is_default: false, settings: {}, created_at: '2026-11-21T12:00:00.000Z' }, metadata: meta as never });
      }
      await store.appendToStream(`org-${org}-${i}`, events);
      for (;;) {
        const page = await store.readAll({ after, maxCount: 5000, filter: { streamPrefixes: [`org-${org}`] } });
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
    rows.push({ n: total, p50: lat[Math.floor(lat.length / 2)]!, p99: lat[Math.min(lat.length - 1, Math.floor(lat.length * 0.99))]!, stateBytes: state.bytes, edge: Object.keys(state.right_edge).length, restartMs: restarts[Math.floor(restarts.length / 2)]!, passMs });
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
  await store.close();
  await db.close();
} finally {
  await pgServer.stop();
}
