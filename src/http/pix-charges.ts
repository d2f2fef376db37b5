import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { STATIC_TXID } from '../../commands/pix-brcode.ts';
import { ApiError } from './kernel/errors.ts';
import { ConsumerParams } from './kernel/schemas.ts';
import { chargeBrCode, type ChargeProvider, type ChargeRow, chargeStatusOf, createPixCharge, getPixCharge, simulatePixPayment } from '../usecases/pix-charges.ts';
import { qrPng, qrPngDataUri, qrSvg } from '../usecases/pix-qr.ts';
import { type AppDeps, defineRoute } from './kernel/route.ts';
import { Timestamp } from './kernel/schemas.ts';

// Pix charges of a consumer's Pix wallet (the logic, dynamic and static
// charges and the PSP check on read, is src/usecases/pix-charges.ts). Each
// answers its BR Code ("Pix Copia e Cola") and its QR image.

/** Spec Part 8: up to 128 letters, digits, `_`, `-`. */
export const Reference = z.string().regex(/^[A-Za-z0-9_-]{1,128}$/, 'up to 128 letters, digits, _ or -');

export const PixChargeStatus = z
  .object({
    charge_id: z.string(),
    status: z.string().describe('`pending` (waiting for the payer), `settled` (paid; the wallet is credited) or `expired`; read as an open string.'),
    amount_minor: z.number().int(),
    currency: z.string(),
    wallet_id: z.string(),
    created_at: Timestamp,
    settled_at: Timestamp.nullable(),
    transaction_id: z.string().nullable(),
    client_request_id: z.string().nullable(),
    provider: z
      .object({ result: z.string().describe("The cob's status at the PSP, as the PSP names it (e.g. `ATIVA`, `CONCLUIDA`)."), identity_verified: z.boolean().describe("Whether the cob's Pix key is one of the consumer's registered keys.") })
      .nullable()
      .describe('What the PSP said when it was consulted for this read; null when it was not (a settled or static charge).'),
    status_message: z.string(),
    txid: z.string(),
    kind: z.enum(['dynamic', 'static']).describe('`dynamic`: a cob registered at the PSP, with an expiry; `static`: a BR Code with a txid of your choosing, not registered at the PSP.'),
    end_to_end_id: z.string().nullable(),
    /** What the payer pays: the EMV BR Code ("Pix Copia e Cola"); null on a charge recorded before it was kept. */
    br_code: z.string().nullable(),
    location: z.string().nullable().describe("A dynamic charge's payload location at the PSP (a URL without scheme); null for a static one."),
    qr_code_data_uri: z.string().nullable().describe("The BR Code's QR image as a PNG data URI; null when there is no BR Code."),
    qr_code_url: z.string().nullable().describe("Where the QR image is served (PNG; `?format=svg` for SVG), with this API's credential; null when there is no BR Code."),
  })
  .meta({ id: 'PixChargeStatus' });

function message(status: string, r: ChargeRow, provider: { result: string } | null): string {
  if (status === 'settled') return `Paid: end-to-end id ${r.end_to_end_id}; the wallet was credited.`;
  if (status === 'expired') return 'Expired before anyone paid it.';
  if (provider?.result === 'CONCLUIDA') return 'The PSP reports the charge paid; the payment is being recorded.';
  if (r.kind === 'static') return 'Waiting for a payer; a static charge is not registered at the PSP, so it was not consulted.';
  return 'Waiting for the payer.';
}

async function view(deps: AppDeps, r: ChargeRow, provider: ChargeProvider | null) {
  const status = chargeStatusOf(r, deps.now());
  return {
    charge_id: r.charge_id, status, amount_minor: Number(r.amount_minor), currency: r.currency, wallet_id: r.wallet_id, created_at: r.created_at, settled_at: r.settled_at,
    transaction_id: r.transaction_id, client_request_id: r.client_request_id, provider, status_message: message(status, r, provider), txid: r.txid, kind: r.kind, end_to_end_id: r.end_to_end_id,
    br_code: r.br_code, location: r.location, qr_code_data_uri: r.br_code ? await qrPngDataUri(r.br_code) : null,
    qr_code_url: r.br_code ? `${deps.baseUrl}/v1/consumers/${encodeURIComponent(r.consumer_id)}/pix/charges/${r.charge_id}/qr-code` : null,
  };
}

