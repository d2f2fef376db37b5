import { execFileSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import type { LightMyRequestResponse } from 'fastify';
import { issueCertificate } from '../../src/adapters/providers/x509.ts';
import { bootstrapOrg, platform, testApp } from '../helpers/app.ts';

// Connections over HTTP against the sandbox providers: every refusal with
// nothing written, rotation, revoke and delete purging the vault, metadata,
// webhook secrets, candidate validation, tenancy, and a scan of every event,
// response body and log line for the secrets the test handled.

const logs: string[] = [];
const { app, ledger, sandboxProviders } = await testApp(t, { providers: true, logStream: { write: (l: string) => void logs.push(l) } });
const sb = sandboxProviders!;
const org = await bootstrapOrg(app, 'Conn');
const other = await bootstrapOrg(app, 'Other');

/** Every response body this file saw, for the secret scan. */
const bodies: string[] = [];
/** Every secret value this file handled. */
const secrets: string[] = [];
const remember = (s: unknown) => {
  if (typeof s === 'string') secrets.push(s);
  else if (s && typeof s === 'object') for (const v of Object.values(s)) if (typeof v === 'string') secrets.push(v);
  return s;
};
async function call(method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE', url: string, payload?: unknown, headers: Record<string, string> = org.key): Promise<LightMyRequestResponse> {
  const r = await app.inject({ method, url, headers, ...(payload !== undefined ? { payload: payload as object } : {}) });
  bodies.push(r.body);
  return r;
}
const create = (payload: Record<string, unknown>, headers = org.key) => {
  remember(payload.secret);
  return call('POST', '/v1/connections', payload, headers);
};
async function written() {
  const { rows } = await ledger.db.query<{ n: number }>('SELECT count(*)::int AS n FROM vault_secrets');
  return { head: await ledger.store.headPosition(), vault: rows[0]!.n };
}
async function refusedWithNothingWritten(tt: Test, r: () => Promise<LightMyRequestResponse>, status: number, code: string | null) {
  const before = await written();
  const res = await r();
  tt.equal(res.statusCode, status, `${code}: status ${status}`);
  if (code) tt.equal(typeof res.json().error === 'string' ? res.json().error : res.json().error.code, code, `${code}: code`);
  tt.same(await written(), before, `${code}: nothing written (no event, no vault row)`);
  return res;
}

t.test('every refusal of POST /v1/connections answers its status and writes nothing', async (t) => {
  const key = sb.issueCredential('acme-payments');
  await refusedWithNothingWritten(t, () => create({ server_id: 'nope', secret: 'x' }), 404, 'server_unknown');
  await refusedWithNothingWritten(t, () => create({ server_id: 'acme-payments', secret: { api_key: key } }), 400, 'invalid_secret_shape');
  await refusedWithNothingWritten(t, () => create({ server_id: 'acme-payments', secret: '' }), 400, 'invalid_secret_shape');
  await refusedWithNothingWritten(t, () => create({ server_id: 'nota-facil', secret: 'flat' }), 400, 'invalid_secret_shape');
  await refusedWithNothingWritten(t, () => create({ server_id: 'nota-facil', secret: { company_token: 'a', wrong: 'b' } }), 400, 'path_secret_keys_mismatch');
  await refusedWithNothingWritten(t, () => create({ server_id: 'kambio', secret: { client_id: 'a' } }), 400, 'keys_mismatch');
  await refusedWithNothingWritten(t, () => create({ server_id: 'ledgerly', secret: { key_id: 'k', signing_secret: 's', extra: 'x' } }), 400, 'keys_mismatch');
  await refusedWithNothingWritten(t, () => create({ server_id: 'contahub', secret: 'tok' }), 400, 'not_api_key_server');
  await refusedWithNothingWritten(t, () => create({ server_id: 'cdp-wallet', secret: 'tok' }), 400, 'not_api_key_server');
  await refusedWithNothingWritten(t, () => create({ server_id: 'clima', secret: 'tok' }), 400, 'not_api_key_server');
  await refusedWithNothingWritten(t, () => create({ server_id: 'ledgerly', secret: sb.issueCredential('ledgerly') }), 400, 'user_id_required');
  await refusedWithNothingWritten(t, () => create({ server_id: 'banco-seguro', secret: { certificate: 'not a pem', private_key: 'nope' } }), 400, 'credential_invalid');
  const stranger = issueCertificate({ commonName: 'x' });
  const mine = sb.issueCredential('banco-seguro') as Record<string, string>;
  await refusedWithNothingWritten(t, () => create({ server_id: 'banco-seguro', secret: { certificate: mine.certificate, private_key: stranger.keyPem } }), 400, 'credential_invalid');
  remember(stranger.keyPem);
  const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  await refusedWithNothingWritten(t, () => create({ server_id: 'shipfast', secret: { key_id: 'k', private_key: rsa } }), 400, 'credential_invalid');
  await refusedWithNothingWritten(t, () => create({ server_id: 'acme-payments', secret: key, display_name: 'x'.repeat(129) }), 400, 'invalid_body');
  const many = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, i]));
  await refusedWithNothingWritten(t, () => create({ server_id: 'acme-payments', secret: key, connection_metadata: many }), 400, 'invalid_body');
  await refusedWithNothingWritten(t, () => create({ server_id: 'acme-payments', secret: key, connection_metadata: { big: 'x'.repeat(33_000) } }), 400, 'invalid_body');
  await refusedWithNothingWritten(t, () => app.inject({ method: 'POST', url: '/v1/connections', headers: { ...org.key, 'content-type': 'application/json' }, payload: '{not json' }), 400, 'invalid_json');
  // Service auth: without x-svc-user 403, a member 403, an admin succeeds.
  await refusedWithNothingWritten(t, () => create({ server_id: 'acme-payments', secret: key }, platform), 403, 'insufficient_role');
  const member = (await app.inject({ method: 'POST', url: '/v1/team/members', headers: org.owner, payload: { email: 'm@conn.example', role: 'member' } })).json().user_id;
  await refusedWithNothingWritten(t, () => create({ server_id: 'acme-payments', secret: key }, { ...platform, 'x-svc-user': member }), 403, 'insufficient_role');
  // The vault cannot be written: 503, nothing persisted.
  await ledger.db.query('ALTER TABLE vault_secrets RENAME TO vault_secrets_away');
  const before = await ledger.store.headPosition();
  const down = await create({ server_id: 'acme-payments', secret: key });
  await ledger.db.query('ALTER TABLE vault_secrets_away RENAME TO vault_secrets');
  t.same([down.statusCode, down.json().error.code], [503, 'vault_unavailable']);
  t.equal(await ledger.store.headPosition(), before, 'no event after a vault failure');
  const list = (await call('GET', '/v1/connections')).json();
  t.equal(list.connections.length, 0, 'no connection exists');
});

