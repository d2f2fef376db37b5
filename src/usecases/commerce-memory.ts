import {
  type Counterparty,
  counterpartyDecider,
  type CounterpartyState,
  counterpartyStream,
  identifierClaimDecider,
  identifierClaimStream,
  identifierHash,
  type Interaction,
  interactionDecider,
  type InteractionState,
  interactionStream,
  normalizeIdentifier,
  ownCounterparty,
  sourceRefClaimDecider,
  sourceRefClaimStream,
  sourceRefHash,
} from '../../commands/commerce-memory.ts';
import type { z } from 'zod';
import type { CounterpartyKind, IdentifierKind, InteractionKind, InteractionSource } from '../../events/commerce-memory.ts';
import { loadState, Rejection } from '../eventstore/handler.ts';
import { newId } from '../ids.ts';
import { isoText as TS } from '../postgres/iso-text.ts';
import type { Ports, RunCommand, Tenant } from './context.ts';
import { ListFilter } from './list-filter.ts';

// Commerce memory (spec 4.8): counterparties, their preferences, and
// interactions. The HTTP declarations are src/http/commerce-memory/commerce-memory.ts.

export type CounterpartyView = {
  id: string;
  kind: z.infer<typeof CounterpartyKind>;
  name: string;
  identifier: string | null;
  identifier_kind: z.infer<typeof IdentifierKind> | null;
  metadata: Record<string, unknown>;
  created_at: string;
  last_seen_at: string;
};

export type InteractionView = {
  id: string;
  counterparty_id: string;
  kind: z.infer<typeof InteractionKind>;
  occurred_at: string;
  source: z.infer<typeof InteractionSource>;
  source_ref: string | null;
  agent_id: string | null;
  amount_minor: number | null;
  currency: string | null;
  metadata: Record<string, unknown>;
};

export type PreferencesView = { counterparty_id: string; preferences: Record<string, unknown>; updated_at: string | null };

const CP_COLUMNS = `id, kind, name, identifier, identifier_kind, metadata, ${TS('created_at')} AS created_at, ${TS('last_seen_at')} AS last_seen_at`;
const IX_COLUMNS = `id, counterparty_id, kind, ${TS('occurred_at')} AS occurred_at, source, source_ref, agent_id, amount_minor::text AS amount_minor, currency, metadata`;

const counterpartyNotFound = () => new Rejection('not_found', 'counterparty not found');

export async function readCounterparty(ports: Pick<Ports, 'db'>, tenant: Tenant, id: string): Promise<CounterpartyView | undefined> {
  const { rows } = await ports.db.query<CounterpartyView>(`SELECT ${CP_COLUMNS} FROM counterparties WHERE id = $1 AND org_id = $2 AND project_id = $3`, [id, tenant.orgId, tenant.projectId]);
  return rows[0];
}

/** A counterparty of this project, or not_found. */
export async function getCounterparty(ports: Pick<Ports, 'db'>, tenant: Tenant, id: string): Promise<CounterpartyView> {
  const c = await readCounterparty(ports, tenant, id);
  if (!c) throw counterpartyNotFound();
  return c;
}

function counterpartyView(c: Counterparty): CounterpartyView {
  return { id: c.id, kind: c.kind, name: c.name, identifier: c.identifier, identifier_kind: c.identifierKind, metadata: c.metadata, created_at: c.createdAt, last_seen_at: c.lastSeenAt };
}

const interactionRow = (r: Omit<InteractionView, 'amount_minor'> & { amount_minor: string | null }): InteractionView => ({ ...r, amount_minor: r.amount_minor === null ? null : Number(r.amount_minor) });

function interactionView(i: Interaction): InteractionView {
  return {
    id: i.interaction_id,
    counterparty_id: i.counterparty_id,
    kind: i.kind,
    occurred_at: new Date(i.occurred_at).toISOString(),
    source: i.source,
    source_ref: i.source_ref,
    agent_id: i.agent_id,
    amount_minor: i.amount_minor === null ? null : Number(i.amount_minor),
    currency: i.currency,
    metadata: i.metadata,
  };
}

