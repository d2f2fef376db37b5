// The in-memory log of the EventStoreDB double, with the server's semantics:
// - per-stream revisions from 0; expected revision any | no_stream | stream_exists | exact;
// - a refused expectation reports the stream's current revision (or no stream);
// - re-appending events whose ids were already written by the same expectation
//   is idempotent: the server answers the original result and writes nothing;
// - $all positions grow by the size of each record, so they are not dense, and
//   commit = prepare for every event of a single-stream append;
// - system ($-prefixed) streams and event types live in $all beside user events.

export type Expected = 'any' | 'no_stream' | 'stream_exists' | bigint;

export type LogRecord = {
  id: string;
  stream: string;
  revision: bigint;
  type: string;
  contentType: string;
  data: Buffer;
  customMetadata: Buffer;
  commit: bigint;
  prepare: bigint;
  /** .NET ticks (100 ns) since the Unix epoch, as the server sends `created`. */
  createdTicks: bigint;
};

export type Matcher = (r: LogRecord) => boolean;

export type Proposed = { id: string; type: string; contentType: string; data: Buffer; customMetadata: Buffer };

export class AppendRefused extends Error {
  constructor(
    readonly stream: string,
    readonly current: 'no_stream' | bigint,
  ) {
    super(`WrongExpectedVersion on ${stream}: current ${String(current)}`);
  }
}

/** Bytes of record header the position advances by beyond the payload (an approximation of the server's framing). */
const RECORD_OVERHEAD = 87;

export class EsdbLog {
  private readonly records: LogRecord[] = [];
  private readonly streams = new Map<string, LogRecord[]>();
  private readonly byId = new Map<string, LogRecord>();
  /** Next byte position in the transaction file; starts past an epoch record, as a fresh server does. */
  private next = 4096n;
  onAppend: (() => void) | undefined;

  constructor(opts: { now?: () => number } = {}) {
    this.now = opts.now ?? (() => Date.now());
    // A fresh server's $all already holds system events before any client writes.
    this.appendSystem('$users', '$User', { loginName: 'admin' });
    this.appendSystem('$$$scavenges', '$metadata', { $maxAge: 2592000 });
    this.appendSystem('$scavenges', '$scavengeIndexInitialized', {});
  }

  private readonly now: () => number;

  get length(): number {
    return this.records.length;
  }

  at(i: number): LogRecord | undefined {
    return this.records[i];
  }

  stream(name: string): readonly LogRecord[] | undefined {
    return this.streams.get(name);
  }

  /** Index of the first record whose position is > `pos` (subscriptions start after their position). */
  indexAfter(pos: bigint): number {
    let lo = 0;
    let hi = this.records.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.records[mid]!.commit <= pos) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Index of the first record whose position is >= `pos` (reads start at their position, inclusive). */
  indexAtOrAfter(pos: bigint): number {
    let lo = 0;
    let hi = this.records.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.records[mid]!.commit < pos) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  readAllForwards(from: bigint, count: bigint, match: Matcher): LogRecord[] {
    const out: LogRecord[] = [];
    for (let i = this.indexAtOrAfter(from); i < this.records.length && BigInt(out.length) < count; i++) {
      const r = this.records[i]!;
      if (match(r)) out.push(r);
    }
    return out;
  }

  /** Backwards from `before` (exclusive; undefined = the end). */
  readAllBackwards(before: bigint | undefined, count: bigint, match: Matcher): LogRecord[] {
    const out: LogRecord[] = [];
    const start = before === undefined ? this.records.length - 1 : this.indexAtOrAfter(before) - 1;
    for (let i = start; i >= 0 && BigInt(out.length) < count; i--) {
      const r = this.records[i]!;
      if (match(r)) out.push(r);
    }
    return out;
  }

  appendSystem(stream: string, type: string, data: Record<string, unknown>): void {
    const current = this.streams.get(stream);
    this.write(stream, current, [
      { id: crypto.randomUUID(), type, contentType: 'application/json', data: Buffer.from(JSON.stringify(data)), customMetadata: Buffer.alloc(0) },
    ]);
  }

  /** Appends atomically; returns the last revision and position written (or of the original write when idempotent). */
  append(stream: string, expected: Expected, events: readonly Proposed[]): { revision: bigint; commit: bigint; prepare: bigint } {
    const current = this.streams.get(stream);
    const last: 'no_stream' | bigint = current && current.length > 0 ? BigInt(current.length - 1) : 'no_stream';
    const idem = this.idempotent(stream, current, expected, events);
    if (idem) return idem;
    const ok = expected === 'any' || (expected === 'no_stream' ? last === 'no_stream' : expected === 'stream_exists' ? last !== 'no_stream' : last === expected);
    if (!ok) throw new AppendRefused(stream, last);
    const written = this.write(stream, current, events);
    return { revision: written.revision, commit: written.commit, prepare: written.prepare };
  }

  /**
   * The server's idempotency check: when the first proposed id already sits in
   * the stream at the revision the expectation points to (or anywhere, for
   * `any`), and every following id matches the following events, the append
   * is answered with the original result. A partial match is a conflict.
   */
  private idempotent(stream: string, current: LogRecord[] | undefined, expected: Expected, events: readonly Proposed[]) {
    const first = this.byId.get(events[0]!.id);
    if (!first || first.stream !== stream || !current) return undefined;
    const startRev = expected === 'no_stream' ? 0n : typeof expected === 'bigint' ? expected + 1n : expected === 'any' || expected === 'stream_exists' ? first.revision : undefined;
    if (startRev === undefined || first.revision !== startRev) return undefined;
    for (let k = 0; k < events.length; k++) {
      const r = current[Number(startRev) + k];
      if (!r || r.id !== events[k]!.id) throw new AppendRefused(stream, BigInt(current.length - 1));
    }
    const lastRec = current[Number(startRev) + events.length - 1]!;
    return { revision: lastRec.revision, commit: lastRec.commit, prepare: lastRec.prepare };
  }

  private write(stream: string, current: LogRecord[] | undefined, events: readonly Proposed[]): LogRecord {
    const list = current ?? [];
    if (!current) this.streams.set(stream, list);
    const ticks = BigInt(this.now()) * 10_000n;
    let last!: LogRecord;
    for (const e of events) {
      const pos = this.next;
      this.next += BigInt(RECORD_OVERHEAD + stream.length + e.type.length + e.data.length + e.customMetadata.length);
      last = { ...e, stream, revision: BigInt(list.length), commit: pos, prepare: pos, createdTicks: ticks };
      list.push(last);
      this.records.push(last);
      this.byId.set(e.id, last);
    }
    this.onAppend?.();
    return last;
  }
}
