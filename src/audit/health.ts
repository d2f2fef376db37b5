import { auditConfigDecider, auditConfigStream, DEFAULT_THRESHOLDS, incidentDecider, incidentStream, type Thresholds } from '../../commands/audit.ts';
import { handleCommand, loadState } from '../eventstore/handler.ts';
import type { EventStore } from '../eventstore/port.ts';
import type { Db } from '../postgres/db.ts';
import { derivedUuid } from './chain.ts';
import { verifyOrgChain, type VerifyReport } from './verifier.ts';
import { auditVerificationPasses } from '../metrics.ts';

// The verification worker: re-walks each organization's chain on a schedule
// taken from its configuration (never later than hot_max_staleness_seconds
// after the last walk), keeps the result and watermark in an operational
// table, and opens one incident per distinct break (the incident's stream id
// is derived from the break, so walking the same break again opens nothing).

export type Gap = { from_sequence: number; to_sequence: number; reason: string; first_detected_at: string };

export type VerificationRow = {
  org_id: string;
  last_checked_at: string;
  writer_tip_check_at: string;
  watermark_sequence: number;
  tip_sequence: number;
  ok: boolean;
  first_problem: { kind: string; sequence_number: number; detail: string } | null;
  gaps: Gap[];
  events_processed: number;
  in_progress: boolean;
};

/** Walk at least this often, whatever the configuration says, so health stays fresh. */
const MAX_INTERVAL_MS = 60_000;
const TICK_MS = 1_000;

export class AuditVerifier {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly db: Db,
    private readonly store: EventStore,
    private readonly key: { name: string; publicKey: Uint8Array },
    private readonly origin: string,
    private readonly now: () => Date = () => new Date(),
  ) {}

  static async migrate(db: Db): Promise<void> {
    await db.query(`CREATE TABLE IF NOT EXISTS audit_verification (
      org_id text PRIMARY KEY,
      last_checked_at timestamptz,
      writer_tip_check_at timestamptz,
      watermark_sequence bigint NOT NULL DEFAULT 0,
      tip_sequence bigint NOT NULL DEFAULT 0,
      ok boolean NOT NULL DEFAULT true,
      first_problem jsonb,
      gaps jsonb NOT NULL DEFAULT '[]',
      events_processed bigint NOT NULL DEFAULT 0,
      in_progress boolean NOT NULL DEFAULT false
    )`);
  }

  start(): void {
    this.timer = setInterval(() => {
      this.running ??= this.tick()
        .catch(() => {})
        .finally(() => (this.running = undefined));
    }, TICK_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** Walks every organization whose last walk is older than its staleness bound. */
  async tick(): Promise<void> {
    const { rows } = await this.db.query<{ org_id: string; last: string | null; hot: number | null }>(
      `SELECT o.org_id, v.last_checked_at::text AS last, c.hot_max_staleness_seconds AS hot
       FROM orgs o LEFT JOIN audit_verification v ON v.org_id = o.org_id LEFT JOIN audit_configs c ON c.org_id = o.org_id`,
    );
    const now = this.now().getTime();
    for (const r of rows) {
      const interval = Math.min((r.hot ?? DEFAULT_THRESHOLDS.hot_max_staleness_seconds) * 1000, MAX_INTERVAL_MS);
      if (r.last === null || now - Date.parse(r.last) >= interval) await this.verifyOrg(r.org_id);
    }
  }

  async verifyOrg(orgId: string): Promise<VerifyReport> {
    const at = this.now().toISOString();
    await this.db.query(`INSERT INTO audit_verification (org_id, in_progress) VALUES ($1, true) ON CONFLICT (org_id) DO UPDATE SET in_progress = true`, [orgId]);
    const report = await verifyOrgChain(this.store, orgId, this.key, this.origin);
    auditVerificationPasses.inc({ result: report.ok ? 'ok' : 'broken' });
    const { rows: prev } = await this.db.query<{ gaps: Gap[] }>('SELECT gaps FROM audit_verification WHERE org_id = $1', [orgId]);
    const seen = new Map((prev[0]?.gaps ?? []).map((g) => [`${g.from_sequence}-${g.to_sequence}`, g.first_detected_at]));
    const gaps: Gap[] = report.problems
      .filter((p) => p.kind === 'sequence_gap')
      .map((p) => ({ from_sequence: p.sequence_number, to_sequence: p.to_sequence ?? p.sequence_number, reason: 'sequence_gap', first_detected_at: seen.get(`${p.sequence_number}-${p.to_sequence}`) ?? at }));
    const firstBreak = report.problems.find((p) => p.kind !== 'sequence_gap') ?? null;
    const watermark = report.first_bad_sequence === null ? report.tip_sequence : report.first_bad_sequence - 1;
    await this.db.query(
      `UPDATE audit_verification SET last_checked_at = $2, writer_tip_check_at = $2, watermark_sequence = $3, tip_sequence = $4, ok = $5, first_problem = $6,
         gaps = $7, events_processed = $8, in_progress = false WHERE org_id = $1`,
      [orgId, at, watermark, report.tip_sequence, report.ok, firstBreak ? JSON.stringify({ kind: firstBreak.kind, sequence_number: firstBreak.sequence_number, detail: firstBreak.detail }) : null, JSON.stringify(gaps), report.entries],
    );
    const ctx = { orgId, projectId: null, actor: { kind: 'system' as const, id: 'audit-verifier' }, requestId: null, now: this.now };
    if (firstBreak) {
      const incidentId = derivedUuid('incident', `${orgId}/${firstBreak.kind}/${firstBreak.sequence_number}`);
      await handleCommand(this.store, incidentDecider, incidentStream(incidentId), { type: 'open', incidentId, orgId, kind: firstBreak.kind, sequence: firstBreak.sequence_number, detail: firstBreak.detail }, ctx);
    }
    if (report.ok && report.tip_sequence > 0) {
      const r = await handleCommand(this.store, auditConfigDecider, auditConfigStream(orgId), { type: 'initial_walk_completed', orgId, tipSequence: report.tip_sequence }, ctx, { serialize: true });
      // Recording the first walk is itself sealed into the chain (at once, when
      // the sealer runs inline): walk once more so the watermark covers it.
      if (r.changed) return this.verifyOrg(orgId);
    }
    return report;
  }
}

export async function thresholdsOf(store: EventStore, orgId: string): Promise<Thresholds> {
  return (await loadState(store, auditConfigStream(orgId), auditConfigDecider)).state.thresholds;
}
