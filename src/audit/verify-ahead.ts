import type { Worker } from 'node:worker_threads';
import type { EventStore, Position } from '../eventstore/port.ts';
import { isAuditStream } from './chain.ts';
import { linkOf } from './link.ts';
import { type Prechecked, precheckLinked } from './verify-linked.ts';
import type { PrecheckedRun } from './verifier.ts';
import { moduleWorker } from './worker-boot.ts';

// The linked tail of a switched chain on the PostgreSQL log (every event of
// the organization after its switch, in log order), prechecked in stretches
// of the log by this thread and, when given, a helper thread with its own
// connection: reading, decoding and hashing an entry is nearly all of its
// cost and depends on nothing before it (src/audit/verify-linked.ts). Each
// thread takes the lowest stretch nobody has taken; this thread hands the
// entries to the walk in log order, which settles each in its place. Without
// a helper (or when it fails) this thread does every stretch: the same
// entries, in the same order, either way.

/** Log positions per stretch. */
const STRETCH = 4096n;
/** How many stretches the helper may run ahead of the one the walk waits for (what it holds in memory). */
export const AHEAD = 3;
const PAGE = 1000;
/** Who took a stretch (0: nobody yet). */
export const MINE = 1;
export const HELPER = 2;

/** Where the helper thread connects (the PostgreSQL log the store reads). */
export type AheadHelper = { dbUrl: string };

export type AheadOptions = {
  /** Log positions per stretch (default 4 096). */
  stretch?: number;
  /** The helper's stretches are the odd ones, whenever it is alive (a fixed split: tests that must see both threads' work). */
  alternate?: boolean;
  /** Counted here: the stretches each thread prechecked. */
  stats?: { here: number; helper: number };
};

/** The place of a linked event in the walk: where its link says, unless that is behind the next place (a gap is reported there). */
export function linkedPosition(claimed: number | undefined, next: bigint): bigint {
  return claimed !== undefined && BigInt(claimed) - 1n > next ? BigInt(claimed) - 1n : next;
}

/** A position of the PostgreSQL log as its store writes one (zero-padded to 20 digits, so text order is log order). */
const pos = (p: bigint): Position => p.toString().padStart(20, '0');

/** The organization's events in (after, upto] of the log (to its end without upto), each prechecked. */
export async function precheckRange(store: EventStore, orgId: string, after: bigint, upto?: bigint): Promise<Prechecked[]> {
  const out: Prechecked[] = [];
  const last = upto === undefined ? undefined : pos(upto);
  const read = (from: bigint) => {
    const p = store.readAll({ after: pos(from), maxCount: upto === undefined || upto - from > BigInt(PAGE) ? PAGE : Number(upto - from) });
    p.catch(() => {});
    return p;
  };
  let next = read(after);
  for (;;) {
    const page = await next;
    if (page.length === 0) return out;
    const end = page[page.length - 1]!.position;
    const more = last === undefined || end < last;
    if (more) next = read(BigInt(end));
    for (const e of page) {
      if (last !== undefined && e.position > last) break;
      // Every business event of the organization after the switch is an entry: one without its link is reported (malformed_entry).
      if (e.metadata?.org_id !== orgId || isAuditStream(e.streamName)) continue;
      out.push(precheckLinked(orgId, e, linkOf(e)));
    }
    if (!more) return out;
  }
}