t.test('create for every key auth type, read back without the secret, rotate in place', async (t) => {
  const made: Record<string, { id: string }> = {};
  for (const slug of ['acme-payments', 'nota-facil', 'banco-seguro', 'ledgerly', 'shipfast', 'kambio']) {
    const r = await create({ server_id: slug, secret: sb.issueCredential(slug), display_name: `${slug} main`, ...(slug === 'ledgerly' ? { user_id: 'end-user-1' } : {}) });
    t.equal(r.statusCode, 201, `${slug}: 201`);
    const c = r.json();
    t.match(c, { id: /^ca_[A-Za-z0-9]{16}$/, server_id: slug, status: 'connected', metadata: null, connection_metadata: {}, revoked_at: null });
    t.notOk('secret' in c || 'secret_ref' in c, `${slug}: no secret or reference in the response`);
    made[slug] = c;
    const v = await call('POST', `/v1/providers/${slug}/verify-connection${slug === 'ledgerly' ? '?user_id=end-user-1' : ''}`);
    t.equal(v.statusCode, 200, `${slug}: the stored credential verifies (${v.body})`);
  }
  const cert = (await call('GET', `/v1/connections/${made['banco-seguro']!.id}`)).json();
  t.match(cert.cert_metadata, { fingerprint_sha256: /^([0-9A-F]{2}:){31}[0-9A-F]{2}$/, subject: /CN=Sandbox banco-seguro account/, issuer: /Sandbox Providers Test CA/ });
  t.equal(cert.expires_at, cert.cert_metadata.valid_to);
  t.same((await call('GET', `/v1/connections/${made['acme-payments']!.id}`)).json().cert_metadata, {}, 'non-cert: {}');

  // Rotation: same server and user → 200, one connection, the new credential in use, the old vault row gone.
  const { rows: before } = await ledger.db.query<{ secret_ref: string }>('SELECT secret_ref FROM connections WHERE id = $1', [made['acme-payments']!.id]);
  const fresh = sb.issueCredential('acme-payments', 'Rotated account');
  const rot = await create({ server_id: 'acme-payments', secret: fresh, display_name: 'rotated', connection_metadata: { fiscal_company_id: 'fc_1' } });
  t.equal(rot.statusCode, 200, 'rotation answers 200');
  t.equal(rot.json().id, made['acme-payments']!.id, 'the same connection');
  t.equal(rot.json().display_name, 'rotated');
  t.same(rot.json().connection_metadata, { fiscal_company_id: 'fc_1' });
  const acme = (await call('GET', '/v1/connections?server_id=acme-payments')).json().connections;
  t.equal(acme.length, 1, 'one connection for the server and user');
  const { rows: old } = await ledger.db.query('SELECT 1 FROM vault_secrets WHERE ref = $1', [before[0]!.secret_ref]);
  t.equal(old.length, 0, 'the replaced credential left the vault');
  const v = (await call('POST', '/v1/providers/acme-payments/verify-connection')).json();
  t.equal(v.account.name, 'Rotated account', 'verify uses the rotated credential');

  // A per-user provider keeps one connection per user.
  const u2 = await create({ server_id: 'ledgerly', secret: sb.issueCredential('ledgerly'), user_id: 'end-user-2' });
  t.equal(u2.statusCode, 201, 'another user: another connection');
  const lst = (await call('GET', '/v1/connections?server_id=ledgerly')).json().connections;
  t.same(lst.map((c: { user_id: string }) => c.user_id), ['end-user-2', 'end-user-1'], 'newest first');
  t.equal((await call('GET', '/v1/connections?user_id=end-user-1')).json().connections.length, 1);
  t.equal((await call('GET', '/v1/connections?limit=2')).json().connections.length, 2);
  t.equal((await call('GET', '/v1/connections?status=bogus')).statusCode, 400);
  t.equal((await call('GET', '/v1/connections?limit=0')).statusCode, 400);

  // Service auth with an admin acting user creates in the default project.
  const svc = await create({ server_id: 'kambio', secret: sb.issueCredential('kambio'), user_id: 'svc-user' }, org.owner);
  t.equal(svc.statusCode, 201, 'an owner through service auth');
  t.equal((await call('GET', `/v1/connections/${svc.json().id}`)).statusCode, 200, 'visible to the project’s key');
});

