import t from 'tap';
import { bootstrapOrg, testApp, testClock } from '../helpers/app.ts';

const clock = testClock();
const { app, ledger } = await testApp(t, { now: clock.now });
const org = await bootstrapOrg(app, 'Mandates');
const other = await bootstrapOrg(app, 'Elsewhere');
const inject = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: Record<string, unknown>, headers: Record<string, string> = org.key) =>
  app.inject({ method, url, headers, ...(payload !== undefined ? { payload } : {}) });

await inject('POST', '/v1/agents', { agent_id: 'buyer', principal_ref: 'p' });
const consumer = (await inject('POST', '/v1/consumers', { display_name: 'Ana', metadata: { tier: 1 } })).json();
const inAnHour = () => Math.floor(clock.now().getTime() / 1000) + 3600;
const mandateBody = (over: Record<string, unknown> = {}) => ({
  consumer_id: consumer.id,
  agent_id: 'buyer',
  purpose: 'weekly groceries',
  merchant_allowlist: ['shop@pix.example'],
  merchant_pin_kind: 'pix-key',
  cap_minor: '1000',
  per_tx_cap_minor: '300',
  currency: 'BRL',
  expires_at: inAnHour(),
  ...over,
});
const create = async (over: Record<string, unknown> = {}) => {
  const r = await inject('POST', '/v1/mandates', mandateBody(over));
  if (r.statusCode !== 201) throw new Error(r.body);
  return r.json();
};

t.test('consumers', async (t) => {
  t.match(consumer, { id: /^cns_/, display_name: 'Ana', status: 'unverified', metadata: { tier: 1 }, tax_type: null, document: null });
  const refused = await inject('POST', '/v1/consumers', { document: '123.456.789-00' });
  t.equal(refused.statusCode, 400);
  t.equal(refused.json().error.code, 'invalid_body');
  const patched = await inject('PATCH', `/v1/consumers/${consumer.id}`, { tax_type: 'PF', display_name: null });
  t.match(patched.json(), { tax_type: 'PF', display_name: null });
  t.equal((await inject('PATCH', `/v1/consumers/${consumer.id}`, { tax_type: 'XX' })).statusCode, 400);
  const list = (await inject('GET', '/v1/consumers?verified=false')).json();
  t.ok(list.consumers.some((c: { id: string }) => c.id === consumer.id));
  t.equal((await inject('GET', `/v1/consumers/${consumer.id}`, undefined, other.key)).statusCode, 404, "another organization's consumer");
});

t.test('mandate creation: each refusal with its code, nothing written', async (t) => {
  const before = await ledger.store.headPosition();
  const cases: [Record<string, unknown>, number, string][] = [
    [{ consumer_id: undefined }, 400, 'missing_required_field'],
    [{ cap_minor: undefined }, 400, 'missing_required_field'],
    [{ purpose: '   ' }, 400, 'mandate_purpose_required'],
    [{ purpose: undefined }, 400, 'mandate_purpose_required'],
    [{ purpose: 'bad\u0007bell' }, 400, 'invalid_purpose_encoding'],
    [{ purpose: 'lone \ud800 surrogate' }, 400, 'invalid_purpose_encoding'],
    [{ expires_at: Math.floor(clock.now().getTime() / 1000) - 1 }, 400, 'expires_at_in_past'],
    [{ merchant_allowlist: [] }, 400, 'invalid_body'],
    [{ cap_minor: '100', per_tx_cap_minor: '101' }, 400, 'invalid_body'],
    [{ cap_minor: '-5' }, 400, 'invalid_body'],
    [{ cap_minor: 1000 }, 400, 'invalid_body'],
    [{ currency: 'EUR' }, 400, 'invalid_body'],
    [{ agent_id: 'nobody' }, 403, 'mandate_agent_key_invalid'],
    [{ consumer_id: 'cns_doesnotexist00' }, 404, 'not_found'],
  ];
  for (const [over, status, code] of cases) {
    const r = await inject('POST', '/v1/mandates', mandateBody(over));
    t.equal(r.statusCode, status, `${JSON.stringify(over)} → ${status}`);
    t.equal(r.json().error.code, code);
    if (code === 'missing_required_field') t.equal(r.json().error.details.field, Object.keys(over)[0]);
  }
  const seen = await ledger.store.readAll({ after: before, maxCount: 1000 });
  t.same(seen.filter((e) => e.type.startsWith('mandate.')), [], 'nothing written');
  const m = await create({ display_name: 'Groceries', intent_note: 'weekly' });
  t.match(m, { id: /^mdt_/, status: 'active', cap_minor: '1000', per_tx_cap_minor: '300', currency: 'BRL', merchant_pin_kind: 'pix-key', display_name: 'Groceries' });
  t.equal((await inject('GET', `/v1/mandates/${m.id}`)).json().id, m.id);
  t.equal((await inject('GET', `/v1/mandates/${m.id}`, undefined, other.key)).statusCode, 404);
  t.equal((await inject('GET', '/v1/mandates?limit=0')).statusCode, 400);
  t.equal((await inject('GET', '/v1/mandates?limit=201')).statusCode, 400);
  t.ok((await inject('GET', `/v1/mandates?consumer_id=${consumer.id}&status=active`)).json().mandates.some((x: { id: string }) => x.id === m.id));
});

