import { agentDecider, agentStream } from '../../commands/agent.ts';
import { type Mandate, mandateDecider, type SlotInput, mandateStream, type MandateState, SPEND_CODES, type SpendCode } from '../../commands/mandate.ts';
import { loadState, Rejection } from '../eventstore/handler.ts';
import { namedConsumer } from './consumers.ts';
import { type AppendGuard, GuardFailed } from '../eventstore/port.ts';
import { newId } from '../ids.ts';
import { isoText as TS } from '../postgres/iso-text.ts';
import { POLICY_ATTEMPTS, PolicyEngine } from '../policy/evaluator.ts';
import type { ApprovalExecutor } from './approval-executors.ts';
import type { Ports, RunCommand, Tenant } from './context.ts';
import { ListFilter } from './list-filter.ts';
import { payeeCurrency } from '../../commands/payee.ts';
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

/** The statuses of the spend's decline codes (src/http/kernel/errors.ts lists them; the route documents them). */
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

/** A policed call of a mandate's agent: what the policies see of it. */
export type PolicedCall = { toolName: string; toolInput: Record<string, unknown>; amountMinor: bigint; currency: string; approvedBy: string | null };

/**
 * Runs `act` under the organization's policies for the mandate's agent (none
 * when the mandate is not the tenant's: the decider answers that). The
 * policies are taken from this process's folded copy first, without a read;
 * `act` appends guarded by the policy stream's revision, so a change
 * acknowledged anywhere before the append refuses it (nothing written), and
 * the call is evaluated again on a fresh read. Policy counters consumed for a
 * call `act` then refuses are released.
 */
export async function underMandatePolicy<T>(c: SpendCtx, agentId: string | null, call: PolicedCall, act: (guard: AppendGuard | undefined) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    let release = async () => {};
    let guard: AppendGuard | undefined;
    if (agentId) {
      const outcome = await new PolicyEngine(c.ports.store, c.ports.now, c.ports.baseUrl).evaluate({ orgId: c.tenant.orgId, projectId: c.tenant.projectId, agentId, ...call }, c.run, { fromCache: attempt === 1 });
      if (outcome.decision !== 'allowed') throw policyRefusal(outcome);
      release = outcome.release;
      guard = outcome.guard;
    }
    try {
      return await act(guard);
    } catch (err) {
      await release();
      if (!(err instanceof GuardFailed)) throw err;
      if (attempt >= POLICY_ATTEMPTS) throw new Rejection('concurrency_conflict', 'the policies kept changing; retry the request', { attempts: attempt });
    }
  }
}

/**
 * A spend: the organization's policies first (tool name `mandate.spend`, the
 * mandate's agent), then the mandate's own rules.
 */
export async function spend(c: SpendCtx, mandateId: string, body: SpendInput, channel: 'api' | 'card', approvedBy: string | null = null): Promise<SpendResult> {
  const agentId = await mandateAgent(c.ports, c.tenant, mandateId);
  const toolInput = { mandate_id: mandateId, amount_minor: body.amount_minor, currency: body.currency, merchant: body.merchant, description: body.description ?? null, channel };
  return underMandatePolicy(c, agentId, { toolName: 'mandate.spend', toolInput, amountMinor: BigInt(body.amount_minor), currency: body.currency, approvedBy }, async (guard) => {
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
  });
}

/** An approved `mandate.spend` runs the held spend with its verbatim input. */
export const mandateSpendExecutor: ApprovalExecutor = async (a, ports, run) => {
  const input = a.tool_input as { mandate_id: string; amount_minor: string; currency: string; merchant: string; description: string | null; channel?: 'api' | 'card' };
  if (!a.project_id) throw new Rejection('invalid_transition', 'the held spend has no project');
  const result = await spend({ ports, run, tenant: { orgId: a.org_id, projectId: a.project_id } }, input.mandate_id, { amount_minor: input.amount_minor, currency: input.currency, merchant: input.merchant, description: input.description }, input.channel ?? 'api', a.decided_by ?? 'approval');
  return result as unknown as Record<string, unknown>;
};

