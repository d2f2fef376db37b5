import t from 'tap';
import type { FastifyInstance } from 'fastify';
import { bootstrapOrg, secondInstance, testApp, testClock } from '../helpers/app.ts';
import { consent, pkce } from '../helpers/oauth.ts';

// The consent page's brute-force guard counts failed API key pastes per client
// address in a window, in PostgreSQL: a valid paste is never a failure (an
// office's earlier typos do not lock out the person who pastes a good key),
// failures beyond the limit answer 429, and every instance on the database
// shares the count.

const clock = testClock();
const WINDOW_MS = 15 * 60 * 1000;
const guard = { maxFailures: 3, windowMs: WINDOW_MS };
const a = await testApp(t, { now: clock.now, oauth: { rateLimit: { perAddress: { burst: 10_000, perSecond: 1_000 }, keyPaste: guard } } });
const b = await secondInstance(t, a, { app: { now: clock.now, oauth: { rateLimit: { perAddress: { burst: 10_000, perSecond: 1_000 }, keyPaste: guard } } } });
const org = await bootstrapOrg(a.app, 'Paste');
const WRONG = 'sk_test_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';

const client = (await a.app.inject({ method: 'POST', url: '/oauth/register', payload: { redirect_uris: ['https://app.example/cb'] } })).json();
const p = await pkce();
const authorize = `http://x/oauth/authorize?${new URLSearchParams({ client_id: client.client_id, redirect_uri: 'https://app.example/cb', response_type: 'code', code_challenge: p.challenge, code_challenge_method: 'S256' })}`;
/** A paste through an instance from a client address, on a fresh consent form; its status. */
const paste = async (app: FastifyInstance, ip: string, key: string) => (await consent(from(app, ip), authorize, key)).statusCode;
/** The instance as seen from a client address (each subtest its own). */
const from = (app: FastifyInstance, ip: string) =>
  new Proxy(app, {
    get(target, prop) {
      if (prop === 'inject') return (o: Record<string, unknown>) => target.inject({ ...o, remoteAddress: ip } as never);
      return Reflect.get(target, prop) as unknown;
    },
  });
let address = 0;
const nextAddress = () => `10.9.0.${++address}`;

t.test('failed pastes beyond the limit answer 429, whatever is pasted next', async (t) => {
  const ip = nextAddress();
  const got: number[] = [];
  for (let i = 0; i < 5; i++) got.push(await paste(a.app, ip, WRONG));
  t.same(got, [400, 400, 400, 429, 429]);
  t.equal(await paste(a.app, ip, org.testKey), 429, 'the guard holds against a valid key too once the limit is passed');
  t.equal(await paste(a.app, nextAddress(), org.testKey), 302, 'another address is not held');
});

t.test('a valid paste after failures below the limit succeeds, and valid pastes do not count', async (t) => {
  const ip = nextAddress();
  t.same([await paste(a.app, ip, WRONG), await paste(a.app, ip, 'not a key at all')], [400, 400], 'two typos');
  const valid: number[] = [];
  for (let i = 0; i < 6; i++) valid.push(await paste(a.app, ip, org.testKey));
  t.same(valid, [302, 302, 302, 302, 302, 302], 'a valid key gets through, as often as it is pasted');
  t.equal(await paste(a.app, ip, WRONG), 400, 'the third failure is still within the limit');
  t.equal(await paste(a.app, ip, WRONG), 429, 'the fourth is not');
  clock.advance(WINDOW_MS);
  t.equal(await paste(a.app, ip, org.testKey), 302, 'a new window starts afresh');
});

t.test('two instances on one database share the count', async (t) => {
  const ip = nextAddress();
  t.equal(await paste(a.app, ip, WRONG), 400, 'failure 1 through instance A');
  t.equal(await paste(b, ip, WRONG), 400, 'failure 2 through instance B');
  t.equal(await paste(a.app, ip, WRONG), 400, 'failure 3 through instance A');
  t.equal(await paste(b, ip, WRONG), 429, 'instance B knows of the failures through A');
  t.equal(await paste(a.app, ip, org.testKey), 429, 'and so does A');
});

t.test('concurrent wrong pastes cannot slip past the limit together', async (t) => {
  const ip = nextAddress();
  const got = await Promise.all(Array.from({ length: 8 }, (_, i) => paste(i % 2 ? b : a.app, ip, WRONG)));
  t.equal(got.filter((s) => s === 400).length, 3, 'exactly the limit is tried');
  t.equal(got.filter((s) => s === 429).length, 5);
});
