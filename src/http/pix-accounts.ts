import { createHash, randomInt } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { CONTACT_CODE_MAX_ATTEMPTS, CONTACT_CODE_TTL_MS, CONTACT_VERIFICATION_WINDOW, type PixAccount, pixAccountDecider, pixAccountStream } from '../../commands/pix.ts';
import { canonicalKey, documentDigits, documentType, maskAccount } from '../../commands/pix-format.ts';
import { loadState } from '../eventstore/handler.ts';
import type { ApiKeyAuth } from './auth.ts';
import { readConsumer } from '../usecases/consumers.ts';
import { ApiError } from './errors.ts';
import { newId } from './ids.ts';
import { ConsumerParams } from './schemas.ts';
import { accountMasked, consumerNotFound, loadAccount, notConfigured, pspNameFor, pspOf, PspError } from '../usecases/pix-common.ts';
import { type AppDeps, type Ctx, defineRoute } from './route.ts';
import { Timestamp } from './schemas.ts';

// How a consumer gets a Pix partner account (the spec leaves it open; see
// docs/decisions.md): the PSP opens it for a consumer whose document (CPF or
// CNPJ) its KYC verifies, and a Pix funding source (the consumer's BRL Pix
// wallet) is activated with it. On test keys a sandbox route opens one with a
// declared document, like the x402 faucet. E-mail and phone keys need a recent
// contact verification: a one-time code sent to the endpoint and confirmed.

const PartnerAccount = z
  .object({
    consumer_id: z.string(),
    account_id: z.string(),
    account_masked: z.string(),
    psp: z.enum(['sandbox', 'live']),
    document_type: z.enum(['CPF', 'CNPJ']),
    funding_sources: z.array(z.object({ funding_source_id: z.string(), currency: z.string(), status: z.enum(['active', 'inactive']) })),
  })
  .meta({ id: 'PixPartnerAccount' });

function view(a: PixAccount) {
  return {
    consumer_id: a.consumerId,
    account_id: a.accountId,
    account_masked: maskAccount(a.pspAccount),
    psp: a.psp,
    document_type: a.documentType,
    funding_sources: Object.entries(a.fundingSources).map(([id, active]) => ({ funding_source_id: id, currency: 'BRL', status: active ? ('active' as const) : ('inactive' as const) })),
  };
}

const Document = z.string().trim().min(11).max(18);

async function openAccount(ctx: Ctx<unknown, unknown, unknown, ApiKeyAuth>, consumerId: string, rawDocument: string, source: 'psp_kyc' | 'sandbox') {
  const { deps, auth } = ctx;
  const consumer = await readConsumer(deps, auth, consumerId);
  if (!consumer) throw consumerNotFound();
  const document = documentDigits(rawDocument);
  const type = documentType(document);
  if (!type) throw new ApiError(400, 'invalid_body', 'document is not a valid CPF or CNPJ (check digits)', { issues: [{ path: ['document'], code: 'invalid_document', message: 'not a valid CPF or CNPJ' }] });
  const existing = await loadState(deps.store, pixAccountStream(consumerId), pixAccountDecider);
  if (existing.state.status === 'open') throw new ApiError(409, 'partner_account_exists', 'the consumer already has a partner account', { account_id: existing.state.accountId });
  const pspName = source === 'sandbox' ? 'sandbox' : pspNameFor(auth);
  const psp = pspOf(deps, pspName);
  let opened;
  try {
    opened = await psp.openAccount({ document, name: consumer.display_name, verifyDocument: source === 'psp_kyc' });
  } catch (err) {
    notConfigured(err);
    if (err instanceof PspError && err.reason === 'refused') throw new ApiError(422, 'partner_account_refused', 'the PSP refused to open the account', { provider_status: err.status, provider_code: err.code });
    throw new ApiError(502, 'provider_error', 'the PSP did not open the account; retry', { retriable: true, reason: err instanceof PspError ? err.reason : 'error' });
  }
  const r = await ctx.run(pixAccountDecider, pixAccountStream(consumerId), {
    type: 'open',
    tenant: auth,
    consumerId,
    accountId: newId('pxa'),
    fundingSourceId: newId('fs'),
    psp: pspName,
    pspAccount: opened.account,
    branch: opened.branch,
    ispb: opened.ispb,
    document,
    documentType: type,
    documentSource: source,
  });
  return { status: 201, body: view(r.state as PixAccount) };
}

const codeHash = (verificationId: string, code: string) => createHash('sha256').update(`${verificationId}:${code}`).digest('hex');

