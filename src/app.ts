import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import type { EventStore } from './eventstore/port.ts';
import { Authenticator } from './http/auth.ts';
import { ApiError, envelope, registerErrorHandling, sendResponse } from './http/errors.ts';
import { IdempotencyStore, migrateIdempotency } from './http/idempotency.ts';
import { orgRoutes } from './http/orgs.ts';
import { agentRoutes } from './http/agents.ts';
import { consumerRoutes } from './http/consumers.ts';
import { mandateRoutes } from './http/mandates.ts';
import { auditRoutes } from './http/audit.ts';
import { webhookRoutes } from './http/webhooks.ts';
import { bankConsentRoutes } from './http/bank-consents.ts';
import { x402Routes } from './http/x402.ts';
import type { X402Deps } from './adapters/chain/x402.ts';
import type { Bank } from './adapters/bank/port.ts';
import { migrateWebhooks, type WebhookDispatcher } from './reactors/webhooks.ts';
import type { AllowedTargets } from './adapters/outbound-http.ts';
import type { Vault } from './adapters/vault.ts';
import { Catalog } from './providers/catalog.ts';
import { ProviderTools, type ProviderRuntime } from './providers/tools.ts';
import { HttpProvider } from './adapters/providers/http-provider.ts';
import { providerRoutes } from './http/providers.ts';
import { connectionRoutes } from './http/connections.ts';
import { providerWebhookRoutes } from './http/provider-webhooks.ts';
import { connectLinkRoutes } from './http/connect-links.ts';
import { platformRoutes } from './http/platform.ts';
import { projectRoutes } from './http/projects.ts';
import { defaultRateLimit, RateLimiter, type RateLimitConfig } from './http/ratelimit.ts';
import type { AppDeps, RouteSpec } from './http/route.ts';
import { HTTP_BODY_MAX_BYTES } from './limits.ts';
import { ReadCache } from './projector/readcache.ts';
import { orgProjection } from '../projections/org.ts';
import type { Db } from './postgres/db.ts';
import type { ReadSide } from './readside.ts';

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
  db: Db;
  store: EventStore;
  readSide: Pick<ReadSide, 'waitFor' | 'progress'>;
  serviceSecret: string;
  baseUrl: string;
  vault: Vault;
  webhooks?: WebhookDispatcher;
  banks?: Map<string, Bank>;
  x402?: X402Deps;
  webhookTargets?: AllowedTargets;
  /** The provider catalog, its HTTP adapter and the sandbox providers' URLs; the shipped catalog without a sandbox when absent. */
  providers?: ProviderRuntime;
  /** did:web domain; derived from baseUrl when absent. */
  didDomain?: string;
  now?: () => Date;
  readWaitMs?: number;
  rateLimit?: RateLimitConfig;
  logLevel?: string;
  /** Where log lines go (stdout when absent); tests read them. */
  logStream?: { write(line: string): void };
};

/** did:web domain of a base URL: the host, a port percent-encoded (did:web spec). */
export function didDomainOf(baseUrl: string): string {
  const u = new URL(baseUrl);
  return u.port ? `${u.hostname}%3A${u.port}` : u.hostname;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export async function buildApp(opts: BuildOptions): Promise<FastifyInstance> {
  const app = Fastify({
    logger: { level: opts.logLevel ?? 'info', ...(opts.logStream ? { stream: opts.logStream } : {}) },
    bodyLimit: HTTP_BODY_MAX_BYTES,
    // Echo a well-formed incoming X-Request-Id, else mint one.
    genReqId: (req) => {
      const h = req.headers['x-request-id'];
      return typeof h === 'string' && REQUEST_ID.test(h) ? h : `req_${randomUUID().replaceAll('-', '')}`;
    },
    requestIdHeader: false,
    return503OnClosing: true,
    // Malformed URLs and over-long path segments get the envelope too.
    frameworkErrors: (err, req, reply) => {
      const long = err.code === 'FST_ERR_MAX_PARAM_LENGTH';
      reply.header('x-request-id', req.id);
      void sendResponse(reply as unknown as FastifyReply, {
        status: long ? 404 : 400,
        body: envelope(long ? 'not_found' : 'bad_request', long ? 'no such resource' : 'the URL could not be read', String(req.id)),
      });
    },
  });
  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
  });
  // JSON only; an empty body is "no body" (routes whose body is optional accept it).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(/^application\/(.+\+)?json$/, { parseAs: 'string' }, (_req, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(new ApiError(400, 'invalid_json', 'the request body is not valid JSON'), undefined);
    }
  });
  registerErrorHandling(app);
  // Every route fastify registers, so a test can hold the OpenAPI document to all of them.
  const registered: { method: string; url: string }[] = [];
  app.addHook('onRoute', (r) => {
    for (const m of [r.method].flat()) if (m !== 'HEAD') registered.push({ method: m, url: r.url });
  });

  await migrateIdempotency(opts.db);
  await migrateWebhooks(opts.db);
  const orgCache = new ReadCache<unknown>(opts.readSide.progress, orgProjection.name);
  const deps: AppDeps = {
    db: opts.db,
    store: opts.store,
    readSide: opts.readSide,
    auth: new Authenticator(opts.db, opts.serviceSecret, orgCache),
    orgCache,
    idempotency: new IdempotencyStore(opts.db),
    rateLimiter: new RateLimiter(opts.rateLimit ?? defaultRateLimit),
    now: opts.now ?? (() => new Date()),
    readWaitMs: opts.readWaitMs ?? 5_000,
    routes: [],
    baseUrl: opts.baseUrl,
    vault: opts.vault,
    webhooks: opts.webhooks,
    banks: opts.banks ?? new Map(),
    x402: opts.x402,
    webhookTargets: opts.webhookTargets ?? { loopback: false, private: false },
    didDomain: opts.didDomain ?? didDomainOf(opts.baseUrl),
    providers: new ProviderTools(opts.db, opts.vault, opts.providers ?? { catalog: Catalog.load(), client: new HttpProvider({ allow: opts.webhookTargets ?? { loopback: false, private: false } }), sandbox: undefined }, { store: opts.store, now: opts.now ?? (() => new Date()), waitFor: (p, ms) => opts.readSide.waitFor(p, ms) }),
  };

  app.decorate('routeSpecs', deps.routes);
  app.decorate('registeredRoutes', registered);
  await app.register(async (scope) => platformRoutes(scope, deps));
  await app.register(async (scope) => orgRoutes(scope, deps));
  await app.register(async (scope) => projectRoutes(scope, deps));
  await app.register(async (scope) => agentRoutes(scope, deps));
  await app.register(async (scope) => consumerRoutes(scope, deps));
  await app.register(async (scope) => mandateRoutes(scope, deps));
  await app.register(async (scope) => auditRoutes(scope, deps));
  await app.register(async (scope) => webhookRoutes(scope, deps));
  await app.register(async (scope) => bankConsentRoutes(scope, deps));
  await app.register(async (scope) => x402Routes(scope, deps));
  await app.register(async (scope) => providerRoutes(scope, deps));
  await app.register(async (scope) => connectionRoutes(scope, deps));
  await app.register(async (scope) => providerWebhookRoutes(scope, deps));
  await app.register(async (scope) => connectLinkRoutes(scope, deps));

  await app.ready();
  return app;
}
