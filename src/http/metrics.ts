import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Gauge, Registry } from 'prom-client';
import { processRegistry } from '../metrics.ts';
import { listCheckpoints } from '../projector/checkpoints.ts';
import { ApiError } from './kernel/errors.ts';
import type { AppDeps } from './kernel/route.ts';

// GET /metrics in the Prometheus text format: requests per route pattern,
// method and status (count and latency), the lag of every follower
// (projections, the audit sealer, reactors) in positions and seconds, and the
// process-wide counters of src/metrics.ts. Open from loopback when no token is
// configured; with METRICS_TOKEN, only with `Authorization: Bearer <token>`.
// Labels never carry tenant data: a route is its pattern (`/v1/mandates/:id`),
// never the raw URL.

/** How far back an adapter whose positions are not numbers is read to count a lag (bounded). */
const LAG_COUNT_MAX = 10_000;

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|::ffff:127\.\d+\.\d+\.\d+)$/;

const digest = (s: string) => createHash('sha256').update(s).digest();

export function isLoopback(req: FastifyRequest): boolean {
  return LOOPBACK.test(req.socket.remoteAddress ?? '');
}

/** Where every answered request can be seen once, when its response has finished (the composition root passes fastify's log controller). */
export type OnCompleted = (observer: (request: FastifyRequest, reply: FastifyReply) => void) => void;

/** Counts every answered request (seen through `onCompleted`) and registers the /metrics route. */
export function registerMetrics(app: FastifyInstance, deps: AppDeps, onCompleted: OnCompleted, opts: { token?: string | undefined }): void {
  const registry = new Registry();
  requestMetrics(onCompleted, registry);
  followerLagGauges(deps, registry);

  const expected = opts.token ? digest(opts.token) : undefined;
  app.get('/metrics', async (req, reply) => {
    if (expected) {
      const h = req.headers.authorization;
      const given = typeof h === 'string' && h.startsWith('Bearer ') ? h.slice(7) : '';
      if (!timingSafeEqual(digest(given), expected)) throw new ApiError(401, 'unauthorized', 'metrics need the configured bearer token');
    } else if (!isLoopback(req)) {
      throw new ApiError(403, 'forbidden', 'metrics are served to loopback only unless METRICS_TOKEN is configured');
    }
    const merged = Registry.merge([processRegistry, registry]);
    return reply.type(merged.contentType).send(await merged.metrics());
  });
}

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** One (method, route pattern, status): its request count, and its latencies' bucket counts (not cumulative) and sum. */
type RouteStats = { labels: { method: string; route: string; status: string }; count: number; sum: number; buckets: number[] };

/**
 * Requests per method, route pattern and status: their count and latency. An
 * answered request adds to plain numbers (found by one string key), seen where
 * fastify's log controller sees every finished response (src/http/kernel/request-log.ts);
 * the Prometheus families are written from them at scrape time. prom-client's
 * own counter and histogram hash their label object on every call, and a
 * response hook of our own cost another hook run per request.
 */
function requestMetrics(onCompleted: OnCompleted, registry: Registry): void {
  const stats = new Map<string, RouteStats>();
  onCompleted((req, reply) => {
    const route = req.routeOptions.url ?? 'unmatched';
    const status = reply.statusCode;
    const key = `${req.method} ${status} ${route}`;
    let s = stats.get(key);
    if (s === undefined) {
      s = { labels: { method: req.method, route, status: String(status) }, count: 0, sum: 0, buckets: LATENCY_BUCKETS.map(() => 0) };
      stats.set(key, s);
    }
    const seconds = reply.elapsedTime / 1000;
    s.count++;
    s.sum += seconds;
    let i = 0;
    while (i < LATENCY_BUCKETS.length && seconds > LATENCY_BUCKETS[i]!) i++;
    if (i < LATENCY_BUCKETS.length) s.buckets[i]!++;
  });
  const family = (name: string, help: string, type: 'counter' | 'histogram', values: () => MetricValue[]) => ({
    name,
    help,
    type,
    aggregator: 'sum' as const,
    get: async () => ({ name, help, type, aggregator: 'sum' as const, values: values() }),
    reset: () => stats.clear(),
  });
  registry.registerMetric(
    family('ledger_http_requests_total', 'HTTP requests, by method, route pattern and status', 'counter', () => [...stats.values()].map((s) => ({ labels: s.labels, value: s.count }))) as never,
  );
  const latency = 'ledger_http_request_duration_seconds';
  registry.registerMetric(
    family(latency, 'HTTP request latency, by method, route pattern and status', 'histogram', () =>
      [...stats.values()].flatMap((s) => {
        let acc = 0;
        return [
          ...LATENCY_BUCKETS.map((le, i) => ({ metricName: `${latency}_bucket`, labels: { le, ...s.labels }, value: (acc += s.buckets[i]!) })),
          { metricName: `${latency}_bucket`, labels: { le: '+Inf', ...s.labels }, value: s.count },
          { metricName: `${latency}_sum`, labels: s.labels, value: s.sum },
          { metricName: `${latency}_count`, labels: s.labels, value: s.count },
        ];
      }),
    ) as never,
  );
}

type MetricValue = { metricName?: string; labels: Record<string, string | number>; value: number };

/** Follower lag, read at scrape time from the checkpoints and the log: positions and seconds behind, per follower. */
function followerLagGauges(deps: AppDeps, registry: Registry): void {
  type Lag = { name: string; kind: string; positions: number; seconds: number };
  let scrape: Promise<Lag[]> | undefined;
  const lags = () =>
    (scrape ??= (async () => {
      const [head, followers] = await Promise.all([deps.store.headPosition(), listCheckpoints(deps.db)]);
      const now = deps.now().getTime();
      return Promise.all(
        followers.map(async (f) => {
          if (f.position >= head) return { name: f.name, kind: f.kind, positions: 0, seconds: 0 };
          const next = await deps.store.readAll({ after: f.position, maxCount: /^\d+$/.test(head) && /^\d+$/.test(f.position) ? 1 : LAG_COUNT_MAX });
          const positions = next.length === 1 && /^\d+$/.test(head) ? Number(BigInt(head) - BigInt(f.position)) : next.length;
          const oldest = next[0] ? Date.parse(next[0].recordedAt) : now;
          return { name: f.name, kind: f.kind, positions, seconds: Math.max(0, (now - oldest) / 1000) };
        }),
      );
    })().finally(() => setImmediate(() => (scrape = undefined))));
  new Gauge({
    name: 'ledger_follower_lag_positions',
    help: 'Events in the log a follower (projection, audit sealer, reactor) has not processed yet',
    labelNames: ['follower', 'kind'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const l of await lags()) this.set({ follower: l.name, kind: l.kind }, l.positions);
    },
  });
  new Gauge({
    name: 'ledger_follower_lag_seconds',
    help: 'Age of the oldest event a follower has not processed yet (0 when caught up)',
    labelNames: ['follower', 'kind'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const l of await lags()) this.set({ follower: l.name, kind: l.kind }, l.seconds);
    },
  });
}
