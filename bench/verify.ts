import { generateSigningKey } from '../src/audit/note.ts';
import { Sealer } from '../src/audit/sealer.ts';
import { randomUUID } from 'node:crypto';
import { auditStream, genesisHash } from '../src/audit/chain.ts';
import { canonicalize, sha256 } from '../src/audit/hash.ts';
import { ChainLinker } from '../src/audit/linker.ts';
import { type ChainItem, chainItems, storedCheckpoints, verifyChain, verifyOrgChain } from '../src/audit/verifier.ts';
import { PostgresEventStore } from '../src/eventstore/postgres.ts';
import type { NewEvent } from '../src/eventstore/port.ts';
import { openDb } from '../src/postgres/db.ts';
import { migrateCheckpoints } from '../src/projector/checkpoints.ts';
import { benchPostgres, cpuMeter, startProfile } from './harness.ts';
import { businessEventTypes } from '../events/index.ts';

// bench/verify: verifies an N-entry chain (default 200 000) and compares
// entries/s with canonicalize + SHA-256 of the same entries, in the same run.
// Targets: ratio >= 0.5 for the chain walk, >= 0.35 for the full verification (issue 39). Run: npm run bench:verify  (ENTRIES=200000, ROUNDS=3)
// Version 2 (the default; AUDIT_FORMAT=1 for version 1): the chain in version 2 (docs/audit-chain.md): a switch at entry 1, then each event
// linked by the store's writer as it is appended; the entry is the event, so there are no separate
// sources to read, and the baseline hashes each event's stored JSON (its data and metadata).

