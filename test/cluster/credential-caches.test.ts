import * as oauth from 'oauth4webapi';
import t from 'tap';
import { platform } from '../helpers/app.ts';
import { call, testCluster } from '../helpers/cluster.ts';
import { clientOptions, issueTokens } from '../helpers/oauth.ts';

// Two instances on one PostgreSQL. Each instance keeps the credentials it
// resolved (OAuth grants, API keys by id, users, project roles) in caches that
// follow their projections; a change acknowledged through one instance is in
// force at the other on the very next request (each request's admission reads
// the projections' applied positions), whatever the other had cached.

const c = await testCluster(t);
const [A, B] = c.urls as [string, string];
const first = c.apps[0]!;

const made = await call(A, 'POST', '/v1/orgs', platform, { name: 'Caches', owner_email: 'owner+caches@example.com' });
const owner = { ...platform, 'x-svc-user': made.body.owner.user_id as string };
const projectId = made.body.default_project.id as string;

/** A grant of `apiKey` with all its scopes (registered and authorized through instance A): its client and first token pair. */
const grant = (apiKey: string) => issueTokens(first, apiKey);

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const read = (base: string, token: string) => call(base, 'GET', `/v1/projects/${projectId}`, bearer(token));

t.test('an access token replaced by a refresh through one instance is refused by the other on the very next request (40 trials)', async (t) => {
  const key = await call(A, 'POST', '/v1/api-keys', owner, { name: 'oauth', environment: 'test' });
  const issued = await grant(key.body.key);
  const { as, client } = issued;
  let tokens = { access_token: issued.access_token, refresh_token: issued.refresh_token };
  let refused = 0;
  let accepted = 0;
  for (let i = 0; i < 40; i++) {
    const [writer, reader] = i % 2 === 0 ? [0, B] : [1, A];
    // The reader accepts the token (and keeps the grant in its cache).
    if ((await read(reader, tokens.access_token)).status !== 200) throw new Error(`trial ${i}: the token was not accepted`);
    const writerOpts = clientOptions(c.apps[writer]!);
    const next = await oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, oauth.None(), tokens.refresh_token, writerOpts));
    const old = tokens.access_token;
    tokens = { access_token: next.access_token, refresh_token: next.refresh_token! };
    // Half the trials present the new token first, while the reader still holds the grant as it was.
    if (i % 4 < 2) {
      if ((await read(reader, tokens.access_token)).status === 200) accepted++;
      if ((await read(reader, old)).status === 401) refused++;
    } else {
      if ((await read(reader, old)).status === 401) refused++;
      if ((await read(reader, tokens.access_token)).status === 200) accepted++;
    }
  }
  t.equal(refused, 40, 'every replaced access token refused by the other instance on the next request');
  t.equal(accepted, 40, 'every new access token accepted there at once');
});

t.test("an access token whose key is revoked through one instance is refused by the other on the very next request (20 trials)", async (t) => {
  let refused = 0;
  for (let i = 0; i < 20; i++) {
    const [writer, reader] = i % 2 === 0 ? [A, B] : [B, A];
    const key = await call(writer, 'POST', '/v1/api-keys', owner, { name: `r${i}`, environment: 'test' });
    const { access_token } = await grant(key.body.key);
    if ((await read(reader, access_token)).status !== 200) throw new Error(`trial ${i}: the token was not accepted`);
    const revoked = await call(writer, 'DELETE', `/v1/api-keys/${key.body.id}`, owner);
    if (revoked.status !== 200) throw new Error(`trial ${i}: revoke answered ${revoked.status}`);
    if ((await read(reader, access_token)).status === 401) refused++;
  }
  t.equal(refused, 20, 'every token of a revoked key refused by the other instance on the next request');
});

t.test("a person's project role changed through one instance binds at the other on the very next request (40 trials)", async (t) => {
  const person = await call(A, 'POST', '/v1/team/members', owner, { email: 'lead@example.com', role: 'member' });
  t.equal(person.status, 201);
  const other = await call(A, 'POST', '/v1/team/members', owner, { email: 'other@example.com', role: 'member' });
  const acting = { ...platform, 'x-svc-user': person.body.user_id as string };
  // What the person tries at the reader, as a project admin: set another member's role (checked by the route),
  // and register a connection in the project (checked with the credential; the empty body then answers 400, nothing written).
  const attempts = [
    { name: 'set a role', allowed: 200, run: (base: string) => call(base, 'POST', `/v1/projects/${projectId}/members`, acting, { user_id: other.body.user_id, role: 'member' }) },
    { name: 'register a connection', allowed: 400, run: (base: string) => call(base, 'POST', '/v1/connections', { ...acting, 'x-svc-project': projectId }, {}) },
  ];
  let followed = 0;
  for (let i = 0; i < 40; i++) {
    const [writer, reader] = i % 2 === 0 ? [A, B] : [B, A];
    const role = i % 4 < 2 ? 'admin' : 'member';
    const set = await call(writer, 'POST', `/v1/projects/${projectId}/members`, owner, { user_id: person.body.user_id, role });
    if (set.status !== 200) throw new Error(`trial ${i}: setting the role answered ${set.status}`);
    // Each attempt goes first in half the trials, while the reader still holds the role as it was.
    const order = Math.floor(i / 4) % 2 === 0 ? attempts : [...attempts].reverse();
    let ok = true;
    for (const a of order) {
      const status = (await a.run(reader)).status;
      if (status !== (role === 'admin' ? a.allowed : 403)) {
        ok = false;
        t.fail(`trial ${i}: as ${role}, "${a.name}" answered ${status} at the other instance`);
      }
    }
    if (ok) followed++;
  }
  t.equal(followed, 40, 'each role change in force at the other instance on the next request, both ways');
});
