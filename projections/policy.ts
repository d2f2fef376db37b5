import { parseEvent } from '../events/index.ts';
import type { Projection } from '../src/projector/projection.ts';

// Read models of policies and approvals. Enforcement never reads these (it
// folds the organization's policy stream, which is current on any instance);
// they serve the GET routes and the approvals health figures.

export const policyProjection: Projection = {
  name: 'policy',
  version: 2,
  tables: {
    policies: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY,
      org_id text NOT NULL,
      name text NOT NULL,
      type text NOT NULL,
      config jsonb NOT NULL,
      agents jsonb NOT NULL,
      tools jsonb NOT NULL,
      enabled boolean NOT NULL,
      ord integer NOT NULL,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (org_id, ord)`,
    approvals: (t) => `CREATE TABLE ${t} (
      id text PRIMARY KEY,
      org_id text NOT NULL,
      project_id text,
      session_id text,
      agent_id text NOT NULL,
      matched_rule_id text NOT NULL,
      matched_rule_name text NOT NULL,
      tool_name text NOT NULL,
      tool_input jsonb NOT NULL,
      status text NOT NULL,
      decided_at timestamptz,
      decided_by text,
      decision_reason text,
      executed_at timestamptz,
      execution_result jsonb,
      created_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (org_id, created_at);
    CREATE INDEX ON ${t} (status, expires_at);
    CREATE INDEX ON ${t} (org_id, expires_at, id) WHERE status = 'pending';
    CREATE INDEX ON ${t} (org_id, (coalesce(decided_at, expires_at)) DESC, id DESC) WHERE status <> 'pending'`,
  },
  eventTypes: new Set([
    'policy.created',
    'policy.updated',
    'policy.deleted',
    'policy.reordered',
    'approval.requested',
    'approval.approved',
    'approval.denied',
    'approval.expired',
    'approval.executed',
    'approval.execution_failed',
  ]),
  async apply(tx, event, t) {
    const e = parseEvent(event.type, event.data);
    const pos = event.position;
    switch (e.type) {
      case 'policy.created': {
        const d = e.data;
        await tx.query(
          `INSERT INTO ${t.policies} (id, org_id, name, type, config, agents, tools, enabled, ord, created_at, updated_at, position)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11) ON CONFLICT (id) DO NOTHING`,
          [d.policy_id, d.org_id, d.name, d.type, JSON.stringify(d.config), JSON.stringify(d.agents), JSON.stringify(d.tools), d.enabled, d.order, d.at, pos],
        );
        return;
      }
      case 'policy.updated': {
        const d = e.data;
        await tx.query(
          `UPDATE ${t.policies} SET
             name = coalesce($2, name), type = coalesce($3, type), config = coalesce($4::jsonb, config),
             agents = coalesce($5::jsonb, agents), tools = coalesce($6::jsonb, tools), enabled = coalesce($7, enabled),
             updated_at = $8, position = $9
           WHERE id = $1 AND position < $9`,
          [d.policy_id, d.name ?? null, d.type ?? null, d.config ? JSON.stringify(d.config) : null, d.agents ? JSON.stringify(d.agents) : null, d.tools ? JSON.stringify(d.tools) : null, d.enabled ?? null, d.at, pos],
        );
        return;
      }
      case 'policy.deleted':
        await tx.query(`DELETE FROM ${t.policies} WHERE id = $1`, [e.data.policy_id]);
        return;
      case 'policy.reordered':
        await tx.query(
          `UPDATE ${t.policies} p SET ord = o.i, updated_at = $3, position = $4
           FROM unnest($2::text[]) WITH ORDINALITY AS o(id, i)
           WHERE p.id = o.id AND p.org_id = $1 AND p.position < $4`,
          [e.data.org_id, e.data.ids, e.data.at, pos],
        );
        return;
      case 'approval.requested': {
        const d = e.data;
        await tx.query(
          `INSERT INTO ${t.approvals} (id, org_id, project_id, session_id, agent_id, matched_rule_id, matched_rule_name, tool_name, tool_input, status, created_at, expires_at, position)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', $10, $11, $12) ON CONFLICT (id) DO NOTHING`,
          [d.approval_id, d.org_id, d.project_id, d.session_id, d.agent_id, d.matched_rule_id, d.matched_rule_name, d.tool_name, JSON.stringify(d.tool_input), d.created_at, d.expires_at, pos],
        );
        return;
      }
      case 'approval.approved':
      case 'approval.denied': {
        const d = e.data;
        await tx.query(
          `UPDATE ${t.approvals} SET status = $2, decided_at = $3, decided_by = $4, decision_reason = $5, position = $6 WHERE id = $1 AND position < $6`,
          [d.approval_id, e.type === 'approval.approved' ? 'approved' : 'denied', d.at, d.decided_by, d.decision_reason, pos],
        );
        return;
      }
      case 'approval.expired':
        await tx.query(`UPDATE ${t.approvals} SET status = 'expired', position = $2 WHERE id = $1 AND position < $2`, [e.data.approval_id, pos]);
        return;
      case 'approval.executed':
      case 'approval.execution_failed':
        await tx.query(
          `UPDATE ${t.approvals} SET executed_at = $2, execution_result = $3, status = CASE WHEN $4 THEN 'execution_failed' ELSE status END, position = $5 WHERE id = $1 AND position < $5`,
          [e.data.approval_id, e.data.at, JSON.stringify(e.data.execution_result), e.type === 'approval.execution_failed', pos],
        );
        return;
      default:
        return;
    }
  },
};
