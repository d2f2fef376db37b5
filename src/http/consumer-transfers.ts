import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { Currency } from '../../events/mandate.ts';
import { Rejection } from '../eventstore/handler.ts';
import { transferBetweenSlots } from '../usecases/wallet-transfers.ts';
import { ApiError } from './kernel/errors.ts';
import { defineRoute, type AppDeps } from './kernel/route.ts';
import { IdParam } from './kernel/schemas.ts';

// POST /v1/consumers/{id}/wallet/transfer (issue 58, the product client's
// `transfer`): a quote of moving value between two of the consumer's currency
// slots, or with `execute: true` the move itself. The use case:
// src/usecases/wallet-transfers.ts. The spec's `currency_not_authorized` is
// 422 here (403 is a mandate spend's).

const Minor = z.union([z.number().int().positive().max(1e15).transform(String), z.string().regex(/^[1-9]\d{0,15}$/)]);
const Side = { currency: z.string(), rail: z.string().nullable() };

const TransferAnswer = z
  .object({
    consumer_id: z.string(),
    mandate_id: z.string().meta({ description: 'The mandate holding both slots' }),
    route: z.string().meta({ description: '<FROM>-><TO>' }),
    converts: z.boolean().describe('True: the value changes currency on the way (the ramp converts it).'),
    engine: z.string().nullable().describe('The ramp that quotes and moves the value; null when no ramp is configured for this environment.'),
    executable: z.boolean().describe('Whether `execute: true` would move it now (false without a ramp).'),
    executed: z.boolean().describe('True when this call moved the value (201); false for a quote.'),
    from: z.object({ ...Side, amount_minor: z.number().int(), cap_available_minor: z.number().int() }).describe('The slot the value leaves.'),
    to: z.object({ ...Side, amount_minor: z.number().int().nullable().meta({ description: 'What the destination slot gains at the quoted rate' }) }).describe('The slot the value reaches.'),
    rate: z.object({ numerator: z.string(), denominator: z.string() }).nullable(),
    note: z.string(),
    transaction_id: z.string().optional(),
    status: z.literal('completed').optional().describe('`completed` when executed; absent on a quote.'),
    money_moved: z.boolean().optional(),
  })
  .meta({ id: 'WalletTransfer' });

export async function consumerTransferRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/consumers/:id/wallet/transfer',
    operationId: 'transferBetweenWalletSlots',
    summary: "Move value between two of a consumer's currency slots through the ramp at its quoted rate (no FX): a quote (200), or with execute true the move (201)",
    tags: ['consumers'],
    auth: 'api_key',
    scope: 'mandates:write',
    params: z.object({ id: IdParam }),
    body: z.object({
      from_currency: Currency,
      to_currency: Currency,
      amount_minor: Minor.meta({ description: 'Minor units of from_currency' }),
      execute: z.boolean().optional().describe('True moves the value (201); false or absent only quotes it (200).'),
      agent_id: z.string().min(1).max(64).optional(),
      purpose: z.string().max(500).optional(),
      mandate_id: IdParam.optional().meta({ description: 'The mandate whose slots to use; else the newest holding both' }),
    }),
    responses: { 200: TransferAnswer, 201: TransferAnswer },
    errors: [
      [400, 'invalid_body'],
      [401, 'unauthorized'],
      [403, 'forbidden'],
      [403, 'mandate_agent_mismatch'],
      [403, 'policy_denied'],
      [404, 'not_found'],
      [409, 'mandate_not_active'],
      [409, 'mandate_already_revoked'],
      [410, 'mandate_already_expired'],
      [422, 'same_slot_transfer'],
      [422, 'currency_not_authorized'],
      [422, 'unsupported_transfer_route'],
      [422, 'transfer_amount_too_small'],
      [422, 'per_tx_cap_exceeded'],
      [422, 'total_cap_exceeded'],
      [501, 'not_wired'],
    ],
    idempotent: true,
    async handler({ auth, params, body, run, deps }) {
      try {
        const r = await transferBetweenSlots({ ports: deps, run, tenant: auth }, auth.environment, params.id, body);
        return { status: r.executed ? 201 : 200, body: r };
      } catch (err) {
        if (err instanceof Rejection && err.code === 'currency_not_authorized') throw new ApiError(422, err.code, err.message, err.details);
        throw err;
      }
    },
  });
}