export async function pixChargeRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/consumers/:consumerId/pix/charges',
    operationId: 'createPixCharge',
    summary: "Create a Pix charge crediting the consumer's Pix wallet: a cob at the PSP (dynamic) or a static BR Code txid",
    tags: ['pix'],
    auth: 'api_key',
    scope: 'pix:write',
    params: ConsumerParams,
    body: z
      .strictObject({
        amount_minor: z.number().int().min(1).max(100_000_000_000),
        transaction_id: Reference.optional(),
        client_request_id: Reference.optional(),
        static: z.boolean().optional(),
        txid: z.string().regex(STATIC_TXID, "a static charge's txid is 1 to 25 letters and digits").optional(),
        merchant_city: z.string().min(1).max(15).optional(),
        expires_in_seconds: z.number().int().min(60).max(86_400).optional(),
      })
      .superRefine((b, c) => {
        if (!b.static && b.merchant_city !== undefined) c.addIssue({ code: 'custom', path: ['merchant_city'], message: "a dynamic charge's BR Code is the PSP's, with the city it holds" });
        if (b.static && b.client_request_id !== undefined) c.addIssue({ code: 'custom', path: ['client_request_id'], message: 'a static charge has no client request id' });
        if (!b.static && b.txid !== undefined) c.addIssue({ code: 'custom', path: ['txid'], message: 'the txid of a dynamic charge is drawn by the service' });
      }),
    responses: { 201: PixChargeStatus },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [409, 'wallet_not_active'], [409, 'pix_key_required'], [422, 'no_partner_account'], [501, 'not_wired'], [502, 'provider_error']],
    idempotent: true,
    async handler({ deps, auth, params, body, run }) {
      return { status: 201, body: await view(deps, await createPixCharge(deps, run, auth, params.consumerId, body), null) };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/consumers/:consumerId/pix/charges/:reference',
    operationId: 'getPixCharge',
    summary: 'A Pix charge by charge id, mint transaction id or client request id',
    tags: ['pix'],
    auth: 'api_key',
    scope: 'pix:read',
    params: ConsumerParams.extend({ reference: Reference }),
    responses: { 200: PixChargeStatus },
    errors: [[400, 'invalid_params'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [409, 'charge_reference_ambiguous'], [501, 'not_wired'], [502, 'provider_error']],
    async handler({ deps, auth, params, run }) {
      const { row, provider } = await getPixCharge(deps, run, auth, params.consumerId, params.reference);
      return { status: 200, body: await view(deps, row, provider) };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/consumers/:consumerId/pix/charges/:reference/qr-code',
    operationId: 'getPixChargeQrCode',
    summary: "The QR image of a Pix charge's BR Code: PNG, or SVG with format=svg (the reference as for reading the charge)",
    tags: ['pix'],
    auth: 'api_key',
    scope: 'pix:read',
    params: ConsumerParams.extend({ reference: Reference }),
    query: z.object({ format: z.enum(['png', 'svg']).optional() }),
    responses: { 200: null },
    errors: [[400, 'invalid_params'], [400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [409, 'charge_reference_ambiguous']],
    async handler({ deps, auth, params, query }) {
      const brCode = await chargeBrCode(deps, auth, params.consumerId, params.reference);
      const headers = { 'cache-control': 'private, max-age=300', 'x-content-type-options': 'nosniff' };
      if (query.format === 'svg') return { status: 200, headers: { ...headers, 'content-type': 'image/svg+xml', 'content-security-policy': "default-src 'none'" }, body: await qrSvg(brCode) };
      return { status: 200, headers: { ...headers, 'content-type': 'image/png' }, body: await qrPng(brCode) };
    },
  });
}

/** A simulated payer pays a charge (or a key) at the sandbox PSP, which notifies us (test keys only). */
export async function pixTestPaymentRoute(app: FastifyInstance, deps: AppDeps): Promise<void> {
  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/test/pix/payments',
    operationId: 'pixTestPayment',
    summary: "A simulated payer pays a charge (by reference, or its BR Code as a payer's app reads it) or a key of the consumer's account at the sandbox PSP, which then notifies the service (test keys only)",
    tags: ['pix', 'sandbox'],
    auth: 'api_key',
    scope: 'pix:write',
    body: z
      .strictObject({ consumer_id: z.string().min(1).max(200), charge_reference: Reference.optional(), br_code: z.string().min(1).max(512).optional(), key: z.string().max(200).optional(), txid: z.string().regex(/^[A-Za-z0-9]{1,35}$/, 'a txid is 1 to 35 letters and digits').optional(), amount_minor: z.number().int().min(1).max(100_000_000_000).optional(), deliveries: z.number().int().min(0).max(3).optional() })
      .refine((b) => [b.charge_reference, b.br_code, b.key].filter((v) => v !== undefined).length === 1, 'give one of charge_reference, br_code or key'),
    responses: { 201: z.object({ end_to_end_id: z.string(), deliveries: z.array(z.number().int()) }) },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'sandbox_funding_not_permitted'], [404, 'not_found'], [409, 'charge_reference_ambiguous'], [422, 'no_partner_account'], [422, 'payment_refused']],
    async handler({ deps, auth, body }) {
      if (auth.environment !== 'test') throw new ApiError(403, 'sandbox_funding_not_permitted', 'simulated payments take test keys only');
      return { status: 201, body: await simulatePixPayment(deps, auth, body) };
    },
  });
}
