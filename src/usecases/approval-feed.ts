import type { Db } from '../postgres/db.ts';
import type { Position } from '../eventstore/port.ts';
import { appliedKey } from '../projector/checkpoints.ts';
import { policyProjection } from '../../projections/policy.ts';
import type { ApprovalStatus } from './approvals.ts';

// The live feed of approvals, for the people watching a queue (the dashboard's
// server-sent events). One per process, on every instance: it follows the
// applied position of the projection that holds approvals (its checkpoint
// moves in the same transaction as its rows, and every instance learns the move
// by the progress NOTIFY, src/projector/progress.ts), and when it moves reads
// the approvals whose row changed in between (each row carries the position of
// the event that last wrote it). A change is therefore announced only once it
// is visible to every read, on whichever instance wrote it; nothing is kept in
// memory that another instance would need. It runs only while someone listens.

export type ApprovalChange = { id: string; org_id: string; project_id: string | null; status: ApprovalStatus; decided_by: string | null };

export type FeedProgress = {
  position(name: string): Position | undefined;
  waitForOne(name: string, position: Position, timeoutMs: number): Promise<boolean>;
};

type Listener = (change: ApprovalChange) => void;

const APPLIED = appliedKey(policyProjection.name);
/** How long one wait lasts before the loop looks again whether anyone still listens. */
const WAIT_MS = 2_000;
/** The smallest position after `p` (positions are compared as strings: p + NUL sorts right after p). */
const after = (p: Position) => `${p}\u0000`;

export class ApprovalFeed {
  private readonly listeners = new Map<string, Set<Listener>>();
  private running: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly db: Db,
    private readonly progress: FeedProgress,
  ) {}

  /** Calls `fn` with each change of the organization's approvals from now on; answers the function that stops it. */
  subscribe(orgId: string, fn: Listener): () => void {
    let set = this.listeners.get(orgId);
    if (!set) this.listeners.set(orgId, (set = new Set()));
    set.add(fn);
    this.running ??= this.follow().finally(() => (this.running = undefined));
    return () => {
      set.delete(fn);
      if (set.size === 0 && this.listeners.get(orgId) === set) this.listeners.delete(orgId);
    };
  }

  /** Stops following (the app closes); listeners get nothing more. */
  async close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
    await this.running;
  }

  private async follow(): Promise<void> {
    let cursor = await this.applied();
    while (!this.closed && this.listeners.size > 0) {
      if (!(await this.progress.waitForOne(APPLIED, after(cursor), WAIT_MS))) continue;
      const to = this.progress.position(APPLIED) ?? cursor;
      try {
        const { rows } = await this.db.query<ApprovalChange>(
          `SELECT id, org_id, project_id, status, decided_by FROM approvals WHERE position > $1 AND position <= $2 ORDER BY position`,
          [cursor, to],
        );
        cursor = to;
        for (const r of rows) for (const fn of this.listeners.get(r.org_id) ?? []) fn(r);
      } catch {
        // The database did not answer: read the same stretch again shortly.
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  }

  /** Where the projection stands now: what was applied before the first listener came is not news. */
  private async applied(): Promise<Position> {
    const known = this.progress.position(APPLIED);
    if (known !== undefined) return known;
    const { rows } = await this.db.query<{ p: string }>(`SELECT applied_position AS p FROM checkpoints WHERE name = $1`, [policyProjection.name]);
    return rows[0]?.p ?? '';
  }
}