t.test('the cert fingerprint equals what openssl prints', async (t) => {
  const cred = sb.issueCredential('banco-seguro', 'Fingerprint account') as Record<string, string>;
  const c = (await create({ server_id: 'banco-seguro', secret: cred, user_id: 'fp-user' })).json();
  let out: string;
  try {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fp-'));
    fs.writeFileSync(path.join(dir, 'c.pem'), cred.certificate!);
    out = execFileSync('openssl', ['x509', '-in', path.join(dir, 'c.pem'), '-noout', '-fingerprint', '-sha256'], { encoding: 'utf8' });
    fs.rmSync(dir, { recursive: true });
  } catch {
    t.comment('SKIPPED: the openssl CLI is not available on this machine');
    return;
  }
  t.equal(c.cert_metadata.fingerprint_sha256, out.trim().split('=')[1], 'fingerprint = openssl x509 -fingerprint -sha256');
});

t.test('revoke purges the vault rows, keeps the row, and verify then answers 424', async (t) => {
  const c = (await create({ server_id: 'banco-seguro', secret: sb.issueCredential('banco-seguro'), user_id: 'rv' })).json();
  t.equal((await call('PUT', `/v1/connections/${c.id}/webhook-secret`, {})).statusCode, 200);
  bodies.pop(); // shows the generated webhook secret once, by design
  const { rows: refs } = await ledger.db.query<{ secret_ref: string; webhook_secret_ref: string | null }>('SELECT secret_ref, webhook_secret_ref FROM connections WHERE id = $1', [c.id]);
  const r = await call('POST', `/v1/connections/${c.id}/revoke`);
  t.same(r.json(), { id: c.id, status: 'revoked' });
  const { rows } = await ledger.db.query('SELECT ref FROM vault_secrets WHERE ref = ANY($1)', [[refs[0]!.secret_ref, refs[0]!.webhook_secret_ref].filter(Boolean)]);
  t.equal(rows.length, 0, 'no vault row of the connection remains (SQL)');
  const again = await call('POST', `/v1/connections/${c.id}/revoke`);
  t.same(again.json(), { id: c.id, status: 'revoked', already: true }, 'repeat: already true');
  const read = (await call('GET', `/v1/connections/${c.id}`)).json();
  t.match(read, { status: 'revoked', revoked_at: /Z$/ }, 'the row is kept for audit');
  t.equal(refs[0]!.webhook_secret_ref !== null, true, 'it had a webhook secret too');
  const v = await call('POST', '/v1/providers/banco-seguro/verify-connection?user_id=rv');
  t.same([v.statusCode, v.json().error], [424, 'not_connected']);
  t.equal((await call('PATCH', `/v1/connections/${c.id}/metadata`, { connection_metadata: { a: 1 } })).json().error.code, 'metadata_update_failed');
  t.equal((await call('PATCH', `/v1/connections/${c.id}/metadata`, { connection_metadata: { a: 1 } })).statusCode, 409);
  // A new POST after revoke creates a new connection.
  const n = await create({ server_id: 'banco-seguro', secret: sb.issueCredential('banco-seguro'), user_id: 'rv' });
  t.equal(n.statusCode, 201);
  t.not(n.json().id, c.id);
});

