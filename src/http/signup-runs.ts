import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Tenant } from '../../commands/consumer.ts';
import { isStale, ownRun, signupRunDecider, signupRunStream, type SignupRun } from '../../commands/signup-run.ts';
import { SIGNUP_FAILURE_CODES } from '../../events/signup-run.ts';
import { loadState, Rejection } from '../eventstore/handler.ts';
import { ApiError } from './errors.ts';
import { newId } from './ids.ts';
import { defineRoute } from './route.ts';
import { deliverCode, failUnavailable, launchRun, renewPause, resendCode, workerOf } from './signup-runner.ts';
import { IdParam } from './schemas.ts';

// Browser signup runs (spec 2 "Browser signup run (status view)", 3, 4.4, 7
// sandbox provisioning codes): a headless browser signs up on a provider's
// site in the test environment; the run pauses on the customer for an e-mailed
// code, then stores the captured key as a connection and probes it.

export const SignupRunView = z
  .object({
    run_id: z.string(),
    status: z.enum(['running', 'needs_verification', 'provisioned', 'failed']),
    prompt: z.string().optional(),
    verification: z.object({ mechanism: z.string(), resend: z.boolean() }).optional(),
    connection_id: z.string().optional(),
    code: z.enum(SIGNUP_FAILURE_CODES).optional(),
    failed_step_id: z.string().optional(),
    probe_result: z.unknown().optional(),
  })
  .meta({ id: 'BrowserSignupRun' });
type View = z.infer<typeof SignupRunView>;

function viewOf(r: SignupRun): View {
  const code = (SIGNUP_FAILURE_CODES as readonly string[]).includes(r.code ?? '') ? (r.code as View['code']) : undefined;
  return {
    run_id: r.run_id,
    status: r.status,
    ...(r.status === 'needs_verification' && r.prompt ? { prompt: r.prompt } : {}),
    ...(r.status === 'needs_verification' ? { verification: { mechanism: r.mechanism ?? 'email_code', resend: r.resend } } : {}),
    ...(r.connectionId ? { connection_id: r.connectionId } : {}),
    ...(r.status === 'failed' && code ? { code } : {}),
    ...(r.status === 'failed' && r.failedStepId ? { failed_step_id: r.failedStepId } : {}),
    ...(r.probeResult ? { probe_result: r.probeResult.value } : {}),
  };
}

type Row = { id: string; status: SignupRun['status']; prompt: string | null; mechanism: string | null; resend: boolean; pause_expires_at: Date | null; connection_id: string | null; code: string | null; failed_step_id: string | null; probe_result: unknown; probed: boolean };
const runOfRow = (r: Row): SignupRun =>
  ({
    run_id: r.id,
    status: r.status,
    prompt: r.prompt,
    mechanism: r.mechanism,
    resend: r.resend,
    pauseExpiresAt: r.pause_expires_at ? new Date(r.pause_expires_at).toISOString() : null,
    connectionId: r.connection_id,
    code: r.code,
    failedStepId: r.failed_step_id,
    probeResult: r.probed ? { value: r.probe_result } : null,
  }) as SignupRun;

const RunParams = z.object({ id: IdParam });
const StartBody = z.object({
  server_id: z.string().min(1).max(64),
  user_id: z.string().min(1).max(128).regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces'),
  email: z.email().max(254),
  name: z.string().min(1).max(200).optional(),
});
const stale = (r: SignupRun) => new ApiError(410, 'run_stale', 'the run waited on verification past its expiry', { expired_at: r.pauseExpiresAt });

