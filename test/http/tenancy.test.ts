import t from 'tap';
import { bootstrapOrg, testApp } from '../helpers/app.ts';

// Generated over every route that takes an id: another organization's id (and
// another project's, where a resource is project-scoped) answers exactly as an
// absent id does: same status, same body apart from request_id.

const { app } = await testApp(t);
const a = await bootstrapOrg(app, 'Alpha');
const b = await bootstrapOrg(app, 'Beta');
const aUser = (await app.inject({ method: 'POST', url: '/v1/team/members', headers: a.owner, payload: { email: 'u@alpha.example', role: 'member' } })).json().user_id;
const aKey = (await app.inject({ method: 'GET', url: '/v1/api-keys', headers: a.owner })).json().api_keys[0].id;

const aAgent = (await app.inject({ method: 'POST', url: '/v1/agents', headers: a.key, payload: { agent_id: 'buyer', principal_ref: 'person-1' } })).json();

/** A's real id for each path parameter, by the route family it appears in. */
function realIds(url: string): Record<string, string> {
  if (url.startsWith('/v1/projects')) return { id: a.projectId, user_id: aUser };
  if (url.startsWith('/v1/api-keys')) return { id: aKey };
  if (url.startsWith('/v1/orgs/:orgId/agents')) return { orgId: a.orgId, agentId: 'buyer', kid: aAgent.kid };
  if (url.startsWith('/v1/agents')) return { agentId: url.endsWith('/revoke') && !url.includes('keys') ? aAgent.agent_did : 'buyer', kid: aAgent.kid };
  throw new Error(`no tenancy fixture for ${url}: add one`);
}
const absentIds = (ids: Record<string, string>) =>
  Object.fromEntries(Object.entries(ids).map(([k, v]) => [k, v.startsWith('did:') ? `${v}-absent` : `${v.split('_')[0]}_absentAbsent0000`]));

/** A body that passes validation, so the request reaches the ownership check. */
const sampleBody: Record<string, unknown> = {
  updateProject: { name: 'Renamed by a stranger' },
  upsertProjectMember: { user_id: 'usr_whoever', role: 'member' },
  updateProjectMember: { role: 'admin' },
  registerAgentOrgScoped: { agent_id: 'newcomer', principal_ref: 'p' },
  signAsAgent: { message: 'hello' },
};

const fill = (url: string, ids: Record<string, string>) => url.replace(/:([A-Za-z_]+)/g, (_, k: string) => encodeURIComponent(ids[k]!));
const strip = (body: unknown) => {
  if (body && typeof body === 'object' && 'request_id' in body) {
    const { request_id: _r, ...rest } = body as Record<string, unknown>;
    return rest;
  }
  return body;
};

// Open routes (DID documents) are public by design.
const withIds = app.routeSpecs.filter((r) => r.url.includes(':') && r.auth !== 'open');
t.ok(withIds.length >= 8, 'the routes with ids are all covered');

for (const route of withIds) {
  t.test(`${route.method} ${route.url}`, async (t) => {
    const real = realIds(route.url);
    const headers = route.auth === 'api_key' ? b.key : b.owner;
    const payload = sampleBody[route.operationId];
    const send = (ids: Record<string, string>) => app.inject({ method: route.method, url: fill(route.url, ids), headers, ...(payload ? { payload } : {}) });
    const foreign = await send(real);
    const absent = await send(absentIds(real));
    t.equal(foreign.statusCode, absent.statusCode, 'same status as an absent id');
    t.same(strip(foreign.json()), strip(absent.json()), 'same body as an absent id');
    // 404 for another organization's resource; 403 for another organization named in an /v1/orgs/{orgId} path.
    t.ok(foreign.statusCode === (route.url.startsWith('/v1/orgs/') ? 403 : 404), `answers ${foreign.statusCode}`);
  });
}

t.test("A's resources are untouched by B's attempts", async (t) => {
  const p = await app.inject({ method: 'GET', url: `/v1/projects/${a.projectId}`, headers: a.key });
  t.equal(p.statusCode, 200);
  t.equal(p.json().name, 'Default');
  t.equal((await app.inject({ method: 'GET', url: '/v1/whoami', headers: a.key })).statusCode, 200, "A's key still works");
});