t.test('delete removes the row and every vault row; the events stay', async (t) => {
  const c = (await create({ server_id: 'kambio', secret: sb.issueCredential('kambio'), user_id: 'del' })).json();
  const { rows: refs } = await ledger.db.query<{ secret_ref: string }>('SELECT secret_ref FROM connections WHERE id = $1', [c.id]);
  const d = await call('DELETE', `/v1/connections/${c.id}`);
  t.same(d.json(), { id: c.id, deleted: true });
  const { rows } = await ledger.db.query('SELECT 1 FROM vault_secrets WHERE ref = $1', [refs[0]!.secret_ref]);
  t.equal(rows.length, 0, 'no vault row');
  t.equal((await call('GET', `/v1/connections/${c.id}`)).statusCode, 404);
  t.equal((await call('DELETE', `/v1/connections/${c.id}`)).statusCode, 404);
  const events = await ledger.store.readStream(`connection-${c.id}`);
  t.same(events.map((e) => e.type), ['connection.created', 'connection.deleted'], 'the log keeps the history');
});

t.test('metadata: merge, refusals', async (t) => {
  const c = (await create({ server_id: 'shipfast', secret: sb.issueCredential('shipfast'), user_id: 'md', connection_metadata: { a: 1, b: 2 } })).json();
  const ok = await call('PATCH', `/v1/connections/${c.id}/metadata`, { connection_metadata: { b: null, c: 'x' } });
  t.equal(ok.statusCode, 200);
  t.same(ok.json().connection_metadata, { a: 1, c: 'x' });
  await refusedWithNothingWritten(t, () => call('PATCH', `/v1/connections/${c.id}/metadata`, { connection_metadata: { a: 2 }, status: 'revoked' }), 400, 'fields_not_user_editable');
  await refusedWithNothingWritten(t, () => call('PATCH', `/v1/connections/${c.id}/metadata`, {}), 400, 'no_user_fields');
  await refusedWithNothingWritten(t, () => call('PATCH', `/v1/connections/${c.id}/metadata`, { connection_metadata: Object.fromEntries(Array.from({ length: 70 }, (_, i) => [`k${i}`, i])) }), 400, 'invalid_body');
  await refusedWithNothingWritten(t, () => call('PATCH', `/v1/connections/${c.id}/metadata`, { connection_metadata: 'x' }), 400, 'invalid_body');
  const same = await call('PATCH', `/v1/connections/${c.id}/metadata`, { connection_metadata: { a: 1 } });
  t.equal(same.statusCode, 200, 'no change: 200, nothing appended');
});

