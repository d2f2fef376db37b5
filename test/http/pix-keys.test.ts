import t from 'tap';
import { CNPJ, CPF, CPF_DIGITS, OTHER_CPF, pixApp } from '../helpers/pix.ts';

const { sandbox, call, consumer, head, org, other } = await pixApp(t);
const ana = await consumer();
const keysUrl = `/v1/consumers/${ana}/pix-keys`;
const liveHeaders = { authorization: `Bearer ${org.liveKey}` };
const liveAna = (await call('POST', '/v1/consumers', { display_name: 'Live Ana' }, liveHeaders)).json().id as string;

t.test('without a partner account: 422 no_partner_account, nothing written', async (t) => {
  const before = await head();
  for (const [m, url, body] of [
    ['GET', keysUrl, undefined],
    ['POST', keysUrl, { key_type: 'EVP' }],
    ['DELETE', `${keysUrl}/abc`, undefined],
    ['POST', `/v1/consumers/${ana}/pix/charges`, { amount_minor: 100 }],
    ['GET', `/v1/consumers/${ana}/pix/receivements/E99999008202611230915aB3dE5fG7h9`, undefined],
  ] as const) {
    const r = await call(m, url, body);
    t.equal(r.statusCode, 422, `${m} ${url}`);
    t.equal(r.json().error.code, 'no_partner_account');
  }
  t.equal((await call('GET', '/v1/consumers/cns_nobody/pix-keys')).statusCode, 404, 'an unknown consumer is 404');
  t.equal(await head(), before);
});

t.test('opening the partner account', async (t) => {
  const before = await head();
  const bad = await call('POST', `/v1/consumers/${ana}/pix/partner-account`, { document: '529.982.247-24' });
  t.equal(bad.statusCode, 400, 'a document with wrong check digits');
  sandbox.refusedDocuments.add(CPF_DIGITS);
  const kyc = await call('POST', `/v1/consumers/${ana}/pix/partner-account`, { document: CPF });
  t.equal(kyc.statusCode, 422);
  t.match(kyc.json().error, { code: 'partner_account_refused', details: { provider_code: 'KYC_RECUSADO' } });
  sandbox.refusedDocuments.clear();
  const mixed = await call('POST', `/v1/consumers/${ana}/pix/partner-account`, { document: CPF }, liveHeaders);
  t.equal(mixed.statusCode, 404, 'a live key on the test consumer: not in live (issue 60), the PSP never asked');
  const live = await call('POST', `/v1/consumers/${liveAna}/pix/partner-account`, { document: CPF }, liveHeaders);
  t.equal(live.statusCode, 501, 'a live key without a configured PSP');
  t.equal(live.json().error.code, 'not_wired');
  const faucet = await call('POST', '/v1/test/pix/partner-accounts', { consumer_id: ana, document: CPF }, { authorization: `Bearer ${org.liveKey}` });
  t.equal(faucet.statusCode, 403);
  t.equal(faucet.json().error.code, 'sandbox_funding_not_permitted');
  t.equal(await head(), before, 'nothing written by the refusals');

  const opened = await call('POST', `/v1/consumers/${ana}/pix/partner-account`, { document: CPF });
  t.equal(opened.statusCode, 201, opened.body);
  t.match(opened.json(), { consumer_id: ana, account_id: /^pxa_/, account_masked: /^\*{4}\d{2}$/, psp: 'sandbox', document_type: 'CPF', funding_sources: [{ funding_source_id: /^fs_/, currency: 'BRL', status: 'active' }] });
  const again = await call('POST', `/v1/consumers/${ana}/pix/partner-account`, { document: CPF });
  t.equal(again.statusCode, 409);
  t.equal(again.json().error.code, 'partner_account_exists');
  // The test-only route on test keys, for another consumer.
  const bia = await consumer();
  const sbx = await call('POST', '/v1/test/pix/partner-accounts', { consumer_id: bia, document: CNPJ });
  t.equal(sbx.statusCode, 201);
  t.equal(sbx.json().document_type, 'CNPJ');
});