// Mandates (spec 4.7): creation, reads, pause/resume/revoke, and the virtual
// card bound to one.

/** A mandate as stored in the read model (the HTTP answer's shape). */
export type MandateRow = {
  id: string;
  consumer_id: string;
  agent_id: string;
  purpose: string;
  display_name: string | null;
  intent_note: string | null;
  merchant_allowlist: string[];
  merchant_pin_kind: 'pix-key' | 'merchant-id' | 'mcc';
  cap_minor: string;
  per_tx_cap_minor: string;
  currency: string;
  status: 'active' | 'paused' | 'revoked' | 'expired';
  expires_at: string;
  created_at: string;
  slots?: { currency: string; rail: string | null; cap_minor: string; per_tx_cap_minor: string; authorized_minor: string; spent_minor: string; available_minor: string; funding_source_id: string | null }[];
};

/** What a grant needs, validated (src/http/mandates/mandates.ts checks the body's shape). */
export type CreateInput = {
  consumer_id: string;
  agent_id: string;
  purpose: string;
  display_name?: string | null | undefined;
  intent_note?: string | null | undefined;
  merchant_allowlist: string[];
  merchant_pin_kind: 'pix-key' | 'merchant-id' | 'mcc';
  cap: bigint;
  perTx: bigint;
  currency: string;
  expiresAt: string;
  /** A given id (a consent's mandate: its existence is the consent's single use); else a new one. */
  mandateId?: string | undefined;
  /** Several currency slots, the first mirroring cap/perTx/currency. */
  slots?: SlotInput[] | undefined;
  consentId?: string | undefined;
};

const DID_SAFE = /^[A-Za-z0-9._-]{1,64}$/;
const granted = (s: MandateState) => (s as Extract<MandateState, { status: 'exists' }>).m;

/** A grant: the consumer must be the organization's; the agent's state decides whether it may be granted (the decider answers). */
export async function createMandate(c: SpendCtx, b: CreateInput): Promise<Mandate> {
  await namedConsumer(c.ports, c.tenant, b.consumer_id);
  const agent = DID_SAFE.test(b.agent_id) ? (await loadState(c.ports.store, agentStream(c.tenant.orgId, b.agent_id), agentDecider)).state : { status: 'none' as const };
  const agentActive = agent.status === 'active' && agent.keys.some((k) => k.status === 'active');
  const id = b.mandateId ?? newId('mdt');
  const r = await c.run(
    mandateDecider,
    mandateStream(id),
    {
      type: 'create',
      mandateId: id,
      tenant: c.tenant,
      consumerId: b.consumer_id,
      agentId: b.agent_id,
      agentDid: agent.status === 'none' ? '' : agent.did,
      agentActive,
      purpose: b.purpose,
      displayName: b.display_name ?? null,
      intentNote: b.intent_note ?? null,
      allowlist: b.merchant_allowlist,
      pinKind: b.merchant_pin_kind,
      cap: b.cap,
      perTx: b.perTx,
      currency: b.currency,
      expiresAt: b.expiresAt,
      slots: b.slots,
      consentId: b.consentId,
    },
    { expectedRevision: 'no_stream' },
  );
  return granted(r.state);
}

/** Pause, resume or revoke; a move to the status it has writes nothing (changed: false). */
export async function moveMandate(c: SpendCtx, id: string, to: 'paused' | 'active' | 'revoked', reason: string | null): Promise<{ mandate: Mandate; changed: boolean }> {
  const r = await c.run(
    mandateDecider,
    mandateStream(id),
    { type: 'move', tenant: c.tenant, to, reason },
    {
      // The write is guarded on the status that was read: a move that lost a
      // race to another move answers transition_conflict; a spend in between retries.
      conflictCode: 'transition_conflict',
      retryIf: (first, latest) => first.status === 'exists' && latest.status === 'exists' && first.m.status === latest.m.status,
    },
  );
  return { mandate: granted(r.state), changed: r.changed };
}

