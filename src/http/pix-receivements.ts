import { createHmac, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { pixNotificationDecider, pixNotificationStream, pixReceivementDecider, pixReceivementStream, type PixReceivementState } from '../../commands/pix.ts';
import { minorToValor } from '../../commands/pix-format.ts';
import { randomString } from '../ids.ts';
import { loadState } from '../eventstore/handler.ts';
import type { PspPix } from '../adapters/psp/port.ts';
import { ApiError } from './errors.ts';
import { ConsumerParams } from './schemas.ts';
import { loadAccount, notConfigured, pspOf, PspError } from '../usecases/pix-common.ts';
import { type AccountRow, recordReceivement, type Runner } from '../usecases/pix-receive.ts';
import { type AppDeps, defineRoute } from './route.ts';

// Receivements: the PSP's notifications of received Pix (verified the
// Standard Webhooks way: HMAC-SHA256 over "<id>.<timestamp>.<body>", the
// timestamp within 5 minutes of our clock, a message id accepted once), the
// lookup of one receivement by end-to-end id with its devolutions, and a
// devolution.

/** Spec Part 8: 16 to 64 alphanumerics; checked once the consumer is known, so another tenant's consumer answers 404 first. */
const END_TO_END_ID = /^[A-Za-z0-9]{16,64}$/;
const EndToEndId = z.string().min(1).max(200);
function checkEndToEndId(id: string): void {
  if (!END_TO_END_ID.test(id)) throw new ApiError(400, 'invalid_params', 'the path is invalid', { issues: [{ path: ['endToEndId'], code: 'invalid_format', message: '16 to 64 letters and digits' }] });
}
export const NOTIFICATION_TOLERANCE_S = 300;

const Devolution = z.object({ devolution_id: z.string(), status: z.string(), amount_minor: z.number().int() });
const PixReceivement = z
  .object({
    end_to_end_id: z.string(),
    received: z.boolean(),
    provider_transaction_type: z.string(),
    provider_transaction_id: z.string().nullable(),
    provider_amount: z.string(),
    initiation_type: z.string().nullable(),
    transaction_id_brcode: z.string().nullable(),
    transaction_identification: z.string().nullable(),
    correlation: z.enum(['charge_matched', 'no_correlator_returned', 'no_charge_matched', 'charge_ambiguous', 'not_attempted']),
    charge_id: z.string().nullable(),
    charge_status: z.string().nullable(),
    amount_minor: z.number().int().nullable(),
    wallet_id: z.string().nullable(),
    wallet_credited: z.boolean(),
    devolutions: z.array(Devolution),
    status_message: z.string(),
  })
  .meta({ id: 'PixReceivement' });

const DEVOLUTION_STATUS: Record<string, string> = { EM_PROCESSAMENTO: 'processing', DEVOLVIDO: 'returned', NAO_REALIZADO: 'failed' };
const devolutionStatus = (s: string) => DEVOLUTION_STATUS[s] ?? s.toLowerCase();

const CORRELATION_MESSAGE: Record<string, string> = {
  charge_matched: 'Matched to a charge by its txid; the charge is settled and the wallet credited.',
  no_correlator_returned: 'The PSP returned no txid for this Pix, so it could not be matched to a charge; the wallet was not credited.',
  no_charge_matched: 'The txid matches none of this account\'s charges; the wallet was not credited.',
  charge_ambiguous: 'The txid matches several charges (static charges share txids); the wallet was not credited.',
  not_attempted: 'Not an inbound Pix: no correlation was attempted.',
};

const accountRow = async (deps: AppDeps, psp: string, pspAccount: string) =>
  (await deps.db.query<AccountRow>('SELECT consumer_id, org_id, project_id, account_id, psp, psp_account FROM pix_accounts WHERE psp = $1 AND psp_account = $2', [psp, pspAccount])).rows[0];

/** Standard Webhooks verification with our clock; true when one `v1,` signature matches. */
export function verifySignature(secret: string, id: string, timestamp: string, body: string, header: string): boolean {
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest();
  return header.split(' ').some((part) => {
    const [v, sig] = part.split(',');
    if (v !== 'v1' || !sig) return false;
    const got = Buffer.from(sig, 'base64');
    return got.length === expected.length && timingSafeEqual(got, expected);
  });
}

const NotificationBody = z.object({ pix: z.array(z.object({ endToEndId: z.string().regex(/^[A-Za-z0-9]{16,64}$/), txid: z.string().nullable().optional(), valor: z.string(), horario: z.string().optional(), chave: z.string().nullable().optional() })).min(1).max(100) });

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
      const psp = params.psp === 'live' ? deps.pix.live : deps.pix.sandbox;
      if (!psp || !psp.webhookSecret) throw new ApiError(404, 'not_found', 'no such PSP');
      const h = (n: string) => (typeof req.headers[n] === 'string' ? (req.headers[n] as string) : '');
      const id = h('webhook-id');
      const ts = h('webhook-timestamp');
      const raw = (req as unknown as { rawBody?: string }).rawBody ?? '';
      if (!id || !/^\d{1,12}$/.test(ts) || !verifySignature(psp.webhookSecret, id, ts, raw, h('webhook-signature'))) throw new ApiError(401, 'invalid_signature', 'the notification signature does not verify');
      if (Math.abs(deps.now().getTime() / 1000 - Number(ts)) > NOTIFICATION_TOLERANCE_S) throw new ApiError(401, 'timestamp_out_of_tolerance', `the notification timestamp is more than ${NOTIFICATION_TOLERANCE_S} seconds from our clock`);
      const guard = pixNotificationStream(params.psp, id.slice(0, 200));
      if ((await loadState(deps.store, guard, pixNotificationDecider)).state.seen) throw new ApiError(409, 'webhook_replayed', 'this notification was already received');
      const recorded: string[] = [];
      const ignored: string[] = [];
      let owner: AccountRow | undefined;
      for (const item of body.pix) {
        // The notification says what happened; the PSP's record says to which account, and confirms it.
        let pix: PspPix | null;
        try {
          pix = await psp.getPix(item.endToEndId);
        } catch {
          throw new ApiError(502, 'provider_error', 'the PSP did not confirm the notified Pix; deliver again later', { reason: 'provider_did_not_answer', retriable: true });
        }
        const account = pix ? await accountRow(deps, params.psp, pix.account) : undefined;
        if (!pix || !account) {
          ignored.push(item.endToEndId);
          continue;
        }
        owner ??= account;
        const runner: Runner = (d, s, c, o) => run(d, s, c, o);
        if (await recordReceivement(deps, runner, account, pix, 'notification')) recorded.push(item.endToEndId);
        else ignored.push(item.endToEndId);
      }
      if (owner) await run(pixNotificationDecider, guard, { type: 'accept', psp: params.psp, messageId: id, endToEndIds: recorded }, { orgId: owner.org_id, projectId: owner.project_id, expectedRevision: 'no_stream' });
      return { status: 200, body: { recorded, ignored } };
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
      const a = await loadAccount(deps, auth, params.consumerId);
      checkEndToEndId(params.endToEndId);
      if (!Object.values(a.fundingSources).some(Boolean)) throw new ApiError(409, 'no_active_funding_source', 'the consumer has no active Pix funding source');
      let pix: PspPix | null;
      try {
        pix = await pspOf(deps, a.psp).getPix(params.endToEndId);
      } catch (err) {
        notConfigured(err);
        throw new ApiError(502, 'provider_error', 'the PSP did not answer', { reason: err instanceof PspError && err.reason === 'malformed' ? 'provider_answer_unreadable' : 'provider_did_not_answer', retriable: true });
      }
      if (!pix || pix.account !== a.pspAccount) throw new ApiError(404, 'not_found', 'no such movement on this account');
      if (pix.tipo !== 'PIX_RECEBIDO') {
        return {
          status: 200,
          body: {
            end_to_end_id: pix.endToEndId, received: false, provider_transaction_type: pix.tipo, provider_transaction_id: pix.idTransacao ?? null, provider_amount: pix.valor,
            initiation_type: pix.tipoIniciacao ?? null, transaction_id_brcode: pix.txid, transaction_identification: pix.txid, correlation: 'not_attempted' as const,
            charge_id: null, charge_status: null, amount_minor: null, wallet_id: null, wallet_credited: false, devolutions: [], status_message: CORRELATION_MESSAGE.not_attempted!,
          },
        };
      }
      const row: AccountRow = { consumer_id: a.consumerId, org_id: a.orgId, project_id: a.projectId, account_id: a.accountId, psp: a.psp, psp_account: a.pspAccount };
      await recordReceivement(deps, (d, s, c, o) => run(d, s, c, o), row, pix, 'lookup');
      const { rows } = await deps.db.query<{ correlation: string; charge_id: string | null; charge_status: string | null; charge_amount: string | null; wallet_id: string | null; provider_transaction_id: string | null; initiation_type: string | null; txid: string | null; provider_amount: string }>(
        `SELECT r.correlation, r.charge_id, c.status AS charge_status, c.amount_minor::text AS charge_amount, r.wallet_id, r.provider_transaction_id, r.initiation_type, r.txid, r.provider_amount
         FROM pix_receivements r LEFT JOIN pix_charges c ON c.id = r.charge_id WHERE r.psp = $1 AND r.end_to_end_id = $2 AND r.account_id = $3`,
        [a.psp, pix.endToEndId, a.accountId],
      );
      const r = rows[0];
      if (!r) throw new ApiError(404, 'not_found', 'no such movement on this account');
      const devs = await deps.db.query<{ id: string; status: string; amount_minor: string }>('SELECT id, status, amount_minor::text FROM pix_devolutions WHERE end_to_end_id = $1 AND consumer_id = $2 ORDER BY requested_at, id', [pix.endToEndId, a.consumerId]);
      const providerStatus = new Map(pix.devolucoes.map((d) => [d.id, d.status]));
      return {
        status: 200,
        body: {
          end_to_end_id: pix.endToEndId, received: true, provider_transaction_type: pix.tipo, provider_transaction_id: r.provider_transaction_id, provider_amount: r.provider_amount,
          initiation_type: r.initiation_type, transaction_id_brcode: r.txid, transaction_identification: pix.txid, correlation: r.correlation as z.infer<typeof PixReceivement>['correlation'],
          charge_id: r.charge_id, charge_status: r.charge_status, amount_minor: r.charge_amount === null ? null : Number(r.charge_amount), wallet_id: r.wallet_id, wallet_credited: r.wallet_id !== null,
          devolutions: devs.rows.map((d) => ({ devolution_id: d.id, status: devolutionStatus(providerStatus.get(d.id) ?? d.status), amount_minor: Number(d.amount_minor) })),
          status_message: CORRELATION_MESSAGE[r.correlation]!,
        },
      };
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
      const a = await loadAccount(deps, auth, params.consumerId);
      checkEndToEndId(params.endToEndId);
      const stream = pixReceivementStream(a.psp, params.endToEndId);
      const { state } = await loadState<PixReceivementState>(deps.store, stream, pixReceivementDecider);
      if (state.status === 'none' || state.data.account_id !== a.accountId) throw new ApiError(404, 'not_found', 'no such receivement on this account');
      const id = randomString(24);
      let d;
      try {
        d = await pspOf(deps, a.psp).devolve(params.endToEndId, id, minorToValor(BigInt(body.amount_minor)));
      } catch (err) {
        notConfigured(err);
        if (err instanceof PspError && err.reason === 'refused') throw new ApiError(422, 'devolution_refused', 'the PSP refused the devolution', { provider_status: err.status, provider_code: err.code });
        throw new ApiError(502, 'provider_error', 'the PSP did not answer the devolution', { reason: 'provider_did_not_answer', retriable: true });
      }
      const walletId = (await deps.db.query<{ wallet_id: string | null }>('SELECT wallet_id FROM pix_receivements WHERE psp = $1 AND end_to_end_id = $2', [a.psp, params.endToEndId])).rows[0]?.wallet_id ?? null;
      await run(pixReceivementDecider, stream, { type: 'devolve', devolutionId: id, rtrId: d.rtrId ?? null, amountMinor: String(body.amount_minor), status: devolutionStatus(d.status), walletId });
      return { status: 201, body: { end_to_end_id: params.endToEndId, devolution_id: id, status: devolutionStatus(d.status), amount_minor: body.amount_minor } };
    },
  });
}
