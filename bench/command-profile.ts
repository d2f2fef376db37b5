import pg from 'pg';
import { generateSigningKey } from '../src/audit/note.ts';
import { PostgresEventStore } from '../src/eventstore/postgres.ts';
import { openDb } from '../src/postgres/db.ts';
import { startReadSide } from '../src/readside.ts';
import { benchPostgres } from './harness.ts';
import { spendApp } from './spend-app.ts';

// bench/command-profile: the cost of one acknowledged command, sequentially
// (one connection, no concurrency): milliseconds per spend, and every SQL
// statement and transaction the process sent for it (the request path and
// the read side together), counted at the pg client.
// Run: npx tsx bench/command-profile.ts   (SPENDS=300; the chain in version 2, the default; AUDIT_FORMAT=1 for version 1; add --cpu-prof to node for a profile)

const SPENDS = Number(process.env.SPENDS ?? '300');
const counts = new Map<string, number>();
const times = new Map<string, number>();
let total = 0;
let counting = false;
// A round trip: a connection goes from no statement in flight to one. Statements
// issued while others are in flight on the same connection (pipelined) travel in
// the same round trip; one issued after the answers it waited for starts another.
const inflight = new WeakMap<object, number>();
let roundTrips = 0;
/** Per command, the instants (ns) of its phases; the request's own statements mark them. */
type Marks = { trace?: Array<{ text: string; issued: bigint; answered?: bigint }>; start: bigint; rateIssued?: bigint; rateAnswered?: bigint; append?: bigint; begin?: bigint; commitIssued?: bigint; commitAnswered?: bigint; appended?: bigint; end?: bigint };
let marks: Marks | undefined;
const orig = pg.Client.prototype.query;
(pg.Client.prototype as unknown as { query: unknown }).query = function (this: pg.Client, ...args: unknown[]) {
  if (!counting) return (orig as (...a: unknown[]) => unknown).apply(this, args);
  const q = args[0] as string | { text: string };
  const text = (typeof q === 'string' ? q : q.text).replace(/\s+/g, ' ').slice(0, Number(process.env.QLEN ?? 70));
  counts.set(text, (counts.get(text) ?? 0) + 1);
  total++;
  const n = inflight.get(this) ?? 0;
  if (n === 0) roundTrips++;
  inflight.set(this, n + 1);
  const s = process.hrtime.bigint();
  const m = marks;
  const step = m?.trace ? { text, issued: s, answered: undefined as bigint | undefined } : undefined;
  if (step) m!.trace!.push(step);
  if (m) {
    if (text.startsWith('WITH req AS')) m.rateIssued ??= s;
    else if (text.startsWith('BEGIN')) m.begin ??= s;
    else if (text === 'COMMIT') m.commitIssued ??= s;
  }
  const settle = () => {
    const e = process.hrtime.bigint();
    inflight.set(this, (inflight.get(this) ?? 1) - 1);
    times.set(text, (times.get(text) ?? 0) + Number(e - s) / 1e6);
    if (step) step.answered = e;
    if (m && text.startsWith('WITH req AS')) m.rateAnswered ??= e;
    if (m && text === 'COMMIT') m.commitAnswered ??= e;
  };
  // pg-pool calls with a callback (nothing returned); transactions await a promise.
  const last = args[args.length - 1];
  if (typeof last === 'function') {
    args[args.length - 1] = (...r: unknown[]) => {
      settle();
      return (last as (...a: unknown[]) => unknown)(...r);
    };
  }
  const r = (orig as (...a: unknown[]) => unknown).apply(this, args) as Promise<unknown> | undefined;
  if (typeof last !== 'function' && r && typeof r.then === 'function') void r.then(settle, settle);
  return r;
};

