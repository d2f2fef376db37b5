import { auditConfigDecider, auditConfigStream, incidentDecider, incidentStream } from '../../commands/audit.ts';
import { handleCommand, loadState } from '../eventstore/handler.ts';
import type { EventStore } from '../eventstore/port.ts';
import type { Db } from '../postgres/db.ts';
import { derivedUuid } from './chain.ts';
import { verifyOrgChain, type Problem, type VerifyReport } from './verifier.ts';
import { verifyRange } from './windows.ts';
import { addMissingColumns, migrate } from '../postgres/schema.ts';

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

/** Bounds on one pass: entries past the watermark, and one chunk of the cold cycle. */
const FORWARD_CHUNK = 50_000;
const COLD_CHUNK = 20_000;
const TICK_MS = 1_000;

/** What a verification pass found: `ok`, or `broken` (any problem). */
export type PassResult = 'ok' | 'broken';

export class AuditVerifier {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly db: Db,
    private readonly store: EventStore,
    private readonly key: { name: string; publicKey: Uint8Array },
    private readonly origin: string,
    private readonly now: () => Date = () => new Date(),
    /** Told each pass's result (a pass that verified entries, or a whole walk): the process's counter, or the service's thread from a worker. */
    private readonly counted: (result: PassResult) => void = () => {},
  ) {}

  static async migrate(db: Db): Promise<void> {
    await migrate(db, async (tx) => {
      await tx.query(`CREATE TABLE IF NOT EXISTS audit_verification (
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
      // The windowed schedule (issue: verification that does not grow with history).
      await addMissingColumns(tx, 'audit_verification', [
        ['hot_checked_at', 'timestamptz'],
        ['warm_checked_at', 'timestamptz'],
        ['cold_checked_at', 'timestamptz'],
        ['cold_cursor', 'bigint'],
        ['cold_cycle_started_at', 'timestamptz'],
      ]);
    });
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

  /** One scheduled pass over every organization (windowed, bounded per pass). */
  async tick(): Promise<void> {
    const { rows } = await this.db.query<{ org_id: string }>('SELECT org_id FROM orgs');
    for (const r of rows) await this.passOrg(r.org_id);
  }

  /**
   * One bounded pass over an organization's chain: the entries past the
   * watermark (up to the writer's tip), then whichever window is due — the
   * hot window within hot_max_staleness_seconds, the warm window within
   * warm_max_staleness_seconds, and the older entries in chunks whose cycle
   * completes within cold_max_staleness_seconds. Each stretch costs what it
   * covers (src/audit/windows.ts), never the whole chain.
   */
  async passOrg(orgId: string): Promise<{ verified: [number, number][]; problems: Problem[] }> {
    const now = this.now();
    const at = now.toISOString();
    const { state: config } = await loadState(this.store, auditConfigStream(orgId), auditConfigDecider);
    const t = config.thresholds;
    await this.db.query(`INSERT INTO audit_verification (org_id) VALUES ($1) ON CONFLICT (org_id) DO NOTHING`, [orgId]);
    const v = (await this.db.query<{ watermark: string; hot: string | null; warm: string | null; cold: string | null; cursor: string | null; cycle: string | null; ok: boolean; first_problem: { sequence_number: number } | null; gaps: number }>(
      `SELECT watermark_sequence::text AS watermark, hot_checked_at::text AS hot, warm_checked_at::text AS warm, cold_checked_at::text AS cold, cold_cursor::text AS cursor, cold_cycle_started_at::text AS cycle, ok, first_problem, jsonb_array_length(gaps) AS gaps
       FROM audit_verification WHERE org_id = $1`,
      [orgId],
    )).rows[0]!;
    const tip = Number((await this.db.query<{ s: string }>('SELECT sequence::text AS s FROM audit_chain_state WHERE org_id = $1', [orgId])).rows[0]?.s ?? 0);
    const boundary = async (days: number) => {
      const since = new Date(now.getTime() - days * 86_400_000).toISOString();
      const r = (await this.db.query<{ s: string | null }>('SELECT min(sequence_number)::text AS s FROM audit_events WHERE org_id = $1 AND happened_at >= $2', [orgId, since])).rows[0]?.s;
      return r ? Number(r) : tip + 1;
    };
    const stale = (last: string | null, seconds: number) => last === null || now.getTime() - Date.parse(last) >= seconds * 1000;
    let watermark = Number(v.watermark);
    const ranges: [number, number, 'forward' | 'hot' | 'warm' | 'cold'][] = [];
    if (tip > watermark) ranges.push([watermark + 1, Math.min(tip, watermark + FORWARD_CHUNK), 'forward']);
    const hotFrom = Math.max(1, await boundary(t.hot_window_days));
    const warmFrom = Math.max(1, Math.min(hotFrom, await boundary(t.warm_window_days)));
    if (stale(v.hot, t.hot_max_staleness_seconds) && hotFrom <= watermark) ranges.push([hotFrom, watermark, 'hot']);
    if (stale(v.warm, t.warm_max_staleness_seconds) && warmFrom < hotFrom && warmFrom <= watermark) ranges.push([warmFrom, Math.min(hotFrom - 1, watermark), 'warm']);
    let cursor = v.cursor === null ? null : Number(v.cursor);
    let cycle = v.cycle;
    const coldEnd = Math.min(warmFrom - 1, watermark);
    if (cursor === null && coldEnd >= 1 && stale(v.cold, t.cold_max_staleness_seconds)) {
      cursor = 1;
      cycle = at;
    }
    if (cursor !== null && coldEnd >= cursor) ranges.push([cursor, Math.min(coldEnd, cursor + COLD_CHUNK - 1), 'cold']);
    const problems: Problem[] = [];
    const verified: [number, number][] = [];
    let entries = 0;
    const done: Record<string, boolean> = {};
    for (const [from, to, kind] of ranges) {
      const r = await verifyRange(this.store, this.db, orgId, from, to, this.key, this.origin);
      entries += r.entries;
      problems.push(...r.problems);
      verified.push([from, to]);
      done[kind] = true;
      if (kind === 'forward' && r.problems.length === 0) watermark = to;
      if (kind === 'cold') cursor = to + 1 > coldEnd ? null : to + 1;
    }
    // A forward stretch that reached the tip clean also checked every window it covered.
    const forward = ranges.find((r) => r[2] === 'forward');
    const coveredFrom = forward && watermark === tip ? forward[0] : Infinity;
    const hotDone = done.hot === true || coveredFrom <= hotFrom;
    const warmDone = done.warm === true || coveredFrom <= warmFrom || warmFrom >= hotFrom;
    const coldDone = (done.cold === true && cursor === null) || coveredFrom <= 1;
    if (coveredFrom <= 1) {
      cursor = null;
      cycle = at;
    }
    const first = problems[0] ?? null;
    // Health clears only when the stretch holding the recorded break was re-verified clean.
    const prior = v.first_problem?.sequence_number;
    const cleared = !first && (prior === undefined || verified.some(([a, b]) => prior >= a && prior <= b));
    const ok = first ? false : cleared ? true : v.ok;
    if (verified.length > 0) this.counted(first ? 'broken' : 'ok');
    await this.db.query(
      `UPDATE audit_verification SET last_checked_at = $2, writer_tip_check_at = CASE WHEN $3 THEN $2 ELSE writer_tip_check_at END,
         watermark_sequence = $4, tip_sequence = $5, ok = $6, first_problem = CASE WHEN $7::jsonb IS NOT NULL THEN $7::jsonb WHEN $6 THEN NULL ELSE first_problem END,
         events_processed = events_processed + $8,
         hot_checked_at = CASE WHEN $9 THEN $2 ELSE hot_checked_at END,
         warm_checked_at = CASE WHEN $10 THEN $2 ELSE warm_checked_at END,
         cold_cursor = $11, cold_cycle_started_at = $12,
         cold_checked_at = CASE WHEN $13 THEN $12 ELSE cold_checked_at END,
         in_progress = false
       WHERE org_id = $1`,
      [orgId, at, tip <= watermark, watermark, tip, ok, first ? JSON.stringify({ kind: first.kind, sequence_number: first.sequence_number, detail: first.detail }) : null, entries,
        hotDone, warmDone, cursor, cycle, coldDone],
    );
    const ctx = { orgId, projectId: null, actor: { kind: 'system' as const, id: 'audit-verifier' }, requestId: null, now: this.now };
    if (first) {
      const incidentId = derivedUuid('incident', `${orgId}/${first.kind}/${first.sequence_number}`);
      await handleCommand(this.store, incidentDecider, incidentStream(incidentId), { type: 'open', incidentId, orgId, kind: first.kind, sequence: first.sequence_number, detail: first.detail }, ctx);
    }
    // The watermark moves only by clean forward stretches from sequence 1, so a
    // clean chain whose watermark is the tip has been walked forward to it: the
    // first such pass records the initial walk (once: the decider ignores a
    // second one), as the whole walk does. Never while a break or an
    // unlinkable stretch (recorded by a whole walk) stands.
    if (ok && !first && v.gaps === 0 && tip > 0 && watermark === tip && config.initialWalkAt === null) {
      const r = await handleCommand(this.store, auditConfigDecider, auditConfigStream(orgId), { type: 'initial_walk_completed', orgId, tipSequence: tip }, ctx, { serialize: true });
      // The record is itself sealed (at once when the sealer runs inline):
      // pass once more so the watermark covers it, as verifyOrg does.
      if (r.changed) {
        const again = await this.passOrg(orgId);
        return { verified: [...verified, ...again.verified], problems: [...problems, ...again.problems] };
      }
    }
    return { verified, problems };
  }

  /** A whole walk of one chain (the CLI and tests): every entry, from the start. */
  async verifyOrg(orgId: string): Promise<VerifyReport> {
    const at = this.now().toISOString();
    await this.db.query(`INSERT INTO audit_verification (org_id, in_progress) VALUES ($1, true) ON CONFLICT (org_id) DO UPDATE SET in_progress = true`, [orgId]);
    const report = await verifyOrgChain(this.store, orgId, this.key, this.origin);
    this.counted(report.ok ? 'ok' : 'broken');
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
