import t from 'tap';
import { bootstrapOrg, testApp, testClock } from '../helpers/app.ts';

// Commerce memory over HTTP: counterparties merged by identifier (also under
// the deprecated path, same bodies), interactions idempotent by (source,
// source_ref), window edges, preferences, negotiations, tenancy.

const clock = testClock();
const { app, ledger } = await testApp(t, { now: clock.now });
const org = await bootstrapOrg(app, 'Memory');
const other = await bootstrapOrg(app, 'Stranger');
const second = (await app.inject({ method: 'POST', url: '/v1/projects', headers: org.key, payload: { name: 'Second', slug: 'second' } })).json();
const secondKey = { ...org.key, 'x-svc-project': second.id };

const inject = (method: 'GET' | 'POST' | 'PUT', url: string, payload?: unknown, headers: Record<string, string> = org.key) =>
  app.inject({ method, url, headers, ...(payload !== undefined ? { payload: payload as Record<string, unknown> } : {}) });
const strip = (b: Record<string, unknown>) => {
  const { request_id: _r, ...rest } = b;
  return rest;
};
const memoryEvents = async (after: string) =>
  (await ledger.store.readAll({ after, maxCount: 10_000 })).filter((e) => /^(counterparty|interaction|negotiation)/.test(e.type));

t.test('counterparty: both-or-neither, invalid bodies write nothing', async (t) => {
  const before = await ledger.store.headPosition();
  const bad: Record<string, unknown>[] = [
    { kind: 'supplier', name: 'A', identifier: '12.345.678/0001-90' },
    { kind: 'supplier', name: 'A', identifier_kind: 'cnpj' },
    { kind: 'supplier', name: 'A', identifier: null, identifier_kind: 'cnpj' },
    { kind: 'supplier', name: 'A', identifier: 'x', identifier_kind: null },
    { kind: 'vendor', name: 'A' },
    { kind: 'supplier' },
    { name: 'A' },
    { kind: 'supplier', name: '  ' },
    { kind: 'supplier', name: 'A', identifier: 'x', identifier_kind: 'passport' },
  ];
  for (const body of bad) {
    const r = await inject('POST', '/v1/counterparties', body);
    t.equal(r.statusCode, 400, JSON.stringify(body));
    t.equal(r.json().error.code, 'invalid_body');
    t.ok(Array.isArray(r.json().error.details.issues) && r.json().error.details.issues.length > 0, 'details.issues');
  }
  const lone = (await inject('POST', '/v1/counterparties', { kind: 'supplier', name: 'A', identifier: 'x' })).json().error.details.issues;
  t.same(lone, [{ path: ['identifier_kind'], code: 'custom', message: 'identifier and identifier_kind are given together or not at all' }]);
  t.same(await memoryEvents(before), [], 'nothing written');

  const plain = (await inject('POST', '/v1/counterparties', { kind: 'customer', name: 'Walk-in' })).json();
  t.match(plain, { id: /^cp_/, kind: 'customer', name: 'Walk-in', identifier: null, identifier_kind: null, metadata: {} });
  t.equal(plain.created_at, plain.last_seen_at);
  const plain2 = (await inject('POST', '/v1/counterparties', { kind: 'customer', name: 'Walk-in', identifier: null, identifier_kind: null })).json();
  t.not(plain2.id, plain.id, 'without an identifier every create is a new counterparty');
});

