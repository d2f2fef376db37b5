import t from 'tap';
import { bootstrapOrg, secondInstance, testApp, testClock } from '../helpers/app.ts';
import { SIGNIN_CODE_TTL_MS } from '../../src/limits.ts';
import { askCode, csrfOf, dashboardCodes, post, setCookie, signInInject } from './inject.ts';

// The dashboard's security model, request by request: CSRF (token and
// origin), sessions across instances, roles by URL, credentials kept apart
// (no API key on the dashboard, no dashboard cookie on /v1), the sign-in that
// says nothing about membership, codes that expire and lock, a new session id
// at every sign-in, and no secret in the event log or the log.

const lines: string[] = [];
const clock = testClock();
// Room for the many codes this file asks (one test below meets a small limit of its own).
const a = await testApp(t, { providers: true, now: clock.now, logStream: { write: (l) => void lines.push(l) }, app: { signInBursts: { perAddress: 50, perClient: 100 } } });
const { app, ledger } = a;
const sandbox = a.sandboxProviders!.url;
const org = await bootstrapOrg(app, 'Secure');
const owner = 'owner+secure@example.com';
const cookie = await signInInject(app, sandbox, owner);
const csrf = await csrfOf(app, cookie);
const jar = { cookie: `dash_session=${cookie}` };
const orgEvents = async () => (await ledger.store.readStream(`org-${org.orgId}`)).length;
const secrets = new Set<string>([cookie, csrf]);

t.test('a POST without the CSRF token, or from another origin, is refused and changes nothing', async (t) => {
  const before = await orgEvents();
  const noToken = await post(app, '/dashboard/keys', { name: 'sneaky', scopes: '*' }, jar);
  t.equal(noToken.statusCode, 403);
  t.match(noToken.body, 'Nothing was changed');
  const wrongToken = await post(app, '/dashboard/keys', { _csrf: 'x'.repeat(43), name: 'sneaky', scopes: '*' }, jar);
  t.equal(wrongToken.statusCode, 403);
  const crossSite = await post(app, '/dashboard/keys', { _csrf: csrf, name: 'sneaky', scopes: '*' }, { ...jar, 'sec-fetch-site': 'cross-site' });
  t.equal(crossSite.statusCode, 403);
  const foreignOrigin = await app.inject({ method: 'POST', url: '/dashboard/keys', headers: { ...jar, 'content-type': 'application/x-www-form-urlencoded', origin: 'https://evil.example' }, payload: `_csrf=${csrf}&name=sneaky&scopes=*` });
  t.equal(foreignOrigin.statusCode, 403);
  const noOriginAtAll = await app.inject({ method: 'POST', url: '/dashboard/keys', headers: { ...jar, 'content-type': 'application/x-www-form-urlencoded' }, payload: `_csrf=${csrf}&name=sneaky&scopes=*` });
  t.equal(noOriginAtAll.statusCode, 403);
  t.equal(await orgEvents(), before, 'nothing was written');
  const good = await post(app, '/dashboard/keys', { _csrf: csrf, name: 'fine', scopes: '*' }, jar);
  t.equal(good.statusCode, 200, 'the same form with its token and origin is accepted');
  t.equal(await orgEvents(), before + 1);
  const key = /id="new-key-secret"[^>]*>([^<]+)</.exec(good.body)![1]!;
  secrets.add(key);
});

t.test('credentials stay apart: no API key or platform secret on the dashboard, no dashboard cookie on /v1', async (t) => {
  for (const headers of [org.key, org.owner]) {
    const page = await app.inject({ method: 'GET', url: '/dashboard/keys', headers });
    t.equal(page.statusCode, 303);
    t.match(page.headers.location, /^\/dashboard\/sign-in/);
    const write = await post(app, '/dashboard/keys', { name: 'k', scopes: '*' }, headers);
    t.equal(write.statusCode, 303, 'a write with a key is sent to sign-in, not done');
  }
  for (const url of ['/v1/whoami', '/v1/api-keys']) {
    const r = await app.inject({ method: 'GET', url, headers: jar });
    t.equal(r.statusCode, 401, `${url} refuses a dashboard cookie`);
  }
  const page = await app.inject({ method: 'GET', url: '/dashboard', headers: jar });
  t.notOk(page.body.includes('svc_test_secret'), 'the platform secret is not on the page');
});

t.test('sign-in answers a member and a stranger alike', async (t) => {
  const member = await askCode(app, owner);
  const stranger = await askCode(app, 'stranger@example.com');
  t.equal(member.res.statusCode, 303);
  t.equal(stranger.res.statusCode, 303);
  const shape = (l: unknown) => String(l).replace(/sic_[A-Za-z0-9]+/, 'sic_*');
  t.equal(shape(member.res.headers.location), shape(stranger.res.headers.location));
  t.equal(member.res.body, stranger.res.body);
  t.same(Object.keys(member.res.headers).sort(), Object.keys(stranger.res.headers).sort());
  const pages = await Promise.all([member, stranger].map((x) => app.inject({ method: 'GET', url: `/dashboard/sign-in/code?c=${x.challenge}` })));
  t.equal(pages[0]!.body.replace(/sic_[A-Za-z0-9]+/g, ''), pages[1]!.body.replace(/sic_[A-Za-z0-9]+/g, ''), 'the code pages are the same');
  t.same(await dashboardCodes(sandbox, 'stranger@example.com'), [], 'no mail to a stranger');
});

