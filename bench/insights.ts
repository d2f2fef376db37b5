import { commerceMemoryProjection } from '../projections/commerce-memory.ts';
import { counterpartySummary, negotiationStats, topCounterparties, type Window } from '../projections/commerce-memory-insights.ts';
import { PostgresEventStore } from '../src/eventstore/postgres.ts';
import type { NewEvent } from '../src/eventstore/port.ts';
import { openDb } from '../src/postgres/db.ts';
import { jsonText } from '../src/http/kernel/exact-json.ts';
import { migrateCheckpoints, readCheckpoint } from '../src/projector/checkpoints.ts';
import { ProjectionRunner } from '../src/projector/runner.ts';
import { benchPostgres } from './harness.ts';

// bench/insights: the three commerce-memory insights over N interactions
// (default 1 000 000; N/4 negotiations), each answered from the bucket read
// models (what the routes run) against a plain SQL aggregate over the same raw
// rows (the interactions / negotiations tables, with their (org, project,
// time) index), p50 of each in the same run, over a 90-day and a 365-day
// window with unaligned edges. The two answers are compared on every run.
// Data shape: 2000 counterparties (30% of the traffic on 50 of them), each
// with a home currency it uses for 90% of its priced interactions, four
// currencies in all, times uniform over two years.
// Events are appended in bulk through the event store port (one stream per
// interaction, as the routes write them), then the live projection runner
// catches up.
// Run: npm run bench:insights   (INTERACTIONS=1000000 ITERATIONS=25)

const N = Number(process.env.INTERACTIONS ?? '1000000');
const NEGOTIATIONS = Math.floor(N / 4);
const ITERATIONS = Number(process.env.ITERATIONS ?? '25');
const COUNTERPARTIES = 2000;
const ORG = 'org_bench';
const PROJECT = 'prj_bench';
const NOISE_PROJECT = 'prj_noise';
const NOW = Date.parse('2026-11-01T00:00:00.000Z');
const SPAN_MS = 730 * 86_400_000;

let seed = 42;
const rand = () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
  return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
};
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
const KINDS = ['supplier', 'customer', 'agent_peer'] as const;
const IX_KINDS = ['quote', 'negotiation', 'order', 'invoice', 'payment', 'payment', 'payment', 'shipment', 'message', 'other'] as const;
const CURRENCIES = ['BRL', 'USD', 'MXN', 'USDC'] as const;
const OUTCOMES = ['accepted', 'rejected', 'abandoned'] as const;
const meta = (project: string) => ({ org_id: ORG, project_id: project, actor: { kind: 'system', id: 'bench' }, request_id: null, correlation_id: null, causation_id: null, occurred_at: new Date(NOW).toISOString(), schema_version: 1 });

