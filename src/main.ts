import { buildApp } from './app.ts';
import { workerOfConfig } from './adapters/browser/worker.ts';
import { loadConfig } from './config.ts';
import { openRuntime } from './runtime.ts';
import { build as prettyLog } from 'pino-pretty';
import { checkDataFolder, checkPortFree, readyLine, startupLine } from './startup.ts';
import { redactText } from './redact.ts';

// Server entry point: `npm start`.

/** A start-up failure is one line on stderr and exit code 1, never a stack trace. */
function fail(err: unknown): never {
  process.stderr.write(`agent-ledger: ${startupLine(err)}\n`);
  process.exit(1);
}

const config = await Promise.resolve().then(() => loadConfig()).catch(fail);
// A data folder that cannot work and a taken port fail before Postgres and the sandboxes start.
await checkDataFolder(config.dataDir).catch(fail);
await checkPortFree(config.host, config.port).catch(fail);
const runtime = await openRuntime(config, (line) => {
  if (config.logLevel === 'debug' || config.logLevel === 'trace') process.stderr.write(redactText(line) + '\n');
}).catch(fail);
const app = await buildApp({
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
  readWaitMs: config.readWaitMs,
  sessionQuota: config.sessionQuota,
  auditWitnesses: config.auditWitnesses,
  logLevel: config.logLevel,
  // A person at a terminal reads lines (pino-pretty); anything else gets JSON, one object a line.
  ...(process.stdout.isTTY ? { logStream: prettyLog({ colorize: true, translateTime: 'SYS:HH:MM:ss', ignore: 'pid,hostname' }) } : {}),
  ...(config.metricsToken ? { metricsToken: config.metricsToken } : {}),
}).catch(async (err: unknown) => {
  await runtime.close().catch(() => {});
  return fail(err);
});
if (runtime.serviceSecretFile) app.log.info({ service_secret_file: runtime.serviceSecretFile }, 'platform secret for the service-auth subtree');
// Acknowledgements are not durable with these database settings (src/postgres/durability.ts).
for (const w of runtime.warnings) app.log.warn(w);
const recovery = runtime.readSide?.recovery;
if (recovery) recovery.log = (level, msg, fields) => app.log[level](fields ?? {}, msg);

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  app.log.info({ signal }, 'shutting down');
  // Stop accepting, let in-flight requests finish, then close the stores and Postgres.
  await app.close().catch(() => {});
  await runtime.close().catch((err: unknown) => app.log.error({ err }, 'runtime close failed'));
  process.exit(0);
}
process.on('SIGINT', () => void shutdown('SIGINT'));
process.on('SIGTERM', () => void shutdown('SIGTERM'));

try {
  await app.listen({ host: config.host, port: config.port, listenTextResolver: readyLine });
} catch (err) {
  await runtime.close().catch(() => {});
  fail(await checkPortFree(config.host, config.port).then(() => err, (taken: unknown) => taken));
}
