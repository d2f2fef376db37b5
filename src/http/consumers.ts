import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { type ConsumerState, consumerDecider, consumerStream } from '../../commands/consumer.ts';
import { ApiError } from './errors.ts';
import { ExactInt } from './exact-json.ts';
import { newId } from './ids.ts';
import { defineRoute, type AppDeps } from './route.ts';
import { IdParam, QueryBool, Timestamp, isoText as TS } from './schemas.ts';
import type { ApiKeyAuth } from './auth.ts';
import { pixWallets } from './pix-wallet.ts';
import { walletRows, type WalletFundingSource, type WalletRow } from '../../projections/consumer.ts';

// Consumers (titulars), their wallet view per currency. A consumer belongs to
// the organization: every project of it reads, lists and updates it; what hangs
// off it (mandates, cards, consents) stays with the project that made it, so
// the id lists and the wallet show the calling project's records only.

export const Consumer = z
  .object({
    id: z.string(),
    display_name: z.string().nullable(),
    document: z.string().nullable(),
    document_source: z.string().nullable(),
    document_verified_at: Timestamp.nullable(),
    person_type: z.string().nullable(),
    tax_type: z.string().nullable(),
    status: z.enum(['unverified', 'verified']),
    metadata: z.record(z.string(), z.unknown()),
    created_at: Timestamp,
  })
  .meta({ id: 'Consumer' });
type ConsumerView = z.infer<typeof Consumer>;

const ConsumerDetail = Consumer.extend({ mandate_ids: z.array(z.string()), card_ids: z.array(z.string()) }).meta({ id: 'ConsumerDetail' });

const Metadata = z.record(z.string(), z.unknown()).refine((m) => JSON.stringify(m).length <= 32_768 && Object.keys(m).length <= 64, 'metadata: at most 64 keys and 32 KB');

const COLUMNS = `id, display_name, document, document_source, ${TS('document_verified_at')} AS document_verified_at, person_type, tax_type, status, metadata, ${TS('created_at')} AS created_at`;

export async function readConsumer(deps: AppDeps, auth: ApiKeyAuth, id: string): Promise<ConsumerView | undefined> {
  const { rows } = await deps.db.query<ConsumerView>(`SELECT ${COLUMNS} FROM consumers WHERE id = $1 AND org_id = $2`, [id, auth.orgId]);
  return rows[0];
}

function view(s: Extract<ConsumerState, { status: 'unverified' }>): ConsumerView {
  return { id: s.id, display_name: s.displayName, document: null, document_source: null, document_verified_at: null, person_type: null, tax_type: s.taxType, status: 'unverified', metadata: s.metadata, created_at: s.createdAt };
}

const notFound = () => new ApiError(404, 'not_found', 'consumer not found');

export async function consumerRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
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
      const id = newId('cns');
      const r = await run(consumerDecider, consumerStream(id), { type: 'create', consumerId: id, tenant: auth, displayName: body.display_name ?? null, metadata: body.metadata ?? {} }, { expectedRevision: 'no_stream' });
      return { status: 201, body: view(r.state as Extract<ConsumerState, { status: 'unverified' }>) };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/consumers',
    operationId: 'listConsumers',
    summary: 'List the organization’s consumers (from every project), newest first',
    tags: ['consumers'],
    auth: 'api_key',
    scope: 'consumers:read',
    query: z.object({ limit: z.coerce.number().int().min(1).max(200).default(50), verified: QueryBool.optional() }),
    responses: { 200: z.object({ consumers: z.array(Consumer) }) },
    errors: [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden']],
    async handler({ auth, query, deps }) {
      const params: unknown[] = [auth.orgId, query.limit];
      let filter = '';
      if (query.verified !== undefined) {
        params.push(query.verified ? 'verified' : 'unverified');
        filter = ' AND status = $3';
      }
      const { rows } = await deps.db.query<ConsumerView>(`SELECT ${COLUMNS} FROM consumers WHERE org_id = $1${filter} ORDER BY created_at DESC, id LIMIT $2`, params);
      return { status: 200, body: { consumers: rows } };
    },
  });

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
      const c = await readConsumer(deps, auth, params.id);
      if (!c) throw notFound();
      const m = await deps.db.query<{ id: string }>('SELECT id FROM mandates WHERE consumer_id = $1 AND org_id = $2 AND project_id = $3 ORDER BY created_at, id', [c.id, auth.orgId, auth.projectId]);
      const cards = await deps.db.query<{ card_id: string }>(`SELECT card_id FROM mandate_cards WHERE consumer_id = $1 AND org_id = $2 AND project_id = $3 AND status = 'active' ORDER BY bound_at`, [
        c.id,
        auth.orgId,
        auth.projectId,
      ]);
      return { status: 200, body: { ...c, mandate_ids: m.rows.map((r) => r.id), card_ids: cards.rows.map((r) => r.card_id) } };
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
    async handler({ auth, params, body, run }) {
      const r = await run(consumerDecider, consumerStream(params.id), {
        type: 'update',
        tenant: auth,
        ...(body.display_name !== undefined ? { displayName: body.display_name } : {}),
        ...(body.metadata !== undefined ? { metadata: body.metadata } : {}),
        ...(body.tax_type !== undefined ? { taxType: body.tax_type } : {}),
      });
      return { status: 200, body: view(r.state as Extract<ConsumerState, { status: 'unverified' }>) };
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
            z.object({ currency: z.string(), authorized_minor: Money, spent_minor: Money, available_minor: Money, funding_source_ids: z.array(z.string()), mandate_ids: z.array(z.string()), pix_balance_minor: Money.optional() }),
          ),
        })
        .meta({ id: 'ConsumerWallet' }),
    },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler({ auth, params, deps }) {
      const c = await readConsumer(deps, auth, params.id);
      if (!c) throw notFound();
      // The calling project's mandates of this consumer that still count: active or paused, not expired.
      const { rows } = await deps.db.query<{ id: string; currency: string; cap: string; spent: string }>(
        `SELECT id, currency, cap_minor::text AS cap, spent_minor::text AS spent FROM mandates
         WHERE consumer_id = $1 AND org_id = $2 AND project_id = $3 AND status IN ('active', 'paused') AND expires_at > $4 ORDER BY created_at, id`,
        [c.id, auth.orgId, auth.projectId, deps.now().toISOString()],
      );
      const mandates = rows.map((r) => ({ id: r.id, currency: r.currency, cap_minor: BigInt(r.cap), spent_minor: BigInt(r.spent) }));
      // Funding sources: the consumer's Pix accounts at the PSP; each row also shows its Pix balance.
      const pix = await pixWallets(deps, auth, c.id);
      const fundingSources: WalletFundingSource[] = pix.filter((w) => w.status === 'active').map((w) => ({ id: w.funding_source_id, currency: w.currency }));
      // bigint throughout: written as exact JSON integers (src/http/exact-json.ts).
      const currencies: (WalletRow & { pix_balance_minor?: bigint })[] = walletRows(mandates, fundingSources);
      for (const w of pix) {
        const row = currencies.find((r) => r.currency === w.currency);
        if (row) row.pix_balance_minor = (row.pix_balance_minor ?? 0n) + BigInt(w.balance_minor);
      }
      return { status: 200, body: { consumer_id: c.id, currencies } };
    },
  });
}
