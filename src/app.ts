import { pooledHex } from './ids.ts';
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { RequestLog, requestChildLogger } from './http/kernel/request-log.ts';
import type { EventStore } from './eventstore/port.ts';
import { Authenticator } from './http/kernel/auth.ts';
import { ApiError, envelope, registerErrorHandling, sendResponse } from './http/kernel/errors.ts';
import { IdempotencyStore, migrateIdempotency } from './http/kernel/idempotency.ts';
import { orgRoutes } from './http/orgs.ts';
import { agentRoutes } from './http/agents.ts';
import { consumerRoutes } from './http/consumers.ts';
import { mandateRoutes } from './http/mandates/mandates.ts';
import { directedConsentRoutes } from './http/mandates/directed-consents.ts';
import { consumerTransferRoutes } from './http/consumer-transfers.ts';
import { mandateSpendExecutor } from './usecases/mandates.ts';
import { auditRoutes } from './http/audit/audit.ts';
import { auditProofRoutes } from './http/audit/audit-proofs.ts';
import { auditConfigRoutes } from './http/audit/audit-config.ts';
import { webhookEndpointRoutes } from './http/webhook-endpoints.ts';
import { webhookDeliveryRoutes } from './http/webhook-deliveries.ts';
import { bankConsentRoutes } from './http/bank-consents.ts';
import { x402Routes } from './http/x402.ts';
import { x402ExecuteExecutor } from './usecases/x402.ts';
import { policyRoutes } from './http/policies.ts';
import { approvalFailureResult, approvalRoutes } from './http/approvals.ts';
import { ApprovalExecutors } from './usecases/approval-executors.ts';
import { oauthRoutes } from './http/oauth/oauth.ts';
import { consentRoutes } from './http/oauth/oauth-consent.ts';
import { oauthShared, oauthUrls, type OAuthOptions } from './http/oauth/oauth-common.ts';
import { commerceMemoryRoutes } from './http/commerce-memory/commerce-memory.ts';
import { commerceMemoryInsightRoutes } from './http/commerce-memory/commerce-memory-insights.ts';
import { mcpServerRoutes } from './http/mcp-servers.ts';
import { mcpGatewayRoutes } from './http/mcp-gateway.ts';
import { defaultMcpConfig, type McpConfig } from './mcp/config.ts';
import type { X402Deps } from './adapters/chain/x402.ts';
import type { Bank } from './adapters/bank/port.ts';
import { type PixDeps, UnconfiguredPsp } from './adapters/psp/port.ts';
import { pixAccountRoutes } from './http/pix-accounts.ts';
import { pixChargeRoutes, pixTestPaymentRoute } from './http/pix-charges.ts';
import { pixKeyRoutes } from './http/pix-keys.ts';
import { pixNotificationRoutes, pixReceivementRoutes } from './http/pix-receivements.ts';
import { migrateWebhooks, type WebhookDispatcher } from './reactors/webhooks.ts';
import type { AllowedTargets } from './adapters/outbound-http.ts';
import type { Vault } from './adapters/vault.ts';
import { Catalog } from './providers/catalog.ts';
import { ProviderTools, type ProviderRuntime } from './providers/tools.ts';
import { HttpProvider } from './adapters/providers/http-provider.ts';
import { providerRoutes } from './http/providers.ts';
import { catalogRoutes } from './http/catalog.ts';
import { connectionRoutes } from './http/connections/connections.ts';
import { providerWebhookRoutes } from './http/provider-webhooks.ts';
import { sessionRoutes } from './http/sessions.ts';
import { sessionHistoryRoutes } from './http/session-history.ts';
import { toolCallRoutes } from './http/tool-calls.ts';
import { malformedId } from './http/kernel/errors.ts';
import { providerToolExecutor } from './usecases/session-tools.ts';
import { proxyExecutors } from './usecases/session-proxy.ts';
import { statusStreamRoutes } from './http/status-stream.ts';
import { logStreamRoutes } from './http/log-stream.ts';
import { sessionMcpRoutes } from './http/session-mcp.ts';
import { sessionSendRoutes } from './http/session-send.ts';
import { sessionProxyRoutes } from './http/session-proxy.ts';
import { connectLinkRoutes } from './http/connections/connect-links.ts';
import { signupRunRoutes } from './http/signup-runs.ts';
import { hostedConnectRoutes } from './http/connections/hosted-connect.ts';
import type { BrowserWorker } from './adapters/browser/worker.ts';
import type { MerchantSites } from './adapters/merchants/sites.ts';
import { platformRoutes } from './http/platform.ts';
import { registerMetrics } from './http/metrics.ts';
import { Drain, registerDrain, type DrainPause } from './http/kernel/drain.ts';
import { docsRoutes } from './http/docs.ts';
import { projectRoutes } from './http/projects.ts';
import { defaultRateLimit, SharedRateLimiter, type RateLimitConfig } from './http/kernel/ratelimit.ts';
import type { WitnessEndpoint } from './audit/witness-client.ts';
import type { AppDeps, RouteSpec } from './http/kernel/route.ts';
import { HTTP_BODY_MAX_BYTES } from './limits.ts';
import { ReadCache } from './projector/readcache.ts';
import { orgProjection } from '../projections/org.ts';
import { oauthProjection } from '../projections/oauth.ts';
import type { Db } from './postgres/db.ts';
import type { ReadSide } from './readside.ts';
import { redactingStream } from './redact.ts';
import { dashboardRoutes } from './dashboard/index.ts';
import { migrateDashboardSessions, Sessions } from './dashboard/session.ts';
import { migrateSignInCodes } from './usecases/sign-in.ts';
import { KeyUsage, migrateKeyUsage } from './usecases/key-usage.ts';
import { migratePasskeyChallenges } from './usecases/passkeys.ts';
import { type Mailer, UnconfiguredMailer } from './adapters/mail/port.ts';
import { SandboxMailer } from './adapters/mail/sandbox.ts';
import { SIGNIN_PER_ADDRESS_BURST, SIGNIN_PER_CLIENT_BURST, SIGNIN_REFILL_WINDOW_S } from './limits.ts';

