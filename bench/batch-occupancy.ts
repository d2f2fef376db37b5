import { PostgresEventStore } from '../src/eventstore/postgres.ts';

// bench/batch-occupancy: a preload for any bench that reports, every two
// seconds, how busy the Postgres store's batch pipeline is: batches, their
// mean duration, appends per batch, and the share of time a batch was in
// flight (near 100 %: throughput is appends per batch over batch time).
// Run: node --import=tsx --import=./bench/batch-occupancy.ts bench/http-command.ts
// It wraps the store's private batch commit (a measuring aid, nothing else).

type Commit = (batch: unknown[], useInline?: boolean) => Promise<void>;
const proto = PostgresEventStore.prototype as unknown as { commit: Commit };
const commit = proto.commit;
let batches = 0;
let appends = 0;
let busyMs = 0;
let totalMs = 0;
let inflight = 0;
let busySince = 0;
proto.commit = async function (this: unknown, batch: unknown[], useInline?: boolean) {
  const started = performance.now();
  if (inflight++ === 0) busySince = started;
  try {
    return await commit.call(this, batch, useInline);
  } finally {
    const ended = performance.now();
    if (--inflight === 0) busyMs += ended - busySince;
    batches++;
    appends += batch.length;
    totalMs += ended - started;
  }
};
let last = { batches, appends, busyMs, totalMs, at: performance.now() };
setInterval(() => {
  const n = batches - last.batches;
  const span = performance.now() - last.at;
  if (n >= 20) {
    process.stderr.write(
      `store: ${n} batches in ${span.toFixed(0)} ms, ${((totalMs - last.totalMs) / n).toFixed(2)} ms each, ${((appends - last.appends) / n).toFixed(1)} appends per batch, busy ${((100 * (busyMs - last.busyMs)) / span).toFixed(0)} %\n`,
    );
  }
  last = { batches, appends, busyMs, totalMs, at: performance.now() };
}, 2000).unref();
