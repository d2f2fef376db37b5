import t from 'tap';
import jsqrModule from 'jsqr';
import { parsePix } from 'pix-utils';
import { computeCRC } from 'pix-utils/dist/main/crc.js';
import { parseEmv } from 'pix-utils/dist/main/emvHandler.js';
import { PNG } from 'pngjs';
import { crc16 } from '../../commands/pix-brcode.ts';
import { CNPJ, CPF, pixApp } from '../helpers/pix.ts';

const { sandbox, call, consumer, head, org, other, pay, ledger, clock, base } = await pixApp(t);
const ana = await consumer();
await call('POST', `/v1/consumers/${ana}/pix/partner-account`, { document: CPF });
const key = (await call('POST', `/v1/consumers/${ana}/pix-keys`, { key_type: 'EVP' })).json().key as string;
const charges = `/v1/consumers/${ana}/pix/charges`;
const receivement = (e2e: string, consumerId = ana) => `/v1/consumers/${consumerId}/pix/receivements/${e2e}`;
const wallet = async () => (await call('GET', `/v1/consumers/${ana}/wallet`)).json();
const creditedEvents = async () => (await ledger.store.readAll({ maxCount: 100_000 })).filter((e) => e.type === 'pix.wallet_credited');

let charge: { charge_id: string; txid: string };
let e2e: string;

// jsqr is CommonJS whose module.exports is the function (TypeScript's NodeNext view puts it under default).
const jsQR = jsqrModule as unknown as typeof jsqrModule.default;
// Independent checkers from the registry: pix-utils parses a BR Code (and
// checks its CRC), jsQR reads a QR image decoded from PNG by pngjs.
const decodeQr = (png: Buffer): string | null => {
  const img = PNG.sync.read(png);
  return jsQR(new Uint8ClampedArray(img.data), img.width, img.height)?.data ?? null;
};
const pngOfDataUri = (uri: string) => Buffer.from(uri.replace(/^data:image\/png;base64,/, ''), 'base64');
type Tag = { value: string; subTags?: { rawTags: Record<number, Tag> } };
const tagsOf = (brCode: string) => (parseEmv({ emvCode: brCode }) as unknown as { isValid: boolean; rawTags: Record<number, Tag> });

t.test('a charge created, paid by a simulated payer, notified three times, settled and credited once', async (t) => {
  const created = await call('POST', charges, { amount_minor: 1234, transaction_id: 'mint-tx-1', client_request_id: 'req_1' });
  t.equal(created.statusCode, 201, created.body);
  charge = created.json();
  t.match(charge, { charge_id: /^pxc_/, status: 'pending', amount_minor: 1234, currency: 'BRL', wallet_id: /^fs_/, settled_at: null, transaction_id: 'mint-tx-1', client_request_id: 'req_1', provider: null, status_message: String, kind: 'dynamic' });
  t.match(charge.txid, /^[A-Za-z0-9]{26,35}$/);
  t.equal(sandbox.cobs.get(charge.txid)?.valor, '12.34', 'a cob at the PSP');
  for (const ref of [charge.charge_id, 'mint-tx-1', 'req_1']) {
    const r = await call('GET', `${charges}/${ref}`);
    t.equal(r.statusCode, 200, ref);
    t.match(r.json(), { charge_id: charge.charge_id, status: 'pending', provider: { result: 'ATIVA', identity_verified: true } });
  }

  const paid = await pay({ txid: charge.txid, entregas: 3 });
  e2e = paid.endToEndId;
  t.match(e2e, /^E99999008\d{12}[A-Za-z0-9]{11}$/);
  t.same(paid.deliveries, [200, 200, 200], 'three deliveries, each accepted');
  const settled = (await call('GET', `${charges}/${charge.charge_id}`)).json();
  t.match(settled, { status: 'settled', settled_at: String, end_to_end_id: e2e, provider: null });
  const r = (await call('GET', receivement(e2e))).json();
  t.match(r, { end_to_end_id: e2e, received: true, provider_transaction_type: 'PIX_RECEBIDO', provider_amount: '12.34', initiation_type: 'QRDN', transaction_id_brcode: charge.txid, correlation: 'charge_matched', charge_id: charge.charge_id, charge_status: 'settled', amount_minor: 1234, wallet_id: (charge as unknown as { wallet_id: string }).wallet_id, wallet_credited: true, devolutions: [] });
  t.equal((await creditedEvents()).length, 1, 'one credit event for three notifications');
  const w = await wallet();
  t.match(w.currencies, [{ currency: 'BRL', pix_balance_minor: 1234 }]);
  t.same(w.currencies[0].funding_source_ids, [(charge as unknown as { wallet_id: string }).wallet_id], 'the currency row carries its Pix funding source');
});