const total = Number(process.env.ENTRIES ?? '200000');
const format = process.env.AUDIT_FORMAT === '1' ? 1 : 2;
const org = 'org_bench';
const origin = 'agent-ledger/audit';
const pgServer = await benchPostgres();
try {
  const db = openDb(await pgServer.database('bench_verify'), { max: 8 });
  const store = await PostgresEventStore.open(db);
  await migrateCheckpoints(db);
  const key = generateSigningKey('bench-audit');
  const sealer = new Sealer(db, store, { signingKey: key, origin, checkpointEveryEntries: 4096, checkpointIntervalMs: 3_600_000, format });
  if (format === 2) {
    // The chain born on version 2: the switch is entry 1 on the genesis hash; the store links every later event of the organization.
    const sw = ChainLinker.switchEvent(org, 1, genesisHash(org), randomUUID(), '2026-11-21T12:00:00.000Z');
    await store.appendToStream(sw.stream, [sw.event as NewEvent], { expectedRevision: 'no_stream' });
  }

  process.stderr.write(`writing and sealing ${total} events (format ${format})...\n`);
  const meta = { org_id: org, project_id: 'prj_bench', actor: { kind: 'api_key', id: 'key_bench' }, request_id: null, correlation_id: null, causation_id: null, occurred_at: '2026-11-21T12:00:00.000Z', schema_version: 1 };
  for (let i = 0; i < total; i += 2000) {
    const events: NewEvent[] = [];
    for (let k = i; k < Math.min(total, i + 2000); k++) {
      events.push({
        type: 'project.created',
        data: { project_id: `prj_${k}`, name: `Project ${k}`, slug: `p-${k}`, environment: 'test', is_default: false, settings: { k }, created_at: '2026-11-21T12:00:00.000Z' },
        metadata: meta as never,
      });
    }
    await store.appendToStream(`org-${org}-${i}`, events);
  }
  let after = '';
  for (;;) {
    const page = await store.readAll({ after, maxCount: 2000, filter: { streamPrefixes: [`org-${org}`, `audit_switch-${org}`] } });
    if (page.length === 0) break;
    await sealer.seal(page);
    after = page[page.length - 1]!.position;
  }
  await sealer.checkpointAll(true);

  // Load the chain once, so the baseline and the offline walk measure the same work on the same entries.
  // Timed: reading the entries is one part of the full verification.
  let t0 = process.hrtime.bigint();
  const entries: ChainItem[] = [];
  for await (const se of chainItems(store, org)) entries.push(se);
  const readEntriesSecs = Number(process.hrtime.bigint() - t0) / 1e9;
  // The other part a v1 walk reads: the business events the entries were sealed from, in log order (a v2 entry is its event).
  t0 = process.hrtime.bigint();
  let sources = 0;
  if (format === 1) for await (const e of store.iterateAll({ filter: { eventTypes: businessEventTypes } })) sources += e.metadata.org_id === org ? 1 : 0;
  const readSourcesSecs = Number(process.hrtime.bigint() - t0) / 1e9;
  const checkpoints = await storedCheckpoints(store, org);

  // Rounds alternate the baseline and the two verifications, so a change in the machine's speed
  // (its 2 cores are shared) moves all three of a round alike; the ratios are each round's, and
  // the median round is the figure (ROUNDS, default 3).
  const rounds = Math.max(1, Number(process.env.ROUNDS ?? '3'));
  let sink = 0;
  const results: { baseSecs: number; walkSecs: number; liveSecs: number; liveCpu: { ours: number; postgres: number }; twoSecs: number; twoCpu: { ours: number; postgres: number }; walkOk: boolean; liveOk: boolean }[] = [];
  for (let r = 0; r < rounds; r++) {
    t0 = process.hrtime.bigint();
    for (const se of entries) sink ^= sha256(canonicalize('linked' in se ? { data: se.linked.data, metadata: se.linked.metadata } : se.entry))[0]!;
    const baseSecs = Number(process.hrtime.bigint() - t0) / 1e9;
    t0 = process.hrtime.bigint();
    const offline = await verifyChain({
      orgId: org,
      entries: (async function* () {
        yield* entries;
      })(),
      checkpoints,
      key,
      origin: `${origin}/${org}`,
    });
    const walkSecs = Number(process.hrtime.bigint() - t0) / 1e9;
    t0 = process.hrtime.bigint();
    // PROFILE_VERIFY=<file>: a CPU profile of this thread during the last round's full verification (PROFILE_HELPER=1: the one with a helper thread).
    const profileHere = (helped: boolean) => (process.env.PROFILE_VERIFY && r === rounds - 1 && helped === (process.env.PROFILE_HELPER === '1') ? startProfile() : undefined);
    let profiling = await profileHere(false);
    const oneCpu = cpuMeter();
    const live = await verifyOrgChain(store, org, key, origin);
    const liveCpu = oneCpu.perRequest(entries.length);
    if (profiling) await profiling(process.env.PROFILE_VERIFY!);
    const liveSecs = Number(process.hrtime.bigint() - t0) / 1e9;
    // As `ledger audit verify` runs it: the linked tail prechecked by this thread and a helper thread.
    profiling = await profileHere(true);
    t0 = process.hrtime.bigint();
    const cpu = cpuMeter();
    const two = await verifyOrgChain(store, org, key, origin, undefined, { helper: { dbUrl: db.url } });
    const twoCpu = cpu.perRequest(entries.length);
    if (profiling) await profiling(process.env.PROFILE_VERIFY!);
    const twoSecs = Number(process.hrtime.bigint() - t0) / 1e9;
    results.push({ baseSecs, walkSecs, liveSecs, liveCpu, twoSecs, twoCpu, walkOk: offline.ok, liveOk: live.ok && two.ok && two.entries === live.entries && two.tip_hash === live.tip_hash });
  }

  const n = entries.length;
  const rate = (s: number) => (n / s).toFixed(0).padStart(9);
  console.log(`\nbench/verify: ${n}-entry chain of ${org} in format ${format}${format === 1 ? ` (${auditStream(org)})` : ' (the events themselves, linked)'}, ${checkpoints.length} signed checkpoints, ${rounds} rounds (sink ${sink})\n`);
  for (const [i, r] of results.entries()) {
    console.log(`round ${i + 1}: baseline ${rate(r.baseSecs)}, chain walk ${rate(r.walkSecs)} (ok=${r.walkOk}), full verify ${rate(r.liveSecs)}, with a helper thread ${rate(r.twoSecs)} (ok=${r.liveOk}) entries/s; walk ${(r.baseSecs / r.walkSecs).toFixed(2)}x, full ${(r.baseSecs / r.liveSecs).toFixed(2)}x, with the helper ${(r.baseSecs / r.twoSecs).toFixed(2)}x`);
    const cpuLine = (c: { ours: number; postgres: number }, secs: number) => `this process ${c.ours.toFixed(1)} + PostgreSQL ${c.postgres.toFixed(1)} µs of CPU in ${((secs * 1e6) / n).toFixed(1)} µs of wall time an entry`;
    console.log(`         full verify: ${cpuLine(r.liveCpu, r.liveSecs)}; with the helper: ${cpuLine(r.twoCpu, r.twoSecs)}`);
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const walkSecs = median(results.map((r) => r.walkSecs));
  const parts = readEntriesSecs + readSourcesSecs + walkSecs;
  const baseSecs = median(results.map((r) => r.baseSecs));
  console.log(`\nits parts alone: reading the entries ${rate(readEntriesSecs)}, ${format === 1 ? `their ${sources} sources ${rate(readSourcesSecs)}` : 'no sources (each entry is its event)'}, the walk ${rate(walkSecs)} entries/s (median round)`);
  console.log(`${format === 1 ? 'the three' : 'the two  '} one after the other         ${rate(parts)} entries/s = ${(baseSecs / parts).toFixed(2)}x of the baseline (one thread does them all)`);
  const r1 = median(results.map((r) => r.baseSecs / r.walkSecs));
  const r2 = median(results.map((r) => r.baseSecs / r.liveSecs));
  console.log(`\nchain walk / baseline, median round   ${r1.toFixed(2)}x  (target >= 0.5: ${r1 >= 0.5 ? 'met' : 'NOT met'})`);
  const r3 = median(results.map((r) => r.baseSecs / r.twoSecs));
  console.log(`full verify / baseline, median round  ${r2.toFixed(2)}x  on this thread alone (the service's verifier, on its own thread)`);
  console.log(`full verify, two threads, median round  ${r3.toFixed(2)}x  (as \`ledger audit verify\` runs; goal >= 0.35: ${r3 >= 0.35 ? 'met' : 'NOT met'})`);
  await store.close();
  await db.close();
} finally {
  await pgServer.stop();
}
