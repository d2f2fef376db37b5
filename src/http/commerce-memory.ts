import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
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
import { CounterpartyKind, IdentifierKind, InteractionKind, InteractionSource } from '../../events/commerce-memory.ts';
import { loadState, Rejection } from '../eventstore/handler.ts';
import type { ApiKeyAuth } from './auth.ts';
import { ApiError } from './errors.ts';
import { newId } from './ids.ts';
import { type AppDeps, type Ctx, defineRoute } from './route.ts';
import { IdParam, Instant, Timestamp, isoText as TS } from './schemas.ts';

// Commerce memory (spec 4.8): counterparties (also under the deprecated
// /v1/commerce-memory/counterparties, same shapes), their preferences, and
// interactions. Insights and negotiations: src/http/commerce-memory-insights.ts.

export { Instant };

export const Metadata = z.record(z.string(), z.unknown()).refine((m) => JSON.stringify(m).length <= 32_768 && Object.keys(m).length <= 64, 'at most 64 keys and 32 KB');
export const Currency = z.string().regex(/^[A-Z][A-Z0-9]{2,9}$/, 'an upper-case currency code (ISO 4217 or a token symbol)');
/** Amounts in minor units on the wire: JSON integers up to 10^15 (exact as JS numbers); their sums are bigint, written exactly (src/http/exact-json.ts). */
export const AmountMinor = z.int().min(0).max(1_000_000_000_000_000);
export const Limit = (def: number, max: number) => z.coerce.number().int().min(1).max(max).default(def);

export const CounterpartyView = z
  .object({
    id: z.string(),
    kind: CounterpartyKind,
    name: z.string(),
    identifier: z.string().nullable(),
    identifier_kind: IdentifierKind.nullable(),
    metadata: z.record(z.string(), z.unknown()),
    created_at: Timestamp,
    last_seen_at: Timestamp,
  })
  .meta({ id: 'Counterparty' });
type CounterpartyView = z.infer<typeof CounterpartyView>;

export const InteractionView = z
  .object({
    id: z.string(),
    counterparty_id: z.string(),
    kind: InteractionKind,
    occurred_at: Timestamp,
    source: InteractionSource,
    source_ref: z.string().nullable(),
    agent_id: z.string().nullable(),
    amount_minor: z.int().nullable(),
    currency: z.string().nullable(),
    metadata: z.record(z.string(), z.unknown()),
  })
  .meta({ id: 'Interaction' });
type InteractionView = z.infer<typeof InteractionView>;

const Preferences = z
  .object({ counterparty_id: z.string(), preferences: z.record(z.string(), z.unknown()), updated_at: Timestamp.nullable() })
  .meta({ id: 'CounterpartyPreferences' });

const bothOrNeither = (a: string, b: string) => (v: Record<string, unknown>, ctx: z.RefinementCtx) => {
  const hasA = v[a] !== undefined && v[a] !== null;
  const hasB = v[b] !== undefined && v[b] !== null;
  if (hasA !== hasB) ctx.addIssue({ code: 'custom', path: [hasA ? b : a], message: `${a} and ${b} are given together or not at all` });
};

const CounterpartyBody = z
  .object({
    kind: CounterpartyKind,
    name: z.string().trim().min(1).max(200),
    identifier: z.string().trim().min(1).max(200).nullable().optional(),
    identifier_kind: IdentifierKind.nullable().optional(),
    metadata: Metadata.optional(),
  })
  .superRefine(bothOrNeither('identifier', 'identifier_kind'));

const CounterpartyQuery = z.object({
  identifier: z.string().trim().min(1).max(200).optional(),
  identifier_kind: IdentifierKind.optional(),
  kind: CounterpartyKind.optional(),
  limit: Limit(50, 200),
});

const InteractionBody = z
  .object({
    counterparty_id: z.string().min(1).max(200),
    kind: InteractionKind,
    agent_id: z.string().min(1).max(64).nullable().optional(),
    amount_minor: AmountMinor.nullable().optional(),
    currency: Currency.nullable().optional(),
    metadata: Metadata.optional(),
    occurred_at: Instant.optional(),
    source: InteractionSource.optional(),
    source_ref: z.string().min(1).max(200).optional(),
  })
  .superRefine(bothOrNeither('amount_minor', 'currency'));

