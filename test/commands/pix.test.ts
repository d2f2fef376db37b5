import t from 'tap';
import type { DomainEvent } from '../../events/index.ts';
import { type PixAccountState, pixAccountDecider, pixReceivementDecider, type PixReceivementState, recentVerification } from '../../commands/pix.ts';

// Given events, when a command, then events or a rejection: the Pix deciders.

const tenant = { orgId: 'org_1', projectId: 'prj_1' };
const now = '2026-11-23T10:00:00.000Z';
const fold = <S>(d: { initialState: () => S; evolve: (s: S, e: DomainEvent) => S }, events: DomainEvent[]) => events.reduce(d.evolve, d.initialState());
const opened: DomainEvent[] = pixAccountDecider.decide(
  { type: 'open', tenant, consumerId: 'cns_1', accountId: 'pxa_1', fundingSourceId: 'fs_1', psp: 'sandbox', pspAccount: '12345678', branch: '0001', ispb: '99999008', document: '52998224725', documentType: 'CPF', documentSource: 'psp_kyc' },
  { status: 'none' },
  { now },
);

t.test('opening records the account and its funding source; once', async (t) => {
  t.same(opened.map((e) => e.type), ['pix.partner_account_opened', 'pix.funding_source_activated']);
  t.throws(() => pixAccountDecider.decide({ type: 'reconcile', tenant: { orgId: 'org_2', projectId: 'prj_1' }, inventory: [] }, fold(pixAccountDecider, opened), { now }), { code: 'no_partner_account' }, "another organization's account is none");
});

t.test('an uncertain EVP registration, reconciled, is adopted once', async (t) => {
  const uncertain = pixAccountDecider.decide({ type: 'key_uncertain', tenant, keyType: 'EVP', key: null }, fold(pixAccountDecider, opened), { now });
  let s = fold(pixAccountDecider, [...opened, ...uncertain]) as Extract<PixAccountState, { status: 'open' }>;
  t.equal(s.uncertain.length, 1);
  const rec = pixAccountDecider.decide({ type: 'reconcile', tenant, inventory: [{ key: 'k-evp', keyType: 'EVP' }] }, s, { now });
  t.match(rec, [{ type: 'pix.keys_reconciled', data: { added: [{ key: 'k-evp', key_type: 'EVP' }], removed: [], inventory_count: 1 } }]);
  s = fold(pixAccountDecider, [...opened, ...uncertain, ...rec]) as typeof s;
  t.same(s.pendingEvp, ['k-evp']);
  t.same(s.uncertain, []);
  const adopt = pixAccountDecider.decide({ type: 'key_registered', tenant, key: 'k-evp', keyType: 'EVP' }, s, { now });
  t.equal(adopt.length, 1, 'the pending EVP is claimed by the repeat');
  s = fold(pixAccountDecider, [...opened, ...uncertain, ...rec, ...adopt]) as typeof s;
  t.same(s.pendingEvp, []);
  t.same(pixAccountDecider.decide({ type: 'key_registered', tenant, key: 'k-evp', keyType: 'EVP' }, s, { now }), [], 'and only once');
  t.same(pixAccountDecider.decide({ type: 'reconcile', tenant, inventory: [{ key: 'k-evp', keyType: 'EVP' }] }, s, { now }), [], 'nothing to reconcile when the cache matches');
});

t.test('contact verification: code, expiry, window', async (t) => {
  const started = pixAccountDecider.decide({ type: 'start_contact_verification', tenant, verificationId: 'pcv_1', channel: 'email', endpoint: 'a@b.co', codeHash: 'h', expiresAt: '2026-11-23T10:15:00.000Z' }, fold(pixAccountDecider, opened), { now });
  const s = fold(pixAccountDecider, [...opened, ...started]);
  // Wrong codes are recorded; the fifth locks the verification, even for the right code.
  let wrong: DomainEvent[] = [];
  for (let i = 1; i <= 5; i++) {
    const e = pixAccountDecider.decide({ type: 'confirm_contact_verification', tenant, verificationId: 'pcv_1', codeHash: 'x' }, fold(pixAccountDecider, [...opened, ...started, ...wrong]), { now });
    t.match(e, [{ type: 'pix.contact_verification_failed', data: { attempts: i } }]);
    wrong = [...wrong, ...e];
  }
  t.throws(() => pixAccountDecider.decide({ type: 'confirm_contact_verification', tenant, verificationId: 'pcv_1', codeHash: 'h' }, fold(pixAccountDecider, [...opened, ...started, ...wrong]), { now }), { code: 'contact_verification_locked' });
  t.throws(() => pixAccountDecider.decide({ type: 'confirm_contact_verification', tenant, verificationId: 'pcv_1', codeHash: 'h' }, s, { now: '2026-11-23T10:15:00.000Z' }), { code: 'contact_verification_expired' });
  const ok = pixAccountDecider.decide({ type: 'confirm_contact_verification', tenant, verificationId: 'pcv_1', codeHash: 'h' }, s, { now });
  const v = fold(pixAccountDecider, [...opened, ...started, ...ok]) as Extract<PixAccountState, { status: 'open' }>;
  t.ok(recentVerification(v, 'email', 'a@b.co', now));
  t.ok(recentVerification(v, 'email', 'a@b.co', '2026-12-23T09:59:00.000Z'), 'within 30 days');
  t.notOk(recentVerification(v, 'email', 'a@b.co', '2026-12-23T10:01:00.000Z'), 'not after 30 days');
  t.notOk(recentVerification(v, 'phone', 'a@b.co', now), 'per channel');
});

t.test('a receivement is recorded once and credits once', async (t) => {
  const data = { end_to_end_id: 'E1', org_id: 'org_1', project_id: 'prj_1', consumer_id: 'cns_1', account_id: 'pxa_1', psp: 'sandbox' as const, provider_transaction_type: 'PIX_RECEBIDO', provider_transaction_id: null, provider_amount: '1.00', received_minor: '100', initiation_type: 'QRDN', txid: 't', paid_at: now, correlation: 'charge_matched' as const, charge_id: 'pxc_1', source: 'notification' as const, received_at: now };
  const received = pixReceivementDecider.decide({ type: 'receive', data }, { status: 'none' }, { now });
  let s: PixReceivementState = fold(pixReceivementDecider, received);
  t.same(pixReceivementDecider.decide({ type: 'receive', data }, s, { now }), []);
  const credit = pixReceivementDecider.decide({ type: 'credit', walletId: 'fs_1', chargeId: 'pxc_1', amountMinor: '100' }, s, { now });
  t.equal(credit.length, 1);
  s = fold(pixReceivementDecider, [...received, ...credit]);
  t.same(pixReceivementDecider.decide({ type: 'credit', walletId: 'fs_1', chargeId: 'pxc_1', amountMinor: '100' }, s, { now }), []);
  const dev = pixReceivementDecider.decide({ type: 'devolve', devolutionId: 'd1', rtrId: null, amountMinor: '10', status: 'returned', walletId: 'fs_1' }, s, { now });
  t.match(dev, [{ type: 'pix.devolution_requested', data: { wallet_id: 'fs_1', amount_minor: '10' } }]);
});
