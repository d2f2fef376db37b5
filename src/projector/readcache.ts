import type { Position } from '../eventstore/port.ts';
import { appliedKey } from './checkpoints.ts';

// An in-process cache of read-model lookups that is never staler than the
// projection it reads: each entry remembers the last position the projection
// applied when it was filled, and is used only while that has not moved.
// Any event the projection applies moves it and retires every entry,
// so a write acknowledged here (which waits for the projection) is visible to
// the next read here. Positions of other processes' progress arrive by NOTIFY.

export type PositionSource = { position(name: string): Position | undefined; report?(name: string, position: Position): void; epoch?: number };

export class ReadCache<V> {
  private readonly entries = new Map<string, { at: Position; value: V }>();
  private readonly applied: string;

  constructor(
    private readonly progress: PositionSource,
    /** The projection whose read models the entries come from. */
    readonly projection: string,
    private readonly maxEntries = 50_000,
  ) {
    this.applied = appliedKey(projection);
  }

  /**
   * The value stored under `key`, loaded when absent or older than the
   * projection. Stored values are frozen (deeply): every reader shares them,
   * and a response built from one can be checked and encoded once (see
   * src/http/kernel/route.ts).
   */
  async get(key: string, load: () => Promise<V>): Promise<V> {
    const now = this.version();
    if (now === undefined) return load();
    const hit = this.entries.get(key);
    if (hit && hit.at === now) return hit.value;
    const value = deepFreeze(await load());
    // Store only if the projection did not move while loading.
    if (this.version() === now) {
      if (this.entries.size >= this.maxEntries) this.entries.clear();
      this.entries.set(key, { at: now, value });
    }
    return value;
  }

  /**
   * The projection's applied position now: a value derived from entries of
   * this cache may be kept with it and used while this has not changed
   * (undefined: not known yet, keep nothing).
   */
  version(): Position | undefined {
    const at = this.progress.position(this.applied);
    // After a rewind (src/recovery.ts) the same position may name other events: the epoch tells them apart.
    return at === undefined ? undefined : `${this.progress.epoch ?? 0}/${at}`;
  }

  /**
   * The projection's applied position as read from its checkpoint row by
   * this request (src/http/kernel/ratelimit.ts): a write another instance
   * acknowledged may not have reached this process by NOTIFY yet; learning
   * it here retires every entry filled before it.
   */
  learn(applied: Position | null): void {
    if (applied === null || applied === '') return;
    const known = this.progress.position(this.applied);
    if (known === undefined || applied > known) this.progress.report?.(this.applied, applied);
  }

  clear(): void {
    this.entries.clear();
  }
}

/** Whether a value is one the cache shares (deeply frozen), so work derived from it can be kept with it. */
export const isShared = (v: unknown): v is object => v !== null && typeof v === 'object' && Object.isFrozen(v);

function deepFreeze<T>(v: T): T {
  if (v === null || typeof v !== 'object' || ArrayBuffer.isView(v) || Object.isFrozen(v)) return v;
  Object.freeze(v);
  for (const x of Object.values(v as object)) deepFreeze(x);
  return v;
}