t.test('merge by identifier: the same row, which fields a merge updates', async (t) => {
  const first = await inject('POST', '/v1/counterparties', { kind: 'supplier', name: 'Fornecedor Ltda', identifier: '12.345.678/0001-90', identifier_kind: 'cnpj', metadata: { a: 1, b: 1 } });
  t.equal(first.statusCode, 201);
  const c = first.json();
  t.match(c, { kind: 'supplier', name: 'Fornecedor Ltda', identifier: '12345678000190', identifier_kind: 'cnpj', metadata: { a: 1, b: 1 } });
  clock.advance(60_000);
  const again = await inject('POST', '/v1/counterparties', { kind: 'customer', name: 'Fornecedor S.A.', identifier: '12345678000190', identifier_kind: 'cnpj', metadata: { b: 2, c: 3 } });
  t.equal(again.statusCode, 201, '201 for a merge too (the spec: created or merged)');
  const m = again.json();
  t.equal(m.id, c.id, 'merged into the existing row');
  t.equal(m.name, 'Fornecedor S.A.', 'name: the latest');
  t.same(m.metadata, { a: 1, b: 2, c: 3 }, 'metadata: shallow merge, new keys win');
  t.equal(m.kind, 'supplier', 'kind: kept from the first registration');
  t.equal(m.created_at, c.created_at, 'created_at kept');
  t.ok(m.last_seen_at > c.last_seen_at, 'last_seen_at bumped');
  t.same((await inject('GET', `/v1/counterparties/${c.id}`)).json(), m, 'read back');
  const list = (await inject('GET', '/v1/counterparties?identifier=12.345.678%2F0001-90&identifier_kind=cnpj')).json().counterparties;
  t.equal(list.length, 1);
  t.equal(list[0].id, c.id);
  // The same identifier under another kind is another identifier.
  const other = (await inject('POST', '/v1/counterparties', { kind: 'supplier', name: 'X', identifier: '12345678000190', identifier_kind: 'other' })).json();
  t.not(other.id, c.id);
  // Another project of the same organization has its own identifiers.
  const there = (await inject('POST', '/v1/counterparties', { kind: 'supplier', name: 'Fornecedor', identifier: '12345678000190', identifier_kind: 'cnpj' }, secondKey)).json();
  t.not(there.id, c.id);
  t.equal((await inject('GET', `/v1/counterparties/${c.id}`, undefined, secondKey)).statusCode, 404, "another project's counterparty is absent");
});

t.test('two concurrent creates of one identifier end in one counterparty', async (t) => {
  for (let round = 0; round < 3; round++) {
    const email = `race${round}@example.com`;
    const rs = await Promise.all(
      Array.from({ length: 8 }, (_, i) => inject('POST', '/v1/counterparties', { kind: 'supplier', name: `Racer ${i}`, identifier: i % 2 ? email.toUpperCase() : email, identifier_kind: 'email' })),
    );
    t.same(rs.map((r) => r.statusCode), Array(8).fill(201));
    t.equal(new Set(rs.map((r) => r.json().id)).size, 1, `round ${round}: one id`);
    const listed = (await inject('GET', `/v1/counterparties?identifier=${email}&identifier_kind=email`)).json().counterparties;
    t.equal(listed.length, 1, 'one row');
    const created = (await ledger.store.readStream(`counterparty-${listed[0].id}`)).filter((e) => e.type === 'counterparty.created');
    t.equal(created.length, 1, 'one counterparty.created event');
  }
});

t.test('the deprecated path answers the same bodies', async (t) => {
  const c = (await inject('POST', '/v1/commerce-memory/counterparties', { kind: 'agent_peer', name: 'Peer', identifier: '0xAbC0000000000000000000000000000000000001', identifier_kind: 'wallet_address' })).json();
  t.equal(c.identifier, '0xabc0000000000000000000000000000000000001');
  const merged = (await inject('POST', '/v1/counterparties', { kind: 'agent_peer', name: 'Peer 2', identifier: '0xabc0000000000000000000000000000000000001', identifier_kind: 'wallet_address' })).json();
  t.equal(merged.id, c.id, 'one identifier space for both paths');
  const a = await inject('GET', `/v1/counterparties/${c.id}`);
  const b = await inject('GET', `/v1/commerce-memory/counterparties/${c.id}`);
  t.equal(a.statusCode, 200);
  t.same(b.json(), a.json());
  for (const q of ['', '?kind=agent_peer', '?limit=2', `?identifier=${c.identifier}`]) {
    t.same((await inject('GET', `/v1/commerce-memory/counterparties${q}`)).json(), (await inject('GET', `/v1/counterparties${q}`)).json(), `list ${q}`);
  }
  const missA = await inject('GET', '/v1/counterparties/cp_absentAbsent0000');
  const missB = await inject('GET', '/v1/commerce-memory/counterparties/cp_absentAbsent0000');
  t.equal(missA.statusCode, 404);
  t.equal(missA.json().error.code, 'not_found');
  t.same(strip(missB.json()), strip(missA.json()));
  const badA = await inject('GET', '/v1/counterparties?limit=0&kind=vendor');
  const badB = await inject('GET', '/v1/commerce-memory/counterparties?limit=0&kind=vendor');
  t.equal(badA.statusCode, 400);
  t.equal(badA.json().error.code, 'invalid_query');
  t.same(badA.json().error.details.issues.map((i: { path: string[] }) => i.path[0]).sort(), ['kind', 'limit']);
  t.same(strip(badB.json()), strip(badA.json()));
  const doc = (await inject('GET', '/openapi.json')).json();
  t.equal(doc.paths['/v1/commerce-memory/counterparties'].post.deprecated, true);
  t.notOk(doc.paths['/v1/counterparties'].post.deprecated);
});

