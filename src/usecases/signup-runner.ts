import type { Tenant } from '../../commands/consumer.ts';
import { SIGNUP_PAUSE_TTL_MS, signupRunDecider, signupRunStream, type SignupRunCommand } from '../../commands/signup-run.ts';
import { drive, WorkerError, workerFromEnv, type BrowserSession, type BrowserWorker } from '../adapters/browser/worker.ts';
import { handleCommand, Rejection, type HandleOptions } from '../eventstore/handler.ts';
import type { Decider } from '../eventstore/handler.ts';
import { checkCredential, encodeCredential } from '../providers/credentials.ts';
import { upsertConnection } from './connections.ts';
import { probeProvider } from './providers.ts';
import type { Ports } from './context.ts';

// The in-process task behind a browser signup run. It drives the sandbox (or
// provider) signup site in a browser-worker context, appending each state
// change to the run's stream: page 1 (e-mail, name) → pause on page 2 until
// the verification code is given → type it → read the key on page 3 → vault →
// connection (the same streams as POST /v1/connections) → probe. The paused
// page lives in this process; a verification for a run whose page is gone
// (restart, pause expired) fails it with `resume_inputs_unavailable`.

// A paused page is kept until the run's pause expires by the app's clock (deps.now: the
// needs_verification event's expires_at, renewed by a resend), then closed by the sweep.
type Paused = { deps: Ports; session: BrowserSession; deliver: (code: string) => void; resend: () => Promise<void>; expiresAt: number };
const paused = new Map<string, Paused>();
const SWEEP_EVERY_MS = 1_000;
let sweeper: NodeJS.Timeout | undefined;

/** Closes the paused pages whose pause has expired (by each app's clock); runs every second while any page is paused. */
export async function sweepPausedPages(): Promise<void> {
  for (const [id, p] of paused)
    if (p.deps.now().getTime() >= p.expiresAt) {
      paused.delete(id);
      await p.session.close();
    }
  if (paused.size === 0 && sweeper) {
    clearInterval(sweeper);
    sweeper = undefined;
  }
}

function keepPaused(runId: string, p: Paused): void {
  paused.set(runId, p);
  sweeper ??= setInterval(() => void sweepPausedPages(), SWEEP_EVERY_MS);
  sweeper.unref();
}

/** A resend renewed the run's pause: the page lives until the new expiry. */
export function renewPause(runId: string, expiresAt: string | null): void {
  const p = paused.get(runId);
  if (p && expiresAt) p.expiresAt = Date.parse(expiresAt);
}
const workers = new WeakMap<Ports, BrowserWorker | null>();

/**
 * The browser worker of this app: the one the builder gave (deps.browserWorker), else the configured one
 * (BROWSER_WORKER_URL, BROWSER_WORKER=none) or the embedded default. `onClose` registers what runs when
 * the app closes (the worker and this app's paused pages end with it).
 */
export function workerOf(deps: Ports, onClose: (hook: () => Promise<void>) => void): BrowserWorker | undefined {
  if (!workers.has(deps)) {
    const w = deps.browserWorker !== undefined ? (deps.browserWorker ?? undefined) : workerFromEnv(process.env);
    workers.set(deps, w ?? null);
    onClose(async () => {
      // Paused pages of this app end with it (their runs fail on a later verification: resume_inputs_unavailable).
      for (const [id, p] of paused)
        if (p.deps === deps) {
          paused.delete(id);
          await p.session.close();
        }
      await w?.close();
    });
  }
  return workers.get(deps) ?? undefined;
}

export const signupUrlOf = (deps: Ports, serverId: string) => (deps.providers.runtime.sandbox ? `${deps.providers.runtime.sandbox.http}/_sandbox/${serverId}/signup` : undefined);

type RunArgs = { runId: string; tenant: Tenant; serverId: string; userId: string; email: string; name: string };

function commander(deps: Ports, tenant: Tenant) {
  const cctx = { orgId: tenant.orgId, projectId: tenant.projectId, actor: { kind: 'system' as const, id: 'signup-run' }, requestId: null, now: deps.now };
  return async <S, C>(decider: Decider<S, C>, stream: string, command: C, opts: HandleOptions<S> = {}) => {
    const r = await handleCommand(deps.store, decider, stream, command, cctx, { serialize: true, ...opts });
    if (r.lastPosition) await deps.readSide.waitFor(r.lastPosition, deps.readWaitMs);
    return r;
  };
}

/** Starts the run in the background; every outcome is an event on the run's stream. */
export function launchRun(deps: Ports, worker: BrowserWorker, a: RunArgs): void {
  void runSignup(deps, worker, a).catch(() => {}); // every outcome it can reach is already an event
}

