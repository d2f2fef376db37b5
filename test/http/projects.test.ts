import t from 'tap';
import { bootstrapOrg, platform, testApp } from '../helpers/app.ts';

const { app, ledger } = await testApp(t);
const acme = await bootstrapOrg(app, 'Acme');

t.test('bootstrap shapes and whoami', async (t) => {
  const res = await app.inject({ method: 'POST', url: '/v1/orgs', headers: platform, payload: { name: 'Shape', owner_email: 'Ana@Example.com', owner_display_name: 'Ana' } });
  t.equal(res.statusCode, 201);
  const b = res.json();
  t.match(b, { org: { id: /^org_[A-Za-z0-9]{16}$/, name: 'Shape', created_at: /Z$/ }, owner: { user_id: /^usr_/, email: 'ana@example.com', role: 'owner' } });
  t.match(b.default_project, { id: /^prj_[A-Za-z0-9]{16}$/, org_id: b.org.id, slug: 'default', is_default: true, environment: 'test' });
  const who = await app.inject({ method: 'GET', url: '/v1/whoami', headers: acme.key });
  const w = who.json();
  // Our ids, and beside them the objects the product's CLI reads (issue 58).
  t.same(w, {
    org_id: acme.orgId,
    project_id: acme.projectId,
    api_key_id: w.api_key_id,
    environment: 'test',
    scopes: ['*'],
    user: { id: acme.ownerId, email: w.user.email, name: null, role: 'owner' },
    organization: { id: acme.orgId, name: 'Acme' },
    project: { id: acme.projectId, name: 'Default', slug: 'default' },
    key: { id: w.api_key_id, name: w.key.name, environment: 'test', scopes: ['*'] },
  });
  const member = await app.inject({ method: 'POST', url: '/v1/team/members', headers: acme.owner, payload: { email: 'm@example.com', role: 'member' } });
  t.equal(member.statusCode, 201);
  t.match(member.json(), { user_id: /^usr_/, email: 'm@example.com', role: 'member' });
  const dup = await app.inject({ method: 'POST', url: '/v1/team/members', headers: acme.owner, payload: { email: 'M@example.com', role: 'admin' } });
  t.equal(dup.statusCode, 409);
  t.equal(dup.json().error.code, 'user_exists');
  const asMember = await app.inject({ method: 'POST', url: '/v1/api-keys', headers: { ...platform, 'x-svc-user': member.json().user_id }, payload: { name: 'x', environment: 'test' } });
  t.equal(asMember.statusCode, 403);
  t.same(asMember.json(), { error: 'insufficient_role', required: 'admin' });
  const keys = await app.inject({ method: 'GET', url: '/v1/api-keys', headers: acme.owner });
  t.equal(keys.json().api_keys.length, 2);
  t.notOk(keys.body.includes(acme.testKey), 'keys are never listed');
});

t.test('projects: create, read, list in both forms, slug rules', async (t) => {
  const c = await app.inject({ method: 'POST', url: '/v1/projects', headers: acme.key, payload: { name: 'Shop', slug: 'shop' } });
  t.equal(c.statusCode, 201);
  t.match(c.json(), { id: /^prj_/, org_id: acme.orgId, name: 'Shop', slug: 'shop', is_default: false, environment: 'test' });
  const got = await app.inject({ method: 'GET', url: `/v1/projects/${c.json().id}`, headers: acme.key });
  t.same(got.json(), c.json(), 'read your write, same shape');
  for (const [slug, code] of [['Bad Slug', 'slug_invalid'], ['x'.repeat(65), 'slug_invalid'], ['default', 'slug_reserved'], ['shop', 'slug_conflict']] as const) {
    const r = await app.inject({ method: 'POST', url: '/v1/projects', headers: acme.key, payload: { name: 'X', slug } });
    t.equal(r.statusCode, 400, code);
    t.equal(r.json().error.code, code);
    t.equal(r.json().request_id, r.headers['x-request-id']);
  }
  const list = await app.inject({ method: 'GET', url: '/v1/projects?limit=1&offset=1', headers: acme.key });
  // Default, the live project the organization's first live key opened (test and live are two worlds), Shop.
  t.match(list.json(), { total: 3, limit: 1, offset: 1 });
  t.same(list.json().projects, list.json().data);
  t.equal(list.json().projects.length, 1);
  const defaults = await app.inject({ method: 'GET', url: '/v1/projects?is_default=true', headers: acme.key });
  t.same(defaults.json().projects.map((p: { id: string }) => p.id), [acme.projectId]);
  const bad = await app.inject({ method: 'GET', url: '/v1/projects?limit=101', headers: acme.key });
  t.equal(bad.statusCode, 400);
  t.equal(bad.json().error.code, 'invalid_query');
  t.ok(Array.isArray(bad.json().error.details.issues));
});

