import { parseEvent } from '../events/index.ts';
import type { Projection } from '../src/projector/projection.ts';

// The decisions policies made (`policy.decided`: allowed, approval_required
// (held), denied), one row per decision, for the dashboard's policies pages:
// the counts per policy and the decisions listed newest first, per policy or
// per outcome, by cursor (an index per filter the pages offer).

export const policyDecisionsProjection: Projection = {
  name: 'policy-decisions',
  version: 2,
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
    // Per policy, how many decisions of each outcome it made, counted as they are projected: the list reads a row per policy and outcome.
    policy_decision_counts: (t) => `CREATE TABLE ${t} (
      org_id text NOT NULL,
      rule_id text NOT NULL,
      decision text NOT NULL,
      n bigint NOT NULL,
      PRIMARY KEY (org_id, rule_id, decision)
    )`,
  },
  eventTypes: new Set(['policy.decided']),
  async apply(tx, event, t) {
    const e = parseEvent(event.type, event.data);
    if (e.type !== 'policy.decided') return;
    const d = e.data;
    // The count grows only when the decision's row is new: applying the event again changes nothing.
    await tx.query(
      `WITH fresh AS (
         INSERT INTO ${t.policy_decisions} (decision_id, org_id, project_id, rule_id, rule_type, decision, reason, agent_id, tool_name, amount_minor, currency, approval_id, at, position)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) ON CONFLICT (decision_id) DO NOTHING
         RETURNING org_id, rule_id, decision)
       INSERT INTO ${t.policy_decision_counts} AS c (org_id, rule_id, decision, n)
         SELECT org_id, rule_id, decision, 1 FROM fresh WHERE rule_id IS NOT NULL
       ON CONFLICT (org_id, rule_id, decision) DO UPDATE SET n = c.n + 1`,
      [d.decision_id, d.org_id, event.metadata.project_id, d.rule_id, d.rule_type, d.decision, d.reason, d.agent_id, d.tool_name, d.amount_minor, d.currency, d.approval_id, d.at, event.position],
    );
  },
};
