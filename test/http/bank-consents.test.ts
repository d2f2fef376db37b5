import t from 'tap';
import { HttpBank } from '../../src/adapters/bank/http-bank.ts';
import { SandboxBank } from '../../src/adapters/bank/sandbox-bank.ts';
import type { Bank } from '../../src/adapters/bank/port.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';

// The whole consent flow over real HTTP against the sandbox bank on loopback.

const sandbox = new SandboxBank(5);
const url = await sandbox.start();
t.teardown(() => sandbox.stop());
const banks = new Map<string, Bank>([
  ['sandbox-bank', new HttpBank('sandbox-bank', { baseUrl: url, clientId: sandbox.clientId, clientSecret: sandbox.clientSecret, timeoutMs: 5_000 })],
  ['dead-bank', new HttpBank('dead-bank', { baseUrl: 'http://127.0.0.1:9', clientId: 'x', clientSecret: 'y' })],
]);
const { app, ledger } = await testApp(t, { banks });
const org = await bootstrapOrg(app, 'Banked');
const second = (await app.inject({ method: 'POST', url: '/v1/projects', headers: org.key, payload: { name: 'B', slug: 'b' } })).json();
const inB = { ...org.key, 'x-svc-project': second.id };
const post = (path: string, payload?: Record<string, unknown>, headers: Record<string, string> = org.key) => app.inject({ method: 'POST', url: path, headers, ...(payload ? { payload } : {}) });
const consumer = (await post('/v1/consumers', {})).json();
const body = { bank_id: 'sandbox-bank', consumer_id: consumer.id, redirect_url: 'https://app.example.com/ofb/return', scopes: ['ACCOUNTS_READ', 'TRANSACTIONS_READ'], wallet_id: 'wallet-main' };

/** Follows the authorisation URL as a browser would and returns the code from the redirect. */
async function authorise(authorisationUrl: string, state: string): Promise<string> {
  const res = await fetch(authorisationUrl, { redirect: 'manual' });
  t.equal(res.status, 302);
  const back = new URL(res.headers.get('location')!);
  t.equal(back.searchParams.get('state'), state, 'state round-trips');
  return back.searchParams.get('code')!;
}

t.test('the full flow: create, authorise, refresh twice, revoke, create again', async (t) => {
  const created = await post('/v1/bank-consents', body);
  t.equal(created.statusCode, 201);
  const c = created.json();
  t.match(c, { id: /^ofb_/, bank_id: 'sandbox-bank', status: 'pending', authorisation_url: /\/authorise\?/, bank_consent_id: /^urn:sandboxbank:/, authorized_at: null, wallet_id: 'wallet-main' });
  const code = await authorise(c.authorisation_url, c.id);
  const cb = await post(`/v1/bank-consents/${c.id}/callback`, { auth_code: code });
  t.equal(cb.statusCode, 200);
  t.match(cb.json(), { status: 'authorised', authorized_at: /Z$/, token_expires_at: /Z$/ });
  t.notOk(cb.body.includes('token_ref') || cb.body.includes('access_token'), 'token references are never returned');
  const r1 = await post(`/v1/bank-consents/${c.id}/refresh-statement`);
  t.equal(r1.statusCode, 202);
  t.match(r1.json(), { consent_id: c.id, run_id: /^run_/, imported: 125, duplicates: 0, next_recon_cycle_within_seconds: Number });
  const r2 = (await post(`/v1/bank-consents/${c.id}/refresh-statement`)).json();
  t.same([r2.imported, r2.duplicates], [0, 125], 'all duplicates the second time');
  await ledger.settle();
  const { rows } = await ledger.db.query<{ n: string; w: string }>('SELECT count(*)::text AS n, min(wallet_id) AS w FROM bank_statement_lines WHERE consent_id = $1', [c.id]);
  t.same(rows[0], { n: '125', w: 'wallet-main' }, 'statement lines carry the wallet id');
  const types = (await ledger.store.readStream(`bank_consent-${c.id}`)).map((e) => e.type);
  t.ok(types.includes('bank_consent.statement_refresh_started') && types.includes('bank_consent.statement_refresh_completed'));
  const rv = await post(`/v1/bank-consents/${c.id}/revoke`);
  t.equal(rv.json().status, 'revoked');
  t.equal(sandbox.consents.get(c.bank_consent_id)!.status, 'DELETED', 'the bank-side consent is deleted');
  t.match((await post(`/v1/bank-consents/${c.id}/revoke`)).json().error, { code: 'invalid_transition', details: { from: 'revoked', to: 'revoked' } });
  t.match((await post(`/v1/bank-consents/${c.id}/callback`, { auth_code: 'x' })).json().error, { code: 'invalid_transition', details: { from: 'revoked', to: 'authorised' } });
  t.equal((await post(`/v1/bank-consents/${c.id}/refresh-statement`)).json().error.code, 'consent_not_authorised');
  const again = await post('/v1/ofb/consents', body);
  t.equal(again.statusCode, 201, 'the slot was released: a new consent can be created (legacy path too)');
  t.equal((await app.inject({ method: 'GET', url: `/v1/ofb/consents/${again.json().id}`, headers: org.key })).statusCode, 200);
  await post(`/v1/bank-consents/${again.json().id}/revoke`);
});

