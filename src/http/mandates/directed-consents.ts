import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { Currency, MerchantPinKind } from '../../../events/mandate.ts';
import { Rejection } from '../../eventstore/handler.ts';
import { DIRECTED_MANDATE_TTL_MAX_SECONDS, MANDATE_SLOTS_MAX } from '../../limits.ts';
import type { RunCommand } from '../../usecases/context.ts';
import { initConsent, submitConsent } from '../../usecases/directed-consents.ts';
import { MandateView, mandateView } from './mandate-schemas.ts';
import { defineRoute, type AppDeps } from '../kernel/route.ts';
import { Timestamp } from '../kernel/schemas.ts';

// The directed-pay consent flow (issue 58; the product client's `mandate
// create`): POST /v1/consents/init {agent_id, intent} mints a one-shot token
// (API key); POST /v1/consents/{token}/submit {consumer_id, rail,
// provider_token} creates the consumer's mandate from it, the token being the
// credential (a bearer beside it is ignored). The use cases:
// src/usecases/directed-consents.ts.

const MAX_MINOR = 1_000_000_000_000_000n;
/** Minor units as the client sends them (a JSON integer) or as our API writes them (a string of digits). */
const Minor = z.union([z.number().int().positive().max(Number.MAX_SAFE_INTEGER).transform(String), z.string().regex(/^[1-9]\d{0,15}$/)]);
const Rail = z.string().regex(/^[a-z0-9][a-z0-9-]{0,39}$/, 'a rail name: lowercase letters, digits and dashes (usdc-onchain, pix-celcoin)');
const Slot = z.object({ currency: Currency, rail: Rail, cap_minor: Minor, per_tx_cap_minor: Minor });

const IntentBody = z
  .object({
    purpose: z.string().trim().min(1).max(1000),
    cap_minor: Minor,
    per_tx_cap_minor: Minor,
    currency: Currency,
    mandate_ttl_seconds: z.number().int().positive().max(DIRECTED_MANDATE_TTL_MAX_SECONDS).describe('How long the mandate made at submit lives, in seconds; it expires then.'),
    merchant_allowlist: z.array(z.string().trim().min(1).max(200)).min(1).max(100),
    merchant_pin_kind: MerchantPinKind.default('merchant-id'),
    slots: z.array(Slot).min(1).max(MANDATE_SLOTS_MAX).optional().meta({ description: 'Currency slots CURRENCY:RAIL:CAP:PER_TX_CAP, one per currency; caps per currency, no FX. Absent: one slot of currency/cap_minor/per_tx_cap_minor on the rail the submit names' }),
  })
  .superRefine((b, ctx) => {
    const caps: { cap: string; per: string; path: (string | number)[] }[] = b.slots
      ? b.slots.map((s, i) => ({ cap: s.cap_minor, per: s.per_tx_cap_minor, path: ['slots', i, 'per_tx_cap_minor'] }))
      : [{ cap: b.cap_minor, per: b.per_tx_cap_minor, path: ['per_tx_cap_minor'] }];
    for (const c of caps) {
      if (BigInt(c.per) > BigInt(c.cap) || BigInt(c.cap) > MAX_MINOR) ctx.addIssue({ code: 'custom', path: c.path, message: 'per_tx_cap_minor must not exceed cap_minor (and caps stay at most 10^15)' });
    }
    const currencies = (b.slots ?? []).map((s) => s.currency);
    if (new Set(currencies).size !== currencies.length) ctx.addIssue({ code: 'custom', path: ['slots'], message: 'one slot per currency' });
  });

export async function directedConsentRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/consents/init',
    operationId: 'initDirectedConsent',
    summary: "Mint a one-shot directed-pay consent token carrying a mandate's intent (purpose, caps, allowlisted payees, currency slots); shown once",
    tags: ['mandates'],
    auth: 'api_key',
    scope: 'mandates:write',
    body: z.object({ agent_id: z.string().min(1).max(64), intent: IntentBody.describe('The mandate the consumer will be asked to grant: purpose, caps, payees and currency slots.') }),
    responses: { 201: z.object({ token: z.string(), consent_id: z.string(), expires_at: Timestamp }) },
    errors: [[400, 'invalid_body'], [401, 'unauthorized'], [403, 'forbidden']],
    idempotent: true,
    async handler({ auth, body, run, deps }) {
      const i = body.intent;
      const intent = {
        purpose: i.purpose,
        cap_minor: i.cap_minor,
        per_tx_cap_minor: i.per_tx_cap_minor,
        currency: i.currency,
        mandate_ttl_seconds: i.mandate_ttl_seconds,
        merchant_allowlist: i.merchant_allowlist,
        merchant_pin_kind: i.merchant_pin_kind,
        slots: i.slots ?? null,
      };
      return { status: 201, body: await initConsent(deps, run, auth, { agent_id: body.agent_id, intent }) };
    },
  });

  defineRoute(app, deps, {
    method: 'POST',
    url: '/v1/consents/:token/submit',
    operationId: 'submitDirectedConsent',
    summary: "Submit a consent token once: creates the consumer's mandate in the token's organization, one funding source per slot; the token is the credential",
    tags: ['mandates'],
    auth: 'open',
    params: z.object({ token: z.string().min(1).max(200) }),
    body: z.object({
      consumer_id: z.string().min(1).max(200),
      rail: Rail,
      provider_token: z.string().min(1).max(2000).optional().meta({ description: "The rail provider's token; checked for shape, never stored" }),
    }),
    responses: {
      201: z.object({
        consent_id: z.string(),
        mandate_id: z.string(),
        consumer_id: z.string(),
        status: z.literal('active').describe('The mandate made from the consent is `active` at once.'),
        funding_sources: z.array(z.object({ id: z.string(), currency: z.string(), rail: z.string() })).describe('The funding sources made for the mandate, one per currency slot.'),
        mandate: MandateView,
      }),
    },
    errors: [[400, 'invalid_body'], [403, 'mandate_agent_key_invalid'], [404, 'consent_not_found'], [404, 'not_found'], [409, 'consent_already_used'], [410, 'consent_expired']],
    async handler(ctx) {
      const runIn = (t: { orgId: string; projectId: string }): RunCommand => (d, s, c, o) => ctx.run(d, s, c, { ...o, orgId: t.orgId, projectId: t.projectId });
      const r = await submitConsent(ctx.deps, runIn, ctx.params.token, ctx.body).catch((err: unknown) => {
        // The consumer is looked up in the token's organization: another one's answers as absent.
        if (err instanceof Rejection && err.code === 'not_found') throw new Rejection('not_found', 'consumer not found in the organization of this consent', { field: 'consumer_id' });
        throw err;
      });
      return { status: 201, body: { consent_id: r.consent_id, mandate_id: r.mandate_id, consumer_id: r.consumer_id, status: 'active' as const, funding_sources: r.funding_sources, mandate: mandateView(r.mandate, ctx.deps.now().toISOString()) } };
    },
  });
}
