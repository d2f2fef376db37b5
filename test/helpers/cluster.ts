import { testAuditFormat } from './ledger.ts';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Test } from 'tap';
import type { BuildOptions } from '../../src/app.ts';
import { EvmSettlement } from '../../src/adapters/chain/settlement.ts';
import { postgresNonceGate } from '../../src/adapters/chain/nonces.ts';
import { BASE_SEPOLIA_CHAIN_ID, BASE_SEPOLIA_USDC, SANDBOX_FACILITATOR_KEY } from '../../src/adapters/chain/local-chain.ts';
import type { Db } from '../../src/postgres/db.ts';
import { startBalancer, type Balancer } from './balancer.ts';
import { secondInstance, testApp, type TestApp } from './app.ts';

// Two service instances on one PostgreSQL behind a round-robin balancer on
// loopback: the production shape (docs/deployment.md) in one test process.
// The second is built as another process runs it (its own pool, event store,
// read side, sealer and caches: test/helpers/app.ts secondInstance) and shares
// only what instances share in production: the database, the secrets (the
// audit key, the platform secret, the vault's master key) and the outside
// systems (the sandbox providers, started once).

export type Cluster = {
  first: TestApp;
  apps: FastifyInstance[];
  urls: string[];
  balancer: Balancer;
  /**
   * Drains the second instance and closes it as SIGTERM does (src/instance.ts):
   * its app (event streams told to reconnect, requests in flight answered),
   * then its runtime. The balancer keeps its slot: a connection refused there
   * goes to the first instance.
   */
  stopSecond(): Promise<void>;
  /** A new second instance on the same database, put in the balancer's slot of the old one (a rolling restart). */
  startSecond(): Promise<void>;
};

type Options = Parameters<typeof testApp>[1];

type Member = { app: FastifyInstance; url: string; close(): Promise<void> };

/** An instance as secondInstance builds it, listening on loopback; its teardown (the app, then its runtime) also runs when the cluster stops it, once. */
async function listeningInstance(t: Test, a: TestApp, opts: Parameters<typeof secondInstance>[2]): Promise<Member> {
  const teardowns: (() => unknown)[] = [];
  const scope = { teardown: (fn: () => unknown) => void teardowns.push(fn) } as unknown as Test;
  let closed: Promise<void> | undefined;
  const close = () =>
    (closed ??= (async () => {
      for (const fn of teardowns.reverse()) await fn();
    })());
  t.teardown(close);
  const app = await secondInstance(scope, a, opts);
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, close };
}

export async function testCluster(t: Test, opts: Options = {}): Promise<Cluster> {
  const { app: appOpts, ...first } = opts;
  const a = await testApp(t, opts);
  const secondOpts = {
    sealer: { checkpointEveryEntries: first.checkpointEveryEntries ?? 4, checkpointIntervalMs: first.checkpointIntervalMs ?? 60_000, format: testAuditFormat() },
    app: (db: Db) => ({
      vault: a.vault,
      providers: a.providerRuntime,
      // x402 on the same chain, settled by this instance's own adapter, one sender per facilitator account through the shared database.
      ...(a.x402?.test ? { x402: { ...a.x402, test: { ...a.x402.test, settlement: new EvmSettlement({ rpcUrl: a.x402.test.settlement.rpcUrl, chainId: BASE_SEPOLIA_CHAIN_ID, token: BASE_SEPOLIA_USDC, facilitatorKey: SANDBOX_FACILITATOR_KEY, receiptTimeoutMs: 10_000, nonces: postgresNonceGate(db) }) } } } : {}),
      ...(a.sandboxMerchants ? { merchants: a.sandboxMerchants.sites() } : {}),
      readWaitMs: 60_000,
      ...(first.rateLimit ? { rateLimit: first.rateLimit } : {}),
      ...(first.now ? { now: first.now } : {}),
      ...(first.oauth ? { oauth: first.oauth } : {}),
      ...appOpts,
    }),
  };
  await a.app.listen({ host: '127.0.0.1', port: 0 });
  let second = await listeningInstance(t, a, secondOpts);
  const apps = [a.app, second.app];
  const urls = [`http://127.0.0.1:${(a.app.server.address() as AddressInfo).port}`, second.url];
  const balancer = await startBalancer([...urls]);
  t.teardown(() => balancer.close());
  return {
    first: a,
    apps,
    urls,
    balancer,
    stopSecond: () => second.close(),
    async startSecond() {
      second = await listeningInstance(t, a, secondOpts);
      apps[1] = second.app;
      urls[1] = second.url;
      balancer.replace(1, second.url);
    },
  };
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
