import t from 'tap';
import { directedConsentDecider } from '../../commands/directed-consent.ts';
import { mandateDecider, type MandateCommand } from '../../commands/mandate.ts';
import { payeeCurrency, payeeKind } from '../../commands/payee.ts';
import type { DomainEvent } from '../../events/index.ts';
import { given } from '../helpers/decider.ts';

// Deciders of issue 58, pure: a two-slot mandate's spends and transfers, the
// payee routing, and the consent's single use.

const now = '2026-11-21T12:00:00.000Z';
const tenant = { orgId: 'org_1', projectId: 'prj_1' };
const EVM = '0x2222222222222222222222222222222222222222';
const created: DomainEvent = {
  type: 'mandate.created',
  data: {
    mandate_id: 'mdt_1', org_id: 'org_1', project_id: 'prj_1', consumer_id: 'cns_1', agent_id: 'buyer', agent_did: '', purpose: 'p', display_name: null, intent_note: null,
    merchant_allowlist: ['loja@pix.example', EVM], merchant_pin_kind: 'merchant-id', cap_minor: '1000', per_tx_cap_minor: '300', currency: 'BRL',
    expires_at: '2026-12-31T00:00:00.000Z', created_at: now,
    slots: [
      { currency: 'BRL', rail: 'pix-celcoin', cap_minor: '1000', per_tx_cap_minor: '300', funding_source_id: 'fs_1' },
      { currency: 'USDC', rail: 'usdc-onchain', cap_minor: '500', per_tx_cap_minor: '100', funding_source_id: 'fs_2' },
    ],
  },
};
const spend = (currency: string, amount: bigint, merchant: string): MandateCommand => ({ type: 'spend', tenant, spend: { transactionId: 'txn_1', channel: 'api', amount, currency, merchant, description: null } });
const transfer = (from: string, to: string, amount: bigint, credited: bigint): MandateCommand => ({
  type: 'transfer', tenant, transfer: { transferId: 'trf_1', from, to, amount, credited, rateNumerator: 1n, rateDenominator: 5n, engine: 'sandbox-ramp', agentId: null, purpose: null },
});
const approved = (currency: string, amount: string, merchant: string, spent: string, remaining: string): DomainEvent => ({
  type: 'mandate.spend_approved',
  data: { mandate_id: 'mdt_1', transaction_id: 'txn_1', channel: 'api', amount_minor: amount, currency, merchant, description: null, spent_minor: spent, remaining_minor: remaining, at: now },
});

t.test('each slot its own caps', async (t) => {
  given(t, mandateDecider, [created]).when(spend('USDC', 100n, EVM)).then([approved('USDC', '100', EVM, '100', '400')]);
  given(t, mandateDecider, [created, approved('USDC', '100', EVM, '100', '400')]).when(spend('BRL', 300n, 'loja@pix.example')).then([approved('BRL', '300', 'loja@pix.example', '300', '700')], 'the BRL slot untouched by the USDC spend');
  const declined = (code: string, currency: string, amount: string): DomainEvent => ({ type: 'mandate.spend_declined', data: { mandate_id: 'mdt_1', transaction_id: 'txn_1', channel: 'api', amount_minor: amount, currency, merchant: EVM, description: null, code, at: now } });
  given(t, mandateDecider, [created]).when(spend('USDC', 101n, EVM)).then([declined('per_tx_cap_exceeded', 'USDC', '101')]);
  given(t, mandateDecider, [created]).when(spend('MXN', 1n, EVM)).then([declined('currency_not_authorized', 'MXN', '1')]);
});