t.test('notifications: signature, timestamp and replay', async (t) => {
  const before = await head();
  const body = { pix: [{ endToEndId: e2e, txid: charge.txid, valor: '12.34', horario: new Date().toISOString() }] };
  t.equal(await sandbox.notify(body, { id: 'msg_replay_1' }), 200);
  const mid = await head();
  t.equal(await sandbox.notify(body, { id: 'msg_replay_1' }), 409, 'the same message again is refused');
  t.equal(await head(), mid, 'nothing written by the replay');
  t.equal(await sandbox.notify(body, { at: new Date(clock.now().getTime() - 10 * 60_000) }), 401, 'a timestamp ten minutes old');
  const forged = await fetch(`${sandbox.webhookUrl}`, { method: 'POST', headers: { 'content-type': 'application/json', 'webhook-id': 'msg_forged', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': 'v1,AAAA' }, body: JSON.stringify(body) });
  t.equal(forged.status, 401);
  t.equal(((await forged.json()) as { error: { code: string } }).error.code, 'invalid_signature');
  t.equal((await creditedEvents()).length, 1, 'still credited once');
  t.ok(before <= mid);
});

t.test('each correlation outcome', async (t) => {
  const noTxid = await pay({ chave: key, valor: '5.00' });
  t.match((await call('GET', receivement(noTxid.endToEndId))).json(), { correlation: 'no_correlator_returned', charge_id: null, amount_minor: null, wallet_credited: false, initiation_type: 'DICT' });
  const unknownTxid = await pay({ chave: key, valor: '6.00', txid: 'Z'.repeat(30) });
  t.match((await call('GET', receivement(unknownTxid.endToEndId))).json(), { correlation: 'no_charge_matched', charge_id: null, wallet_credited: false, transaction_id_brcode: 'Z'.repeat(30) });
  // Two static charges sharing a txid (a static BR Code printed twice): ambiguous.
  const shared = 'S'.repeat(25);
  const s1 = await call('POST', charges, { amount_minor: 700, static: true, txid: shared });
  t.equal(s1.statusCode, 201, s1.body);
  t.match(s1.json(), { kind: 'static', client_request_id: null, txid: shared });
  await call('POST', charges, { amount_minor: 700, static: true, txid: shared });
  t.equal((await call('POST', charges, { amount_minor: 700, static: true, client_request_id: 'x' })).statusCode, 400, 'a static charge takes no client request id');
  // The shared txid, as a reference, names both: 409 charge_reference_ambiguous.
  for (const url of [`${charges}/${shared}`, `${charges}/${shared}/qr-code`]) {
    const amb = await call('GET', url);
    t.equal(amb.statusCode, 409, url);
    t.match(amb.json().error, { code: 'charge_reference_ambiguous', details: { matches: 2 } });
  }
  const ambiguous = await pay({ chave: key, valor: '7.00', txid: shared });
  t.match((await call('GET', receivement(ambiguous.endToEndId))).json(), { correlation: 'charge_ambiguous', charge_id: null, wallet_credited: false });
  // One static charge: matched, settled, credited.
  const single = (await call('POST', charges, { amount_minor: 800, static: true, transaction_id: 'mint-static' })).json();
  const paid = await pay({ chave: key, valor: '8.00', txid: single.txid });
  t.match((await call('GET', receivement(paid.endToEndId))).json(), { correlation: 'charge_matched', charge_id: single.charge_id, amount_minor: 800, wallet_credited: true, initiation_type: 'QRES' });
  t.match((await call('GET', `${charges}/mint-static`)).json(), { status: 'settled', provider: null });
  // A Pix the account sent is no receivement: no correlation attempted.
  const account = [...sandbox.accounts.values()].find((a) => a.keys.has(key))!;
  const sent = (await (await fetch(`${sandbox.url}/sandbox/pix-enviados`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ conta: account.conta, valor: '3.00' }) })).json()) as { endToEndId: string };
  t.match((await call('GET', receivement(sent.endToEndId))).json(), { received: false, provider_transaction_type: 'PIX_ENVIADO', correlation: 'not_attempted', charge_id: null, wallet_credited: false });
  t.match((await wallet()).currencies, [{ currency: 'BRL', pix_balance_minor: 1234 + 800 }], 'only matched receivements credit the wallet');
});

