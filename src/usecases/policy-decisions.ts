import { isoText as TS } from '../postgres/iso-text.ts';
import type { Queryable } from '../postgres/db.ts';
import { decodeCursor, pageOf } from './page-cursor.ts';

// What the organization's policies decided (projections/policy-decisions.ts):
// the counts per policy and outcome, and the decisions newest first, by
// policy and by outcome, a page at a time by cursor.

export const OUTCOMES = ['allowed', 'approval_required', 'denied'] as const;
export type Outcome = (typeof OUTCOMES)[number];
export type DecisionRow = {
  decision_id: string;
  rule_id: string | null;
  rule_type: string | null;
  decision: Outcome;
  reason: string | null;
  agent_id: string;
  tool_name: string;
  amount_minor: string | null;
  currency: string | null;
  approval_id: string | null;
  at: string;
};
export type DecisionCounts = Record<Outcome, number>;

/** Per policy id, how many decisions of each outcome it made (the projection's counts). */
export async function decisionCounts(db: Queryable, orgId: string): Promise<Map<string, DecisionCounts>> {
  const { rows } = await db.query<{ rule_id: string; decision: Outcome; n: number }>(
    'SELECT rule_id, decision, n::int AS n FROM policy_decision_counts WHERE org_id = $1',
    [orgId],
  );
  const out = new Map<string, DecisionCounts>();
  for (const r of rows) {
    const c = out.get(r.rule_id) ?? { allowed: 0, approval_required: 0, denied: 0 };
    c[r.decision] = r.n;
    out.set(r.rule_id, c);
  }
  return out;
}

export type DecisionQuery = { ruleId?: string | undefined; decision?: Outcome | undefined; cursor?: string | undefined; limit: number };

/** A page of the organization's decisions, newest first, and the next page's cursor. */
export async function listDecisions(db: Queryable, orgId: string, q: DecisionQuery): Promise<{ rows: DecisionRow[]; next: string | undefined }> {
  const params: unknown[] = [orgId, q.limit + 1];
  let where = 'org_id = $1';
  const add = (sql: string, v: unknown) => {
    params.push(v);
    where += ` AND ${sql.replace('?', `$${params.length}`)}`;
  };
  if (q.ruleId) add('rule_id = ?', q.ruleId);
  if (q.decision) add('decision = ?', q.decision);
  const c = decodeCursor(q.cursor);
  if (c) {
    params.push(c.at, c.id);
    where += ` AND (at, decision_id) < ($${params.length - 1}::timestamptz, $${params.length})`;
  }
  const { rows } = await db.query<DecisionRow>(
    `SELECT decision_id, rule_id, rule_type, decision, reason, agent_id, tool_name, amount_minor::text AS amount_minor, currency, approval_id, ${TS('at')} AS at
     FROM policy_decisions WHERE ${where} ORDER BY policy_decisions.at DESC, policy_decisions.decision_id DESC LIMIT $2`,
    params,
  );
  return pageOf(rows, q.limit, (r) => [r.at, r.decision_id]);
}
