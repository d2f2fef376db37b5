import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { PixAccount } from '../../commands/pix.ts';
import { maskAccount } from '../../commands/pix-format.ts';
import { confirmContactVerification, deactivateFundingSource, openPartnerAccount, startContactVerification } from '../usecases/pix-accounts.ts';
import { accountMasked, loadAccount } from '../usecases/pix-common.ts';
import { type AppDeps, defineRoute } from './kernel/route.ts';
import { ConsumerParams, Timestamp } from './kernel/schemas.ts';

// How a consumer gets a Pix partner account (the spec leaves it open; see
// docs/decisions.md): the PSP opens it for a consumer whose document (CPF or
// CNPJ) its KYC verifies, and a Pix funding source (the consumer's BRL Pix
// wallet) is activated with it. On test keys a sandbox route opens one with a
// declared document, like the x402 faucet. E-mail and phone keys need a recent
// contact verification: a one-time code sent to the endpoint and confirmed.
// The logic is src/usecases/pix-accounts.ts.

const PartnerAccount = z
  .object({
    consumer_id: z.string(),
    account_id: z.string(),
    account_masked: z.string(),
    psp: z.enum(['sandbox', 'live']).describe('The PSP that holds the account: `sandbox` for test credentials, `live` for live ones.'),
    document_type: z.enum(['CPF', 'CNPJ']).describe("The holder's document: `CPF` (a person) or `CNPJ` (a company)."),
    funding_sources: z.array(z.object({ funding_source_id: z.string(), currency: z.string(), status: z.enum(['active', 'inactive']).describe('`active` funds mandates; `inactive` once deactivated.') })),
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
const Verification = z.object({ verification_id: z.string(), channel: z.enum(['email', 'phone']), endpoint: z.string(), expires_at: Timestamp, window: z.string(), verified_at: Timestamp.nullable(), sandbox_code: z.string().optional() });
const OPEN_ERRORS = [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [409, 'partner_account_exists'], [422, 'partner_account_refused'], [501, 'not_wired'], [502, 'provider_error']] as const;

export async function pixAccountRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  partnerAccountRoutes(app, deps);
  contactVerificationRoutes(app, deps);
}

/** Open the partner account (at the PSP, or in the sandbox), read it, deactivate a funding source. */
function partnerAccountRoutes(app: FastifyInstance, deps: AppDeps): void {
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
    errors: OPEN_ERRORS,
    idempotent: true,
    async handler({ deps, auth, params, body, run }) {
      return { status: 201, body: view(await openPartnerAccount(deps, run, auth, params.consumerId, body.document, 'psp_kyc')) };
    },
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
    errors: [...OPEN_ERRORS, [403, 'sandbox_funding_not_permitted']],
    async handler({ deps, auth, body, run }) {
      return { status: 201, body: view(await openPartnerAccount(deps, run, auth, body.consumer_id, body.document, 'sandbox')) };
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
    responses: { 200: z.object({ funding_source_id: z.string(), status: z.literal('inactive').describe('The funding source is `inactive`: it funds nothing from now.'), changed: z.boolean() }) },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [404, 'funding_source_not_found'], [422, 'no_partner_account']],
    async handler({ deps, auth, params, body, run }) {
      const changed = await deactivateFundingSource(deps, run, auth, params.consumerId, params.fundingSourceId, body.reason ?? null);
      return { status: 200, body: { funding_source_id: params.fundingSourceId, status: 'inactive' as const, changed } };
    },
  });
}

/** A contact verification of an e-mail or phone key: started, then confirmed with its code. */
function contactVerificationRoutes(app: FastifyInstance, deps: AppDeps): void {
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
      return { status: 201, body: await startContactVerification(deps, run, auth, params.consumerId, body.channel, body.endpoint) };
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
      return { status: 200, body: await confirmContactVerification(deps, run, auth, params.consumerId, params.verificationId, body.code) };
    },
  });
}

export { accountMasked };
