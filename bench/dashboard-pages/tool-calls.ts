import type { PageCase } from '../dashboard-world.ts';

// The Tool calls page: a session whose agent made 200 calls through the API's
// execute (with no connection to the provider each is recorded as a failed
// call, a row of tool_calls like any other), copied up to `rows`; the page
// lists the project's newest 50, beside GET /v1/tool-calls?limit=50.
export default {
  name: 'Tool calls',
  table: 'tool_calls',
  async seed(world, org, rows) {
    const session = await org.post('/v1/sessions', { servers: ['acme-payments'], user_id: 'u1' });
    await world.many('tool calls', Math.min(rows, 200), async (i) => {
      const res = await world.app.inject({ method: 'POST', url: `/v1/sessions/${session.id}/execute`, headers: org.key, payload: { tool: 'acme-payments/create_charge', input: { amount_minor: 100 + (i % 1000), currency: 'BRL' } } });
      if (res.statusCode >= 500 || !res.json().error?.details?.tool_call_id) throw new Error(`a recorded call answers with its tool_call_id, got ${res.statusCode}: ${res.body.slice(0, 200)}`);
    });
    // Copies get new ids and sequence numbers below the originals' (the list pages by seq), and earlier times.
    await world.multiply('tool_calls', org.orgId, rows, {
      id: "src.id || '_' || g",
      seq: "src.seq - g * 1000000",
      called_at: "src.called_at - g * interval '1 second'",
    });
    return { page: '/dashboard/tool-calls', api: '/v1/tool-calls?limit=50', apiHeaders: org.key };
  },
  pageRows: (html) => (html.match(/data-call=/g) ?? []).length,
  apiRows: (json) => json.tool_calls.length,
} satisfies PageCase;