t.test('every key refusal, nothing written', async (t) => {
  const before = await head();
  const cases: [Record<string, unknown>, number, string][] = [
    [{ key_type: 'EVP', key: '123e4567-e89b-42d3-a456-426614174000' }, 400, 'invalid_body'],
    [{ key_type: 'CPF' }, 400, 'invalid_body'],
    [{ key_type: 'IBAN', key: 'x' }, 400, 'invalid_body'],
    [{ key_type: 'CPF', key: '529.982.247-24' }, 400, 'pix_key_invalid'],
    [{ key_type: 'CNPJ', key: '11.222.333/0001-80' }, 400, 'pix_key_invalid'],
    [{ key_type: 'EMAIL', key: 'ana@' }, 400, 'pix_key_invalid'],
    [{ key_type: 'PHONE', key: '11987654321' }, 400, 'pix_key_invalid'],
    [{ key_type: 'CPF', key: OTHER_CPF }, 403, 'pix_key_document_mismatch'],
    [{ key_type: 'CNPJ', key: CNPJ }, 403, 'pix_key_document_mismatch'],
    [{ key_type: 'EMAIL', key: 'Ana@Example.com' }, 409, 'pix_key_ownership_unverified'],
    [{ key_type: 'PHONE', key: '+5511987654321' }, 409, 'pix_key_ownership_unverified'],
  ];
  for (const [body, status, code] of cases) {
    const r = await call('POST', keysUrl, body);
    t.equal(r.statusCode, status, `${JSON.stringify(body)} → ${status}`);
    t.equal(r.json().error.code, code);
  }
  const own = await call('POST', keysUrl, { key_type: 'EMAIL', key: 'Ana@Example.com' });
  t.same(own.json().error.details, { channel: 'email', endpoint: 'ana@example.com', window: 'P30D' });

  sandbox.fault('register', { kind: 'refuse', status: 422, code: 'ENTRY_LIMIT_EXCEEDED' });
  const refused = await call('POST', keysUrl, { key_type: 'EVP' });
  t.equal(refused.statusCode, 422);
  t.same(refused.json().error.details, { provider_status: 422, provider_code: 'ENTRY_LIMIT_EXCEEDED' });
  sandbox.fault('register', { kind: '5xx', status: 503, code: 'SERVICO_INDISPONIVEL' });
  const transient = await call('POST', keysUrl, { key_type: 'EVP' });
  t.equal(transient.statusCode, 502);
  t.match(transient.json().error, { code: 'pix_key_provider_unavailable', details: { provider_status: 503, provider_code: 'SERVICO_INDISPONIVEL' } });
  sandbox.fault('register', { kind: 'timeout_before' });
  const notRegistered = await call('POST', keysUrl, { key_type: 'CPF', key: CPF });
  t.equal(notRegistered.statusCode, 502);
  t.match(notRegistered.json().error, { code: 'pix_key_provider_unavailable', details: { verified_not_registered: true, inventory_count: 0 } });
  sandbox.fault('list', { kind: 'refuse', status: 403, code: 'ACESSO_NEGADO' });
  const listRefused = await call('GET', keysUrl);
  t.equal(listRefused.statusCode, 422);
  t.match(listRefused.json().error, { code: 'pix_key_provider_refused', details: { provider_code: 'ACESSO_NEGADO' } });
  sandbox.fault('list', { kind: '5xx' });
  t.equal((await call('GET', keysUrl)).statusCode, 502, 'listing: 502 transient');
  t.equal(await head(), before, 'nothing written by any refusal');
  t.equal(sandbox.accounts.values().next().value!.keys.size, 0, 'and nothing registered at the PSP');
});

t.test('contact verification, then e-mail and CPF keys', async (t) => {
  const started = await call('POST', `/v1/consumers/${ana}/pix/contact-verifications`, { channel: 'email', endpoint: 'Ana@Example.com' });
  t.equal(started.statusCode, 201);
  const v = started.json();
  t.match(v, { verification_id: /^pcv_/, channel: 'email', endpoint: 'ana@example.com', window: 'P30D', verified_at: null, sandbox_code: /^\d{6}$/ });
  const wrong = await call('POST', `/v1/consumers/${ana}/pix/contact-verifications/${v.verification_id}/confirm`, { code: v.sandbox_code === '000000' ? '111111' : '000000' });
  t.equal(wrong.statusCode, 422);
  t.equal(wrong.json().error.code, 'contact_verification_code_mismatch');
  t.same(wrong.json().error.details, { attempts_left: 4 });
  const ok = await call('POST', `/v1/consumers/${ana}/pix/contact-verifications/${v.verification_id}/confirm`, { code: v.sandbox_code });
  t.equal(ok.statusCode, 200);
  t.ok(ok.json().verified_at);

  const email = await call('POST', keysUrl, { key_type: 'EMAIL', key: 'Ana@Example.com' });
  t.equal(email.statusCode, 201, email.body);
  t.match(email.json(), { key: 'ana@example.com', key_type: 'EMAIL', account_masked: /^\*{4}\d{2}$/, cache_filled: true, reconciled: false });
  const cpf = await call('POST', keysUrl, { key_type: 'CPF', key: CPF });
  t.equal(cpf.statusCode, 201);
  t.equal(cpf.json().key, CPF_DIGITS);
  const list = (await call('GET', keysUrl)).json();
  t.equal(list.count, 2);
  t.same(list.keys.map((k: { key: string }) => k.key).sort(), [CPF_DIGITS, 'ana@example.com'].sort());
  t.match(list.account_masked, /^\*{4}\d{2}$/);
  // A slow PSP is waited for (within the adapter's timeout).
  sandbox.fault('list', { kind: 'slow', ms: 300 });
  t.equal((await call('GET', keysUrl)).json().count, 2, 'a slow answer still counts');
});

