import { type PageCase, spendingAgent } from '../dashboard-world.ts';

// The Policies page: an organization whose one policy allows every spend, so
// each spend is a recorded decision (`policy.decided`); 200 spends through the
// API, copied up to `rows` decisions. The page lists the policies with their
// counts per outcome and the latest 50 decisions, beside the API's list of the
// same facts: GET /v1/audit-events?event_type=policy.decided&limit=50 (the
// audit chain holds every decision; there is no other /v1 list of them, and
// only the 200 decisions made through the API are in the chain).
export default {
  name: 'Policy decisions',
  table: 'policy_decisions',
  async seed(world, org, rows) {
    const { spend } = await spendingAgent(world, org);
    await org.post('/v1/policies', { name: 'spends are fine', type: 'allow', tools: ['mandate.spend'] }, org.key);
    await world.many('allowed spends', Math.min(rows, 200), async (i) => {
      const res = await spend(i);
      if (res.statusCode !== 201) throw new Error(`an allowed spend answers 201, got ${res.statusCode}: ${res.body.slice(0, 200)}`);
    });
    await world.multiply('policy_decisions', org.orgId, rows, {
      decision_id: "src.decision_id || '_' || g",
      at: "src.at - g * interval '1 second'",
    });
    // The counts, as the projection keeps them for decisions it projects.
    await world.db.query('DELETE FROM policy_decision_counts WHERE org_id = $1', [org.orgId]);
    await world.db.query(
      `INSERT INTO policy_decision_counts (org_id, rule_id, decision, n)
       SELECT org_id, rule_id, decision, count(*) FROM policy_decisions WHERE org_id = $1 AND rule_id IS NOT NULL GROUP BY 1, 2, 3`,
      [org.orgId],
    );
    return { page: '/dashboard/policies', api: '/v1/audit-events?event_type=policy.decided&limit=50', apiHeaders: org.key };
  },
  pageRows: (html) => (html.match(/data-label="Outcome"/g) ?? []).length,
  apiRows: (json) => json.events.length,
} satisfies PageCase;
