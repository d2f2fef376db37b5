import t from 'tap';
import { HTTP_BODY_MAX_BYTES } from '../../src/limits.ts';
import { bootstrapOrg, platform, testApp } from '../helpers/app.ts';

// Credentials and roles before bodies (issue 40, item 1): over every operation
// of the served OpenAPI that declares a credential, a caller without one, or
// with one of the wrong kind or role, gets the spec's 401/403 whatever its
// body (malformed JSON, a wrong media type, an oversized one): never a 400
// that names the schema's fields, never a 413 or 415.

const { app } = await testApp(t);
const org = await bootstrapOrg(app, 'Gate');
const member = (await app.inject({ method: 'POST', url: '/v1/team/members', headers: org.owner, payload: { email: 'gate-member@example.com', role: 'member' } })).json() as { user_id: string };
const narrowKey = (await app.inject({ method: 'POST', url: '/v1/api-keys', headers: org.owner, payload: { name: 'narrow', environment: 'test', scopes: ['projects:read'] } })).json() as { key: string };
const asMember = { ...platform, 'x-svc-user': member.user_id };
const bearer = (k: string) => ({ authorization: `Bearer ${k}` });

type Op = { security?: Record<string, unknown>[]; 'x-scope'?: string; 'x-error-codes'?: { status: number; code: string }[] };
const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json() as { paths: Record<string, Record<string, Op>> };

/** A path the operation answers: the organization's own id and its default project where named, else an id of nothing. */
function pathOf(template: string): string {
  return template.replace(/\{([A-Za-z_]+)\}/g, (_m, name: string) => {
    if (name === 'orgId') return org.orgId;
    if (name === 'id' && template.startsWith('/v1/projects/')) return org.projectId;
    return 'x_gate_1';
  });
}

const BODIES = [
  { name: 'malformed JSON', headers: { 'content-type': 'application/json' }, payload: '{"name": ' },
  { name: 'a wrong media type', headers: { 'content-type': 'text/plain' }, payload: 'name=x' },
  { name: 'an oversized body', headers: { 'content-type': 'application/json' }, payload: `{"name":"${'a'.repeat(HTTP_BODY_MAX_BYTES)}"}` },
] as const;

type Expect = { status: number | number[]; error?: string };
type Case = { who: string; headers: Record<string, string>; expect: Expect };

/** The callers each operation must refuse, with the spec's answer, from what the document declares. */
function casesOf(op: Op): Case[] {
  const security = op.security ?? [];
  const codes = new Set((op['x-error-codes'] ?? []).map((e) => `${e.status} ${e.code}`));
  const takesKey = security.some((s) => 'apiKey' in s);
  const takesService = security.some((s) => 'platformSecret' in s);
  const actingUser = security.some((s) => 'actingUser' in s);
  const cases: Case[] = [{ who: 'no credential', headers: {}, expect: { status: 401, error: 'unauthorized' } }];
  if (!takesKey) {
    // Part 5 items 6 and 8: a key is not read in the service subtree (401); a human-session operation says so first (403).
    cases.push({ who: 'an API key', headers: org.key, expect: codes.has('403 human_session_required') ? { status: 403, error: 'human_session_required' } : { status: 401, error: 'unauthorized' } });
  }
  if (!takesService) cases.push({ who: 'the platform secret and an owner', headers: org.owner, expect: { status: 401, error: 'unauthorized' } });
  const scope = op['x-scope'];
  if (takesKey && scope && !(scope === 'projects:read')) cases.push({ who: `a key without ${scope}`, headers: bearer(narrowKey.key), expect: { status: 403, error: 'forbidden' } });
  if (takesService && actingUser && codes.has('403 insufficient_role')) {
    cases.push({ who: 'a member below the role', headers: asMember, expect: { status: 403, error: 'insufficient_role' } });
    // Without x-svc-user: insufficient_role or 401, as the operation states (Part 5 item 6).
    cases.push({ who: 'the platform secret without x-svc-user', headers: platform, expect: { status: [401, 403] } });
  }
  if (codes.has('403 bearer_admin_role_missing')) {
    cases.push({ who: 'a key naming no acting admin', headers: org.key, expect: { status: 403, error: 'bearer_admin_role_missing' } });
    cases.push({ who: 'a key naming a member', headers: { ...org.key, 'x-svc-user': member.user_id }, expect: { status: 403, error: 'insufficient_role' } });
  }
  return cases;
}

const ops = Object.entries(doc.paths).flatMap(([path, byMethod]) => Object.entries(byMethod).map(([method, op]) => ({ path, method: method.toUpperCase(), op })));
const guarded = ops.filter((o) => (o.op.security ?? []).length > 0);

t.test('the table covers the operations that declare a credential', async (t) => {
  t.ok(guarded.length > 100, `${guarded.length} operations declare a credential`);
  t.ok(guarded.some((o) => o.method === 'POST' && o.path === '/v1/mcp-servers'), 'POST /v1/mcp-servers is one of them');
});

for (const { path, method, op } of guarded) {
  t.test(`${method} ${path}`, async (t) => {
    const url = pathOf(path);
    // Bodyless methods (GET) are not parsed; their refusal is checked with no body.
    const bodies = method === 'GET' ? [{ name: 'no body', headers: {}, payload: undefined }] : BODIES;
    for (const c of casesOf(op)) {
      for (const b of bodies) {
        const res = await app.inject({ method: method as 'POST', url, headers: { ...c.headers, ...b.headers }, ...(b.payload !== undefined ? { payload: b.payload } : {}) });
        const statuses = [c.expect.status].flat();
        const json = (() => {
          try {
            return res.json() as { error?: unknown };
          } catch {
            return undefined;
          }
        })();
        // The bare bodies of Part 5 ({error: "unauthorized"}, {error: "insufficient_role", ...}) or the envelope (human_session_required).
        const code = typeof json?.error === 'string' ? json.error : (json?.error as { code?: unknown } | undefined)?.code;
        const ok = statuses.includes(res.statusCode) && typeof code === 'string' && (c.expect.error === undefined || code === c.expect.error);
        t.ok(ok, `${c.who} with ${b.name}: ${res.statusCode} ${res.body.slice(0, 160)}`, { expected: c.expect });
        t.notMatch(res.body, /"issues"/, `${c.who} with ${b.name}: no schema issues`);
      }
    }
  });
}