t.test('the deprecated /v1/ofb/consents paths run the same flow, a refresh bounded by since and until', async (t) => {
  const c = (await post('/v1/ofb/consents', body)).json();
  const cb = await post(`/v1/ofb/consents/${c.id}/callback`, { auth_code: await authorise(c.authorisation_url, c.id) });
  t.equal(cb.statusCode, 200);
  t.match(cb.json(), { id: c.id, status: 'authorised' });
  const r = await post(`/v1/ofb/consents/${c.id}/refresh-statement`, { since: '2020-01-01T00:00:00Z', until: '2100-01-01T00:00:00Z' });
  t.equal(r.statusCode, 202);
  t.match(r.json(), { consent_id: c.id, run_id: /^run_/ });
  t.equal((await post(`/v1/bank-consents/${c.id}/refresh-statement`, { since: '2100-01-01T00:00:00Z' })).statusCode, 202, 'the current path takes the same bounds');
  const rv = await post(`/v1/ofb/consents/${c.id}/revoke`);
  t.equal(rv.statusCode, 200);
  t.equal(rv.json().status, 'revoked');
});

t.test('faults: refusal at creation, a refused code, a failing page, a slow bank', async (t) => {
  const head = await ledger.store.headPosition();
  sandbox.faults.refuseCreate = true;
  const refused = await post('/v1/bank-consents', body);
  sandbox.faults.refuseCreate = false;
  t.same([refused.statusCode, refused.json().error.code], [502, 'bank_refused']);
  const unreachable = await post('/v1/bank-consents', { ...body, bank_id: 'dead-bank' });
  t.same([unreachable.statusCode, unreachable.json().error.code], [502, 'bank_unavailable']);
  t.same((await ledger.store.readAll({ after: head })).filter((e) => e.type.startsWith('bank_consent')), [], 'nothing written');

  const c = (await post('/v1/bank-consents', body)).json();
  sandbox.faults.refuseCode = true;
  const bad = await post(`/v1/bank-consents/${c.id}/callback`, { auth_code: await authorise(c.authorisation_url, c.id) });
  sandbox.faults.refuseCode = false;
  t.equal(bad.statusCode, 502);
  t.equal((await app.inject({ method: 'GET', url: `/v1/bank-consents/${c.id}`, headers: org.key })).json().status, 'pending', 'still pending');
  await post(`/v1/bank-consents/${c.id}/callback`, { auth_code: await authorise(c.authorisation_url, c.id) });

  sandbox.faults.failPage = 3;
  const failed = await post(`/v1/bank-consents/${c.id}/refresh-statement`);
  sandbox.faults.failPage = null;
  t.equal(failed.statusCode, 502);
  t.match(failed.json().error.details, { imported: 50, duplicates: 0, failed_page: 3 });
  const retry = (await post(`/v1/bank-consents/${c.id}/refresh-statement`)).json();
  t.same([retry.imported, retry.duplicates], [75, 50], 'the retry imports only pages 3-5');
  t.ok((await ledger.store.readStream(`bank_consent-${c.id}`)).some((e) => e.type === 'bank_consent.statement_refresh_failed'));

  // Slower than the client's 5 s timeout, whose timer starts before the bank's.
  sandbox.faults.slowMs = 6_000;
  const slow = await post(`/v1/bank-consents/${c.id}/refresh-statement`);
  sandbox.faults.slowMs = 0;
  t.same([slow.statusCode, slow.json().error.code], [502, 'bank_unavailable'], 'a bank past the timeout');
  await post(`/v1/bank-consents/${c.id}/revoke`);
});

