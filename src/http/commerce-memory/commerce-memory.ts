import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { IdentifierKind } from '../../../events/commerce-memory.ts';
import { type AppDeps, defineRoute } from '../kernel/route.ts';
import { IdParam } from '../kernel/schemas.ts';
import { AmountMinor, bothOrNeither, CounterpartyKindField, CounterpartyView, Currency, Instant, InteractionKindField, InteractionSourceField, InteractionView, Limit, Metadata, orderedWindow, Preferences } from './commerce-memory-schemas.ts';
import { getCounterparty, getPreferences, listCounterparties, listInteractions, recordInteraction, registerCounterparty, setPreferences } from '../../usecases/commerce-memory.ts';

// Commerce memory (spec 4.8): counterparties (also under the deprecated
// /v1/commerce-memory/counterparties, same shapes), their preferences, and
// interactions; the use cases are src/usecases/commerce-memory.ts. Insights
// and negotiations: src/http/commerce-memory/commerce-memory-insights.ts.

const CounterpartyBody = z
  .object({
    kind: CounterpartyKindField,
    name: z.string().trim().min(1).max(200),
    identifier: z.string().trim().min(1).max(200).nullable().optional(),
    identifier_kind: IdentifierKind.nullable().optional(),
    metadata: Metadata.optional(),
  })
  .superRefine(bothOrNeither('identifier', 'identifier_kind'));

const CounterpartyQuery = z.object({
  identifier: z.string().trim().min(1).max(200).optional(),
  identifier_kind: IdentifierKind.optional(),
  kind: CounterpartyKindField.optional(),
  limit: Limit(50, 200),
});

const InteractionBody = z
  .object({
    counterparty_id: z.string().min(1).max(200),
    kind: InteractionKindField,
    agent_id: z.string().min(1).max(64).nullable().optional(),
    amount_minor: AmountMinor.nullable().optional(),
    currency: Currency.nullable().optional(),
    metadata: Metadata.optional(),
    occurred_at: Instant.optional(),
    source: InteractionSourceField.optional(),
    source_ref: z.string().min(1).max(200).optional(),
  })
  .superRefine(bothOrNeither('amount_minor', 'currency'));

const InteractionQuery = z
  .object({
    counterparty_id: z.string().min(1).max(200).optional(),
    kind: InteractionKindField.optional(),
    limit: Limit(50, 200),
    since: Instant.optional(),
    until: Instant.optional(),
  })
  .superRefine(orderedWindow);

export async function commerceMemoryRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  // The same three operations at the current and the deprecated address, with the same shapes.
  counterpartyRoutes(app, deps, '/v1/counterparties', false, '');
  counterpartyRoutes(app, deps, '/v1/commerce-memory/counterparties', true, 'Deprecated');
  preferenceRoutes(app, deps);
  interactionRoutes(app, deps);
}

/** Create, list and read counterparties under one base path. */
function counterpartyRoutes(app: FastifyInstance, deps: AppDeps, base: string, deprecated: boolean, suffix: string): void {
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
    async handler({ auth, body, run, deps }) {
      return { status: 201, body: await registerCounterparty(deps, run, auth, body) };
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
      return { status: 200, body: await getCounterparty(deps, auth, params.id) };
    },
  });
}

/** A counterparty's preferences, read and replaced. */
function preferenceRoutes(app: FastifyInstance, deps: AppDeps): void {
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
      return { status: 200, body: await getPreferences(deps, auth, params.id) };
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
      return { status: 200, body: await setPreferences(run, auth, params.id, body.preferences) };
    },
  });
}

/** Interactions, recorded and listed. */
function interactionRoutes(app: FastifyInstance, deps: AppDeps): void {
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
      const r = await recordInteraction(deps, run, auth, body);
      return r.created ? { status: 201, body: r.interaction } : { status: 200, body: { idempotent: true as const, interaction: r.interaction } };
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
      return { status: 200, body: { interactions: await listInteractions(deps, auth, query) } };
    },
  });
}
