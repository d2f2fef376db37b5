import type { Tenant } from '../../commands/consumer.ts';
import { SIGNUP_PAUSE_TTL_MS, signupRunDecider, signupRunStream, type SignupRunCommand, type SignupRunState } from '../../commands/signup-run.ts';
import { drive, WorkerError, workerFromEnv, type BrowserSession, type BrowserWorker } from '../adapters/browser/worker.ts';
import { handleCommand, Rejection, type CommandResult, type HandleOptions } from '../eventstore/handler.ts';
import type { Decider } from '../eventstore/handler.ts';
import { checkCredential, encodeCredential } from '../providers/credentials.ts';
import { claim, release, sharedHoldings } from './browser-owners.ts';
import { upsertConnection } from './connections.ts';
import { probeProvider } from './providers.ts';
import type { Ports } from './context.ts';
import { closeAllOf, dropPaused, enqueue, keepPaused, renewPause } from './signup-paused.ts';

// The in-process task behind a browser signup run. It takes a browser-worker
// context (waiting its turn in the worker's fair queue when none is free for
// its organization: the `queued` step, bounded, then `capacity`), drives the
// sandbox (or provider) signup site in it, appending each state change to the
// run's stream: page 1 (e-mail, name) → pause on page 2 until the verification
// code is given → type it → read the key on page 3 → vault → connection (the
// same streams as POST /v1/connections) → probe. The paused page lives in this
// process (signup-paused.ts), which claims the run in browser_owners so a code
// sent to any instance reaches it; a verification for a run whose page is gone
// (restart, pause expired) fails it with `resume_inputs_unavailable`.

export { sweepPausedPages, sweepQueuedRuns } from './signup-paused.ts';

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
    w?.shareHoldings?.(sharedHoldings(deps)); // an organization's share is counted across instances
    onClose(async () => {
      await closeAllOf(deps);
      await w?.close();
    });
  }
  return workers.get(deps) ?? undefined;
}

export const signupUrlOf = (deps: Ports, serverId: string) => (deps.providers.runtime.sandbox ? `${deps.providers.runtime.sandbox.http}/_sandbox/${serverId}/signup` : undefined);
export const runOwnerKey = (runId: string) => `signup:${runId}`;

type RunArgs = { runId: string; tenant: Tenant; serverId: string; userId: string; email: string; name: string };

function commander(deps: Ports, tenant: Tenant) {
  const cctx = { orgId: tenant.orgId, projectId: tenant.projectId, actor: { kind: 'system' as const, id: 'signup-run' }, requestId: null, now: deps.now };
  return async <S, C>(decider: Decider<S, C>, stream: string, command: C, opts: HandleOptions<S> = {}) => {
    const r = await handleCommand(deps.store, decider, stream, command, cctx, { serialize: true, ...opts });
    if (r.lastPosition) await deps.readSide.waitFor(r.lastPosition, deps.readWaitMs);
    return r;
  };
}

/** What one run's steps share: its arguments, its stream's commands, and its failure. */
type Run = { deps: Ports; worker: BrowserWorker; a: RunArgs; act: (c: SignupRunCommand) => Promise<CommandResult<SignupRunState>>; fail: (code: string, step: string, detail: string | null) => Promise<unknown> };

/** Starts the run in the background, after claiming it for this instance; every outcome is an event on the run's stream. */
export async function launchRun(deps: Ports, worker: BrowserWorker, a: RunArgs): Promise<void> {
  await claim(deps, [runOwnerKey(a.runId)]);
  void runSignup(deps, worker, a)
    .catch(() => {}) // every outcome it can reach is already an event
    .finally(() => release(deps, [runOwnerKey(a.runId)]));
}

async function runSignup(deps: Ports, worker: BrowserWorker, a: RunArgs): Promise<void> {
  const act = (c: SignupRunCommand) => commander(deps, a.tenant)(signupRunDecider, signupRunStream(a.runId), c);
  const fail = async (code: string, step: string, detail: string | null) => act({ type: 'fail', code, failedStepId: step, detail: detail?.slice(0, 500) ?? null }).catch(() => {});
  const r: Run = { deps, worker, a, act, fail };
  const url = signupUrlOf(deps, a.serverId);
  if (!url) return void (await fail('provider_account_not_registered', 'open_signup', 'no signup site is configured for this provider'));
  const session = await openContext(r);
  if (!session) return;
  const key = await driveSignup(r, session, url);
  if (key === undefined) return;
  await storeAndProbe(r, key);
}

