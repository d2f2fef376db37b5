import t from 'tap';
import { bootstrapOrg, testApp } from '../helpers/app.ts';

// Text the ledger cannot hold (U+0000, lone surrogates) and JSON nested deeper
// than an event takes are refused with the spec's 400 before anything is
// written; before, such a consumer name was acknowledged and then stopped the
// read side (and the audit sealer) for every organization.

const { app, ledger } = await testApp(t);
const acme = await bootstrapOrg(app, 'Acme');
const beta = await bootstrapOrg(app, 'Beta');
const json = { ...acme.key, 'content-type': 'application/json' };

const refusals: [string, string, (string | number)[]][] = [
  ['{"display_name":"a\\u0000b"}', 'U+0000 in a value', ['display_name']],
  ['{"display_name":"lone\\ud800"}', 'a lone surrogate', ['display_name']],
  ['{"display_name":"x","metadata":{"k\\u0000":1}}', 'U+0000 in a member name', ['metadata', 'k\u0000']],
  [`{"display_name":"x","metadata":{"a":${'['.repeat(100)}${']'.repeat(100)}}}`, 'nested 100 levels', ['metadata', 'a', ...Array.from({ length: 30 }, () => 0)]],
];

t.test('a body the ledger cannot hold: 400 invalid_body naming where, nothing written', async (t) => {
  for (const [payload, what, path] of refusals) {
    const head = await ledger.store.headPosition();
    for (const headers of [json, { ...json, 'idempotency-key': `k-${what.replace(/\W/g, '-')}` }]) {
      const r = await app.inject({ method: 'POST', url: '/v1/consumers', headers, payload });
      t.equal(r.statusCode, 400, `${what}${headers === json ? '' : ', with an Idempotency-Key'}`);
      t.equal(r.json().error.code, 'invalid_body');
      t.same(r.json().error.details.issues[0].path, path, 'the issue names where');
      t.equal(r.json().request_id, r.headers['x-request-id']);
    }
    t.equal(await ledger.store.headPosition(), head, `${what}: nothing written`);
  }
  // The read side goes on for everyone.
  const ok = await app.inject({ method: 'POST', url: '/v1/consumers', headers: beta.key, payload: { display_name: 'Bob 😀' } });
  t.equal(ok.statusCode, 201);
  t.notOk(ok.headers['x-svc-read-side'], 'the read side is not behind');
  const got = await app.inject({ method: 'GET', url: `/v1/consumers/${ok.json().id}`, headers: beta.key });
  t.equal(got.json().display_name, 'Bob 😀', 'a well-formed pair of surrogates is text like any other');
});

t.test('a path or query holding U+0000: 400, never a 500', async (t) => {
  const path = await app.inject({ method: 'GET', url: '/v1/mandates/%00', headers: acme.key });
  t.equal(path.statusCode, 400);
  t.equal(path.json().error.code, 'invalid_params');
  const query = await app.inject({ method: 'GET', url: '/v1/mandates?consumer_id=%00', headers: acme.key });
  t.equal(query.statusCode, 400);
  t.equal(query.json().error.code, 'invalid_query');
  const counterparty = await app.inject({ method: 'GET', url: '/v1/counterparties/a%00b', headers: acme.key });
  t.equal(counterparty.statusCode, 400);
});

t.test('credentials are still checked first', async (t) => {
  const r = await app.inject({ method: 'POST', url: '/v1/consumers', headers: { 'content-type': 'application/json' }, payload: refusals[0]![0] });
  t.equal(r.statusCode, 401);
  t.same(r.json(), { error: 'unauthorized' });
});

t.test('JSON with media-type parameters is JSON', async (t) => {
  for (const type of ['application/json; charset=utf-8', 'application/json;charset=UTF-8', 'Application/JSON']) {
    const r = await app.inject({ method: 'POST', url: '/v1/consumers', headers: { ...acme.key, 'content-type': type }, payload: '{"display_name":"typed"}' });
    t.equal(r.statusCode, 201, type);
  }
  for (const type of ['application/jsonx', 'text/json', 'application/json-patch']) {
    const r = await app.inject({ method: 'POST', url: '/v1/consumers', headers: { ...acme.key, 'content-type': type }, payload: '{"display_name":"typed"}' });
    t.equal(r.statusCode, 415, `${type}: not JSON`);
  }
});