async function runSignup(deps: Ports, worker: BrowserWorker, a: RunArgs): Promise<void> {
  const run = commander(deps, a.tenant);
  const stream = signupRunStream(a.runId);
  const act = (c: SignupRunCommand) => run(signupRunDecider, stream, c);
  const fail = async (code: string, step: string, detail: string | null) => act({ type: 'fail', code, failedStepId: step, detail: detail?.slice(0, 500) ?? null }).catch(() => {});
  const url = signupUrlOf(deps, a.serverId);
  if (!url) return void (await fail('provider_account_not_registered', 'open_signup', 'no signup site is configured for this provider'));
  let session: BrowserSession;
  try {
    session = await worker.open();
  } catch (err) {
    return void (await fail(err instanceof WorkerError && err.code === 'capacity' ? 'capacity' : 'flow_failed', 'open_browser', (err as Error).message));
  }
  let step = 'open_signup';
  const failOf = async (err: unknown) => {
    const code = err instanceof WorkerError && (err.code === 'drive_deadline_exceeded' || err.code === 'drive_stalled') ? err.code : err instanceof Rejection && err.code === 'no_credential_captured' ? err.code : 'flow_failed';
    await session.close();
    await fail(code, (err as { step?: string }).step ?? step, (err as Error).message.split('\n')[0] ?? null);
  };
  const page = session.page;
  const limits = worker.limits;
  let code: string;
  try {
    const prompt = await drive(session, limits, async (progress) => {
      progress((step = 'open_signup'));
      await page.goto(url, { timeout: limits.stallMs });
      progress((step = 'fill_signup'));
      await page.fill('#email', a.email, { timeout: 5_000 });
      await page.fill('#name', a.name, { timeout: 5_000 });
      progress((step = 'submit_signup'));
      await Promise.all([page.waitForURL(/\/verify/, { timeout: limits.stallMs }), page.click('#submit', { timeout: 5_000 })]);
      progress((step = 'await_verification'));
      return ((await page.textContent('#prompt', { timeout: 5_000 })) ?? 'Enter the code the provider e-mailed').trim();
    });
    const codeP = new Promise<string>((resolve) => {
      keepPaused(a.runId, {
        deps,
        session,
        deliver: resolve,
        expiresAt: deps.now().getTime() + SIGNUP_PAUSE_TTL_MS, // until the pause event says
        resend: async () => {
          await Promise.all([page.waitForURL(/\/verify/, { timeout: limits.stallMs }), page.click('#resend', { timeout: 5_000 })]);
        },
      });
    });
    const pausedAt = (await act({ type: 'pause', prompt, mechanism: 'email_code', resend: true })).events[0];
    if (pausedAt?.type === 'signup_run.needs_verification') renewPause(a.runId, pausedAt.data.expires_at);
    code = await codeP;
  } catch (err) {
    paused.delete(a.runId);
    return failOf(err);
  }
  let key: string;
  try {
    key = await drive(session, limits, async (progress) => {
      progress((step = 'submit_code'));
      await page.fill('#code', code, { timeout: 5_000 });
      await Promise.all([page.waitForURL(/\/done/, { timeout: limits.stallMs }), page.click('#verify', { timeout: 5_000 })]);
      progress((step = 'capture_credential'));
      const el = await page.$('#api-key');
      const text = el ? ((await el.textContent()) ?? '').trim() : '';
      if (!text) throw new Rejection('no_credential_captured', 'the last page showed no API key');
      return text;
    });
  } catch (err) {
    return failOf(err);
  }
  await session.close();
  step = 'store_connection';
  const p = deps.providers.runtime.catalog.get(a.serverId);
  let connectionId: string;
  let ref: string | undefined;
  try {
    if (!p) throw new Error('provider left the catalog');
    const checked = checkCredential(p, key);
    ref = await deps.vault.put(a.tenant.orgId, `connection:${p.id}`, encodeCredential(checked.credential));
    // The same create-or-rotate as the OAuth callback and hosted connect, under this run's system actor.
    connectionId = await upsertConnection({ ports: deps, run: commander(deps, a.tenant) }, a.tenant, p.id, a.userId, ref, undefined, p.auth_type);
  } catch (err) {
    if (ref) await deps.vault.delete(a.tenant.orgId, ref).catch(() => {});
    return void (await fail('no_credential_captured', step, (err as Error).message));
  }
  await act({ type: 'provision', connectionId });
  let probeResult: unknown;
  try {
    probeResult = await probeProvider(deps, p, 'test', key, a.runId);
  } catch (err) {
    probeResult = err instanceof Rejection && err.code === 'verify_failed' ? err.details : { ok: false, error: 'probe_failed' };
  }
  await act({ type: 'probed', probeResult }).catch(() => {});
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

export async function failUnavailable(deps: Ports, tenant: Tenant, runId: string): Promise<void> {
  await commander(deps, tenant)(signupRunDecider, signupRunStream(runId), { type: 'fail', code: 'resume_inputs_unavailable', failedStepId: 'await_verification', detail: 'the paused browser page is no longer available' }).catch(() => {});
}
