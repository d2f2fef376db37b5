import { mandateDecider, mandateStream } from '../../commands/mandate.ts';
import { handleCommand } from '../eventstore/handler.ts';
import type { EventStore } from '../eventstore/port.ts';
import type { Db } from '../postgres/db.ts';

// Moves mandates past expires_at to `expired`. Decisions do not wait for it
// (a spend after expires_at is refused as expired and records the expiry
// itself); the reactor makes the fact explicit for mandates nobody touches.
// The expire command changes nothing on a mandate already expired, so two
// processes running it, or a retry, are harmless.

const BATCH = 200;

export class MandateExpiryReactor {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;

  constructor(
    private readonly db: Db,
    private readonly store: EventStore,
    private readonly now: () => Date,
    private readonly intervalMs = 1_000,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.tick().catch(() => {}), this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running?.catch(() => {});
  }

  /** One pass: expires what is due now; answers how many mandates it moved. */
  tick(): Promise<number> {
    this.running ??= this.pass().finally(() => (this.running = undefined));
    return this.running;
  }

  private async pass(): Promise<number> {
    const at = this.now();
    let moved = 0;
    const { rows } = await this.db.query<{ id: string; org_id: string; project_id: string }>(
      `SELECT id, org_id, project_id FROM mandates WHERE status IN ('active', 'paused') AND expires_at <= $1 ORDER BY expires_at LIMIT ${BATCH}`,
      [at.toISOString()],
    );
    for (const r of rows) {
      const res = await handleCommand(
        this.store,
        mandateDecider,
        mandateStream(r.id),
        { type: 'expire' },
        { orgId: r.org_id, projectId: r.project_id, actor: { kind: 'system', id: 'mandate-expiry' }, requestId: null, now: () => at },
        { serialize: true },
      );
      if (res.changed) moved++;
    }
    return moved;
  }
}
