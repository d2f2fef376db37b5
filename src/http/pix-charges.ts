import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { pixChargeDecider, pixChargeStream } from '../../commands/pix.ts';
import { minorToValor } from '../../commands/pix-format.ts';
import { emvText, STATIC_TXID, staticBrCode } from '../../commands/pix-brcode.ts';
import { randomString } from '../ids.ts';
import type { PspCob } from '../adapters/psp/port.ts';
import type { ApiKeyAuth } from './auth.ts';
import { ApiError } from './errors.ts';
import { newId } from './ids.ts';
import { ConsumerParams } from './pix-common.ts';
import { consumerNotFound, loadAccount, notConfigured, pspOf, PspError } from '../usecases/pix-common.ts';
import { type AccountRow, recordReceivement, type Runner } from '../usecases/pix-receive.ts';
import { readConsumer } from '../usecases/consumers.ts';
import { qrPng, qrPngDataUri, qrSvg } from './pix-qr.ts';
import { type AppDeps, defineRoute } from './route.ts';
import { isoText as TS, Timestamp } from './schemas.ts';

// Pix charges of a consumer's Pix wallet. A dynamic charge is a `cob` at the
// PSP (txid of 32 alphanumerics); a static one is a BR Code carrying a txid the
// PSP does not know (no client request id, several may share a txid). Each
// answers its BR Code ("Pix Copia e Cola": the PSP's for a dynamic charge, ours
// for a static one) and its QR image. Read by charge id, mint transaction id
// (the txid, or the transaction_id given at creation) or client request id; a pending dynamic
// charge is checked with the PSP on read, and a Pix the PSP reports for it is
// recorded as if notified.

/** Spec Part 8: up to 128 letters, digits, `_`, `-`. */
export const Reference = z.string().regex(/^[A-Za-z0-9_-]{1,128}$/, 'up to 128 letters, digits, _ or -');

export const PixChargeStatus = z
  .object({
    charge_id: z.string(),
    status: z.string(),
    amount_minor: z.number().int(),
    currency: z.string(),
    wallet_id: z.string(),
    created_at: Timestamp,
    settled_at: Timestamp.nullable(),
    transaction_id: z.string().nullable(),
    client_request_id: z.string().nullable(),
    provider: z.object({ result: z.string(), identity_verified: z.boolean() }).nullable(),
    status_message: z.string(),
    txid: z.string(),
    kind: z.enum(['dynamic', 'static']),
    end_to_end_id: z.string().nullable(),
    /** What the payer pays: the EMV BR Code ("Pix Copia e Cola"); null on a charge recorded before it was kept. */
    br_code: z.string().nullable(),
    /** A dynamic charge's payload location at the PSP (URL without scheme); null for a static one. */
    location: z.string().nullable(),
    /** The BR Code's QR image as a PNG data URI (null when there is no BR Code). */
    qr_code_data_uri: z.string().nullable(),
    /** Where the QR image is served (PNG; `?format=svg` for SVG), with this API's credential. */
    qr_code_url: z.string().nullable(),
  })
  .meta({ id: 'PixChargeStatus' });

type Row = { charge_id: string; consumer_id: string; br_code: string | null; location: string | null; status: string; amount_minor: string; currency: string; wallet_id: string; created_at: string; settled_at: string | null; transaction_id: string | null; client_request_id: string | null; txid: string; kind: 'dynamic' | 'static'; end_to_end_id: string | null; expires_at: string; account_id: string; psp: 'sandbox' | 'live' };

const COLUMNS = `id AS charge_id, consumer_id, br_code, location, status, amount_minor::text, currency, wallet_id, ${TS('created_at')} AS created_at, ${TS('settled_at')} AS settled_at, transaction_id, client_request_id, txid, kind, end_to_end_id, ${TS('expires_at')} AS expires_at, account_id, psp`;

function statusOf(r: Row, now: Date): string {
  if (r.status === 'pending' && Date.parse(r.expires_at) <= now.getTime()) return 'expired';
  return r.status;
}

function message(status: string, r: Row, provider: { result: string } | null): string {
  if (status === 'settled') return `Paid: end-to-end id ${r.end_to_end_id}; the wallet was credited.`;
  if (status === 'expired') return 'Expired before anyone paid it.';
  if (provider?.result === 'CONCLUIDA') return 'The PSP reports the charge paid; the payment is being recorded.';
  if (r.kind === 'static') return 'Waiting for a payer; a static charge is not registered at the PSP, so it was not consulted.';
  return 'Waiting for the payer.';
}