t.test('codes expire after 10 minutes and lock after 5 tries', async (t) => {
  const before = (await dashboardCodes(sandbox, owner)).length;
  const { challenge } = await askCode(app, owner);
  let codes: string[] = [];
  while (codes.length <= before) codes = await dashboardCodes(sandbox, owner);
  secrets.add(codes[0]!);
  clock.advance(SIGNIN_CODE_TTL_MS + 1);
  const late = await post(app, '/dashboard/sign-in/code', { c: challenge, code: codes[0]! });
  t.equal(late.statusCode, 400);
  t.match(late.body, 'This code expired');
  t.notOk(setCookie(late, 'dash_session'));

  const n = (await dashboardCodes(sandbox, owner)).length;
  const locked = await askCode(app, owner);
  let fresh: string[] = [];
  while (fresh.length <= n) fresh = await dashboardCodes(sandbox, owner);
  const right = fresh[0]!;
  secrets.add(right);
  const wrong = right === '000000' ? '111111' : '000000';
  for (let i = 1; i <= 4; i++) {
    const r = await post(app, '/dashboard/sign-in/code', { c: locked.challenge, code: wrong });
    t.match(r.body, `${5 - i} ${5 - i === 1 ? 'try' : 'tries'} left`);
  }
  t.match((await post(app, '/dashboard/sign-in/code', { c: locked.challenge, code: wrong })).body, 'this code is locked');
  const after = await post(app, '/dashboard/sign-in/code', { c: locked.challenge, code: right });
  t.equal(after.statusCode, 400, 'the right code no longer works once locked');
  t.notOk(setCookie(after, 'dash_session'));
});

t.test('a new session id at every sign-in; the old cookie opens nothing', async (t) => {
  const first = await signInInject(app, sandbox, owner);
  const second = await signInInject(app, sandbox, owner, first);
  secrets.add(first).add(second);
  t.not(first, second);
  t.equal((await app.inject({ method: 'GET', url: '/dashboard', headers: { cookie: `dash_session=${first}` } })).statusCode, 303, 'the session the browser held ended');
  t.equal((await app.inject({ method: 'GET', url: '/dashboard', headers: { cookie: `dash_session=${second}` } })).statusCode, 200);
  const ids = (await ledger.store.readStream(`person-${org.ownerId}`)).filter((e) => e.type === 'user.signed_in').map((e) => (e.data as { session_id: string }).session_id);
  t.equal(new Set(ids).size, ids.length, 'each sign-in recorded a new public session id');
});

t.test('a session opened on one instance is honoured by another; sign out there ends it here', async (t) => {
  const b = await secondInstance(t, a, { app: { providers: a.providerRuntime, now: clock.now } });
  const s = await signInInject(app, sandbox, owner);
  secrets.add(s);
  const onB = await b.inject({ method: 'GET', url: '/dashboard', headers: { cookie: `dash_session=${s}` } });
  t.equal(onB.statusCode, 200);
  t.match(onB.body, 'Signed in as owner+secure@example.com');
  const token = /<meta name="csrf-token" content="([^"]+)"/.exec(onB.body)![1]!;
  t.equal((await post(b, '/dashboard/sign-out', { _csrf: token }, { cookie: `dash_session=${s}` })).statusCode, 303);
  t.equal((await app.inject({ method: 'GET', url: '/dashboard', headers: { cookie: `dash_session=${s}` } })).statusCode, 303);
});

t.test('codes asked per address are limited across instances', async (t) => {
  const b = await secondInstance(t, a, { app: { providers: a.providerRuntime, now: clock.now, signInBursts: { perAddress: 2, perClient: 100 } } });
  const c = await secondInstance(t, a, { app: { providers: a.providerRuntime, now: clock.now, signInBursts: { perAddress: 2, perClient: 100 } } });
  t.equal((await askCode(b, 'limited@example.com')).res.statusCode, 303);
  t.equal((await askCode(c, 'limited@example.com')).res.statusCode, 303);
  const third = await askCode(b, 'limited@example.com');
  t.equal(third.res.statusCode, 429, 'the third ask, on either instance, is refused');
  t.match(third.res.body, 'Wait 15 minutes');
  t.equal((await askCode(c, 'other@example.com')).res.statusCode, 303, 'another address is not held back');
});

t.test('sessions end after idle time', async (t) => {
  const s = await signInInject(app, sandbox, owner);
  secrets.add(s);
  clock.advance(2 * 60 * 60 * 1000 + 1);
  t.equal((await app.inject({ method: 'GET', url: '/dashboard', headers: { cookie: `dash_session=${s}` } })).statusCode, 303);
});

t.test('no code, cookie, CSRF token or key in the event log or the log', async (t) => {
  // The link in the mail carries a code in its query: opened, it is logged redacted.
  const linked = await askCode(app, owner);
  const codes = await dashboardCodes(sandbox, owner);
  secrets.add(codes[0]!);
  t.equal((await app.inject({ method: 'GET', url: `/dashboard/sign-in/code?c=${linked.challenge}&code=${codes[0]}` })).statusCode, 200);
  await ledger.settle();
  const events = JSON.stringify((await ledger.store.readAll({ maxCount: 100_000 })).map((e) => ({ type: e.type, data: e.data, metadata: e.metadata })));
  const log = lines.join('\n');
  t.ok(lines.length > 20, `the log was captured (${lines.length} lines)`);
  for (const s of secrets) {
    t.notOk(events.includes(s), `not in the events: ${s.slice(0, 4)}…`);
    t.notOk(log.includes(s), `not in the log: ${s.slice(0, 4)}…`);
  }
});
