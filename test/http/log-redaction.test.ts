import { spawn } from 'node:child_process';
import path from 'node:path';
import type { LightMyRequestResponse } from 'fastify';
import t from 'tap';
import { REDACTED, redactText, redactUrl } from '../../src/redact.ts';
import { bootstrapOrg, SERVICE_SECRET, testApp } from '../helpers/app.ts';
import { confirmConsent, pkce, readConsentPage } from '../helpers/oauth.ts';
import { nodeArgs } from '../helpers/entry.ts';

// Capabilities and personal data never reach a log line. One HTTP slice
// crosses every family's secrets with the log captured at its most verbose
// (trace): API keys and the platform secret, OAuth state, codes and tokens,
// connect-link tokens and the provider's authorization code, provider
// credentials, webhook secrets, CPF identifiers, a Pix key in a path, the
// live-view capability. Then the log is searched for each value that crossed
// the wire; the request lines are still there, with the marker in place.

const lines: string[] = [];
const { app, sandboxProviders } = await testApp(t, { providers: true, logStream: { write: (l) => void lines.push(l) } });
const sb = sandboxProviders!;
const crossed = new Map<string, string>(); // what → value
const keep = (what: string, v: unknown) => {
  if (typeof v !== 'string' || v.length < 6) throw new Error(`${what}: no value (${String(v)})`);
  crossed.set(what, v);
  return v;
};
const org = await bootstrapOrg(app, 'Logs');
keep('platform secret', SERVICE_SECRET);
keep('test API key', org.testKey);
keep('live API key', org.liveKey);
const CPF = '52998224725';
keep('CPF', CPF);
const must = async (what: string, p: Promise<LightMyRequestResponse>, status: number) => {
  const r = await p;
  if (r.statusCode !== status) throw new Error(`${what}: ${r.statusCode} ${r.body}`);
  return r;
};