t.test('interactions: validation, counterparty_not_found, returned fields, last_seen_at', async (t) => {
  const cp = (await inject('POST', '/v1/counterparties', { kind: 'supplier', name: 'Seller' })).json();
  const foreign = (await inject('POST', '/v1/counterparties', { kind: 'supplier', name: 'Theirs' }, other.key)).json();
  const inSecond = (await inject('POST', '/v1/counterparties', { kind: 'supplier', name: 'Second' }, secondKey)).json();
  const before = await ledger.store.headPosition();
  const bad: [unknown, number, string][] = [
    [{ counterparty_id: cp.id }, 400, 'invalid_body'],
    [{ counterparty_id: cp.id, kind: 'chat' }, 400, 'invalid_body'],
    [{ counterparty_id: cp.id, kind: 'payment', amount_minor: 100 }, 400, 'invalid_body'],
    [{ counterparty_id: cp.id, kind: 'payment', currency: 'BRL' }, 400, 'invalid_body'],
    [{ counterparty_id: cp.id, kind: 'payment', amount_minor: 1.5, currency: 'BRL' }, 400, 'invalid_body'],
    [{ counterparty_id: cp.id, kind: 'payment', amount_minor: '100', currency: 'BRL' }, 400, 'invalid_body'],
    [{ counterparty_id: cp.id, kind: 'payment', occurred_at: 'yesterday' }, 400, 'invalid_body'],
    [{ counterparty_id: cp.id, kind: 'payment', source: 'email' }, 400, 'invalid_body'],
    [{ counterparty_id: 'cp_absentAbsent0000', kind: 'message' }, 404, 'counterparty_not_found'],
    [{ counterparty_id: 'cp_absentAbsent0000', kind: 'message', source: 'webhook', source_ref: 'evt-1' }, 404, 'counterparty_not_found'],
  ];
  for (const [body, status, code] of bad) {
    const r = await inject('POST', '/v1/commerce-memory/interactions', body);
    t.equal(r.statusCode, status, JSON.stringify(body));
    t.equal(r.json().error.code, code);
  }
  t.equal((await inject('POST', '/v1/commerce-memory/interactions', { counterparty_id: foreign.id, kind: 'message' })).json().error.code, 'counterparty_not_found', "another organization's counterparty");
  t.equal((await inject('POST', '/v1/commerce-memory/interactions', { counterparty_id: inSecond.id, kind: 'message' })).json().error.code, 'counterparty_not_found', "another project's counterparty");
  t.same(await memoryEvents(before), [], 'nothing written');

  clock.advance(1000);
  const r = await inject('POST', '/v1/commerce-memory/interactions', { counterparty_id: cp.id, kind: 'payment', amount_minor: 12345, currency: 'BRL', agent_id: 'buyer', source: 'agent_execute', source_ref: 'call-1', metadata: { order: 'o-1' } });
  t.equal(r.statusCode, 201);
  const i = r.json();
  t.match(i, { id: /^ixn_/, counterparty_id: cp.id, kind: 'payment', source: 'agent_execute', source_ref: 'call-1', agent_id: 'buyer', amount_minor: 12345, currency: 'BRL', metadata: { order: 'o-1' } });
  t.equal(i.occurred_at, clock.now().toISOString().slice(0, 17) + i.occurred_at.slice(17), 'occurred_at defaults to now');
  const seen = (await inject('GET', `/v1/counterparties/${cp.id}`)).json();
  t.equal(seen.last_seen_at, i.occurred_at, 'the interaction bumped last_seen_at');
  t.ok(seen.last_seen_at > cp.last_seen_at);
  const plain = (await inject('POST', '/v1/commerce-memory/interactions', { counterparty_id: cp.id, kind: 'message' })).json();
  t.match(plain, { amount_minor: null, currency: null, source: 'manual', source_ref: null, agent_id: null, metadata: {} });
  const listed = (await inject('GET', `/v1/commerce-memory/interactions?counterparty_id=${cp.id}`)).json().interactions;
  t.same(listed.map((x: { id: string }) => x.id), [plain.id, i.id], 'newest first');
  t.same(listed[1], i, 'the list returns amount, currency, source_ref like the create');
  t.same((await inject('GET', `/v1/commerce-memory/interactions?counterparty_id=${cp.id}&kind=payment`)).json().interactions.map((x: { id: string }) => x.id), [i.id]);
  // The same source_ref under another source is another pair.
  const otherSource = await inject('POST', '/v1/commerce-memory/interactions', { counterparty_id: cp.id, kind: 'message', source: 'webhook', source_ref: 'call-1' });
  t.equal(otherSource.statusCode, 201);
});

