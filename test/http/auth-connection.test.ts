import { Agent, request } from 'node:http';
import t from 'tap';
import * as oauth from 'oauth4webapi';
import { bootstrapOrg, testApp, testClock } from '../helpers/app.ts';
import { clientOptions, issueTokens } from '../helpers/oauth.ts';

// An API key's authentication is reused for the next request on the same
// keep-alive connection with the same headers, while the organization
// projection (keys, projects) stands still. Over real HTTP on one socket:
// a revocation binds the very next request, another credential or another
// project header is authenticated on its own, and a scope the key lacks is
// refused even after the key passed another route on that connection. An
// OAuth access token is kept the same way, until it expires or its grant moves.

const clock = testClock();
const { app } = await testApp(t, { now: clock.now });
const org = await bootstrapOrg(app, 'OneSocket');
const base = await app.listen({ host: '127.0.0.1', port: 0 });
const agent = new Agent({ keepAlive: true, maxSockets: 1 });
t.teardown(() => agent.destroy());

type Answer = { status: number; body: Record<string, unknown>; reused: boolean };
function call(method: string, path: string, headers: Record<string, string>, payload?: unknown): Promise<Answer> {
  const url = new URL(path, base);
  const data = payload === undefined ? undefined : JSON.stringify(payload);
  return new Promise((resolve, reject) => {
    const req = request(url, { method, agent, headers: { ...headers, ...(data ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(data)) } : {}) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : {}, reused: req.reusedSocket }));
    });
    req.on('error', reject);
    req.end(data);
  });
}
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
const newKey = async (payload: Record<string, unknown>) => {
  const r = await app.inject({ method: 'POST', url: '/v1/api-keys', headers: org.owner, payload: { name: 'k', environment: 'test', ...payload } });
  if (r.statusCode !== 201) throw new Error(r.body);
  return r.json() as { id: string; key: string };
};
const project = `/v1/projects/${org.projectId}`;

t.test('a revocation binds the next request on the same connection', async (t) => {
  const k = await newKey({});
  t.equal((await call('GET', project, bearer(k.key))).status, 200);
  const again = await call('GET', project, bearer(k.key));
  t.same([again.status, again.reused], [200, true], 'answered on the same connection');
  t.equal((await app.inject({ method: 'DELETE', url: `/v1/api-keys/${k.id}`, headers: org.owner })).statusCode, 200);
  const after = await call('GET', project, bearer(k.key));
  t.same([after.status, after.reused], [401, true], 'refused on the same connection');
});

t.test('another credential on the same connection is authenticated on its own', async (t) => {
  const other = await bootstrapOrg(app, 'OtherSocket');
  t.equal((await call('GET', project, bearer(org.testKey))).status, 200);
  const foreign = await call('GET', project, bearer(other.testKey));
  t.same([foreign.status, foreign.reused], [404, true], "another organization's key does not see this project");
  const wrong = await call('GET', project, bearer(`${org.testKey.slice(0, -1)}${org.testKey.endsWith('a') ? 'b' : 'a'}`));
  t.same([wrong.status, wrong.reused], [401, true], 'a key one character off is refused');
  t.equal((await call('GET', project, bearer(org.testKey))).status, 200);
});

t.test('the project header is resolved anew when it changes', async (t) => {
  t.equal((await call('GET', project, { ...bearer(org.testKey), 'x-svc-project': org.projectId })).status, 200);
  const bad = await call('GET', project, { ...bearer(org.testKey), 'x-svc-project': 'prj_notaproject00000' });
  t.same([bad.status, bad.reused, bad.body.error], [403, true, 'forbidden']);
});

t.test('a scope the key lacks is refused after the key passed another route on the connection', async (t) => {
  const reader = await newKey({ scopes: ['projects:read'] });
  t.equal((await call('GET', project, bearer(reader.key))).status, 200);
  const write = await call('PATCH', project, bearer(reader.key), { name: 'renamed' });
  t.same([write.status, write.reused, write.body.error], [403, true, 'forbidden']);
  t.equal((await call('GET', project, bearer(reader.key))).status, 200, 'and still reads');
});

t.test('an access token is kept on its connection until a refresh replaces it or it expires', async (t) => {
  const issued = await issueTokens(app, org.testKey);
  const first = await call('GET', project, bearer(issued.access_token));
  const again = await call('GET', project, bearer(issued.access_token));
  t.same([first.status, again.status, again.reused], [200, 200, true], 'accepted twice on one connection');
  const next = await oauth.processRefreshTokenResponse(issued.as, issued.client, await oauth.refreshTokenGrantRequest(issued.as, issued.client, oauth.None(), issued.refresh_token, clientOptions(app)));
  const replaced = await call('GET', project, bearer(issued.access_token));
  t.same([replaced.status, replaced.reused], [401, true], 'the replaced token refused on the same connection');
  t.equal((await call('GET', project, bearer(next.access_token))).status, 200, 'the new one accepted');
  t.equal((await call('GET', project, bearer(next.access_token))).status, 200, 'and kept');
  clock.advance((next.expires_in ?? 0) * 1000 + 1000);
  const expired = await call('GET', project, bearer(next.access_token));
  t.same([expired.status, expired.reused], [401, true], 'refused on the same connection once expired');
});
