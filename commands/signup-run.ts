import type { DomainEvent, EventDataOf } from '../events/index.ts';
import { type Decider, Rejection } from '../src/eventstore/handler.ts';
import type { Tenant } from './consumer.ts';

// A browser signup run: running (at first possibly on the `queued` step,
// waiting for a browser context) → needs_verification (paused on the customer,
// ten minutes) → running again once the code is given → provisioned (a
// connection) or failed (one of the spec's codes and the step that failed).
// A pause past its expiry is stale: verification and resend are refused with
// `run_stale`; another tenant's run is not found.

export const SIGNUP_PAUSE_TTL_MS = 10 * 60_000;
export const signupRunStream = (runId: string) => `signup_run-${runId}`;

export type SignupRunStatus = 'running' | 'needs_verification' | 'provisioned' | 'failed';
export type SignupRun = EventDataOf<'signup_run.started'> & {
  status: SignupRunStatus;
  /** The step a running run is on, where it is recorded: `queued` while it waits for a browser context. */
  step: 'queued' | null;
  prompt: string | null;
  mechanism: string | null;
  resend: boolean;
  pauseExpiresAt: string | null;
  connectionId: string | null;
  code: string | null;
  failedStepId: string | null;
  probeResult: { value: unknown } | null;
};
export type SignupRunState = { status: 'none' } | { status: 'exists'; run: SignupRun };

export type SignupRunCommand =
  | { type: 'start'; data: EventDataOf<'signup_run.started'> }
  | { type: 'queue'; waitUntil: string }
  | { type: 'dequeue' }
  | { type: 'pause'; prompt: string; mechanism: string; resend: boolean }
  | { type: 'resend'; tenant: Tenant }
  | { type: 'resume'; tenant: Tenant }
  | { type: 'provision'; connectionId: string }
  | { type: 'probed'; probeResult: unknown }
  | { type: 'fail'; code: string; failedStepId: string; detail: string | null };

export function ownRun(state: SignupRunState, t: Tenant): SignupRun {
  if (state.status !== 'exists' || state.run.org_id !== t.orgId || state.run.project_id !== t.projectId) throw new Rejection('not_found', 'signup run not found');
  return state.run;
}

export const isStale = (run: SignupRun, now: string) => run.status === 'needs_verification' && run.pauseExpiresAt !== null && Date.parse(now) >= Date.parse(run.pauseExpiresAt);

const expiry = (now: string) => new Date(Date.parse(now) + SIGNUP_PAUSE_TTL_MS).toISOString();

export const signupRunDecider: Decider<SignupRunState, SignupRunCommand> = {
  initialState: () => ({ status: 'none' }),
  evolve(state, event) {
    if (event.type === 'signup_run.started')
      return { status: 'exists', run: { ...event.data, status: 'running', step: null, prompt: null, mechanism: null, resend: false, pauseExpiresAt: null, connectionId: null, code: null, failedStepId: null, probeResult: null } };
    if (state.status !== 'exists') return state;
    const run = state.run;
    switch (event.type) {
      case 'signup_run.queued':
        return { status: 'exists', run: { ...run, step: 'queued' } };
      case 'signup_run.dequeued':
        return { status: 'exists', run: { ...run, step: null } };
      case 'signup_run.needs_verification':
        return { status: 'exists', run: { ...run, status: 'needs_verification', prompt: event.data.prompt, mechanism: event.data.mechanism, resend: event.data.resend, pauseExpiresAt: event.data.expires_at } };
      case 'signup_run.verification_resent':
        return { status: 'exists', run: { ...run, pauseExpiresAt: event.data.expires_at } };
      case 'signup_run.resumed':
        return { status: 'exists', run: { ...run, status: 'running', prompt: null, pauseExpiresAt: null } };
      case 'signup_run.provisioned':
        return { status: 'exists', run: { ...run, status: 'provisioned', prompt: null, connectionId: event.data.connection_id } };
      case 'signup_run.probed':
        return { status: 'exists', run: { ...run, probeResult: { value: event.data.probe_result } } };
      case 'signup_run.failed':
        return { status: 'exists', run: { ...run, status: 'failed', step: null, prompt: null, pauseExpiresAt: null, code: event.data.code, failedStepId: event.data.failed_step_id } };
      default:
        return state;
    }
  },
  decide(command, state, { now }): DomainEvent[] {
    if (command.type === 'start') {
      if (state.status !== 'none') throw new Rejection('run_exists', 'a signup run with this id exists');
      return [{ type: 'signup_run.started', data: command.data }];
    }
    if (state.status === 'none') throw new Rejection('not_found', 'signup run not found');
    const run = command.type === 'resend' || command.type === 'resume' ? ownRun(state, command.tenant) : state.run;
    const id = run.run_id;
    switch (command.type) {
      case 'queue':
      case 'dequeue':
        if (run.status !== 'running' || (run.step === 'queued') !== (command.type === 'dequeue')) throw new Rejection('invalid_transition', `the run is ${run.status}${run.step ? ` (${run.step})` : ''}`, { from: run.status });
        return command.type === 'queue' ? [{ type: 'signup_run.queued', data: { run_id: id, wait_until: command.waitUntil, at: now } }] : [{ type: 'signup_run.dequeued', data: { run_id: id, at: now } }];
      case 'pause':
        if (run.status !== 'running') throw new Rejection('invalid_transition', `the run is ${run.status}`, { from: run.status });
        return [{ type: 'signup_run.needs_verification', data: { run_id: id, prompt: command.prompt, mechanism: command.mechanism, resend: command.resend, expires_at: expiry(now), at: now } }];
      case 'resend':
      case 'resume':
        if (run.status !== 'needs_verification') throw new Rejection('not_awaiting_verification', `the run is ${run.status}, not awaiting verification`, { status: run.status });
        if (isStale(run, now)) throw new Rejection('run_stale', 'the run waited on verification past its expiry', { expired_at: run.pauseExpiresAt });
        return command.type === 'resend' ? [{ type: 'signup_run.verification_resent', data: { run_id: id, expires_at: expiry(now), at: now } }] : [{ type: 'signup_run.resumed', data: { run_id: id, at: now } }];
      case 'provision':
        if (run.status !== 'running') throw new Rejection('invalid_transition', `the run is ${run.status}`, { from: run.status });
        return [{ type: 'signup_run.provisioned', data: { run_id: id, connection_id: command.connectionId, at: now } }];
      case 'probed':
        if (run.status !== 'provisioned') throw new Rejection('invalid_transition', `the run is ${run.status}`, { from: run.status });
        return [{ type: 'signup_run.probed', data: { run_id: id, probe_result: command.probeResult, at: now } }];
      case 'fail':
        if (run.status === 'provisioned' || run.status === 'failed') throw new Rejection('invalid_transition', `the run is ${run.status}`, { from: run.status });
        return [{ type: 'signup_run.failed', data: { run_id: id, code: command.code, failed_step_id: command.failedStepId, detail: command.detail, at: now } }];
    }
  },
};
