import Fastify, { type FastifyInstance } from 'fastify';
import type { Runtime } from './runtime.ts';

// The composition root of the HTTP service: every plugin is registered here,
// explicitly. Tests build their own app from their own runtime.

export type AppDeps = Pick<Runtime, 'db' | 'store'> & { logLevel?: string };

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    logger: { level: deps.logLevel ?? 'info' },
  });

  app.get('/healthz', async () => ({ status: 'ok' }));

  await app.ready();
  return app;
}