t.before(async () => {
  // A key pasted into a query by mistake.
  await app.inject({ method: 'GET', url: `/v1/whoami?api_key=${org.testKey}&key=${org.liveKey}`, headers: org.key });

  // OAuth for remote clients: the consent page with state, the key pasted, the code, the tokens.
  const client = (await must('register', app.inject({ method: 'POST', url: '/oauth/register', payload: { redirect_uris: ['http://127.0.0.1/cb'], token_endpoint_auth_method: 'none' } }), 201)).json();
  const p = await pkce();
  const state = keep('OAuth state', `st_${'q'.repeat(20)}${Date.now()}`);
  const page = await must('consent page', app.inject({ method: 'GET', url: `/oauth/authorize?${new URLSearchParams({ client_id: String(client.client_id), redirect_uri: 'http://127.0.0.1/cb', response_type: 'code', code_challenge: p.challenge, code_challenge_method: 'S256', state })}` }), 200);
  const { fields, cookie } = readConsentPage(page);
  const pasted = await must('consent', app.inject({ method: 'POST', url: '/oauth/authorize', headers: { 'content-type': 'application/x-www-form-urlencoded', cookie }, payload: new URLSearchParams({ ...fields, api_key: org.testKey, decision: 'allow' }).toString() }), 200);
  const back = await must('allow', confirmConsent(app, pasted, cookie), 302);
  const code = keep('OAuth code', new URL(String(back.headers.location)).searchParams.get('code'));
  keep('PKCE verifier', p.verifier);
  const tokens = (await must('token', app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: 'http://127.0.0.1/cb', client_id: String(client.client_id), code_verifier: p.verifier }).toString() }), 200)).json();
  keep('OAuth access token', tokens.access_token);
  keep('OAuth refresh token', tokens.refresh_token);
  await must('whoami by token', app.inject({ method: 'GET', url: '/v1/whoami', headers: { authorization: `Bearer ${tokens.access_token}` } }), 200);
  // A client that echoes what it got back to us in a query (the callback shape).
  await app.inject({ method: 'GET', url: `/v1/whoami?code=${code}&state=${state}&access_token=${tokens.access_token}&refresh_token=${tokens.refresh_token}` });

  // Connect links: the link token is the provider's state; the provider's code comes back to our callback.
  const link = (await must('connect start', app.inject({ method: 'POST', url: '/v1/connections/start', headers: org.key, payload: { redirect_uri: 'https://app.example/done', server_id: 'contahub', user_id: 'ana' } }), 200)).json();
  keep('link token', link.link_token);
  const consentPage = await fetch(String(link.authorize_url));
  const html = await consentPage.text();
  const form = new URLSearchParams();
  for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) form.set(m[1]!, m[2]!.replace(/&#(\d+);/g, (_x, n: string) => String.fromCharCode(Number(n))));
  form.set('email', 'ana@contahub.example');
  form.set('decision', 'allow');
  const action = new URL(/<form method="post" action="([^"]+)"/.exec(html)![1]!, String(link.authorize_url));
  const redirect = await fetch(action, { method: 'POST', body: form, redirect: 'manual' });
  const location = new URL(redirect.headers.get('location')!);
  keep('provider authorization code', location.searchParams.get('code'));
  await must('callback', app.inject({ method: 'GET', url: `${location.pathname}${location.search}` }), 302);

  // Provider credentials pasted, and an inbound webhook secret set.
  const apiKey = keep('provider API key', sb.issueCredential('acme-payments') as string);
  const conn = (await must('connect', app.inject({ method: 'POST', url: '/v1/connections', headers: org.key, payload: { server_id: 'acme-payments', secret: apiKey } }), 201)).json();
  const hook = (await must('webhook secret', app.inject({ method: 'PUT', url: `/v1/connections/${conn.id}/webhook-secret`, headers: org.key }), 200)).json();
  keep('inbound webhook secret', hook.secret);
  const pathSecrets = sb.issueCredential('nota-facil') as Record<string, string>;
  for (const [k, v] of Object.entries(pathSecrets)) keep(`provider path secret ${k}`, v);
  await must('connect path secret', app.inject({ method: 'POST', url: '/v1/connections', headers: org.key, payload: { server_id: 'nota-facil', secret: pathSecrets } }), 201);

  // Outbound webhook endpoints: the signing secret shown once, then rotated.
  const endpoint = (await must('endpoint', app.inject({ method: 'POST', url: '/v1/webhook-endpoints', headers: org.key, payload: { event: 'consumer.created', name: 'hook', webhook_url: 'http://127.0.0.1:9/hook' } }), 201)).json();
  keep('endpoint secret', endpoint.secret);
  const rotated = (await must('rotate', app.inject({ method: 'POST', url: `/v1/webhook-endpoints/${endpoint.id}/rotate-secret`, headers: org.key }), 200)).json();
  keep('rotated endpoint secret', rotated.secret);

  // Commerce memory: a counterparty by CPF, looked up by it.
  await must('counterparty', app.inject({ method: 'POST', url: '/v1/counterparties', headers: org.key, payload: { kind: 'supplier', name: 'Ana', identifier: CPF, identifier_kind: 'cpf' } }), 201);
  await must('lookup', app.inject({ method: 'GET', url: `/v1/counterparties?identifier=${CPF}&identifier_kind=cpf`, headers: org.key }), 200);

  // Pix: a key (a CPF) in a path.
  const consumer = (await must('consumer', app.inject({ method: 'POST', url: '/v1/consumers', headers: org.key, payload: { display_name: 'Ana' } }), 201)).json();
  await app.inject({ method: 'GET', url: `/v1/consumers/${consumer.id}/pix-keys/${CPF}`, headers: org.key });
  await app.inject({ method: 'DELETE', url: `/v1/consumers/${consumer.id}/pix-keys/${CPF}`, headers: org.key });

  // The hosted-connect live view: its token is the capability (a well-formed one; the log line is the same for any).
  const view = keep('live-view token', 'Lv'.padEnd(43, 'x7'));
  for (const suffix of ['', '/frames', '/input']) await app.inject({ method: suffix === '/input' ? 'POST' : 'GET', url: `/connect/live/${view}${suffix}` });
  // A URL the router cannot read still logs its line.
  await app.inject({ method: 'GET', url: `/v1/connections/callback?state=${link.link_token}&code=%E0%A4%A` });

  // The error log: an error whose message and stack name a URL with a capability.
  app.log.error({ err: new Error(`upstream http://127.0.0.1:1/connect/live/${view}?token=${apiKey} refused`) }, `calling /v1/connections/callback?state=${link.link_token} failed`);
});

