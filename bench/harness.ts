import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import fs from 'node:fs/promises';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureDatabase, startEmbeddedPostgres, type EmbeddedServer } from '../src/postgres/embedded.ts';

// Shared pieces of the benchmarks: a durable embedded PostgreSQL (production
// settings: fsync on), closed-loop load generators and a result table.

export async function benchPostgres(): Promise<{ server: EmbeddedServer; database(name: string): Promise<string>; stop(): Promise<void> }> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'ledger-bench-'));
  await fs.chmod(dir, 0o755);
  const server = await startEmbeddedPostgres({ dataDir: dir, durable: true });
  return {
    server,
    async database(name) {
      await ensureDatabase(server.adminUrl, name);
      return server.urlFor(name);
    },
    async stop() {
      await server.stop();
      await fs.rm(dir, { recursive: true, force: true });
    },
  };
}

export type LoadResult = { name: string; ops: number; seconds: number; perSecond: number; p50Ms: number; p99Ms: number };

/** Runs `op` from `workers` concurrent loops for `seconds` after a short warm-up; `op` returns how many units it did. */
export async function closedLoop(name: string, workers: number, seconds: number, op: (worker: number, i: number) => Promise<number>): Promise<LoadResult> {
  const warmupEnd = Date.now() + 500;
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      for (let i = 0; Date.now() < warmupEnd; i++) await op(w, -1 - i);
    }),
  );
  const latencies: number[] = [];
  let units = 0;
  const start = process.hrtime.bigint();
  const end = Date.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      for (let i = 0; Date.now() < end; i++) {
        const t0 = process.hrtime.bigint();
        const n = await op(w, i);
        units += n;
        latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
    }),
  );
  const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? 0;
  return { name, ops: units, seconds: elapsed, perSecond: units / elapsed, p50Ms: pct(0.5), p99Ms: pct(0.99) };
}

export function printTable(unit: string, rows: LoadResult[]): void {
  const w = Math.max(...rows.map((r) => r.name.length), 8);
  console.log(`${'scenario'.padEnd(w)}  ${`${unit}/s`.padStart(10)}  ${'p50 ms'.padStart(8)}  ${'p99 ms'.padStart(8)}`);
  for (const r of rows) {
    console.log(`${r.name.padEnd(w)}  ${r.perSecond.toFixed(0).padStart(10)}  ${r.p50Ms.toFixed(2).padStart(8)}  ${r.p99Ms.toFixed(2).padStart(8)}`);
  }
}

export function ratio(label: string, a: LoadResult, b: LoadResult, target?: number): void {
  const r = a.perSecond / b.perSecond;
  const verdict = target === undefined ? '' : r >= target ? `  (target >= ${target}: met)` : `  (target >= ${target}: NOT met)`;
  console.log(`${label.padEnd(52)} ${r.toFixed(2)}x${verdict}`);
}

export const benchSeconds = () => Number(process.env.BENCH_SECONDS ?? '5');

/**
 * A bare group commit: items that arrive while a flush is in flight go together
 * in the next one, which starts once the writers woken by the last one have
 * queued theirs (the next macrotask). Nothing else is done for them: the
 * least a batching writer can do, for ceilings measured in the same closed loop.
 */
export function bareGroupCommit<T>(flushBatch: (items: T[]) => Promise<unknown>): (item: T) => Promise<void> {
  let pending: { item: T; done: () => void; fail: (e: unknown) => void }[] = [];
  let busy = false;
  const schedule = () => {
    if (busy) return;
    busy = true;
    setImmediate(() => void flush());
  };
  const flush = async (): Promise<void> => {
    const batch = pending;
    pending = [];
    try {
      await flushBatch(batch.map((b) => b.item));
      for (const b of batch) b.done();
    } catch (e) {
      for (const b of batch) b.fail(e);
    }
    busy = false;
    if (pending.length > 0) schedule();
  };
  return (item) =>
    new Promise<void>((done, fail) => {
      pending.push({ item, done, fail });
      schedule();
    });
}

/**
 * The floor of a lock-ordered log: `floor_append(streams, ids, types, data,
 * meta)` locks the head row, inserts the rows at its next positions into a
 * table shaped like es_events (the same indexes), moves the head and NOTIFYs;
 * no revision is checked and nothing is answered per row.
 */