t.test('promotion demotes the previous default atomically; delete guards and cascade', async (t) => {
  const p = (await app.inject({ method: 'POST', url: '/v1/projects', headers: acme.key, payload: { name: 'Next', slug: 'next' } })).json();
  const promoted = await app.inject({ method: 'PATCH', url: `/v1/projects/${p.id}`, headers: acme.key, payload: { is_default: true } });
  t.equal(promoted.statusCode, 200);
  t.equal(promoted.json().is_default, true);
  const all = (await app.inject({ method: 'GET', url: '/v1/projects', headers: acme.key })).json().projects as { id: string; is_default: boolean }[];
  t.same(all.filter((x) => x.is_default).map((x) => x.id), [p.id], 'exactly one default');
  const delDefault = await app.inject({ method: 'DELETE', url: `/v1/projects/${p.id}`, headers: acme.key });
  t.equal(delDefault.statusCode, 409);
  t.equal(delDefault.json().error.code, 'cannot_delete_default');
  // A key bound to the old default project dies with it.
  const bound = (await app.inject({ method: 'POST', url: '/v1/api-keys', headers: acme.owner, payload: { name: 'bound', environment: 'test', project_id: acme.projectId } })).json();
  t.equal((await app.inject({ method: 'GET', url: '/v1/whoami', headers: { authorization: `Bearer ${bound.key}` } })).statusCode, 200);
  const other = await app.inject({ method: 'GET', url: '/v1/whoami', headers: { authorization: `Bearer ${bound.key}`, 'x-svc-project': p.id } });
  t.equal(other.statusCode, 403);
  t.match(other.json(), { error: 'forbidden', status: 403 });
  const del = await app.inject({ method: 'DELETE', url: `/v1/projects/${acme.projectId}`, headers: acme.key });
  t.same(del.json(), { id: acme.projectId, deleted: true });
  t.same((await app.inject({ method: 'GET', url: '/v1/whoami', headers: { authorization: `Bearer ${bound.key}` } })).json(), { error: 'unauthorized' }, 'the bound key was revoked');
  t.equal((await app.inject({ method: 'GET', url: `/v1/projects/${acme.projectId}`, headers: acme.key })).statusCode, 404);
});

t.test("deleting a project deletes its webhook endpoints", async (t) => {
  const p = (await app.inject({ method: 'POST', url: '/v1/projects', headers: acme.key, payload: { name: 'Hooked', slug: 'hooked' } })).json();
  const inP = { ...acme.key, 'x-svc-project': p.id };
  const hook = (await app.inject({ method: 'POST', url: '/v1/webhook-endpoints', headers: inP, payload: { event: 'consumer.created', name: 'h', webhook_url: 'https://hooks.example.com/x' } })).json();
  t.equal((await app.inject({ method: 'DELETE', url: `/v1/projects/${p.id}`, headers: acme.key })).statusCode, 200);
  const types = (await ledger.store.readStream(`webhook_endpoint-${hook.id}`)).map((e) => e.type);
  t.same(types, ['webhook_endpoint.created', 'webhook_endpoint.deleted']);
});

t.test('a project holding consumer records cannot be deleted', async (t) => {
  const p = (await app.inject({ method: 'POST', url: '/v1/projects', headers: acme.key, payload: { name: 'Held', slug: 'held' } })).json();
  await app.inject({ method: 'POST', url: '/v1/consumers', headers: { ...acme.key, 'x-svc-project': p.id }, payload: {} });
  const del = await app.inject({ method: 'DELETE', url: `/v1/projects/${p.id}`, headers: acme.key });
  t.same([del.statusCode, del.json().error.code], [409, 'cannot_delete_with_consumer_records']);
});