export async function pixAccountRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const errors = [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [409, 'partner_account_exists'], [422, 'partner_account_refused'], [501, 'not_wired'], [502, 'provider_error']] as const;

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/consumers/:consumerId/pix/partner-account',
    operationId: 'openPixPartnerAccount',
    summary: "Open the consumer's account at the PSP (its KYC verifies the CPF or CNPJ) and activate a Pix funding source",
    tags: ['pix'],
    auth: 'api_key',
    scope: 'pix:write',
    params: ConsumerParams,
    body: z.strictObject({ document: Document }),
    responses: { 201: PartnerAccount },
    errors,
    idempotent: true,
    handler: (ctx) => openAccount(ctx, ctx.params.consumerId, ctx.body.document, 'psp_kyc'),
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/test/pix/partner-accounts',
    operationId: 'pixTestPartnerAccount',
    summary: 'Open a sandbox partner account with a declared document (test keys only)',
    tags: ['pix', 'sandbox'],
    auth: 'api_key',
    scope: 'pix:write',
    body: z.strictObject({ consumer_id: z.string().min(1).max(200), document: Document }),
    responses: { 201: PartnerAccount },
    errors: [...errors, [403, 'sandbox_funding_not_permitted']],
    async handler(ctx) {
      if (ctx.auth.environment !== 'test') throw new ApiError(403, 'sandbox_funding_not_permitted', 'sandbox partner accounts take test keys only');
      return openAccount(ctx, ctx.body.consumer_id, ctx.body.document, 'sandbox');
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/consumers/:consumerId/pix/partner-account',
    operationId: 'getPixPartnerAccount',
    summary: "The consumer's partner account and its Pix funding sources",
    tags: ['pix'],
    auth: 'api_key',
    scope: 'pix:read',
    params: ConsumerParams,
    responses: { 200: PartnerAccount },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [422, 'no_partner_account']],
    async handler({ deps, auth, params }) {
      return { status: 200, body: view(await loadAccount(deps, auth, params.consumerId)) };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/consumers/:consumerId/pix/funding-sources/:fundingSourceId/deactivate',
    operationId: 'deactivatePixFundingSource',
    summary: 'Deactivate a Pix funding source (receivement lookups then answer 409)',
    tags: ['pix'],
    auth: 'api_key',
    scope: 'pix:write',
    params: ConsumerParams.extend({ fundingSourceId: z.string().min(1).max(200) }),
    body: z.strictObject({ reason: z.string().max(500).optional() }),
    bodyOptional: true,
    responses: { 200: z.object({ funding_source_id: z.string(), status: z.literal('inactive'), changed: z.boolean() }) },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [404, 'funding_source_not_found'], [422, 'no_partner_account']],
    async handler({ deps, auth, params, body, run }) {
      await loadAccount(deps, auth, params.consumerId);
      const r = await run(pixAccountDecider, pixAccountStream(params.consumerId), { type: 'deactivate_funding_source', tenant: auth, fundingSourceId: params.fundingSourceId, reason: body.reason ?? null });
      return { status: 200, body: { funding_source_id: params.fundingSourceId, status: 'inactive' as const, changed: r.changed } };
    },
  });

  const Verification = z.object({ verification_id: z.string(), channel: z.enum(['email', 'phone']), endpoint: z.string(), expires_at: Timestamp, window: z.string(), verified_at: Timestamp.nullable(), sandbox_code: z.string().optional() });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/consumers/:consumerId/pix/contact-verifications',
    operationId: 'startPixContactVerification',
    summary: 'Send a one-time code to an e-mail or phone the consumer wants as a Pix key (the code is returned on test keys only)',
    tags: ['pix'],
    auth: 'api_key',
    scope: 'pix:write',
    params: ConsumerParams,
    body: z.strictObject({ channel: z.enum(['email', 'phone']), endpoint: z.string().min(1).max(200) }),
    responses: { 201: Verification },
    errors: [[400, 'invalid_body'], [400, 'pix_key_invalid'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [422, 'no_partner_account'], [501, 'not_wired']],
    async handler({ deps, auth, params, body, run }) {
      const c = canonicalKey(body.channel === 'email' ? 'EMAIL' : 'PHONE', body.endpoint);
      if (!c.ok) throw new ApiError(400, 'pix_key_invalid', c.reason, { key_type: body.channel === 'email' ? 'EMAIL' : 'PHONE' });
      await loadAccount(deps, auth, params.consumerId);
      // No e-mail or SMS sender is wired: a live key cannot deliver the code.
      if (auth.environment !== 'test') throw new ApiError(501, 'not_wired', 'no e-mail or SMS sender is configured for contact verification');
      const id = newId('pcv');
      const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
      const expiresAt = new Date(deps.now().getTime() + CONTACT_CODE_TTL_MS).toISOString();
      await run(pixAccountDecider, pixAccountStream(params.consumerId), { type: 'start_contact_verification', tenant: auth, verificationId: id, channel: body.channel, endpoint: c.key, codeHash: codeHash(id, code), expiresAt });
      return { status: 201, body: { verification_id: id, channel: body.channel, endpoint: c.key, expires_at: expiresAt, window: CONTACT_VERIFICATION_WINDOW, verified_at: null, sandbox_code: code } };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/consumers/:consumerId/pix/contact-verifications/:verificationId/confirm',
    operationId: 'confirmPixContactVerification',
    summary: 'Confirm the one-time code; the endpoint counts as verified for the window',
    tags: ['pix'],
    auth: 'api_key',
    scope: 'pix:write',
    params: ConsumerParams.extend({ verificationId: z.string().min(1).max(200) }),
    body: z.strictObject({ code: z.string().regex(/^\d{6}$/) }),
    responses: { 200: Verification },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [410, 'contact_verification_expired'], [409, 'contact_verification_locked'], [422, 'contact_verification_code_mismatch'], [422, 'no_partner_account']],
    async handler({ deps, auth, params, body, run }) {
      await loadAccount(deps, auth, params.consumerId);
      const r = await run(pixAccountDecider, pixAccountStream(params.consumerId), { type: 'confirm_contact_verification', tenant: auth, verificationId: params.verificationId, codeHash: codeHash(params.verificationId, body.code) });
      const v = (r.state as PixAccount).verifications[params.verificationId]!;
      if (!v.verifiedAt) throw new ApiError(422, 'contact_verification_code_mismatch', 'the code does not match', { attempts_left: Math.max(0, CONTACT_CODE_MAX_ATTEMPTS - v.attempts) });
      return { status: 200, body: { verification_id: params.verificationId, channel: v.channel, endpoint: v.endpoint, expires_at: v.expiresAt, window: CONTACT_VERIFICATION_WINDOW, verified_at: v.verifiedAt } };
    },
  });
}

export { accountMasked };
