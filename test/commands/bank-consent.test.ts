import t from 'tap';
import { consentDecider, slotDecider } from '../../commands/bank-consent.ts';
import type { DomainEvent } from '../../events/index.ts';
import { given } from '../helpers/decider.ts';

// Every (state × trigger) pair of the consent state machine, and the slot.

const now = '2026-11-21T12:00:00.000Z';
const tenant = { orgId: 'org_1', projectId: 'prj_1' };
const initiated: DomainEvent = {
  type: 'bank_consent.initiated',
  data: { consent_id: 'ofb_1', org_id: 'org_1', project_id: 'prj_1', consumer_id: 'cns_1', bank_id: 'sandbox-bank', bank_consent_id: 'urn:x', scopes: ['A'], redirect_url: 'https://x', authorisation_url: 'https://bank/authorise', wallet_id: null, expires_at: '2027-01-01T00:00:00.000Z', created_at: now },
};
const states: Record<string, DomainEvent[]> = {
  pending: [initiated],
  authorised: [initiated, { type: 'bank_consent.authorised', data: { consent_id: 'ofb_1', token_ref: 'vault_1', token_expires_at: now, authorized_at: now } }],
  revoked: [initiated, { type: 'bank_consent.revoked', data: { consent_id: 'ofb_1', from: 'pending', at: now } }],
  expired: [initiated, { type: 'bank_consent.expired', data: { consent_id: 'ofb_1', from: 'pending', at: now } }],
};

t.test('every state × trigger', async (t) => {
  for (const [from, h] of Object.entries(states)) {
    const open = from === 'pending' || from === 'authorised';
    const auth = given(t, consentDecider, h, now).when({ type: 'authorise', tenant, tokenRef: 'vault_2', tokenExpiresAt: now });
    if (from === 'pending') auth.then([{ type: 'bank_consent.authorised', data: { consent_id: 'ofb_1', token_ref: 'vault_2', token_expires_at: now, authorized_at: now } }], 'pending → authorised');
    else auth.rejects('invalid_transition', `${from} → authorised`);
    const revoke = given(t, consentDecider, h, now).when({ type: 'close', tenant, to: 'revoked' });
    if (open) revoke.then([{ type: 'bank_consent.revoked', data: { consent_id: 'ofb_1', from: from as 'pending', at: now } }], `${from} → revoked`);
    else revoke.rejects('invalid_transition', `${from} → revoked`);
    const expire = given(t, consentDecider, h, now).when({ type: 'close', tenant: null, to: 'expired' });
    if (open) expire.then([{ type: 'bank_consent.expired', data: { consent_id: 'ofb_1', from: from as 'pending', at: now } }], `${from} → expired`);
    else expire.then([], `${from}: expiry of a closed consent changes nothing`);
  }
  given(t, consentDecider, [], now).when({ type: 'close', tenant, to: 'revoked' }).rejects('not_found');
  given(t, consentDecider, [initiated], now).when({ type: 'authorise', tenant: { orgId: 'org_1', projectId: 'prj_2' }, tokenRef: 'v', tokenExpiresAt: now }).rejects('not_found', 'a sibling project');
});

t.test('imports are deduplicated by the bank transaction id', async (t) => {
  const tx = (id: string) => ({ bank_transaction_id: id, amount_minor: '1', currency: 'BRL', credit_debit: 'CREDIT', description: 'd', booked_at: now });
  const first: DomainEvent = { type: 'bank_consent.transactions_imported', data: { consent_id: 'ofb_1', run_id: 'run_1', wallet_id: null, page: 1, transactions: [tx('a'), tx('b')] } };
  given(t, consentDecider, [...states.authorised!, first], now)
    .when({ type: 'import_page', runId: 'run_2', page: 1, transactions: [tx('a'), tx('c'), tx('c')] })
    .then([{ type: 'bank_consent.transactions_imported', data: { consent_id: 'ofb_1', run_id: 'run_2', wallet_id: null, page: 1, transactions: [tx('c')] } }]);
  given(t, consentDecider, [...states.authorised!, first], now).when({ type: 'import_page', runId: 'run_2', page: 1, transactions: [tx('a'), tx('b')] }).then([], 'all duplicates');
});

t.test('the slot: one holder, released only by its holder', async (t) => {
  const claimed: DomainEvent = { type: 'bank_consent_slot.claimed', data: { consent_id: 'ofb_1', project_id: 'prj_1', at: now } };
  given(t, slotDecider, [], now).when({ type: 'claim', consentId: 'ofb_1', projectId: 'prj_1' }).then([claimed]);
  given(t, slotDecider, [claimed], now).when({ type: 'claim', consentId: 'ofb_2', projectId: 'prj_2' }).rejects('slot_taken');
  given(t, slotDecider, [claimed], now).when({ type: 'release', consentId: 'ofb_9' }).then([], 'not the holder');
  given(t, slotDecider, [claimed], now).when({ type: 'release', consentId: 'ofb_1' }).then([{ type: 'bank_consent_slot.released', data: { consent_id: 'ofb_1', at: now } }]);
});
