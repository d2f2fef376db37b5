import { randomBytes } from 'node:crypto';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { launchChromium } from './chromium.ts';

// The browser worker port: isolated browser contexts for signup runs and
// hosted-browser connect. The embedded default launches headless Chromium on
// this machine (launchChromium: no download); a remote worker is a Chromium
// reached over the DevTools protocol at BROWSER_WORKER_URL. Without either the
// features answer 503. Bounded: at most `maxContexts` open contexts (beyond:
// WorkerError('capacity')); a drive has a deadline (`drive_deadline_exceeded`)
// and fails when it reports no progress for `stallMs` (`drive_stalled`).

export type WorkerErrorCode = 'capacity' | 'worker_unavailable' | 'drive_deadline_exceeded' | 'drive_stalled';
export class WorkerError extends Error {
  constructor(
    readonly code: WorkerErrorCode,
    message: string,
  ) {
    super(message);
  }
}

export type WorkerLimits = { maxContexts: number; deadlineMs: number; stallMs: number };
export const DEFAULT_WORKER_LIMITS: WorkerLimits = { maxContexts: 4, deadlineMs: 120_000, stallMs: 30_000 };

export type BrowserSession = { id: string; context: BrowserContext; page: Page; close(): Promise<void> };

export interface BrowserWorker {
  readonly kind: 'embedded' | 'remote';
  readonly limits: WorkerLimits;
  /** A fresh isolated context with one page. */
  open(): Promise<BrowserSession>;
  /** Contexts open now. */
  readonly active: number;
  close(): Promise<void>;
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_r, reject) => (timer = setTimeout(() => reject(new Error(`${what} timed out`)), ms)))]).finally(() => clearTimeout(timer));
}

class PooledWorker implements BrowserWorker {
  private browser: Promise<Browser> | undefined;
  active = 0;
  constructor(
    readonly kind: 'embedded' | 'remote',
    private readonly connect: () => Promise<Browser>,
    readonly limits: WorkerLimits,
  ) {}

  private async get(): Promise<Browser> {
    this.browser ??= this.connect();
    try {
      const b = await this.browser;
      if (b.isConnected()) return b;
    } catch {
      // fall through: try once more with a fresh browser
    }
    this.browser = this.connect();
    try {
      return await this.browser;
    } catch (err) {
      this.browser = undefined;
      throw new WorkerError('worker_unavailable', `the ${this.kind} browser worker could not be reached (${(err as Error).message.split('\n')[0]!.slice(0, 200)})`);
    }
  }

  async open(): Promise<BrowserSession> {
    if (this.active >= this.limits.maxContexts) throw new WorkerError('capacity', `the browser worker has ${this.active} of ${this.limits.maxContexts} contexts open`);
    this.active++;
    try {
      // Embedded: one Chromium process per session (the bundled Chromium runs --single-process,
      // where closing one context can take the whole browser down); remote: one shared connection.
      const b = this.kind === 'embedded' ? await withTimeout(this.connect(), 30_000, 'launch') : await this.get();
      let context: BrowserContext | undefined;
      let page: Page | undefined;
      try {
        context = await withTimeout(b.newContext(), 15_000, 'newContext');
        page = await withTimeout(context.newPage(), 15_000, 'newPage');
      } catch (err) {
        if (this.kind === 'embedded') await b.close().catch(() => {});
        throw err;
      }
      const owned = this.kind === 'embedded' ? b : undefined;
      const ctx = context!;
      let closed = false;
      return {
        id: `ctx_${randomBytes(8).toString('hex')}`,
        context: ctx,
        page,
        close: async () => {
          if (closed) return;
          closed = true;
          this.active--;
          await ctx.close().catch(() => {});
          await owned?.close().catch(() => {});
        },
      };
    } catch (err) {
      this.active--;
      if (err instanceof WorkerError) throw err;
      throw new WorkerError('worker_unavailable', `the browser worker refused a context (${(err as Error).message.split('\n')[0]!.slice(0, 200)})`);
    }
  }

  async close(): Promise<void> {
    const b = this.browser;
    this.browser = undefined;
    if (b) await (await b.catch(() => undefined))?.close().catch(() => {});
  }
}

export const embeddedWorker = (limits: Partial<WorkerLimits> = {}): BrowserWorker => new PooledWorker('embedded', launchChromium, { ...DEFAULT_WORKER_LIMITS, ...limits });
/** A Chromium reached over the DevTools protocol (http://host:9222 or ws://...). */
export const remoteWorker = (url: string, limits: Partial<WorkerLimits> = {}): BrowserWorker => new PooledWorker('remote', () => chromium.connectOverCDP(url, { timeout: 10_000 }), { ...DEFAULT_WORKER_LIMITS, ...limits });

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

/** The worker Config.browserWorker names (null: none, the features answer 503). */
export function workerOfConfig(c: { kind: 'remote'; url: string } | { kind: 'embedded' } | { kind: 'none' }, limits: Partial<WorkerLimits> = {}): BrowserWorker | null {
  return c.kind === 'remote' ? remoteWorker(c.url, limits) : c.kind === 'embedded' ? embeddedWorker(limits) : null;
}

/** The worker the configuration names: remote by URL, the embedded default, or none (features answer 503). */
export function workerFromEnv(env: { BROWSER_WORKER_URL?: string; BROWSER_WORKER?: string }, limits: Partial<WorkerLimits> = {}): BrowserWorker | undefined {
  if (env.BROWSER_WORKER_URL) return remoteWorker(env.BROWSER_WORKER_URL, limits);
  if (env.BROWSER_WORKER === 'none') return undefined;
  return embeddedWorker(limits);
}
