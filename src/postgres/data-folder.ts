import { existsSync, readdirSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { StartupError } from '../startup.ts';
import { DATA_DIR_SUFFIX, ownerAlive, runningPostmaster, stopPostmaster, SYSTEM_DIR } from './embedded.ts';

// What the CLI asks of a data folder before it touches it: does it hold the
// service's database already (a command that only reads must not create an
// empty one beside the real one), and how to remove it with its cluster
// (`reset`), wherever that cluster lives (in place, or relocated under
// SYSTEM_DIR when running as root: see embedded.ts).

/** The cluster folder of a data folder, wherever it lives; undefined when the folder holds none (no file-system writes, no waiting). */
export function existingCluster(dataDir: string): string | undefined {
  const abs = path.resolve(dataDir);
  const inPlace = path.join(abs, 'pg');
  if (existsSync(path.join(inPlace, 'PG_VERSION'))) return inPlace;
  try {
    const where = readFileSync(path.join(abs, 'pg-cluster'), 'utf8').trim();
    if (where && existsSync(path.join(where, 'PG_VERSION'))) return where;
  } catch {
    // no pointer: no relocated cluster
  }
  return undefined;
}

/** One line for a command that only reads, run where no database is. */
export function noDatabaseLine(dataDir: string, command: string): string {
  const abs = path.resolve(dataDir);
  const why = existsSync(abs) ? 'holds no database' : 'does not exist';
  return `${command} only reads, and DATA_DIR=${abs} ${why} (nothing was created): run it with the DATA_DIR the service runs with (the service's start log names it), or set DATABASE_URL`;
}

/** Relocated clusters whose data folder is gone or points elsewhere now (as root only). */
export function orphanedClusters(): string[] {
  const dir = path.join(SYSTEM_DIR, 'clusters');
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const n of names) {
    if (!n.endsWith(DATA_DIR_SUFFIX)) continue;
    const cluster = path.join(dir, n.slice(0, -DATA_DIR_SUFFIX.length));
    const owner = readFileSync(path.join(dir, n), 'utf8').trim();
    let pointsBack = false;
    try {
      pointsBack = readFileSync(path.join(owner, 'pg-cluster'), 'utf8').trim() === cluster;
    } catch {
      pointsBack = false;
    }
    if (!pointsBack) out.push(cluster);
  }
  return out;
}

/**
 * Removes a data folder and its cluster (and relocated clusters whose folder
 * is gone). Refuses while a process of ours serves the folder. Answers what it removed.
 */
export async function resetDataFolder(dataDir: string): Promise<string[]> {
  const abs = path.resolve(dataDir);
  if (abs === path.parse(abs).root || abs === path.resolve(process.env.HOME ?? '/nonexistent')) throw new StartupError(`refusing to remove ${abs}: set DATA_DIR to the service's data folder`);
  const cluster = existingCluster(abs);
  if (await ownerAlive(path.join(abs, 'pg-owner.pid'))) {
    const pid = (await fs.readFile(path.join(abs, 'pg-owner.pid'), 'utf8')).trim();
    throw new StartupError(`the service (pid ${pid}) is running on DATA_DIR=${abs}: stop it first (kill ${pid}), then reset`);
  }
  // A postmaster left by a crashed service holds the cluster: stop it first.
  if (cluster) {
    const running = await runningPostmaster(cluster);
    if (running) await stopPostmaster(running.pid);
  }
  const removed: string[] = [];
  if (cluster && !cluster.startsWith(abs + path.sep)) {
    await fs.rm(cluster, { recursive: true, force: true });
    await fs.rm(`${cluster}${DATA_DIR_SUFFIX}`, { force: true });
    removed.push(cluster);
  }
  if (existsSync(abs)) {
    await fs.rm(abs, { recursive: true, force: true });
    removed.unshift(abs);
  }
  for (const orphan of orphanedClusters()) {
    if ((await runningPostmaster(orphan)) !== undefined) continue;
    await fs.rm(orphan, { recursive: true, force: true });
    await fs.rm(`${orphan}${DATA_DIR_SUFFIX}`, { force: true });
    removed.push(orphan);
  }
  return removed;
}
