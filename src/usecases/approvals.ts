import { approvalDecider, approvalStream } from '../../commands/approval.ts';
import { Rejection } from '../eventstore/handler.ts';
import { isoText as TS } from '../postgres/iso-text.ts';
import { lastApprovalSweep } from '../reactors/approval-expiry.ts';
import type { HeldCall } from './approval-executors.ts';
import type { Ports, RunCommand } from './context.ts';

// Approvals (spec Part 2 Approval, 4.10): a call held by an approval-required
// policy. A person decides; approving executes the held call with its verbatim
// tool_input, once, through the executor the composition root listed for its
// tool name (ports.approvalExecutors).

export type ApprovalStatus = 'pending' | 'approved' | 'denied' | 'expired' | 'execution_failed';

/** An approval as the read model holds it (the API's Approval). */
export type ApprovalRow = HeldCall & {
  matched_rule_id: string;
  matched_rule_name: string;
  status: ApprovalStatus;
  decided_at: string | null;
  decision_reason: string | null;
  executed_at: string | null;
  execution_result: Record<string, unknown> | null;
  created_at: string;
  expires_at: string;
};

const COLUMNS = `id, org_id, project_id, session_id, agent_id, matched_rule_id, matched_rule_name, tool_name, tool_input, status,
  ${TS('decided_at')} AS decided_at, decided_by, decision_reason, ${TS('executed_at')} AS executed_at, execution_result,
  ${TS('created_at')} AS created_at, ${TS('expires_at')} AS expires_at`;

/** One approval of the organization (of one project when `projectId` is given), or undefined. */
export async function findApproval(ports: Pick<Ports, 'db'>, orgId: string, id: string, projectId: string | null = null): Promise<ApprovalRow | undefined> {
  return (await ports.db.query<ApprovalRow>(`SELECT ${COLUMNS} FROM approvals WHERE org_id = $1 AND id = $2 AND ($3::text IS NULL OR project_id = $3)`, [orgId, id, projectId])).rows[0];
}

/** One approval, or the rejection `not_found`. */
export async function getApproval(ports: Pick<Ports, 'db'>, orgId: string, id: string, projectId: string | null = null): Promise<ApprovalRow> {
  const a = await findApproval(ports, orgId, id, projectId);
  if (!a) throw new Rejection('not_found', 'approval not found');
  return a;
}

/** Approvals of the organization (of one project when given), newest first. */
export async function listApprovals(ports: Pick<Ports, 'db'>, orgId: string, q: { status: ApprovalStatus | null; limit: number; projectId: string | null }): Promise<ApprovalRow[]> {
  const { rows } = await ports.db.query<ApprovalRow>(
    `SELECT ${COLUMNS} FROM approvals WHERE org_id = $1 AND ($2::text IS NULL OR status = $2) AND ($4::text IS NULL OR project_id = $4) ORDER BY approvals.created_at DESC, id DESC LIMIT $3`,
    [orgId, q.status, q.limit, q.projectId],
  );
  return rows;
}

/** Pending approvals of an organization and the expiry sweeper's last run. */
export async function approvalsHealth(ports: Pick<Ports, 'db' | 'now'>, orgId: string) {
  const { rows } = await ports.db.query<{ n: string; oldest: string | null }>(`SELECT count(*)::text AS n, ${TS('min(created_at)')} AS oldest FROM approvals WHERE org_id = $1 AND status = 'pending'`, [orgId]);
  const oldest = rows[0]?.oldest;
  const age = oldest ? Math.max(0, Math.floor((ports.now().getTime() - Date.parse(oldest)) / 1000)) : null;
  return { status: 'ok' as const, pending_count: Number(rows[0]?.n ?? 0), oldest_pending_age_seconds: age, last_sweep_at: await lastApprovalSweep(ports.db) };
}

/** A failure as recorded when the composition root gave no renderer: its code and message. */
function genericFailure(err: unknown): Record<string, unknown> {
  const code = err instanceof Rejection ? err.code : 'execution_failed';
  return { error: { code, message: err instanceof Error ? err.message : String(err) } };
}

export type Decision = { orgId: string; id: string; decision: 'approve' | 'deny'; reason: string | null; by: string };

