import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { SPEND_CODES } from '../../../commands/mandate.ts';
import { Currency } from '../../../events/mandate.ts';
import { Rejection } from '../../eventstore/handler.ts';
import { defineRoute, type AppDeps } from '../kernel/route.ts';
import { invalidMessage } from '../kernel/errors.ts';
import { IdParam } from '../kernel/schemas.ts';
import { Authorization, Card, MandateView, mandateView, SpendResult } from './mandate-schemas.ts';
import { bindMandateCard, createMandate, listMandates, moveMandate, readMandate, readMandateCard, revokeMandateCard, sandboxCardAuthorization, spend, spendToPayee } from '../../usecases/mandates.ts';

// Mandates (spec 4.7): creation, reads, pause/resume/revoke, spends against
// them, and the virtual card bound to one.

const REQUIRED = ['consumer_id', 'agent_id', 'merchant_allowlist', 'merchant_pin_kind', 'cap_minor', 'per_tx_cap_minor', 'currency', 'expires_at'] as const;
const MAX_MINOR = 1_000_000_000_000_000n; // 10^15 a cap (one cap is exact as a JS number; sums of caps are bigint, written exactly: src/http/kernel/exact-json.ts)
const PositiveMinor = z.string().regex(/^[1-9]\d{0,15}$/, 'a positive integer in minor units, as a string');
const CreateBody = z.object({
  consumer_id: z.string().min(1).max(200),
  agent_id: z.string().min(1).max(64),
  purpose: z.string().max(1000),
  merchant_allowlist: z.array(z.string().trim().min(1).max(200)).min(1).max(100),
  merchant_pin_kind: z.enum(['pix-key', 'merchant-id', 'mcc']),
  cap_minor: PositiveMinor,
  per_tx_cap_minor: PositiveMinor,
  currency: Currency,
  expires_at: z.union([z.number().int().positive(), z.string().regex(/^\d{1,12}$/).transform(Number)]),
  display_name: z.string().trim().min(1).max(200).nullable().optional(),
  intent_note: z.string().max(2000).nullable().optional(),
});

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f\u0080-\u009f]/;

function validateCreate(raw: Record<string, unknown>, now: Date) {
  for (const field of REQUIRED) {
    if (raw[field] === undefined || raw[field] === null) throw new Rejection('missing_required_field', `${field} is required`, { field });
  }
  if (typeof raw.purpose !== 'string' || raw.purpose.trim() === '') throw new Rejection('mandate_purpose_required', 'purpose is required and cannot be blank');
  if (CONTROL.test(raw.purpose) || raw.purpose.includes('\ufffd') || LONE_SURROGATE.test(raw.purpose)) {
    throw new Rejection('invalid_purpose_encoding', 'purpose holds control characters or invalid text');
  }
  const r = CreateBody.safeParse(raw);
  if (!r.success) {
    const issues = r.error.issues.map((i) => ({ path: i.path.map(String), code: i.code, message: i.message }));
    throw new Rejection('invalid_body', invalidMessage('body', issues), { issues });
  }
  const b = r.data;
  const cap = BigInt(b.cap_minor);
  const perTx = BigInt(b.per_tx_cap_minor);
  if (cap > MAX_MINOR || perTx > cap) {
    throw new Rejection('invalid_body', 'per_tx_cap_minor must not exceed cap_minor (and caps stay at most 10^15)', { issues: [{ path: ['per_tx_cap_minor'], code: 'too_big', message: 'per_tx_cap_minor > cap_minor' }] });
  }
  if (b.expires_at * 1000 <= now.getTime()) throw new Rejection('expires_at_in_past', 'expires_at must be a future UNIX timestamp in seconds');
  if (b.expires_at > 253402300799) throw new Rejection('invalid_body', 'expires_at is beyond year 9999', { issues: [{ path: ['expires_at'], code: 'too_big', message: 'too far' }] });
  return { ...b, purpose: raw.purpose.trim(), cap, perTx, expiresAt: new Date(b.expires_at * 1000).toISOString() };
}

const SpendBody = z.object({
  amount_minor: z.union([z.string().regex(/^[1-9]\d{0,15}$/), z.number().int().positive().max(Number.MAX_SAFE_INTEGER).transform(String)]),
  currency: z.string().min(1).max(10),
  merchant: z.string().trim().min(1).max(200),
  description: z.string().max(500).nullable().optional(),
});
/**
 * A spend as the API took it (`currency` and `merchant`), or as the product's
 * client sends it (`{amount_minor, payee, agent_id}`): the payee's kind picks
 * the currency slot unless `currency` names it.
 */
