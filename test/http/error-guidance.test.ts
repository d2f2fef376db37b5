import t from 'tap';
import { HTTP_BODY_MAX_BYTES, INBOUND_WEBHOOK_MAX_BYTES } from '../../src/limits.ts';
import { readyLine } from '../../src/startup.ts';
import { bootstrapOrg, platform, SERVICE_SECRET, testApp } from '../helpers/app.ts';

// Errors that say what to do (issue 60, Errors), within the shapes the
// specification fixes: the bare 401 body stays, and WWW-Authenticate (RFC 6750)
// names which of the mistakes it was; a form where JSON is read is 415; a
// wrong method is 405 with Allow; an unknown path names the nearest route; a
// 413 states the limit; a 400's top message says its first issue.

const { app } = await testApp(t);
const org = await bootstrapOrg(app, 'Guidance');
const inject: typeof app.inject = app.inject.bind(app);

t.test('each 401 keeps the bare body and names its mistake in WWW-Authenticate, with x-request-id', async (t) => {
  const key = org.testKey;
  const cases: [mistake: string, url: string, headers: Record<string, string>, description: RegExp][] = [
    ['no credential', '/v1/projects', {}, /^no credential: send Authorization: Bearer <API key>$/],
    ['a wrong key', '/v1/projects', { authorization: `Bearer sk_test_${'A'.repeat(32)}` }, /API key is unknown or revoked/],
    ['the key without Bearer', '/v1/projects', { authorization: key }, /lacks the Bearer scheme/],
    ['the key in x-api-key', '/v1/projects', { 'x-api-key': key }, /not x-api-key/],
    ['Basic authentication', '/v1/projects', { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }, /the Basic scheme is not accepted/],
    ['not a key at all', '/v1/projects', { authorization: 'Bearer nope' }, /not an API key \(sk_test_ or sk_live_/],
    ['the platform secret on /v1', '/v1/projects', platform, /platform secret does not authenticate this route/],
    ['an API key on the service-auth subtree', '/v1/api-keys', { authorization: `Bearer ${key}` }, /takes the platform secret with the acting user in x-svc-user, not an API key/],
    ['no x-svc-user', '/v1/api-keys', platform, /x-svc-user is missing/],
    ['an unknown x-svc-user', '/v1/api-keys', { ...platform, 'x-svc-user': 'usr_nobody' }, /x-svc-user names no user/],
    ['nothing on the service-auth subtree', '/v1/api-keys', {}, /^no credential: send Authorization: Bearer <platform secret> with the acting user in x-svc-user$/],
  ];
  const seen = new Set<string>();
  for (const [mistake, url, headers, description] of cases) {
    const r = await inject({ method: 'GET', url, headers });
    t.equal(r.statusCode, 401, mistake);
    t.same(r.json(), { error: 'unauthorized' }, `${mistake}: the specification's bare body`);
    t.ok(r.headers['x-request-id'], `${mistake}: x-request-id`);
    const h = String(r.headers['www-authenticate']);
    const m = /error_description="([^"]*)"/.exec(h);
    t.ok(m, `${mistake}: ${h}`);
    t.match(m?.[1], description, mistake);
    t.equal(/error="invalid_token"/.test(h), mistake !== 'no credential' && mistake !== 'nothing on the service-auth subtree', `${mistake}: error="invalid_token" unless nothing was sent (RFC 6750 section 3.1)`);
    t.match(h, /^Bearer [a-z_]+="[\x20\x21\x23-\x5b\x5d-\x7e]*"(, [a-z_]+="[\x20\x21\x23-\x5b\x5d-\x7e]*")*$/, `${mistake}: RFC 6750 syntax`);
    for (const secret of [key, SERVICE_SECRET, 'nope']) t.notOk(h.includes(secret), `${mistake}: the header repeats no credential`);
    seen.add(m?.[1] ?? '');
  }
  t.equal(seen.size, cases.length, 'every mistake has its own description');
});

