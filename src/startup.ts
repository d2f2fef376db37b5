import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';

// Start-up checks that turn "it cannot work here" into one line a newcomer can
// act on: which folder or port, and what to do about it. The entry points
// (src/main.ts, src/cli.ts) print a StartupError's message alone, without a
// stack trace, and exit non-zero.

/** A reason the process cannot start; its message is one line naming the folder or port and the fix. */
export class StartupError extends Error {
  override name = 'StartupError';
}

/** Free space a fresh cluster and its first writes need (initdb alone writes about 40 MB). */
export const MIN_FREE_BYTES = 64 * 1024 * 1024;

const mb = (n: number) => `${Math.floor(n / (1024 * 1024))} MB`;

/** The fix for a file-system error code, for a folder the service must write to. */
function folderFailure(dir: string, code: string | undefined, what: string): StartupError {
  switch (code) {
    case 'EROFS':
      return new StartupError(`the data folder ${dir} is on a read-only file system (${what}): set DATA_DIR to a writable folder`);
    case 'ENOSPC':
    case 'EDQUOT':
      return new StartupError(`the data folder ${dir} is on a full disk (${what}): free some space or set DATA_DIR to a folder on another disk`);
    case 'EACCES':
    case 'EPERM':
      return new StartupError(`the data folder ${dir} is not writable by this user (${what}): fix its permissions or set DATA_DIR to a folder you own`);
    case 'ENOENT':
      return new StartupError(`the data folder ${dir} cannot be created there (${what}: ENOENT): set DATA_DIR to a folder on a writable disk`);
    case 'ENOTDIR':
    case 'EEXIST':
      return new StartupError(`the data folder ${dir} cannot be created: a file is in the way (${what}): remove that file or set DATA_DIR to another folder`);
    default:
      return new StartupError(`the data folder ${dir} cannot be used (${what}${code ? `: ${code}` : ''}): set DATA_DIR to a writable folder`);
  }
}

const codeOf = (err: unknown) => (err && typeof err === 'object' && 'code' in err ? String((err as { code: unknown }).code) : undefined);

/**
 * mkdir -p, one level at a time: Node's recursive mkdir spins forever under
 * /proc (DATA_DIR=/proc/nope hung the CLI), where a plain mkdir fails at once.
 */
async function makeFolder(abs: string): Promise<void> {
  const missing: string[] = [];
  for (let p = abs; ; ) {
    try {
      if (!(await fs.stat(p)).isDirectory()) throw Object.assign(new Error(`${p} is not a folder`), { code: 'ENOTDIR' });
      break;
    } catch (err) {
      if (codeOf(err) !== 'ENOENT') throw err;
      missing.unshift(p);
      const up = path.dirname(p);
      if (up === p) break;
      p = up;
    }
  }
  for (const m of missing) await fs.mkdir(m).catch((err: unknown) => (codeOf(err) === 'EEXIST' ? undefined : Promise.reject(err)));
}

/**
 * The data folder exists (created if need be), takes a write and has room for
 * a cluster. Run before anything is started in it.
 */
export async function checkDataFolder(dir: string, minFreeBytes = MIN_FREE_BYTES): Promise<void> {
  const abs = path.resolve(dir);
  try {
    await makeFolder(abs);
  } catch (err) {
    throw folderFailure(abs, codeOf(err), 'creating it failed');
  }
  const probe = path.join(abs, `.write-check-${randomBytes(4).toString('hex')}`);
  try {
    await fs.writeFile(probe, randomBytes(4096));
  } catch (err) {
    throw folderFailure(abs, codeOf(err), 'a test write failed');
  } finally {
    await fs.rm(probe, { force: true }).catch(() => {});
  }
  const st = await fs.statfs(abs).catch(() => undefined);
  if (st) {
    const free = Number(st.bavail) * Number(st.bsize);
    if (free < minFreeBytes) throw new StartupError(`the data folder ${abs} is on a full disk (${mb(free)} free, ${mb(minFreeBytes)} needed): free some space or set DATA_DIR to a folder on another disk`);
  }
}

/** The HTTP port is free to listen on (checked before Postgres starts, so a taken port fails fast). */
export async function checkPortFree(host: string, port: number): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', (err) => {
      const code = codeOf(err);
      if (code === 'EADDRINUSE') reject(new StartupError(`port ${port} on ${host} is already in use: stop the process that holds it or set PORT to a free port`));
      else if (code === 'EACCES') reject(new StartupError(`port ${port} on ${host} needs privileges this user does not have: set PORT to a number above 1023`));
      else if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') reject(new StartupError(`HOST ${host} is not an address of this machine: set HOST to one (127.0.0.1 by default)`));
      else reject(new StartupError(`port ${port} on ${host} cannot be listened on (${code ?? String(err)}): set HOST and PORT to a free address`));
    });
    srv.listen({ host, port, exclusive: true }, () => srv.close(() => resolve()));
  });
}

/** One line for any start-up failure: a StartupError as is, anything else with its first line only. */
export function startupLine(err: unknown): string {
  if (err instanceof StartupError) return err.message;
  const text = err instanceof Error ? err.message : String(err);
  return `could not start: ${text.split('\n')[0]}`;
}

/**
 * The one line `npm start` prints once it listens: where, the API reference,
 * and the first command to run (bootstrap while no organization exists).
 */
export function readyLine(listenUrl: string, organizations = 0): string {
  const url = listenUrl.replace(/\/+$/, '');
  const next = organizations === 0 ? 'create an organization, its owner and API keys: npm run cli -- bootstrap --org-name "Acme" --email owner@acme.example' : `${organizations} organization${organizations === 1 ? '' : 's'} in this database`;
  return `ready at ${url} — API reference: ${url}/docs — ${next}`;
}

/** The sandboxes the walkthroughs use, in one line (none when all are off). */
export function sandboxLine(urls: { providers?: string; outbox?: string; psp?: string; bank?: string; merchants?: string; chainRpc?: string }): string | undefined {
  const parts = [
    urls.providers && `providers ${urls.providers} (SANDBOX=${urls.providers} in the walkthrough)`,
    urls.outbox && `outbox ${urls.outbox}`,
    urls.psp && `Pix PSP ${urls.psp}`,
    urls.bank && `bank ${urls.bank}`,
    urls.merchants && `merchants ${urls.merchants}`,
    urls.chainRpc && `local chain RPC ${urls.chainRpc}`,
  ].filter(Boolean);
  return parts.length ? `sandboxes (state and ports kept in DATA_DIR/sandboxes): ${parts.join(', ')}` : undefined;
}
