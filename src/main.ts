import { loadConfig } from './config.ts';
import { openInstance } from './instance.ts';
import { build as prettyLog } from 'pino-pretty';
import { checkDataFolder, checkPortFree, readyLine, sandboxLine, startupLine } from './startup.ts';
import { redactText } from './redact.ts';
import { withoutHealthPolls } from './log-filter.ts';
import { forgetServiceUrl, recordServiceUrl } from './service-url.ts';

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
const { runtime, app, close } = await openInstance(config, {
  log: (line) => {
    if (config.logLevel === 'debug' || config.logLevel === 'trace') process.stderr.write(redactText(line) + '\n');
  },
  // A person at a terminal reads one line an entry (pino-pretty), without the health polls; anything else gets JSON, one object a line.
  app: process.stdout.isTTY ? { logStream: withoutHealthPolls(prettyLog({ colorize: true, translateTime: 'SYS:HH:MM:ss', ignore: 'pid,hostname', singleLine: true })) } : {},
}).catch(fail);
if (runtime.serviceSecretFile) app.log.info({ service_secret_file: runtime.serviceSecretFile }, 'platform secret for the service-auth subtree');
// Acknowledgements are not durable with these database settings (src/postgres/durability.ts).
for (const w of runtime.warnings) app.log.warn(w);
runtime.notice = (line) => app.log.warn(line);
const sandboxes = sandboxLine(runtime.sandboxUrls);
if (sandboxes) app.log.info(sandboxes);
const organizations = Number((await runtime.db.query<{ n: string }>('SELECT count(*)::text AS n FROM orgs').catch(() => ({ rows: [{ n: '0' }] }))).rows[0]?.n ?? 0);
const recovery = runtime.readSide?.recovery;
if (recovery) recovery.log = (level, msg, fields) => app.log[level](fields ?? {}, msg);

// SIGTERM (a rolling restart, an orchestrator stopping the instance) drains:
// see Instance.close. A signal repeated meanwhile (npm and tsx relay the one a
// process group got) changes nothing.
let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  app.log.info({ signal, shutdown_delay_ms: config.shutdownDelayMs }, 'draining: readiness fails (for shutdown_delay_ms with the listener open), then no new connections, event streams told to reconnect elsewhere, requests in flight finishing');
  await forgetServiceUrl(config.dataDir).catch(() => {});
  await close().catch((err: unknown) => app.log.error({ err }, 'runtime close failed'));
  app.log.info('drained; exiting');
  process.exit(0);
}
process.on('SIGINT', () => void shutdown('SIGINT'));
process.on('SIGTERM', () => void shutdown('SIGTERM'));

// The CLI beside this server (bootstrap's dashboard link) finds where it answers; written
// before the listener opens, so a client that sees the server up finds it (a record whose process exited is ignored).
await recordServiceUrl(config.dataDir, config.publicBaseUrl).catch((err: unknown) => app.log.warn({ err }, 'could not record the service URL in DATA_DIR'));
try {
  await app.listen({ host: config.host, port: config.port, listenTextResolver: (url) => readyLine(url, organizations) });
} catch (err) {
  await runtime.close().catch(() => {});
  fail(await checkPortFree(config.host, config.port).then(() => err, (taken: unknown) => taken));
}