t.test('moves: legal, no-op, illegal, never echoing the reason', async (t) => {
  const m = await create();
  const paused = await inject('POST', `/v1/mandates/${m.id}/pause`, { reason: 'card lost: secret-reason' });
  t.equal(paused.statusCode, 200);
  t.match(paused.json(), { mandate: { id: m.id, status: 'paused' }, changed: true });
  t.notOk(paused.body.includes('secret-reason'), 'the reason is not echoed');
  const again = await inject('POST', `/v1/mandates/${m.id}/pause`);
  t.same([again.statusCode, again.json().changed], [200, false]);
  t.equal((await inject('POST', `/v1/mandates/${m.id}/resume`, { reason: 'back to work' })).json().mandate.status, 'active');
  t.equal((await inject('POST', `/v1/mandates/${m.id}/revoke`, { reason: 'done' })).json().mandate.status, 'revoked');
  const illegal = await inject('POST', `/v1/mandates/${m.id}/resume`);
  t.equal(illegal.statusCode, 409);
  t.match(illegal.json().error, { code: 'invalid_transition', details: { from: 'revoked', to: 'active' } });
  const evidence = (await ledger.store.readStream(`mandate-${m.id}`)).filter((e) => e.type === 'mandate.paused');
  t.equal(evidence[0]!.data.reason, 'card lost: secret-reason', 'the evidence event keeps the reason');
});

t.test('concurrent pause and revoke: never both applied inconsistently', async (t) => {
  for (let i = 0; i < 5; i++) {
    const m = await create();
    const [p, r] = await Promise.all([inject('POST', `/v1/mandates/${m.id}/pause`), inject('POST', `/v1/mandates/${m.id}/revoke`)]);
    const final = (await inject('GET', `/v1/mandates/${m.id}`)).json().status;
    for (const res of [p, r]) t.ok(res.statusCode === 200 || (res.statusCode === 409 && ['transition_conflict', 'invalid_transition'].includes(res.json().error.code)), `${res.statusCode} ${res.body.slice(0, 80)}`);
    const applied = [p, r].filter((x) => x.statusCode === 200 && x.json().changed).map((x) => x.json().mandate.status);
    t.equal(final, applied[applied.length - 1] ?? 'active', 'the final status is the last applied move');
    const moves = (await ledger.store.readStream(`mandate-${m.id}`)).filter((e) => e.type !== 'mandate.created');
    t.equal(moves.length, applied.length, 'one evidence event per applied move');
  }
});

