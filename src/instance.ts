import type { FastifyInstance } from 'fastify';
import { buildApp, type BuildOptions } from './app.ts';
import { SmtpMailer } from './adapters/mail/smtp.ts';
import { workerOfConfig } from './adapters/browser/worker.ts';
import type { Config } from './config.ts';
import { openRuntime, type Runtime } from './runtime.ts';

// One service instance: its runtime (database, event store, read side,
// reactors, adapters) and its HTTP app, composed from the configuration. The
// server entry point runs one; the suite runs several on one database, as a
// deployment behind a load balancer does.

export type Instance = { runtime: Runtime; app: FastifyInstance; close(): Promise<void> };

export async function openInstance(config: Config, opts: { log?: (line: string) => void; app?: Partial<BuildOptions> } = {}): Promise<Instance> {
  const runtime = await openRuntime(config, opts.log);
  let app: FastifyInstance;
  try {
    app = await buildApp({
      db: runtime.db,
      store: runtime.store,
      readSide: runtime.readSide!,
      serviceSecret: runtime.serviceSecret,
      vault: runtime.vault,
      ...(runtime.webhooks ? { webhooks: runtime.webhooks } : {}),
      webhookTargets: runtime.webhookTargets,
      banks: runtime.banks,
      ...(runtime.x402 ? { x402: runtime.x402 } : {}),
      ...(runtime.pix ? { pix: runtime.pix } : {}),
      providers: runtime.providers,
      merchants: runtime.merchants,
      browserWorker: workerOfConfig(config.browserWorker),
      ...(config.didDomain ? { didDomain: config.didDomain } : {}),
      baseUrl: config.publicBaseUrl,
      mcp: { allowedOrigins: config.mcpAllowedOrigins },
      trustProxy: config.trustProxy,
      readWaitMs: config.readWaitMs,
      sessionQuota: config.sessionQuota,
      shutdownDelayMs: config.shutdownDelayMs,
      auditWitnesses: config.auditWitnesses,
      logLevel: config.logLevel,
      ...(config.metricsToken ? { metricsToken: config.metricsToken } : {}),
      ...(config.smtpUrl ? { mailer: new SmtpMailer(config.smtpUrl, config.mailFrom) } : {}),
      mailFrom: config.mailFrom,
      ...opts.app,
    });
  } catch (err) {
    await runtime.close().catch(() => {});
    throw err;
  }
  return {
    runtime,
    app,
    async close() {
      // The drain (src/http/kernel/drain.ts, docs/deployment.md "Rolling restart"):
      // readiness answers 503 (for SHUTDOWN_DELAY_MS with the listener open), every open event stream ends with a retry hint,
      // no connection is accepted, idle ones close, the requests in flight
      // are answered (their connections close after them); only then the
      // stores and Postgres, which those requests still use.
      await app.close().catch(() => {});
      await runtime.close();
    },
  };
}
