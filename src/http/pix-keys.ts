import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { KEY_TYPES } from '../../commands/pix-format.ts';
import { ConsumerParams } from './kernel/schemas.ts';
import { deletePixKey, listPixKeys, registerPixKey } from '../usecases/pix-keys.ts';
import { type AppDeps, defineRoute } from './kernel/route.ts';

// Pix keys of a consumer's partner account, read from and written to the
// PSP's directory, the key cache reconciled with it: the routes; the use cases
// are src/usecases/pix-keys.ts.

const PixKey = z.string().describe('The Pix key: a CPF or CNPJ (digits), an e-mail, a phone (+55…) or a random key (EVP, a UUID).');
const KeyEntry = z.object({ key: PixKey, key_type: z.string() });

export async function pixKeyRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/consumers/:consumerId/pix-keys',
    operationId: 'listPixKeys',
    summary: "The account's Pix keys, read from the PSP's directory; the key cache is reconciled with it",
    tags: ['pix'],
    auth: 'api_key',
    scope: 'pix:read',
    params: ConsumerParams,
    responses: { 200: z.object({ account_masked: z.string(), keys: z.array(KeyEntry).describe("The account's Pix keys in the PSP's directory."), count: z.number().int().describe('How many keys (the length of `keys`).') }) },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [422, 'no_partner_account'], [422, 'pix_key_provider_refused'], [501, 'not_wired'], [502, 'pix_key_provider_unavailable']],
    async handler({ auth, params, run, deps }) {
      return { status: 200, body: await listPixKeys(deps, run, auth, params.consumerId) };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/consumers/:consumerId/pix-keys',
    operationId: 'registerPixKey',
    summary: 'Register a Pix key at the PSP (key forbidden for EVP, required otherwise)',
    tags: ['pix'],
    auth: 'api_key',
    scope: 'pix:write',
    params: ConsumerParams,
    body: z
      .strictObject({ key_type: z.enum(KEY_TYPES), key: z.string().max(200).optional().describe('The key to register; absent for `EVP` (the PSP makes a random key).') })
      .superRefine((b, c) => {
        if (b.key_type === 'EVP' && b.key !== undefined) c.addIssue({ code: 'custom', path: ['key'], message: 'an EVP key is drawn by the PSP: send no key' });
        if (b.key_type !== 'EVP' && b.key === undefined) c.addIssue({ code: 'custom', path: ['key'], message: `key is required for ${b.key_type}` });
      }),
    responses: { 201: z.object({ key: PixKey, key_type: z.string(), account_masked: z.string(), cache_filled: z.boolean(), reconciled: z.boolean() }) },
    errors: [
      [400, 'invalid_body'], [400, 'pix_key_invalid'], [401, 'unauthorized'], [403, 'forbidden'], [403, 'pix_key_document_mismatch'], [404, 'not_found'],
      [409, 'pix_key_ownership_unverified'], [409, 'pix_key_registration_uncertain'], [422, 'no_partner_account'], [422, 'pix_key_provider_refused'],
      [500, 'pix_key_provider_malformed'], [501, 'not_wired'], [502, 'pix_key_provider_unavailable'],
    ],
    async handler({ auth, params, body, run, deps }) {
      return { status: 201, body: await registerPixKey(deps, run, auth, params.consumerId, body) };
    },
  });

  defineRoute(app, deps, {
    method: 'DELETE',
    url: '/v1/consumers/:consumerId/pix-keys/:key',
    operationId: 'deletePixKey',
    summary: 'Delete a Pix key at the PSP; the key cache is cleared and refilled from the inventory',
    tags: ['pix'],
    auth: 'api_key',
    scope: 'pix:write',
    params: ConsumerParams.extend({ key: z.string().trim().min(1).max(200) }),
    responses: { 200: z.object({ key: PixKey, account_masked: z.string(), deleted: z.literal(true), cache_cleared: z.boolean(), cache_refilled_with: z.string().nullable() }) },
    errors: [[400, 'invalid_params'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [422, 'no_partner_account'], [422, 'pix_key_provider_refused'], [501, 'not_wired'], [502, 'pix_key_provider_unavailable']],
    async handler({ auth, params, run, deps }) {
      return { status: 200, body: await deletePixKey(deps, run, auth, params.consumerId, params.key) };
    },
  });
}
