// The browser worker's contexts as a shared, fair and work-conserving resource
// (issues 38 and 61). An instance's worker holds at most `maxContexts` at once
// (its machine's Chromium processes): that bound is hard. An organization may
// use any free context; its share (`maxContextsPerOrg`) is what it is
// guaranteed when others want contexts too, counted across every instance
// (the holdings of the others are read from PostgreSQL through SharedHoldings):
//
// - a free context goes to whoever asks, when nobody waits;
// - a context freed while callers wait goes first to an organization holding
//   less than its share, then to the one holding the fewest, the longest
//   waiting among equals: new work of an organization over its share waits
//   while one under its share waits;
// - a caller under its share that finds none free reclaims a context of an
//   organization above its share that nobody is using now (a hosted-connect
//   page nobody watches: the holder marks it `reclaimable`), the one of the
//   organization holding most, unused longest, first.
//
// A caller that may wait queues until its signal aborts (a signup run by the
// app's clock; a hosted-connect start a bounded time, hosted-browser.ts); one
// that may not is refused at once when none is free. Unattributed opens (no
// organization) count toward the total only.

export type SlotLimits = { maxContexts: number; maxContextsPerOrg: number };

/** Contexts held on the other instances (PostgreSQL), and this instance's own, recorded for them. Absent: this instance alone. */
export interface SharedHoldings {
  /** How many contexts each of `orgs` holds on other instances now (absent: none). */
  elsewhere(orgs: string[]): Promise<Map<string, number>>;
  /** This instance holds context `id` for `org` (best effort: a failure only makes the others count less). */
  hold(id: string, org: string): Promise<void>;
  drop(id: string): Promise<void>;
}

/** What a refusal knows: the organization's holdings here and everywhere, its share, and when a context here frees at the latest. */
export type SlotState = { held: number; heldHere: number; share: number; maxContexts: number; active: number; freesBy: Date | undefined };

/** Why a context could not be had (the worker's contexts all in use, and none freed in time). */
export class NoSlot extends Error {
  override name = 'NoSlot';
  constructor(
    message: string,
    readonly state: SlotState,
  ) {
    super(message);
  }
}

/** How a waiting caller takes part: it gives up when `signal` aborts; `onQueued` runs once, when it starts waiting. */
export type SlotWait = { signal: AbortSignal; onQueued?: () => void };

/**
 * A held context: call it to release (once). `reclaimable(fn)` says the context
 * is not in use now and `fn` closes it (undefined: in use again); `freesBy(at)`
 * says when it frees at the latest (for the refusal's Retry-After).
 */
export type Lease = (() => void) & { reclaimable(fn: (() => Promise<void>) | undefined): void; freesBy(at: Date | undefined): void };

type Waiter = { org: string | undefined; grant: () => void; fail: (err: Error) => void };
type Held = { org: string | undefined; reclaim: (() => Promise<void>) | undefined; unusedSince: number; freesBy: Date | undefined; reclaiming: boolean };

let nextId = 0;

export class ContextSlots {
  private total = 0;
  private readonly held = new Map<string, number>();
  private readonly queue: Waiter[] = [];
  private readonly leases = new Map<string, Held>();
  /** Each organization's holdings on the other instances, as last read. */
  private readonly others = new Map<string, number>();
  private shared: SharedHoldings | undefined;
  private readonly prefix = `slot_${process.pid}_${Date.now().toString(36)}_`;

  /** `limits` is read on every decision, so a test (or an operator's reload) may change it in place. */
  constructor(private readonly limits: SlotLimits) {}

  /** Counts holdings across instances through `shared` from now on. */
  share(shared: SharedHoldings): void {
    this.shared = shared;
  }

  get active(): number {
    return this.total;
  }

  get waiting(): number {
    return this.queue.length;
  }

  activeOf(org: string): number {
    return this.held.get(org) ?? 0;
  }

  private get perOrg(): number {
    return Math.min(this.limits.maxContextsPerOrg, this.limits.maxContexts);
  }

  /** Contexts `org` holds on every instance (this one's counted now, the others' as last read). */
  private everywhere(org: string | undefined): number {
    return org === undefined ? 0 : this.activeOf(org) + (this.others.get(org) ?? 0);
  }

  private underShare(org: string | undefined): boolean {
    return org !== undefined && this.everywhere(org) < this.perOrg;
  }

  private async readOthers(org: string | undefined): Promise<void> {
    if (!this.shared) return;
    const orgs = [...new Set([org, ...this.queue.map((w) => w.org), ...[...this.leases.values()].map((l) => l.org)].filter((o): o is string => o !== undefined))];
    if (orgs.length === 0) return;
    const counts = await this.shared.elsewhere(orgs).catch(() => undefined); // unreadable: decide on what this instance knows
    if (!counts) return;
    for (const o of orgs) this.others.set(o, counts.get(o) ?? 0);
  }