export const FLOOR_SQL = `
  CREATE TABLE floor_events (position bigint PRIMARY KEY, event_id uuid NOT NULL UNIQUE, stream_name text NOT NULL, stream_revision bigint NOT NULL,
    event_type text NOT NULL, data json NOT NULL, metadata json NOT NULL, recorded_at timestamptz NOT NULL DEFAULT now(), UNIQUE (stream_name, stream_revision));
  CREATE TABLE floor_head (id int PRIMARY KEY, position bigint NOT NULL);
  INSERT INTO floor_head VALUES (1, 0);
  CREATE FUNCTION floor_append(p_streams text[], p_ids uuid[], p_types text[], p_data json[], p_meta json[]) RETURNS bigint LANGUAGE plpgsql AS $$
    DECLARE head bigint; n int := array_length(p_ids, 1);
    BEGIN
      SELECT position INTO head FROM floor_head WHERE id = 1 FOR UPDATE;
      INSERT INTO floor_events (position, event_id, stream_name, stream_revision, event_type, data, metadata)
        SELECT head + o, i, s, head + o, t, d, m FROM unnest(p_ids, p_streams, p_types, p_data, p_meta) WITH ORDINALITY AS x(i, s, t, d, m, o);
      UPDATE floor_head SET position = head + n WHERE id = 1;
      PERFORM pg_notify('floor_appended', (head + n)::text);
      RETURN head + n;
    END $$;`;

/**
 * The CPU ticks (1/100 s) each PostgreSQL process has used so far (Linux:
 * /proc; empty elsewhere), to show what the database spends per request
 * beside this process's own CPU. Throughput on a shared two-core machine
 * swings with its neighbours; CPU per request says where the cost sits.
 */
function postgresTicks(): Map<string, number> {
  const ticks = new Map<string, number>();
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  } catch {
    return ticks;
  }
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) !== 'postgres') continue;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks.set(pid, Number(fields[11]) + Number(fields[12])); // utime + stime
    } catch {
      // ended meanwhile
    }
  }
  return ticks;
}

/** CPU seconds PostgreSQL's processes used between two readings (a process that ended meanwhile counts until its last reading). */
function postgresSeconds(before: Map<string, number>, after: Map<string, number>): number {
  if (after.size === 0) return NaN;
  let ticks = 0;
  for (const [pid, t] of after) ticks += t - (before.get(pid) ?? 0);
  return ticks / 100;
}

/** From now: the CPU this process (every thread) and PostgreSQL's processes use, per request once `n` requests are done. */
export function cpuMeter(): { perRequest(n: number): { ours: number; postgres: number } } {
  const ours0 = process.cpuUsage();
  const pg0 = postgresTicks();
  return {
    perRequest(n) {
      const ours = process.cpuUsage(ours0);
      return { ours: (ours.user + ours.system) / n, postgres: (postgresSeconds(pg0, postgresTicks()) * 1e6) / n };
    },
  };
}

/** "this process 48 µs, PostgreSQL 12 µs of CPU per request" (a dash where PostgreSQL's share cannot be read). */
export function cpuText(ours: number, postgres: number): string {
  return `this process ${ours.toFixed(0).padStart(3)} µs, PostgreSQL ${Number.isNaN(postgres) ? '  -' : postgres.toFixed(0).padStart(3)} µs of CPU per request`;
}

/** A CPU profile of this process from now until the returned function is called with a file (chrome devtools format). */
export async function startProfile(): Promise<(file: string) => Promise<void>> {
  const { Session } = await import('node:inspector/promises');
  const { writeFile } = await import('node:fs/promises');
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 200 });
  await session.post('Profiler.start');
  return async (file) => {
    const { profile } = await session.post('Profiler.stop');
    await writeFile(file, JSON.stringify(profile));
    session.disconnect();
  };
}

/**
 * A full garbage collection, now. A phase of a bench that ends with one pays
 * for the garbage it made, instead of the next phase paying for it when the
 * collector gets round to it (bench/rebuild).
 */
export function collectGarbage(): void {
  if (!gc) {
    v8.setFlagsFromString('--expose-gc');
    gc = runInNewContext('gc') as () => void;
  }
  gc();
}
let gc: (() => void) | undefined;
