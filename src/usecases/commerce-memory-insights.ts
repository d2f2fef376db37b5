import { type Negotiation, negotiationDecider, type NegotiationState, negotiationStream, discountBps } from '../../commands/commerce-memory.ts';
import type { z } from 'zod';
import type { CounterpartyKind, NegotiationOutcome } from '../../events/commerce-memory.ts';
import { counterpartySummary, negotiationStats, topCounterparties, type Window } from '../../projections/commerce-memory-insights.ts';
import { Rejection } from '../eventstore/handler.ts';
import { newId } from '../ids.ts';
import { isoText as TS } from '../postgres/iso-text.ts';
import type { Ports, RunCommand, Tenant } from './context.ts';
import { ListFilter } from './list-filter.ts';
import { requireCounterparty } from './commerce-memory.ts';

// Commerce memory insights (spec 4.8), answered from the bucket read models
// (projections/commerce-memory-insights.ts), and the negotiations resource
// they count (negotiation-stats).

type Kind = z.infer<typeof CounterpartyKind>;
type Outcome = z.infer<typeof NegotiationOutcome>;

export const insightSummary = (ports: Pick<Ports, 'db'>, tenant: Tenant, q: { kind?: Kind | undefined; limit: number }, w: Window) =>
  counterpartySummary(ports.db, { orgId: tenant.orgId, projectId: tenant.projectId, kind: q.kind, limit: q.limit }, w);
export const insightTopCounterparties = (ports: Pick<Ports, 'db'>, tenant: Tenant, q: { kind?: Kind | undefined; limit: number }, w: Window) =>
  topCounterparties(ports.db, { orgId: tenant.orgId, projectId: tenant.projectId, kind: q.kind, limit: q.limit }, w);
export const insightNegotiationStats = (ports: Pick<Ports, 'db'>, tenant: Tenant, itemRef: string | undefined, w: Window) =>
  negotiationStats(ports.db, { orgId: tenant.orgId, projectId: tenant.projectId, itemRef }, w);

export type NegotiationView = {
  id: string;
  counterparty_id: string;
  item_ref: string;
  outcome: Outcome;
  currency: string | null;
  list_price_minor: number | null;
  final_price_minor: number | null;
  discount_bps: number | null;
  started_at: string;
  ended_at: string | null;
  metadata: Record<string, unknown>;
  created_at: string;
};

const NG_COLUMNS = `id, counterparty_id, item_ref, outcome, currency, list_price_minor::text AS list_price_minor, final_price_minor::text AS final_price_minor, discount_bps::text AS discount_bps,
  ${TS('started_at')} AS started_at, ${TS('ended_at')} AS ended_at, metadata, ${TS('created_at')} AS created_at`;
type NegotiationRow = Omit<NegotiationView, 'list_price_minor' | 'final_price_minor' | 'discount_bps'> & { list_price_minor: string | null; final_price_minor: string | null; discount_bps: string | null };
const num = (v: string | null) => (v === null ? null : Number(v));
const negotiationRow = (r: NegotiationRow): NegotiationView => ({ ...r, list_price_minor: num(r.list_price_minor), final_price_minor: num(r.final_price_minor), discount_bps: num(r.discount_bps) });

function negotiationView(n: Negotiation): NegotiationView {
  const d = discountBps(n.list_price_minor === null ? null : BigInt(n.list_price_minor), n.final_price_minor === null ? null : BigInt(n.final_price_minor));
  return {
    id: n.negotiation_id,
    counterparty_id: n.counterparty_id,
    item_ref: n.item_ref,
    outcome: n.outcome,
    currency: n.currency,
    list_price_minor: num(n.list_price_minor),
    final_price_minor: num(n.final_price_minor),
    discount_bps: d === null ? null : Number(d),
    started_at: new Date(n.started_at).toISOString(),
    ended_at: n.ended_at === null ? null : new Date(n.ended_at).toISOString(),
    metadata: n.metadata,
    created_at: n.created_at,
  };
}

export type NegotiationInput = {
  counterparty_id: string;
  item_ref: string;
  outcome: Outcome;
  currency?: string | null | undefined;
  list_price_minor?: number | null | undefined;
  final_price_minor?: number | null | undefined;
  started_at?: Date | undefined;
  ended_at?: Date | null | undefined;
  metadata?: Record<string, unknown> | undefined;
};

/** Record a negotiation with one of the project's counterparties. */
export async function recordNegotiation(ports: Pick<Ports, 'store'>, run: RunCommand, tenant: Tenant, body: NegotiationInput): Promise<NegotiationView> {
  const cp = await requireCounterparty(ports, tenant, body.counterparty_id);
  const id = newId('neg');
  const negotiation = {
    negotiation_id: id,
    org_id: tenant.orgId,
    project_id: tenant.projectId,
    counterparty_id: cp.id,
    item_ref: body.item_ref,
    outcome: body.outcome,
    currency: body.currency ?? null,
    list_price_minor: body.list_price_minor == null ? null : String(body.list_price_minor),
    final_price_minor: body.final_price_minor == null ? null : String(body.final_price_minor),
    started_at: body.started_at ? body.started_at.toISOString() : null,
    ended_at: body.ended_at ? body.ended_at.toISOString() : null,
    metadata: body.metadata ?? {},
  };
  const r = await run(negotiationDecider, negotiationStream(id), { type: 'record', negotiation }, { expectedRevision: 'no_stream' });
  return negotiationView((r.state as Extract<NegotiationState, { status: 'exists' }>).n);
}

/** The project's negotiations, newest started first; since inclusive, until exclusive. */
export async function listNegotiations(
  ports: Pick<Ports, 'db'>,
  tenant: Tenant,
  q: { counterparty_id?: string | undefined; item_ref?: string | undefined; outcome?: Outcome | undefined; limit: number; since?: Date | undefined; until?: Date | undefined },
): Promise<NegotiationView[]> {
  const f = new ListFilter(tenant, q.limit);
  if (q.counterparty_id) f.add('counterparty_id = ?', q.counterparty_id);
  if (q.item_ref) f.add('item_ref = ?', q.item_ref);
  if (q.outcome) f.add('outcome = ?', q.outcome);
  if (q.since) f.add('started_at >= ?', q.since.toISOString());
  if (q.until) f.add('started_at < ?', q.until.toISOString());
  const { rows } = await ports.db.query<NegotiationRow>(`SELECT ${NG_COLUMNS} FROM negotiations WHERE ${f.where} ORDER BY negotiations.started_at DESC, id DESC LIMIT $3`, f.params);
  return rows.map(negotiationRow);
}

/** A negotiation of the project (another project's is absent). */
export async function getNegotiation(ports: Pick<Ports, 'db'>, tenant: Tenant, id: string): Promise<NegotiationView> {
  const { rows } = await ports.db.query<NegotiationRow>(`SELECT ${NG_COLUMNS} FROM negotiations WHERE id = $1 AND org_id = $2 AND project_id = $3`, [id, tenant.orgId, tenant.projectId]);
  if (!rows[0]) throw new Rejection('not_found', 'negotiation not found');
  return negotiationRow(rows[0]);
}
