import { sumRecordedAttempts } from '../../src/reactors/webhooks.ts';
import type { PageCase } from '../dashboard-world.ts';

// An endpoint's page (Webhooks): its deliveries, dead letters and attempts per
// hour, at `rows` deliveries. The endpoint is made through the API; its
// deliveries are operational rows the dispatcher writes (not events), seeded
// here in SQL the way it writes them: a stored event, one delivery and its
// attempt each, one a minute back from now (so the chart's last 24 hours hold
// 1 440 of them), every 20th dead. Beside GET /v1/webhook-endpoints/{id}/deliveries?limit=50.
export default {
  name: 'Webhook deliveries',
  table: 'webhook_deliveries',
  async seed(world, org, rows) {
    const endpoint = await org.post('/v1/webhook-endpoints', { event: 'consumer.created', name: 'orders', webhook_url: 'https://example.com/hooks' });
    const batch = 10_000;
    for (let from = 0; from < rows; from += batch) {
      const n = Math.min(batch, rows - from);
      await world.db.query(
        `WITH s AS (SELECT g, gen_random_uuid() AS ev, now() - make_interval(mins => g) AS at FROM generate_series($4::int, $4::int + $5::int - 1) g),
         e AS (INSERT INTO webhook_events (id, org_id, project_id, event_type, payload, received_at, position)
               SELECT ev, $1, $2, 'consumer.created', jsonb_build_object('consumer_id', 'con_' || g), at, lpad(g::text, 20, '0') FROM s),
         d AS (INSERT INTO webhook_deliveries (trigger_id, event_id, org_id, project_id, kind, attempt, status, next_attempt_at, created_at, finished_at)
               SELECT $3, ev, $1, $2, 'original', 1, CASE WHEN g % 20 = 0 THEN 'dead' ELSE 'delivered' END, at, at, at FROM s RETURNING id, created_at, status)
         INSERT INTO webhook_attempts (delivery_id, attempt, request_headers, request_body, response_status, response_headers, response_body, error, delivered, created_at)
         SELECT id, 1, '{"content-type":"application/json"}', '{}', CASE WHEN status = 'dead' THEN 500 ELSE 200 END, '{}', 'ok', NULL, status = 'delivered', created_at FROM d`,
        [org.orgId, org.projectId, endpoint.id, from, n],
      );
      process.stderr.write(`  webhook deliveries: ${from + n}/${rows}\n`);
    }
    // The hourly sums, as the dispatcher keeps them for attempts it records.
    await sumRecordedAttempts(world.db, endpoint.id);
    await world.db.query('ANALYZE webhook_deliveries; ANALYZE webhook_attempts; ANALYZE webhook_events; ANALYZE webhook_attempts_hourly');
    return { page: `/dashboard/webhooks/${endpoint.id}`, api: `/v1/webhook-endpoints/${endpoint.id}/deliveries?limit=50`, apiHeaders: org.key };
  },
  pageRows: (html) => (html.match(/data-delivery=/g) ?? []).length,
  apiRows: (json) => json.deliveries.length,
} satisfies PageCase;