t.test('20 concurrent posts of one (source, source_ref) give one row', async (t) => {
  const cp = (await inject('POST', '/v1/counterparties', { kind: 'customer', name: 'Buyer' })).json();
  for (const round of [0, 1]) {
    const ref = `wh-${round}`;
    const rs = await Promise.all(
      Array.from({ length: 20 }, () => inject('POST', '/v1/commerce-memory/interactions', { counterparty_id: cp.id, kind: 'order', amount_minor: 500, currency: 'USD', source: 'webhook', source_ref: ref })),
    );
    const codes = rs.map((r) => r.statusCode).sort();
    t.same(codes, [...Array(19).fill(200), 201], `round ${round}: one 201, nineteen 200`);
    const created = rs.find((r) => r.statusCode === 201)!.json();
    for (const r of rs.filter((x) => x.statusCode === 200)) t.same(r.json(), { idempotent: true, interaction: created });
    const listed = (await inject('GET', `/v1/commerce-memory/interactions?counterparty_id=${cp.id}&limit=200`)).json().interactions.filter((x: { source_ref: string }) => x.source_ref === ref);
    t.equal(listed.length, 1, 'one row');
    const recorded = (await ledger.store.readAll({ maxCount: 100_000, filter: { eventTypes: ['interaction.recorded'] } })).filter((e) => e.data.source_ref === ref);
    t.equal(recorded.length, 1, 'one interaction.recorded event');
  }
  const later = await inject('POST', '/v1/commerce-memory/interactions', { counterparty_id: cp.id, kind: 'order', source: 'webhook', source_ref: 'wh-0' });
  t.equal(later.statusCode, 200);
  t.equal(later.json().idempotent, true);
  t.equal(later.json().interaction.amount_minor, 500, 'the first recording stands');
  const elsewhere = (await inject('POST', '/v1/counterparties', { kind: 'customer', name: 'Buyer' }, secondKey)).json();
  t.equal((await inject('POST', '/v1/commerce-memory/interactions', { counterparty_id: elsewhere.id, kind: 'order', source: 'webhook', source_ref: 'wh-0' }, secondKey)).statusCode, 201, 'another project has its own pairs');
});

