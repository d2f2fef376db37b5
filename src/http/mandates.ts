import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { agentDecider, agentStream } from '../../commands/agent.ts';
import { consumerDecider, consumerStream, ownConsumer } from '../../commands/consumer.ts';
import { effectiveStatus, type Mandate, mandateDecider, mandateStream, type MandateState, SPEND_CODES } from '../../commands/mandate.ts';
import { Currency } from '../../events/mandate.ts';
import { loadState, Rejection } from '../eventstore/handler.ts';
import { ApiError } from './errors.ts';
import { newId } from './ids.ts';
import { defineRoute, type AppDeps } from './route.ts';
import { IdParam, Timestamp, isoText as TS } from './schemas.ts';
import type { ApiKeyAuth } from './auth.ts';
import { spend } from '../usecases/mandates.ts';

// Mandates (spec 4.7): creation, reads, pause/resume/revoke, spends against
// them, and the virtual card bound to one.

export const MandateView = z
  .object({
    id: z.string(),
    consumer_id: z.string(),
    agent_id: z.string(),
    purpose: z.string(),
    display_name: z.string().nullable(),
    intent_note: z.string().nullable(),
    merchant_allowlist: z.array(z.string()),
    merchant_pin_kind: z.enum(['pix-key', 'merchant-id', 'mcc']),
    cap_minor: z.string(),
    per_tx_cap_minor: z.string(),
    currency: z.string(),
    status: z.enum(['active', 'paused', 'revoked', 'expired']),
    expires_at: Timestamp,
    created_at: Timestamp,
  })
  .meta({ id: 'Mandate' });
type MandateView = z.infer<typeof MandateView>;

export function mandateView(m: Mandate, now: string): MandateView {
  return {
    id: m.id,
    consumer_id: m.consumerId,
    agent_id: m.agentId,
    purpose: m.purpose,
    display_name: m.displayName,
    intent_note: m.intentNote,
    merchant_allowlist: m.allowlist,
    merchant_pin_kind: m.pinKind,
    cap_minor: m.cap.toString(),
    per_tx_cap_minor: m.perTx.toString(),
    currency: m.currency,
    status: effectiveStatus(m, now),
    expires_at: m.expiresAt,
    created_at: m.createdAt,
  };
}

const EFFECTIVE = `CASE WHEN status IN ('active', 'paused') AND expires_at <= $NOW THEN 'expired' ELSE status END`;
const columns = (nowParam: string) =>
  `id, consumer_id, agent_id, purpose, display_name, intent_note, merchant_allowlist, merchant_pin_kind, cap_minor::text, per_tx_cap_minor::text, currency,
   ${EFFECTIVE.replace('$NOW', nowParam)} AS status, ${TS('expires_at')} AS expires_at, ${TS('created_at')} AS created_at`;

const REQUIRED = ['consumer_id', 'agent_id', 'merchant_allowlist', 'merchant_pin_kind', 'cap_minor', 'per_tx_cap_minor', 'currency', 'expires_at'] as const;
const MAX_MINOR = 1_000_000_000_000_000n; // 10^15 a cap (one cap is exact as a JS number; sums of caps are bigint, written exactly: src/http/exact-json.ts)
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
    if (raw[field] === undefined || raw[field] === null) throw new ApiError(400, 'missing_required_field', `${field} is required`, { field });
  }
  if (typeof raw.purpose !== 'string' || raw.purpose.trim() === '') throw new ApiError(400, 'mandate_purpose_required', 'purpose is required and cannot be blank');
  if (CONTROL.test(raw.purpose) || raw.purpose.includes('\ufffd') || LONE_SURROGATE.test(raw.purpose)) {
    throw new ApiError(400, 'invalid_purpose_encoding', 'purpose holds control characters or invalid text');
  }
  const r = CreateBody.safeParse(raw);
  if (!r.success) throw new ApiError(400, 'invalid_body', 'the body is invalid', { issues: r.error.issues.map((i) => ({ path: i.path.map(String), code: i.code, message: i.message })) });
  const b = r.data;
  const cap = BigInt(b.cap_minor);
  const perTx = BigInt(b.per_tx_cap_minor);
  if (cap > MAX_MINOR || perTx > cap) {
    throw new ApiError(400, 'invalid_body', 'per_tx_cap_minor must not exceed cap_minor (and caps stay at most 10^15)', { issues: [{ path: ['per_tx_cap_minor'], code: 'too_big', message: 'per_tx_cap_minor > cap_minor' }] });
  }
  if (b.expires_at * 1000 <= now.getTime()) throw new ApiError(400, 'expires_at_in_past', 'expires_at must be a future UNIX timestamp in seconds');
  if (b.expires_at > 253402300799) throw new ApiError(400, 'invalid_body', 'expires_at is beyond year 9999', { issues: [{ path: ['expires_at'], code: 'too_big', message: 'too far' }] });
  return { ...b, purpose: raw.purpose.trim(), cap, perTx, expiresAt: new Date(b.expires_at * 1000).toISOString() };
}