// The composition root of the HTTP service: every plugin is registered here,
// explicitly. Tests build their own app from their own runtime.

declare module 'fastify' {
  interface FastifyInstance {
    /** The declared routes (schemas, auth, error codes): the OpenAPI source. */
    routeSpecs: RouteSpec[];
    registeredRoutes: { method: string; url: string }[];
  }
}

export type BuildOptions = {
  /** The witnesses of AUDIT_WITNESSES, for the audit health view. */
  auditWitnesses?: readonly WitnessEndpoint[];
  db: Db;
  store: EventStore;
  readSide: Pick<ReadSide, 'waitFor' | 'progress'>;
  serviceSecret: string;
  baseUrl: string;
  vault: Vault;
  webhooks?: WebhookDispatcher;
  banks?: Map<string, Bank>;
  x402?: X402Deps;
  pix?: PixDeps;
  mcp?: Partial<McpConfig>;
  webhookTargets?: AllowedTargets;
  /** The provider catalog, its HTTP adapter and the sandbox providers' URLs; the shipped catalog without a sandbox when absent. */
  providers?: ProviderRuntime;
  /** did:web domain; derived from baseUrl when absent. */
  didDomain?: string;
  now?: () => Date;
  readWaitMs?: number;
  /** Open sessions an organization may hold (SESSION_QUOTA_PER_ORG; default 100). */
  sessionQuota?: number;
  rateLimit?: RateLimitConfig;
  logLevel?: string;
  /** OAuth per-address and key-paste limits; defaults from limits.ts. */
  oauth?: OAuthOptions;
  /** Where the structured log goes (stdout when absent); tests capture it. */
  logStream?: { write(line: string): void };
  /** Bearer token for GET /metrics from other than loopback (METRICS_TOKEN). */
  metricsToken?: string;
  /** The reverse proxies trusted for the client address (TRUST_PROXY: src/config.ts); unset: the socket's address. */
  trustProxy?: number | string | false;
  /** The hosted-connect merchants' login pages (none: start answers 503 for that merchant). */
  merchants?: MerchantSites;
  /** The browser worker (null: none configured); from BROWSER_WORKER / BROWSER_WORKER_URL when absent. */
  browserWorker?: BrowserWorker | null;
  /** SHUTDOWN_DELAY_MS: on close, readiness fails this long before the listener closes (src/http/kernel/drain.ts); 0 when absent. */
  shutdownDelayMs?: number;
  /** How that delay waits (a timer when absent); tests end it on a condition. */
  shutdownPause?: DrainPause;
  /** How people get their sign-in codes (SMTP_URL): the sandbox providers' outbox when absent and they run. */
  mailer?: Mailer;
  /** The sender of the service's mail (MAIL_FROM). */
  mailFrom?: string;
  /** Sign-in codes asked per address and per client address in SIGNIN_REFILL_WINDOW_S (defaults from limits.ts). */
  signInBursts?: { perAddress: number; perClient: number };
  /** Hooks added before any route, so they see every answer (the test suite's response validator, test/helpers/contract.ts). */
  hooks?: (app: FastifyInstance) => void;
};

