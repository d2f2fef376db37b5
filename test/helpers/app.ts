import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import type { Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { buildApp, type BuildOptions } from '../../src/app.ts';
import { PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { openDb, type Db } from '../../src/postgres/db.ts';
import { startReadSide } from '../../src/readside.ts';
import type { SealerOptions } from '../../src/audit/sealer.ts';
import { Vault } from '../../src/adapters/vault.ts';
import type { Bank } from '../../src/adapters/bank/port.ts';
import type { PixDeps } from '../../src/adapters/psp/port.ts';
import { BASE_SEPOLIA_CHAIN_ID, BASE_SEPOLIA_USDC, SANDBOX_FACILITATOR_KEY, startLocalChain } from '../../src/adapters/chain/local-chain.ts';
import { EvmSettlement } from '../../src/adapters/chain/settlement.ts';
import { postgresNonceGate } from '../../src/adapters/chain/nonces.ts';
import { generateSigningKey } from '../../src/audit/note.ts';
import type { X402Deps } from '../../src/adapters/chain/x402.ts';
import { defaultWebhookConfig, WebhookDispatcher, type WebhookConfig } from '../../src/reactors/webhooks.ts';
import type { RateLimitConfig } from '../../src/http/kernel/ratelimit.ts';
import type { OAuthOptions } from '../../src/http/oauth/oauth-common.ts';
import { testPoolMax } from './db.ts';
import { ContractCheck } from './contract.ts';
import { testLedger, type TestLedger } from './ledger.ts';
import { Catalog } from '../../src/providers/catalog.ts';
import { HttpProvider } from '../../src/adapters/providers/http-provider.ts';
import { SandboxProviders } from '../../src/adapters/providers/sandbox-providers.ts';
import type { McpConfig } from '../../src/mcp/config.ts';
import type { ProviderRuntime } from '../../src/providers/tools.ts';
import { SandboxMerchants } from '../../src/adapters/merchants/sandbox-merchants.ts';
import type { BrowserWorker } from '../../src/adapters/browser/worker.ts';

// The HTTP app over a whole test ledger, and a bootstrapped organization.

export const SERVICE_SECRET = 'svc_test_secret_0123456789abcdefghijklmnop';

export type TestApp = { app: FastifyInstance; ledger: TestLedger; vault: Vault; webhooks: WebhookDispatcher; x402: X402Deps | undefined; sandboxProviders: SandboxProviders | undefined; providerRuntime: ProviderRuntime; sandboxMerchants: SandboxMerchants | undefined };

/** Fails `t` on the answers `contract` found undescribed; CONTRACT_LOG=<file> (a survey) appends them there as JSON lines instead. */
function failOnUndescribed(t: Test, contract: ContractCheck): void {
  if (contract.violations.length === 0) return;
  if (process.env.CONTRACT_LOG) return appendFileSync(process.env.CONTRACT_LOG, contract.violations.map((v) => `${JSON.stringify(v)}\n`).join(''));
  const report = contract.report();
  console.error(`answers the OpenAPI document does not describe:\n${report}`);
  t.fail(`${contract.violations.length} answers the OpenAPI document does not describe:\n${report}`);
}

/** An app a test builds with options of its own (a second instance, another limit), held to the served document as testApp's are. */
export async function checkedApp(t: Test, opts: BuildOptions): Promise<FastifyInstance> {
  const contract = new ContractCheck();
  const app = await buildApp({
    ...opts,
    hooks: (a) => {
      contract.install(a);
      opts.hooks?.(a);
    },
  });
  await contract.load(app);
  t.teardown(() => failOnUndescribed(t, contract));
  return app;
}

export async function testApp(t: Test, opts: { readWaitMs?: number; sessionQuota?: number; rateLimit?: RateLimitConfig; now?: () => Date; webhooks?: Partial<WebhookConfig>; webhookWorker?: boolean; banks?: Map<string, Bank>; x402?: boolean; oauth?: OAuthOptions; pix?: PixDeps; providers?: boolean; providerTimeoutMs?: number; logStream?: { write(line: string): void }; mcp?: Partial<McpConfig>; store?: 'postgres' | 'esdb'; merchants?: boolean; browserWorker?: BrowserWorker | null; checkpointEveryEntries?: number; checkpointIntervalMs?: number; auditWitnesses?: BuildOptions['auditWitnesses']; auditFormat?: 1 | 2; providerOAuthClients?: Record<string, { client_id: string; client_secret: string }>; app?: Partial<BuildOptions> } = {}): Promise<TestApp> {
  const ledger = await testLedger(t, { ...(opts.now ? { now: opts.now } : {}), ...(opts.store ? { store: opts.store } : {}), ...(opts.checkpointEveryEntries ? { checkpointEveryEntries: opts.checkpointEveryEntries } : {}), ...(opts.checkpointIntervalMs ? { checkpointIntervalMs: opts.checkpointIntervalMs } : {}), ...(opts.auditFormat ? { auditFormat: opts.auditFormat } : {}) });
  const vault = await Vault.open(ledger.db, randomBytes(32));
  // Tests reach their receivers on loopback; deliveries retry on a compressed schedule.
  const webhookTargets = { loopback: true, private: false };
  const webhooks = new WebhookDispatcher(ledger.db, ledger.store, vault, ledger.readSide.progress, {
    ...defaultWebhookConfig(webhookTargets, 'http://127.0.0.1:8080'),
    scheduleMs: [50, 100, 150],
    workerIntervalMs: 50,
    timeoutMs: 5_000,
    ...opts.webhooks,
  }, opts.now);
  await webhooks.start({ worker: opts.webhookWorker ?? false });
  t.teardown(() => webhooks.stop());
  let x402: X402Deps | undefined;
  if (opts.x402) {
    const chain = await startLocalChain();
    t.teardown(() => chain.stop());
    const settlement = new EvmSettlement({ rpcUrl: chain.rpcUrl, chainId: BASE_SEPOLIA_CHAIN_ID, token: BASE_SEPOLIA_USDC, facilitatorKey: SANDBOX_FACILITATOR_KEY, receiptTimeoutMs: 10_000, nonces: postgresNonceGate(ledger.db) });
    x402 = {
      test: { name: 'base-sepolia', chainId: BASE_SEPOLIA_CHAIN_ID, token: BASE_SEPOLIA_USDC, domainName: 'USDC', domainVersion: '2', settlement, adapter: 'local-evm' },
      live: undefined,
      mainnetCeilingMinor: 10_000n,
      receiptKey: generateSigningKey('receipts'),
      receiptKid: 'receipts-test-1',
    };
  }
  // The sandbox providers on loopback, reached through the provider HTTP adapter.
  let sandboxProviders: SandboxProviders | undefined;
  const catalog = Catalog.load();
  if (opts.providers) {
    sandboxProviders = new SandboxProviders(catalog, opts.now ? { now: opts.now } : {});
    await sandboxProviders.start();
    t.teardown(() => sandboxProviders!.stop());
  }
  const providers: ProviderRuntime = {
    catalog,
    client: new HttpProvider({ allow: webhookTargets, timeoutMs: opts.providerTimeoutMs ?? 2_000, ...(sandboxProviders ? { extraCa: [sandboxProviders.caPem] } : {}) }),
    sandbox: sandboxProviders ? { http: sandboxProviders.url, https: sandboxProviders.tlsUrl } : undefined,
    ...(opts.providerOAuthClients ? { oauthClients: opts.providerOAuthClients } : {}),
    ...(sandboxProviders ? { sandboxOAuthClients: sandboxProviders.platformOAuthClients('http://127.0.0.1:8080/v1/connections/callback') } : {}),
  };
  // The sandbox shopping merchants (hosted-browser connect) on loopback.
  let sandboxMerchants: SandboxMerchants | undefined;
  if (opts.merchants) {
    sandboxMerchants = new SandboxMerchants();
    await sandboxMerchants.start();
    t.teardown(() => sandboxMerchants!.stop());
  }
  const contract = new ContractCheck();
  const app = await buildApp({
    vault,
    ...(sandboxMerchants ? { merchants: sandboxMerchants.sites() } : {}),
    ...(opts.browserWorker !== undefined ? { browserWorker: opts.browserWorker } : {}),
    providers,
    ...(opts.logStream ? { logStream: opts.logStream } : {}),
    webhooks,
    ...(x402 ? { x402 } : {}),
    ...(opts.mcp ? { mcp: opts.mcp } : {}),
    webhookTargets,
    ...(opts.banks ? { banks: opts.banks } : {}),
    ...(opts.pix ? { pix: opts.pix } : {}),
    db: ledger.db,
    store: ledger.store,
    readSide: ledger.readSide,
    serviceSecret: SERVICE_SECRET,
    baseUrl: 'http://127.0.0.1:8080',
    logLevel: opts.logStream ? 'trace' : 'silent',
    readWaitMs: opts.readWaitMs ?? 60_000,
    ...(opts.sessionQuota !== undefined ? { sessionQuota: opts.sessionQuota } : {}),
    rateLimit: opts.rateLimit ?? { burst: 100_000, perSecond: 100_000 },
    ...(opts.now ? { now: opts.now } : {}),
    ...(opts.oauth ? { oauth: opts.oauth } : {}),
    ...(opts.auditWitnesses ? { auditWitnesses: opts.auditWitnesses } : {}),
    ...opts.app,
    hooks: (a) => {
      contract.install(a);
      opts.app?.hooks?.(a);
    },
  });
  t.teardown(() => app.close());
  await contract.load(app);
  t.teardown(() => failOnUndescribed(t, contract));
  return { app, ledger, vault, webhooks, x402, sandboxProviders, providerRuntime: providers, sandboxMerchants };
}

export type Org = { orgId: string; ownerId: string; projectId: string; testKey: string; liveKey: string; owner: Record<string, string>; key: Record<string, string> };

export const platform = { authorization: `Bearer ${SERVICE_SECRET}` };

/** A clock tests can move: real time plus an offset. */
export function testClock() {
  let offsetMs = 0;
  return { now: () => new Date(Date.now() + offsetMs), advance: (ms: number) => void (offsetMs += ms) };
}

function ok(res: LightMyRequestResponse, status: number): LightMyRequestResponse {
  if (res.statusCode !== status) throw new Error(`expected ${status}, got ${res.statusCode}: ${res.body}`);
  return res;
}

/**
 * A second service instance on the test app's database, as another process
 * runs it: its own pool, event store (group commit, inline followers), read
 * side (no reactors), sealer and command-state cache. `app` overrides its
 * build options (say, the first instance's vault, providers or x402).
 */
export async function secondInstance(t: Test, a: TestApp, opts: { sealer?: Partial<SealerOptions>; app?: Partial<BuildOptions> | ((db: Db) => Partial<BuildOptions>) } = {}): Promise<FastifyInstance> {
  const db = openDb(a.ledger.url, { max: testPoolMax(10) });
  const store = await PostgresEventStore.open(db);
  const readSide = await startReadSide(db, store, { signingKey: a.ledger.key, origin: a.ledger.origin, ...opts.sealer }, undefined, { reactors: false });
  const app = await buildApp({ vault: await Vault.open(db, randomBytes(32)), db, store, readSide, serviceSecret: SERVICE_SECRET, baseUrl: 'http://127.0.0.1:8080', logLevel: 'silent', readWaitMs: 10_000, rateLimit: { burst: 100_000, perSecond: 100_000 }, ...(typeof opts.app === 'function' ? opts.app(db) : opts.app) });
  t.teardown(async () => {
    await app.close();
    await readSide.stop();
    await store.close();
    await db.close();
  });
  return app;
}

export async function bootstrapOrg(app: FastifyInstance, name = 'Acme'): Promise<Org> {
  const org = ok(await app.inject({ method: 'POST', url: '/v1/orgs', headers: platform, payload: { name, owner_email: `owner+${name.toLowerCase()}@example.com` } }), 201).json();
  const owner = { ...platform, 'x-svc-user': org.owner.user_id };
  const testKey = ok(await app.inject({ method: 'POST', url: '/v1/api-keys', headers: owner, payload: { name: 't', environment: 'test' } }), 201).json().key;
  const liveKey = ok(await app.inject({ method: 'POST', url: '/v1/api-keys', headers: owner, payload: { name: 'l', environment: 'live' } }), 201).json().key;
  return { orgId: org.org.id, ownerId: org.owner.user_id, projectId: org.default_project.id, testKey, liveKey, owner, key: { authorization: `Bearer ${testKey}` } };
}