/** since (inclusive) must come before until (exclusive) when both are given. */
export const orderedWindow = (v: { since?: Date | undefined; until?: Date | undefined }, ctx: z.RefinementCtx) => {
  if (v.since && v.until && v.since >= v.until) ctx.addIssue({ code: 'custom', path: ['since'], message: 'since must be before until' });
};

const InteractionQuery = z
  .object({
    counterparty_id: z.string().min(1).max(200).optional(),
    kind: InteractionKind.optional(),
    limit: Limit(50, 200),
    since: Instant.optional(),
    until: Instant.optional(),
  })
  .superRefine(orderedWindow);

const CP_COLUMNS = `id, kind, name, identifier, identifier_kind, metadata, ${TS('created_at')} AS created_at, ${TS('last_seen_at')} AS last_seen_at`;
const IX_COLUMNS = `id, counterparty_id, kind, ${TS('occurred_at')} AS occurred_at, source, source_ref, agent_id, amount_minor::text AS amount_minor, currency, metadata`;

export async function readCounterparty(deps: AppDeps, auth: ApiKeyAuth, id: string): Promise<CounterpartyView | undefined> {
  const { rows } = await deps.db.query<CounterpartyView>(`SELECT ${CP_COLUMNS} FROM counterparties WHERE id = $1 AND org_id = $2 AND project_id = $3`, [id, auth.orgId, auth.projectId]);
  return rows[0];
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

/** The counterparty a body names, if it is this project's; else 404 counterparty_not_found. */
export async function requireCounterparty(deps: AppDeps, auth: ApiKeyAuth, id: string): Promise<Counterparty> {
  const { state } = await loadState(deps.store, counterpartyStream(id), counterpartyDecider);
  try {
    return ownCounterparty(state, auth);
  } catch {
    throw new ApiError(404, 'counterparty_not_found', 'counterparty not found', { field: 'counterparty_id' });
  }
}

type AnyCtx = Ctx<unknown, unknown, unknown, ApiKeyAuth>;

/**
 * Create, or merge into the counterparty holding the same identifier in this
 * project. The identifier is claimed first in its own stream (the first claim
 * wins, later ones read the winner), then the counterparty stream is created or
 * merged: two racing creates of one identifier end in one counterparty.
 */
async function registerCounterparty(ctx: AnyCtx, b: z.infer<typeof CounterpartyBody>): Promise<CounterpartyView> {
  const auth = ctx.auth;
  let id = newId('cp');
  let identifier: string | null = null;
  const identifierKind = b.identifier_kind ?? null;
  if (b.identifier && identifierKind) {
    identifier = normalizeIdentifier(identifierKind, b.identifier);
    if (identifier === '') throw new ApiError(400, 'invalid_body', 'the identifier is empty once normalized', { issues: [{ path: ['identifier'], code: 'custom', message: 'empty identifier' }] });
    const claim = await ctx.run(identifierClaimDecider, identifierClaimStream(auth.projectId, identifierKind, identifier), {
      type: 'claim',
      counterpartyId: id,
      projectId: auth.projectId,
      identifierKind,
      identifierHash: identifierHash(auth.projectId, identifierKind, identifier),
    });
    if (claim.state.status !== 'claimed') throw new Error('identifier claim missing after claiming');
    id = claim.state.id;
  }
  const r = await ctx.run(counterpartyDecider, counterpartyStream(id), { type: 'register', counterpartyId: id, tenant: auth, kind: b.kind, name: b.name, identifier, identifierKind, metadata: b.metadata ?? {} });
  const state = r.state as Extract<CounterpartyState, { status: 'exists' }>;
  // The read model holds last_seen_at as interactions bumped it too.
  return (await readCounterparty(ctx.deps, auth, id)) ?? counterpartyView(state.c);
}

async function listCounterparties(deps: AppDeps, auth: ApiKeyAuth, q: z.infer<typeof CounterpartyQuery>): Promise<CounterpartyView[]> {
  const params: unknown[] = [auth.orgId, auth.projectId, q.limit];
  let where = 'org_id = $1 AND project_id = $2';
  if (q.identifier !== undefined) {
    params.push(q.identifier_kind ? normalizeIdentifier(q.identifier_kind, q.identifier) : q.identifier);
    where += ` AND identifier = $${params.length}`;
  }
  if (q.identifier_kind) {
    params.push(q.identifier_kind);
    where += ` AND identifier_kind = $${params.length}`;
  }
  if (q.kind) {
    params.push(q.kind);
    where += ` AND kind = $${params.length}`;
  }
  const { rows } = await deps.db.query<CounterpartyView>(`SELECT ${CP_COLUMNS} FROM counterparties WHERE ${where} ORDER BY last_seen_at DESC, id LIMIT $3`, params);
  return rows;
}

export async function commerceMemoryRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  // The same three operations at the current and the deprecated address, with the same shapes.
  for (const [base, deprecated, suffix] of [
    ['/v1/counterparties', false, ''],
    ['/v1/commerce-memory/counterparties', true, 'Deprecated'],
  ] as const) {
    const note = deprecated ? ' (deprecated: use /v1/counterparties)' : '';
    defineRoute(app, deps, {
      method: 'POST',
      url: base,
      operationId: `createCounterparty${suffix}`,
      summary: `Create a counterparty, or merge into the one with the same identifier in this project (merge takes name, shallow-merges metadata, bumps last_seen_at)${note}`,
      tags: ['commerce-memory'],
      auth: 'api_key',
      scope: 'commerce_memory:write',
      deprecated,
      body: CounterpartyBody,
      responses: { 201: CounterpartyView },
      errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden']],
      idempotent: true,
      async handler(ctx) {
        return { status: 201, body: await registerCounterparty(ctx as unknown as AnyCtx, ctx.body) };
      },
    });

    defineRoute(app, deps, {
      method: 'GET',
      url: base,
      operationId: `listCounterparties${suffix}`,
      summary: `List counterparties, most recently seen first${note}`,
      tags: ['commerce-memory'],
      auth: 'api_key',
      scope: 'commerce_memory:read',
      deprecated,
      query: CounterpartyQuery,
      responses: { 200: z.object({ counterparties: z.array(CounterpartyView) }) },
      errors: [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden']],
      async handler({ auth, query, deps }) {
        return { status: 200, body: { counterparties: await listCounterparties(deps, auth, query) } };
      },
    });

    defineRoute(app, deps, {
      method: 'GET',
      url: `${base}/:id`,
      operationId: `getCounterparty${suffix}`,
      summary: `Read a counterparty (another project's is absent)${note}`,
      tags: ['commerce-memory'],
      auth: 'api_key',
      scope: 'commerce_memory:read',
      deprecated,
      params: z.object({ id: IdParam }),
      responses: { 200: CounterpartyView },
      errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
      async handler({ auth, params, deps }) {
        const c = await readCounterparty(deps, auth, params.id);
        if (!c) throw new ApiError(404, 'not_found', 'counterparty not found');
        return { status: 200, body: c };
      },
    });
  }

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/counterparties/:id/preferences',
    operationId: 'getCounterpartyPreferences',
    summary: "The agent's stated preferences for dealing with a counterparty ({} and updated_at null until set)",
    tags: ['commerce-memory'],
    auth: 'api_key',
    scope: 'commerce_memory:read',
    params: z.object({ id: IdParam }),
    responses: { 200: Preferences },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler({ auth, params, deps }) {
      const { rows } = await deps.db.query<z.infer<typeof Preferences>>(
        `SELECT id AS counterparty_id, preferences, ${TS('preferences_updated_at')} AS updated_at FROM counterparties WHERE id = $1 AND org_id = $2 AND project_id = $3`,
        [params.id, auth.orgId, auth.projectId],
      );
      if (!rows[0]) throw new ApiError(404, 'not_found', 'counterparty not found');
      return { status: 200, body: rows[0] };
    },
  });

  defineRoute(app, deps, {
    method: 'PUT',
    url: '/v1/counterparties/:id/preferences',
    operationId: 'setCounterpartyPreferences',
    summary: 'Replace the preferences of a counterparty (a JSON object: at most 64 keys and 32 KB)',
    tags: ['commerce-memory'],
    auth: 'api_key',
    scope: 'commerce_memory:write',
    params: z.object({ id: IdParam }),
    body: z.strictObject({ preferences: Metadata }),
    responses: { 200: Preferences },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    idempotent: true,
    async handler({ auth, params, body, run }) {
      try {
        const r = await run(counterpartyDecider, counterpartyStream(params.id), { type: 'set_preferences', tenant: auth, preferences: body.preferences });
        const c = (r.state as Extract<CounterpartyState, { status: 'exists' }>).c;
        return { status: 200, body: { counterparty_id: c.id, preferences: c.preferences, updated_at: c.preferencesUpdatedAt } };
      } catch (err) {
        if (err instanceof Rejection && err.code === 'counterparty_not_found') throw new ApiError(404, 'not_found', 'counterparty not found');
        throw err;
      }
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/commerce-memory/interactions',
    operationId: 'recordInteraction',
    summary: 'Record an interaction (bumps the counterparty last_seen_at); a (source, source_ref) pair already recorded in this project answers 200 {idempotent: true, interaction}',
    tags: ['commerce-memory'],
    auth: 'api_key',
    scope: 'commerce_memory:write',
    body: InteractionBody,
    responses: { 201: InteractionView, 200: z.object({ idempotent: z.literal(true), interaction: InteractionView }) },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'counterparty_not_found'], [500, 'idempotent_lookup_failed']],
    idempotent: true,
    async handler({ auth, body, run, deps }) {
      const cp = await requireCounterparty(deps, auth, body.counterparty_id);
      const source = body.source ?? 'manual';
      const sourceRef = body.source_ref ?? null;
      let id = newId('ixn');
      if (sourceRef !== null) {
        // The pair is claimed in its own stream: the first claim names the interaction, every later post reads it.
        const claim = await run(sourceRefClaimDecider, sourceRefClaimStream(auth.projectId, source, sourceRef), {
          type: 'claim',
          interactionId: id,
          projectId: auth.projectId,
          source,
          sourceRefHash: sourceRefHash(auth.projectId, source, sourceRef),
        });
        if (claim.state.status !== 'claimed') throw new ApiError(500, 'idempotent_lookup_failed', 'the idempotency claim could not be read; nothing was written, retry');
        id = claim.state.id;
      }
      const r = await run(interactionDecider, interactionStream(id), {
        type: 'record',
        interaction: {
          interaction_id: id,
          org_id: auth.orgId,
          project_id: auth.projectId,
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
      if (state.status !== 'exists') throw new ApiError(500, 'idempotent_lookup_failed', 'the interaction could not be read; retry');
      if (r.changed) return { status: 201, body: interactionView(state.i) };
      // Recorded by an earlier (or racing) post: make sure it is visible before answering.
      await deps.readSide.waitFor(await deps.store.headPosition(), deps.readWaitMs);
      return { status: 200, body: { idempotent: true as const, interaction: interactionView(state.i) } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/commerce-memory/interactions',
    operationId: 'listInteractions',
    summary: 'List interactions, newest first; since is inclusive and until exclusive, both on occurred_at',
    tags: ['commerce-memory'],
    auth: 'api_key',
    scope: 'commerce_memory:read',
    query: InteractionQuery,
    responses: { 200: z.object({ interactions: z.array(InteractionView) }) },
    errors: [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden']],
    async handler({ auth, query, deps }) {
      const params: unknown[] = [auth.orgId, auth.projectId, query.limit];
      let where = 'org_id = $1 AND project_id = $2';
      const add = (sql: string, v: unknown) => {
        params.push(v);
        where += ` AND ${sql.replace('?', `$${params.length}`)}`;
      };
      if (query.counterparty_id) add('counterparty_id = ?', query.counterparty_id);
      if (query.kind) add('kind = ?', query.kind);
      if (query.since) add('occurred_at >= ?', query.since.toISOString());
      if (query.until) add('occurred_at < ?', query.until.toISOString());
      const { rows } = await deps.db.query<Omit<InteractionView, 'amount_minor'> & { amount_minor: string | null }>(
        `SELECT ${IX_COLUMNS} FROM interactions WHERE ${where} ORDER BY occurred_at DESC, id DESC LIMIT $3`,
        params,
      );
      return { status: 200, body: { interactions: rows.map(interactionRow) } };
    },
  });
}
