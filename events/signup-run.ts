import { z } from 'zod';
import { IsoTime } from './common.ts';

// Facts of browser signup runs (stream `signup_run-<run id>`): a headless
// browser drives a provider's signup pages in the test environment. The
// verification code and the captured key never appear here (the key is in the
// vault, behind the connection).

export const SIGNUP_FAILURE_CODES = ['flow_failed', 'capacity', 'no_credential_captured', 'probe_failed', 'drive_deadline_exceeded', 'provider_account_not_registered', 'drive_stalled', 'resume_inputs_unavailable'] as const;

export const SignupRunStarted = z.object({
  run_id: z.string(),
  org_id: z.string(),
  project_id: z.string(),
  server_id: z.string(),
  user_id: z.string(),
  email: z.string(),
  environment: z.literal('test'),
  created_at: IsoTime,
});
/** No browser context was free for the run (the worker's total or its organization's share): it waits in the queue until `wait_until`, then fails with `capacity`. */
export const SignupRunQueued = z.object({ run_id: z.string(), wait_until: IsoTime, at: IsoTime });
/** A context freed: the run leaves the queue and opens the signup site. */
export const SignupRunDequeued = z.object({ run_id: z.string(), at: IsoTime });
/** The run paused on the customer: the provider sent a code; `expires_at` ends the pause (then `run_stale`). */
export const SignupRunNeedsVerification = z.object({ run_id: z.string(), prompt: z.string(), mechanism: z.string(), resend: z.boolean(), expires_at: IsoTime, at: IsoTime });
export const SignupRunResent = z.object({ run_id: z.string(), expires_at: IsoTime, at: IsoTime });
export const SignupRunResumed = z.object({ run_id: z.string(), at: IsoTime });
export const SignupRunProvisioned = z.object({ run_id: z.string(), connection_id: z.string(), at: IsoTime });
export const SignupRunProbed = z.object({ run_id: z.string(), probe_result: z.unknown(), at: IsoTime });
export const SignupRunFailed = z.object({ run_id: z.string(), code: z.string(), failed_step_id: z.string(), detail: z.string().nullable(), at: IsoTime });

export const signupRunEvents = {
  'signup_run.started': SignupRunStarted,
  'signup_run.queued': SignupRunQueued,
  'signup_run.dequeued': SignupRunDequeued,
  'signup_run.needs_verification': SignupRunNeedsVerification,
  'signup_run.verification_resent': SignupRunResent,
  'signup_run.resumed': SignupRunResumed,
  'signup_run.provisioned': SignupRunProvisioned,
  'signup_run.probed': SignupRunProbed,
  'signup_run.failed': SignupRunFailed,
} as const;