/**
 * A person approves or denies a held call. Only the append that moves
 * pending → approved at the stream's revision wins (a concurrent second
 * approve is refused), so the call runs once; its result, or its failure as
 * `failureResult` renders it, is recorded on the approval.
 */
export async function decideApproval(ports: Ports, run: RunCommand, d: Decision, failureResult: (err: unknown) => Record<string, unknown> = ports.approvalFailure ?? genericFailure): Promise<ApprovalRow> {
  const current = await getApproval(ports, d.orgId, d.id);
  const r = await run(approvalDecider, approvalStream(d.id), { type: 'decide', orgId: d.orgId, decision: d.decision, by: d.by, reason: d.reason }, { projectId: current.project_id, conflictCode: 'approval_not_pending' });
  if (d.decision === 'approve' && r.changed) {
    const approval = await getApproval(ports, d.orgId, d.id);
    const exec = ports.approvalExecutors.for(approval.tool_name);
    let ok = false;
    let result: Record<string, unknown>;
    if (!exec) result = { error: { code: 'no_executor', message: `no executor for ${approval.tool_name}` } };
    else {
      try {
        result = await exec(approval, ports, run);
        ok = true;
      } catch (err) {
        result = failureResult(err);
      }
    }
    await run(approvalDecider, approvalStream(d.id), { type: 'record_execution', ok, result }, { projectId: current.project_id });
  }
  return getApproval(ports, d.orgId, d.id);
}

/** The people's queue of one project (with the organization's approvals of no project): the pending approvals (oldest first: the one expiring soonest leads), the last decided ones, and the e-mail of each person who decided. */
/**
 * The queue a person sees, a page of each list: pending approvals, the one
 * expiring soonest first, and the decided ones, newest first. Each page
 * continues after a row (its id, the cursor) and says the id to continue
 * after when more rows follow; never an offset.
 */
export async function approvalQueue(ports: Pick<Ports, 'db'>, orgId: string, projectId: string, page: { pendingAfter?: string | undefined; historyAfter?: string | undefined; limit?: number } = {}) {
  const limit = page.limit ?? 50;
  const { rows: pending } = await ports.db.query<ApprovalRow>(
    `SELECT ${COLUMNS} FROM approvals WHERE org_id = $1 AND (project_id = $2 OR project_id IS NULL) AND status = 'pending'
       AND ($4::text IS NULL OR (expires_at, id) > (SELECT expires_at, id FROM approvals WHERE org_id = $1 AND id = $4))
     ORDER BY approvals.expires_at, id LIMIT $3`,
    [orgId, projectId, limit + 1, page.pendingAfter ?? null],
  );
  const { rows: history } = await ports.db.query<ApprovalRow>(
    `SELECT ${COLUMNS} FROM approvals WHERE org_id = $1 AND (project_id = $2 OR project_id IS NULL) AND status <> 'pending'
       AND ($4::text IS NULL OR (coalesce(decided_at, expires_at), id) < (SELECT coalesce(decided_at, expires_at), id FROM approvals WHERE org_id = $1 AND id = $4))
     ORDER BY coalesce(decided_at, expires_at) DESC, id DESC LIMIT $3`,
    [orgId, projectId, limit + 1, page.historyAfter ?? null],
  );
  const more = (rows: ApprovalRow[]) => {
    if (rows.length <= limit) return null;
    rows.length = limit;
    return rows[limit - 1]!.id;
  };
  const nextPending = more(pending);
  const nextHistory = more(history);
  return { pending, history, nextPending, nextHistory, people: await deciders(ports, orgId, history) };
}

/** The e-mail address of each person who decided one of `rows` (by user id). */
export async function deciders(ports: Pick<Ports, 'db'>, orgId: string, rows: readonly Pick<ApprovalRow, 'decided_by'>[]): Promise<Map<string, string>> {
  const ids = [...new Set(rows.map((r) => r.decided_by).filter((x): x is string => x !== null))];
  if (ids.length === 0) return new Map();
  const { rows: users } = await ports.db.query<{ user_id: string; email: string }>('SELECT user_id, email FROM users WHERE org_id = $1 AND user_id = ANY($2)', [orgId, ids]);
  return new Map(users.map((u) => [u.user_id, u.email]));
}