const EFFECTIVE = `CASE WHEN status IN ('active', 'paused') AND expires_at <= $NOW THEN 'expired' ELSE status END`;
const columns = (nowParam: string) =>
  `id, consumer_id, agent_id, purpose, display_name, intent_note, merchant_allowlist, merchant_pin_kind, cap_minor::text, per_tx_cap_minor::text, currency,
   ${EFFECTIVE.replace('$NOW', nowParam)} AS status, ${TS('expires_at')} AS expires_at, ${TS('created_at')} AS created_at,
   coalesce((SELECT json_agg(json_build_object('currency', s.currency, 'rail', s.rail, 'cap_minor', s.cap_minor::text, 'per_tx_cap_minor', s.per_tx_cap_minor::text,
      'authorized_minor', (s.cap_minor + s.moved_in_minor - s.moved_out_minor)::text, 'spent_minor', s.spent_minor::text,
      'available_minor', (s.cap_minor + s.moved_in_minor - s.moved_out_minor - s.spent_minor)::text, 'funding_source_id', s.funding_source_id) ORDER BY s.idx)
    FROM mandate_slots s WHERE s.mandate_id = mandates.id), '[]'::json) AS slots`;

/** The tenant's mandates, newest first (status is effective: past expires_at reads expired). */
export async function listMandates(ports: Ports, tenant: Tenant, q: { consumer_id?: string | undefined; status?: MandateRow['status'] | undefined; limit: number }): Promise<MandateRow[]> {
  const f = new ListFilter(tenant, q.limit, ports.now().toISOString());
  if (q.consumer_id) f.add('consumer_id = ?', q.consumer_id);
  if (q.status) f.add(`${EFFECTIVE.replace('$NOW', '$4')} = ?`, q.status);
  const { rows } = await ports.db.query<MandateRow>(`SELECT ${columns('$4')} FROM mandates WHERE ${f.where} ORDER BY mandates.created_at DESC, id LIMIT $3`, f.params);
  return rows;
}

/** One of the tenant's mandates; another tenant's answers mandate_not_found. */
export async function readMandate(ports: Ports, tenant: Tenant, id: string): Promise<MandateRow> {
  const { rows } = await ports.db.query<MandateRow>(`SELECT ${columns('$4')} FROM mandates WHERE id = $1 AND org_id = $2 AND project_id = $3`, [id, tenant.orgId, tenant.projectId, ports.now().toISOString()]);
  if (!rows[0]) throw new Rejection('mandate_not_found', 'mandate not found');
  return rows[0];
}

export type CardRow = { card_id: string; consumer_id: string; status: string; bound_at: string };
export type CardAuthorization = { transaction_id: string; amount_minor: string; currency: string; decision: 'approved' | 'declined'; at: string };

/** The mandate's active card and its authorizations, newest first. */
export async function readMandateCard(ports: Ports, tenant: Tenant, id: string, limit: number): Promise<{ mandate_id: string; card: CardRow | null; authorizations: CardAuthorization[] }> {
  const m = await readMandate(ports, tenant, id);
  const card = await ports.db.query<CardRow>(`SELECT card_id, consumer_id, status, ${TS('bound_at')} AS bound_at FROM mandate_cards WHERE mandate_id = $1 AND status = 'active' LIMIT 1`, [m.id]);
  const auths = await ports.db.query<CardAuthorization>(
    `SELECT transaction_id, amount_minor::text, currency, decision, ${TS('at')} AS at FROM mandate_authorizations WHERE mandate_id = $1 ORDER BY position DESC LIMIT $2`,
    [m.id, limit],
  );
  return { mandate_id: m.id, card: card.rows[0] ?? null, authorizations: auths.rows };
}

/** Binds a card from the environment's issuer (the sandbox issuer for test keys; no live issuer is wired). */
export async function bindMandateCard(c: SpendCtx, environment: 'live' | 'test', id: string): Promise<{ mandate_id: string; card: CardRow; changed: boolean }> {
  if (environment === 'live') throw new Rejection('not_wired', 'no live card issuer is configured');
  const r = await c.run(mandateDecider, mandateStream(id), { type: 'bind_card', tenant: c.tenant, cardId: newId('card'), issuer: 'sandbox' }, { serialize: true });
  const m = granted(r.state);
  return { mandate_id: m.id, card: { card_id: m.card!.cardId, consumer_id: m.card!.consumerId, status: 'active', bound_at: m.card!.boundAt }, changed: r.changed };
}