t.test('spends: approval, each refusal recorded, idempotency', async (t) => {
  const m = await create();
  const url = `/v1/consumers/mandates/${m.id}/spend`;
  const ok = await inject('POST', url, { amount_minor: '250', currency: 'BRL', merchant: 'SHOP@pix.example', description: 'bread' });
  t.equal(ok.statusCode, 201);
  t.match(ok.json(), { transaction_id: /^txn_/, mandate_id: m.id, amount_minor: '250', currency: 'BRL', decision: 'approved', remaining_minor: '750' });
  const refusals: [Record<string, unknown>, number, string][] = [
    [{ amount_minor: '10', currency: 'USD', merchant: 'shop@pix.example' }, 403, 'currency_not_authorized'],
    [{ amount_minor: '10', currency: 'BRL', merchant: 'evil@pix.example' }, 403, 'merchant_not_allowed'],
    [{ amount_minor: '301', currency: 'BRL', merchant: 'shop@pix.example' }, 422, 'per_tx_cap_exceeded'],
  ];
  for (const [body, status, code] of refusals) {
    const r = await inject('POST', url, body);
    t.equal(r.statusCode, status, code);
    t.match(r.json().error, { code, details: { decision: 'declined', transaction_id: /^txn_/ } });
  }
  const key = { ...org.key, 'idempotency-key': `spend-${m.id}` };
  const s1 = await inject('POST', url, { amount_minor: '300', currency: 'BRL', merchant: 'shop@pix.example' }, key);
  const s2 = await inject('POST', url, { amount_minor: '300', currency: 'BRL', merchant: 'shop@pix.example' }, key);
  t.same(s2.json(), s1.json(), 'the retry returns the first result');
  t.equal(s1.json().remaining_minor, '450');
  const card = (await inject('GET', `/v1/consumers/mandates/${m.id}/card`)).json();
  t.same(card.authorizations.map((a: { decision: string }) => a.decision), ['approved', 'declined', 'declined', 'declined', 'approved'], 'newest first, declines included, the retried spend once');
  await inject('POST', `/v1/mandates/${m.id}/pause`);
  t.equal((await inject('POST', url, { amount_minor: '1', currency: 'BRL', merchant: 'shop@pix.example' })).json().error.code, 'mandate_not_active');
  await inject('POST', `/v1/mandates/${m.id}/revoke`);
  const rv = await inject('POST', url, { amount_minor: '1', currency: 'BRL', merchant: 'shop@pix.example' });
  t.same([rv.statusCode, rv.json().error.code], [409, 'mandate_already_revoked']);
  const nf = await inject('POST', url, { amount_minor: '1', currency: 'BRL', merchant: 'shop@pix.example' }, other.key);
  t.same([nf.statusCode, nf.json().error.code], [404, 'mandate_not_found']);
});

t.test('50 concurrent spends of 30 against a cap of 1000 over real HTTP: exactly 33 approved', async (t) => {
  const m = await create({ per_tx_cap_minor: '1000' });
  const base = await app.listen({ host: '127.0.0.1', port: 0 });
  const results = await Promise.all(
    Array.from({ length: 50 }, () =>
      fetch(`${base}/v1/consumers/mandates/${m.id}/spend`, {
        method: 'POST',
        headers: { ...org.key, 'content-type': 'application/json' },
        body: JSON.stringify({ amount_minor: '30', currency: 'BRL', merchant: 'shop@pix.example' }),
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as { error?: { code: string } } })),
    ),
  );
  const approved = results.filter((r) => r.status === 201);
  const refused = results.filter((r) => r.status !== 201);
  t.equal(approved.length, 33);
  t.ok(refused.every((r) => r.status === 422 && r.body.error?.code === 'total_cap_exceeded'), 'the rest: total_cap_exceeded, no conflict, no 5xx');
  const wallet = (await inject('GET', `/v1/consumers/${consumer.id}/wallet`)).json();
  t.ok(wallet.currencies.find((c: { currency: string }) => c.currency === 'BRL').mandate_ids.includes(m.id));
  const { rows } = await ledger.db.query<{ spent: string }>('SELECT spent_minor::text AS spent FROM mandates WHERE id = $1', [m.id]);
  t.equal(rows[0]!.spent, String(33 * 30), 'spent equals the sum approved');
});

t.test('expiry: decisions past expires_at see it expired; the reactor records it', async (t) => {
  const m = await create({ expires_at: Math.floor(clock.now().getTime() / 1000) + 60 });
  const untouched = await create({ expires_at: Math.floor(clock.now().getTime() / 1000) + 60 });
  clock.advance(120_000);
  const r = await inject('POST', `/v1/consumers/mandates/${m.id}/spend`, { amount_minor: '1', currency: 'BRL', merchant: 'shop@pix.example' });
  t.same([r.statusCode, r.json().error.code], [410, 'mandate_already_expired']);
  t.equal((await inject('GET', `/v1/mandates/${untouched.id}`)).json().status, 'expired', 'reads show it expired before the reactor runs');
  t.equal((await inject('POST', `/v1/mandates/${untouched.id}/pause`)).json().error.details.from, 'expired');
  const moved = await ledger.readSide.expiry.tick();
  t.ok(moved >= 1, 'the reactor moved the untouched one');
  await ledger.settle();
  const types = (await ledger.store.readStream(`mandate-${untouched.id}`)).map((e) => e.type);
  t.same(types, ['mandate.created', 'mandate.expired']);
  t.equal(await ledger.readSide.expiry.tick(), 0, 'nothing left to expire');
});