  private take(org: string | undefined): Lease {
    this.total++;
    if (org !== undefined) this.held.set(org, this.activeOf(org) + 1);
    const id = `${this.prefix}${nextId++}`;
    const h: Held = { org, reclaim: undefined, unusedSince: Date.now(), freesBy: undefined, reclaiming: false };
    this.leases.set(id, h);
    const shared = this.shared;
    const holding = org !== undefined && shared ? shared.hold(id, org).catch(() => {}) : undefined;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.leases.delete(id);
      this.total--;
      if (org !== undefined) {
        const n = this.activeOf(org) - 1;
        if (n > 0) this.held.set(org, n);
        else this.held.delete(org);
        // After the hold's own write: a drop that overtook it would leave the row behind.
        void holding?.then(() => shared!.drop(id)).catch(() => {});
      }
      this.grantWaiting();
    };
    return Object.assign(release, {
      reclaimable: (fn: (() => Promise<void>) | undefined) => {
        if (released) return;
        if (fn && !h.reclaim) h.unusedSince = Date.now();
        h.reclaim = fn;
        if (fn) this.reclaimForWaiters();
      },
      freesBy: (at: Date | undefined) => void (h.freesBy = at),
    });
  }

  /** What a refusal says about `org`. */
  state(org: string | undefined): SlotState {
    let freesBy: Date | undefined;
    for (const l of this.leases.values()) if (l.freesBy && (!freesBy || l.freesBy < freesBy)) freesBy = l.freesBy;
    return { held: this.everywhere(org), heldHere: org === undefined ? 0 : this.activeOf(org), share: this.perOrg, maxContexts: this.limits.maxContexts, active: this.total, freesBy };
  }

  private refusal(org: string | undefined): NoSlot {
    return new NoSlot(`the browser worker has ${this.total} of ${this.limits.maxContexts} contexts open`, this.state(org));
  }

  /**
   * A context slot for `org`: the returned lease releases it (once). Without
   * `wait`, or when it aborts, rejects with NoSlot when none could be had.
   */
  async acquire(org: string | undefined, wait?: SlotWait): Promise<Lease> {
    if (this.shared) await this.readOthers(org); // (without, the decision is taken in the same turn)
    if (this.total < this.limits.maxContexts && this.queue.length === 0) return this.take(org);
    if (!wait || wait.signal.aborted) {
      // Refused at once; an organization under its share still gets back a context above another's share for its next try.
      if (this.underShare(org)) this.reclaimOne();
      throw this.refusal(org);
    }
    return new Promise<Lease>((resolve, reject) => {
      const waiter: Waiter = {
        org,
        grant: () => {
          wait.signal.removeEventListener('abort', onAbort);
          resolve(this.take(org));
        },
        fail: reject,
      };
      const onAbort = () => {
        const i = this.queue.indexOf(waiter);
        if (i < 0) return;
        this.queue.splice(i, 1);
        reject(this.refusal(org));
      };
      wait.signal.addEventListener('abort', onAbort, { once: true });
      this.queue.push(waiter);
      wait.onQueued?.();
      this.grantWaiting();
      this.reclaimForWaiters();
    });
  }

  /** Hands free slots to waiters: one under its share first, then the organization holding the fewest, the earliest among equals. */
  private grantWaiting(): void {
    while (this.total < this.limits.maxContexts && this.queue.length > 0) {
      let best = 0;
      for (let i = 1; i < this.queue.length; i++) if (this.before(this.queue[i]!.org, this.queue[best]!.org)) best = i;
      const [w] = this.queue.splice(best, 1);
      w!.grant();
    }
  }

  private before(a: string | undefined, b: string | undefined): boolean {
    const ua = this.underShare(a);
    if (ua !== this.underShare(b)) return ua;
    return this.everywhere(a) < this.everywhere(b);
  }

  /** Takes back, for each waiter under its share not yet served, one unused context above another organization's share. */
  private reclaimForWaiters(): void {
    const owed = this.queue.filter((w) => this.underShare(w.org)).length;
    let pending = [...this.leases.values()].filter((l) => l.reclaiming).length;
    while (pending < owed && this.reclaimOne()) pending++;
  }

  /** Closes the unused context of the organization most above its share (unused longest among its own); false when there is none. */
  private reclaimOne(): boolean {
    let best: Held | undefined;
    for (const l of this.leases.values()) {
      if (!l.reclaim || l.reclaiming || this.everywhere(l.org) <= this.perOrg) continue;
      if (!best || this.everywhere(l.org) > this.everywhere(best.org) || (this.everywhere(l.org) === this.everywhere(best.org) && l.unusedSince < best.unusedSince)) best = l;
    }
    if (!best) return false;
    best.reclaiming = true;
    void best.reclaim!().catch(() => {});
    return true;
  }

  /** Every waiter is refused (the worker closes). */
  failWaiting(err: Error): void {
    for (const w of this.queue.splice(0)) w.fail(err);
  }
}
