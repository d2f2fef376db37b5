import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ApiError } from './kernel/errors.ts';
import { ConsumerParams } from './kernel/schemas.ts';
import { createDevolution, getReceivement, receivePixNotification } from '../usecases/pix-receivements.ts';
import { type AppDeps, defineRoute } from './kernel/route.ts';

// Receivements: the PSP's notifications of received Pix (verified the
// Standard Webhooks way: HMAC-SHA256 over "<id>.<timestamp>.<body>", the
// timestamp within 5 minutes of our clock, a message id accepted once), the
// lookup of one receivement by end-to-end id with its devolutions, and a
// devolution. The logic is src/usecases/pix-receivements.ts; the raw body the
// signature covers is kept here.

export { NOTIFICATION_TOLERANCE_S, verifySignature } from '../usecases/pix-receivements.ts';

/** The end-to-end id of the path; its format (spec Part 8) is checked once the consumer is known. */
const EndToEndId = z.string().min(1).max(200);

const Devolution = z.object({ devolution_id: z.string(), status: z.string().describe('`processing` (sent to the PSP), `returned` (the money went back to the payer) or `failed`.'), amount_minor: z.number().int() });
const PixReceivement = z
  .object({
    end_to_end_id: z.string(),
    received: z.boolean().describe('True only for an inbound Pix (money received by the account).'),
    provider_transaction_type: z.string().describe("The PSP's type of the transaction, passed through as the PSP names it."),
    provider_transaction_id: z.string().nullable().describe("The PSP's own id of the transaction; null when it gave none."),
    provider_amount: z.string().describe('The amount as the PSP states it (decimal text, e.g. `12.34`), passed through.'),
    initiation_type: z.string().nullable().describe('How the payer started the Pix (manual, by key, by QR code…), as the PSP names it; null when not given.'),
    transaction_id_brcode: z.string().nullable().describe('The txid carried in the BR Code the payer paid; null when none.'),
    transaction_identification: z.string().nullable().describe("The PSP's transaction identification (the txid it returned); null when none."),
    correlation: z.enum(['charge_matched', 'no_correlator_returned', 'no_charge_matched', 'charge_ambiguous', 'not_attempted']).describe('How the Pix was matched to a charge: `charge_matched` (by its txid), `no_correlator_returned` (no txid came), `no_charge_matched`, `charge_ambiguous` (several charges share it) or `not_attempted`; `status_message` says it in words.'),
    charge_id: z.string().nullable(),
    charge_status: z.string().nullable().describe("The matched charge's status; null when uncorrelated."),
    amount_minor: z.number().int().nullable(),
    wallet_id: z.string().nullable(),
    wallet_credited: z.boolean().describe("Whether the consumer's Pix wallet was credited with it."),
    devolutions: z.array(Devolution).describe('The devolutions (refunds) of this Pix, with their state at the PSP.'),
    status_message: z.string(),
  })
  .meta({ id: 'PixReceivement' });

const CORRELATION_MESSAGE: Record<string, string> = {
  charge_matched: 'Matched to a charge by its txid; the charge is settled and the wallet credited.',
  no_correlator_returned: 'The PSP returned no txid for this Pix, so it could not be matched to a charge; the wallet was not credited.',
  no_charge_matched: 'The txid matches none of this account\'s charges; the wallet was not credited.',
  charge_ambiguous: 'The txid matches several charges (static charges share txids); the wallet was not credited.',
  not_attempted: 'Not an inbound Pix: no correlation was attempted.',
};

const NotificationBody = z.object({
  pix: z
    .array(z.object({ endToEndId: z.string().regex(/^[A-Za-z0-9]{16,64}$/), txid: z.string().nullable().optional(), valor: z.string(), horario: z.string().optional().describe('When the Pix was made, as the PSP states it (ISO 8601).'), chave: z.string().nullable().optional().describe('The Pix key that received it.') }))
    .min(1)
    .max(100)
    .describe('The received Pix, 1 to 100 (the Bacen webhook body).'),
});

export async function pixNotificationRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  // The signature covers the exact bytes: keep the raw body beside the parsed one.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(/^application\/(.+\+)?json$/, { parseAs: 'string' }, (req, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    (req as unknown as { rawBody: string }).rawBody = text;
    try {
      done(null, text.trim() === '' ? undefined : JSON.parse(text));
    } catch {
      done(new ApiError(400, 'invalid_json', 'the request body is not valid JSON'), undefined);
    }
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/pix/notifications/:psp',
    operationId: 'pixPspNotification',
    summary: 'The PSP notifies received Pix (Bacen webhook body {pix: [...]}, signed with Standard Webhooks headers)',
    tags: ['pix'],
    auth: 'open',
    params: z.object({ psp: z.enum(['sandbox', 'live']) }),
    body: NotificationBody,
    responses: { 200: z.object({ recorded: z.array(z.string()), ignored: z.array(z.string()) }) },
    errors: [[400, 'invalid_body'], [401, 'invalid_signature'], [401, 'timestamp_out_of_tolerance'], [404, 'not_found'], [409, 'webhook_replayed'], [502, 'provider_error']],
    async handler({ deps, params, body, req, run }) {
      const h = (n: string) => (typeof req.headers[n] === 'string' ? (req.headers[n] as string) : '');
      const raw = (req as unknown as { rawBody?: string }).rawBody ?? '';
      const notification = { psp: params.psp, id: h('webhook-id'), timestamp: h('webhook-timestamp'), signature: h('webhook-signature'), raw, pix: body.pix };
      return { status: 200, body: await receivePixNotification(deps, run, notification) };
    },
  });
}

export async function pixReceivementRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/consumers/:consumerId/pix/receivements/:endToEndId',
    operationId: 'getPixReceivement',
    summary: 'A Pix movement of the account by end-to-end id, with its correlation and devolutions',
    tags: ['pix'],
    auth: 'api_key',
    scope: 'pix:read',
    params: ConsumerParams.extend({ endToEndId: EndToEndId }),
    responses: { 200: PixReceivement },
    errors: [[400, 'invalid_params'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [409, 'no_active_funding_source'], [422, 'no_partner_account'], [501, 'not_wired'], [502, 'provider_error']],
    async handler({ deps, auth, params, run }) {
      const r = await getReceivement(deps, run, auth, params.consumerId, params.endToEndId);
      return { status: 200, body: { ...r, status_message: CORRELATION_MESSAGE[r.correlation]! } };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/consumers/:consumerId/pix/receivements/:endToEndId/devolutions',
    operationId: 'createPixDevolution',
    summary: 'Return all or part of a received Pix to its payer (a devolução); debits the wallet it credited',
    tags: ['pix'],
    auth: 'api_key',
    scope: 'pix:write',
    params: ConsumerParams.extend({ endToEndId: EndToEndId }),
    body: z.strictObject({ amount_minor: z.number().int().min(1).max(100_000_000_000) }),
    responses: { 201: Devolution.extend({ end_to_end_id: z.string() }) },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [422, 'no_partner_account'], [422, 'devolution_refused'], [501, 'not_wired'], [502, 'provider_error']],
    idempotent: true,
    async handler({ deps, auth, params, body, run }) {
      return { status: 201, body: await createDevolution(deps, run, auth, params.consumerId, params.endToEndId, body.amount_minor) };
    },
  });
}
