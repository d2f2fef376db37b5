import t from 'tap';
import { findChromium } from '../../src/adapters/browser/chromium.ts';
import { ProviderTools } from '../../src/providers/tools.ts';
import { bootstrapOrg, testApp, testClock } from '../helpers/app.ts';
import { until } from '../helpers/wait.ts';

// Browser signup runs against the sandbox provider's signup site, driven by a
// real headless Chromium: start → needs_verification (the code read from the
// sandbox outbox) → provisioned with a connection that works on a tool call →
// probe_result; a sandbox fault mode fails the run with the spec's code and
// the failed step; refusals: live key, not awaiting verification, another
// organization's run, a stale pause.

const chromium = await findChromium();
const skip = chromium ? false : 'no Chromium found (findChromium() returned null): browser signup run tests skipped';

const clock = testClock();
const { app, ledger, vault, sandboxProviders, providerRuntime } = await testApp(t, { providers: true, now: clock.now });
const sb = sandboxProviders!;
const org = await bootstrapOrg(app, 'Signup');
const other = await bootstrapOrg(app, 'Elsewhere');
const tools = new ProviderTools(ledger.db, vault, providerRuntime, { store: ledger.store, now: clock.now, waitFor: (p, ms) => ledger.readSide.waitFor(p, ms) });

const status = async (runId: string, headers = org.key) => app.inject({ method: 'GET', url: `/v1/connections/engine/${runId}/status`, headers });
type RunView = { status: string; connection_id?: string; [k: string]: unknown };
async function waitStatus(runId: string, wanted: string[]): Promise<RunView> {
  return until<RunView>(
    async () => {
      const r = await status(runId);
      return r.statusCode === 200 && wanted.includes(r.json().status) ? (r.json() as RunView) : undefined;
    },
    `run ${runId} reaches ${wanted.join(' or ')}`,
    60_000,
  );
}
const start = (email: string, headers = org.key) => app.inject({ method: 'POST', url: '/v1/connections/engine/start', headers, payload: { server_id: 'acme-payments', user_id: 'ana', email } });

t.test('a live key is refused with not_test_environment; nothing starts', async (t) => {
  const r = await app.inject({ method: 'POST', url: '/v1/connections/engine/start', headers: { authorization: `Bearer ${org.liveKey}` }, payload: { server_id: 'acme-payments', user_id: 'ana', email: 'ana@example.com' } });
  t.equal(r.statusCode, 422);
  t.equal(r.json().error.code, 'not_test_environment');
});

t.test("only providers the catalog marks engine_provisionable (and that take an API key) start a run; nothing starts otherwise", async (t) => {
  const providers = (await app.inject({ method: 'GET', url: '/v1/providers', headers: org.key })).json().servers as { id: string; auth_type: string; engine_provisionable: boolean }[];
  const head = await ledger.store.headPosition();
  for (const p of providers.filter((x) => !(x.engine_provisionable && x.auth_type === 'api_key'))) {
    const r = await app.inject({ method: 'POST', url: '/v1/connections/engine/start', headers: org.key, payload: { server_id: p.id, user_id: 'ana', email: 'ana@example.com' } });
    t.equal(r.statusCode, 404, `${p.id} (engine_provisionable ${p.engine_provisionable}, ${p.auth_type})`);
    t.equal(r.json().error.code, 'server_unknown');
  }
  t.ok(providers.some((x) => x.id === 'old-erp' && !x.engine_provisionable), 'old-erp: an API-key provider the engine does not provision');
  t.equal(await ledger.store.headPosition(), head, 'nothing written');
});

t.test('an unknown run is 404', async (t) => {
  const r = await status('sr_absentAbsent0000');
  t.equal(r.statusCode, 404);
  t.equal(r.json().error.code, 'not_found');
});