t.test('members: effective roles, overrides, gates', async (t) => {
  const org = await bootstrapOrg(app, 'Members');
  const admin = (await app.inject({ method: 'POST', url: '/v1/team/members', headers: org.owner, payload: { email: 'a@example.com', role: 'admin' } })).json();
  const member = (await app.inject({ method: 'POST', url: '/v1/team/members', headers: org.owner, payload: { email: 'b@example.com', role: 'member' } })).json();
  const url = `/v1/projects/${org.projectId}/members`;
  const set = await app.inject({ method: 'POST', url, headers: org.owner, payload: { user_id: member.user_id, role: 'admin' } });
  t.equal(set.statusCode, 200);
  const list = (await app.inject({ method: 'GET', url, headers: org.owner })).json().members as { user_id: string; role: string; source: string }[];
  t.same(list.map((m) => [m.role, m.source]), [['owner', 'org'], ['admin', 'org'], ['admin', 'project']]);
  t.equal(list[2]!.user_id, member.user_id);
  t.equal((await app.inject({ method: 'POST', url, headers: org.owner, payload: { user_id: org.ownerId, role: 'member' } })).json().error.code, 'cannot_override_owner');
  t.equal((await app.inject({ method: 'POST', url, headers: org.owner, payload: { user_id: 'usr_nobody', role: 'member' } })).json().error.code, 'user_not_in_org');
  t.equal((await app.inject({ method: 'PATCH', url: `${url}/${admin.user_id}`, headers: org.owner, payload: { role: 'member' } })).statusCode, 404, 'no override row');
  const patched = await app.inject({ method: 'PATCH', url: `${url}/${member.user_id}`, headers: org.owner, payload: { role: 'member' } });
  t.equal(patched.statusCode, 200, 'an override row changes');
  t.match(patched.json(), { user_id: member.user_id, role: 'member' });
  t.same((await app.inject({ method: 'GET', url, headers: org.key })).json(), { error: 'unauthorized' }, 'an API key is not read here');
  t.same((await app.inject({ method: 'GET', url, headers: platform })).json(), { error: 'unauthorized' }, 'no acting user');
  t.equal((await app.inject({ method: 'DELETE', url: `${url}/${member.user_id}`, headers: org.owner })).statusCode, 204);
  t.equal((await app.inject({ method: 'DELETE', url: `${url}/${member.user_id}`, headers: org.owner })).statusCode, 204, 'even when no override exists');
  t.equal((await app.inject({ method: 'GET', url: `/v1/projects/${acme.projectId}/members`, headers: org.owner })).statusCode, 404, "another organization's project");
});

t.test('Idempotency-Key: the same request replays, another body is refused, keys are per organization', async (t) => {
  const headers = { ...acme.key, 'idempotency-key': 'create-ledger-1' };
  const first = await app.inject({ method: 'POST', url: '/v1/projects', headers, payload: { name: 'Ledger', slug: 'ledger' } });
  t.equal(first.statusCode, 201);
  const again = await app.inject({ method: 'POST', url: '/v1/projects', headers, payload: { slug: 'ledger', name: 'Ledger' } });
  t.equal(again.statusCode, 201);
  t.same(again.json(), first.json(), 'the first response, not a second project');
  t.equal(again.headers['idempotent-replayed'], 'true');
  const reused = await app.inject({ method: 'POST', url: '/v1/projects', headers, payload: { name: 'Other', slug: 'other' } });
  t.equal(reused.statusCode, 409);
  t.equal(reused.json().error.code, 'idempotency_key_reused');
  const list = (await app.inject({ method: 'GET', url: '/v1/projects', headers: acme.key })).json().projects as { slug: string }[];
  t.equal(list.filter((p) => p.slug === 'ledger').length, 1);
  // A decided refusal is remembered too.
  const h2 = { ...acme.key, 'idempotency-key': 'bad-slug' };
  const r1 = await app.inject({ method: 'POST', url: '/v1/projects', headers: h2, payload: { name: 'X', slug: 'default' } });
  const r2 = await app.inject({ method: 'POST', url: '/v1/projects', headers: h2, payload: { name: 'X', slug: 'default' } });
  t.same([r1.statusCode, r2.statusCode], [400, 400]);
  t.same(r2.json().error, r1.json().error);
  t.equal(r2.headers['idempotent-replayed'], 'true');
  t.equal(r2.json().request_id, r2.headers['x-request-id'], "a replayed error's request_id is this request's, as its header says");
  t.not(r2.json().request_id, r1.json().request_id);
  // Another organization may use the same key.
  const other = await bootstrapOrg(app, 'Other');
  const o = await app.inject({ method: 'POST', url: '/v1/projects', headers: { ...other.key, 'idempotency-key': 'create-ledger-1' }, payload: { name: 'Ledger', slug: 'ledger' } });
  t.equal(o.statusCode, 201);
  t.not(o.json().id, first.json().id);
  const malformed = await app.inject({ method: 'POST', url: '/v1/projects', headers: { ...acme.key, 'idempotency-key': 'x'.repeat(256) }, payload: { name: 'Y', slug: 'y' } });
  t.equal(malformed.json().error.code, 'invalid_idempotency_key');
});

