import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { processRegistry } from '../metrics.ts';
import { listCheckpoints } from '../projector/checkpoints.ts';
import { ApiError } from './errors.ts';
import type { AppDeps } from './route.ts';

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

/** Registers the request hooks on the root instance and the /metrics route. */
export function registerMetrics(app: FastifyInstance, deps: AppDeps, opts: { token?: string | undefined }): void {
  const registry = new Registry();
  requestMetrics(app, registry);
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

/** Requests per method, route pattern and status: their count and latency, counted by a hook on every response. */
function requestMetrics(app: FastifyInstance, registry: Registry): void {
  const labelNames = ['method', 'route', 'status'] as const;
  const requests = new Counter({ name: 'ledger_http_requests_total', help: 'HTTP requests, by method, route pattern and status', labelNames, registers: [registry] });
  const latency = new Histogram({
    name: 'ledger_http_request_duration_seconds',
    help: 'HTTP request latency, by method, route pattern and status',
    labelNames,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  // One pair of labelled children per (method, route pattern, status), found by a
  // string key: cheaper per request than prom-client hashing a label object twice.
  // A callback hook, not an async one (no promise per request).
  const children = new Map<string, { count: { inc(): void }; time: { observe(v: number): void } }>();
  app.addHook('onResponse', (req, reply, done) => {
    const route = req.routeOptions.url ?? 'unmatched';
    const status = reply.statusCode;
    const key = `${req.method} ${status} ${route}`;
    let c = children.get(key);
    if (c === undefined) {
      const labels = { method: req.method, route, status: String(status) };
      c = { count: requests.labels(labels), time: latency.labels(labels) };
      children.set(key, c);
    }
    c.count.inc();
    c.time.observe(reply.elapsedTime / 1000);
    done();
  });
}

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
