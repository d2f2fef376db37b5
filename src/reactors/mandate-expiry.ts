import { mandateDecider, mandateStream } from '../../commands/mandate.ts';
import { consentDecider, consentStream, slotDecider, slotStream } from '../../commands/bank-consent.ts';
import { handleCommand } from '../eventstore/handler.ts';
import type { EventStore } from '../eventstore/port.ts';
import type { Db } from '../postgres/db.ts';
import { PeriodicReactor } from './periodic.ts';

// Moves mandates and bank consents past expires_at to `expired`. Decisions do not wait for it
// (a spend after expires_at is refused as expired and records the expiry
// itself); the reactor makes the fact explicit for mandates nobody touches.
// The expire command changes nothing on a mandate already expired, so two
// processes running it, or a retry, are harmless.

const BATCH = 200;

export class MandateExpiryReactor extends PeriodicReactor {
  constructor(
    private readonly db: Db,
    private readonly store: EventStore,
    private readonly now: () => Date,
    intervalMs = 1_000,
  ) {
    super(intervalMs);
  }

  protected async pass(): Promise<number> {
    const at = this.now();
    let moved = 0;
    const { rows } = await this.db.query<{ id: string; org_id: string; project_id: string }>(
      `SELECT id, org_id, project_id FROM mandates WHERE status IN ('active', 'paused') AND expires_at <= $1 ORDER BY mandates.expires_at LIMIT ${BATCH}`,
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
    // Bank consents past expires_at: expired, and their slot released.
    const consents = await this.db.query<{ id: string; org_id: string; project_id: string; consumer_id: string; bank_id: string }>(
      `SELECT id, org_id, project_id, consumer_id, bank_id FROM bank_consents WHERE status IN ('pending', 'authorised') AND expires_at <= $1 ORDER BY bank_consents.expires_at LIMIT ${BATCH}`,
      [at.toISOString()],
    ).catch(() => ({ rows: [] as { id: string; org_id: string; project_id: string; consumer_id: string; bank_id: string }[] }));
    for (const c of consents.rows) {
      const ctx = { orgId: c.org_id, projectId: c.project_id, actor: { kind: 'system' as const, id: 'expiry' }, requestId: null, now: () => at };
      const res = await handleCommand(this.store, consentDecider, consentStream(c.id), { type: 'close', tenant: null, to: 'expired' }, ctx, { serialize: true });
      await handleCommand(this.store, slotDecider, slotStream(c.org_id, c.consumer_id, c.bank_id), { type: 'release', consentId: c.id }, ctx, { serialize: true });
      if (res.changed) moved++;
    }
    return moved;
  }
}