t.test('transfers: the source gives, the destination gains; refusals', async (t) => {
  const executed: DomainEvent = {
    type: 'mandate.transfer_executed',
    data: { mandate_id: 'mdt_1', transfer_id: 'trf_1', from_currency: 'BRL', to_currency: 'USDC', amount_minor: '250', credited_minor: '50', rate_numerator: '1', rate_denominator: '5', engine: 'sandbox-ramp', agent_id: null, purpose: null, from_available_minor: '750', at: now },
  };
  given(t, mandateDecider, [created]).when(transfer('BRL', 'USDC', 250n, 50n)).then([executed]);
  // After it, USDC holds 550: 5 spends of 100 then one of 50 pass, the next unit does not.
  const state = [created, executed].reduce(mandateDecider.evolve, mandateDecider.initialState());
  t.match(state, { status: 'exists', m: { slots: [{ currency: 'BRL', movedOut: 250n }, { currency: 'USDC', movedIn: 50n }] } });
  given(t, mandateDecider, [created, executed]).when(spend('USDC', 100n, EVM)).then([approved('USDC', '100', EVM, '100', '450')]);
  given(t, mandateDecider, [created]).when(transfer('USDC', 'USDC', 10n, 10n)).rejects('same_slot_transfer');
  given(t, mandateDecider, [created]).when(transfer('BRL', 'MXN', 10n, 10n)).rejects('currency_not_authorized');
  given(t, mandateDecider, [created]).when(transfer('BRL', 'USDC', 301n, 60n)).then([
    { type: 'mandate.transfer_declined', data: { mandate_id: 'mdt_1', transfer_id: 'trf_1', from_currency: 'BRL', to_currency: 'USDC', amount_minor: '301', code: 'per_tx_cap_exceeded', at: now } },
  ]);
});

t.test('payee routing', async (t) => {
  const slots = [{ currency: 'BRL' }, { currency: 'USDC' }];
  t.same(['loja@pix.example', '+5511999998888', '12345678909', EVM, 'https://api.example/x', 'acme-store'].map(payeeKind), ['pix', 'pix', 'pix', 'evm', 'url', 'other']);
  t.equal(payeeCurrency(slots, 'loja@pix.example'), 'BRL');
  t.equal(payeeCurrency(slots, EVM), 'USDC');
  t.equal(payeeCurrency([{ currency: 'BRL' }, { currency: 'BRLA' }], EVM), 'BRLA', 'a BRL stablecoin on chain when no USDC slot');
  t.equal(payeeCurrency([{ currency: 'BRL' }], EVM), 'USDC', 'an unslotted currency: the decider refuses it');
  t.equal(payeeCurrency([{ currency: 'BRL' }], 'acme-store'), 'BRL', 'a merchant id: the only slot');
  t.equal(payeeCurrency(slots, 'acme-store'), null, 'several slots: the caller names the currency');
});

t.test('a consent is submitted once, with its own token, before it expires', async (t) => {
  const hash = 'a'.repeat(64);
  const initiated: DomainEvent = {
    type: 'directed_consent.initiated',
    data: { consent_id: 'dcn_1', org_id: 'org_1', project_id: 'prj_1', agent_id: 'buyer', token_sha256: hash, expires_at: '2026-11-21T12:30:00.000Z', created_at: now,
      intent: { purpose: 'p', cap_minor: '1', per_tx_cap_minor: '1', currency: 'BRL', mandate_ttl_seconds: 60, merchant_allowlist: ['x'], merchant_pin_kind: 'merchant-id', slots: null } },
  };
  const submit = (tokenSha256: string) => ({ type: 'submit' as const, tokenSha256, consumerId: 'cns_1', mandateId: 'mdt_1', fundingSources: [] });
  const submitted: DomainEvent = { type: 'directed_consent.submitted', data: { consent_id: 'dcn_1', consumer_id: 'cns_1', mandate_id: 'mdt_1', funding_sources: [], at: now } };
  given(t, directedConsentDecider, [initiated]).when(submit(hash)).then([submitted]);
  given(t, directedConsentDecider, [initiated, submitted]).when(submit(hash)).rejects('consent_already_used');
  given(t, directedConsentDecider, [initiated]).when(submit('b'.repeat(64))).rejects('consent_not_found');
  given(t, directedConsentDecider, []).when(submit(hash)).rejects('consent_not_found');
  given(t, directedConsentDecider, [initiated], '2026-11-21T12:30:00.000Z').when(submit(hash)).rejects('consent_expired');
});
