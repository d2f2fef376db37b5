import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { type PixAccount, pixAccountDecider, pixAccountStream, recentVerification, CONTACT_VERIFICATION_WINDOW } from '../../commands/pix.ts';
import { canonicalAnyKey, canonicalKey, KEY_TYPES } from '../../commands/pix-format.ts';
import type { PspKey } from '../adapters/psp/port.ts';
import type { ApiKeyAuth } from './auth.ts';
import { ApiError, RawHttpError } from './errors.ts';
import { ConsumerParams } from './schemas.ts';
import { accountMasked, loadAccount, notConfigured, pspOf, PspError } from '../usecases/pix-common.ts';
import { type AppDeps, type Ctx, defineRoute } from './route.ts';

// Pix keys of a consumer's partner account. The PSP's directory is the truth;
// our key cache (projection `pix_keys`) is reconciled against its inventory on
// every listing, after a deletion, and before a registration when an earlier
// one ended without an answer (the uncertain case).

const KeyEntry = z.object({ key: z.string(), key_type: z.string() });

const providerRefused = (err: PspError) => new ApiError(422, 'pix_key_provider_refused', 'the PSP refused the request', { provider_status: err.status, provider_code: err.code });
const providerTransient = (err: PspError) => new ApiError(502, 'pix_key_provider_unavailable', 'the PSP is unavailable; retry later', { provider_status: err.status, provider_code: err.code });

async function readKeys(deps: AppDeps, consumerId: string): Promise<{ key: string; key_type: string }[]> {
  const { rows } = await deps.db.query<{ key: string; key_type: string }>('SELECT key, key_type FROM pix_keys WHERE consumer_id = $1 ORDER BY registered_at, key', [consumerId]);
  return rows;
}

type AnyCtx = Ctx<unknown, unknown, unknown, ApiKeyAuth>;