t.test('no value that crossed the wire is in the log', async (t) => {
  const log = lines.join('');
  t.ok(crossed.size >= 18, `${crossed.size} values crossed the wire`);
  for (const [what, value] of crossed) {
    t.notOk(log.includes(value) || log.includes(encodeURIComponent(value)), `${what} is not in the log`);
  }
});

t.test('the request lines are there, redacted', async (t) => {
  const urls = lines.map((l) => JSON.parse(l) as { req?: { url?: string } }).flatMap((l) => (l.req?.url ? [l.req.url] : []));
  const callback = urls.find((u) => u.startsWith('/v1/connections/callback?'));
  t.equal(callback, `/v1/connections/callback?state=${REDACTED}&code=${REDACTED}`, 'the callback: path kept, state and code redacted');
  t.ok(urls.includes(`/v1/counterparties?identifier=${REDACTED}&identifier_kind=cpf`), 'the CPF look-up');
  t.ok(urls.includes(`/connect/live/${REDACTED}/frames`), 'the live view');
  t.ok(urls.some((u) => /^\/v1\/consumers\/[^/]+\/pix-keys\/\[redacted\]$/.test(u)), 'the Pix key in a path');
  t.ok(lines.some((l) => l.includes('"level":50') && l.includes(`/connect/live/${REDACTED}?token=${REDACTED}`)), 'the error line, message and stack redacted');
});

t.test('every route whose path carries a capability or personal data is covered by the rule', async (t) => {
  const sensitive = /token|secret|^key$|password|code|identifier|document/i;
  const routes = app.registeredRoutes.filter((r) => r.url.split('/').some((s) => s.startsWith(':') && sensitive.test(s.slice(1))));
  t.ok(routes.length >= 2, routes.map((r) => r.url).join(', '));
  for (const r of routes) {
    const sample = r.url.replace(/:([A-Za-z_]+)/g, (_m, name: string) => (sensitive.test(name) ? 'SENSITIVEvalue123' : 'id_1'));
    t.notMatch(redactUrl(sample), /SENSITIVEvalue123/, `${r.method} ${r.url}`);
  }
});

t.test('the rule on its own', async (t) => {
  t.equal(redactUrl('/v1/whoami?limit=5&client_token=a&refresh_token=b&Secret=c&document=d&key=e&kind=f'), `/v1/whoami?limit=5&client_token=${REDACTED}&refresh_token=${REDACTED}&Secret=${REDACTED}&document=${REDACTED}&key=${REDACTED}&kind=f`);
  t.equal(redactUrl('https://h.example:8080/connect/live/abc/input?x=1#frag'), `https://h.example:8080/connect/live/${REDACTED}/input?x=1#${REDACTED}`);
  t.equal(redactText('GET /v1/x?code=1 then "http://a/b?state=2"'), `GET /v1/x?code=${REDACTED} then "http://a/b?state=${REDACTED}"`);
});

t.test('the CLI writes its error lines through the same rule', async (t) => {
  const root = path.resolve(import.meta.dirname, '..', '..');
  const secret = `sk_test_${'Z'.repeat(32)}`;
  const out = await new Promise<{ stderr: string; code: number | null }>((resolve) => {
    const child = spawn(process.execPath, [...nodeArgs('src/cli.ts'), 'audit', 'verify-evidence', `/nonexistent/connect/live/${secret}?token=${secret}`], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('exit', (code) => resolve({ stderr, code }));
  });
  t.not(out.code, 0);
  t.match(out.stderr, /\/nonexistent\/connect\/live\/\[redacted\]\?token=\[redacted\]/, 'the path is named, redacted');
  t.notOk(out.stderr.includes(secret), 'the secret is not');
});