export async function signupRunRoutes(app: FastifyInstance, deps: import('./route.ts').AppDeps): Promise<void> {
  const worker = workerOf(app, deps); // created now (hooks cannot be added after boot); Chromium launches per run
  const load = async (t: Tenant, id: string) => ownRun((await loadState(deps.store, signupRunStream(id), signupRunDecider)).state, t);

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/connections/engine/start',
    operationId: 'startSignupRun',
    summary: "Start a browser signup run on the provider's site (test keys only): 202 with the run id; the run proceeds in the background",
    tags: ['connections'],
    auth: 'api_key',
    scope: 'connections:write',
    body: StartBody,
    responses: { 202: z.object({ run_id: z.string(), status: z.literal('running') }) },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'server_unknown'], [422, 'not_test_environment'], [503, 'browser_worker_unavailable']],
    async handler(ctx) {
      const { body, auth } = ctx;
      if (auth.environment !== 'test') throw new ApiError(422, 'not_test_environment', 'browser signup runs provision sandbox accounts: use a test key');
      const p = deps.providers.runtime.catalog.get(body.server_id);
      // The catalog says which providers the signup engine provisions (engine_provisionable: an engine
      // descriptor, not quarantined); a run stores an API key, so the provider must take one.
      if (!p || p.engine !== 'available' || p.auth_type !== 'api_key') throw new ApiError(404, 'server_unknown', `no provider ${body.server_id} the signup engine provisions (engine_provisionable, API key) in the catalog`, { server_id: body.server_id });
      if (!worker) throw new ApiError(503, 'browser_worker_unavailable', 'no browser worker is configured');
      const tenant = { orgId: auth.orgId, projectId: auth.projectId };
      const runId = newId('sr');
      const data = { run_id: runId, org_id: tenant.orgId, project_id: tenant.projectId, server_id: p.id, user_id: body.user_id, email: body.email, environment: 'test' as const, created_at: deps.now().toISOString() };
      await ctx.run(signupRunDecider, signupRunStream(runId), { type: 'start', data }, { expectedRevision: 'no_stream' });
      launchRun(deps, worker, { runId, tenant, serverId: p.id, userId: body.user_id, email: body.email, name: body.name ?? body.user_id });
      return { status: 202, body: { run_id: runId, status: 'running' as const } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/connections/engine/:id/status',
    operationId: 'getSignupRunStatus',
    summary: 'The status of a browser signup run',
    tags: ['connections'],
    auth: 'api_key',
    scope: 'connections:read',
    params: RunParams,
    responses: { 200: SignupRunView },
    errors: [[401, 'unauthorized'], [404, 'not_found'], [410, 'run_stale']],
    async handler(ctx) {
      // Served from the read model (projections/signup-run.ts).
      const { rows } = await deps.db.query<Row>(
        `SELECT id, status, prompt, mechanism, resend, pause_expires_at, connection_id, code, failed_step_id, probe_result, probed FROM signup_runs WHERE id = $1 AND org_id = $2 AND project_id = $3`,
        [ctx.params.id, ctx.auth.orgId, ctx.auth.projectId],
      );
      const row = rows[0];
      if (!row) throw new ApiError(404, 'not_found', 'signup run not found');
      const r = runOfRow(row);
      if (isStale(r, deps.now().toISOString())) throw stale(r);
      return { status: 200, body: viewOf(r) };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/connections/engine/:id/verification',
    operationId: 'submitSignupVerification',
    summary: 'Give the code the provider sent: the paused run resumes (types it, captures the key, connects)',
    tags: ['connections'],
    auth: 'api_key',
    scope: 'connections:write',
    params: RunParams,
    body: z.object({ code: z.string().min(1).max(64) }),
    responses: { 202: SignupRunView },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [404, 'not_found'], [409, 'not_awaiting_verification'], [410, 'run_stale']],
    async handler(ctx) {
      const tenant = { orgId: ctx.auth.orgId, projectId: ctx.auth.projectId };
      const r = await load(tenant, ctx.params.id);
      if (isStale(r, deps.now().toISOString())) throw stale(r);
      if (r.status !== 'needs_verification') throw new Rejection('not_awaiting_verification', `the run is ${r.status}, not awaiting verification`, { status: r.status });
      const res = await ctx.run(signupRunDecider, signupRunStream(r.run_id), { type: 'resume', tenant }, { serialize: true });
      if (!deliverCode(r.run_id, ctx.body.code)) await failUnavailable(deps, tenant, r.run_id);
      const after = await load(tenant, r.run_id).catch(() => undefined);
      return { status: 202, body: viewOf(after ?? (res.state as { run: SignupRun }).run) };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/connections/engine/:id/resend',
    operationId: 'resendSignupVerification',
    summary: 'Ask the provider to send the verification code again (the run stays in needs_verification, its pause renewed)',
    tags: ['connections'],
    auth: 'api_key',
    scope: 'connections:write',
    params: RunParams,
    responses: { 200: SignupRunView },
    errors: [[401, 'unauthorized'], [404, 'not_found'], [409, 'not_awaiting_verification'], [410, 'run_stale']],
    async handler(ctx) {
      const tenant = { orgId: ctx.auth.orgId, projectId: ctx.auth.projectId };
      const r = await load(tenant, ctx.params.id);
      if (isStale(r, deps.now().toISOString())) throw stale(r);
      if (r.status !== 'needs_verification') throw new Rejection('not_awaiting_verification', `the run is ${r.status}, not awaiting verification`, { status: r.status });
      let ok = false;
      try {
        ok = await resendCode(r.run_id);
      } catch {
        ok = false;
      }
      if (!ok) {
        await failUnavailable(deps, tenant, r.run_id);
        return { status: 200, body: viewOf(await load(tenant, r.run_id)) };
      }
      const res = await ctx.run(signupRunDecider, signupRunStream(r.run_id), { type: 'resend', tenant }, { serialize: true });
      const run = (res.state as { status: 'exists'; run: SignupRun }).run;
      renewPause(r.run_id, run.pauseExpiresAt); // the page lives as long as the renewed pause
      return { status: 200, body: viewOf(run) };
    },
  });
}