/** Sets the key cache to the PSP's inventory (an event only when they differ or a registration was uncertain). */
async function reconcile(ctx: AnyCtx, a: PixAccount, inventory: PspKey[]): Promise<PixAccount> {
  const r = await ctx.run(pixAccountDecider, pixAccountStream(a.consumerId), { type: 'reconcile', tenant: ctx.auth, inventory });
  return r.state as PixAccount;
}

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
    responses: { 200: z.object({ account_masked: z.string(), keys: z.array(KeyEntry), count: z.number().int() }) },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [422, 'no_partner_account'], [422, 'pix_key_provider_refused'], [501, 'not_wired'], [502, 'pix_key_provider_unavailable']],
    async handler(ctx) {
      const a = await loadAccount(ctx.deps, ctx.auth, ctx.params.consumerId);
      let inventory: PspKey[];
      try {
        inventory = await pspOf(ctx.deps, a.psp).listKeys(a.pspAccount);
      } catch (err) {
        notConfigured(err);
        if (err instanceof PspError && err.reason === 'refused') throw providerRefused(err);
        if (err instanceof PspError) throw providerTransient(err);
        throw err;
      }
      await reconcile(ctx as unknown as AnyCtx, a, inventory);
      const keys = await readKeys(ctx.deps, a.consumerId);
      return { status: 200, body: { account_masked: accountMasked(a), keys, count: keys.length } };
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
      .strictObject({ key_type: z.enum(KEY_TYPES), key: z.string().max(200).optional() })
      .superRefine((b, c) => {
        if (b.key_type === 'EVP' && b.key !== undefined) c.addIssue({ code: 'custom', path: ['key'], message: 'an EVP key is drawn by the PSP: send no key' });
        if (b.key_type !== 'EVP' && b.key === undefined) c.addIssue({ code: 'custom', path: ['key'], message: `key is required for ${b.key_type}` });
      }),
    responses: { 201: z.object({ key: z.string(), key_type: z.string(), account_masked: z.string(), cache_filled: z.boolean(), reconciled: z.boolean() }) },
    errors: [
      [400, 'invalid_body'], [400, 'pix_key_invalid'], [401, 'unauthorized'], [403, 'forbidden'], [403, 'pix_key_document_mismatch'], [404, 'not_found'],
      [409, 'pix_key_ownership_unverified'], [409, 'pix_key_registration_uncertain'], [422, 'no_partner_account'], [422, 'pix_key_provider_refused'],
      [500, 'framework default {statusCode, error, message, code}'], [501, 'not_wired'], [502, 'pix_key_provider_unavailable'],
    ],
    async handler(ctx) {
      const { deps, auth, params, body } = ctx;
      const c = ctx as unknown as AnyCtx;
      let key: string | null = null;
      if (body.key_type !== 'EVP') {
        const k = canonicalKey(body.key_type, body.key!);
        if (!k.ok) throw new ApiError(400, 'pix_key_invalid', k.reason, { key_type: body.key_type });
        key = k.key;
      }
      let a = await loadAccount(deps, auth, params.consumerId);
      if ((body.key_type === 'CPF' || body.key_type === 'CNPJ') && (a.documentType !== body.key_type || a.document !== key)) {
        throw new ApiError(403, 'pix_key_document_mismatch', `a ${body.key_type} key must be the account holder's own document`, { key_type: body.key_type });
      }
      if (body.key_type === 'EMAIL' || body.key_type === 'PHONE') {
        const channel = body.key_type === 'EMAIL' ? 'email' : 'phone';
        if (!recentVerification(a, channel, key!, deps.now().toISOString())) {
          throw new ApiError(409, 'pix_key_ownership_unverified', `verify the ${channel} first: POST /v1/consumers/{consumerId}/pix/contact-verifications`, { channel, endpoint: key, window: CONTACT_VERIFICATION_WINDOW });
        }
      }
      const psp = pspOf(deps, a.psp);
      const uncertain = (inventory: PspKey[] | null) =>
        new ApiError(409, 'pix_key_registration_uncertain', 'the PSP did not say whether the key was registered; list keys instead of repeating', { retry_safe: false, inventory_known: inventory !== null, inventory_count: inventory?.length ?? null });

      // An earlier registration ended without an answer: settle it against the inventory first.
      if (a.uncertain.length > 0) {
        let inventory: PspKey[] | null = null;
        try {
          inventory = await psp.listKeys(a.pspAccount);
        } catch {
          throw uncertain(null);
        }
        a = await reconcile(c, a, inventory);
        if (key !== null && a.keys[key]) return { status: 201, body: { key, key_type: body.key_type, account_masked: accountMasked(a), cache_filled: true, reconciled: true } };
      }
      // An EVP found by a reconciliation of an uncertain EVP registration is the one this repeat asked for.
      if (body.key_type === 'EVP' && a.pendingEvp.length > 0) {
        const evp = a.pendingEvp[0]!;
        await c.run(pixAccountDecider, pixAccountStream(a.consumerId), { type: 'key_registered', tenant: auth, key: evp, keyType: 'EVP' });
        return { status: 201, body: { key: evp, key_type: 'EVP', account_masked: accountMasked(a), cache_filled: true, reconciled: true } };
      }

      let registered: PspKey;
      try {
        registered = await psp.registerKey(a.pspAccount, { keyType: body.key_type, ...(key !== null ? { key } : {}) });
      } catch (err) {
        notConfigured(err);
        if (!(err instanceof PspError)) throw err;
        if (err.reason === 'refused' && err.code === 'ENTRY_ALREADY_EXISTS' && key !== null) {
          // Already this account's key (an earlier attempt went through): adopt it from the inventory.
          const inventory = await psp.listKeys(a.pspAccount).catch(() => null);
          if (inventory?.some((k) => k.key === key)) {
            const s = await reconcile(c, a, inventory);
            return { status: 201, body: { key, key_type: body.key_type, account_masked: accountMasked(s), cache_filled: true, reconciled: true } };
          }
        }
        if (err.reason === 'refused') throw providerRefused(err);
        if (err.reason === 'unavailable') throw providerTransient(err);
        if (err.reason === 'unreachable') throw new ApiError(502, 'pix_key_provider_unavailable', 'the PSP could not be reached; nothing was sent');
        // The PSP may have registered it: record that the outcome is unknown.
        const markUncertain = () => c.run(pixAccountDecider, pixAccountStream(a.consumerId), { type: 'key_uncertain', tenant: auth, keyType: body.key_type, key });
        if (err.reason === 'malformed') {
          await markUncertain();
          // The spec's framework-default shape for this operation's failures.
          throw new RawHttpError(500, { statusCode: 500, error: 'Internal Server Error', message: 'the PSP answered the registration with a body that cannot be read; list keys to see whether it was registered', code: 'pix_key_provider_malformed' });
        }
        let inventory: PspKey[] | null = null;
        try {
          inventory = await psp.listKeys(a.pspAccount);
        } catch {
          inventory = null;
        }
        if (inventory && key !== null && !inventory.some((k) => k.key === key)) {
          // Provably not registered: the inventory answered and the key is absent. Retrying is safe.
          throw new ApiError(502, 'pix_key_provider_unavailable', 'the PSP did not answer and the key is not registered; retry', { verified_not_registered: true, inventory_count: inventory.length });
        }
        await markUncertain();
        throw uncertain(inventory);
      }
      const r = await c.run(pixAccountDecider, pixAccountStream(a.consumerId), { type: 'key_registered', tenant: auth, key: registered.key, keyType: registered.keyType });
      const cached = (await deps.db.query('SELECT 1 FROM pix_keys WHERE consumer_id = $1 AND key = $2', [a.consumerId, registered.key])).rowCount === 1;
      return { status: 201, body: { key: registered.key, key_type: registered.keyType, account_masked: accountMasked(r.state as PixAccount), cache_filled: cached, reconciled: false } };
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
    responses: { 200: z.object({ key: z.string(), account_masked: z.string(), deleted: z.literal(true), cache_cleared: z.boolean(), cache_refilled_with: z.string().nullable() }) },
    errors: [[400, 'invalid_params'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'not_found'], [422, 'no_partner_account'], [422, 'pix_key_provider_refused'], [501, 'not_wired'], [502, 'pix_key_provider_unavailable']],
    async handler(ctx) {
      const { deps, auth, params } = ctx;
      const c = ctx as unknown as AnyCtx;
      const key = canonicalAnyKey(params.key);
      const a = await loadAccount(deps, auth, params.consumerId);
      const psp = pspOf(deps, a.psp);
      try {
        await psp.deleteKey(a.pspAccount, key);
      } catch (err) {
        notConfigured(err);
        if (!(err instanceof PspError)) throw err;
        if (err.reason === 'refused') throw providerRefused(err);
        if (err.reason === 'timeout' || err.reason === 'malformed') throw new ApiError(502, 'pix_key_provider_unavailable', 'the outcome of the deletion is unknown; list keys to confirm', { outcome: 'unknown' });
        throw providerTransient(err);
      }
      const wasCached = key in a.keys;
      let s = (await c.run(pixAccountDecider, pixAccountStream(a.consumerId), { type: 'key_deleted', tenant: auth, key })).state as PixAccount;
      try {
        s = await reconcile(c, s, await psp.listKeys(a.pspAccount));
      } catch {
        // The refill is best effort; the next listing reconciles.
      }
      const remaining = await readKeys(deps, a.consumerId);
      return { status: 200, body: { key, account_masked: accountMasked(s), deleted: true as const, cache_cleared: wasCached, cache_refilled_with: remaining[0]?.key ?? null } };
    },
  });
}
