import { createHash } from 'node:crypto';
import { directedConsentDecider, directedConsentStream, type Intent, submittable } from '../../commands/directed-consent.ts';
import type { Mandate, SlotInput } from '../../commands/mandate.ts';
import { loadState, Rejection } from '../eventstore/handler.ts';
import { newId, randomString } from '../ids.ts';
import { DIRECTED_CONSENT_TTL_MS } from '../limits.ts';
import type { Ports, RunCommand, Tenant } from './context.ts';
import { createMandate } from './mandates.ts';

// The directed-pay consent flow (issue 58, the product client's `mandate
// create`): an organization mints a one-shot token carrying a mandate's intent
// (purpose, caps, allowlisted payees, one or more currency slots); whoever
// holds the token submits it once, with the consumer, and the mandate is
// created in the token's organization and project with one funding source per
// slot. The token is answered once and never stored: the consent keeps its
// SHA-256. The mandate's id is derived from the consent's, so its stream's
// existence is the token's single use: a second submit (or a racing one)
// writes nothing and answers consent_already_used.

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const TOKEN = /^(dcn_[A-Za-z0-9]{16})\.([A-Za-z0-9]{43})$/;

export type InitResult = { token: string; consent_id: string; expires_at: string };

export async function initConsent(ports: Pick<Ports, 'now'>, run: RunCommand, tenant: Tenant, input: { agent_id: string; intent: Intent }): Promise<InitResult> {
  const consentId = newId('dcn');
  const token = `${consentId}.${randomString(43)}`;
  const expiresAt = new Date(ports.now().getTime() + DIRECTED_CONSENT_TTL_MS).toISOString();
  await run(directedConsentDecider, directedConsentStream(consentId), { type: 'initiate', consentId, tenant, agentId: input.agent_id, intent: input.intent, tokenSha256: sha256(token), expiresAt }, { expectedRevision: 'no_stream' });
  return { token, consent_id: consentId, expires_at: expiresAt };
}

export type SubmitInput = { consumer_id: string; rail: string };
export type SubmitResult = { consent_id: string; mandate_id: string; consumer_id: string; funding_sources: { id: string; currency: string; rail: string }[]; mandate: Mandate };

/** The mandate of a consent: `mdt_` and the consent's own random part. */
export const consentMandateId = (consentId: string) => `mdt_${consentId.slice('dcn_'.length)}`;

/**
 * Submits a token: checked first (nothing written on any refusal), then the
 * mandate created in the consent's tenant (`runIn` runs commands there), then
 * the consent marked submitted.
 */
export async function submitConsent(ports: Ports, runIn: (t: Tenant) => RunCommand, token: string, input: SubmitInput): Promise<SubmitResult> {
  const m = TOKEN.exec(token);
  if (!m) throw new Rejection('consent_not_found', 'no consent has this token: mint one with POST /v1/consents/init');
  const consentId = m[1]!;
  const tokenSha256 = sha256(token);
  const { state } = await loadState(ports.store, directedConsentStream(consentId), directedConsentDecider);
  const c = submittable(state, tokenSha256, ports.now().toISOString());
  const tenant = { orgId: c.orgId, projectId: c.projectId };
  const run = runIn(tenant);
  const intent = c.intent;
  const slots: SlotInput[] = (intent.slots ?? [{ currency: intent.currency, rail: input.rail, cap_minor: intent.cap_minor, per_tx_cap_minor: intent.per_tx_cap_minor }]).map((s) => ({
    currency: s.currency,
    rail: s.rail,
    cap: BigInt(s.cap_minor),
    perTx: BigInt(s.per_tx_cap_minor),
    fundingSourceId: newId('fs'),
  }));
  const mandateId = consentMandateId(consentId);
  let mandate: Mandate;
  try {
    mandate = await createMandate(
      { ports, run, tenant },
      {
        consumer_id: input.consumer_id,
        agent_id: c.agentId,
        purpose: intent.purpose,
        merchant_allowlist: intent.merchant_allowlist,
        merchant_pin_kind: intent.merchant_pin_kind,
        cap: slots[0]!.cap,
        perTx: slots[0]!.perTx,
        currency: slots[0]!.currency,
        expiresAt: new Date(ports.now().getTime() + intent.mandate_ttl_seconds * 1000).toISOString(),
        mandateId,
        slots,
        consentId,
      },
    );
  } catch (err) {
    // Another submit of the same token created the mandate first.
    if (err instanceof Rejection && (err.code === 'mandate_exists' || err.code === 'concurrency_conflict')) throw new Rejection('consent_already_used', 'this consent token was already used; a token creates one mandate: mint a new one', { mandate_id: mandateId });
    throw err;
  }
  const fundingSources = slots.map((s) => ({ id: s.fundingSourceId!, currency: s.currency, rail: s.rail! }));
  await run(directedConsentDecider, directedConsentStream(consentId), { type: 'submit', tokenSha256, consumerId: input.consumer_id, mandateId, fundingSources });
  return { consent_id: consentId, mandate_id: mandateId, consumer_id: input.consumer_id, funding_sources: fundingSources, mandate };
}