t.test('webhook secret: generated once, set, refused for providers without inbound webhooks', async (t) => {
  const c = (await create({ server_id: 'acme-payments', secret: sb.issueCredential('acme-payments'), user_id: 'wh' })).json();
  const g = await call('PUT', `/v1/connections/${c.id}/webhook-secret`);
  t.equal(g.statusCode, 200);
  t.match(g.json(), { id: c.id, server_id: 'acme-payments', scheme: 'standard_webhooks', webhook_url: `http://127.0.0.1:8080/v1/webhooks/acme-payments/${c.id}`, secret: /^whsec_/ });
  remember(g.json().secret);
  bodies.pop(); // the one response that shows a generated secret, once, by design
  const given = 'whsec_' + Buffer.alloc(32, 7).toString('base64');
  remember(given);
  const s = await call('PUT', `/v1/connections/${c.id}/webhook-secret`, { secret: given });
  t.equal(s.json().secret, undefined, 'a supplied secret is not echoed');
  const k = (await create({ server_id: 'kambio', secret: sb.issueCredential('kambio'), user_id: 'wh' })).json();
  await refusedWithNothingWritten(t, () => call('PUT', `/v1/connections/${k.id}/webhook-secret`, {}), 400, 'provider_has_no_inbound_webhooks');
  await refusedWithNothingWritten(t, () => call('PUT', `/v1/connections/${c.id}/webhook-secret`, { secret: 'plain' }), 400, 'invalid_body');
});

t.test('hmac-validate and jwt-validate test a candidate credential and write nothing', async (t) => {
  const h = remember(sb.issueCredential('ledgerly'));
  await refusedWithNothingWritten(t, () => call('POST', '/v1/connections/hmac-validate', { server_id: 'ledgerly', secret: h }), 200, null);
  const bad = await refusedWithNothingWritten(t, () => call('POST', '/v1/connections/hmac-validate', { server_id: 'ledgerly', secret: { ...(h as object), signing_secret: 'wrong' } }), 401, 'credential_rejected');
  t.match(bad.json(), { ok: false, detail: 'signature mismatch' }, 'the provider’s words');
  const j = remember(sb.issueCredential('shipfast'));
  const ok = await refusedWithNothingWritten(t, () => call('POST', '/v1/connections/jwt-validate', { server_id: 'shipfast', secret: j }), 200, null);
  t.match(ok.json(), { ok: true, provider: 'shipfast', account: { id: /^acct_/ } });
  const otherKey = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const rej = await refusedWithNothingWritten(t, () => call('POST', '/v1/connections/jwt-validate', { server_id: 'shipfast', secret: { ...(j as object), private_key: otherKey } }), 401, 'credential_rejected');
  t.match(rej.json(), { detail: 'bad signature' });
  await refusedWithNothingWritten(t, () => call('POST', '/v1/connections/jwt-validate', { server_id: 'ledgerly', secret: h }), 400, 'auth_type_mismatch');
  await refusedWithNothingWritten(t, () => call('POST', '/v1/connections/hmac-validate', { server_id: 'ledgerly', secret: { key_id: 'x' } }), 400, 'keys_mismatch');
  await refusedWithNothingWritten(t, () => call('POST', '/v1/connections/hmac-validate', { server_id: 'nope', secret: 'x' }), 404, 'server_unknown');
});

t.test('tenancy: another organization’s or project’s connection answers exactly like an absent one', async (t) => {
  const mine = (await create({ server_id: 'acme-payments', secret: sb.issueCredential('acme-payments'), user_id: 'tenancy' })).json();
  const prj = (await app.inject({ method: 'POST', url: '/v1/projects', headers: org.key, payload: { name: 'Second', slug: 'second' } })).json();
  const sibling = { ...org.key, 'x-svc-project': prj.id };
  const strip = (r: LightMyRequestResponse) => {
    const b = r.json();
    delete b.request_id;
    return [r.statusCode, b];
  };
  const routes: [('GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE'), string, unknown][] = [
    ['GET', '/v1/connections/:id', undefined],
    ['POST', '/v1/connections/:id/revoke', undefined],
    ['PATCH', '/v1/connections/:id/metadata', { connection_metadata: { a: 1 } }],
    ['PUT', '/v1/connections/:id/webhook-secret', {}],
    ['DELETE', '/v1/connections/:id', undefined],
  ];
  for (const [method, url, payload] of routes) {
    const absent = strip(await call(method, url.replace(':id', 'ca_doesNotExist0000'), payload, other.key));
    for (const [who, headers] of [['another organization', other.key], ['another project', sibling]] as const) {
      const before = await written();
      const res = strip(await call(method, url.replace(':id', mine.id), payload, headers));
      t.same(res, absent, `${method} ${url} from ${who}: same as absent`);
      t.same(await written(), before, `${method} ${url} from ${who}: nothing written`);
    }
    t.equal(absent[0], 404);
  }
  t.equal((await call('GET', '/v1/connections', undefined, other.key)).json().connections.length, 0, 'the list is per tenant');
  t.equal((await call('GET', '/v1/connections', undefined, sibling)).json().connections.length, 0, 'and per project');
  const v = await call('POST', '/v1/providers/acme-payments/verify-connection?user_id=tenancy', undefined, other.key);
  t.equal(v.statusCode, 424, 'another organization has no connection to verify');
  t.equal((await call('GET', `/v1/connections/${mine.id}`)).json().status, 'connected', 'untouched');
});