t.test('signup run end to end in Chromium', { skip }, async (t) => {
  const email = 'ana.signup@example.com';
  const started = await start(email);
  t.equal(started.statusCode, 202, started.body);
  const { run_id: runId } = started.json();
  t.match(started.json(), { run_id: /^sr_/, status: 'running' });

  const paused = await waitStatus(runId, ['needs_verification', 'failed']);
  t.equal(paused.status, 'needs_verification', JSON.stringify(paused));
  t.match(paused, { prompt: /code/, verification: { mechanism: 'email_code', resend: true } });
  t.notOk('connection_id' in paused);

  // Another organization sees no run (same 404 as an absent one).
  const foreign = await status(runId, other.key);
  t.equal(foreign.statusCode, 404);
  t.equal(foreign.json().error.code, 'not_found');
  const foreignCode = await app.inject({ method: 'POST', url: `/v1/connections/engine/${runId}/verification`, headers: other.key, payload: { code: '000000' } });
  t.equal(foreignCode.statusCode, 404);

  // Resend: a second code in the outbox; the latest one is the one that works.
  t.equal(sb.outbox(email).length, 1);
  const resent = await app.inject({ method: 'POST', url: `/v1/connections/engine/${runId}/resend`, headers: org.key });
  t.equal(resent.statusCode, 200, resent.body);
  t.equal(resent.json().status, 'needs_verification');
  t.equal(sb.outbox(email).length, 2);
  const code = sb.outbox(email).at(-1)!.code;
  t.match(code, /^\d{6}$/);

  const given = await app.inject({ method: 'POST', url: `/v1/connections/engine/${runId}/verification`, headers: org.key, payload: { code } });
  t.equal(given.statusCode, 202, given.body);
  t.equal(given.json().status, 'running');

  const done = await waitStatus(runId, ['provisioned', 'failed']);
  t.equal(done.status, 'provisioned', JSON.stringify(done));
  t.match(done.connection_id, /^ca_/);
  t.notOk('verification' in done);
  const probed = await until<{ ok?: boolean }>(async () => (await status(runId)).json().probe_result as { ok?: boolean } | undefined, 'a probe result', 60_000);
  t.equal(probed.ok, true);

  // The connection exists, holds no secret in any read, and works on a tool call.
  const conn = await app.inject({ method: 'GET', url: `/v1/connections/${done.connection_id}`, headers: org.key });
  t.equal(conn.statusCode, 200);
  t.match(conn.json(), { server_id: 'acme-payments', status: 'connected', user_id: 'ana' });
  const call = await tools.execute({ tenant: { orgId: org.orgId, projectId: org.projectId }, environment: 'test', serverId: 'acme-payments', toolName: 'list_charges', input: {}, userId: 'ana' });
  t.equal(call.ok, true, JSON.stringify(call));

  // Verification again: the run is not paused any more.
  const again = await app.inject({ method: 'POST', url: `/v1/connections/engine/${runId}/verification`, headers: org.key, payload: { code } });
  t.equal(again.statusCode, 409);
  t.equal(again.json().error.code, 'not_awaiting_verification');
  const resendLate = await app.inject({ method: 'POST', url: `/v1/connections/engine/${runId}/resend`, headers: org.key });
  t.equal(resendLate.statusCode, 409);
  t.equal(resendLate.json().error.code, 'not_awaiting_verification');
});

t.test('fault no_key: the run fails with no_credential_captured at capture_credential', { skip }, async (t) => {
  sb.signup.faults.set('acme-payments', 'no_key');
  t.teardown(() => void sb.signup.faults.delete('acme-payments'));
  const email = 'bia.signup@example.com';
  const runId = (await start(email)).json().run_id;
  const paused = await waitStatus(runId, ['needs_verification', 'failed']);
  t.equal(paused.status, 'needs_verification', JSON.stringify(paused));
  const given = await app.inject({ method: 'POST', url: `/v1/connections/engine/${runId}/verification`, headers: org.key, payload: { code: sb.outbox(email).at(-1)!.code } });
  t.equal(given.statusCode, 202);
  const failed = await waitStatus(runId, ['failed', 'provisioned']);
  t.match(failed, { status: 'failed', code: 'no_credential_captured', failed_step_id: 'capture_credential' });
  t.notOk('connection_id' in failed);
});