t.test('cross-project conflict and concurrent creates', async (t) => {
  // One organization, projects A (the default) and B; the consumer is the organization's.
  const cA = (await post('/v1/consumers', {})).json();
  t.equal((await app.inject({ method: 'GET', url: `/v1/consumers/${cA.id}`, headers: inB })).statusCode, 200, 'project B sees the consumer created in A');
  const first = await post('/v1/bank-consents', { ...body, consumer_id: cA.id });
  t.equal(first.statusCode, 201);
  const own = await post('/v1/bank-consents', { ...body, consumer_id: cA.id });
  t.same([own.statusCode, own.json().error.code], [409, 'consent_active_for_consumer']);
  t.match(own.json().error.details, { consent_id: first.json().id });
  const head = await ledger.store.headPosition();
  const bankSide = sandbox.consents.size;
  for (const path of ['/v1/ofb/consents', '/v1/bank-consents']) {
    const held = await post(path, { ...body, consumer_id: cA.id }, inB);
    t.same([held.statusCode, held.json().error.code], [409, 'bank_consent_held_elsewhere'], `${path} from project B`);
    t.match(held.json().error.details, { remediation: String, retriable: false });
    t.notOk(held.body.includes(first.json().id), "A's consent id is not shown to B");
  }
  t.same((await ledger.store.readAll({ after: head })).filter((e) => e.type.startsWith('bank_consent')), [], 'nothing written');
  t.equal(sandbox.consents.size, bankSide, 'the bank was not asked');
  t.equal((await app.inject({ method: 'GET', url: `/v1/ofb/consents/${first.json().id}`, headers: inB })).statusCode, 404, "A's consent stays A's");
  // A revokes: the slot is free, B takes it, and now A is the one held elsewhere.
  t.equal((await post(`/v1/bank-consents/${first.json().id}/revoke`)).json().status, 'revoked');
  const inBNow = await post('/v1/ofb/consents', { ...body, consumer_id: cA.id }, inB);
  t.equal(inBNow.statusCode, 201, 'project B holds it once A revoked');
  const fromA = await post('/v1/bank-consents', { ...body, consumer_id: cA.id });
  t.same([fromA.statusCode, fromA.json().error.code], [409, 'bank_consent_held_elsewhere']);
  await post(`/v1/bank-consents/${inBNow.json().id}/revoke`, undefined, inB);
  // Two concurrent creates for one slot: exactly one consent.
  const cA3 = (await post('/v1/consumers', {})).json();
  const bankSideBefore = sandbox.consents.size;
  const orphansBefore = (await ledger.store.readStream(`bank_consent_orphans-${org.orgId}`)).length;
  const both = await Promise.all([post('/v1/bank-consents', { ...body, consumer_id: cA3.id }), post('/v1/bank-consents', { ...body, consumer_id: cA3.id })]);
  t.same(both.map((r) => r.statusCode).sort(), [201, 409]);
  await ledger.settle();
  const { rows } = await ledger.db.query<{ n: string }>(`SELECT count(*)::text AS n FROM bank_consents WHERE consumer_id = $1`, [cA3.id]);
  t.equal(rows[0]!.n, '1');
  const orphans = (await ledger.store.readStream(`bank_consent_orphans-${org.orgId}`)).length - orphansBefore;
  t.equal(sandbox.consents.size - bankSideBefore, 1 + orphans, 'every bank-side consent is a consent or a recorded orphan');
});

t.test('expiry moves open consents to expired and frees the slot', async (t) => {
  const cX = (await post('/v1/consumers', {})).json();
  const c = (await post('/v1/bank-consents', { ...body, consumer_id: cX.id })).json();
  await ledger.db.query(`UPDATE bank_consents SET expires_at = now() - interval '1 minute' WHERE id = $1`, [c.id]);
  const moved = await ledger.readSide.expiry.tick();
  t.ok(moved >= 1);
  await ledger.settle();
  t.equal((await app.inject({ method: 'GET', url: `/v1/bank-consents/${c.id}`, headers: org.key })).json().status, 'expired');
  t.equal((await post('/v1/bank-consents', { ...body, consumer_id: cX.id })).statusCode, 201, 'the slot is free again');
  const list = (await app.inject({ method: 'GET', url: `/v1/bank-consents?consumer_id=${cX.id}`, headers: org.key })).json().consents;
  t.same(list.map((x: { status: string }) => x.status), ['pending', 'expired']);
});
