import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Test } from 'tap';
import type { BuildOptions } from '../../src/app.ts';
import { startBalancer, type Balancer } from './balancer.ts';
import { secondInstance, testApp, type TestApp } from './app.ts';

// Two service instances on one PostgreSQL behind a round-robin balancer on
// loopback: the production shape (docs/deployment.md) in one test process.
// The second is built as another process runs it (its own pool, event store,
// read side, sealer and caches: test/helpers/app.ts secondInstance) and shares
// only what instances share in production: the database, the secrets (the
// audit key, the platform secret, the vault's master key) and the outside
// systems (the sandbox providers, started once).

export type Cluster = { first: TestApp; apps: FastifyInstance[]; urls: string[]; balancer: Balancer };

type Options = Parameters<typeof testApp>[1];

export async function testCluster(t: Test, opts: Options = {}): Promise<Cluster> {
  const { app: appOpts, ...first } = opts;
  const a = await testApp(t, opts);
  const b = await secondInstance(t, a, {
    sealer: { checkpointEveryEntries: first.checkpointEveryEntries ?? 4, checkpointIntervalMs: first.checkpointIntervalMs ?? 60_000 },
    app: {
      vault: a.vault,
      providers: a.providerRuntime,
      ...(a.sandboxMerchants ? { merchants: a.sandboxMerchants.sites() } : {}),
      readWaitMs: 60_000,
      ...(first.rateLimit ? { rateLimit: first.rateLimit } : {}),
      ...(first.now ? { now: first.now } : {}),
      ...(first.oauth ? { oauth: first.oauth } : {}),
      ...appOpts,
    },
  });
  const apps = [a.app, b];
  const urls: string[] = [];
  for (const app of apps) {
    await app.listen({ host: '127.0.0.1', port: 0 });
    urls.push(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}`);
  }
  const balancer = await startBalancer(urls);
  t.teardown(() => balancer.close());
  return { first: a, apps, urls, balancer };
}

/** fetch with JSON in and out: the status and the parsed body. */
export async function call(base: string, method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(`${base}${path}`, { method, headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) }, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {}
  return { status: res.status, body: parsed, headers: res.headers };
}
