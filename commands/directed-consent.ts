import { timingSafeEqual } from 'node:crypto';
import type { DomainEvent } from '../events/index.ts';
import type { EventDataOf } from '../events/index.ts';
import { type Decider, Rejection } from '../src/eventstore/handler.ts';
import type { Tenant } from './consumer.ts';

// A directed-pay consent (issue 58): minted by an organization with a
// mandate's intent and a one-shot token, submitted once by the consumer side.
// The token is bound to its consent (its hash is in the consent's first
// event) and so to its organization; it is never recorded itself.

export const directedConsentStream = (id: string) => `directed_consent-${id}`;

export type Intent = EventDataOf<'directed_consent.initiated'>['intent'];

export type DirectedConsentState =
  | { status: 'none' }
  | { status: 'pending' | 'submitted'; id: string; orgId: string; projectId: string; agentId: string; intent: Intent; tokenSha256: string; expiresAt: string; mandateId: string | null };

export type DirectedConsentCommand =
  | { type: 'initiate'; consentId: string; tenant: Tenant; agentId: string; intent: Intent; tokenSha256: string; expiresAt: string }
  | { type: 'submit'; tokenSha256: string; consumerId: string; mandateId: string; fundingSources: { id: string; currency: string; rail: string }[] };

const sameHash = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a, 'hex'), Buffer.from(b, 'hex'));

/**
 * Whether a token may be submitted now: the consent exists and the token is
 * its own (else `consent_not_found`, whatever the reason), not used
 * (`consent_already_used`), not expired (`consent_expired`).
 */
export function submittable(state: DirectedConsentState, tokenSha256: string, now: string): Exclude<DirectedConsentState, { status: 'none' }> {
  if (state.status === 'none' || !sameHash(state.tokenSha256, tokenSha256)) throw new Rejection('consent_not_found', 'no consent has this token: mint one with POST /v1/consents/init');
  if (state.status === 'submitted') throw new Rejection('consent_already_used', 'this consent token was already used; a token creates one mandate: mint a new one', { mandate_id: state.mandateId });
  if (now >= state.expiresAt) throw new Rejection('consent_expired', 'this consent token has expired: mint a new one', { expired_at: state.expiresAt });
  return state;
}

export const directedConsentDecider: Decider<DirectedConsentState, DirectedConsentCommand> = {
  initialState: () => ({ status: 'none' }),
  evolve(state, event) {
    if (event.type === 'directed_consent.initiated') {
      const d = event.data;
      return { status: 'pending', id: d.consent_id, orgId: d.org_id, projectId: d.project_id, agentId: d.agent_id, intent: d.intent, tokenSha256: d.token_sha256, expiresAt: d.expires_at, mandateId: null };
    }
    if (event.type === 'directed_consent.submitted' && state.status !== 'none') return { ...state, status: 'submitted', mandateId: event.data.mandate_id };
    return state;
  },
  decide(command, state, { now }): DomainEvent[] {
    if (command.type === 'initiate') {
      if (state.status !== 'none') throw new Rejection('consent_exists', 'consent exists');
      return [
        {
          type: 'directed_consent.initiated',
          data: { consent_id: command.consentId, org_id: command.tenant.orgId, project_id: command.tenant.projectId, agent_id: command.agentId, intent: command.intent, token_sha256: command.tokenSha256, expires_at: command.expiresAt, created_at: now },
        },
      ];
    }
    const c = submittable(state, command.tokenSha256, now);
    return [{ type: 'directed_consent.submitted', data: { consent_id: c.id, consumer_id: command.consumerId, mandate_id: command.mandateId, funding_sources: command.fundingSources as { id: string; currency: 'BRL'; rail: string }[], at: now } }];
  },
};
