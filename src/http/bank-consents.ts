import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { authoriseBankConsent, createBankConsent, getBankConsent, listBankConsents, refreshBankStatement, revokeBankConsent } from '../usecases/bank-consents.ts';
import { defineRoute, type AppDeps } from './kernel/route.ts';
import { IdParam, Timestamp } from './kernel/schemas.ts';

// Bank consents (open finance), under /v1/bank-consents and the deprecated
// /v1/ofb/consents (spec 4.6). The logic is src/usecases/bank-consents.ts.

const Status = z.enum(['pending', 'authorised', 'revoked', 'expired', 'consumed']);

export const BankConsentView = z
  .object({
    id: z.string(),
    bank_id: z.string(),
    consumer_id: z.string(),
    status: Status.describe('`pending` (waiting for the person at their bank: `authorisation_url`), `authorised` (usable), then `revoked`, `expired` or `consumed` (all final).'),
    scopes: z.array(z.string()),
    authorisation_url: z.string().nullable().describe("Send the person here to authorise the consent at their bank; null once it is no longer pending."),
    bank_consent_id: z.string().nullable(),
    authorized_at: Timestamp.nullable(),
    consumed_at: Timestamp.nullable(),
    revoked_at: Timestamp.nullable(),
    expires_at: Timestamp.nullable(),
    token_expires_at: Timestamp.nullable(),
    wallet_id: z.string().nullable(),
    metadata: z.record(z.string(), z.unknown()),
    created_at: Timestamp,
  })
  .meta({ id: 'BankConsent' });

const CreateBody = z.object({
  bank_id: z.string().regex(/^[a-z0-9]+(-[a-z0-9]+)*$/, 'lowercase kebab-case').max(64),
  consumer_id: z.string().min(1).max(200),
  redirect_url: z.url().max(2048),
  scopes: z.array(z.string().min(1).max(100)).min(1).max(50),
  wallet_id: z.string().min(1).max(200).optional(),
});

/** Create and read, under one base path. */
function consentRoutes(app: FastifyInstance, deps: AppDeps, base: string, legacy: boolean): void {
  const op = (name: string) => (legacy ? `${name}Legacy` : name);

  defineRoute(app, deps, {
    method: 'POST',
    url: base,
    operationId: op('createBankConsent'),
    summary: 'Initiate a consent at the bank; one open consent per consumer and bank in the organization',
    tags: ['bank-consents'],
    auth: 'api_key',
    scope: 'bank_consents:write',
    body: CreateBody,
    responses: { 201: BankConsentView },
    errors: [[400, 'invalid_body'], [400, 'unknown_bank'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [409, 'bank_consent_held_elsewhere'], [409, 'consent_active_for_consumer'], [500, 'consent_disappeared'], [502, 'bank_refused'], [502, 'bank_unavailable'], [503, 'consent_lock_timeout']],
    idempotent: true,
    async handler({ auth, body, deps, run }) {
      return { status: 201, body: await createBankConsent(deps, run, auth, body) };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: `${base}/:id`,
    operationId: op('getBankConsent'),
    summary: 'Read a consent (a sibling project’s consent answers 404)',
    tags: ['bank-consents'],
    auth: 'api_key',
    scope: 'bank_consents:read',
    deprecated: legacy,
    params: z.object({ id: IdParam }),
    responses: { 200: BankConsentView },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found']],
    async handler({ auth, params, deps }) {
      return { status: 200, body: await getBankConsent(deps, auth, params.id) };
    },
  });
}

/** The callback, the statement import and revocation, under one base path. */
function consentActionRoutes(app: FastifyInstance, deps: AppDeps, base: string, legacy: boolean): void {
  const op = (name: string) => (legacy ? `${name}Legacy` : name);

  defineRoute(app, deps, {
    method: 'POST',
    url: `${base}/:id/callback`,
    operationId: op('bankConsentCallback'),
    summary: 'Finalise with the code the bank returned: pending → authorised, tokens to the vault',
    tags: ['bank-consents'],
    auth: 'api_key',
    scope: 'bank_consents:write',
    params: z.object({ id: IdParam }),
    body: z.object({ auth_code: z.string().min(1).max(2048) }),
    responses: { 200: BankConsentView },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [409, 'invalid_transition'], [500, 'missing_bank_consent_id'], [502, 'bank_refused'], [502, 'bank_unavailable']],
    idempotent: true,
    async handler({ auth, params, body, deps, run }) {
      return { status: 200, body: await authoriseBankConsent(deps, run, auth, params.id, body.auth_code) };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: `${base}/:id/refresh-statement`,
    operationId: op('refreshBankStatement'),
    summary: 'Import the statement page by page, deduplicated by the bank’s transaction id; a retry imports only what is missing',
    tags: ['bank-consents'],
    auth: 'api_key',
    scope: 'bank_consents:write',
    params: z.object({ id: IdParam }),
    body: z.object({ since: z.iso.datetime({ offset: true }).optional(), until: z.iso.datetime({ offset: true }).optional() }),
    bodyOptional: true,
    responses: { 202: z.object({ consent_id: z.string(), run_id: z.string(), imported: z.number().int(), duplicates: z.number().int(), next_recon_cycle_within_seconds: z.number().int() }) },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [409, 'consent_not_authorised'], [500, 'consent_missing_tokens'], [502, 'bank_refused'], [502, 'bank_unavailable']],
    async handler({ auth, params, body, deps, run }) {
      return { status: 202, body: await refreshBankStatement(deps, run, auth, params.id, body) };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: `${base}/:id/revoke`,
    operationId: op('revokeBankConsent'),
    summary: 'Revoke: the bank-side consent is deleted and the slot released',
    tags: ['bank-consents'],
    auth: 'api_key',
    scope: 'bank_consents:write',
    params: z.object({ id: IdParam }),
    responses: { 200: BankConsentView },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [409, 'invalid_transition'], [502, 'bank_refused'], [502, 'bank_unavailable']],
    idempotent: true,
    async handler({ auth, params, deps, run }) {
      return { status: 200, body: await revokeBankConsent(deps, run, auth, params.id) };
    },
  });
}

export async function bankConsentRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  for (const base of ['/v1/bank-consents', '/v1/ofb/consents']) {
    const legacy = base === '/v1/ofb/consents';
    consentRoutes(app, deps, base, legacy);
    consentActionRoutes(app, deps, base, legacy);
  }

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/bank-consents',
    operationId: 'listBankConsents',
    summary: 'List consents of the project, newest first',
    tags: ['bank-consents'],
    auth: 'api_key',
    scope: 'bank_consents:read',
    query: z.object({ consumer_id: z.string().max(200).optional(), status: Status.optional(), limit: z.coerce.number().int().min(1).max(200).default(50) }),
    responses: { 200: z.object({ consents: z.array(BankConsentView) }) },
    errors: [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden']],
    async handler({ auth, query, deps }) {
      return { status: 200, body: { consents: await listBankConsents(deps, auth, query) } };
    },
  });
}
