import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Config } from './config.ts';
import { type EventStore, openEventStore } from './eventstore/index.ts';
import { openDb, type Db } from './postgres/db.ts';
import { durabilityWarnings } from './postgres/durability.ts';
import { ensureDatabase, startEmbeddedPostgres, type EmbeddedServer } from './postgres/embedded.ts';
import { loadAuditSigningKey } from './audit/keys.ts';
import { WitnessSubmitter } from './audit/witness-client.ts';
import { loadVaultMasterKey, Vault } from './adapters/vault.ts';
import type { SigningKey } from './audit/note.ts';
import { startReadSide, type ReadSide } from './readside.ts';
import { defaultWebhookConfig, WebhookDispatcher } from './reactors/webhooks.ts';
import { parseAllowedTargets, type AllowedTargets } from './adapters/outbound-http.ts';
import type { Bank } from './adapters/bank/port.ts';
import { HttpBank } from './adapters/bank/http-bank.ts';
import { SandboxBank } from './adapters/bank/sandbox-bank.ts';
import { BASE_SEPOLIA_CHAIN_ID, BASE_SEPOLIA_USDC, SANDBOX_FACILITATOR_KEY, startLocalChain, type LocalChain } from './adapters/chain/local-chain.ts';
import { EvmSettlement } from './adapters/chain/settlement.ts';
import { postgresNonceGate } from './adapters/chain/nonces.ts';
import type { Network, X402Deps } from './adapters/chain/x402.ts';
import { X402SettlementReactor } from './reactors/x402-settlement.ts';
import { ApprovalExpiryReactor } from './reactors/approval-expiry.ts';
import type { PixDeps } from './adapters/psp/port.ts';
import { openPix } from './adapters/psp/config.ts';
import { Catalog } from './providers/catalog.ts';
import type { ProviderRuntime } from './providers/tools.ts';
import { HttpProvider } from './adapters/providers/http-provider.ts';
import { SandboxProviders } from './adapters/providers/sandbox-providers.ts';
import { SandboxMerchants } from './adapters/merchants/sandbox-merchants.ts';
import { SANDBOX_SESSION_COOKIE, type MerchantSites } from './adapters/merchants/sites.ts';
import { sandboxHome, type SandboxHome } from './adapters/sandbox-home.ts';
import { onChainReset } from './usecases/chain-reset.ts';

/** USDC on Base mainnet. */
const BASE_USDC = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';

// The process's long-lived parts: its Postgres (embedded unless DATABASE_URL is
// given), the read-side database handle and the event store. Built once by the
// server and by the CLI; closed in reverse order.

export type Runtime = {
  config: Config;
  db: Db;
  store: EventStore;
  auditKey: SigningKey;
  serviceSecret: string;
  vault: Vault;
  webhooks: WebhookDispatcher | undefined;
  webhookTargets: AllowedTargets;
  banks: Map<string, Bank>;
  x402: X402Deps | undefined;
  pix: PixDeps | undefined;
  /** The provider catalog, its HTTP adapter and the sandbox providers (when SANDBOX_PROVIDERS is on). */
  providers: ProviderRuntime;
  /** The hosted-connect merchants' login pages: MERCHANT_*_LOGIN_URL, else the sandbox merchants (SANDBOX_MERCHANTS). */
  merchants: MerchantSites;
  /** Where the generated platform secret lives (null when it came from the environment). */
  serviceSecretFile: string | null;
  /** Database settings that make acknowledgements not durable (fsync, synchronous_commit): one line each, for the log at start. */
  warnings: string[];
  /** Absent when opened with `followers: false` (one-shot CLI commands). */
  readSide: ReadSide | undefined;
  /** Where the sandboxes answer (those running), for the start log and the walkthroughs. */
  sandboxUrls: { providers?: string; outbox?: string; providersTls?: string; psp?: string; bank?: string; merchants?: string; chainRpc?: string };
  /** Lines for the operator after start (a sandbox port that moved, a chain that went backwards): warnings until the server sets its logger here. */
  notice: (line: string) => void;
  close(): Promise<void>;
};

export const AUDIT_ORIGIN = 'agent-ledger/audit';

export const APP_DATABASE = 'ledger';