t.test('the test-only payer route', async (t) => {
  const c = (await call('POST', charges, { amount_minor: 990, client_request_id: 'via-route' })).json();
  const live = await call('POST', '/v1/test/pix/payments', { consumer_id: ana, charge_reference: 'via-route' }, { authorization: `Bearer ${org.liveKey}` });
  t.equal(live.statusCode, 403);
  t.equal(live.json().error.code, 'sandbox_funding_not_permitted');
  const r = await call('POST', '/v1/test/pix/payments', { consumer_id: ana, charge_reference: 'via-route', deliveries: 3 });
  t.equal(r.statusCode, 201, r.body);
  t.same(r.json().deliveries, [200, 200, 200]);
  t.match((await call('GET', `${charges}/${c.charge_id}`)).json(), { status: 'settled', end_to_end_id: r.json().end_to_end_id });
  t.match((await wallet()).currencies, [{ currency: 'BRL', pix_balance_minor: 1234 + 800 + 990 }]);
});

t.test('a devolution', async (t) => {
  const d = await call('POST', `${receivement(e2e)}/devolutions`, { amount_minor: 234 });
  t.equal(d.statusCode, 201, d.body);
  t.match(d.json(), { end_to_end_id: e2e, devolution_id: /^[A-Za-z0-9]+$/, status: 'returned', amount_minor: 234 });
  t.match((await call('GET', receivement(e2e))).json().devolutions, [{ devolution_id: d.json().devolution_id, status: 'returned', amount_minor: 234 }]);
  t.equal(sandbox.pix.get(e2e)!.devolucoes.length, 1, 'at the PSP');
  const before = await head();
  const over = await call('POST', `${receivement(e2e)}/devolutions`, { amount_minor: 1001 });
  t.equal(over.statusCode, 422);
  t.match(over.json().error, { code: 'devolution_refused', details: { provider_code: 'VALOR_DEVOLUCAO_EXCEDIDO' } });
  t.equal(await head(), before);
  t.match((await wallet()).currencies, [{ currency: 'BRL', pix_balance_minor: 1234 + 800 + 990 - 234 }]);
});