t.test('wallet and the mandate card', async (t) => {
  const c = (await inject('POST', '/v1/consumers', {})).json();
  const a = await create({ consumer_id: c.id, cap_minor: '5000', per_tx_cap_minor: '5000' });
  const usd = await create({ consumer_id: c.id, cap_minor: '700', per_tx_cap_minor: '700', currency: 'USD' });
  const gone = await create({ consumer_id: c.id, cap_minor: '9999', per_tx_cap_minor: '9999' });
  await inject('POST', `/v1/mandates/${gone.id}/revoke`);
  await inject('POST', `/v1/consumers/mandates/${a.id}/spend`, { amount_minor: '1200', currency: 'BRL', merchant: 'shop@pix.example' });
  const wallet = (await inject('GET', `/v1/consumers/${c.id}/wallet`)).json();
  t.same(wallet.currencies, [
    { currency: 'BRL', authorized_minor: 5000, spent_minor: 1200, available_minor: 3800, funding_source_ids: [], mandate_ids: [a.id] },
    { currency: 'USD', authorized_minor: 700, spent_minor: 0, available_minor: 700, funding_source_ids: [], mandate_ids: [usd.id] },
  ]);
  t.notOk('mandate_ids' in wallet, 'the id lists belong to each currency row');
  const bound = await inject('POST', `/v1/consumers/mandates/${a.id}/card`);
  t.equal(bound.statusCode, 201);
  const cardId = bound.json().card.card_id;
  t.equal((await inject('POST', `/v1/consumers/mandates/${a.id}/card`)).json().card.card_id, cardId, 'binding again keeps the card');
  t.equal((await inject('POST', `/v1/consumers/mandates/${a.id}/card`, undefined, { authorization: `Bearer ${org.liveKey}` })).statusCode, 501, 'live issuer not wired');
  const auth = await inject('POST', `/v1/test/cards/${cardId}/authorizations`, { amount_minor: '300', currency: 'BRL', merchant: 'shop@pix.example' });
  t.equal(auth.statusCode, 201);
  const declined = await inject('POST', `/v1/test/cards/${cardId}/authorizations`, { amount_minor: '300', currency: 'USD', merchant: 'shop@pix.example' });
  t.equal(declined.json().error.code, 'currency_not_authorized');
  const live = await inject('POST', `/v1/test/cards/${cardId}/authorizations`, { amount_minor: '1', currency: 'BRL', merchant: 'shop@pix.example' }, { authorization: `Bearer ${org.liveKey}` });
  t.same([live.statusCode, live.json().error.code], [403, 'sandbox_funding_not_permitted']);
  const view = (await inject('GET', `/v1/consumers/mandates/${a.id}/card?limit=2`)).json();
  t.equal(view.card.card_id, cardId);
  t.same(view.authorizations.map((x: { decision: string; amount_minor: string }) => [x.decision, x.amount_minor]), [['declined', '300'], ['approved', '300']]);
  t.equal((await inject('GET', `/v1/consumers/mandates/${a.id}/card?limit=0`)).json().authorizations.length, 1, 'limit clamps to 1');
  const del = await inject('DELETE', `/v1/consumers/mandates/${a.id}/card`);
  t.same(del.json(), { mandate_id: a.id, card_id: cardId, revoked: true });
  t.equal((await inject('DELETE', `/v1/consumers/mandates/${a.id}/card`)).json().error.code, 'no_active_card');
  t.equal((await inject('DELETE', `/v1/consumers/mandates/mdt_nope/card`)).json().error.code, 'mandate_not_found');
  t.equal((await inject('GET', `/v1/consumers/${c.id}`)).json().mandate_ids.length, 3);
});

t.test('a revoked agent cannot be named in a new mandate', async (t) => {
  await inject('POST', '/v1/agents', { agent_id: 'shortlived', principal_ref: 'p' });
  await inject('POST', '/v1/agents/shortlived/revoke');
  const r = await inject('POST', '/v1/mandates', mandateBody({ agent_id: 'shortlived' }));
  t.same([r.statusCode, r.json().error.code], [403, 'mandate_agent_key_invalid']);
});

t.test('rebuilding every projection from position 0 gives the live tables, row for row', async (t) => {
  await ledger.settle();
  const { projections } = await import('../../src/readside.ts');
  const { rebuildProjection } = await import('../../src/projector/runner.ts');
  for (const p of projections) {
    const snap = async () => {
      const out: Record<string, unknown[]> = {};
      for (const table of Object.keys(p.tables)) out[table] = (await ledger.db.query(`SELECT * FROM ${table} ORDER BY 1, 2`)).rows;
      return out;
    };
    const before = await snap();
    await rebuildProjection(ledger.db, ledger.store, p);
    t.same(await snap(), before, `${p.name}: identical after rebuild`);
  }
});
