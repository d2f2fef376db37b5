import fs from 'node:fs/promises';
import path from 'node:path';
import { processAlive } from './postgres/embedded.ts';

// Where the service running on a DATA_DIR answers, for the CLI beside it: the
// server records its public base URL in the data folder once it listens and
// removes it when it stops, so `npm run cli -- bootstrap` prints the dashboard
// link of the server actually running (started with another PORT or
// PUBLIC_BASE_URL than the CLI's environment has), not its own guess.

const FILE = 'service-url.json';

/** Records that this process serves `url` for `dataDir`. */
export async function recordServiceUrl(dataDir: string, url: string): Promise<void> {
  await fs.writeFile(path.join(dataDir, FILE), `${JSON.stringify({ pid: process.pid, url })}\n`);
}

/** Removes the record, if it is this process's. */
export async function forgetServiceUrl(dataDir: string): Promise<void> {
  const r = await read(dataDir);
  if (r?.pid === process.pid) await fs.rm(path.join(dataDir, FILE), { force: true });
}

/** The URL of the service running on `dataDir`, or undefined when none is (a record whose process is gone is ignored). */
export async function runningServiceUrl(dataDir: string): Promise<string | undefined> {
  const r = await read(dataDir);
  return r && processAlive(r.pid) ? r.url : undefined;
}

async function read(dataDir: string): Promise<{ pid: number; url: string } | undefined> {
  try {
    const j = JSON.parse(await fs.readFile(path.join(dataDir, FILE), 'utf8')) as { pid?: unknown; url?: unknown };
    return typeof j.pid === 'number' && typeof j.url === 'string' && /^https?:\/\//.test(j.url) ? { pid: j.pid, url: j.url } : undefined;
  } catch {
    return undefined;
  }
}
