import { parseEvent } from '../events/index.ts';
import type { Projection } from '../src/projector/projection.ts';

// Read model of browser signup runs (the status view of spec 2); v2: the
// `step` a running run is on (`queued` while it waits for a browser context).

export const signupRunProjection: Projection = {
  name: 'signup_run',
  version: 2,
  tables: {
    signup_runs: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY,
      org_id text NOT NULL,
      project_id text NOT NULL,
      server_id text NOT NULL,
      status text NOT NULL,
      step text,
      prompt text,
      mechanism text,
      resend boolean NOT NULL DEFAULT false,
      pause_expires_at timestamptz,
      connection_id text,
      code text,
      failed_step_id text,
      probe_result jsonb,
      probed boolean NOT NULL DEFAULT false,
      created_at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    )`,
  },
  eventTypes: new Set(['signup_run.started', 'signup_run.queued', 'signup_run.dequeued', 'signup_run.needs_verification', 'signup_run.verification_resent', 'signup_run.resumed', 'signup_run.provisioned', 'signup_run.probed', 'signup_run.failed']),
  async apply(tx, event, t) {
    const e = parseEvent(event.type, event.data);
    const pos = event.position;
    const set = (cols: string, args: unknown[]) => tx.query(`UPDATE ${t.signup_runs} SET ${cols}, position = $2 WHERE id = $1 AND position < $2`, [(e.data as { run_id: string }).run_id, pos, ...args]);
    switch (e.type) {
      case 'signup_run.started': {
        const d = e.data;
        await tx.query(`INSERT INTO ${t.signup_runs} (id, org_id, project_id, server_id, status, created_at, position) VALUES ($1, $2, $3, $4, 'running', $5, $6) ON CONFLICT (id) DO NOTHING`, [d.run_id, d.org_id, d.project_id, d.server_id, d.created_at, pos]);
        return;
      }
      case 'signup_run.queued':
        await set(`step = 'queued'`, []);
        return;
      case 'signup_run.dequeued':
        await set('step = NULL', []);
        return;
      case 'signup_run.needs_verification':
        await set(`status = 'needs_verification', prompt = $3, mechanism = $4, resend = $5, pause_expires_at = $6`, [e.data.prompt, e.data.mechanism, e.data.resend, e.data.expires_at]);
        return;
      case 'signup_run.verification_resent':
        await set('pause_expires_at = $3', [e.data.expires_at]);
        return;
      case 'signup_run.resumed':
        await set(`status = 'running', prompt = NULL, pause_expires_at = NULL`, []);
        return;
      case 'signup_run.provisioned':
        await set(`status = 'provisioned', prompt = NULL, connection_id = $3`, [e.data.connection_id]);
        return;
      case 'signup_run.probed':
        await set('probe_result = $3::jsonb, probed = true', [JSON.stringify(e.data.probe_result ?? null)]);
        return;
      case 'signup_run.failed':
        await set(`status = 'failed', step = NULL, prompt = NULL, pause_expires_at = NULL, code = $3, failed_step_id = $4`, [e.data.code, e.data.failed_step_id]);
        return;
    }
  },
};
