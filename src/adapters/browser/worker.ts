import { randomBytes } from 'node:crypto';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { BROWSER_MAX_CONTEXTS, BROWSER_MAX_CONTEXTS_PER_ORG } from '../../limits.ts';
import { findChromium, launchChromium, playwright } from './chromium.ts';
import { ContextSlots, NoSlot, type Lease, type SharedHoldings, type SlotLimits, type SlotState, type SlotWait } from './slots.ts';

// The browser worker port: isolated browser contexts for signup runs and
// hosted-browser connect. The embedded default launches headless Chromium on
// this machine (launchChromium: no download); a remote worker is a Chromium
// reached over the DevTools protocol at BROWSER_WORKER_URL. Without either the
// features answer 503. Bounded: at most `maxContexts` open contexts; an
// organization may use any free one, and is guaranteed `maxContextsPerOrg` of
// them across instances when others want contexts too (src/adapters/browser/slots.ts:
// when none is free, WorkerError('capacity') at once, or a fair queue for a
// caller that waits); a drive has a deadline (`drive_deadline_exceeded`) and fails when it
// reports no progress for `stallMs` (`drive_stalled`).

export type WorkerErrorCode = 'capacity' | 'worker_unavailable' | 'drive_deadline_exceeded' | 'drive_stalled';
export class WorkerError extends Error {
  constructor(
    readonly code: WorkerErrorCode,
    message: string,
    /** For `capacity`: the organization's holdings and when a context frees. */
    readonly slots?: SlotState,
  ) {
    super(message);
  }
}

export type WorkerLimits = SlotLimits & { deadlineMs: number; stallMs: number };
export const DEFAULT_WORKER_LIMITS: WorkerLimits = { maxContexts: BROWSER_MAX_CONTEXTS, maxContextsPerOrg: BROWSER_MAX_CONTEXTS_PER_ORG, deadlineMs: 120_000, stallMs: 30_000 };

/**
 * An open context. `reclaimable(fn)`: nobody uses it now, and `fn` closes it
 * if an organization under its share needs it (undefined: in use again);
 * `freesBy(at)`: when it closes at the latest.
 */
export type BrowserSession = { id: string; context: BrowserContext; page: Page; close(): Promise<void>; reclaimable(fn: (() => Promise<void>) | undefined): void; freesBy(at: Date | undefined): void };

/** Whose context it is (its organization's share), and whether the caller waits in the queue for one. */
export type OpenOptions = { org?: string; wait?: SlotWait };

export interface BrowserWorker {
  readonly kind: 'embedded' | 'remote';
  readonly limits: WorkerLimits;
  /** Where other instances reach this one for the contexts it holds (INSTANCE_URL); undefined: the address the service listens on. */
  readonly instanceUrl?: string | undefined;
  /** A fresh isolated context with one page, counted against `org`'s share. */
  open(opts?: OpenOptions): Promise<BrowserSession>;
  /** Contexts open (or being opened) now, in all and for one organization; callers waiting for one. */
  readonly active: number;
  activeOf(org: string): number;
  readonly waiting: number;
  /** Counts each organization's contexts on the other instances too (PostgreSQL: src/usecases/browser-owners.ts). */
  shareHoldings?(shared: SharedHoldings): void;
  close(): Promise<void>;
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_r, reject) => (timer = setTimeout(() => reject(new Error(`${what} timed out`)), ms)))]).finally(() => clearTimeout(timer));
}

class PooledWorker implements BrowserWorker {
  private browser: Promise<Browser> | undefined;
  private readonly slots: ContextSlots;
  constructor(
    readonly kind: 'embedded' | 'remote',
    private readonly connect: () => Promise<Browser>,
    readonly limits: WorkerLimits,
    readonly instanceUrl: string | undefined,
    /** Whether contexts share one browser process (else one process per session, closed with it). */
    private readonly shared: () => Promise<boolean>,
  ) {
    this.slots = new ContextSlots(limits);
  }

  get active(): number {
    return this.slots.active;
  }

  get waiting(): number {
    return this.slots.waiting;
  }

  activeOf(org: string): number {
    return this.slots.activeOf(org);
  }

  shareHoldings(shared: SharedHoldings): void {
    this.slots.share(shared);
  }

  private async get(): Promise<Browser> {
    this.browser ??= withTimeout(this.connect(), 30_000, 'launch');
    try {
      const b = await this.browser;
      if (b.isConnected()) return b;
    } catch {
      // fall through: try once more with a fresh browser
    }
    this.browser = withTimeout(this.connect(), 30_000, 'launch');
    try {
      return await this.browser;
    } catch (err) {
      this.browser = undefined;
      throw new WorkerError('worker_unavailable', `the ${this.kind} browser worker could not be reached (${(err as Error).message.split('\n')[0]!.slice(0, 200)})`);
    }
  }