/** The status views (and their streams) of a tool call. */
const TOOL_CALL_STATUS_PATH = /^\/v1\/tool-calls\/[^/]+\/(payment|verification)-status(\/stream)?$/;

/** did:web domain of a base URL: the host, a port percent-encoded (did:web spec). */
export function didDomainOf(baseUrl: string): string {
  const u = new URL(baseUrl);
  return u.port ? `${u.hostname}%3A${u.port}` : u.hostname;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export async function buildApp(opts: BuildOptions): Promise<FastifyInstance> {
  const { app, registered, requestLog } = createFastify(opts);
  await migrateIdempotency(opts.db);
  await migrateWebhooks(opts.db);
  await migrateKeyUsage(opts.db);
  const deps = composeDeps(opts);
  // The keys' counts this instance still holds are added before the database goes.
  app.addHook('onClose', async () => deps.keyUsage?.flush().catch(() => undefined));

  app.decorate('routeSpecs', deps.routes);
  app.decorate('registeredRoutes', registered);
  // Before the routes, so its hooks reach every one.
  registerDrain(app, deps.drain, { delayMs: opts.shutdownDelayMs ?? 0, ...(opts.shutdownPause ? { pause: opts.shutdownPause } : {}) });
  // Every answered request is counted where the log controller sees it finish.
  registerMetrics(app, deps, (observer) => requestLog.observe(observer), { token: opts.metricsToken });
  await registerCoreRoutes(app, deps, opts);
  await registerSessionRoutes(app, deps);
  await registerDashboard(app, deps, opts);

  await app.ready();
  return app;
}

/** The fastify instance: logging, request ids, the framework errors' envelope, the body parsers, the error handling. */
/** Trust the `n` proxies nearest the service (proxy-addr's hop count, as a function: fastify's types take no number). */
const hops = (n: number) => (_addr: string, i: number) => i < n;

function createFastify(opts: BuildOptions): { app: FastifyInstance; registered: { method: string; url: string }[]; requestLog: RequestLog } {
  const requestLog = new RequestLog({ requestIdLogLabel: 'request_id' });
  const app = Fastify({
    // Every line through the one redaction rule (src/redact.ts): capabilities and personal data in URLs never reach the log.
    logger: { level: opts.logLevel ?? 'info', stream: redactingStream(opts.logStream ?? process.stdout) },
    // Log lines carry the id the error envelope shows as request_id, under the same name.
    logController: requestLog,
    // A request's child logger is made when it first writes a line (most write none).
    childLoggerFactory: requestChildLogger,
    bodyLimit: HTTP_BODY_MAX_BYTES,
    // Behind a reverse proxy the client address (rate limits per address, the paste guard) comes from X-Forwarded-For, from the configured proxies only.
    trustProxy: typeof opts.trustProxy === 'number' ? hops(opts.trustProxy) : (opts.trustProxy ?? false),
    // Path parameters up to 256 characters reach their schemas (a Pix charge reference is up to 128).
    routerOptions: { maxParamLength: 256 },
    // Echo a well-formed incoming X-Request-Id, else mint one (32 hex characters from the pooled random bytes).
    genReqId: (req) => {
      const h = req.headers['x-request-id'];
      return typeof h === 'string' && REQUEST_ID.test(h) ? h : `req_${pooledHex(16)}`;
    },
    requestIdHeader: false,
    // While the instance drains, a request that still reaches it on a kept-alive
    // connection is served (its answer closes the connection), not shed with a
    // 503: the runtime stays open until the last one is answered (src/http/kernel/drain.ts).
    return503OnClosing: false,
    // Malformed URLs and over-long path segments get the envelope too.
    frameworkErrors: (err, req, reply) => {
      const long = err.code === 'FST_ERR_MAX_PARAM_LENGTH';
      reply.header('x-request-id', req.id);
      // A tool call's status views answer a malformed id (an over-long one too) with their bare 400 (spec 4.3).
      if (long && TOOL_CALL_STATUS_PATH.test(req.url.split('?')[0]!)) {
        const m = malformedId();
        void sendResponse(reply as unknown as FastifyReply, { status: m.status, body: m.body });
        return;
      }
      void sendResponse(reply as unknown as FastifyReply, {
        status: long ? 404 : 400,
        body: envelope(long ? 'not_found' : 'bad_request', long ? 'no such resource' : 'the URL could not be read', String(req.id)),
      });
    },
  });
  // A callback hook, not an async one: it runs on every request, and a promise per request costs throughput.
  app.addHook('onRequest', (req, reply, done) => {
    reply.header('x-request-id', req.id);
    done();
  });
  // Every route fastify registers, so a test can hold the OpenAPI document to all of them (and a request no route takes is told which would).
  const registered: { method: string; url: string }[] = [];
  opts.hooks?.(app);
  registerBodyParsers(app);
  registerErrorHandling(app, registered);
  app.addHook('onRoute', (r) => {
    for (const m of [r.method].flat()) if (m !== 'HEAD') registered.push({ method: m, url: r.url });
  });
  return { app, registered, requestLog };
}

const JSON_ONLY_PATH = /^\/(v1|mcp)\//;
const FORM_ON_JSON_API = 'send the body as application/json: it came as a form (application/x-www-form-urlencoded, what curl -d sends by default; add -H "content-type: application/json")';

function registerBodyParsers(app: FastifyInstance): void {
  // JSON only (its parameters, `charset=utf-8` say, allowed); an empty body is
  // "no body" (routes whose body is optional accept it).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(/^application\/([^;\s]+\+)?json\s*(;.*)?$/i, { parseAs: 'string' }, (_req, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(new ApiError(400, 'invalid_json', 'the request body is not valid JSON'), undefined);
    }
  });
  // Form bodies (the OAuth consent form and token endpoint): an object of strings, a repeated name as an array.
  // The JSON API (/v1, the MCP gateway) reads no form but where a page posts one (RouteSpec.acceptsForm): elsewhere a form
  // is most often JSON sent by `curl -d` without its content type.
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (req, body, done) => {
    const acceptsForm = (req.routeOptions.config as { acceptsForm?: boolean } | undefined)?.acceptsForm === true;
    if (JSON_ONLY_PATH.test(req.url) && !acceptsForm) return done(new ApiError(415, 'unsupported_media_type', FORM_ON_JSON_API), undefined);
    const text = typeof body === 'string' ? body : body.toString('utf8');
    const out: Record<string, string | string[]> = {};
    for (const [k, v] of new URLSearchParams(text)) {
      const prev = Object.hasOwn(out, k) ? out[k] : undefined;
      Object.defineProperty(out, k, { value: prev === undefined ? v : [prev, v].flat(), enumerable: true, writable: true, configurable: true });
    }
    done(null, out);
  });
}