t.test('charge lookups: several matches, the PSP silent or answering for another cob', async (t) => {
  await call('POST', charges, { amount_minor: 100, client_request_id: 'dup' });
  await call('POST', charges, { amount_minor: 200, client_request_id: 'dup' });
  const dup = await call('GET', `${charges}/dup`);
  t.equal(dup.statusCode, 409);
  t.equal(dup.json().error.code, 'charge_reference_ambiguous');
  // One charge's txid given as another's client request id: the reference names both.
  const first = (await call('POST', charges, { amount_minor: 100 })).json();
  const second = (await call('POST', charges, { amount_minor: 100, client_request_id: first.txid })).json();
  const crossed = await call('GET', `${charges}/${first.txid}`);
  t.equal(crossed.statusCode, 409);
  t.match(crossed.json().error, { code: 'charge_reference_ambiguous', details: { charge_ids: [first.charge_id, second.charge_id] } });
  t.equal((await call('GET', `${charges}/${'x'.repeat(128)}`)).statusCode, 404, 'a 128-character reference is read');
  t.equal((await call('GET', `${charges}/${'x'.repeat(129)}`)).statusCode, 400);
  t.equal((await call('GET', `${charges}/bad.ref`)).statusCode, 400);
  t.equal((await call('GET', `${charges}/nothing`)).statusCode, 404);
  const c = (await call('POST', charges, { amount_minor: 300 })).json();
  sandbox.fault('get_cob', { kind: '5xx' });
  const silent = await call('GET', `${charges}/${c.charge_id}`);
  t.equal(silent.statusCode, 502);
  t.match(silent.json().error, { code: 'provider_error', details: { reason: 'provider_did_not_answer' } });
  sandbox.fault('get_cob', { kind: 'other_cob' });
  const otherCob = await call('GET', `${charges}/${c.charge_id}`);
  t.equal(otherCob.statusCode, 502);
  t.match(otherCob.json().error.details, { reason: 'provider_answered_for_different_cob' });
  // Paid while notifications are lost: reading the charge finds the Pix at the PSP and records it.
  sandbox.webhookUrl = null as unknown as string;
  const unseen = await pay({ txid: c.txid });
  t.same(unseen.deliveries, []);
  t.match((await call('GET', `${charges}/${c.charge_id}`)).json(), { status: 'settled', end_to_end_id: unseen.endToEndId });
  t.match((await call('GET', receivement(unseen.endToEndId))).json(), { correlation: 'charge_matched', wallet_credited: true });
  const e = (await call('GET', `${charges}/${c.charge_id}`)).json();
  t.equal(e.provider, null, 'a settled charge does not consult the PSP');
  // Expiry: a pending charge past its expiry reads expired.
  const soon = (await call('POST', charges, { amount_minor: 50, expires_in_seconds: 60 })).json();
  clock.advance(61_000);
  t.match((await call('GET', `${charges}/${soon.charge_id}`)).json(), { status: 'expired', provider: null });
});

t.test("the BR Code's CRC16-CCITT-FALSE on the Banco Central's published dynamic example", async (t) => {
  const example = '00020101021226770014BR.GOV.BCB.PIX2555pix.example.com/qr/93598be0-1bd0-4997-8318-81776a1d8a995204000053039865802BR5907EMPRESA6009SAO PAULO62070503***6304';
  t.equal(crc16(example), 'EEAB');
  t.equal(computeCRC(example), 'EEAB', 'pix-utils agrees');
});