t.test('since is inclusive, until exclusive, on occurred_at', async (t) => {
  const cp = (await inject('POST', '/v1/counterparties', { kind: 'supplier', name: 'Edges' })).json();
  const times = ['2026-03-01T00:00:00.000Z', '2026-03-01T00:00:00.001Z', '2026-03-01T23:59:59.999Z', '2026-03-02T00:00:00.000Z'];
  const ids: string[] = [];
  for (const at of times) ids.push((await inject('POST', '/v1/commerce-memory/interactions', { counterparty_id: cp.id, kind: 'quote', occurred_at: at })).json().id);
  const q = async (qs: string) => (await inject('GET', `/v1/commerce-memory/interactions?counterparty_id=${cp.id}&${qs}`)).json().interactions.map((x: { occurred_at: string }) => x.occurred_at).reverse();
  t.same(await q('since=2026-03-01T00:00:00.000Z&until=2026-03-02T00:00:00.000Z'), times.slice(0, 3));
  t.same(await q('since=2026-03-01T00:00:00.001Z'), times.slice(1));
  t.same(await q('until=2026-03-01T00:00:00.001Z'), times.slice(0, 1));
  t.same(await q(`since=${encodeURIComponent('2026-03-01T21:00:00-03:00')}`), times.slice(3), 'offsets are instants');
  const bad = await inject('GET', '/v1/commerce-memory/interactions?since=2026-03-02T00:00:00Z&until=2026-03-02T00:00:00Z');
  t.equal(bad.statusCode, 400);
  t.equal(bad.json().error.code, 'invalid_query');
  t.same(bad.json().error.details.issues[0].path, ['since']);
  const notTime = await inject('GET', '/v1/commerce-memory/interactions?since=last-week&limit=500');
  t.equal(notTime.statusCode, 400);
  t.same(notTime.json().error.details.issues.map((i: { path: string[] }) => i.path[0]).sort(), ['limit', 'since']);
  const insight = await inject('GET', '/v1/commerce-memory/insights/counterparty-summary?since=2026-03-02T00:00:00Z&until=2026-03-01T00:00:00Z');
  t.equal(insight.statusCode, 400);
  t.equal(insight.json().error.code, 'invalid_query');
  t.ok(insight.json().error.details.issues.length > 0);
  const sum = (await inject('GET', '/v1/commerce-memory/insights/counterparty-summary?since=2026-03-01T00:00:00.001Z&until=2026-03-02T00:00:00Z')).json();
  t.same(sum.window, { since: '2026-03-01T00:00:00.001Z', until: '2026-03-02T00:00:00.000Z' });
  t.equal(sum.rows.find((r: { counterparty_id: string }) => r.counterparty_id === cp.id).interaction_count, 2);
});

t.test('preferences', async (t) => {
  const cp = (await inject('POST', '/v1/counterparties', { kind: 'supplier', name: 'Picky' })).json();
  t.same((await inject('GET', `/v1/counterparties/${cp.id}/preferences`)).json(), { counterparty_id: cp.id, preferences: {}, updated_at: null });
  const put = await inject('PUT', `/v1/counterparties/${cp.id}/preferences`, { preferences: { currency: 'BRL', payment_terms_days: 30 } });
  t.equal(put.statusCode, 200);
  t.match(put.json(), { counterparty_id: cp.id, preferences: { currency: 'BRL', payment_terms_days: 30 }, updated_at: /Z$/ });
  t.same((await inject('GET', `/v1/counterparties/${cp.id}/preferences`)).json(), put.json());
  const replaced = (await inject('PUT', `/v1/counterparties/${cp.id}/preferences`, { preferences: { notes: 'answers fast' } })).json();
  t.same(replaced.preferences, { notes: 'answers fast' }, 'PUT replaces');
  t.equal((await inject('PUT', `/v1/counterparties/${cp.id}/preferences`, { preferences: 'cheap' })).statusCode, 400);
  t.equal((await inject('PUT', '/v1/counterparties/cp_absentAbsent0000/preferences', { preferences: {} })).statusCode, 404);
  t.equal((await inject('GET', `/v1/counterparties/${cp.id}/preferences`, undefined, secondKey)).statusCode, 404);
  t.same((await inject('GET', `/v1/counterparties/${cp.id}`)).json().name, 'Picky', 'the counterparty shape is unchanged');
});

