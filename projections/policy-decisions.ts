import { parseEvent } from '../events/index.ts';
import type { Projection } from '../src/projector/projection.ts';

// The decisions policies made (`policy.decided`: allowed, approval_required
// (held), denied), one row per decision, for the dashboard's policies pages:
// the counts per policy and the decisions listed newest first, per policy or
// per outcome, by cursor (an index per filter the pages offer).

export const policyDecisionsProjection: Projection = {
  name: 'policy-decisions',
  version: 1,
  tables: {
    policy_decisions: (t) => `CREATE TABLE ${t} (
      decision_id text PRIMARY KEY,
      org_id text NOT NULL,
      project_id text,
      rule_id text,
      rule_type text,
      decision text NOT NULL,
      reason text,
      agent_id text NOT NULL,
      tool_name text NOT NULL,
      amount_minor numeric,
      currency text,
      approval_id text,
      at timestamptz NOT NULL,
      position text COLLATE "C" NOT NULL
    );
    CREATE INDEX ON ${t} (org_id, at DESC, decision_id DESC);
    CREATE INDEX ON ${t} (org_id, rule_id, at DESC, decision_id DESC);
    CREATE INDEX ON ${t} (org_id, decision, at DESC, decision_id DESC);
    CREATE INDEX ON ${t} (org_id, rule_id, decision)`,
  },
  eventTypes: new Set(['policy.decided']),
  async apply(tx, event, t) {
    const e = parseEvent(event.type, event.data);
    if (e.type !== 'policy.decided') return;
    const d = e.data;
    await tx.query(
      `INSERT INTO ${t.policy_decisions} (decision_id, org_id, project_id, rule_id, rule_type, decision, reason, agent_id, tool_name, amount_minor, currency, approval_id, at, position)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) ON CONFLICT (decision_id) DO NOTHING`,
      [d.decision_id, d.org_id, event.metadata.project_id, d.rule_id, d.rule_type, d.decision, d.reason, d.agent_id, d.tool_name, d.amount_minor, d.currency, d.approval_id, d.at, event.position],
    );
  },
};