export async function revokeMandateCard(c: SpendCtx, id: string): Promise<{ mandate_id: string; card_id: string; revoked: true }> {
  const r = await c.run(mandateDecider, mandateStream(id), { type: 'revoke_card', tenant: c.tenant }, { serialize: true });
  const e = r.events[0]!;
  return { mandate_id: id, card_id: e.type === 'mandate.card_revoked' ? e.data.card_id : '', revoked: true };
}

/** The sandbox card network: an authorization on an active card is a spend against its mandate (test keys only). */
export async function sandboxCardAuthorization(c: SpendCtx, environment: 'live' | 'test', cardId: string, body: SpendInput): Promise<SpendResult> {
  if (environment !== 'test') throw new Rejection('sandbox_funding_not_permitted', 'the sandbox card network takes test keys only');
  const { rows } = await c.ports.db.query<{ mandate_id: string }>(`SELECT mandate_id FROM mandate_cards WHERE card_id = $1 AND org_id = $2 AND project_id = $3 AND status = 'active'`, [cardId, c.tenant.orgId, c.tenant.projectId]);
  if (!rows[0]) throw new Rejection('card_not_found', 'no active card with this id');
  return spend(c, rows[0].mandate_id, body, 'card');
}

// Spends by payee (issue 58, the product client's `spend`): the payee's kind
// picks the currency slot (commands/payee.ts), then the spend above decides it.

export type PayeeSpendInput = { amount_minor: string; payee: string; agent_id?: string | undefined; currency?: string | undefined; description?: string | null | undefined };
export type PayeeSpendResult = SpendResult & { payee: string; rail: string | null; agent_id: string };

/** The mandate's agent and its slots in order, from the read model; undefined when not the tenant's. */
export async function mandateSlots(ports: Pick<Ports, 'db'>, tenant: Tenant, mandateId: string): Promise<{ agent_id: string; slots: { currency: string; rail: string | null }[] } | undefined> {
  const { rows } = await ports.db.query<{ agent_id: string; slots: { currency: string; rail: string | null }[] }>(
    `SELECT m.agent_id, coalesce((SELECT json_agg(json_build_object('currency', s.currency, 'rail', s.rail) ORDER BY s.idx) FROM mandate_slots s WHERE s.mandate_id = m.id), '[]') AS slots
     FROM mandates m WHERE m.id = $1 AND m.org_id = $2 AND m.project_id = $3`,
    [mandateId, tenant.orgId, tenant.projectId],
  );
  return rows[0];
}

export async function spendToPayee(c: SpendCtx, mandateId: string, body: PayeeSpendInput): Promise<PayeeSpendResult> {
  const m = await mandateSlots(c.ports, c.tenant, mandateId);
  if (!m) throw new Rejection('mandate_not_found', 'mandate not found');
  if (body.agent_id !== undefined && body.agent_id !== m.agent_id) {
    throw new Rejection('mandate_agent_mismatch', `agent_id ${body.agent_id} is not the agent this mandate authorizes; spend as its agent`, { field: 'agent_id' });
  }
  const currency = body.currency ?? payeeCurrency(m.slots, body.payee);
  if (currency === null) {
    const message = `the payee is neither a Pix key, an EVM address nor a URL, and the mandate has ${m.slots.length} currency slots: name the currency`;
    throw new Rejection('invalid_body', message, { issues: [{ path: ['currency'], code: 'required', message }] });
  }
  const r = await spend(c, mandateId, { amount_minor: body.amount_minor, currency, merchant: body.payee, description: body.description ?? null }, 'api');
  return { ...r, payee: body.payee, rail: m.slots.find((s) => s.currency === currency)?.rail ?? null, agent_id: m.agent_id };
}