/** The counterparty a body names, if it is this project's; else counterparty_not_found (404). */
export async function requireCounterparty(ports: Pick<Ports, 'store'>, tenant: Tenant, id: string): Promise<Counterparty> {
  const { state } = await loadState(ports.store, counterpartyStream(id), counterpartyDecider);
  try {
    return ownCounterparty(state, tenant);
  } catch {
    throw new Rejection('counterparty_not_found', 'counterparty not found', { field: 'counterparty_id' });
  }
}

export type NewCounterparty = {
  kind: z.infer<typeof CounterpartyKind>;
  name: string;
  identifier?: string | null | undefined;
  identifier_kind?: z.infer<typeof IdentifierKind> | null | undefined;
  metadata?: Record<string, unknown> | undefined;
};

/**
 * Create, or merge into the counterparty holding the same identifier in this
 * project. The identifier is claimed first in its own stream (the first claim
 * wins, later ones read the winner), then the counterparty stream is created or
 * merged: two racing creates of one identifier end in one counterparty.
 */
export async function registerCounterparty(ports: Pick<Ports, 'db'>, run: RunCommand, tenant: Tenant, b: NewCounterparty): Promise<CounterpartyView> {
  let id = newId('cp');
  let identifier: string | null = null;
  const identifierKind = b.identifier_kind ?? null;
  if (b.identifier && identifierKind) {
    identifier = normalizeIdentifier(identifierKind, b.identifier);
    if (identifier === '') throw new Rejection('invalid_body', 'the identifier is empty once normalized', { issues: [{ path: ['identifier'], code: 'custom', message: 'empty identifier' }] });
    const claim = await run(identifierClaimDecider, identifierClaimStream(tenant.projectId, identifierKind, identifier), {
      type: 'claim',
      counterpartyId: id,
      projectId: tenant.projectId,
      identifierKind,
      identifierHash: identifierHash(tenant.projectId, identifierKind, identifier),
    });
    if (claim.state.status !== 'claimed') throw new Error('identifier claim missing after claiming');
    id = claim.state.id;
  }
  const r = await run(counterpartyDecider, counterpartyStream(id), { type: 'register', counterpartyId: id, tenant, kind: b.kind, name: b.name, identifier, identifierKind, metadata: b.metadata ?? {} });
  const state = r.state as Extract<CounterpartyState, { status: 'exists' }>;
  // The read model holds last_seen_at as interactions bumped it too.
  return (await readCounterparty(ports, tenant, id)) ?? counterpartyView(state.c);
}

export type CounterpartyFilter = { identifier?: string | undefined; identifier_kind?: z.infer<typeof IdentifierKind> | undefined; kind?: z.infer<typeof CounterpartyKind> | undefined; limit: number };

export async function listCounterparties(ports: Pick<Ports, 'db'>, tenant: Tenant, q: CounterpartyFilter): Promise<CounterpartyView[]> {
  const f = new ListFilter(tenant, q.limit);
  if (q.identifier !== undefined) f.add('identifier = ?', q.identifier_kind ? normalizeIdentifier(q.identifier_kind, q.identifier) : q.identifier);
  if (q.identifier_kind) f.add('identifier_kind = ?', q.identifier_kind);
  if (q.kind) f.add('kind = ?', q.kind);
  const { rows } = await ports.db.query<CounterpartyView>(`SELECT ${CP_COLUMNS} FROM counterparties WHERE ${f.where} ORDER BY counterparties.last_seen_at DESC, id LIMIT $3`, f.params);
  return rows;
}

export async function getPreferences(ports: Pick<Ports, 'db'>, tenant: Tenant, id: string): Promise<PreferencesView> {
  const { rows } = await ports.db.query<PreferencesView>(
    `SELECT id AS counterparty_id, preferences, ${TS('preferences_updated_at')} AS updated_at FROM counterparties WHERE id = $1 AND org_id = $2 AND project_id = $3`,
    [id, tenant.orgId, tenant.projectId],
  );
  if (!rows[0]) throw counterpartyNotFound();
  return rows[0];
}

