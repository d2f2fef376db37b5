import t from 'tap';
import { READ_SIDE_HEADER } from '../../src/http/kernel/route.ts';
import { bootstrapOrg, checkedApp, platform, testApp } from '../helpers/app.ts';

// The auth matrix: each credential case against representative routes, with
// the exact status and body shape of spec Parts 5 and 7.

const { app, ledger, vault } = await testApp(t);
const org = await bootstrapOrg(app, 'Matrix');
const second = (await app.inject({ method: 'POST', url: '/v1/projects', headers: org.key, payload: { name: 'Second', slug: 'second' } })).json();

async function key(body: Record<string, unknown>): Promise<string> {
  const r = await app.inject({ method: 'POST', url: '/v1/api-keys', headers: org.owner, payload: { name: 'k', environment: 'test', ...body } });
  if (r.statusCode !== 201) throw new Error(r.body);
  return r.json().key;
}
const readOnly = await key({ scopes: ['projects:read'] });
const bound = await key({ project_id: second.id });
const revoked = await key({});
const revokedId = (await app.inject({ method: 'GET', url: '/v1/api-keys', headers: org.owner })).json().api_keys.find((k: { prefix: string }) => revoked.startsWith(k.prefix)).id;
await app.inject({ method: 'DELETE', url: `/v1/api-keys/${revokedId}`, headers: org.owner });
const member = (await app.inject({ method: 'POST', url: '/v1/team/members', headers: org.owner, payload: { email: 'member@example.com', role: 'member' } })).json();

const UNAUTHORIZED = { error: 'unauthorized' };
type Case = [name: string, headers: Record<string, string>, method: 'GET' | 'POST', url: string, status: number, body: unknown];
const bearer = (k: string) => ({ authorization: `Bearer ${k}` });
const forbiddenShape = { error: 'forbidden', message: String, status: 403 };

const cases: Case[] = [
  ['no credential', {}, 'GET', '/v1/projects', 401, UNAUTHORIZED],
  ['malformed bearer', bearer('nope'), 'GET', '/v1/projects', 401, UNAUTHORIZED],
  ['not a bearer scheme', { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }, 'GET', '/v1/projects', 401, UNAUTHORIZED],
  ['well-formed unknown key', bearer(`sk_test_${'A'.repeat(32)}`), 'GET', '/v1/projects', 401, UNAUTHORIZED],
  ['wrong environment prefix on a real key', bearer(org.testKey.replace('sk_test_', 'sk_live_')), 'GET', '/v1/projects', 401, UNAUTHORIZED],
  ['revoked key', bearer(revoked), 'GET', '/v1/projects', 401, UNAUTHORIZED],
  ['platform secret on an API-key route', platform, 'GET', '/v1/projects', 401, UNAUTHORIZED],
  ['scope-lacking key writes', bearer(readOnly), 'POST', '/v1/projects', 403, forbiddenShape],
  ['project-bound key on another project', { ...bearer(bound), 'x-svc-project': org.projectId }, 'GET', '/v1/whoami', 403, forbiddenShape],
  ['x-svc-project of no project', { ...bearer(org.testKey), 'x-svc-project': 'prj_unknown' }, 'GET', '/v1/whoami', 403, forbiddenShape],
  ['API key on the service subtree', bearer(org.testKey), 'GET', '/v1/api-keys', 401, UNAUTHORIZED],
  ['platform secret without x-svc-user', platform, 'GET', '/v1/api-keys', 401, UNAUTHORIZED],
  ['blank x-svc-user', { ...platform, 'x-svc-user': '   ' }, 'GET', '/v1/api-keys', 401, UNAUTHORIZED],
  ['unknown x-svc-user', { ...platform, 'x-svc-user': 'usr_nobody' }, 'GET', '/v1/api-keys', 401, UNAUTHORIZED],
  ['member below admin', { ...platform, 'x-svc-user': member.user_id }, 'GET', '/v1/api-keys', 403, { error: 'insufficient_role', required: 'admin' }],
  ['API key creating an organization', bearer(org.testKey), 'POST', '/v1/orgs', 401, UNAUTHORIZED],
];

