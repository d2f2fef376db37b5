import type { PageCase } from '../dashboard-world.ts';

// The Mandates page of one consumer: a consumer with `rows` mandates (each a
// grant to the same agent: 200 through the API, copied up to `rows`); the page lists the newest 50 of that consumer
// (/dashboard/mandates?consumer=…, by cursor over the index on
// (org, project, consumer, created_at, id)), beside
// GET /v1/mandates?consumer_id=…&limit=50.
export default {
  name: 'Mandates',
  table: 'mandates',
  async seed(world, org, rows) {
    await org.post('/v1/agents', { agent_id: 'buyer', principal_ref: 'p' });
    const consumer = await org.post('/v1/consumers', { display_name: 'Ana' });
    const expires = Math.floor(Date.now() / 1000) + 86_400 * 30;
    await world.many('mandates', Math.min(rows, 200), (i) =>
      org.post('/v1/mandates', { consumer_id: consumer.id, agent_id: 'buyer', purpose: `bench ${i}`, merchant_allowlist: ['shop'], merchant_pin_kind: 'merchant-id', cap_minor: '100000', per_tx_cap_minor: '10000', currency: 'BRL', expires_at: expires }),
    );
    // The rest copied in SQL (their currency slots are not: the page reads none, the API answers them empty).
    await world.multiply('mandates', org.orgId, rows, { id: "src.id || '_' || g", created_at: "src.created_at - g * interval '1 second'" });
    return { page: `/dashboard/mandates?consumer=${consumer.id}`, api: `/v1/mandates?consumer_id=${consumer.id}&limit=50`, apiHeaders: org.key };
  },
  pageRows: (html) => (html.match(/href="\/dashboard\/mandates\/mdt_/g) ?? []).length,
  apiRows: (json) => json.mandates.length,
} satisfies PageCase;