/** The ports and services every route family shares. */
function composeDeps(opts: BuildOptions): AppDeps {
  const orgCache = new ReadCache<unknown>(opts.readSide.progress, orgProjection.name);
  const keyUsage = new KeyUsage(opts.db, opts.now ?? (() => new Date()), opts.rateLimit ?? defaultRateLimit);
  const auth = new Authenticator(opts.db, opts.serviceSecret, orgCache, new ReadCache<unknown>(opts.readSide.progress, oauthProjection.name), {
    resourceMetadataUrl: oauthUrls(opts.baseUrl).resourceMetadata,
    ...(opts.now ? { now: opts.now } : {}),
    usage: keyUsage,
  });
  const providerRuntime = opts.providers ?? { catalog: Catalog.load(), client: new HttpProvider({ allow: opts.webhookTargets ?? { loopback: false, private: false } }), sandbox: undefined };
  return {
    db: opts.db,
    store: opts.store,
    readSide: opts.readSide,
    auth,
    orgCache,
    idempotency: new IdempotencyStore(opts.db),
    // Counted in PostgreSQL for every instance; each admission also reads the applied positions of the projections credentials come from (src/http/kernel/ratelimit.ts).
    rateLimiter: new SharedRateLimiter(opts.db, opts.rateLimit ?? defaultRateLimit, auth.projections, undefined, (key, admitted, fill) => keyUsage.rated(key, admitted, fill)),
    keyUsage,
    now: opts.now ?? (() => new Date()),
    readWaitMs: opts.readWaitMs ?? 5_000,
    sessionQuota: opts.sessionQuota ?? 100,
    routes: [],
    drain: new Drain(),
    baseUrl: opts.baseUrl,
    vault: opts.vault,
    webhooks: opts.webhooks,
    banks: opts.banks ?? new Map(),
    x402: opts.x402,
    pix: opts.pix ?? { sandbox: undefined, live: new UnconfiguredPsp() },
    webhookTargets: opts.webhookTargets ?? { loopback: false, private: false },
    didDomain: opts.didDomain ?? didDomainOf(opts.baseUrl),
    mcp: { ...defaultMcpConfig(opts.baseUrl), ...opts.mcp },
    merchants: opts.merchants ?? {},
    ...(opts.browserWorker !== undefined ? { browserWorker: opts.browserWorker } : {}),
    ...(opts.auditWitnesses ? { auditWitnesses: opts.auditWitnesses } : {}),
    // What runs an approved held call, by tool name: every family whose calls a policy can hold, listed here.
    approvalExecutors: new ApprovalExecutors([
      ['mandate.spend', mandateSpendExecutor],
      ['x402.execute', x402ExecuteExecutor],
      // A provider tool `<server>/<tool>` in its session, and a proxy call `<server>/proxy_execute` of each catalog provider.
      ['*/', providerToolExecutor],
      ...proxyExecutors(providerRuntime.catalog),
    ]),
    approvalFailure: approvalFailureResult,
    providers: new ProviderTools(opts.db, opts.vault, providerRuntime, { store: opts.store, now: opts.now ?? (() => new Date()), waitFor: (p, ms) => opts.readSide.waitFor(p, ms) }),
  };
}

