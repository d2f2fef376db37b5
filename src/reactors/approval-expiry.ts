import { approvalDecider, approvalStream } from '../../commands/approval.ts';
import { handleCommand } from '../eventstore/handler.ts';
import type { EventStore } from '../eventstore/port.ts';
import type { Db } from '../postgres/db.ts';
import { PeriodicReactor } from './periodic.ts';
import { migrate } from '../postgres/schema.ts';

// Moves pending approvals past expires_at to `expired`, and records when the
// last sweep ran (deployment-wide, an operational record, not a business
// fact: `last_sweep_at` of the approvals health view). Expiring an approval
// that a person decided in between changes nothing (the decider refuses
// nothing and appends nothing), so two processes sweeping are harmless.

const BATCH = 200;

export async function migrateApprovalSweeps(db: Db): Promise<void> {
  await migrate(db, (tx) => tx.query(`CREATE TABLE IF NOT EXISTS approval_sweeps (id int PRIMARY KEY, last_sweep_at timestamptz NOT NULL)`));
}

export async function lastApprovalSweep(db: Db): Promise<string | null> {
  const { rows } = await db.query<{ at: string }>(`SELECT to_char(last_sweep_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at FROM approval_sweeps WHERE id = 1`);
  return rows[0]?.at ?? null;
}

export class ApprovalExpiryReactor extends PeriodicReactor {
  constructor(
    private readonly db: Db,
    private readonly store: EventStore,
    private readonly now: () => Date,
    intervalMs = 1_000,
  ) {
    super(intervalMs);
  }

  override async start(): Promise<void> {
    await migrateApprovalSweeps(this.db);
    super.start();
  }

  protected async pass(): Promise<number> {
    await migrateApprovalSweeps(this.db);
    const at = this.now();
    let moved = 0;
    const { rows } = await this.db.query<{ id: string; org_id: string; project_id: string | null }>(
      `SELECT id, org_id, project_id FROM approvals WHERE status = 'pending' AND expires_at <= $1 ORDER BY approvals.expires_at LIMIT ${BATCH}`,
      [at.toISOString()],
    );
    for (const r of rows) {
      const res = await handleCommand(this.store, approvalDecider, approvalStream(r.id), { type: 'expire' }, { orgId: r.org_id, projectId: r.project_id, actor: { kind: 'system', id: 'approval-expiry' }, requestId: null, now: () => at }, { serialize: true });
      if (res.changed) moved++;
    }
    await this.db.query(`INSERT INTO approval_sweeps (id, last_sweep_at) VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET last_sweep_at = greatest(approval_sweeps.last_sweep_at, EXCLUDED.last_sweep_at)`, [at.toISOString()]);
    return moved;
  }
}
