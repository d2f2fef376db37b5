import { isStale, ownRun, signupRunDecider, signupRunStream, type SignupRun } from '../../commands/signup-run.ts';
import type { BrowserWorker } from '../adapters/browser/worker.ts';
import { loadState, Rejection } from '../eventstore/handler.ts';
import { newId } from '../ids.ts';
import type { Environment } from '../providers/tools.ts';
import type { Ports, Tenant, UseCaseCtx } from './context.ts';
import { checkOwner } from './browser-owners.ts';
import { deliverCode, holdsPaused, renewPause, resendCode } from './signup-paused.ts';
import { failUnavailable, launchRun, runOwnerKey } from './signup-runner.ts';

// Browser signup runs (spec 2 "Browser signup run (status view)", 3, 4.4, 7
// sandbox provisioning codes): start (test keys only) launches the run in the
// background (src/usecases/signup-runner.ts); the status is read from the read
// model; a verification code or a resend reaches the paused page, in the
// instance that runs it: another instance throws OwnedElsewhere, and its route
// forwards the request there (browser-owners.ts).

type RunCtx = Pick<UseCaseCtx, 'ports' | 'tenant' | 'run'>;

const stale = (r: SignupRun) => new Rejection('run_stale', 'the run waited on verification past its expiry', { expired_at: r.pauseExpiresAt });

export type StartSignupInput = { server_id: string; user_id: string; email: string; name?: string | undefined };

/** Starts a run (202 running); the browser work proceeds in the background, each outcome an event on the run's stream. */
export async function startSignupRun(ctx: RunCtx, environment: Environment, worker: BrowserWorker | undefined, body: StartSignupInput): Promise<string> {
  const { ports, tenant } = ctx;
  if (environment !== 'test') throw new Rejection('not_test_environment', 'browser signup runs provision sandbox accounts: use a test key');
  const p = ports.providers.runtime.catalog.get(body.server_id);
  // The catalog says which providers the signup engine provisions (engine_provisionable: an engine
  // descriptor, not quarantined); a run stores an API key, so the provider must take one.
  if (!p || p.engine !== 'available' || p.auth_type !== 'api_key') throw new Rejection('server_unknown', `no provider ${body.server_id} the signup engine provisions (engine_provisionable, API key) in the catalog`, { server_id: body.server_id });
  if (!worker) throw new Rejection('browser_worker_unavailable', 'no browser worker is configured');
  const runId = newId('sr');
  const data = { run_id: runId, org_id: tenant.orgId, project_id: tenant.projectId, server_id: p.id, user_id: body.user_id, email: body.email, environment: 'test' as const, created_at: ports.now().toISOString() };
  await ctx.run(signupRunDecider, signupRunStream(runId), { type: 'start', data }, { expectedRevision: 'no_stream' });
  await launchRun(ports, worker, { runId, tenant, serverId: p.id, userId: body.user_id, email: body.email, name: body.name ?? body.user_id });
  return runId;
}

type Row = { id: string; status: SignupRun['status']; step: SignupRun['step']; prompt: string | null; mechanism: string | null; resend: boolean; pause_expires_at: Date | null; connection_id: string | null; code: string | null; failed_step_id: string | null; probe_result: unknown; probed: boolean };
const runOfRow = (r: Row): SignupRun =>
  ({
    run_id: r.id,
    status: r.status,
    step: r.step,
    prompt: r.prompt,
    mechanism: r.mechanism,
    resend: r.resend,
    pauseExpiresAt: r.pause_expires_at ? new Date(r.pause_expires_at).toISOString() : null,
    connectionId: r.connection_id,
    code: r.code,
    failedStepId: r.failed_step_id,
    probeResult: r.probed ? { value: r.probe_result } : null,
  }) as SignupRun;

/** The run's status, served from the read model (projections/signup-run.ts); `run_stale` past its pause. */
export async function signupRunStatus(ports: Pick<Ports, 'db' | 'now'>, t: Tenant, id: string): Promise<SignupRun> {
  const { rows } = await ports.db.query<Row>(
    `SELECT id, status, step, prompt, mechanism, resend, pause_expires_at, connection_id, code, failed_step_id, probe_result, probed FROM signup_runs WHERE id = $1 AND org_id = $2 AND project_id = $3`,
    [id, t.orgId, t.projectId],
  );
  const row = rows[0];
  if (!row) throw new Rejection('not_found', 'signup run not found');
  const r = runOfRow(row);
  if (isStale(r, ports.now().toISOString())) throw stale(r);
  return r;
}

const load = async (ports: Pick<Ports, 'store'>, t: Tenant, id: string) => ownRun((await loadState(ports.store, signupRunStream(id), signupRunDecider)).state, t);

/**
 * A run paused on verification, from its stream (`run_stale`, `not_awaiting_verification` otherwise),
 * whose page this instance holds: OwnedElsewhere when another does (and `mayForward`).
 */
async function paused(ports: Ports, t: Tenant, id: string, mayForward: boolean): Promise<SignupRun> {
  const r = await load(ports, t, id);
  if (isStale(r, ports.now().toISOString())) throw stale(r);
  if (r.status !== 'needs_verification') throw new Rejection('not_awaiting_verification', `the run is ${r.status}, not awaiting verification`, { status: r.status });
  if (!holdsPaused(ports, r.run_id)) await checkOwner(ports, runOwnerKey(r.run_id), mayForward);
  return r;
}

/** Hands the code to the paused page: the run resumes (a page that is gone fails it: resume_inputs_unavailable). */
export async function submitVerification(ctx: RunCtx, id: string, code: string, opts: { mayForward: boolean }): Promise<SignupRun> {
  const { ports, tenant } = ctx;
  const r = await paused(ports, tenant, id, opts.mayForward);
  const res = await ctx.run(signupRunDecider, signupRunStream(r.run_id), { type: 'resume', tenant }, { serialize: true });
  if (!deliverCode(r.run_id, code)) await failUnavailable(ports, tenant, r.run_id);
  const after = await load(ports, tenant, r.run_id).catch(() => undefined);
  return after ?? (res.state as { run: SignupRun }).run;
}

/** Asks the provider for the code again: the pause is renewed (a page that is gone fails the run). */
export async function resendVerification(ctx: RunCtx, id: string, opts: { mayForward: boolean }): Promise<SignupRun> {
  const { ports, tenant } = ctx;
  const r = await paused(ports, tenant, id, opts.mayForward);
  let ok = false;
  try {
    ok = await resendCode(r.run_id);
  } catch {
    ok = false;
  }
  if (!ok) {
    await failUnavailable(ports, tenant, r.run_id);
    return load(ports, tenant, r.run_id);
  }
  const res = await ctx.run(signupRunDecider, signupRunStream(r.run_id), { type: 'resend', tenant }, { serialize: true });
  const run = (res.state as { status: 'exists'; run: SignupRun }).run;
  renewPause(r.run_id, run.pauseExpiresAt); // the page lives as long as the renewed pause
  return run;
}