/** The platform, organization, ledger, audit, webhook, bank, x402, policy, OAuth, Pix, provider, memory and MCP routes (registration order kept). */
async function registerCoreRoutes(app: FastifyInstance, deps: AppDeps, opts: BuildOptions): Promise<void> {
  await app.register(async (scope) => platformRoutes(scope, deps));
  await app.register(async (scope) => orgRoutes(scope, deps));
  await app.register(async (scope) => projectRoutes(scope, deps));
  await app.register(async (scope) => agentRoutes(scope, deps));
  await app.register(async (scope) => consumerRoutes(scope, deps));
  await app.register(async (scope) => mandateRoutes(scope, deps));
  await app.register(async (scope) => directedConsentRoutes(scope, deps));
  await app.register(async (scope) => consumerTransferRoutes(scope, deps));
  await app.register(async (scope) => {
    await auditRoutes(scope, deps);
    await auditConfigRoutes(scope, deps);
    await auditProofRoutes(scope, deps);
  });
  await app.register(async (scope) => {
    await webhookEndpointRoutes(scope, deps);
    await webhookDeliveryRoutes(scope, deps);
  });
  await app.register(async (scope) => bankConsentRoutes(scope, deps));
  await app.register(async (scope) => x402Routes(scope, deps));
  await app.register(async (scope) => policyRoutes(scope, deps));
  await app.register(async (scope) => approvalRoutes(scope, deps));
  // OAuth: the token and registration endpoints and the consent pages share one set of per-address limits.
  await app.register(async (scope) => {
    const oauth = oauthShared(deps, opts.oauth);
    await oauthRoutes(scope, deps, oauth);
    await consentRoutes(scope, deps, oauth);
  });
  // Pix: partner accounts and funding sources, keys, charges, receivements, and
  // the PSP's notifications (in their own scope: they keep the raw body).
  await app.register(async (scope) => {
    await pixAccountRoutes(scope, deps);
    await pixKeyRoutes(scope, deps);
    await pixChargeRoutes(scope, deps);
    await pixTestPaymentRoute(scope, deps);
    await pixReceivementRoutes(scope, deps);
    await scope.register(async (inner) => pixNotificationRoutes(inner, deps));
  });
  await app.register(async (scope) => providerRoutes(scope, deps));
  await app.register(async (scope) => catalogRoutes(scope, deps));
  await app.register(async (scope) => connectionRoutes(scope, deps));
  await app.register(async (scope) => providerWebhookRoutes(scope, deps));
  await app.register(async (scope) => commerceMemoryRoutes(scope, deps));
  await app.register(async (scope) => commerceMemoryInsightRoutes(scope, deps));
  await app.register(async (scope) => mcpServerRoutes(scope, deps));
  await app.register(async (scope) => mcpGatewayRoutes(scope, deps));
  await app.register(async (scope) => docsRoutes(scope, deps));
}