/**
 * A context for the run: at once when one is free for its organization, else
 * after waiting in the worker's queue (the `queued` step), until the wait ends
 * by the app's clock (`capacity` at open_browser). Undefined once the run failed.
 */
async function openContext(r: Run): Promise<BrowserSession | undefined> {
  const wait = enqueue(r.deps, r.a.runId);
  let queued: Promise<unknown> | undefined;
  try {
    const session = await r.worker.open({ org: r.a.tenant.orgId, wait: { signal: wait.signal, onQueued: () => void (queued = r.act({ type: 'queue', waitUntil: wait.until.toISOString() }).catch(() => {})) } });
    if (queued) {
      await queued;
      await r.act({ type: 'dequeue' }).catch(() => {});
    }
    return session;
  } catch (err) {
    await queued;
    await r.fail(err instanceof WorkerError && err.code === 'capacity' ? 'capacity' : 'flow_failed', 'open_browser', (err as Error).message);
    return undefined;
  } finally {
    wait.done();
  }
}

/** Pages 1 to 3 under the worker's bounds, paused for the code between them: the captured key, or undefined once the run failed. */
async function driveSignup(r: Run, session: BrowserSession, url: string): Promise<string | undefined> {
  const { a, deps } = r;
  let step = 'open_signup';
  const failOf = async (err: unknown) => {
    const code = err instanceof WorkerError && (err.code === 'drive_deadline_exceeded' || err.code === 'drive_stalled') ? err.code : err instanceof Rejection && err.code === 'no_credential_captured' ? err.code : 'flow_failed';
    await session.close();
    await r.fail(code, (err as { step?: string }).step ?? step, (err as Error).message.split('\n')[0] ?? null);
    return undefined;
  };
  const page = session.page;
  const limits = r.worker.limits;
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
    const pausedAt = (await r.act({ type: 'pause', prompt, mechanism: 'email_code', resend: true })).events[0];
    if (pausedAt?.type === 'signup_run.needs_verification') renewPause(a.runId, pausedAt.data.expires_at);
    code = await codeP;
  } catch (err) {
    dropPaused(a.runId);
    return failOf(err);
  }
  try {
    const key = await drive(session, limits, async (progress) => {
      progress((step = 'submit_code'));
      await page.fill('#code', code, { timeout: 5_000 });
      await Promise.all([page.waitForURL(/\/done/, { timeout: limits.stallMs }), page.click('#verify', { timeout: 5_000 })]);
      progress((step = 'capture_credential'));
      const el = await page.$('#api-key');
      const text = el ? ((await el.textContent()) ?? '').trim() : '';
      if (!text) throw new Rejection('no_credential_captured', 'the last page showed no API key');
      return text;
    });
    await session.close();
    return key;
  } catch (err) {
    return failOf(err);
  }
}

/** The key into the vault, the connection created or rotated, then the probe. */
async function storeAndProbe(r: Run, key: string): Promise<void> {
  const { deps, a } = r;
  const step = 'store_connection';
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
    return void (await r.fail('no_credential_captured', step, (err as Error).message));
  }
  await r.act({ type: 'provision', connectionId });
  let probeResult: unknown;
  try {
    probeResult = await probeProvider(deps, p, 'test', key, a.runId);
  } catch (err) {
    probeResult = err instanceof Rejection && err.code === 'verify_failed' ? err.details : { ok: false, error: 'probe_failed' };
  }
  await r.act({ type: 'probed', probeResult }).catch(() => {});
}

export async function failUnavailable(deps: Ports, tenant: Tenant, runId: string): Promise<void> {
  await commander(deps, tenant)(signupRunDecider, signupRunStream(runId), { type: 'fail', code: 'resume_inputs_unavailable', failedStepId: 'await_verification', detail: 'the paused browser page is no longer available' }).catch(() => {});
}
