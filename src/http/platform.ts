import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { listCheckpoints } from '../projector/checkpoints.ts';
import type { LogRewind } from '../eventstore/port.ts';
import { PostgresEventStore } from '../eventstore/postgres.ts';
import { buildOpenApi } from './kernel/openapi.ts';
import { defineRoute, type AppDeps } from './kernel/route.ts';

// Liveness, readiness (event store, read side and sealer lag), and the OpenAPI document.

export async function platformRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  defineRoute(app, deps, {
    method: 'GET',
    url: '/healthz',
    operationId: 'healthz',
    summary: 'Liveness; 503 `draining` once the instance is told to stop (SHUTDOWN_DELAY_MS), as balancers that read it expect',
    tags: ['platform'],
    auth: 'open',
    responses: { 200: z.object({ status: z.literal('ok').describe('`ok`: the process runs and takes requests.') }), 503: z.object({ status: z.literal('draining').describe('`draining`: the instance was told to stop; a balancer should send its requests elsewhere.') }) },
    async handler() {
      return { status: 200, body: { status: 'ok' } };
    },
  });

  const Follower = z.object({
    name: z.string().describe('The read model or reactor, by its checkpoint name.'),
    kind: z.string().describe('What it is: `projection` (a read model), `sealer` (seals the audit chain) or `reactor` (acts on events).'),
    status: z.string().describe('Its state: `running`, `rebuilding` or `failed` (then `error` says why).'),
    position: z.string().describe('The log position it has applied up to (a decimal string).'),
    caught_up: z.boolean().describe('True when its position has reached the log head read for this answer.'),
    error: z.string().nullable().describe('Why it stopped; null while it runs.'),
  });
  defineRoute(app, deps, {
    method: 'GET',
    url: '/readyz',
    operationId: 'readyz',
    summary: 'Readiness: the event store answers and every follower runs; lag per follower',
    tags: ['platform'],
    auth: 'open',
    responses: {
      200: z.object({ status: z.literal('ready').describe('`ready`: the event store answers and no follower failed.'), head: z.string(), followers: z.array(Follower) }),
      503: z.object({ status: z.literal('not_ready').describe('`not_ready`: `reason` says what is missing.'), reason: z.string(), followers: z.array(Follower) }),
    },
    async handler({ deps }) {
      // The database went backwards and this instance is reloading its state (src/recovery.ts).
      const recovering = () => (deps.store as { recovering?: LogRewind }).recovering;
      const reloading = (r: LogRewind) => ({ status: 503 as const, body: { status: 'not_ready' as const, reason: PostgresEventStore.reason(r), followers: [] } });
      let head: string;
      try {
        head = await deps.store.headPosition();
      } catch {
        return { status: 503, body: { status: 'not_ready', reason: 'event store unreachable', followers: [] } };
      }
      // Reading the head is itself a check: a head behind what was acknowledged starts the recovery.
      const rewind = recovering();
      if (rewind) return reloading(rewind);
      const followers = (await listCheckpoints(deps.db)).map((c) => ({ name: c.name, kind: c.kind, status: c.status, position: c.position, caught_up: c.position >= head, error: c.error }));
      const failed = followers.find((f) => f.status === 'failed');
      if (failed) return { status: 503, body: { status: 'not_ready', reason: `${failed.name} failed: ${failed.error ?? ''}`, followers } };
      return { status: 200, body: { status: 'ready', head, followers } };
    },
  });

  let doc: unknown;
  for (const url of ['/openapi.json', '/v1/openapi.json']) {
    app.get(url, async (_req, reply) => {
      doc ??= buildOpenApi(deps.routes, deps.baseUrl, deps.pages);
      return reply.type('application/json; charset=utf-8').send(doc);
    });
  }
}