const pgServer = await benchPostgres();
try {
  const db = openDb(await pgServer.database('bench_insights'), { max: 8 });
  const store = await PostgresEventStore.open(db);
  await migrateCheckpoints(db);

  // Counterparties: the measured project and a noisy neighbour.
  // Each counterparty deals mostly (90%) in its home currency.
  const cps: { id: string; kind: string; project: string; home: string }[] = [];
  for (let i = 0; i < COUNTERPARTIES; i++) cps.push({ id: `cp_bench${String(i).padStart(8, '0')}`, kind: pick(KINDS), project: i % 10 === 9 ? NOISE_PROJECT : PROJECT, home: pick(CURRENCIES) });
  await Promise.all(
    cps.map((c) =>
      store.appendToStream(
        `counterparty-${c.id}`,
        [{ type: 'counterparty.created', data: { counterparty_id: c.id, org_id: ORG, project_id: c.project, kind: c.kind, name: `Counterparty ${c.id}`, identifier: null, identifier_kind: null, metadata: {}, created_at: new Date(NOW - SPAN_MS - 1000).toISOString() }, metadata: meta(c.project) as never }],
        { expectedRevision: 'no_stream' },
      ),
    ),
  );

  process.stderr.write(`appending ${N} interactions and ${NEGOTIATIONS} negotiations...\n`);
  const t0 = Date.now();
  const inFlight: Promise<unknown>[] = [];
  const append = async (stream: string, e: NewEvent) => {
    inFlight.push(store.appendToStream(stream, [e], { expectedRevision: 'no_stream' }));
    if (inFlight.length >= 4096) await Promise.all(inFlight.splice(0));
  };
  for (let i = 0; i < N; i++) {
    const c = rand() < 0.3 ? cps[Math.floor(rand() * 50)]! : pick(cps);
    const kind = pick(IX_KINDS);
    const priced = rand() < (kind === 'payment' ? 0.9 : 0.3);
    const id = `ixn_bench${String(i).padStart(10, '0')}`;
    const at = new Date(NOW - Math.floor(rand() * SPAN_MS)).toISOString();
    await append(`interaction-${id}`, {
      type: 'interaction.recorded',
      data: {
        interaction_id: id,
        org_id: ORG,
        project_id: c.project,
        counterparty_id: c.id,
        counterparty_kind: c.kind,
        kind,
        occurred_at: at,
        source: 'backfill',
        source_ref: null,
        agent_id: null,
        amount_minor: priced ? String(1 + Math.floor(rand() * 10_000_000)) : null,
        currency: priced ? (rand() < 0.9 ? c.home : pick(CURRENCIES)) : null,
        metadata: {},
        recorded_at: at,
      },
      metadata: meta(c.project) as never,
    });
    if (i % 100_000 === 99_999) process.stderr.write(`  ${i + 1} appended (${((Date.now() - t0) / 1000).toFixed(0)} s)\n`);
  }
  for (let i = 0; i < NEGOTIATIONS; i++) {
    const c = pick(cps);
    const id = `neg_bench${String(i).padStart(10, '0')}`;
    const list = rand() < 0.8 ? Math.floor(rand() * 1_000_000) : null;
    const final = list !== null && rand() < 0.9 ? Math.floor((list * (60 + Math.floor(rand() * 45))) / 100) : null;
    const at = new Date(NOW - Math.floor(rand() * SPAN_MS)).toISOString();
    await append(`negotiation-${id}`, {
      type: 'negotiation.recorded',
      data: {
        negotiation_id: id,
        org_id: ORG,
        project_id: c.project,
        counterparty_id: c.id,
        item_ref: `sku-${Math.floor(rand() * 40)}`,
        outcome: pick(OUTCOMES),
        currency: list !== null ? pick(CURRENCIES) : null,
        list_price_minor: list === null ? null : String(list),
        final_price_minor: final === null ? null : String(final),
        started_at: at,
        ended_at: null,
        metadata: {},
        created_at: at,
      },
      metadata: meta(c.project) as never,
    });
  }
  await Promise.all(inFlight.splice(0));
  const appendSecs = (Date.now() - t0) / 1000;

  process.stderr.write(`appended in ${appendSecs.toFixed(0)} s; projecting...\n`);
  const t1 = Date.now();
  const runner = new ProjectionRunner(db, store, commerceMemoryProjection);
  await runner.start();
  const head = await store.headPosition();
  for (;;) {
    const cp = await readCheckpoint(db, commerceMemoryProjection.name);
    if (cp?.status === 'failed') throw new Error(`projection failed: ${cp.error}`);
    if (cp && cp.position >= head) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  const projectSecs = (Date.now() - t1) / 1000;
  await runner.stop();
  await db.query('ANALYZE');
  const { rows: counts } = await db.query<{ i: string; d: string; m: string }>(
    `SELECT (SELECT count(*) FROM interactions)::text AS i, (SELECT count(*) FROM counterparty_daily)::text AS d, (SELECT count(*) FROM counterparty_monthly)::text AS m`,
  );

  // The plain aggregates over the raw rows, the same answers computed the obvious way.
  const scope = { orgId: ORG, projectId: PROJECT, limit: 20 };
  const plainSummary = (w: Window) =>
    db.query(
      `SELECT c.id AS counterparty_id, c.name, c.kind, c.identifier_kind, to_char(c.last_seen_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS last_seen_at,
         count(*)::int AS interaction_count, (count(*) FILTER (WHERE i.kind = 'payment'))::int AS payment_count,
         coalesce(sum(i.amount_minor) FILTER (WHERE i.kind = 'payment'), 0)::text AS total_payment_minor,
         coalesce(array_agg(DISTINCT i.currency ORDER BY i.currency) FILTER (WHERE i.currency IS NOT NULL), '{}') AS currencies
       FROM interactions i JOIN counterparties c ON c.id = i.counterparty_id
       WHERE i.org_id = $1 AND i.project_id = $2 AND i.occurred_at >= $3 AND i.occurred_at < $4
       GROUP BY c.id ORDER BY count(*) DESC, c.id COLLATE "C" LIMIT 20`,
      [ORG, PROJECT, w.since.toISOString(), w.until.toISOString()],
    );
  const plainTop = (w: Window) =>
    db.query(
      `SELECT c.id AS counterparty_id, c.name, c.kind, count(*)::int AS payment_count, coalesce(sum(i.amount_minor), 0)::text AS total_payment_minor
       FROM interactions i JOIN counterparties c ON c.id = i.counterparty_id
       WHERE i.org_id = $1 AND i.project_id = $2 AND i.occurred_at >= $3 AND i.occurred_at < $4 AND i.kind = 'payment'
       GROUP BY c.id ORDER BY count(*) DESC, coalesce(sum(i.amount_minor), 0) DESC, c.id COLLATE "C" LIMIT 20`,
      [ORG, PROJECT, w.since.toISOString(), w.until.toISOString()],
    );
  const plainStats = (w: Window) =>
    db.query(
      `SELECT outcome, count(*)::int AS n, coalesce(array_agg(DISTINCT currency ORDER BY currency) FILTER (WHERE currency IS NOT NULL), '{}') AS currencies,
         count(d)::int AS discount_sample_n, round(avg(d))::int AS avg_discount_bps
       FROM (SELECT outcome, currency, CASE WHEN list_price_minor > 0 AND final_price_minor IS NOT NULL THEN floor((list_price_minor - final_price_minor) * 10000 / list_price_minor) END AS d
             FROM negotiations WHERE org_id = $1 AND project_id = $2 AND started_at >= $3 AND started_at < $4) AS n
       GROUP BY outcome ORDER BY outcome`,
      [ORG, PROJECT, w.since.toISOString(), w.until.toISOString()],
    );

  const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const time = async (f: () => Promise<unknown>) => {
    const s = process.hrtime.bigint();
    await f();
    return Number(process.hrtime.bigint() - s) / 1e6;
  };
  const windows: [string, Window][] = [
    ['90 d', { since: new Date(NOW - 90 * 86_400_000 + 12_345_678), until: new Date(NOW - 3_456_789) }],
    ['365 d', { since: new Date(NOW - 365 * 86_400_000 + 12_345_678), until: new Date(NOW - 3_456_789) }],
  ];
  const cases: [string, (w: Window) => Promise<unknown>, (w: Window) => Promise<{ rows: unknown[] }>][] = [
    ['counterparty-summary', (w) => counterpartySummary(db, scope, w), plainSummary],
    ['top-counterparties', (w) => topCounterparties(db, scope, w), plainTop],
    ['negotiation-stats', (w) => negotiationStats(db, { orgId: ORG, projectId: PROJECT }, w), plainStats],
  ];
  const results: string[] = [];
  for (const [wname, w] of windows) {
    for (const [name, model, plain] of cases) {
      // Totals are exact (bigint in the read model's rows, written as bare integers).
      const exact = (rows: unknown[]) => rows.map((r) => (r && typeof r === 'object' && 'total_payment_minor' in r ? { ...r, total_payment_minor: BigInt(String(r.total_payment_minor)) } : r));
      const a = jsonText(await model(w));
      const b = jsonText(exact((await plain(w)).rows));
      if (a !== b) throw new Error(`${name} over ${wname}: the read model and the plain aggregate disagree\n${a.slice(0, 400)}\n${b.slice(0, 400)}`);
      const tm: number[] = [];
      const tp: number[] = [];
      for (let i = 0; i < ITERATIONS; i++) {
        tm.push(await time(() => model(w)));
        tp.push(await time(() => plain(w)));
      }
      const rm = p50(tm);
      const rp = p50(tp);
      results.push(`${`${name} (${wname})`.padEnd(30)} ${rm.toFixed(2).padStart(9)} ms ${rp.toFixed(2).padStart(10)} ms   ${(rp / rm).toFixed(1).padStart(6)}x`);
    }
  }

  console.log(`\nbench/insights: ${counts[0]!.i} interactions (${N} appended, 90% in the measured project), ${NEGOTIATIONS} negotiations, ${COUNTERPARTIES} counterparties, two years`);
  console.log(`append through the event store port: ${appendSecs.toFixed(1)} s; projection catch-up: ${projectSecs.toFixed(1)} s (${((N + NEGOTIATIONS) / projectSecs).toFixed(0)} events/s)`);
  console.log(`read model: ${counts[0]!.d} daily and ${counts[0]!.m} monthly counterparty buckets; answers identical to the plain aggregate\n`);
  console.log(`${'insight (window)'.padEnd(30)} ${'read model p50'.padStart(12)} ${'plain SQL p50'.padStart(13)}   ${'plain / model'}`);
  for (const r of results) console.log(r);
  await store.close();
  await db.close();
} finally {
  await pgServer.stop();
}
