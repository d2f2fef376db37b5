import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { existingCluster } from '../../src/postgres/data-folder.ts';
import { until } from './wait.ts';
import { nodeArgs } from './entry.ts';

// The service as a user runs it: `node --import tsx src/main.ts` (what
// `npm start` execs) in its own process on a DATA_DIR, ready once /healthz
// answers; stopped with SIGTERM as an operator stops it.

export const root = path.resolve(import.meta.dirname, '..', '..');

export type Service = { url: string; child: ChildProcess; output: () => string; stop(): Promise<number | null> };

export async function startService(env: Record<string, string>): Promise<Service> {
  const child = spawn(process.execPath, nodeArgs('src/main.ts'), { cwd: root, env: { ...process.env, LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const url = `http://127.0.0.1:${env.PORT}`;
  await until(
    async () => {
      if (child.exitCode !== null) throw new Error(`the service exited (${child.exitCode}): ${out}`);
      return fetch(`${url}/healthz`).then((r) => r.ok, () => false);
    },
    'the service answers /healthz',
    180_000,
    100,
  );
  return {
    url,
    child,
    output: () => out,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

/** A connection to the embedded cluster of a running service's DATA_DIR (its ledger database), for checks the API does not offer. */
export function serviceDb(dataDir: string): pg.Client {
  const cluster = existingCluster(dataDir);
  if (!cluster) throw new Error(`no cluster in ${dataDir}`);
  const port = Number(readFileSync(path.join(cluster, 'postmaster.pid'), 'utf8').split('\n')[3]);
  const password = readFileSync(path.join(dataDir, 'pg-superuser-password'), 'utf8').trim();
  return new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password, database: 'ledger' });
}