t.test('fault broken_form: the run fails with flow_failed at fill_signup', { skip }, async (t) => {
  sb.signup.faults.set('acme-payments', 'broken_form');
  t.teardown(() => void sb.signup.faults.delete('acme-payments'));
  const runId = (await start('caio.signup@example.com')).json().run_id;
  const failed = await waitStatus(runId, ['failed', 'needs_verification']);
  t.match(failed, { status: 'failed', code: 'flow_failed', failed_step_id: 'fill_signup' });
});

t.test('a paused run past its expiry is 410 run_stale', { skip }, async (t) => {
  const email = 'dora.signup@example.com';
  const runId = (await start(email)).json().run_id;
  const paused = await waitStatus(runId, ['needs_verification', 'failed']);
  t.equal(paused.status, 'needs_verification');
  clock.advance(10 * 60_000 + 1);
  t.teardown(() => clock.advance(-(10 * 60_000 + 1)));
  const r = await status(runId);
  t.equal(r.statusCode, 410);
  t.equal(r.json().error.code, 'run_stale');
  const v = await app.inject({ method: 'POST', url: `/v1/connections/engine/${runId}/verification`, headers: org.key, payload: { code: sb.outbox(email).at(-1)!.code } });
  t.equal(v.statusCode, 410);
  t.equal(v.json().error.code, 'run_stale');
});

t.test('a second provisioned run for the same end user rotates the connection in place (upsertConnection)', { skip }, async (t) => {
  const provision = async (email: string) => {
    const started = await app.inject({ method: 'POST', url: '/v1/connections/engine/start', headers: org.key, payload: { server_id: 'acme-payments', user_id: 'eva', email } });
    t.equal(started.statusCode, 202, started.body);
    const runId = started.json().run_id as string;
    const paused = await waitStatus(runId, ['needs_verification', 'failed']);
    t.equal(paused.status, 'needs_verification', JSON.stringify(paused));
    const given = await app.inject({ method: 'POST', url: `/v1/connections/engine/${runId}/verification`, headers: org.key, payload: { code: sb.outbox(email).at(-1)!.code } });
    t.equal(given.statusCode, 202, given.body);
    const done = await waitStatus(runId, ['provisioned', 'failed']);
    t.equal(done.status, 'provisioned', JSON.stringify(done));
    return done.connection_id!;
  };
  const refOf = async (id: string) => (await ledger.db.query<{ secret_ref: string }>('SELECT secret_ref FROM connections WHERE id = $1', [id])).rows[0]!.secret_ref;
  const first = await provision('eva.one@example.com');
  const firstRef = await refOf(first);
  const second = await provision('eva.two@example.com');
  t.equal(second, first, 'the same connection, rotated');
  const secondRef = await refOf(second);
  t.not(secondRef, firstRef);
  t.equal(await vault.get(org.orgId, firstRef), undefined, 'the replaced secret is deleted from the vault');
  t.ok(await vault.get(org.orgId, secondRef));
  const list = await app.inject({ method: 'GET', url: '/v1/connections?user_id=eva', headers: org.key });
  t.equal(list.statusCode, 200);
  const rows = (list.json().connections as Array<{ id: string; user_id: string; server_id: string }>).filter((c) => c.user_id === 'eva' && c.server_id === 'acme-payments');
  t.equal(rows.length, 1, 'one connection for the end user');
  const call = await tools.execute({ tenant: { orgId: org.orgId, projectId: org.projectId }, environment: 'test', serverId: 'acme-payments', toolName: 'list_charges', input: {}, userId: 'eva' });
  t.equal(call.ok, true, JSON.stringify(call));
});
