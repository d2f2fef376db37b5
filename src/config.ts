import path from 'node:path';
import { isIP } from 'node:net';
import { z } from 'zod';
import { parseWitnessList, type WitnessEndpoint } from './audit/witness-client.ts';
import { APPEND_MAX_BYTES, APPEND_MAX_BYTES_CEILING, APPEND_MAX_BYTES_FLOOR, BROWSER_MAX_CONTEXTS, BROWSER_MAX_CONTEXTS_PER_ORG, SHUTDOWN_DELAY_MAX_MS } from './limits.ts';

// The environment, parsed once. Nothing else in the service reads process.env.
const schema = z.object({
  HOST: z.string().min(1).default('127.0.0.1'),
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  DATA_DIR: z.string().min(1).default('./.data'),
  DATABASE_URL: z.string().url().optional(),
  ESDB_URL: z.string().min(1).optional(),
  EVENTSTORE_MAX_APPEND_BYTES: z.coerce.number().int().min(APPEND_MAX_BYTES_FLOOR).max(APPEND_MAX_BYTES_CEILING).default(APPEND_MAX_BYTES),
  AUDIT_SIGNING_KEY: z.string().min(1).optional(),
  AUDIT_WITNESSES: z.string().optional(),
  AUDIT_FORMAT: z.enum(['1', '2']).default('2'),
  SVC_SERVICE_SECRET: z.string().min(32).optional(),
  METRICS_TOKEN: z.string().min(16).optional(),
  VAULT_MASTER_KEY: z.string().min(1).optional(),
  SVC_ALLOW_PRIVATE_TARGETS: z.string().regex(/^((loopback|private)(,(loopback|private))*)?$/).optional(),
  SANDBOX_BANK: z.enum(['on', 'off']).default('on'),
  SANDBOX_PROVIDERS: z.enum(['on', 'off']).default('on'),
  SANDBOX_MERCHANTS: z.enum(['on', 'off']).default('on'),
  MERCHANT_A_LOGIN_URL: z.string().url().optional(),
  MERCHANT_A_SESSION_COOKIE: z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/).optional(),
  MERCHANT_B_LOGIN_URL: z.string().url().optional(),
  MERCHANT_B_SESSION_COOKIE: z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/).optional(),
  BANKS: z.string().optional(),
  PROVIDER_OAUTH_CLIENTS: z.string().optional(),
  BROWSER_WORKER: z.enum(['embedded', 'none']).default('embedded'),
  BROWSER_WORKER_URL: z.string().regex(/^(https?|wss?):\/\/\S+$/, 'an http(s):// or ws(s):// DevTools URL').optional(),
  BROWSER_MAX_CONTEXTS: z.coerce.number().int().min(1).max(1_000).default(BROWSER_MAX_CONTEXTS),
  BROWSER_MAX_CONTEXTS_PER_ORG: z.coerce.number().int().min(1).max(1_000).default(BROWSER_MAX_CONTEXTS_PER_ORG),
  INSTANCE_URL: z.string().regex(/^https?:\/\/[^/\s]+\/?$/, 'an http(s)://host[:port] URL').optional(),
  SANDBOX_CHAIN: z.enum(['on', 'off']).default('on'),
  X402_TEST_RPC_URL: z.string().url().optional(),
  X402_FACILITATOR_KEY: z.string().regex(/^0x[0-9a-fA-F]{64}$/).optional(),
  X402_MAINNET: z.enum(['on', 'off']).default('off'),
  X402_MAINNET_RPC_URL: z.string().url().optional(),
  X402_MAINNET_CEILING_MINOR: z.coerce.number().int().positive().default(10_000),
  RECEIPT_SIGNING_KEY: z.string().min(1).optional(),
  DID_DOMAIN: z.string().regex(/^[A-Za-z0-9.-]+(%3A\d+)?$/).optional(),
  PUBLIC_BASE_URL: z.string().url().optional(),
  SMTP_URL: z.string().regex(/^smtps?:\/\/[^\s]+$/, 'smtp://host:port or smtps://user:pass@host:port').optional(),
  MAIL_FROM: z.string().min(3).max(300).default('Agent Ledger <no-reply@agent-ledger.invalid>'),
  MCP_ALLOWED_ORIGINS: z.string().optional(),
  TRUST_PROXY: z.string().optional(),
  READ_WAIT_MS: z.coerce.number().int().min(0).max(60_000).default(5_000),
  SHUTDOWN_DELAY_MS: z.coerce.number().int().min(0).max(SHUTDOWN_DELAY_MAX_MS).default(0),
  SESSION_QUOTA_PER_ORG: z.coerce.number().int().positive().default(100),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export type Config = {
  host: string;
  port: number;
  dataDir: string;
  databaseUrl: string | undefined;
  esdbUrl: string | undefined;
  /** The largest append either store accepts (bytes as EventStoreDB counts them): set it to an EventStoreDB server's MaxAppendSize when that is lower than the default. */
  maxAppendBytes: number;
  logLevel: z.infer<typeof schema>['LOG_LEVEL'];
  /** base64 Ed25519 seed for audit checkpoints; generated into dataDir when unset. */
  auditSigningKey: string | undefined;
  /** AUDIT_WITNESSES: C2SP tlog-witness witnesses that cosign each checkpoint, a comma list of "<base URL> <witness verifier key>". */
  auditWitnesses: WitnessEndpoint[];
  /** AUDIT_FORMAT: 2 (the default) switches each organization's audit chain to version 2 (docs/audit-chain.md) the next time it is sealed inline (PostgreSQL log); 1 keeps unswitched chains on version 1; chains already switched stay so. */
  auditFormat: 1 | 2;
  /** The platform secret of the service-auth subtree; generated into dataDir when unset. */
  serviceSecret: string | undefined;
  /** Bearer token for GET /metrics from other than loopback; unset: loopback only. */
  metricsToken: string | undefined;
  /** base64 AES-256 key of the vault; generated into dataDir when unset. */
  vaultMasterKey: string | undefined;
  /** Private targets outbound HTTP may reach: a comma list of loopback, private. */
  allowPrivateTargets: string | undefined;
  /** Whether the sandbox bank runs on loopback (bank_id `sandbox-bank`). */
  sandboxBank: boolean;
  /** Whether the sandbox providers run on loopback (the catalog's `sandbox:` test endpoints). */
  sandboxProviders: boolean;
  /** Whether the sandbox shopping merchants (hosted-browser connect) run on loopback. */
  sandboxMerchants: boolean;
  /** Hosted-connect merchants configured by URL (a live deployment); the sandbox merchants fill the rest. */
  merchants: { 'merchant-a'?: { loginUrl: string; sessionCookie: string | undefined }; 'merchant-b'?: { loginUrl: string; sessionCookie: string | undefined } };
  /** Live banks by bank_id: BANKS is JSON {"<bank_id>": {"baseUrl", "clientId", "clientSecret"}}. */
  banks: Record<string, { baseUrl: string; clientId: string; clientSecret: string }>;
  /**
   * The platform's OAuth clients at real providers (connect links and token refresh against a provider's own
   * authorize/token URLs): PROVIDER_OAUTH_CLIENTS is JSON {"<server_id>": {"client_id", "client_secret"}}.
   * Endpoints served by the sandbox providers use the sandbox's own clients, registered at start.
   */
  providerOAuthClients: Record<string, { client_id: string; client_secret: string }>;
  /**
   * The browser worker of signup runs and hosted connect: a remote Chromium over the DevTools protocol (BROWSER_WORKER_URL), else the embedded one, or none
   * (BROWSER_WORKER=none: those routes answer 503); its contexts in all and per organization; and where other instances reach this one for the contexts it
   * holds (INSTANCE_URL; unset: the address it listens on).
   */
  browserWorker: ({ kind: 'remote'; url: string } | { kind: 'embedded' } | { kind: 'none' }) & { maxContexts: number; maxContextsPerOrg: number; instanceUrl: string | undefined };
  x402: {
    /** Start a local EVM (anvil) with the test USDC for base-sepolia, unless an RPC URL is given. */
    sandboxChain: boolean;
    testRpcUrl: string | undefined;
    facilitatorKey: string | undefined;
    mainnet: boolean;
    mainnetRpcUrl: string | undefined;
    mainnetCeilingMinor: number;
    receiptSigningKey: string | undefined;
  };
  /** did:web domain of agents; derived from publicBaseUrl when unset. */
  didDomain: string | undefined;
  /** Public base URL (links, OpenAPI servers); http://HOST:PORT when unset. */
  publicBaseUrl: string;
  /** Where the dashboard's mail (sign-in codes) goes: SMTP_URL through nodemailer; unset: the sandbox providers' outbox. */
  smtpUrl: string | undefined;
  /** The sender of that mail (MAIL_FROM). */
  mailFrom: string;
  /** Browser origins, besides the service's own, allowed on the MCP endpoints (MCP_ALLOWED_ORIGINS, comma list). */
  mcpAllowedOrigins: string[];
  /** TRUST_PROXY: the reverse proxies whose X-Forwarded-For names the client (a hop count, or a comma list of addresses, CIDRs, loopback/linklocal/uniquelocal); false: the socket's address. */
  trustProxy: number | string | false;
  /** How long a command waits for the read side before answering with the read-side-behind header. */
  readWaitMs: number;
  /** Open sessions an organization may hold (403 quota_exceeded beyond). */
  sessionQuota: number;
  /** On SIGTERM, how long readiness fails with the listener still open before the drain (SHUTDOWN_DELAY_MS; 0: at once). */
  shutdownDelayMs: number;
};

