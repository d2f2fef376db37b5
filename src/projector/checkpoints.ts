import type { Db, Queryable } from '../postgres/db.ts';
import { START, type Position } from '../eventstore/port.ts';
import { addMissingColumns, migrate } from '../postgres/schema.ts';

// Checkpoints of everything that follows the log: projections, the audit
// sealer, reactors. A position is where the follower has processed up to,
// inclusive. A failed follower keeps its last good position and records the
// error and the position of the event it could not process.

export const PROGRESS_CHANNEL = 'ledger_progress';

export type CheckpointRow = {
  name: string;
  applied_position: Position;
  kind: 'projection' | 'sealer' | 'reactor';
  version: number;
  position: Position;
  status: 'running' | 'failed' | 'rebuilding';
  error: string | null;
  error_position: Position | null;
  updated_at: string;
};

export async function migrateCheckpoints(db: Db): Promise<void> {
  await migrate(db, async (tx) => {
    await tx.query(`CREATE TABLE IF NOT EXISTS checkpoints (
      name text PRIMARY KEY,
      kind text NOT NULL,
      version int NOT NULL,
      position text COLLATE "C" NOT NULL DEFAULT '',
      status text NOT NULL DEFAULT 'running',
      error text,
      error_position text COLLATE "C",
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
    await addMissingColumns(tx, 'checkpoints', [['applied_position', `text COLLATE "C" NOT NULL DEFAULT ''`]]);
  });
}

/**
 * The progress key of the last position a projection actually applied (wrote
 * rows for), as opposed to the position it has read past. Caches of a read
 * model are valid while this one does not move.
 */
export const appliedKey = (name: string) => `${name}@applied`;

export async function ensureCheckpoint(db: Queryable, name: string, kind: CheckpointRow['kind'], version: number): Promise<CheckpointRow> {
  await db.query(`INSERT INTO checkpoints (name, kind, version, position) VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING`, [name, kind, version, START]);
  return (await readCheckpoint(db, name))!;
}

export async function readCheckpoint(db: Queryable, name: string, forUpdate = false): Promise<CheckpointRow | undefined> {
  const { rows } = await db.query<CheckpointRow>(
    `SELECT name, kind, version, position, applied_position, status, error, error_position, updated_at::text FROM checkpoints WHERE name = $1${forUpdate ? ' FOR UPDATE' : ''}`,
    [name],
  );
  return rows[0];
}

export async function listCheckpoints(db: Queryable): Promise<CheckpointRow[]> {
  const { rows } = await db.query<CheckpointRow>(`SELECT name, kind, version, position, applied_position, status, error, error_position, updated_at::text FROM checkpoints ORDER BY kind, name`);
  return rows;
}

/** Moves a checkpoint forward (in the caller's transaction) and wakes waiters in every process. */
export async function advanceCheckpoint(tx: Queryable, name: string, position: Position, opts: { applied?: boolean } = {}): Promise<void> {
  await tx.query(
    `UPDATE checkpoints SET position = $2, status = 'running', error = NULL, error_position = NULL, updated_at = now()${opts.applied ? ', applied_position = $2' : ''} WHERE name = $1`,
    [name, position],
  );
  await tx.query(`SELECT pg_notify($1, $2)`, [PROGRESS_CHANNEL, name]);
}

export async function recordFailure(db: Queryable, name: string, errorPosition: Position, error: string): Promise<void> {
  await db.query(`UPDATE checkpoints SET status = 'failed', error = $3, error_position = $2, updated_at = now() WHERE name = $1`, [name, errorPosition, error.slice(0, 2000)]);
}