t.test('a dynamic charge answers the PSP\'s BR Code and its QR image, on creation and on read; a payer pays it', async (t) => {
  sandbox.webhookUrl = `${base}/v1/pix/notifications/sandbox`; // notifications back on (the lookup test turned them off)
  const created = await call('POST', charges, { amount_minor: 4321 });
  t.equal(created.statusCode, 201, created.body);
  const c = created.json();
  t.match(c, { kind: 'dynamic', br_code: /^000201/, location: /^127\.0\.0\.1:\d+\/qr\/v2\/[a-f0-9]{32}$/, qr_code_data_uri: /^data:image\/png;base64,/, qr_code_url: /\/pix\/charges\/pxc_[^/]+\/qr-code$/ });
  const brCode = c.br_code as string;
  t.equal(brCode.slice(-4), computeCRC(brCode), 'the CRC verifies (pix-utils)');
  t.equal(brCode.slice(-4), crc16(brCode.slice(0, -4)));
  const parsed = parsePix(brCode) as unknown as Record<string, unknown>;
  t.notOk(parsed.error, String(parsed.error ?? ''));
  t.match(parsed, { type: 'DYNAMIC', url: c.location, merchantName: 'Ana', merchantCity: 'SAO PAULO', merchantCategoryCode: '0000', transactionCurrency: '986', countryCode: 'BR' });
  const tags = tagsOf(brCode);
  t.ok(tags.isValid);
  t.equal(tags.rawTags[0]!.value, '01', 'payload format indicator');
  t.equal(tags.rawTags[1]!.value, '12', 'one-time code');
  t.equal(tags.rawTags[26]!.subTags!.rawTags[0]!.value, 'br.gov.bcb.pix');
  t.equal(tags.rawTags[26]!.subTags!.rawTags[25]!.value, c.location);
  t.equal(tags.rawTags[54]!.value, '43.21', 'amount');
  t.equal(tags.rawTags[62]!.subTags!.rawTags[5]!.value, '***', 'the txid is in the location payload');
  // The payer's PSP fetches the location: it names this charge's txid and amount.
  const payload = (await (await fetch(`http://${c.location}`)).json()) as { txid: string; valor: { original: string }; status: string };
  t.match(payload, { txid: c.txid, valor: { original: '43.21' }, status: 'ATIVA' });
  t.equal(sandbox.cobs.get(c.txid)?.valor, '43.21');
  // The QR image, inline and served, decodes back to the BR Code.
  t.equal(decodeQr(pngOfDataUri(c.qr_code_data_uri)), brCode, 'the inline PNG decodes to the BR Code');
  const served = await call('GET', new URL(c.qr_code_url).pathname);
  t.equal(served.statusCode, 200);
  t.equal(served.headers['content-type'], 'image/png');
  t.equal(decodeQr(served.rawPayload), brCode, 'the served PNG decodes to the BR Code');
  const svg = await call('GET', `${new URL(c.qr_code_url).pathname}?format=svg`);
  t.equal(svg.headers['content-type'], 'image/svg+xml');
  t.match(svg.body, /^<svg [^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
  t.equal((await call('GET', `${new URL(c.qr_code_url).pathname}?format=gif`)).statusCode, 400);
  // Read by its txid (the mint transaction id): the same charge, the same BR Code.
  const byTxid = await call('GET', `${charges}/${c.txid}`);
  t.equal(byTxid.statusCode, 200, byTxid.body);
  t.match(byTxid.json(), { charge_id: c.charge_id, br_code: brCode, location: c.location, qr_code_url: c.qr_code_url, provider: { result: 'ATIVA' } });
  // The fact is in the charge's event.
  const ev = (await ledger.store.readAll({ maxCount: 100_000 })).find((e) => e.type === 'pix.charge_created' && (e.data as { charge_id: string }).charge_id === c.charge_id);
  t.match(ev?.data, { br_code: brCode, location: c.location, txid: c.txid });
  // A payer pays the BR Code itself: the sandbox PSP resolves its location to the cob, as a payer's PSP does.
  const broken = `${brCode.slice(0, -4)}${brCode.slice(-4) === '0000' ? '0001' : '0000'}`;
  const refused = await call('POST', '/v1/test/pix/payments', { consumer_id: ana, br_code: broken });
  t.equal(refused.statusCode, 422);
  t.match(refused.json().error, { code: 'payment_refused', details: { provider_code: 'BRCODE_INVALIDO' } });
  const paid = await call('POST', '/v1/test/pix/payments', { consumer_id: ana, br_code: brCode });
  t.equal(paid.statusCode, 201, paid.body);
  t.same(paid.json().deliveries, [200]);
  t.match((await call('GET', `${charges}/${c.txid}`)).json(), { status: 'settled', end_to_end_id: paid.json().end_to_end_id, br_code: brCode });
  t.match((await call('GET', receivement(paid.json().end_to_end_id))).json(), { initiation_type: 'QRDN', correlation: 'charge_matched', charge_id: c.charge_id, amount_minor: 4321 });
});

t.test('a static charge answers our BR Code: the key, the amount, its txid, the city given', async (t) => {
  const created = await call('POST', charges, { amount_minor: 750, static: true, txid: 'LOJA42PEDIDO7', merchant_city: 'Curitiba' });
  t.equal(created.statusCode, 201, created.body);
  const c = created.json();
  t.match(c, { kind: 'static', txid: 'LOJA42PEDIDO7', location: null, qr_code_data_uri: /^data:image\/png;base64,/ });
  const parsed = parsePix(c.br_code) as unknown as Record<string, unknown>;
  t.notOk(parsed.error, String(parsed.error ?? ''));
  t.match(parsed, { type: 'STATIC', pixKey: key, transactionAmount: 7.5, txid: 'LOJA42PEDIDO7', merchantName: 'Ana', merchantCity: 'Curitiba', transactionCurrency: '986', countryCode: 'BR' });
  t.equal(c.br_code.slice(-4), computeCRC(c.br_code), 'the CRC verifies');
  t.equal(decodeQr(pngOfDataUri(c.qr_code_data_uri)), c.br_code);
  t.equal(decodeQr((await call('GET', new URL(c.qr_code_url).pathname)).rawPayload), c.br_code);
  t.equal((await call('GET', `${charges}/LOJA42PEDIDO7`)).json().br_code, c.br_code, 'read by its txid');
  // Paid with its BR Code: the key, amount and txid it carries reach the PSP, which correlates them to this charge.
  const paid = await call('POST', '/v1/test/pix/payments', { consumer_id: ana, br_code: c.br_code });
  t.equal(paid.statusCode, 201, paid.body);
  t.match((await call('GET', receivement(paid.json().end_to_end_id))).json(), { initiation_type: 'QRES', provider_amount: '7.50', transaction_id_brcode: 'LOJA42PEDIDO7', correlation: 'charge_matched', charge_id: c.charge_id });
  t.match((await call('GET', `${charges}/${c.charge_id}`)).json(), { status: 'settled', end_to_end_id: paid.json().end_to_end_id });
  const before = await head();
  for (const bad of [{ amount_minor: 750, static: true, txid: 'T'.repeat(26) }, { amount_minor: 750, static: true, merchant_city: 'C'.repeat(16) }, { amount_minor: 750, merchant_city: 'Curitiba' }]) {
    const r = await call('POST', charges, bad);
    t.equal(r.statusCode, 400, JSON.stringify(bad));
    t.equal(r.json().error.code, 'invalid_body');
  }
  t.equal(await head(), before, 'nothing written');
});

t.test('receivement lookup without an active funding source: 409 before asking the PSP', async (t) => {
  t.equal((await call('GET', receivement('abc'))).statusCode, 400, 'an end-to-end id under 16 characters');
  const fs = (await call('GET', `/v1/consumers/${ana}/pix/partner-account`)).json().funding_sources[0].funding_source_id;
  const off = await call('POST', `/v1/consumers/${ana}/pix/funding-sources/${fs}/deactivate`, {});
  t.match(off.json(), { funding_source_id: fs, status: 'inactive', changed: true });
  const calls = sandbox.calls.length;
  const r = await call('GET', receivement(e2e));
  t.equal(r.statusCode, 409);
  t.equal(r.json().error.code, 'no_active_funding_source');
  t.equal(sandbox.calls.length, calls, 'the PSP was not asked');
  t.equal((await call('POST', charges, { amount_minor: 100 })).statusCode, 409, 'no charge without an active wallet');
  t.same((await wallet()).currencies.flatMap((c: { funding_source_ids: string[] }) => c.funding_source_ids), []);
});

t.test('tenancy: another organization', async (t) => {
  // Another organization's own consumer with its own partner account.
  const bia = await consumer(other.key);
  await call('POST', '/v1/test/pix/partner-accounts', { consumer_id: bia, document: CNPJ }, other.key);
  for (const url of [`${charges}/${charge.charge_id}`, receivement(e2e), `/v1/consumers/${ana}/wallet`, `/v1/consumers/${ana}/pix/partner-account`]) {
    const r = await call('GET', url, undefined, other.key);
    t.equal(r.statusCode, 404, `another organization's consumer: ${url}`);
  }
  for (const url of [`/v1/consumers/${bia}/pix/charges/${charge.charge_id}`, `/v1/consumers/${bia}/pix/charges/mint-tx-1`, receivement(e2e, bia)]) {
    const r = await call('GET', url, undefined, other.key);
    t.equal(r.statusCode, 404, `our charge or end-to-end id under its own consumer: ${url}`);
    t.equal(r.json().error.code, 'not_found');
  }
});

t.test('the pix read model rebuilt from position 0 is identical, row for row', async (t) => {
  const { rebuildProjection } = await import('../../src/projector/runner.ts');
  const { pixProjection } = await import('../../projections/pix.ts');
  await ledger.settle();
  const snapshot = async (table: string) => (await ledger.db.query(`SELECT * FROM ${table} ORDER BY 1, 2`)).rows;
  const tables = Object.keys(pixProjection.tables);
  const before: Record<string, unknown[]> = {};
  for (const tb of tables) before[tb] = await snapshot(tb);
  t.ok(before.pix_receivements!.length >= 6 && before.pix_charges!.length >= 8);
  await rebuildProjection(ledger.db, ledger.store, pixProjection);
  for (const tb of tables) t.same(await snapshot(tb), before[tb], `${tb} identical`);
});