export class ConfigError extends Error {
  override name = 'ConfigError';
}

const BanksSchema = z.record(z.string().regex(/^[a-z0-9]+(-[a-z0-9]+)*$/), z.object({ baseUrl: z.string().url(), clientId: z.string().min(1), clientSecret: z.string().min(1) }));

const OAuthClientsSchema = z.record(z.string().regex(/^[a-z0-9]+(-[a-z0-9]+)*$/), z.object({ client_id: z.string().min(1), client_secret: z.string().min(1) }));

/** A setting holding JSON, checked against its schema; a bad value names the variable, never its content. */
function parseJsonSetting<S extends z.ZodType>(name: string, raw: string | undefined, schema: S): z.infer<S> | Record<string, never> {
  if (!raw) return {};
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    throw new ConfigError(`${name} is not JSON`);
  }
  const r = schema.safeParse(json);
  if (!r.success) throw new ConfigError(`${name}: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return r.data;
}

const parseOAuthClients = (raw: string | undefined): Config['providerOAuthClients'] => parseJsonSetting('PROVIDER_OAUTH_CLIENTS', raw, OAuthClientsSchema);
/**
 * TRUST_PROXY: unset, the client is the socket's address; a number, that many
 * proxies in front (the client is that far from the end of X-Forwarded-For);
 * else a comma list of the proxies' addresses or CIDRs (or loopback,
 * linklocal, uniquelocal). A bad entry names itself.
 */
export function parseTrustProxy(v: string | undefined): number | string | false {
  const s = v?.trim();
  if (!s) return false;
  if (/^\d+$/.test(s)) {
    const n = Number(s);
    if (n < 1 || n > 16) throw new ConfigError(`TRUST_PROXY: '${s}' is not a hop count from 1 to 16`);
    return n;
  }
  const entries = s.split(',').map((x) => x.trim());
  for (const x of entries) {
    const [addr, bits, more] = x.split('/');
    const ok = ['loopback', 'linklocal', 'uniquelocal'].includes(x) || (more === undefined && isIP(addr ?? '') !== 0 && (bits === undefined || (/^\d+$/.test(bits) && Number(bits) <= (isIP(addr!) === 4 ? 32 : 128))));
    if (!ok) throw new ConfigError(`TRUST_PROXY: '${x}' is not an address, a CIDR or loopback/linklocal/uniquelocal`);
  }
  return entries.join(',');
}

/** MCP_ALLOWED_ORIGINS: a comma list of origins (scheme://host[:port], nothing after it); a bad entry names itself. */
function parseOrigins(raw: string | undefined): string[] {
  if (!raw || raw.trim() === '') return [];
  return raw.split(',').map((entry) => {
    const v = entry.trim();
    let u: URL;
    try {
      u = new URL(v);
    } catch {
      throw new ConfigError(`MCP_ALLOWED_ORIGINS: '${v}' is not an origin (scheme://host[:port])`);
    }
    if ((u.protocol !== 'http:' && u.protocol !== 'https:') || v.replace(/\/$/, '') !== u.origin) throw new ConfigError(`MCP_ALLOWED_ORIGINS: '${v}' is not an origin (scheme://host[:port])`);
    return u.origin;
  });
}