t.test('envelope: request ids, unknown routes, bad bodies', async (t) => {
  const echoed = await app.inject({ method: 'GET', url: '/v1/nope', headers: { 'x-request-id': 'abc-123' } });
  t.equal(echoed.statusCode, 404);
  t.equal(echoed.headers['x-request-id'], 'abc-123');
  t.same(echoed.json(), { error: { code: 'not_found', message: 'no route for GET /v1/nope' }, request_id: 'abc-123' });
  const minted = await app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'bad id with spaces' } });
  t.match(minted.headers['x-request-id'], /^req_[0-9a-f]{32}$/);
  const notJson = await app.inject({ method: 'POST', url: '/v1/projects', headers: { ...acme.key, 'content-type': 'application/json' }, payload: '{"name":' });
  t.equal(notJson.statusCode, 400);
  t.equal(notJson.json().error.code, 'invalid_json');
  const text = await app.inject({ method: 'POST', url: '/v1/projects', headers: { ...acme.key, 'content-type': 'text/plain' }, payload: 'hi' });
  t.equal(text.statusCode, 415);
  t.equal(text.json().error.code, 'unsupported_media_type');
  const big = await app.inject({ method: 'POST', url: '/v1/projects', headers: { ...acme.key, 'content-type': 'application/json' }, payload: JSON.stringify({ name: 'x'.repeat(1_100_000), slug: 'big' }) });
  t.equal(big.statusCode, 413);
  t.equal(big.json().error.code, 'payload_too_large');
  const missing = await app.inject({ method: 'POST', url: '/v1/projects', headers: acme.key });
  t.equal(missing.json().error.code, 'invalid_body');
  const wrong = await app.inject({ method: 'POST', url: '/v1/projects', headers: acme.key, payload: { name: 5 } });
  t.equal(wrong.statusCode, 400);
  t.ok(wrong.json().error.details.issues.length >= 2);
  void ledger;
});

t.test('a key bound to one project manages that project only (403 forbidden elsewhere, nothing written)', async (t) => {
  const org = await bootstrapOrg(app, 'Bound');
  const mine = (await app.inject({ method: 'POST', url: '/v1/projects', headers: org.key, payload: { name: 'Mine', slug: 'mine' } })).json();
  const theirs = (await app.inject({ method: 'POST', url: '/v1/projects', headers: org.key, payload: { name: 'Theirs', slug: 'theirs' } })).json();
  const key = (await app.inject({ method: 'POST', url: '/v1/api-keys', headers: org.owner, payload: { name: 'bound', environment: 'test', project_id: mine.id } })).json().key;
  const bound = { authorization: `Bearer ${key}` };
  const head = await ledger.store.headPosition();
  for (const [method, url, payload] of [
    ['PATCH', `/v1/projects/${theirs.id}`, { name: 'hijack' }],
    ['PATCH', `/v1/projects/${theirs.id}`, { is_default: true }],
    ['DELETE', `/v1/projects/${theirs.id}`, undefined],
    ['POST', '/v1/projects', { name: 'New', slug: 'new-one' }],
  ] as const) {
    const r = await app.inject({ method, url, headers: bound, ...(payload ? { payload } : {}) });
    t.equal(r.statusCode, 403, `${method} ${url}`);
    t.same(r.json(), { error: 'forbidden', message: 'this API key is bound to another project', status: 403 });
  }
  t.equal(await ledger.store.headPosition(), head, 'nothing written');
  const still = await app.inject({ method: 'GET', url: `/v1/projects/${theirs.id}`, headers: org.key });
  t.match(still.json(), { name: 'Theirs', is_default: false });
  const own = await app.inject({ method: 'PATCH', url: `/v1/projects/${mine.id}`, headers: bound, payload: { name: 'Mine, renamed' } });
  t.equal(own.statusCode, 200, 'its own project it manages');
  t.equal(own.json().name, 'Mine, renamed');
});
