import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ExactInt } from './kernel/exact-json.ts';
import { defineRoute, type AppDeps } from './kernel/route.ts';
import { IdParam, QueryBool, Timestamp } from './kernel/schemas.ts';
import { consumerDetail, consumerWallet, createConsumer, listConsumers, updateConsumer } from '../usecases/consumers.ts';

// Consumers (titulars), their wallet view per currency: the HTTP declarations
// of src/usecases/consumers.ts.

export const Consumer = z
  .object({
    id: z.string(),
    display_name: z.string().nullable(),
    document: z.string().nullable(),
    document_source: z.string().nullable(),
    document_verified_at: Timestamp.nullable(),
    person_type: z.string().nullable(),
    tax_type: z.string().nullable(),
    status: z.enum(['unverified', 'verified']).describe('`verified` once the document was verified (`document_verified_at`); `unverified` until then.'),
    metadata: z.record(z.string(), z.unknown()),
    created_at: Timestamp,
  })
  .meta({ id: 'Consumer' });

const ConsumerDetail = Consumer.extend({ mandate_ids: z.array(z.string()), card_ids: z.array(z.string()) }).meta({ id: 'ConsumerDetail' });

const Metadata = z.record(z.string(), z.unknown()).refine((m) => JSON.stringify(m).length <= 32_768 && Object.keys(m).length <= 64, 'metadata: at most 64 keys and 32 KB');

export async function consumerRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  consumerCollectionRoutes(app, deps);
  consumerItemRoutes(app, deps);
}

/** Create a consumer, list them. */
function consumerCollectionRoutes(app: FastifyInstance, deps: AppDeps): void {
  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/consumers',
    operationId: 'createConsumer',
    summary: 'Create a consumer (a document is not accepted here)',
    tags: ['consumers'],
    auth: 'api_key',
    scope: 'consumers:write',
    body: z.strictObject({ display_name: z.string().trim().min(1).max(200).nullable().optional(), metadata: Metadata.optional() }),
    bodyOptional: true,
    responses: { 201: Consumer },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden']],
    idempotent: true,
    async handler({ auth, body, run }) {
      return { status: 201, body: await createConsumer(run, auth, { displayName: body.display_name ?? null, metadata: body.metadata ?? {} }) };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/consumers',
    operationId: 'listConsumers',
    summary: 'List the organization’s consumers of the key’s environment (from every project of it), newest first',
    tags: ['consumers'],
    auth: 'api_key',
    scope: 'consumers:read',
    query: z.object({ limit: z.coerce.number().int().min(1).max(200).default(50), verified: QueryBool.optional() }),
    responses: { 200: z.object({ consumers: z.array(Consumer) }) },
    errors: [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden']],
    async handler({ auth, query, deps }) {
      return { status: 200, body: { consumers: await listConsumers(deps, auth, query) } };
    },
  });
}

/** One consumer: read, update, and its wallet view. */
function consumerItemRoutes(app: FastifyInstance, deps: AppDeps): void {
  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/consumers/:id',
    operationId: 'getConsumer',
    summary: 'Read a consumer with the ids of its mandates and cards',
    tags: ['consumers'],
    auth: 'api_key',
    scope: 'consumers:read',
    params: z.object({ id: IdParam }),
    responses: { 200: ConsumerDetail },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler({ auth, params, deps }) {
      return { status: 200, body: await consumerDetail(deps, auth, params.id) };
    },
  });

  defineRoute(app, deps, {
    method: 'PATCH',
    url: '/v1/consumers/:id',
    operationId: 'updateConsumer',
    summary: 'Update display_name (nullable), metadata, tax_type',
    tags: ['consumers'],
    auth: 'api_key',
    scope: 'consumers:write',
    params: z.object({ id: IdParam }),
    body: z.strictObject({ display_name: z.string().trim().min(1).max(200).nullable().optional(), metadata: Metadata.optional(), tax_type: z.enum(['PJ', 'MEI', 'ME', 'PF']).optional() }),
    responses: { 200: Consumer },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    idempotent: true,
    async handler({ auth, params, body, run, deps }) {
      const change = {
        ...(body.display_name !== undefined ? { displayName: body.display_name } : {}),
        ...(body.metadata !== undefined ? { metadata: body.metadata } : {}),
        ...(body.tax_type !== undefined ? { taxType: body.tax_type } : {}),
      };
      return { status: 200, body: await updateConsumer(deps, run, auth, params.id, change) };
    },
  });

  // Sums of caps (each up to 10^15, any number of mandates) pass 2^53: exact integers of any size.
  const Money = ExactInt;
  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/consumers/:id/wallet',
    operationId: 'getConsumerWallet',
    summary: 'Per currency: authorized (caps of active and paused mandates), spent and available, with the ids of that currency’s mandates and funding sources',
    tags: ['consumers'],
    auth: 'api_key',
    scope: 'consumers:read',
    params: z.object({ id: IdParam }),
    responses: {
      200: z
        .object({
          consumer_id: z.string(),
          currencies: z.array(
            z.object({ currency: z.string(), authorized_minor: Money, spent_minor: Money, available_minor: Money, funding_source_ids: z.array(z.string()), mandate_ids: z.array(z.string()), pix_balance_minor: Money.optional(), rail: z.string().optional().meta({ description: "The rail of this currency's slots, when a consent named one" }) }),
          ),
        })
        .meta({ id: 'ConsumerWallet' }),
    },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler({ auth, params, deps }) {
      // bigint throughout: written as exact JSON integers (src/http/kernel/exact-json.ts).
      return { status: 200, body: await consumerWallet(deps, auth, params.id) };
    },
  });
}