t.test('a JSON body sent as a form (curl -d) answers 415 "send the body as application/json", nothing written', async (t) => {
  const before = (await inject({ method: 'GET', url: '/v1/projects', headers: org.key })).json();
  const r = await inject({ method: 'POST', url: '/v1/projects', headers: { ...org.key, 'content-type': 'application/x-www-form-urlencoded' }, payload: JSON.stringify({ name: 'Formed', slug: 'formed' }) });
  t.equal(r.statusCode, 415, r.body);
  t.match(r.json(), { error: { code: 'unsupported_media_type', message: /^send the body as application\/json/ }, request_id: String });
  t.same((await inject({ method: 'GET', url: '/v1/projects', headers: org.key })).json(), before, 'nothing written');
  const plain = await inject({ method: 'POST', url: '/v1/projects', headers: { ...org.key, 'content-type': 'text/plain' }, payload: '{}' });
  t.equal(plain.statusCode, 415, 'text/plain as before');
  t.equal((await inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'grant_type=nope' })).statusCode, 400, 'the OAuth token endpoint still reads forms');
});

t.test('a wrong method answers 405 with Allow', async (t) => {
  const r = await inject({ method: 'DELETE', url: '/v1/projects', headers: org.key });
  t.equal(r.statusCode, 405, r.body);
  t.same(String(r.headers.allow).split(', '), ['GET', 'HEAD', 'POST']);
  t.match(r.json(), { error: { code: 'method_not_allowed', message: 'DELETE is not served on /v1/projects: use GET, POST', details: { allow: ['GET', 'HEAD', 'POST'] } } });
  const withId = await inject({ method: 'PUT', url: `/v1/projects/${org.projectId}`, headers: org.key });
  t.equal(withId.statusCode, 405, 'a path with a parameter');
  t.ok(String(withId.headers.allow).includes('GET'));
});

t.test('an unknown path names the nearest route', async (t) => {
  for (const [url, near] of [
    ['/v1/projcts', 'GET /v1/projects'],
    ['/v1/Projects', 'GET /v1/projects'],
    ['/v1/sesions/ses_1', 'GET /v1/sessions/{id}'],
  ] as const) {
    const r = await inject({ method: 'GET', url, headers: org.key });
    t.equal(r.statusCode, 404, url);
    t.match(r.json(), { error: { code: 'not_found', message: `no route for GET ${url}: did you mean ${near}?`, details: { did_you_mean: near } } }, url);
  }
  const far = await inject({ method: 'GET', url: '/v1/nope', headers: org.key });
  t.same(far.json().error, { code: 'not_found', message: 'no route for GET /v1/nope' }, 'nothing near: no guess');
});

t.test('a 413 states the limit', async (t) => {
  const r = await inject({ method: 'POST', url: '/v1/projects', headers: { ...org.key, 'content-type': 'application/json' }, payload: JSON.stringify({ name: 'x'.repeat(HTTP_BODY_MAX_BYTES) }) });
  t.equal(r.statusCode, 413);
  t.match(r.json(), { error: { code: 'payload_too_large', message: new RegExp(`larger than ${HTTP_BODY_MAX_BYTES} bytes`), details: { max_body_bytes: HTTP_BODY_MAX_BYTES } } });
  const hook = await inject({ method: 'POST', url: '/v1/webhooks/acme-payments/ca_0123456789abcdefghij', headers: { 'content-type': 'application/json' }, payload: 'x'.repeat(INBOUND_WEBHOOK_MAX_BYTES + 1) });
  t.equal(hook.statusCode, 413, 'a route with its own limit');
  t.match(hook.json(), { error: { details: { max_body_bytes: INBOUND_WEBHOOK_MAX_BYTES } } });
});

t.test("a 400's top message says its first issue", async (t) => {
  const r = await inject({ method: 'POST', url: '/v1/projects', headers: org.key, payload: { name: 5, slug: 7 } });
  t.equal(r.statusCode, 400);
  const { message, details } = r.json().error as { message: string; details: { issues: { path: string[]; message: string }[] } };
  const first = details.issues[0]!;
  t.equal(message, `the body is invalid: ${first.path.join('.')}: ${first.message} (and ${details.issues.length - 1} more issue${details.issues.length > 2 ? 's' : ''} in details.issues)`);
  t.ok(details.issues.length >= 2, 'two mistakes, both listed');
  const one = await inject({ method: 'GET', url: '/v1/projects?limit=nope', headers: org.key });
  t.equal(one.statusCode, 400);
  t.match(one.json().error.message, /^the query is invalid: limit: /);
});

t.test("the ready line's first URL leads to the dashboard, not a 404", async (t) => {
  const line = readyLine('http://127.0.0.1:8080/', 0);
  const first = new URL(/https?:\/\/\S+/.exec(line)![0]);
  const r = await inject({ method: 'GET', url: first.pathname });
  t.equal(r.statusCode, 303, line);
  t.equal(r.headers.location, '/dashboard');
});
