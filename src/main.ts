import { buildApp } from './app.ts';
import { loadConfig } from './config.ts';
import { openRuntime } from './runtime.ts';

// Server entry point: `npm start`.

const config = loadConfig();
const runtime = await openRuntime(config, (line) => {
  if (config.logLevel === 'debug' || config.logLevel === 'trace') process.stderr.write(line + '\n');
});
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
  ...(config.didDomain ? { didDomain: config.didDomain } : {}),
  baseUrl: config.publicBaseUrl,
  readWaitMs: config.readWaitMs,
  logLevel: config.logLevel,
});
if (runtime.serviceSecretFile) app.log.info({ service_secret_file: runtime.serviceSecretFile }, 'platform secret for the service-auth subtree');

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
  await app.listen({ host: config.host, port: config.port });
} catch (err) {
  app.log.error({ err }, 'could not listen');
  await runtime.close();
  process.exit(1);
}