/** SVC_SERVICE_SECRET, or one generated once into DATA_DIR (mode 0600). */
async function loadServiceSecret(config: Config): Promise<{ value: string; file: string | null }> {
  if (config.serviceSecret) return { value: config.serviceSecret, file: null };
  const file = path.join(config.dataDir, 'service-secret');
  try {
    return { value: (await fs.readFile(file, 'utf8')).trim(), file };
  } catch {
    await fs.mkdir(config.dataDir, { recursive: true });
    await fs.writeFile(file, `svc_${randomBytes(32).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' }).catch(() => {});
    return { value: (await fs.readFile(file, 'utf8')).trim(), file };
  }
}

/**
 * The facilitator's networks: base-sepolia on the local chain (embedded default)
 * or an RPC URL; base only when the operator enables mainnet with an RPC URL and
 * a facilitator key.
 */
async function openX402(config: Config, db: Db, store: EventStore, home: SandboxHome): Promise<{ deps: X402Deps | undefined; rpcUrl: string | undefined; stop(): Promise<void> }> {
  const x = config.x402;
  // Every instance sends for the facilitator account through one gate in PostgreSQL,
  // which notices a chain that went backwards and reports it (src/usecases/chain-reset.ts).
  let deps: X402Deps | undefined;
  const nonces = postgresNonceGate(db, { onReset: onChainReset({ db, store, now: () => new Date() }, () => ({ test: deps?.test, live: deps?.live }), home.note) });
  let chain: LocalChain | undefined;
  let test: Network | undefined;
  if (x.testRpcUrl && x.facilitatorKey) {
    test = { name: 'base-sepolia', chainId: BASE_SEPOLIA_CHAIN_ID, token: BASE_SEPOLIA_USDC, domainName: 'USDC', domainVersion: '2', adapter: 'evm-rpc', settlement: new EvmSettlement({ rpcUrl: x.testRpcUrl, chainId: BASE_SEPOLIA_CHAIN_ID, token: BASE_SEPOLIA_USDC, facilitatorKey: x.facilitatorKey as `0x${string}`, nonces }) };
  } else if (x.sandboxChain) {
    chain = await startLocalChain({ home });
    test = { name: 'base-sepolia', chainId: BASE_SEPOLIA_CHAIN_ID, token: BASE_SEPOLIA_USDC, domainName: 'USDC', domainVersion: '2', adapter: 'local-evm', settlement: new EvmSettlement({ rpcUrl: chain.rpcUrl, chainId: BASE_SEPOLIA_CHAIN_ID, token: BASE_SEPOLIA_USDC, facilitatorKey: SANDBOX_FACILITATOR_KEY, nonces }) };
  }
  const live: Network | undefined =
    x.mainnet && x.mainnetRpcUrl && x.facilitatorKey
      ? { name: 'base', chainId: 8453, token: BASE_USDC, domainName: 'USD Coin', domainVersion: '2', adapter: 'evm-rpc', settlement: new EvmSettlement({ rpcUrl: x.mainnetRpcUrl, chainId: 8453, token: BASE_USDC, facilitatorKey: x.facilitatorKey as `0x${string}`, nonces }) }
      : undefined;
  const receiptKey = await loadAuditSigningKey({ seedBase64: x.receiptSigningKey, dataDir: config.dataDir, name: 'agent-ledger-receipts', fileName: 'receipt-signing-key' });
  deps = { test, live, mainnetCeilingMinor: BigInt(x.mainnetCeilingMinor), receiptKey, receiptKid: `receipts-${Buffer.from(receiptKey.publicKey).toString('hex').slice(0, 16)}` };
  return { deps, rpcUrl: chain?.rpcUrl, stop: async () => chain?.stop() };
}

/**
 * `followers: false` (one-shot CLI commands): no read side, reactors or sandboxes.
 * `sandboxes: false` (bootstrap beside a running server): the read side, but the
 * sandboxes stay the server's (a second set would take other ports and write
 * over their state under DATA_DIR).
 */
export async function openRuntime(config: Config, log: (line: string) => void = () => {}, opts: { followers?: boolean; sandboxes?: boolean } = {}): Promise<Runtime> {
  const sandboxesOn = opts.followers !== false && opts.sandboxes !== false;
  let embedded: EmbeddedServer | undefined;
  let url = config.databaseUrl;
  if (!url) {
    embedded = await startEmbeddedPostgres({ dataDir: path.join(config.dataDir), log: (l) => log(`[postgres] ${l}`) });
    await ensureDatabase(embedded.adminUrl, APP_DATABASE);
    url = embedded.urlFor(APP_DATABASE);
  }
  const db = openDb(url);
  try {
    const store = await openEventStore({ esdbUrl: config.esdbUrl, db, maxAppendBytes: config.maxAppendBytes });
    const warnings: string[] = await durabilityWarnings(db).catch(() => []);
    // The sandboxes keep their state and ports under DATA_DIR/sandboxes; their notes are warnings until the server logs them live.
    const sink: { notice: (line: string) => void } = { notice: (line) => void warnings.push(line) };
    const home = sandboxHome(config.dataDir, (line) => sink.notice(line));
    const auditKey = await loadAuditSigningKey({ seedBase64: config.auditSigningKey, dataDir: config.dataDir });
    const secret = await loadServiceSecret(config);
    const vault = await Vault.open(db, await loadVaultMasterKey({ base64: config.vaultMasterKey, dataDir: config.dataDir }));
    const readSide = opts.followers === false ? undefined : await startReadSide(db, store, { signingKey: auditKey, origin: AUDIT_ORIGIN, format: config.auditFormat });
    const webhookTargets = parseAllowedTargets(config.allowPrivateTargets);
    const webhooks = readSide ? new WebhookDispatcher(db, store, vault, readSide.progress, defaultWebhookConfig(webhookTargets, config.publicBaseUrl)) : undefined;
    await webhooks?.start();
    // Banks: the sandbox bank on loopback (the embedded default), and live banks from BANKS.
    const banks = new Map<string, Bank>();
    let sandbox: SandboxBank | undefined;
    if (config.sandboxBank && sandboxesOn) {
      sandbox = new SandboxBank(5, home);
      const url = await sandbox.start();
      banks.set('sandbox-bank', new HttpBank('sandbox-bank', { baseUrl: url, clientId: sandbox.clientId, clientSecret: sandbox.clientSecret }));
    }
    for (const [bankId, cfg] of Object.entries(config.banks)) banks.set(bankId, new HttpBank(bankId, cfg));
    // Provider catalog; the sandbox providers on loopback serve its `sandbox:` test endpoints.
    const catalog = Catalog.load();
    let sandboxProviders: SandboxProviders | undefined;
    if (config.sandboxProviders && sandboxesOn) {
      sandboxProviders = new SandboxProviders(catalog, { home });
      await sandboxProviders.start();
    }
    const providers: ProviderRuntime = {
      catalog,
      client: new HttpProvider({ allow: webhookTargets, ...(sandboxProviders ? { extraCa: [sandboxProviders.caPem], sandboxOrigins: [sandboxProviders.url, sandboxProviders.tlsUrl] } : {}) }),
      sandbox: sandboxProviders ? { http: sandboxProviders.url, https: sandboxProviders.tlsUrl } : undefined,
      oauthClients: config.providerOAuthClients,
      ...(sandboxProviders ? { sandboxOAuthClients: sandboxProviders.platformOAuthClients(`${config.publicBaseUrl}/v1/connections/callback`) } : {}),
    };
    // Hosted-connect merchants: configured by URL, else the sandbox merchants on loopback.
    let sandboxMerchants: SandboxMerchants | undefined;
    const merchants: MerchantSites = {};
    if (config.sandboxMerchants && sandboxesOn && (!config.merchants['merchant-a'] || !config.merchants['merchant-b'])) {
      sandboxMerchants = new SandboxMerchants(home);
      await sandboxMerchants.start();
      Object.assign(merchants, sandboxMerchants.sites());
    }
    for (const [m, site] of Object.entries(config.merchants)) if (site) merchants[m as keyof MerchantSites] = { loginUrl: site.loginUrl, sessionCookie: site.sessionCookie ?? SANDBOX_SESSION_COOKIE };
    const x = !sandboxesOn ? { deps: undefined, rpcUrl: undefined, stop: async () => {} } : await openX402(config, db, store, home);
    const settlementReactor = x.deps ? new X402SettlementReactor(db, store, x.deps) : undefined;
    settlementReactor?.start();
    const approvalExpiry = readSide ? new ApprovalExpiryReactor(db, store, () => new Date()) : undefined;
    await approvalExpiry?.start();
    // Cosignatures of each new checkpoint by AUDIT_WITNESSES, off the command path.
    const witnessSubmitter = readSide && config.auditWitnesses.length > 0 ? new WitnessSubmitter(db, store, config.auditWitnesses) : undefined;
    witnessSubmitter?.start();
    const pix = !sandboxesOn ? undefined : await openPix(process.env, config.publicBaseUrl, home);
    return {
      config,
      db,
      store,
      auditKey,
      serviceSecret: secret.value,
      vault,
      webhooks,
      webhookTargets,
      banks,
      x402: x.deps,
      pix: pix?.deps,
      providers,
      merchants,
      serviceSecretFile: secret.file,
      warnings,
      readSide,
      sandboxUrls: {
        ...(sandboxProviders ? { providers: sandboxProviders.url, outbox: `${sandboxProviders.url}/_sandbox/outbox.html`, providersTls: sandboxProviders.tlsUrl } : {}),
        ...(pix?.sandboxUrl ? { psp: pix.sandboxUrl } : {}),
        ...(sandbox ? { bank: sandbox.url } : {}),
        ...(sandboxMerchants ? { merchants: sandboxMerchants.url } : {}),
        ...(x.rpcUrl ? { chainRpc: x.rpcUrl } : {}),
      },
      get notice() {
        return sink.notice;
      },
      set notice(fn: (line: string) => void) {
        sink.notice = fn;
      },
      async close() {
        await witnessSubmitter?.stop().catch(() => {});
        await approvalExpiry?.stop().catch(() => {});
        await settlementReactor?.stop().catch(() => {});
        await x.stop().catch(() => {});
        await pix?.stop().catch(() => {});
        await sandbox?.stop().catch(() => {});
        await sandboxProviders?.stop().catch(() => {});
        await sandboxMerchants?.stop().catch(() => {});
        await webhooks?.stop().catch(() => {});
        await readSide?.stop().catch(() => {});
        await store.close().catch(() => {});
        await db.close().catch(() => {});
        await embedded?.stop();
      },
    };
  } catch (err) {
    await db.close().catch(() => {});
    await embedded?.stop();
    throw err;
  }
}
