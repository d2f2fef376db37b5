import t from 'tap';
import { mandateDecider, type MandateCommand } from '../../commands/mandate.ts';
import type { DomainEvent } from '../../events/index.ts';
import { given } from '../helpers/decider.ts';

// Every (state × move) pair, and spends at the cap edges.

const now = '2026-11-21T12:00:00.000Z';
const later = '2027-01-01T00:00:00.000Z';
const tenant = { orgId: 'org_1', projectId: 'prj_1' };
const created: DomainEvent = {
  type: 'mandate.created',
  data: {
    mandate_id: 'mdt_1',
    org_id: 'org_1',
    project_id: 'prj_1',
    consumer_id: 'cns_1',
    agent_id: 'buyer',
    agent_did: 'did:web:x:org_1:buyer',
    purpose: 'groceries',
    display_name: null,
    intent_note: null,
    merchant_allowlist: ['shop@pix.example'],
    merchant_pin_kind: 'pix-key',
    cap_minor: '1000',
    per_tx_cap_minor: '300',
    currency: 'BRL',
    expires_at: '2026-12-31T00:00:00.000Z',
    created_at: now,
  },
};
const moved = (type: 'mandate.paused' | 'mandate.resumed' | 'mandate.revoked' | 'mandate.expired', from: string, to: string): DomainEvent =>
  ({ type, data: { mandate_id: 'mdt_1', from, to, reason: null, at: now } }) as DomainEvent;
const histories: Record<string, DomainEvent[]> = {
  active: [created],
  paused: [created, moved('mandate.paused', 'active', 'paused')],
  revoked: [created, moved('mandate.revoked', 'active', 'revoked')],
  expired: [created, moved('mandate.expired', 'active', 'expired')],
};
const move = (to: 'paused' | 'active' | 'revoked'): MandateCommand => ({ type: 'move', tenant, to, reason: 'because' });

t.test('every state × move pair', async (t) => {
  const legal: Record<string, Record<string, string | null>> = {
    active: { paused: 'mandate.paused', active: null, revoked: 'mandate.revoked' },
    paused: { paused: null, active: 'mandate.resumed', revoked: 'mandate.revoked' },
    revoked: { paused: 'x', active: 'x', revoked: null },
    expired: { paused: 'x', active: 'x', revoked: 'x' },
  };
  for (const [from, h] of Object.entries(histories)) {
    for (const to of ['paused', 'active', 'revoked'] as const) {
      const outcome = legal[from]![to];
      const g = given(t, mandateDecider, h, now).when(move(to));
      if (outcome === null) g.then([], `${from} → ${to}: already there, nothing written`);
      else if (outcome === 'x') g.rejects('invalid_transition', `${from} → ${to}`);
      else g.then([{ type: outcome, data: { mandate_id: 'mdt_1', from, to, reason: 'because', at: now } } as DomainEvent], `${from} → ${to}`);
    }
  }
  given(t, mandateDecider, [created], later).when(move('paused')).rejects('invalid_transition', 'past expires_at the mandate is expired, reactor or not');
  given(t, mandateDecider, [], now).when(move('paused')).rejects('mandate_not_found');
  given(t, mandateDecider, [created], now).when({ type: 'move', tenant: { orgId: 'org_2', projectId: 'prj_1' }, to: 'paused', reason: null }).rejects('mandate_not_found', 'another tenant');
});

const spend = (amount: bigint, extra: Partial<{ currency: string; merchant: string }> = {}): MandateCommand => ({
  type: 'spend',
  tenant,
  spend: { transactionId: 'txn_1', channel: 'api', amount, currency: extra.currency ?? 'BRL', merchant: extra.merchant ?? ' SHOP@pix.example ', description: null },
});
const approved = (amount: string, spent: string, remaining: string): DomainEvent => ({
  type: 'mandate.spend_approved',
  data: { mandate_id: 'mdt_1', transaction_id: 'txn_1', channel: 'api', amount_minor: amount, currency: 'BRL', merchant: ' SHOP@pix.example ', description: null, spent_minor: spent, remaining_minor: remaining, at: now },
});
const declined = (amount: string, code: string, extra: Partial<{ currency: string; merchant: string }> = {}): DomainEvent => ({
  type: 'mandate.spend_declined',
  data: { mandate_id: 'mdt_1', transaction_id: 'txn_1', channel: 'api', amount_minor: amount, currency: extra.currency ?? 'BRL', merchant: extra.merchant ?? ' SHOP@pix.example ', description: null, code, at: now },
});
const at = (e: DomainEvent, when: string) => ({ ...e, data: { ...e.data, at: when } }) as DomainEvent;
const spent700 = [created, approved('300', '300', '700'), approved('300', '600', '400'), approved('100', '700', '300')];

t.test('spends at the edges', async (t) => {
  given(t, mandateDecider, [created], now).when(spend(300n)).then([approved('300', '300', '700')], 'per-tx exactly');
  given(t, mandateDecider, [created], now).when(spend(301n)).then([declined('301', 'per_tx_cap_exceeded')], 'per-tx one over');
  given(t, mandateDecider, spent700, now).when(spend(300n)).then([approved('300', '1000', '0')], 'exactly the cap');
  given(t, mandateDecider, spent700, now).when(spend(301n)).then([declined('301', 'per_tx_cap_exceeded')], 'over per-tx is checked before the total');
  given(t, mandateDecider, [...spent700, approved('300', '1000', '0')], now).when(spend(1n)).then([declined('1', 'total_cap_exceeded')], 'one over the cap');
  given(t, mandateDecider, [created], now).when(spend(10n, { currency: 'USD' })).then([declined('10', 'currency_not_authorized', { currency: 'USD' })], 'wrong currency');
  given(t, mandateDecider, [created], now).when(spend(10n, { merchant: 'other@pix.example' })).then([declined('10', 'merchant_not_allowed', { merchant: 'other@pix.example' })], 'merchant not allowed');
  given(t, mandateDecider, histories.paused!, now).when(spend(10n)).then([declined('10', 'mandate_not_active')], 'paused');
  given(t, mandateDecider, histories.revoked!, now).when(spend(10n)).then([declined('10', 'mandate_already_revoked')], 'revoked');
  given(t, mandateDecider, [created], later)
    .when(spend(10n))
    .then([at(moved('mandate.expired', 'active', 'expired'), later), at(declined('10', 'mandate_already_expired'), later)], 'after expiry: the expiry is recorded with the decline');
  given(t, mandateDecider, [], now).when(spend(10n)).rejects('mandate_not_found');
});

t.test('expire and cards', async (t) => {
  given(t, mandateDecider, [created], now).when({ type: 'expire' }).then([], 'not yet');
  given(t, mandateDecider, [created], later).when({ type: 'expire' }).then([at(moved('mandate.expired', 'active', 'expired'), later)]);
  given(t, mandateDecider, histories.expired!, later).when({ type: 'expire' }).then([], 'already expired');
  given(t, mandateDecider, histories.paused!, now).when({ type: 'bind_card', tenant, cardId: 'card_1', issuer: 'sandbox' }).rejects('mandate_not_active');
  given(t, mandateDecider, [created], now).when({ type: 'revoke_card', tenant }).rejects('no_active_card');
});