const ApiSpendBody = z
  .object({
    amount_minor: SpendBody.shape.amount_minor,
    currency: z.string().min(1).max(10).optional(),
    merchant: z.string().trim().min(1).max(200).optional(),
    payee: z.string().trim().min(1).max(200).optional().meta({ description: 'A Pix key (BRL slot), an EVM address or an x402 URL (USDC slot), or an allowlisted merchant id' }),
    agent_id: z.string().min(1).max(64).optional().meta({ description: "Must be the mandate's agent" }),
    description: z.string().max(500).nullable().optional(),
  })
  .superRefine((b, ctx) => {
    if (b.merchant === undefined && b.payee === undefined) ctx.addIssue({ code: 'custom', path: ['payee'], message: 'name the payee (or merchant, with currency)' });
    if (b.merchant !== undefined && b.payee !== undefined && b.merchant !== b.payee) ctx.addIssue({ code: 'custom', path: ['merchant'], message: 'merchant and payee name different parties: send one' });
    if (b.merchant !== undefined && b.payee === undefined && b.currency === undefined) ctx.addIssue({ code: 'invalid_type', expected: 'string', path: ['currency'], message: 'currency is required with merchant' });
  });
const spendErrors = Object.entries(SPEND_CODES).map(([code, status]) => [status, code] as const);

export async function mandateRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  mandateResourceRoutes(app, deps);
  mandateTransitionRoutes(app, deps);
  mandateCardRoutes(app, deps);
}

/** Create, list, read. */
function mandateResourceRoutes(app: FastifyInstance, deps: AppDeps): void {
  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/mandates',
    operationId: 'createMandate',
    summary: 'Grant a mandate: an allowance an active agent of the organization spends against',
    tags: ['mandates'],
    auth: 'api_key',
    scope: 'mandates:write',
    body: z.record(z.string(), z.unknown()),
    bodyText: { purpose: 'invalid_purpose_encoding' },
    responses: { 201: MandateView },
    errors: [
      [400, 'missing_required_field'],
      [400, 'mandate_purpose_required'],
      [400, 'invalid_purpose_encoding'],
      [400, 'expires_at_in_past'],
      [400, 'invalid_body'],
      [401, 'unauthorized'],
      [403, 'forbidden'],
      [403, 'mandate_agent_key_invalid'],
      [404, 'not_found'],
    ],
    idempotent: true,
    async handler({ auth, body, run, deps }) {
      const m = await createMandate({ ports: deps, tenant: auth, run }, validateCreate(body, deps.now()));
      return { status: 201, body: mandateView(m, deps.now().toISOString()) };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/mandates',
    operationId: 'listMandates',
    summary: 'List mandates (status is effective: past expires_at reads expired)',
    tags: ['mandates'],
    auth: 'api_key',
    scope: 'mandates:read',
    query: z.object({ consumer_id: z.string().min(1).max(200).optional(), status: z.enum(['active', 'paused', 'revoked', 'expired']).optional(), limit: z.coerce.number().int().min(1).max(200).default(50) }),
    responses: { 200: z.object({ mandates: z.array(MandateView) }) },
    errors: [[400, 'invalid_query'], [401, 'unauthorized'], [403, 'forbidden']],
    async handler({ auth, query, deps }) {
      return { status: 200, body: { mandates: await listMandates(deps, auth, query) } };
    },
  });

  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/mandates/:id',
    operationId: 'getMandate',
    summary: 'Read a mandate',
    tags: ['mandates'],
    auth: 'api_key',
    scope: 'mandates:read',
    params: z.object({ id: IdParam }),
    responses: { 200: MandateView },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'mandate_not_found']],
    async handler({ auth, params, deps }) {
      return { status: 200, body: await readMandate(deps, auth, params.id) };
    },
  });
}