const pgServer = await benchPostgres();
try {
  const db = openDb(await pgServer.database('bench_profile'), { max: 10 });
  const store = await PostgresEventStore.open(db);
  const readSide = await startReadSide(db, store, { signingKey: generateSigningKey('bench'), origin: 'agent-ledger/audit', format: process.env.AUDIT_FORMAT === '1' ? 1 : 2 }, undefined, { inline: process.env.INLINE !== '0' });
  const phase = { append: 0, wait: 0, n: 0 };
  const origAppend = store.appendToStream.bind(store);
  store.appendToStream = async (...a: Parameters<typeof origAppend>) => {
    const s = process.hrtime.bigint();
    if (marks) marks.append ??= s;
    try {
      return await origAppend(...a);
    } finally {
      const e = process.hrtime.bigint();
      if (marks) marks.appended = e;
      if (counting) phase.append += Number(e - s) / 1e6;
    }
  };
  const origWait = readSide.waitFor;
  readSide.waitFor = async (p, ms) => {
    const s = process.hrtime.bigint();
    try {
      return await origWait(p, ms);
    } finally {
      if (counting) phase.wait += Number(process.hrtime.bigint() - s) / 1e6;
    }
  };
  const { app, spend, spendMany } = await spendApp(db, store, readSide);
  for (let i = 0; i < 50; i++) await spend();
  await new Promise((r) => setTimeout(r, 500));
  // CONCURRENCY=n: n callers at once, each spending on a mandate of its own; only the counts are printed (the phases are one command's alone).
  const concurrency = Number(process.env.CONCURRENCY ?? '1');
  if (concurrency > 1) {
    const spendOn = await spendMany(concurrency);
    await Promise.all(spendOn.map(async (s) => { for (let i = 0; i < 5; i++) await s(); }));
    counting = true;
    const t0 = process.hrtime.bigint();
    await Promise.all(spendOn.map(async (s) => { for (let i = 0; i < Math.ceil(SPENDS / concurrency); i++) { const r = await s(); if (r.statusCode !== 201) throw new Error(r.body); } }));
    const n = Math.ceil(SPENDS / concurrency) * concurrency;
    counting = false;
    const secs = Number(process.hrtime.bigint() - t0) / 1e9;
    console.log(`\nbench/command-profile: ${n} spends from ${concurrency} callers at once (app.inject), ${(n / secs).toFixed(0)} spends/s`);
    console.log(`statements per command ${(total / n).toFixed(2)}   transactions (BEGIN) per command ${((counts.get('BEGIN') ?? 0) / n).toFixed(3)}   round trips per command ${(roundTrips / n).toFixed(2)}\n`);
    for (const [k, v] of [...counts].sort((a, b) => b[1] - a[1])) console.log(`${(v / n).toFixed(3).padStart(7)}  ${((times.get(k) ?? 0) / n).toFixed(2).padStart(6)} ms  ${k}`);
    await app.close();
    await readSide.stop();
    await store.close();
    await db.close();
    process.exit(0);
  }
  counting = true;
  const lat: number[] = [];
  const all: Marks[] = [];
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < SPENDS; i++) {
    const s = process.hrtime.bigint();
    marks = { start: s, trace: [] };
    const r = await spend();
    marks.end = process.hrtime.bigint();
    all.push(marks);
    marks = undefined;
    if (r.statusCode !== 201) throw new Error(r.body);
    lat.push(Number(process.hrtime.bigint() - s) / 1e6);
  }
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  counting = false;
  lat.sort((a, b) => a - b);
  console.log(`\nbench/command-profile: ${SPENDS} sequential spends, one mandate\n`);
  console.log(`p50 ${lat[Math.floor(lat.length / 2)]!.toFixed(2)} ms   mean ${((secs * 1000) / SPENDS).toFixed(2)} ms`);
  console.log(`of which: append ${(phase.append / SPENDS).toFixed(2)} ms, waiting for the read side ${(phase.wait / SPENDS).toFixed(2)} ms`);
  const tx = (counts.get('BEGIN') ?? 0);
  console.log(`statements per command ${(total / SPENDS).toFixed(1)}   transactions (BEGIN) per command ${(tx / SPENDS).toFixed(2)}   plus autocommit statements`);
  console.log(`round trips to PostgreSQL per command ${(roundTrips / SPENDS).toFixed(2)}  (a connection going from nothing in flight to a statement; pipelined statements share one)\n`);
  // Where one command's microseconds go (medians over the commands that went through each phase).
  const med = (f: (m: Marks) => bigint | undefined, g: (m: Marks) => bigint | undefined) => {
    const v = all.flatMap((m) => {
      const a = f(m);
      const b = g(m);
      return a !== undefined && b !== undefined && b >= a ? [Number(b - a) / 1e3] : [];
    });
    v.sort((x, y) => x - y);
    return v.length ? `${v[Math.floor(v.length / 2)]!.toFixed(0).padStart(6)} µs  (${v.length} of ${all.length})` : '     -';
  };
  console.log('phases of one command, median');
  console.log(`  request to the append (routing, authentication, validation, policy, fold, decision)  ${med((m) => m.start, (m) => m.append)}`);
  console.log(`    of which the rate-limit admission's round trip                                     ${med((m) => m.rateIssued, (m) => m.rateAnswered)}`);
  console.log(`  queued until its batch begins                                                          ${med((m) => m.append, (m) => m.begin)}`);
  console.log(`  the batch's statements issued (sealing, projections, encoding)                         ${med((m) => m.begin, (m) => m.commitIssued)}`);
  console.log(`  the database: statements run and COMMIT answered                                       ${med((m) => m.commitIssued, (m) => m.commitAnswered)}`);
  console.log(`  COMMIT answered to the append resolved (wake-up)                                       ${med((m) => m.commitAnswered, (m) => m.appended)}`);
  console.log(`  append resolved to the response (read side, serialization)                             ${med((m) => m.appended, (m) => m.end)}`);
  console.log(`  whole request (app.inject, no socket)                                                  ${med((m) => m.start, (m) => m.end)}\n`);
  // TRACE=1: one command's statements (the median command's), each issued and answered, in µs from the request's start.
  if (process.env.TRACE === '1') {
    const byLatency = all.map((m) => m).sort((a, b) => Number(a.end! - a.start - (b.end! - b.start)));
    const m = byLatency[Math.floor(byLatency.length / 2)]!;
    const us = (t: bigint | undefined) => (t === undefined ? '     -' : (Number(t - m.start) / 1e3).toFixed(0).padStart(6));
    console.log(`one command's statements (the median one, ${us(m.end).trim()} µs), issued and answered, µs from its start`);
    for (const st of m.trace ?? []) console.log(`  ${us(st.issued)} ${us(st.answered)}  ${st.text.slice(0, 60)}`);
    console.log(`  append ${us(m.append)}  appended ${us(m.appended)}  end ${us(m.end)}\n`);
  }
  for (const [k, v] of [...counts].sort((a, b) => b[1] - a[1])) console.log(`${(v / SPENDS).toFixed(2).padStart(7)}  ${((times.get(k) ?? 0) / SPENDS).toFixed(2).padStart(6)} ms  ${k}`);
  await app.close();
  await readSide.stop();
  await store.close();
  await db.close();
} finally {
  await pgServer.stop();
}