export async function setPreferences(run: RunCommand, tenant: Tenant, id: string, preferences: Record<string, unknown>): Promise<PreferencesView> {
  try {
    const r = await run(counterpartyDecider, counterpartyStream(id), { type: 'set_preferences', tenant, preferences });
    const c = (r.state as Extract<CounterpartyState, { status: 'exists' }>).c;
    return { counterparty_id: c.id, preferences: c.preferences, updated_at: c.preferencesUpdatedAt };
  } catch (err) {
    if (err instanceof Rejection && err.code === 'counterparty_not_found') throw counterpartyNotFound();
    throw err;
  }
}

export type NewInteraction = {
  counterparty_id: string;
  kind: z.infer<typeof InteractionKind>;
  agent_id?: string | null | undefined;
  amount_minor?: number | null | undefined;
  currency?: string | null | undefined;
  metadata?: Record<string, unknown> | undefined;
  occurred_at?: Date | undefined;
  source?: z.infer<typeof InteractionSource> | undefined;
  source_ref?: string | undefined;
};

/** Records an interaction; `created` false when the (source, source_ref) pair was already recorded (then visible before answering). */
export async function recordInteraction(ports: Pick<Ports, 'store' | 'readSide' | 'readWaitMs'>, run: RunCommand, tenant: Tenant, body: NewInteraction): Promise<{ created: boolean; interaction: InteractionView }> {
  const cp = await requireCounterparty(ports, tenant, body.counterparty_id);
  const source = body.source ?? 'manual';
  const sourceRef = body.source_ref ?? null;
  let id = newId('ixn');
  if (sourceRef !== null) {
    // The pair is claimed in its own stream: the first claim names the interaction, every later post reads it.
    const claim = await run(sourceRefClaimDecider, sourceRefClaimStream(tenant.projectId, source, sourceRef), {
      type: 'claim',
      interactionId: id,
      projectId: tenant.projectId,
      source,
      sourceRefHash: sourceRefHash(tenant.projectId, source, sourceRef),
    });
    if (claim.state.status !== 'claimed') throw new Rejection('idempotent_lookup_failed', 'the idempotency claim could not be read; nothing was written, retry');
    id = claim.state.id;
  }
  const r = await run(interactionDecider, interactionStream(id), {
    type: 'record',
    interaction: {
      interaction_id: id,
      org_id: tenant.orgId,
      project_id: tenant.projectId,
      counterparty_id: cp.id,
      counterparty_kind: cp.kind,
      kind: body.kind,
      occurred_at: body.occurred_at ? body.occurred_at.toISOString() : null,
      source,
      source_ref: sourceRef,
      agent_id: body.agent_id ?? null,
      amount_minor: body.amount_minor === undefined || body.amount_minor === null ? null : String(body.amount_minor),
      currency: body.currency ?? null,
      metadata: body.metadata ?? {},
    },
  });
  const state = r.state as InteractionState;
  if (state.status !== 'exists') throw new Rejection('idempotent_lookup_failed', 'the interaction could not be read; retry');
  if (r.changed) return { created: true, interaction: interactionView(state.i) };
  // Recorded by an earlier (or racing) post: make sure it is visible before answering.
  await ports.readSide.waitFor(await ports.store.headPosition(), ports.readWaitMs);
  return { created: false, interaction: interactionView(state.i) };
}

export type InteractionFilter = { counterparty_id?: string | undefined; kind?: z.infer<typeof InteractionKind> | undefined; limit: number; since?: Date | undefined; until?: Date | undefined };

/** Interactions, newest first; since inclusive, until exclusive, both on occurred_at. */
export async function listInteractions(ports: Pick<Ports, 'db'>, tenant: Tenant, q: InteractionFilter): Promise<InteractionView[]> {
  const f = new ListFilter(tenant, q.limit);
  if (q.counterparty_id) f.add('counterparty_id = ?', q.counterparty_id);
  if (q.kind) f.add('kind = ?', q.kind);
  if (q.since) f.add('occurred_at >= ?', q.since.toISOString());
  if (q.until) f.add('occurred_at < ?', q.until.toISOString());
  const { rows } = await ports.db.query<Omit<InteractionView, 'amount_minor'> & { amount_minor: string | null }>(`SELECT ${IX_COLUMNS} FROM interactions WHERE ${f.where} ORDER BY interactions.occurred_at DESC, id DESC LIMIT $3`, f.params);
  return rows.map(interactionRow);
}