function parseWitnesses(raw: string | undefined): WitnessEndpoint[] {
  try {
    return parseWitnessList(raw);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
}

const parseBanks = (raw: string | undefined): Config['banks'] => parseJsonSetting('BANKS', raw, BanksSchema);

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid environment: ${lines.join('; ')}`);
  }
  const e = parsed.data;
  for (const m of ['A', 'B'] as const)
    if (e[`MERCHANT_${m}_LOGIN_URL`] && !e[`MERCHANT_${m}_SESSION_COOKIE`]) throw new ConfigError(`MERCHANT_${m}_LOGIN_URL needs MERCHANT_${m}_SESSION_COOKIE (the cookie that says the person is logged in)`);
  return {
    host: e.HOST,
    port: e.PORT,
    dataDir: path.resolve(e.DATA_DIR),
    databaseUrl: e.DATABASE_URL,
    esdbUrl: e.ESDB_URL,
    maxAppendBytes: e.EVENTSTORE_MAX_APPEND_BYTES,
    logLevel: e.LOG_LEVEL,
    auditSigningKey: e.AUDIT_SIGNING_KEY,
    auditWitnesses: parseWitnesses(e.AUDIT_WITNESSES),
    auditFormat: e.AUDIT_FORMAT === '1' ? 1 : 2,
    serviceSecret: e.SVC_SERVICE_SECRET,
    metricsToken: e.METRICS_TOKEN,
    vaultMasterKey: e.VAULT_MASTER_KEY,
    didDomain: e.DID_DOMAIN,
    allowPrivateTargets: e.SVC_ALLOW_PRIVATE_TARGETS,
    sandboxBank: e.SANDBOX_BANK === 'on',
    sandboxProviders: e.SANDBOX_PROVIDERS === 'on',
    sandboxMerchants: e.SANDBOX_MERCHANTS === 'on',
    merchants: {
      ...(e.MERCHANT_A_LOGIN_URL ? { 'merchant-a': { loginUrl: e.MERCHANT_A_LOGIN_URL, sessionCookie: e.MERCHANT_A_SESSION_COOKIE } } : {}),
      ...(e.MERCHANT_B_LOGIN_URL ? { 'merchant-b': { loginUrl: e.MERCHANT_B_LOGIN_URL, sessionCookie: e.MERCHANT_B_SESSION_COOKIE } } : {}),
    },
    x402: {
      sandboxChain: e.SANDBOX_CHAIN === 'on',
      testRpcUrl: e.X402_TEST_RPC_URL,
      facilitatorKey: e.X402_FACILITATOR_KEY,
      mainnet: e.X402_MAINNET === 'on',
      mainnetRpcUrl: e.X402_MAINNET_RPC_URL,
      mainnetCeilingMinor: e.X402_MAINNET_CEILING_MINOR,
      receiptSigningKey: e.RECEIPT_SIGNING_KEY,
    },
    banks: parseBanks(e.BANKS),
    providerOAuthClients: parseOAuthClients(e.PROVIDER_OAUTH_CLIENTS),
    browserWorker: {
      ...(e.BROWSER_WORKER_URL ? { kind: 'remote' as const, url: e.BROWSER_WORKER_URL } : { kind: e.BROWSER_WORKER }),
      maxContexts: e.BROWSER_MAX_CONTEXTS,
      maxContextsPerOrg: Math.min(e.BROWSER_MAX_CONTEXTS_PER_ORG, e.BROWSER_MAX_CONTEXTS),
      instanceUrl: e.INSTANCE_URL?.replace(/\/$/, ''),
    },
    mcpAllowedOrigins: parseOrigins(e.MCP_ALLOWED_ORIGINS),
    trustProxy: parseTrustProxy(e.TRUST_PROXY),
    publicBaseUrl: e.PUBLIC_BASE_URL ?? `http://${e.HOST.includes(':') ? `[${e.HOST}]` : e.HOST}:${e.PORT}`,
    readWaitMs: e.READ_WAIT_MS,
    sessionQuota: e.SESSION_QUOTA_PER_ORG,
    shutdownDelayMs: e.SHUTDOWN_DELAY_MS,
    smtpUrl: e.SMTP_URL,
    mailFrom: e.MAIL_FROM,
  };
}