t.test('the framework-default 500 shape', async (t) => {
  sandbox.fault('register', { kind: 'garbage' });
  const r = await call('POST', keysUrl, { key_type: 'EVP' });
  t.equal(r.statusCode, 500);
  t.match(r.json(), { statusCode: 500, error: 'Internal Server Error', message: String, code: 'pix_key_provider_malformed' });
  t.notOk('request_id' in r.json());
  // The PSP had registered it: the listing reconciles it into the cache.
  const list = (await call('GET', keysUrl)).json();
  t.equal(list.count, 3);
  // Repeating the EVP registration adopts that key instead of drawing a second one.
  const evp = list.keys.find((k: { key_type: string }) => k.key_type === 'EVP').key;
  const repeat = await call('POST', keysUrl, { key_type: 'EVP' });
  t.match(repeat.json(), { key: evp, key_type: 'EVP', reconciled: true });
  t.equal((await call('GET', keysUrl)).json().count, 3);
});

t.test('the uncertain registration', async (t) => {
  const atPsp = () => [...sandbox.accounts.values()].find((a) => a.documento === CPF_DIGITS)!.keys;
  const before = atPsp().size;
  sandbox.fault('register', { kind: 'timeout_after' });
  const r = await call('POST', keysUrl, { key_type: 'EVP' });
  t.equal(r.statusCode, 409);
  t.same(r.json().error.details, { retry_safe: false, inventory_known: true, inventory_count: before + 1 });
  t.equal(r.json().error.code, 'pix_key_registration_uncertain');
  const list = (await call('GET', keysUrl)).json();
  t.equal(list.count, before + 1, 'listing reconciles');
  t.ok(list.keys.some((k: { key: string; key_type: string }) => k.key_type === 'EVP'), 'and shows the EVP');
  const newest = list.keys.filter((k: { key_type: string }) => k.key_type === 'EVP').map((k: { key: string }) => k.key);
  const repeat = await call('POST', keysUrl, { key_type: 'EVP' });
  t.equal(repeat.statusCode, 201);
  t.equal(repeat.json().reconciled, true);
  t.ok(newest.includes(repeat.json().key), 'the repeat answers with the key registered before');
  t.equal(atPsp().size, before + 1, 'no second key at the PSP');

  // A phone key whose registration timed out: the repeat reconciles first and does not register twice.
  const v = (await call('POST', `/v1/consumers/${ana}/pix/contact-verifications`, { channel: 'phone', endpoint: '+5511987654321' })).json();
  await call('POST', `/v1/consumers/${ana}/pix/contact-verifications/${v.verification_id}/confirm`, { code: v.sandbox_code });
  sandbox.fault('register', { kind: 'timeout_after' });
  const phone = await call('POST', keysUrl, { key_type: 'PHONE', key: '+5511987654321' });
  t.equal(phone.statusCode, 409);
  const registerCalls = sandbox.calls.filter((c) => c.startsWith('POST /contas/')).length;
  const again = await call('POST', keysUrl, { key_type: 'PHONE', key: '+5511987654321' });
  t.equal(again.statusCode, 201);
  t.match(again.json(), { key: '+5511987654321', key_type: 'PHONE', reconciled: true });
  t.equal(sandbox.calls.filter((c) => c.startsWith('POST /contas/')).length, registerCalls, 'the repeat did not register again');
  t.equal(atPsp().size, before + 2);
});

t.test('deleting a key', async (t) => {
  t.equal((await call('DELETE', `${keysUrl}/%20%20`)).statusCode, 400, 'an empty key after trimming');
  const r = await call('DELETE', `${keysUrl}/${encodeURIComponent(' Ana@Example.com ')}`);
  t.equal(r.statusCode, 200, r.body);
  t.match(r.json(), { key: 'ana@example.com', account_masked: /^\*{4}\d{2}$/, deleted: true, cache_cleared: true, cache_refilled_with: String });
  t.notOk((await call('GET', keysUrl)).json().keys.some((k: { key: string }) => k.key === 'ana@example.com'));
  const before = await head();
  const gone = await call('DELETE', `${keysUrl}/ana@example.com`);
  t.equal(gone.statusCode, 422);
  t.match(gone.json().error, { code: 'pix_key_provider_refused', details: { provider_code: 'ENTRY_NOT_FOUND' } });
  sandbox.fault('delete', { kind: 'timeout_after' });
  const unknown = await call('DELETE', `${keysUrl}/${CPF_DIGITS}`);
  t.equal(unknown.statusCode, 502);
  t.match(unknown.json().error, { code: 'pix_key_provider_unavailable', details: { outcome: 'unknown' } });
  t.equal(await head(), before, 'nothing written when refused or unknown');
  const list = (await call('GET', keysUrl)).json();
  t.notOk(list.keys.some((k: { key: string }) => k.key === CPF_DIGITS), 'listing shows the deletion went through');
});

t.test('tenancy: another organization', async (t) => {
  for (const [m, url, body] of [
    ['GET', keysUrl, undefined],
    ['POST', keysUrl, { key_type: 'EVP' }],
    ['DELETE', `${keysUrl}/${CPF_DIGITS}`, undefined],
    ['GET', `/v1/consumers/${ana}/pix/partner-account`, undefined],
  ] as const) {
    const r = await call(m, url, body, other.key);
    t.equal(r.statusCode, 404, `${m} ${url}`);
    t.equal(r.json().error.code, 'not_found');
  }
});