t.test('negotiations: create, list, get', async (t) => {
  const cp = (await inject('POST', '/v1/counterparties', { kind: 'supplier', name: 'Haggler' })).json();
  t.equal((await inject('POST', '/v1/commerce-memory/negotiations', { counterparty_id: cp.id, item_ref: 'sku', outcome: 'accepted', list_price_minor: 100 })).statusCode, 400, 'a price needs a currency');
  t.equal((await inject('POST', '/v1/commerce-memory/negotiations', { counterparty_id: cp.id, item_ref: 'sku', outcome: 'won' })).statusCode, 400);
  t.equal((await inject('POST', '/v1/commerce-memory/negotiations', { counterparty_id: 'cp_absentAbsent0000', item_ref: 'sku', outcome: 'accepted' })).json().error.code, 'counterparty_not_found');
  const n = await inject('POST', '/v1/commerce-memory/negotiations', {
    counterparty_id: cp.id,
    item_ref: 'sku-9',
    outcome: 'accepted',
    currency: 'BRL',
    list_price_minor: 10000,
    final_price_minor: 8750,
    started_at: '2026-02-01T10:00:00Z',
    ended_at: '2026-02-01T10:05:00Z',
  });
  t.equal(n.statusCode, 201);
  t.match(n.json(), { id: /^neg_/, discount_bps: 1250, started_at: '2026-02-01T10:00:00.000Z', ended_at: '2026-02-01T10:05:00.000Z', currency: 'BRL' });
  t.same((await inject('GET', `/v1/commerce-memory/negotiations/${n.json().id}`)).json(), n.json());
  t.equal((await inject('GET', `/v1/commerce-memory/negotiations/${n.json().id}`, undefined, other.key)).statusCode, 404);
  const listed = (await inject('GET', '/v1/commerce-memory/negotiations?item_ref=sku-9&since=2026-02-01T10:00:00Z&until=2026-02-01T10:00:00.001Z')).json().negotiations;
  t.same(listed, [n.json()]);
  t.same((await inject('GET', '/v1/commerce-memory/negotiations?item_ref=sku-9&until=2026-02-01T10:00:00Z')).json().negotiations, []);
  const stats = (await inject('GET', '/v1/commerce-memory/insights/negotiation-stats?item_ref=sku-9&since=2026-01-01T00:00:00Z&until=2026-03-01T00:00:00Z')).json();
  t.same(stats, { item_ref: 'sku-9', window: { since: '2026-01-01T00:00:00.000Z', until: '2026-03-01T00:00:00.000Z' }, rows: [{ outcome: 'accepted', n: 1, currencies: ['BRL'], discount_sample_n: 1, avg_discount_bps: 1250 }] });
});

t.test('tenancy: lists and insights see only the caller project', async (t) => {
  const mine = (await inject('POST', '/v1/counterparties', { kind: 'customer', name: 'Mine' })).json();
  await inject('POST', '/v1/commerce-memory/interactions', { counterparty_id: mine.id, kind: 'payment', amount_minor: 1, currency: 'BRL' });
  for (const headers of [other.key, secondKey]) {
    const cps = (await inject('GET', '/v1/counterparties?limit=200', undefined, headers)).json().counterparties;
    t.notOk(cps.some((c: { id: string }) => c.id === mine.id));
    t.same((await inject('GET', `/v1/commerce-memory/interactions?counterparty_id=${mine.id}`, undefined, headers)).json().interactions, []);
    const top = (await inject('GET', '/v1/commerce-memory/insights/top-counterparties?limit=200', undefined, headers)).json();
    t.notOk(top.rows.some((r: { counterparty_id: string }) => r.counterparty_id === mine.id));
    const sum = (await inject('GET', '/v1/commerce-memory/insights/counterparty-summary?limit=200', undefined, headers)).json();
    t.notOk(sum.rows.some((r: { counterparty_id: string }) => r.counterparty_id === mine.id));
    t.equal((await inject('GET', `/v1/counterparties/${mine.id}`, undefined, headers)).statusCode, 404);
  }
  const top = (await inject('GET', '/v1/commerce-memory/insights/top-counterparties?limit=200')).json();
  t.ok(top.rows.some((r: { counterparty_id: string }) => r.counterparty_id === mine.id));
  t.equal(top.kind, null);
});