  async open(opts: OpenOptions = {}): Promise<BrowserSession> {
    let release: Lease;
    try {
      release = await this.slots.acquire(opts.org, opts.wait);
    } catch (err) {
      throw err instanceof NoSlot ? new WorkerError('capacity', err.message, err.state) : err;
    }
    try {
      // One browser, each session in its own context (a remote worker; the embedded one on a
      // multi-process Chromium), or one Chromium process per session, closed with it (the bundled
      // Chromium runs --single-process, where closing one context can take the whole browser down).
      const shared = await this.shared();
      const b = shared ? await this.get() : await withTimeout(this.connect(), 30_000, 'launch');
      const owned = shared ? undefined : b;
      let context: BrowserContext | undefined;
      let page: Page | undefined;
      try {
        context = await withTimeout(b.newContext(), 15_000, 'newContext');
        page = await withTimeout(context.newPage(), 15_000, 'newPage');
      } catch (err) {
        await context?.close().catch(() => {});
        await owned?.close().catch(() => {});
        throw err;
      }
      const ctx = context!;
      let closed = false;
      return {
        id: `ctx_${randomBytes(8).toString('hex')}`,
        context: ctx,
        page,
        close: async () => {
          if (closed) return;
          closed = true;
          await ctx.close().catch(() => {});
          await owned?.close().catch(() => {});
          release();
        },
        reclaimable: (fn) => release.reclaimable(fn),
        freesBy: (at) => release.freesBy(at),
      };
    } catch (err) {
      release();
      if (err instanceof WorkerError) throw err;
      throw new WorkerError('worker_unavailable', `the browser worker refused a context (${(err as Error).message.split('\n')[0]!.slice(0, 200)})`);
    }
  }

  async close(): Promise<void> {
    this.slots.failWaiting(new WorkerError('capacity', 'the browser worker closed'));
    const b = this.browser;
    this.browser = undefined;
    if (b) await (await b.catch(() => undefined))?.close().catch(() => {});
  }
}

type WorkerOptions = Partial<WorkerLimits> & { instanceUrl?: string | undefined };
const limitsOf = (o: WorkerOptions): WorkerLimits => ({
  maxContexts: o.maxContexts ?? DEFAULT_WORKER_LIMITS.maxContexts,
  maxContextsPerOrg: o.maxContextsPerOrg ?? DEFAULT_WORKER_LIMITS.maxContextsPerOrg,
  deadlineMs: o.deadlineMs ?? DEFAULT_WORKER_LIMITS.deadlineMs,
  stallMs: o.stallMs ?? DEFAULT_WORKER_LIMITS.stallMs,
});

/** A multi-process Chromium (Debian's, CHROMIUM_PATH) holds every session as a context; the bundled single-process one, a process each. */
const multiProcess = async (): Promise<boolean> => !((await findChromium())?.args ?? []).includes('--single-process');
export const embeddedWorker = (o: WorkerOptions = {}): BrowserWorker => new PooledWorker('embedded', launchChromium, limitsOf(o), o.instanceUrl, multiProcess);
/** A Chromium reached over the DevTools protocol (http://host:9222 or ws://...). */
export const remoteWorker = (url: string, o: WorkerOptions = {}): BrowserWorker => new PooledWorker('remote', async () => (await playwright()).chromium.connectOverCDP(url, { timeout: 10_000 }), limitsOf(o), o.instanceUrl, async () => true);

/**
 * Runs `steps` under the worker's bounds: rejects with drive_deadline_exceeded
 * after `deadlineMs`, with drive_stalled when `progress()` is not called for
 * `stallMs`. The session is closed on a bound so a hung page stops at once.
 */
export async function drive<T>(session: BrowserSession, limits: Pick<WorkerLimits, 'deadlineMs' | 'stallMs'>, steps: (progress: (step: string) => void) => Promise<T>): Promise<T> {
  let lastStep = 'start';
  let stallTimer: NodeJS.Timeout | undefined;
  let deadlineTimer: NodeJS.Timeout | undefined;
  let progressHook: () => void = () => {};
  const bound = new Promise<never>((_resolve, reject) => {
    const fail = (code: WorkerErrorCode, message: string) => {
      reject(Object.assign(new WorkerError(code, message), { step: lastStep }));
      void session.close();
    };
    deadlineTimer = setTimeout(() => fail('drive_deadline_exceeded', `the run did not finish within ${limits.deadlineMs} ms`), limits.deadlineMs);
    const arm = () => {
      clearTimeout(stallTimer);
      stallTimer = setTimeout(() => fail('drive_stalled', `no progress for ${limits.stallMs} ms after step ${lastStep}`), limits.stallMs);
    };
    arm();
    progressHook = arm;
  });
  try {
    return await Promise.race([
      steps((step) => {
        lastStep = step;
        progressHook();
      }),
      bound,
    ]);
  } finally {
    progressHook = () => {};
    clearTimeout(stallTimer);
    clearTimeout(deadlineTimer);
  }
}

/** The worker Config.browserWorker names, with its bounds and the instance's URL (null: none, the features answer 503). */
export function workerOfConfig(c: ({ kind: 'remote'; url: string } | { kind: 'embedded' } | { kind: 'none' }) & WorkerOptions, limits: WorkerOptions = {}): BrowserWorker | null {
  const { kind: _k, ...bounds } = c as { kind: string } & WorkerOptions;
  const o = { ...bounds, ...limits };
  return c.kind === 'remote' ? remoteWorker(c.url, o) : c.kind === 'embedded' ? embeddedWorker(o) : null;
}

/** The worker the configuration names: remote by URL, the embedded default, or none (features answer 503). */
export function workerFromEnv(env: { BROWSER_WORKER_URL?: string; BROWSER_WORKER?: string }, limits: WorkerOptions = {}): BrowserWorker | undefined {
  if (env.BROWSER_WORKER_URL) return remoteWorker(env.BROWSER_WORKER_URL, limits);
  if (env.BROWSER_WORKER === 'none') return undefined;
  return embeddedWorker(limits);
}