const SpendBody = z.object({
  amount_minor: z.union([z.string().regex(/^[1-9]\d{0,15}$/), z.number().int().positive().max(Number.MAX_SAFE_INTEGER).transform(String)]),
  currency: z.string().min(1).max(10),
  merchant: z.string().trim().min(1).max(200),
  description: z.string().max(500).nullable().optional(),
});
const SpendResult = z.object({ transaction_id: z.string(), mandate_id: z.string(), amount_minor: z.string(), currency: z.string(), merchant: z.string(), decision: z.literal('approved'), remaining_minor: z.string(), at: Timestamp });
const spendErrors = Object.entries(SPEND_CODES).map(([code, status]) => [status, code] as const);

const Card = z.object({ card_id: z.string(), consumer_id: z.string(), status: z.string(), bound_at: Timestamp });
const Authorization = z.object({ transaction_id: z.string(), amount_minor: z.string(), currency: z.string(), decision: z.enum(['approved', 'declined']), at: Timestamp });

export async function mandateRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
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
      const b = validateCreate(body, deps.now());
      const consumer = await loadState(deps.store, consumerStream(b.consumer_id), consumerDecider);
      try {
        ownConsumer(consumer.state, auth);
      } catch {
        throw new ApiError(404, 'not_found', 'consumer not found', { field: 'consumer_id' });
      }
      const agent = DID_SAFE.test(b.agent_id) ? (await loadState(deps.store, agentStream(auth.orgId, b.agent_id), agentDecider)).state : { status: 'none' as const };
      const agentActive = agent.status === 'active' && agent.keys.some((k) => k.status === 'active');
      const id = newId('mdt');
      const r = await run(
        mandateDecider,
        mandateStream(id),
        {
          type: 'create',
          mandateId: id,
          tenant: auth,
          consumerId: b.consumer_id,
          agentId: b.agent_id,
          agentDid: agent.status === 'none' ? '' : agent.did,
          agentActive,
          purpose: b.purpose,
          displayName: b.display_name ?? null,
          intentNote: b.intent_note ?? null,
          allowlist: b.merchant_allowlist,
          pinKind: b.merchant_pin_kind,
          cap: b.cap,
          perTx: b.perTx,
          currency: b.currency,
          expiresAt: b.expiresAt,
        },
        { expectedRevision: 'no_stream' },
      );
      return { status: 201, body: mandateView((r.state as Extract<MandateState, { status: 'exists' }>).m, deps.now().toISOString()) };
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
      const params: unknown[] = [auth.orgId, auth.projectId, query.limit, deps.now().toISOString()];
      let where = 'org_id = $1 AND project_id = $2';
      if (query.consumer_id) {
        params.push(query.consumer_id);
        where += ` AND consumer_id = $${params.length}`;
      }
      if (query.status) {
        params.push(query.status);
        where += ` AND ${EFFECTIVE.replace('$NOW', '$4')} = $${params.length}`;
      }
      const { rows } = await deps.db.query<MandateView>(`SELECT ${columns('$4')} FROM mandates WHERE ${where} ORDER BY created_at DESC, id LIMIT $3`, params);
      return { status: 200, body: { mandates: rows } };
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
      const m = await readMandate(deps, auth, params.id);
      if (!m) throw new Rejection('mandate_not_found', 'mandate not found');
      return { status: 200, body: m };
    },
  });

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
        const r = await run(
          mandateDecider,
          mandateStream(params.id),
          { type: 'move', tenant: auth, to, reason: body.reason ?? null },
          {
            // The write is guarded on the status that was read: a move that lost a
            // race to another move answers transition_conflict; a spend in between retries.
            conflictCode: 'transition_conflict',
            retryIf: (first, latest) => first.status === 'exists' && latest.status === 'exists' && first.m.status === latest.m.status,
          },
        );
        const m = (r.state as Extract<MandateState, { status: 'exists' }>).m;
        return { status: 200, body: { mandate: mandateView(m, deps.now().toISOString()), changed: r.changed } };
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
    body: SpendBody,
    responses: { 201: SpendResult },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden'], ...spendErrors],
    idempotent: true,
    async handler(ctx) {
      return { status: 201, body: await spend({ run: ctx.run, ports: ctx.deps, tenant: ctx.auth }, ctx.params.id, ctx.body, 'api') };
    },
  });

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
    responses: { 200: z.object({ mandate_id: z.string(), card: Card.nullable(), authorizations: z.array(Authorization) }) },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'mandate_not_found']],
    async handler({ auth, params, query, deps }) {
      const m = await readMandate(deps, auth, params.id);
      if (!m) throw new Rejection('mandate_not_found', 'mandate not found');
      const card = await deps.db.query<z.infer<typeof Card>>(`SELECT card_id, consumer_id, status, ${TS('bound_at')} AS bound_at FROM mandate_cards WHERE mandate_id = $1 AND status = 'active' LIMIT 1`, [m.id]);
      const auths = await deps.db.query<z.infer<typeof Authorization>>(
        `SELECT transaction_id, amount_minor::text, currency, decision, ${TS('at')} AS at FROM mandate_authorizations WHERE mandate_id = $1 ORDER BY position DESC LIMIT $2`,
        [m.id, query.limit],
      );
      return { status: 200, body: { mandate_id: m.id, card: card.rows[0] ?? null, authorizations: auths.rows } };
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
    responses: { 201: z.object({ mandate_id: z.string(), card: Card, changed: z.boolean() }), 200: z.object({ mandate_id: z.string(), card: Card, changed: z.boolean() }) },
    errors: [[401, 'unauthorized'], [403, 'forbidden'], [404, 'mandate_not_found'], [409, 'mandate_not_active'], [501, 'not_wired']],
    idempotent: true,
    async handler({ auth, params, run }) {
      if (auth.environment === 'live') throw new ApiError(501, 'not_wired', 'no live card issuer is configured');
      const r = await run(mandateDecider, mandateStream(params.id), { type: 'bind_card', tenant: auth, cardId: newId('card'), issuer: 'sandbox' }, { serialize: true });
      const m = (r.state as Extract<MandateState, { status: 'exists' }>).m;
      const card = { card_id: m.card!.cardId, consumer_id: m.card!.consumerId, status: 'active', bound_at: m.card!.boundAt };
      return { status: r.changed ? 201 : 200, body: { mandate_id: m.id, card, changed: r.changed } };
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
    async handler({ auth, params, run }) {
      const r = await run(mandateDecider, mandateStream(params.id), { type: 'revoke_card', tenant: auth }, { serialize: true });
      const e = r.events[0]!;
      return { status: 200, body: { mandate_id: params.id, card_id: e.type === 'mandate.card_revoked' ? e.data.card_id : '', revoked: true } };
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
    async handler(ctx) {
      if (ctx.auth.environment !== 'test') throw new ApiError(403, 'sandbox_funding_not_permitted', 'the sandbox card network takes test keys only');
      const { rows } = await ctx.deps.db.query<{ mandate_id: string }>(`SELECT mandate_id FROM mandate_cards WHERE card_id = $1 AND org_id = $2 AND project_id = $3 AND status = 'active'`, [
        ctx.params.card_id,
        ctx.auth.orgId,
        ctx.auth.projectId,
      ]);
      if (!rows[0]) throw new ApiError(404, 'card_not_found', 'no active card with this id');
      return { status: 201, body: await spend({ run: ctx.run, ports: ctx.deps, tenant: ctx.auth }, rows[0].mandate_id, ctx.body, 'card') };
    },
  });
}

const DID_SAFE = /^[A-Za-z0-9._-]{1,64}$/;

async function readMandate(deps: AppDeps, auth: ApiKeyAuth, id: string): Promise<MandateView | undefined> {
  const { rows } = await deps.db.query<MandateView>(`SELECT ${columns('$4')} FROM mandates WHERE id = $1 AND org_id = $2 AND project_id = $3`, [id, auth.orgId, auth.projectId, deps.now().toISOString()]);
  return rows[0];
}