t.test("a project-level role override decides who may write that project's connections", async (t) => {
  const p2 = (await call('POST', '/v1/projects', { name: 'Roles', slug: 'roles' })).json();
  const raised = (await app.inject({ method: 'POST', url: '/v1/team/members', headers: org.owner, payload: { email: 'raised@conn.example', role: 'member' } })).json().user_id;
  const narrowed = (await app.inject({ method: 'POST', url: '/v1/team/members', headers: org.owner, payload: { email: 'narrowed@conn.example', role: 'admin' } })).json().user_id;
  for (const [user, role] of [[raised, 'admin'], [narrowed, 'member']]) {
    const r = await app.inject({ method: 'POST', url: `/v1/projects/${p2.id}/members`, headers: org.owner, payload: { user_id: user, role } });
    t.ok(r.statusCode < 300, `override ${role}: ${r.statusCode}`);
  }
  const as = (user: string, project?: string) => ({ ...platform, 'x-svc-user': user, ...(project ? { 'x-svc-project': project } : {}) });
  const made = await create({ server_id: 'acme-payments', secret: sb.issueCredential('acme-payments') }, as(raised, p2.id));
  t.equal(made.statusCode, 201, 'a member raised to admin in the project writes there');
  await refusedWithNothingWritten(t, () => create({ server_id: 'acme-payments', secret: sb.issueCredential('acme-payments') }, as(raised)), 403, 'insufficient_role');
  await refusedWithNothingWritten(t, () => create({ server_id: 'acme-payments', secret: sb.issueCredential('acme-payments') }, as(narrowed, p2.id)), 403, 'insufficient_role');
  const elsewhere = await create({ server_id: 'nota-facil', secret: sb.issueCredential('nota-facil') }, as(narrowed));
  t.ok([200, 201].includes(elsewhere.statusCode), 'the narrowed admin is still admin in the default project (creates or rotates there)');
});

t.test('no secret in any event, response body or log line', async (t) => {
  await ledger.settle();
  const events = await ledger.store.readAll({ maxCount: 100_000 });
  const texts = [...events.map((e) => JSON.stringify({ data: e.data, metadata: e.metadata })), ...bodies, ...logs];
  const { rows } = await ledger.db.query<{ t: string }>('SELECT row_to_json(c)::text AS t FROM connections c');
  texts.push(...rows.map((r) => r.t));
  t.ok(events.length > 50 && bodies.length > 50 && logs.length > 50, `scanned ${events.length} events, ${bodies.length} bodies, ${logs.length} log lines, ${rows.length} rows`);
  // A secret is scanned in whole and, for PEM keys, by each base64 line of its body.
  const needles = new Set<string>();
  for (const s of secrets) {
    if (s.includes('PRIVATE KEY')) for (const line of s.split('\n')) if (line.length >= 40 && !line.startsWith('-----')) needles.add(line);
    if (s.includes('BEGIN CERTIFICATE')) continue; // certificates are public
    if (s.length >= 8 && !s.includes('\n')) needles.add(s);
  }
  t.ok(needles.size > 20, `${needles.size} secret needles`);
  const found = [...needles].filter((n) => texts.some((x) => x.includes(n)));
  t.same(found, [], 'no secret appears anywhere');
});
