import t from 'tap';
import { bootstrapOrg } from '../helpers/app.ts';
import { testCluster } from '../helpers/cluster.ts';

// The limits a client sees do not grow with the number of instances: the
// per-key rate limit and the OAuth endpoints' per-address limits are counted
// in PostgreSQL (src/http/kernel/ratelimit.ts), so requests alternating between two
// instances get exactly one instance's allowance. Behind a trusted proxy
// (TRUST_PROXY) the address is the client's from X-Forwarded-For, not the
// proxy's; from anyone else X-Forwarded-For is ignored.

const c = await testCluster(t, {
  rateLimit: { burst: 10, perSecond: 0.001 },
  oauth: { rateLimit: { perAddress: { burst: 5, perSecond: 0.001 }, keyPaste: { maxFailures: 1000, windowMs: 1000 } } },
  app: { trustProxy: '127.0.0.1' },
});
const org = await bootstrapOrg(c.apps[0]!, 'Limits');

t.test('an API key alternating between two instances gets exactly the single-instance burst', async (t) => {
  const codes: number[] = [];
  for (let i = 0; i < 14; i++) codes.push((await c.apps[i % 2]!.inject({ method: 'GET', url: `/v1/projects/${org.projectId}`, headers: org.key })).statusCode);
  t.same(codes, [...Array(10).fill(200), 429, 429, 429, 429]);
  const last = await c.apps[1]!.inject({ method: 'GET', url: `/v1/projects/${org.projectId}`, headers: org.key });
  t.match(last.json(), { error: 'rate_limited', limit: 10, remaining: 0, retry_after_seconds: Number });
  t.ok(Number(last.headers['retry-after']) >= 1, 'Retry-After');
});

t.test('concurrent requests through both instances: never more than the burst', async (t) => {
  const other = await bootstrapOrg(c.apps[1]!, 'Burst');
  const codes = await Promise.all(Array.from({ length: 40 }, (_, i) => c.apps[i % 2]!.inject({ method: 'GET', url: `/v1/projects/${other.projectId}`, headers: other.key }).then((r) => r.statusCode)));
  t.equal(codes.filter((x) => x === 200).length, 10, 'exactly the burst admitted');
  t.equal(codes.filter((x) => x === 429).length, 30);
});

const tokenRequest = (i: number, forwardedFor?: string) =>
  c.apps[i % 2]!.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/x-www-form-urlencoded', ...(forwardedFor ? { 'x-forwarded-for': forwardedFor } : {}) }, payload: 'grant_type=authorization_code&code=nope&code_verifier=x&client_id=nobody&redirect_uri=http://127.0.0.1/cb' });

t.test('the OAuth per-address limit holds across instances; behind the trusted proxy each client counts apart', async (t) => {
  const a: number[] = [];
  for (let i = 0; i < 7; i++) a.push((await tokenRequest(i, '203.0.113.7')).statusCode);
  t.same(a.map((x) => x === 429), [false, false, false, false, false, true, true], 'five from 203.0.113.7 through both instances, then 429');
  t.not((await tokenRequest(0, '203.0.113.8')).statusCode, 429, 'another client behind the same proxy has its own count');
});

t.test('X-Forwarded-For from an untrusted peer is ignored', async (t) => {
  // The peer of an injected request is 127.0.0.1; trusting only 10.0.0.1, its X-Forwarded-For names nobody.
  const { testApp } = await import('../helpers/app.ts');
  const lone = await testApp(t, { oauth: { rateLimit: { perAddress: { burst: 2, perSecond: 0.001 }, keyPaste: { maxFailures: 1000, windowMs: 1000 } } }, app: { trustProxy: '10.0.0.1' } });
  const send = (xff: string) => lone.app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': xff }, payload: 'grant_type=refresh_token&refresh_token=nope&client_id=nobody' });
  const codes = [(await send('198.51.100.1')).statusCode, (await send('198.51.100.2')).statusCode, (await send('198.51.100.3')).statusCode];
  t.equal(codes[2], 429, 'three different forged addresses share the peer address count');
});
