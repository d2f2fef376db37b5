import { parseEvent } from '../events/index.ts';
import type { Projection } from '../src/projector/projection.ts';

// Read model of sessions and tool calls, with each call's payment and
// verification status views. A provider's inbound webhook
// (`connection.webhook_received`) that names a call's idempotency key, on the
// connection the call used, moves that call's view: the new status is the
// payload's `data.status` (or `status`) when it belongs to the view's set, and
// every such delivery is listed in the view's events[]. A deleted session
// (`session.deleted`, its project's cascade) takes its tool calls with it, and
// a call recorded after the deletion (a race with the cascade) is not kept.

export const PAYMENT_STATUSES = ['pending', 'succeeded', 'failed', 'refunded', 'updated', 'unknown'] as const;
export const VERIFICATION_STATUSES = ['pending', 'approved', 'rejected', 'expired', 'review', 'unknown'] as const;

export const sessionProjection: Projection = {
  name: 'session',
  // 2: a session's status reads `active` (was `open`), and its test-mode mocks are kept.
  version: 3,
  tables: {
    sessions: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY,
      org_id text NOT NULL,
      project_id text NOT NULL,
      user_id text NOT NULL,
      servers jsonb NOT NULL,
      environment text NOT NULL,
      status text NOT NULL,
      mocks jsonb,
      created_at timestamptz NOT NULL,
      closed_at timestamptz,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (org_id, project_id, created_at);
    CREATE INDEX ON ${t} (org_id, project_id, user_id)`,
    tool_calls: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY,
      seq bigserial,
      org_id text NOT NULL,
      project_id text NOT NULL,
      session_id text NOT NULL,
      server_id text NOT NULL,
      tool_name text NOT NULL,
      status text NOT NULL,
      called_at timestamptz NOT NULL,
      duration_ms integer,
      error_code text,
      input jsonb,
      output jsonb,
      routing jsonb,
      failover_trail jsonb,
      connection_id text,
      view text,
      idempotency_key text,
      view_status text,
      hosted_url text,
      view_events jsonb NOT NULL DEFAULT '[]',
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (org_id, project_id, called_at DESC, id DESC);
    CREATE INDEX ON ${t} (connection_id, idempotency_key);
    CREATE INDEX ON ${t} (session_id, seq)`,
  },
  eventTypes: new Set(['session.created', 'session.closed', 'session.deleted', 'tool_call.started', 'tool_call.succeeded', 'tool_call.failed', 'connection.webhook_received']),
  async apply(tx, event, t) {
    const e = parseEvent(event.type, event.data);
    const pos = event.position;
    switch (e.type) {
      case 'session.created': {
        const d = e.data;
        await tx.query(
          `INSERT INTO ${t.sessions} (id, org_id, project_id, user_id, servers, environment, status, mocks, created_at, position) VALUES ($1, $2, $3, $4, $5, $6, 'active', $7, $8, $9) ON CONFLICT (id) DO NOTHING`,
          [d.session_id, d.org_id, d.project_id, d.user_id, JSON.stringify(d.servers), d.environment, d.mocks ? JSON.stringify(d.mocks) : null, d.created_at, pos],
        );
        return;
      }
      case 'session.closed':
        await tx.query(`UPDATE ${t.sessions} SET status = 'closed', closed_at = $2, position = $3 WHERE id = $1 AND position < $3`, [e.data.session_id, e.data.at, pos]);
        return;
      case 'session.deleted':
        // By the session's organization and project first: the (org_id, project_id, ...) index finds its calls.
        await tx.query(`DELETE FROM ${t.tool_calls} c USING ${t.sessions} s WHERE s.id = $1 AND c.org_id = s.org_id AND c.project_id = s.project_id AND c.session_id = s.id`, [e.data.session_id]);
        await tx.query(`DELETE FROM ${t.sessions} WHERE id = $1`, [e.data.session_id]);
        return;
      case 'tool_call.started': {
        const d = e.data;
        await tx.query(
          `INSERT INTO ${t.tool_calls} (id, org_id, project_id, session_id, server_id, tool_name, status, called_at, input, routing, failover_trail, position)
           SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, 'running', $7::timestamptz, $8::jsonb, $9::jsonb, '[]'::jsonb, $10::text
           WHERE EXISTS (SELECT 1 FROM ${t.sessions} WHERE id = $4::text) ON CONFLICT (id) DO NOTHING`,
          [d.tool_call_id, d.org_id, d.project_id, d.session_id, d.server_id, d.tool_name, d.called_at, JSON.stringify(d.input ?? null), JSON.stringify(d.routing ?? null), pos],
        );
        return;
      }
      case 'tool_call.succeeded': {
        const d = e.data;
        await tx.query(
          `UPDATE ${t.tool_calls} SET status = 'success', duration_ms = $2, output = $3, failover_trail = $4, connection_id = $5, view = $6, idempotency_key = $7, view_status = $8, hosted_url = $9, position = $10
           WHERE id = $1 AND position < $10`,
          [d.tool_call_id, d.duration_ms, JSON.stringify(d.output ?? null), JSON.stringify(d.failover_trail), d.connection_id, d.view, d.idempotency_key, d.view_status, d.hosted_url, pos],
        );
        return;
      }
      case 'tool_call.failed': {
        const d = e.data;
        await tx.query(`UPDATE ${t.tool_calls} SET status = 'error', duration_ms = $2, error_code = $3, failover_trail = $4, position = $5 WHERE id = $1 AND position < $5`, [
          d.tool_call_id,
          d.duration_ms,
          d.error_code,
          JSON.stringify(d.failover_trail),
          pos,
        ]);
        return;
      }
      case 'connection.webhook_received': {
        const d = e.data;
        const p = (d.payload ?? {}) as Record<string, unknown>;
        const inner = (typeof p.data === 'object' && p.data !== null ? p.data : {}) as Record<string, unknown>;
        const key = [inner.idempotency_key, p.idempotency_key, inner.id].find((k): k is string => typeof k === 'string');
        if (!key) return;
        const status = [inner.status, p.status].find((s): s is string => typeof s === 'string') ?? null;
        const entry = JSON.stringify([{ event_type: d.provider_event_type ?? 'connection.webhook_received', received_at: d.received_at, status, position: pos }]);
        await tx.query(
          `UPDATE ${t.tool_calls} SET
             view_status = CASE WHEN $3::text IS NOT NULL AND ((view = 'payment' AND $3 = ANY($4::text[])) OR (view = 'verification' AND $3 = ANY($5::text[]))) THEN $3 ELSE view_status END,
             view_events = view_events || $6::jsonb, position = $7
           WHERE connection_id = $1 AND idempotency_key = $2 AND view IS NOT NULL AND position < $7`,
          [d.connection_id, key, status, PAYMENT_STATUSES, VERIFICATION_STATUSES, entry, pos],
        );
        return;
      }
    }
  },
};