async function view(deps: AppDeps, r: Row, provider: { result: string; identity_verified: boolean } | null) {
  const status = statusOf(r, deps.now());
  return {
    charge_id: r.charge_id, status, amount_minor: Number(r.amount_minor), currency: r.currency, wallet_id: r.wallet_id, created_at: r.created_at, settled_at: r.settled_at,
    transaction_id: r.transaction_id, client_request_id: r.client_request_id, provider, status_message: message(status, r, provider), txid: r.txid, kind: r.kind, end_to_end_id: r.end_to_end_id,
    br_code: r.br_code, location: r.location, qr_code_data_uri: r.br_code ? await qrPngDataUri(r.br_code) : null,
    qr_code_url: r.br_code ? `${deps.baseUrl}/v1/consumers/${encodeURIComponent(r.consumer_id)}/pix/charges/${r.charge_id}/qr-code` : null,
  };
}

export async function readCharges(deps: AppDeps, auth: ApiKeyAuth, consumerId: string, reference: string): Promise<Row[]> {
  const { rows } = await deps.db.query<Row>(
    `SELECT ${COLUMNS} FROM pix_charges WHERE consumer_id = $1 AND org_id = $2 AND project_id = $3 AND (id = $4 OR txid = $4 OR transaction_id = $4 OR client_request_id = $4) ORDER BY created_at, id LIMIT 10`,
    [consumerId, auth.orgId, auth.projectId, reference],
  );
  return rows;
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
      const a = await loadAccount(deps, auth, params.consumerId);
      const wallet = Object.entries(a.fundingSources).find(([, active]) => active)?.[0];
      if (!wallet) throw new ApiError(409, 'wallet_not_active', 'the consumer has no active Pix funding source');
      const id = newId('pxc');
      const now = deps.now();
      const expiresIn = body.expires_in_seconds ?? 3600;
      const chave = Object.keys(a.keys)[0];
      if (!chave) throw new ApiError(409, 'pix_key_required', 'a charge needs a Pix key on the account (the BR Code names it, or the PSP charges to it): register one first');
      let txid: string;
      let brCode: string | null;
      let location: string | null = null;
      if (body.static) {
        txid = body.txid ?? randomString(25);
        const holder = (await readConsumer(deps, auth, a.consumerId))?.display_name ?? '';
        brCode = staticBrCode({ key: chave, txid, amount: minorToValor(BigInt(body.amount_minor)), merchantName: emvText(holder, 25, 'RECEBEDOR'), merchantCity: body.merchant_city ?? 'SAO PAULO' });
      } else {
        txid = randomString(32);
        try {
          // The PSP draws the payload location and the BR Code naming it; we keep what it answered.
          const cob = await pspOf(deps, a.psp).createCob({ txid, valor: minorToValor(BigInt(body.amount_minor)), chave, expiracao: expiresIn });
          brCode = cob.pixCopiaECola;
          location = cob.location;
        } catch (err) {
          notConfigured(err);
          const e = err instanceof PspError ? err : null;
          throw new ApiError(502, 'provider_error', 'the PSP did not create the charge', { retriable: e?.reason !== 'refused', provider_status: e?.status ?? null, provider_code: e?.code ?? null });
        }
      }
      await run(pixChargeDecider, pixChargeStream(id), {
        type: 'create',
        data: {
          charge_id: id, org_id: auth.orgId, project_id: auth.projectId, consumer_id: a.consumerId, account_id: a.accountId, psp: a.psp, wallet_id: wallet,
          amount_minor: String(body.amount_minor), currency: 'BRL', txid, kind: body.static ? 'static' : 'dynamic', transaction_id: body.transaction_id ?? null,
          client_request_id: body.static ? null : (body.client_request_id ?? null), expires_at: new Date(now.getTime() + expiresIn * 1000).toISOString(), created_at: now.toISOString(),
          br_code: brCode, location,
        },
      }, { expectedRevision: 'no_stream' });
      const [row] = await readCharges(deps, auth, a.consumerId, id);
      return { status: 201, body: await view(deps, row!, null) };
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
      if (!(await readConsumer(deps, auth, params.consumerId))) throw consumerNotFound();
      const rows = await readCharges(deps, auth, params.consumerId, params.reference);
      if (rows.length === 0) throw new ApiError(404, 'not_found', 'charge not found');
      if (new Set(rows.map((r) => r.charge_id)).size > 1) throw new ApiError(409, 'charge_reference_ambiguous', 'the reference matches several charges; use the charge id', { matches: rows.length, charge_ids: rows.map((r) => r.charge_id) });
      let row = rows[0]!;
      if (row.kind === 'static' || statusOf(row, deps.now()) !== 'pending') return { status: 200, body: await view(deps, row, null) };
      let cob: PspCob;
      try {
        cob = await pspOf(deps, row.psp).getCob(row.txid);
      } catch (err) {
        notConfigured(err);
        throw new ApiError(502, 'provider_error', 'the PSP did not answer about this charge', { reason: 'provider_did_not_answer', retriable: true });
      }
      if (cob.txid !== row.txid) throw new ApiError(502, 'provider_error', 'the PSP answered for a different cob', { reason: 'provider_answered_for_different_cob', retriable: true });
      const { rows: acc } = await deps.db.query<AccountRow>('SELECT consumer_id, org_id, project_id, account_id, psp, psp_account FROM pix_accounts WHERE account_id = $1', [row.account_id]);
      const keys = await deps.db.query('SELECT 1 FROM pix_keys WHERE consumer_id = $1 AND key = $2', [params.consumerId, cob.chave]);
      // A Pix the PSP reports for this cob that we were not notified of: record it now.
      if (acc[0] && cob.pix.length > 0) {
        const runner: Runner = (d, s, c, o) => run(d, s, c, o);
        for (const p of cob.pix) if (p.account === acc[0].psp_account) await recordReceivement(deps, runner, acc[0], p, 'lookup');
        row = (await readCharges(deps, auth, params.consumerId, row.charge_id))[0]!;
      }
      return { status: 200, body: await view(deps, row, { result: cob.status, identity_verified: keys.rowCount === 1 }) };
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
      if (!(await readConsumer(deps, auth, params.consumerId))) throw consumerNotFound();
      const rows = await readCharges(deps, auth, params.consumerId, params.reference);
      if (rows.length === 0) throw new ApiError(404, 'not_found', 'charge not found');
      if (new Set(rows.map((r) => r.charge_id)).size > 1) throw new ApiError(409, 'charge_reference_ambiguous', 'the reference matches several charges; use the charge id', { matches: rows.length, charge_ids: rows.map((r) => r.charge_id) });
      const brCode = rows[0]!.br_code;
      if (!brCode) throw new ApiError(404, 'not_found', 'this charge was recorded without a BR Code');
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
      const a = await loadAccount(deps, auth, body.consumer_id);
      let input: { txid?: string; chave?: string; valor?: string; pixCopiaECola?: string; entregas?: number } = { entregas: body.deliveries ?? 1 };
      if (body.br_code !== undefined) input = { ...input, pixCopiaECola: body.br_code, ...(body.amount_minor !== undefined ? { valor: minorToValor(BigInt(body.amount_minor)) } : {}) };
      else if (body.charge_reference !== undefined) {
        const rows = await readCharges(deps, auth, body.consumer_id, body.charge_reference);
        if (rows.length === 0) throw new ApiError(404, 'not_found', 'charge not found');
        if (rows.length > 1) throw new ApiError(409, 'charge_reference_ambiguous', 'the reference matches several charges');
        const c = rows[0]!;
        input = c.kind === 'dynamic' ? { ...input, txid: c.txid } : { ...input, txid: c.txid, chave: Object.keys(a.keys)[0] ?? '', valor: minorToValor(BigInt(body.amount_minor ?? c.amount_minor)) };
      } else input = { ...input, chave: body.key!, valor: minorToValor(BigInt(body.amount_minor ?? 100)), ...(body.txid ? { txid: body.txid } : {}) };
      try {
        const r = await pspOf(deps, 'sandbox').simulatePayment(input);
        return { status: 201, body: { end_to_end_id: r.endToEndId, deliveries: r.deliveries } };
      } catch (err) {
        throw new ApiError(422, 'payment_refused', 'the sandbox PSP refused the payment', { provider_code: err instanceof PspError ? err.code : null });
      }
    },
  });
}
