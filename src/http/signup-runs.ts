import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { SignupRun } from '../../commands/signup-run.ts';
import { SIGNUP_FAILURE_CODES } from '../../events/signup-run.ts';
import { workerOf } from '../usecases/signup-runner.ts';
import { resendVerification, signupRunStatus, startSignupRun, submitVerification } from '../usecases/signup-runs.ts';
import { browserInstance, orForwarded } from './kernel/browser-forward.ts';
import { defineRoute, type AppDeps, type RunCommand } from './kernel/route.ts';
import { IdParam } from './kernel/schemas.ts';

// Browser signup runs (spec 2 "Browser signup run (status view)", 3, 4.4, 7
// sandbox provisioning codes): a headless browser signs up on a provider's
// site in the test environment; the run pauses on the customer for an e-mailed
// code, then stores the captured key as a connection and probes it. A run
// waiting for a browser context shows `step: queued`. A code or a resend
// reaching an instance other than the one running the run is forwarded there
// (browser-forward.ts).

const RUN_STATUS = '`running`, `needs_verification` (the provider sent a code: submit it), `provisioned` (the connection exists: `connection_id`) or `failed` (`code` says why).';
export const SignupRunView = z
  .object({
    run_id: z.string(),
    status: z.enum(['running', 'needs_verification', 'provisioned', 'failed']).describe(RUN_STATUS),
    step: z.enum(['queued']).optional().describe('while running: `queued` when the run waits for a browser context (none free for its organization); it fails with `capacity` when none frees in time'),
    prompt: z.string().optional().describe('While `needs_verification`: what the provider asked for, in its words.'),
    verification: z
      .object({ mechanism: z.string().describe('How the provider sent the code: `email_code`.'), resend: z.boolean().describe('Whether a new code can be asked for (`POST /v1/connections/engine/{id}/resend`).') })
      .optional()
      .describe('Present only while `needs_verification`: the code the provider sent, to submit with `POST /v1/connections/engine/{id}/verification`.'),
    connection_id: z.string().optional(),
    code: z.enum(SIGNUP_FAILURE_CODES).optional(),
    failed_step_id: z.string().optional().describe('When failed: the step of the signup flow that failed.'),
    probe_result: z.unknown().optional().describe("When provisioned: what the provider's account probe answered with the new credential."),
  })
  .meta({ id: 'BrowserSignupRun' });
type View = z.infer<typeof SignupRunView>;

function viewOf(r: SignupRun): View {
  const code = (SIGNUP_FAILURE_CODES as readonly string[]).includes(r.code ?? '') ? (r.code as View['code']) : undefined;
  return {
    run_id: r.run_id,
    status: r.status,
    ...(r.status === 'running' && r.step ? { step: r.step } : {}),
    ...(r.status === 'needs_verification' && r.prompt ? { prompt: r.prompt } : {}),
    ...(r.status === 'needs_verification' ? { verification: { mechanism: r.mechanism ?? 'email_code', resend: r.resend } } : {}),
    ...(r.connectionId ? { connection_id: r.connectionId } : {}),
    ...(r.status === 'failed' && code ? { code } : {}),
    ...(r.status === 'failed' && r.failedStepId ? { failed_step_id: r.failedStepId } : {}),
    ...(r.probeResult ? { probe_result: r.probeResult.value } : {}),
  };
}

const RunParams = z.object({ id: IdParam });
const StartBody = z.object({
  server_id: z.string().min(1).max(64),
  user_id: z.string().min(1).max(128).regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces'),
  email: z.email().max(254),
  name: z.string().min(1).max(200).optional(),
});

export async function signupRunRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const worker = workerOf(deps, (hook) => app.addHook('onClose', hook)); // created now (hooks cannot be added after boot); Chromium launches per run
  await browserInstance(app, deps, worker);
  const useCase = (ctx: { auth: { orgId: string; projectId: string }; run: RunCommand }) => ({ ports: deps, tenant: { orgId: ctx.auth.orgId, projectId: ctx.auth.projectId }, run: ctx.run.bind(ctx) });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/connections/engine/start',
    operationId: 'startSignupRun',
    summary: "Start a browser signup run on the provider's site (test keys only): 202 with the run id; the run proceeds in the background",
    tags: ['connections'],
    auth: 'api_key',
    scope: 'connections:write',
    body: StartBody,
    responses: { 202: z.object({ run_id: z.string(), status: z.literal('running').describe('The run started: read it with `GET /v1/connections/engine/{id}/status`.') }) },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'server_unknown'], [422, 'not_test_environment'], [503, 'browser_worker_unavailable']],
    async handler(ctx) {
      const runId = await startSignupRun(useCase(ctx), ctx.auth.environment, worker, ctx.body);
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
      return { status: 200, body: viewOf(await signupRunStatus(deps, ctx.auth, ctx.params.id)) };
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
      return orForwarded(deps, ctx.req, ctx.reply, async (mayForward) => ({ status: 202, body: viewOf(await submitVerification(useCase(ctx), ctx.params.id, ctx.body.code, { mayForward })) }));
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
      return orForwarded(deps, ctx.req, ctx.reply, async (mayForward) => ({ status: 200, body: viewOf(await resendVerification(useCase(ctx), ctx.params.id, { mayForward })) }));
    },
  });
}