for (const [name, headers, method, url, status, body] of cases) {
  t.test(name, async (t) => {
    const res = await app.inject({ method, url, headers, ...(method === 'POST' ? { payload: { name: 'P', slug: `p-${Math.random().toString(36).slice(2, 8)}`, owner_email: 'x@example.com' } } : {}) });
    t.equal(res.statusCode, status);
    t.match(res.json(), body as object);
    if (status === 401) t.same(res.json(), UNAUTHORIZED, 'bare body, nothing else');
    t.ok(res.headers['x-request-id'], 'X-Request-Id on every response');
  });
}

t.test('what the right credentials can do', async (t) => {
  t.equal((await app.inject({ method: 'GET', url: '/v1/projects', headers: bearer(readOnly) })).statusCode, 200, 'read scope reads');
  const who = (await app.inject({ method: 'GET', url: '/v1/whoami', headers: bearer(bound) })).json();
  t.equal(who.project_id, second.id, 'a bound key acts in its project');
  const picked = (await app.inject({ method: 'GET', url: '/v1/whoami', headers: { ...bearer(org.testKey), 'x-svc-project': second.id } })).json();
  t.equal(picked.project_id, second.id, 'x-svc-project picks the project');
  const live = (await app.inject({ method: 'GET', url: '/v1/whoami', headers: bearer(org.liveKey) })).json();
  t.equal(live.environment, 'live');
});

t.test('rate limiting per API key answers 429 with the limit fields at the top level', async (t) => {
  const limited = await checkedApp(t, { vault, db: ledger.db, store: ledger.store, readSide: ledger.readSide, serviceSecret: 'svc_other_secret_0123456789abcdefghijk', baseUrl: 'http://x', logLevel: 'silent', rateLimit: { burst: 3, perSecond: 0.5 } });
  t.teardown(() => limited.close());
  const codes: number[] = [];
  let last;
  for (let i = 0; i < 4; i++) {
    last = await limited.inject({ method: 'GET', url: '/v1/whoami', headers: org.key });
    codes.push(last.statusCode);
  }
  t.same(codes, [200, 200, 200, 429]);
  t.match(last!.json(), { error: 'rate_limited', limit: 3, remaining: 0, retry_after_seconds: Number });
  t.ok(Number(last!.headers['retry-after']) >= 1);
  t.equal((await limited.inject({ method: 'GET', url: '/v1/whoami', headers: bearer(org.liveKey) })).statusCode, 200, 'another key has its own bucket');
});

t.test('a write whose read side lags still answers its status, flagged behind', async (t) => {
  await ledger.readSide.sealer.stop();
  const slow = await checkedApp(t, { vault, db: ledger.db, store: ledger.store, readSide: ledger.readSide, serviceSecret: 'svc_other_secret_0123456789abcdefghijk', baseUrl: 'http://x', logLevel: 'silent', readWaitMs: 150 });
  t.teardown(() => slow.close());
  const res = await slow.inject({ method: 'POST', url: '/v1/projects', headers: org.key, payload: { name: 'Lagging', slug: 'lagging' } });
  t.equal(res.statusCode, 201);
  t.equal(res.headers[READ_SIDE_HEADER], 'behind');
  await ledger.readSide.sealer.start();
  await ledger.settle();
  // Caught up again, a write waits (as long as it takes on a busy machine) and carries no header.
  const ok = await app.inject({ method: 'POST', url: '/v1/projects', headers: org.key, payload: { name: 'Fresh', slug: 'fresh' } });
  t.equal(ok.statusCode, 201);
  t.equal(ok.headers[READ_SIDE_HEADER], undefined, 'no header once caught up');
});