/** The dashboard (src/dashboard): its sessions and sign-in codes in PostgreSQL, its mail, its per-address and per-client sign-in limits across instances. */
async function registerDashboard(app: FastifyInstance, deps: AppDeps, opts: BuildOptions): Promise<void> {
  await migrateDashboardSessions(opts.db);
  await migrateSignInCodes(opts.db);
  await migratePasskeyChallenges(opts.db);
  const from = opts.mailFrom ?? 'Agent Ledger <no-reply@agent-ledger.invalid>';
  const sandbox = opts.providers?.sandbox?.http;
  const mailer = opts.mailer ?? (sandbox ? new SandboxMailer(sandbox, from) : new UnconfiguredMailer());
  const limit = (burst: number) => new SharedRateLimiter(opts.db, { burst, perSecond: burst / SIGNIN_REFILL_WINDOW_S, message: 'too many sign-in codes asked' });
  const signInLimits = { perAddress: limit(opts.signInBursts?.perAddress ?? SIGNIN_PER_ADDRESS_BURST), perClient: limit(opts.signInBursts?.perClient ?? SIGNIN_PER_CLIENT_BURST) };
  await app.register(async (scope) => dashboardRoutes(scope, { ...deps, appPorts: deps, readSide: opts.readSide, mailer, signInLimits, sessions: new Sessions(opts.db, deps.now) }));
}

/** The sessions, their tool calls and status streams, connect links, signup runs and hosted connect (registered after the core routes). */
async function registerSessionRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  await app.register(async (scope) => sessionRoutes(scope, deps));
  await app.register(async (scope) => sessionHistoryRoutes(scope, deps));
  await app.register(async (scope) => toolCallRoutes(scope, deps));
  await app.register(async (scope) => statusStreamRoutes(scope, deps));
  await app.register(async (scope) => logStreamRoutes(scope, deps));
  await app.register(async (scope) => sessionMcpRoutes(scope, deps));
  await app.register(async (scope) => sessionSendRoutes(scope, deps));
  await app.register(async (scope) => sessionProxyRoutes(scope, deps));
  await app.register(async (scope) => connectLinkRoutes(scope, deps));
  await app.register(async (scope) => signupRunRoutes(scope, deps));
  await app.register(async (scope) => hostedConnectRoutes(scope, deps));
}
