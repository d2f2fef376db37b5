import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { consentDecider, consentStream, type Consent, type ConsentState, orphanDecider, orphanStream, ownConsent, slotDecider, slotStream, illegal } from '../../commands/bank-consent.ts';
import { consumerDecider, consumerStream, ownConsumer } from '../../commands/consumer.ts';
import { BankError, type Bank } from '../adapters/bank/port.ts';
import { loadState, Rejection } from '../eventstore/handler.ts';
import { ApiError } from './errors.ts';
import { newId } from './ids.ts';
import { defineRoute, type AppDeps, type Ctx } from './route.ts';
import { IdParam, Timestamp, isoText as TS } from './schemas.ts';
import type { ApiKeyAuth } from './auth.ts';

// Bank consents (open finance), under /v1/bank-consents and the deprecated
// /v1/ofb/consents (spec 4.6).

export const RECON_CYCLE_SECONDS = 3_600;

export const BankConsentView = z
  .object({
    id: z.string(),
    bank_id: z.string(),
    consumer_id: z.string(),
    status: z.enum(['pending', 'authorised', 'revoked', 'expired', 'consumed']),
    scopes: z.array(z.string()),
    authorisation_url: z.string().nullable(),
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
type View = z.infer<typeof BankConsentView>;
const COLUMNS = `id, bank_id, consumer_id, status, scopes, authorisation_url, bank_consent_id, ${TS('authorized_at')} AS authorized_at, ${TS('consumed_at')} AS consumed_at,
  ${TS('revoked_at')} AS revoked_at, ${TS('expires_at')} AS expires_at, ${TS('token_expires_at')} AS token_expires_at, wallet_id, metadata, ${TS('created_at')} AS created_at`;

async function readConsent(deps: AppDeps, auth: ApiKeyAuth, id: string): Promise<View | undefined> {
  const { rows } = await deps.db.query<View>(`SELECT ${COLUMNS} FROM bank_consents WHERE id = $1 AND org_id = $2 AND project_id = $3`, [id, auth.orgId, auth.projectId]);
  return rows[0];
}

const notFound = () => new ApiError(404, 'not_found', 'bank consent not found');

function bankOf(deps: AppDeps, bankId: string): Bank {
  const bank = deps.banks.get(bankId);
  if (!bank) throw new ApiError(400, 'unknown_bank', `no bank is configured with bank_id ${bankId}`, { bank_id: bankId });
  return bank;
}

function bankFailure(err: unknown, what: string): never {
  if (err instanceof BankError) throw new ApiError(502, err.reason === 'refused' ? 'bank_refused' : 'bank_unavailable', `${what}: ${err.message}`, { reason: err.reason, ...(err.status ? { bank_status: err.status } : {}) });
  throw err;
}

type C = Ctx<{ id: string }, unknown, unknown, ApiKeyAuth>;

async function view(ctx: C, id: string): Promise<View> {
  const v = await readConsent(ctx.deps, ctx.auth, id);
  if (!v) throw notFound();
  return v;
}

export async function bankConsentRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const CreateBody = z.object({
    bank_id: z.string().regex(/^[a-z0-9]+(-[a-z0-9]+)*$/, 'lowercase kebab-case').max(64),
    consumer_id: z.string().min(1).max(200),
    redirect_url: z.url().max(2048),
    scopes: z.array(z.string().min(1).max(100)).min(1).max(50),
    wallet_id: z.string().min(1).max(200).optional(),
  });

  for (const base of ['/v1/bank-consents', '/v1/ofb/consents']) {
    const legacy = base === '/v1/ofb/consents';
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
      async handler(ctx) {
        const { auth, body, deps } = ctx;
        const bank = bankOf(deps, body.bank_id);
        try {
          ownConsumer((await loadState(deps.store, consumerStream(body.consumer_id), consumerDecider)).state, auth);
        } catch {
          throw new ApiError(404, 'not_found', 'consumer not found', { field: 'consumer_id' });
        }
        const slot = slotStream(auth.orgId, body.consumer_id, body.bank_id);
        const held = (holder: { projectId: string; consentId: string }) =>
          holder.projectId === auth.projectId
            ? new ApiError(409, 'consent_active_for_consumer', 'this project already holds an open consent for the consumer at this bank; revoke it first', { consent_id: holder.consentId })
            : new ApiError(409, 'bank_consent_held_elsewhere', 'another project of the organization holds an open consent for this consumer at this bank', {
                remediation: 'revoke the open consent from the project that holds it, then retry',
                retriable: false,
              });
        const before = (await loadState(deps.store, slot, slotDecider)).state;
        if (before.holder) throw held(before.holder);
        const consentId = newId('ofb');
        let bc;
        try {
          bc = await bank.createConsent({ scopes: body.scopes, redirectUrl: body.redirect_url, consumerRef: body.consumer_id });
        } catch (err) {
          bankFailure(err, 'the bank refused or could not be reached; nothing was written');
        }
        // The bank-side consent exists now: take the slot, or record the orphan.
        const orphan = async (reason: string) => {
          await ctx.run(orphanDecider, orphanStream(auth.orgId), { type: 'record', bankId: body.bank_id, bankConsentId: bc.bankConsentId, consumerId: body.consumer_id, reason }, { expectedRevision: 'any' });
        };
        try {
          await ctx.run(slotDecider, slot, { type: 'claim', consentId, projectId: auth.projectId }, { serialize: true, maxAttempts: 10 });
        } catch (err) {
          if (err instanceof Rejection && err.code === 'slot_taken') {
            await orphan('slot_taken');
            throw held((err.details as { holder: { projectId: string; consentId: string } }).holder);
          }
          await orphan('consent_lock_timeout');
          throw new ApiError(503, 'consent_lock_timeout', 'the consent slot could not be taken in time; a bank-side consent was created and recorded as an orphan', { retriable: true });
        }
        await ctx.run(
          consentDecider,
          consentStream(consentId),
          {
            type: 'initiate',
            data: {
              consent_id: consentId,
              org_id: auth.orgId,
              project_id: auth.projectId,
              consumer_id: body.consumer_id,
              bank_id: body.bank_id,
              bank_consent_id: bc.bankConsentId,
              scopes: body.scopes,
              redirect_url: body.redirect_url,
              authorisation_url: bank.authorisationUrl(bc.bankConsentId, body.redirect_url, consentId),
              wallet_id: body.wallet_id ?? null,
              expires_at: bc.expiresAt,
              created_at: deps.now().toISOString(),
            },
          },
          { expectedRevision: 'no_stream' },
        );
        // Written and acknowledged, yet not readable (the read side did not catch up in time): the spec's 500, never a 404.
        const created = await readConsent(deps, ctx.auth, consentId);
        if (!created) throw new ApiError(500, 'consent_disappeared', 'the consent was written but cannot be read yet: read it by id (GET) before creating another', { consent_id: consentId, retriable: false });
        return { status: 201, body: created };
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
      async handler(ctx) {
        return { status: 200, body: await view(ctx as unknown as C, ctx.params.id) };
      },
    });

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
      async handler(ctx) {
        const { auth, params, body, deps } = ctx;
        const c = ownConsent((await loadState(deps.store, consentStream(params.id), consentDecider)).state, auth);
        if (c.status !== 'pending') throw illegal(c.status, 'authorised');
        if (!c.bankConsentId) throw new ApiError(500, 'missing_bank_consent_id', 'the consent has no bank-side id');
        let tokens;
        try {
          tokens = await bankOf(deps, c.bankId).exchangeCode(body.auth_code, c.redirectUrl);
        } catch (err) {
          bankFailure(err, 'the bank refused the code or could not be reached; the consent stays pending');
        }
        const tokenRef = await deps.vault.put(auth.orgId, 'bank_tokens', Buffer.from(JSON.stringify(tokens)));
        await ctx.run(consentDecider, consentStream(c.id), { type: 'authorise', tenant: auth, tokenRef, tokenExpiresAt: new Date(deps.now().getTime() + tokens.expiresIn * 1000).toISOString() }, { serialize: true });
        return { status: 200, body: await view(ctx as unknown as C, c.id) };
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
      async handler(ctx) {
        const { auth, params, body, deps } = ctx;
        const c = ownConsent((await loadState(deps.store, consentStream(params.id), consentDecider)).state, auth);
        if (c.status !== 'authorised') throw new ApiError(409, 'consent_not_authorised', 'the consent is not authorised', { status: c.status });
        const secret = c.tokenRef ? await deps.vault.get(auth.orgId, c.tokenRef) : undefined;
        if (!secret || !c.bankConsentId) throw new ApiError(500, 'consent_missing_tokens', 'no access token or bank-side id is stored for this consent');
        const { accessToken } = JSON.parse(secret.toString('utf8')) as { accessToken: string };
        const bank = bankOf(deps, c.bankId);
        const runId = newId('run');
        const stream = consentStream(c.id);
        const at = () => deps.now().toISOString();
        const record = (events: Parameters<typeof consentDecider.decide>[0] & { type: 'record' }) => ctx.run(consentDecider, stream, events, { serialize: true });
        await record({ type: 'record', events: [{ type: 'bank_consent.statement_refresh_started', data: { consent_id: c.id, run_id: runId, since: body.since ?? null, until: body.until ?? null, at: at() } }] });
        let imported = 0;
        let duplicates = 0;
        for (let page = 1, pages = 1; page <= pages; page++) {
          let result;
          try {
            result = await bank.transactions(c.bankConsentId, accessToken, page, { ...(body.since ? { since: body.since } : {}), ...(body.until ? { until: body.until } : {}) });
          } catch (err) {
            await record({ type: 'record', events: [{ type: 'bank_consent.statement_refresh_failed', data: { consent_id: c.id, run_id: runId, imported, duplicates, failed_page: page, error: (err as Error).message, at: at() } }] });
            if (err instanceof BankError) throw new ApiError(502, err.reason === 'refused' ? 'bank_refused' : 'bank_unavailable', `the bank failed on page ${page}; pages before it are kept, a retry imports only what is missing`, { run_id: runId, imported, duplicates, failed_page: page });
            throw err;
          }
          pages = result.totalPages;
          const txs = result.transactions.map((t) => ({ bank_transaction_id: t.transactionId, amount_minor: t.amountMinor, currency: t.currency, credit_debit: t.creditDebit, description: t.description, booked_at: t.bookedAt }));
          const r = await ctx.run(consentDecider, stream, { type: 'import_page', runId, page, transactions: txs }, { serialize: true });
          const fresh = r.events[0]?.type === 'bank_consent.transactions_imported' ? r.events[0].data.transactions.length : 0;
          imported += fresh;
          duplicates += txs.length - fresh;
        }
        await record({ type: 'record', events: [{ type: 'bank_consent.statement_refresh_completed', data: { consent_id: c.id, run_id: runId, imported, duplicates, at: at() } }] });
        return { status: 202, body: { consent_id: c.id, run_id: runId, imported, duplicates, next_recon_cycle_within_seconds: RECON_CYCLE_SECONDS } };
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
      async handler(ctx) {
        const { auth, params, deps } = ctx;
        const c: Consent = ownConsent((await loadState(deps.store, consentStream(params.id), consentDecider)).state as ConsentState, auth);
        if (['revoked', 'expired', 'consumed'].includes(c.status)) throw illegal(c.status, 'revoked');
        try {
          await bankOf(deps, c.bankId).deleteConsent(c.bankConsentId);
        } catch (err) {
          if (!(err instanceof BankError && err.status === 404)) bankFailure(err, 'the bank could not delete the consent; nothing changed');
        }
        await ctx.run(consentDecider, consentStream(c.id), { type: 'close', tenant: auth, to: 'revoked' }, { serialize: true });
        await ctx.run(slotDecider, slotStream(c.orgId, c.consumerId, c.bankId), { type: 'release', consentId: c.id }, { serialize: true });
        return { status: 200, body: await view(ctx as unknown as C, c.id) };
      },
    });
  }

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/bank-consents',
    operationId: 'listBankConsents',
    summary: 'List consents of the project, newest first',
    tags: ['bank-consents'],
    auth: 'api_key',
    scope: 'bank_consents:read',
    query: z.object({ consumer_id: z.string().max(200).optional(), status: z.enum(['pending', 'authorised', 'revoked', 'expired', 'consumed']).optional(), limit: z.coerce.number().int().min(1).max(200).default(50) }),
    responses: { 200: z.object({ consents: z.array(BankConsentView) }) },
    errors: [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden']],
    async handler({ auth, query, deps }) {
      const params: unknown[] = [auth.orgId, auth.projectId, query.limit];
      let where = 'org_id = $1 AND project_id = $2';
      if (query.consumer_id) {
        params.push(query.consumer_id);
        where += ` AND consumer_id = $${params.length}`;
      }
      if (query.status) {
        params.push(query.status);
        where += ` AND status = $${params.length}`;
      }
      const { rows } = await deps.db.query<View>(`SELECT ${COLUMNS} FROM bank_consents WHERE ${where} ORDER BY created_at DESC, id LIMIT $3`, params);
      return { status: 200, body: { consents: rows } };
    },
  });
}
