import type { PageCase } from '../dashboard-world.ts';

// An MCP server's page: one server registered through the API, its paid calls
// copied up to `rows`. A paid call needs a payment settled on a chain, which
// this bench's world has none of: the first call is written as the
// projection writes `mcp_call.settled` (SQL), then copied. The page lists the
// server's tools, its earnings per day (the projection's daily sums, made
// here from the copies), and
// the latest 50 paid calls. The API has no list of paid calls: beside it,
// GET /v1/mcp-servers (the project's servers, with their tools).
export default {
  name: 'MCP paid calls',
  table: 'mcp_calls',
  async seed(world, org, rows) {
    const server = await org.post(
      '/v1/mcp-servers',
      { consumer_id: 'cons_1', name: 'Bench tools', slug: `bench-${org.orgId.slice(-8).toLowerCase()}`, upstream_url: 'https://tools.example.com/mcp', platform_fee_bps: 250, tools: [{ tool_name: 'echo', description: 'Echo, paid', price: '0.01' }] },
      { ...org.key, 'x-svc-user': org.ownerId },
    );
    await world.db.query(
      `INSERT INTO mcp_calls (id, server_id, org_id, tool_name, environment, payer, price_atomic, fee_atomic, tx_hash, status, created_at, position)
       VALUES ('mcpcall_bench', $1, $2, 'echo', 'test', '0x00000000000000000000000000000000000000aa', 10000, 250, '0x' || repeat('ab', 32), 'completed', now(), '0')`,
      [server.id, org.orgId],
    );
    await world.multiply('mcp_calls', org.orgId, rows, { id: "src.id || '_' || g", created_at: "src.created_at - g * interval '10 seconds'" });
    // The day's sums, as the projection keeps them for calls it projects.
    await world.db.query(
      `INSERT INTO mcp_earnings_daily (server_id, day, org_id, calls, price_atomic, fee_atomic)
       SELECT server_id, (created_at AT TIME ZONE 'UTC')::date, org_id, count(*), sum(price_atomic), sum(fee_atomic) FROM mcp_calls WHERE server_id = $1 GROUP BY 1, 2, 3`,
      [server.id],
    );
    return { page: `/dashboard/mcp-servers/${server.id}`, api: '/v1/mcp-servers', apiHeaders: { ...org.key, 'x-svc-user': org.ownerId } };
  },
  pageRows: (html) => (html.match(/data-label="Paid"/g) ?? []).length,
  apiRows: (json) => json.mcp_servers.length,
} satisfies PageCase;
