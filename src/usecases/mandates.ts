import { mandateDecider, mandateStream, type MandateState, SPEND_CODES, type SpendCode } from '../../commands/mandate.ts';
import { Rejection } from '../eventstore/handler.ts';
import { type AppendGuard, GuardFailed } from '../eventstore/port.ts';
import { newId } from '../ids.ts';
import { POLICY_ATTEMPTS, PolicyEngine } from '../policy/evaluator.ts';
import type { ApprovalExecutor } from './approval-executors.ts';
import type { Ports, RunCommand, Tenant } from './context.ts';
import { policyRefusal } from './policy-refusal.ts';

// Spends against a mandate (spec 4.7): the organization's policies first, then
// the mandate's own rules. Reached by the spend route, the sandbox card
// network and an approved held `mandate.spend`.

export type SpendInput = { amount_minor: string; currency: string; merchant: string; description?: string | null | undefined };
export type SpendResult = { transaction_id: string; mandate_id: string; amount_minor: string; currency: string; merchant: string; decision: 'approved'; remaining_minor: string; at: string };
export type SpendCtx = { ports: Ports; run: RunCommand; tenant: Tenant };

/** A spend decision: approved, else the refusal as a rejection with the decline's code (the decline is recorded either way). */
function spendOutcome(r: { state: MandateState; events: { type: string; data: unknown }[] }): SpendResult {
  const e = r.events[r.events.length - 1]!;
  const d = e.data as { transaction_id: string; mandate_id: string; amount_minor: string; currency: string; merchant: string; remaining_minor?: string; code?: SpendCode; at: string };
  if (e.type === 'mandate.spend_declined') {
    const code = d.code!;
    throw new Rejection(code, `the spend was declined: ${code.replaceAll('_', ' ')}`, { transaction_id: d.transaction_id, decision: 'declined' });
  }
  return { transaction_id: d.transaction_id, mandate_id: d.mandate_id, amount_minor: d.amount_minor, currency: d.currency, merchant: d.merchant, decision: 'approved', remaining_minor: d.remaining_minor!, at: d.at };
}

/** The statuses of the spend's decline codes (src/http/errors.ts lists them; the route documents them). */
export const SPEND_ERRORS = Object.entries(SPEND_CODES).map(([code, status]) => [status, code] as const);

// A mandate's agent, organization and project never change once granted, so a
// found answer is remembered (bounded); a miss is always asked again.
const agentsOfMandates = new Map<string, string>();
const AGENT_CACHE_MAX = 50_000;

/** The mandate's agent, for policy matching; null when the mandate is not the tenant's (the decider answers that). */
async function mandateAgent(ports: Ports, tenant: Tenant, mandateId: string): Promise<string | null> {
  const key = `${tenant.orgId}\u0000${tenant.projectId}\u0000${mandateId}`;
  const known = agentsOfMandates.get(key);
  if (known !== undefined) return known;
  const { rows } = await ports.db.query<{ agent_id: string }>('SELECT agent_id FROM mandates WHERE id = $1 AND org_id = $2 AND project_id = $3', [mandateId, tenant.orgId, tenant.projectId]);
  const agent = rows[0]?.agent_id ?? null;
  if (agent !== null) {
    if (agentsOfMandates.size >= AGENT_CACHE_MAX) agentsOfMandates.clear();
    agentsOfMandates.set(key, agent);
  }
  return agent;
}

/**
 * A spend: the organization's policies first (tool name `mandate.spend`, the
 * mandate's agent), then the mandate's own rules. Policy counters consumed for
 * a spend the mandate then declines are released.
 */
export async function spend(c: SpendCtx, mandateId: string, body: SpendInput, channel: 'api' | 'card', approvedBy: string | null = null): Promise<SpendResult> {
  const agentId = await mandateAgent(c.ports, c.tenant, mandateId);
  // The policies are taken from this process's folded copy first, without a
  // read; the spend is appended guarded by the policy stream's revision, so a
  // change acknowledged anywhere before the append refuses it (nothing written),
  // and the spend is evaluated again on a fresh read.
  for (let attempt = 1; ; attempt++) {
    let release = async () => {};
    let guard: AppendGuard | undefined;
    if (agentId) {
      const toolInput = { mandate_id: mandateId, amount_minor: body.amount_minor, currency: body.currency, merchant: body.merchant, description: body.description ?? null, channel };
      const outcome = await new PolicyEngine(c.ports.store, c.ports.now).evaluate(
        { orgId: c.tenant.orgId, projectId: c.tenant.projectId, agentId, toolName: 'mandate.spend', toolInput, amountMinor: BigInt(body.amount_minor), currency: body.currency, approvedBy },
        c.run,
        { fromCache: attempt === 1 },
      );
      if (outcome.decision !== 'allowed') throw policyRefusal(outcome);
      release = outcome.release;
      guard = outcome.guard;
    }
    try {
      const r = await c.run(
        mandateDecider,
        mandateStream(mandateId),
        {
          type: 'spend',
          tenant: c.tenant,
          spend: { transactionId: newId('txn'), channel, amount: BigInt(body.amount_minor), currency: body.currency, merchant: body.merchant, description: body.description ?? null },
        },
        { serialize: true, orgId: c.tenant.orgId, projectId: c.tenant.projectId, ...(guard ? { guard } : {}) },
      );
      return spendOutcome(r);
    } catch (err) {
      await release();
      if (!(err instanceof GuardFailed)) throw err;
      if (attempt >= POLICY_ATTEMPTS) throw new Rejection('concurrency_conflict', 'the policies kept changing; retry the request', { attempts: attempt });
    }
  }
}

/** An approved `mandate.spend` runs the held spend with its verbatim input. */
export const mandateSpendExecutor: ApprovalExecutor = async (a, ports, run) => {
  const input = a.tool_input as { mandate_id: string; amount_minor: string; currency: string; merchant: string; description: string | null; channel?: 'api' | 'card' };
  if (!a.project_id) throw new Rejection('invalid_transition', 'the held spend has no project');
  const result = await spend({ ports, run, tenant: { orgId: a.org_id, projectId: a.project_id } }, input.mandate_id, { amount_minor: input.amount_minor, currency: input.currency, merchant: input.merchant, description: input.description }, input.channel ?? 'api', a.decided_by ?? 'approval');
  return result as unknown as Record<string, unknown>;
};