/** Pause, resume, revoke, and the spends against a mandate. */
function mandateTransitionRoutes(app: FastifyInstance, deps: AppDeps): void {
  for (const [verb, to] of [['pause', 'paused'], ['resume', 'active'], ['revoke', 'revoked']] as const) {
    defineRoute(app, deps, {
      method: 'POST',
      url: `/v1/mandates/:id/${verb}`,
      operationId: `${verb}Mandate`,
      summary: `${verb[0]!.toUpperCase()}${verb.slice(1)} a mandate; already ${to} answers changed: false and writes nothing`,
      tags: ['mandates'],
      auth: 'api_key',
      scope: 'mandates:write',
      params: z.object({ id: IdParam }),
      body: z.object({ reason: z.string().max(2000).nullable().optional() }),
      bodyOptional: true,
      responses: { 200: z.object({ mandate: MandateView, changed: z.boolean() }) },
      errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [404, 'mandate_not_found'], [409, 'invalid_transition'], [409, 'transition_conflict']],
      idempotent: true,
      async handler({ auth, params, body, run, deps }) {
        const r = await moveMandate({ ports: deps, tenant: auth, run }, params.id, to, body.reason ?? null);
        return { status: 200, body: { mandate: mandateView(r.mandate, deps.now().toISOString()), changed: r.changed } };
      },
    });
  }

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/consumers/mandates/:id/spend',
    operationId: 'spendAgainstMandate',
    summary: 'Spend against a mandate; refusals are recorded too (decision declined with the code)',
    tags: ['mandates'],
    auth: 'api_key',
    scope: 'mandates:write',
    params: z.object({ id: IdParam }),
    body: ApiSpendBody,
    responses: { 201: SpendResult },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [403, 'mandate_agent_mismatch'], [403, 'policy_denied'], ...spendErrors],
    idempotent: true,
    async handler(ctx) {
      const c = { run: ctx.run, ports: ctx.deps, tenant: ctx.auth };
      const b = ctx.body;
      if (b.payee === undefined) return { status: 201, body: await spend(c, ctx.params.id, { amount_minor: b.amount_minor, currency: b.currency!, merchant: b.merchant!, description: b.description ?? null }, 'api') };
      return { status: 201, body: await spendToPayee(c, ctx.params.id, { amount_minor: b.amount_minor, payee: b.payee, agent_id: b.agent_id, currency: b.currency, description: b.description ?? null }) };
    },
  });
}

/** The virtual card bound to a mandate, and the sandbox card network's authorizations. */
function mandateCardRoutes(app: FastifyInstance, deps: AppDeps): void {
  defineRoute(app, deps, {
    method: 'GET',
    url: '/v1/consumers/mandates/:id/card',
    operationId: 'getMandateCard',
    summary: "The mandate's card and its authorizations, newest first",
    tags: ['mandates'],
    auth: 'api_key',
    scope: 'mandates:read',
    params: z.object({ id: IdParam }),
    query: z.object({ limit: z.coerce.number().catch(20).transform((n) => (Number.isFinite(n) ? Math.min(100, Math.max(1, Math.trunc(n))) : 20)).default(20) }),
    responses: { 200: z.object({ mandate_id: z.string(), card: Card.nullable().describe('The virtual card bound to the mandate; null before one is bound.'), authorizations: z.array(Authorization).describe("The sandbox card network's authorizations of the card, newest first.") }) },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'mandate_not_found']],
    async handler({ auth, params, query, deps }) {
      return { status: 200, body: await readMandateCard(deps, auth, params.id, query.limit) };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/consumers/mandates/:id/card',
    operationId: 'bindMandateCard',
    summary: 'Bind a virtual card to an active mandate (sandbox issuer for test keys; live issuer not wired)',
    tags: ['mandates'],
    auth: 'api_key',
    scope: 'mandates:write',
    params: z.object({ id: IdParam }),
    responses: { 201: z.object({ mandate_id: z.string(), card: Card.describe('The virtual card now bound to the mandate.'), changed: z.boolean() }), 200: z.object({ mandate_id: z.string(), card: Card.describe('The card already bound (nothing changed).'), changed: z.boolean() }) },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'mandate_not_found'], [409, 'mandate_not_active'], [501, 'not_wired']],
    idempotent: true,
    async handler({ auth, params, run, deps }) {
      const r = await bindMandateCard({ ports: deps, tenant: auth, run }, auth.environment, params.id);
      return { status: r.changed ? 201 : 200, body: r };
    },
  });

  defineRoute(app, deps, {
    method: 'DELETE',
    url: '/v1/consumers/mandates/:id/card',
    operationId: 'revokeMandateCard',
    summary: "Revoke the mandate's card",
    tags: ['mandates'],
    auth: 'api_key',
    scope: 'mandates:write',
    params: z.object({ id: IdParam }),
    responses: { 200: z.object({ mandate_id: z.string(), card_id: z.string(), revoked: z.literal(true) }) },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'mandate_not_found'], [404, 'no_active_card']],
    idempotent: true,
    async handler({ auth, params, run, deps }) {
      return { status: 200, body: await revokeMandateCard({ ports: deps, tenant: auth, run }, params.id) };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/test/cards/:card_id/authorizations',
    operationId: 'sandboxCardAuthorization',
    summary: 'Sandbox card network: an authorization decided by the mandate rules, like a spend (test keys only)',
    tags: ['mandates', 'sandbox'],
    auth: 'api_key',
    scope: 'mandates:write',
    params: z.object({ card_id: IdParam }),
    body: SpendBody,
    responses: { 201: SpendResult },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], [403, 'sandbox_funding_not_permitted'], [404, 'card_not_found'], ...spendErrors],
    idempotent: true,
    async handler({ auth, params, body, run, deps }) {
      return { status: 201, body: await sandboxCardAuthorization({ ports: deps, tenant: auth, run }, auth.environment, params.card_id, body) };
    },
  });
}