/** The entries after the switch (at log position `after`), in order, a stretch at a time. */
export async function* precheckedTail(store: EventStore, orgId: string, after: Position, helper: AheadThread | undefined, opts: AheadOptions = {}): AsyncGenerator<PrecheckedRun> {
  const start = BigInt(after);
  const head = BigInt((await store.headPosition()) || '0');
  const stretch = opts.stretch !== undefined ? BigInt(opts.stretch) : STRETCH;
  const bounds: [bigint, bigint][] = [];
  for (let a = start; a < head; a += stretch) bounds.push([a, a + stretch < head ? a + stretch : head]);
  const n = bounds.length;
  // [0]: the stretch the walk waits for; [1 + i]: who took stretch i (0: nobody yet).
  const states = new Int32Array(new SharedArrayBuffer(4 * (n + 1)));
  // One stretch alone is this thread's: the helper is told there is nothing for it.
  const thread = n > 1 ? helper : undefined;
  const take = (i: number) => !(opts.alternate && thread && i % 2 === 1) && Atomics.compareExchange(states, 1 + i, 0, MINE) === 0;
  thread?.begin(bounds, states);
  const stats = opts.stats ?? { here: 0, helper: 0 };
  const mine = (i: number) => {
    stats.here++;
    return precheckRange(store, orgId, ...bounds[i]!);
  };
  const helped = async (i: number) => {
    const pres = await thread!.result(i).catch(() => undefined);
    if (pres) stats.helper++;
    return pres ?? mine(i);
  };
  const ready = new Map<number, Prechecked[]>();
  let finished = false;
  try {
    for (let next = 0; next < n; next++) {
      Atomics.store(states, 0, next);
      Atomics.notify(states, 0);
      let pres = ready.get(next);
      ready.delete(next);
      while (!pres) {
        if (take(next)) {
          pres = await mine(next);
        } else if (thread && !thread.answered(next)) {
          // The helper has it and is at it: meanwhile the lowest stretch nobody has.
          let k = next + 1;
          while (k < Math.min(n, next + 1 + AHEAD) && !take(k)) k++;
          if (k < Math.min(n, next + 1 + AHEAD)) ready.set(k, await mine(k));
          else pres = await helped(next);
        } else {
          // Answered (or no thread answers it any more): its stretches are done here if it failed.
          pres = thread ? await helped(next) : await mine(next);
        }
      }
      yield { run: pres };
    }
    finished = true;
  } finally {
    Atomics.store(states, 0, n);
    Atomics.notify(states, 0);
    await helper?.stop(finished);
  }
  // What was appended since the walk began: read on, here.
  yield { run: await precheckRange(store, orgId, n > 0 ? head : start) };
}

/**
 * The helper thread: started before the walk reads anything (a thread takes a
 * few hundred milliseconds to load its modules), given the stretches once the
 * walk reaches the linked tail; answers the stretches it takes as it finishes
 * them.
 */
export class AheadThread {
  private readonly pending = new Map<number, { promise: Promise<Prechecked[]>; resolve: (p: Prechecked[]) => void; reject: (e: Error) => void }>();
  private readonly got = new Set<number>();
  private failed: Error | undefined;
  private begun = false;
  private constructor(
    private readonly worker: Worker,
    private readonly exited: Promise<void>,
  ) {}

  static start(helper: AheadHelper, orgId: string): AheadThread {
    const worker = moduleWorker('verify-ahead-worker', { dbUrl: helper.dbUrl, orgId });
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    const t = new AheadThread(worker, exited);
    worker.on('message', (m: { chunk: number; pres?: Prechecked[]; error?: string }) => {
      t.got.add(m.chunk);
      if (m.pres) t.deferred(m.chunk).resolve(m.pres);
      else t.deferred(m.chunk).reject(new Error(m.error ?? 'the helper failed'));
    });
    const fail = (err: Error) => {
      t.failed ??= err;
      for (const [i, d] of t.pending) if (!t.got.has(i)) d.reject(err);
    };
    worker.on('error', fail);
    void exited.then(() => fail(new Error('the helper thread ended')));
    worker.unref();
    return t;
  }

  /** The stretches, and who took which (shared with the walk). */
  begin(bounds: [bigint, bigint][], states: Int32Array): void {
    this.begun = true;
    this.worker.postMessage({ bounds, states });
  }

  private deferred(i: number) {
    let d = this.pending.get(i);
    if (!d) {
      let resolve!: (p: Prechecked[]) => void;
      let reject!: (e: Error) => void;
      const promise = new Promise<Prechecked[]>((res, rej) => ((resolve = res), (reject = rej)));
      promise.catch(() => {});
      d = { promise, resolve, reject };
      this.pending.set(i, d);
      if (this.failed && !this.got.has(i)) reject(this.failed);
    }
    return d;
  }

  /** Whether the helper's answer for stretch i is here, or will never come. */
  answered(i: number): boolean {
    return this.got.has(i) || this.failed !== undefined;
  }

  /** Its answer for stretch i (rejected if it failed first). */
  async result(i: number): Promise<Prechecked[]> {
    try {
      return await this.deferred(i).promise;
    } finally {
      this.pending.delete(i);
    }
  }

  /** Once the walk took every stretch the thread ends by itself (its connection closed); cut short, or never given work, it is ended. */
  async stop(finished: boolean): Promise<void> {
    if (!finished || !this.begun || this.failed) await this.worker.terminate();
    await this.exited;
  }
}
