// The browser worker's contexts as a shared, fair resource (issue 38): at most
// `maxContexts` at once, and at most `maxContextsPerOrg` of them held by one
// organization, so one organization's abandoned sessions cannot take every
// context from the others. A caller that may wait (a signup run) queues; when a
// context is released it goes to the waiter whose organization holds the
// fewest contexts now, the longest waiting first among equals, and never to
// one whose organization already holds its share. A caller that may not wait
// (a hosted-connect start, a person watching) is refused at once.
// Unattributed opens (no organization) count toward the total only.

export type SlotLimits = { maxContexts: number; maxContextsPerOrg: number };

/** Why a context could not be had: the worker's total, or the organization's share. */
export class NoSlot extends Error {
  override name = 'NoSlot';
}

/** How a waiting caller takes part: it gives up when `signal` aborts; `onQueued` runs once, when it starts waiting. */
export type SlotWait = { signal: AbortSignal; onQueued?: () => void };

type Waiter = { org: string | undefined; grant: () => void; fail: (err: Error) => void };

export class ContextSlots {
  private total = 0;
  private readonly held = new Map<string, number>();
  private readonly queue: Waiter[] = [];

  /** `limits` is read on every decision, so a test (or an operator's reload) may change it in place. */
  constructor(private readonly limits: SlotLimits) {}

  get active(): number {
    return this.total;
  }

  get waiting(): number {
    return this.queue.length;
  }

  activeOf(org: string): number {
    return this.held.get(org) ?? 0;
  }

  private share(): number {
    return Math.min(this.limits.maxContextsPerOrg, this.limits.maxContexts);
  }

  private fits(org: string | undefined): boolean {
    return this.total < this.limits.maxContexts && (org === undefined || this.activeOf(org) < this.share());
  }

  private take(org: string | undefined): () => void {
    this.total++;
    if (org !== undefined) this.held.set(org, this.activeOf(org) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total--;
      if (org !== undefined) {
        const n = this.activeOf(org) - 1;
        if (n > 0) this.held.set(org, n);
        else this.held.delete(org);
      }
      this.grantWaiting();
    };
  }

  private refusal(org: string | undefined): NoSlot {
    if (org !== undefined && this.activeOf(org) >= this.share() && this.total < this.limits.maxContexts)
      return new NoSlot(`this organization holds ${this.activeOf(org)} of its ${this.share()} browser contexts (of ${this.limits.maxContexts} in all)`);
    return new NoSlot(`the browser worker has ${this.total} of ${this.limits.maxContexts} contexts open`);
  }

  /**
   * A context slot for `org`: the returned function releases it (once). Without
   * `wait`, or when it aborts, rejects with NoSlot when none is free for `org`.
   */
  acquire(org: string | undefined, wait?: SlotWait): Promise<() => void> {
    if (this.fits(org)) return Promise.resolve(this.take(org));
    if (!wait) return Promise.reject(this.refusal(org));
    if (wait.signal.aborted) return Promise.reject(this.refusal(org));
    return new Promise((resolve, reject) => {
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
    });
  }

  /** Hands free slots to waiters: the one whose organization holds the fewest, the earliest among equals. */
  private grantWaiting(): void {
    for (;;) {
      let best = -1;
      for (let i = 0; i < this.queue.length; i++) {
        const w = this.queue[i]!;
        if (!this.fits(w.org)) continue;
        if (best < 0 || this.load(w.org) < this.load(this.queue[best]!.org)) best = i;
      }
      if (best < 0) return;
      const [w] = this.queue.splice(best, 1);
      w!.grant();
    }
  }

  private load(org: string | undefined): number {
    return org === undefined ? 0 : this.activeOf(org);
  }

  /** Every waiter is refused (the worker closes). */
  failWaiting(err: Error): void {
    for (const w of this.queue.splice(0)) w.fail(err);
  }
}
