import type { BrowserSession } from '../adapters/browser/worker.ts';
import { SIGNUP_QUEUE_WAIT_MS } from '../limits.ts';
import type { Ports } from './context.ts';

// What a browser signup run keeps in the process that runs it: the paused page
// waiting for its verification code, and the run's place in the browser
// worker's queue while it waits for a context. Both are bounded by the app's
// clock (deps.now): a paused page until the run's pause expires (the
// needs_verification event's expires_at, renewed by a resend), a queued run
// until SIGNUP_QUEUE_WAIT_MS after it queued (then it fails with `capacity`).
// One sweep checks both every second while there is anything to check.
// Another instance reaches a paused page through the run's claim in
// browser_owners (browser-owners.ts): the code never leaves the request that
// carries it to this process.

type Paused = { deps: Ports; session: BrowserSession; deliver: (code: string) => void; resend: () => Promise<void>; expiresAt: number };
type Queued = { deps: Ports; until: number; giveUp: AbortController };

const paused = new Map<string, Paused>();
const queued = new Map<string, Queued>();
const SWEEP_EVERY_MS = 1_000;
let sweeper: NodeJS.Timeout | undefined;

/** Tunables tests may change: how long a run waits queued for a browser context. */
export const signupQueueConfig = { waitMs: SIGNUP_QUEUE_WAIT_MS };

function armSweep(): void {
  sweeper ??= setInterval(() => void sweep(), SWEEP_EVERY_MS);
  sweeper.unref();
}

async function sweep(): Promise<void> {
  sweepQueuedRuns();
  await sweepPausedPages();
}

/** Closes the paused pages whose pause has expired (by each app's clock). */
export async function sweepPausedPages(): Promise<void> {
  for (const [id, p] of paused)
    if (p.deps.now().getTime() >= p.expiresAt) {
      paused.delete(id);
      await p.session.close();
    }
  stopWhenIdle();
}

/** Gives up the queued runs whose wait is over (by each app's clock): they fail with `capacity`. */
export function sweepQueuedRuns(): void {
  for (const [id, q] of queued)
    if (q.deps.now().getTime() >= q.until) {
      queued.delete(id);
      q.giveUp.abort();
    }
  stopWhenIdle();
}

function stopWhenIdle(): void {
  if (paused.size === 0 && queued.size === 0 && sweeper) {
    clearInterval(sweeper);
    sweeper = undefined;
  }
}

export function keepPaused(runId: string, p: Paused): void {
  paused.set(runId, p);
  armSweep();
}

/** A resend renewed the run's pause: the page lives until the new expiry. */
export function renewPause(runId: string, expiresAt: string | null): void {
  const p = paused.get(runId);
  if (p && expiresAt) p.expiresAt = Date.parse(expiresAt);
}

export function dropPaused(runId: string): void {
  paused.delete(runId);
}

/** Whether this process holds the run's paused page. */
export const holdsPaused = (deps: Ports, runId: string) => paused.get(runId)?.deps === deps;

/** The run waits for a context: the returned signal aborts when its wait is over; `done` ends the wait. */
export function enqueue(deps: Ports, runId: string): { signal: AbortSignal; until: Date; done: () => void } {
  const q: Queued = { deps, until: deps.now().getTime() + signupQueueConfig.waitMs, giveUp: new AbortController() };
  queued.set(runId, q);
  armSweep();
  return { signal: q.giveUp.signal, until: new Date(q.until), done: () => void (queued.get(runId) === q && queued.delete(runId)) };
}

/** Hands the code to the paused page; false when the page is gone (the run is then failed). */
export function deliverCode(runId: string, code: string): boolean {
  const p = paused.get(runId);
  if (!p) return false;
  paused.delete(runId);
  p.deliver(code);
  return true;
}

/** Clicks the page's resend button; false when the page is gone or the resend failed (the page is then closed: the run is failed). */
export async function resendCode(runId: string): Promise<boolean> {
  const p = paused.get(runId);
  if (!p) return false;
  try {
    await p.resend();
    return true;
  } catch {
    if (paused.get(runId) === p) paused.delete(runId);
    await p.session.close();
    return false;
  }
}

/** The app closes: its paused pages close (their runs fail on a later verification: resume_inputs_unavailable) and its queued runs stop waiting. */
export async function closeAllOf(deps: Ports): Promise<void> {
  for (const [id, q] of queued)
    if (q.deps === deps) {
      queued.delete(id);
      q.giveUp.abort();
    }
  for (const [id, p] of paused)
    if (p.deps === deps) {
      paused.delete(id);
      await p.session.close();
    }
  stopWhenIdle();
}
