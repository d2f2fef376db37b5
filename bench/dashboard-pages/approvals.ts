import { type PageCase, spendingAgent } from '../dashboard-world.ts';

// The Approvals page: an organization whose policy holds every spend for a
// person; 200 held spends through the API, 20 of them decided, copied up to
// `rows` approvals. The page lists the first 50 pending (the one expiring
// soonest first) and the latest 50 decisions, beside
// GET /v1/approvals?status=pending&limit=50.
export default {
  name: 'Approvals',
  table: 'approvals',
  async seed(world, org, rows) {
    const { spend } = await spendingAgent(world, org);
    await org.post('/v1/policies', { name: 'a person decides', type: 'approval-required', config: { approval_ttl_seconds: 604_800 } });
    const held: string[] = [];
    await world.many('held spends', Math.min(rows, 200), async (i) => {
      const res = await spend(i);
      if (res.statusCode !== 403) throw new Error(`a held spend answers 403, got ${res.statusCode}: ${res.body.slice(0, 200)}`);
      held.push(res.json().approval_id);
    });
    for (const id of held.slice(0, 20)) await org.post(`/v1/approvals/${id}/decide`, { decision: 'deny', reason: 'bench' }, org.svc);
    await world.multiply('approvals', org.orgId, rows, {
      id: "src.id || '_' || g",
      created_at: "src.created_at - g * interval '1 second'",
      expires_at: "src.expires_at - g * interval '1 second'",
      decided_at: "src.decided_at - g * interval '1 second'",
    });
    return { page: '/dashboard/approvals', api: '/v1/approvals?status=pending&limit=50', apiHeaders: org.key };
  },
  pageRows: (html) => (html.match(/data-approval=/g) ?? []).length,
  apiRows: (json) => json.data.length,
} satisfies PageCase;
