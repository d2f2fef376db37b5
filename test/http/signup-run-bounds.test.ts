import t, { type Test } from 'tap';
import { findChromium } from '../../src/adapters/browser/chromium.ts';
import { embeddedWorker } from '../../src/adapters/browser/worker.ts';
import { sweepPausedPages } from '../../src/usecases/signup-runner.ts';
import { bootstrapOrg, testApp, testClock } from '../helpers/app.ts';
import { until } from '../helpers/wait.ts';

// A browser signup run's bounds (issue 23, Build item 4; spec Part 2 "Browser
// signup run" codes `drive_stalled` and `drive_deadline_exceeded`), end to end
// through HTTP: a real Chromium drives the sandbox signup site whose `hang`
// fault never answers the code on page 2. The worker is the app's own
// (buildApp's browserWorker). Page 1 runs under generous bounds so a busy
// machine cannot trip them; the bounds are tightened while the run waits for
// the code, so only the hung page meets them. Afterwards the run is `failed`
// with the code and the step in GET .../status, and the browser context is
// released (worker.active back to 0). The paused page itself is bounded by the
// run's pause (ten minutes by the app's clock, renewed by a resend).

const chromium = await findChromium();
const skip = chromium ? false : 'no Chromium found (findChromium() returned null): signup run bound tests skipped';

const GENEROUS = { deadlineMs: 120_000, stallMs: 60_000 };

t.test('signup run bounds over HTTP', { skip }, async (t) => {
  const worker = embeddedWorker({ maxContexts: 2, ...GENEROUS });
  const clock = testClock();
  const { app, sandboxProviders } = await testApp(t, { providers: true, browserWorker: worker, now: clock.now });
  const sb = sandboxProviders!;
  const org = await bootstrapOrg(app, 'Bounds');
  t.teardown(() => {
    sb.signup.faults.delete('acme-payments');
    sb.signup.release();
  });

  const status = (runId: string) => app.inject({ method: 'GET', url: `/v1/connections/engine/${runId}/status`, headers: org.key });
  const waitStatus = (runId: string, wanted: string[]) =>
    until<Record<string, unknown>>(
      async () => {
        const r = await status(runId);
        return r.statusCode === 200 && wanted.includes(r.json().status) ? (r.json() as Record<string, unknown>) : undefined;
      },
      `run ${runId} reaches ${wanted.join(' or ')}`,
    );

  /** Starts a run, waits for its pause under generous bounds, applies `bounds`, gives the code (page 2 hangs), and returns the final status view. */
  async function hungRun(t: Test, email: string, bounds: { deadlineMs: number; stallMs: number }) {
    Object.assign(worker.limits, GENEROUS);
    const started = await app.inject({ method: 'POST', url: '/v1/connections/engine/start', headers: org.key, payload: { server_id: 'acme-payments', user_id: email.split('@')[0], email } });
    t.equal(started.statusCode, 202, started.body);
    const runId = started.json().run_id as string;
    const paused = await waitStatus(runId, ['needs_verification', 'failed']);
    t.equal(paused.status, 'needs_verification', JSON.stringify(paused));
    t.equal(worker.active, 1, 'the paused run holds its browser context');
    Object.assign(worker.limits, bounds);
    const given = await app.inject({ method: 'POST', url: `/v1/connections/engine/${runId}/verification`, headers: org.key, payload: { code: sb.outbox(email).at(-1)!.code } });
    t.equal(given.statusCode, 202, given.body);
    const done = await waitStatus(runId, ['failed', 'provisioned']);
    await until(() => worker.active === 0, 'the browser context is released');
    t.equal(worker.active, 0, 'the context is closed after the bound');
    // Terminal: a later verification is refused.
    const again = await app.inject({ method: 'POST', url: `/v1/connections/engine/${runId}/verification`, headers: org.key, payload: { code: '000000' } });
    t.equal(again.statusCode, 409);
    t.equal(again.json().error.code, 'not_awaiting_verification');
    return done;
  }

  await t.test('the paused page lives as long as the pause: a resend renews it; past the expiry it is closed', async (t) => {
    const email = 'pause.bounds@example.com';
    const runId = (await app.inject({ method: 'POST', url: '/v1/connections/engine/start', headers: org.key, payload: { server_id: 'acme-payments', user_id: 'pause', email } })).json().run_id as string;
    t.equal((await waitStatus(runId, ['needs_verification', 'failed'])).status, 'needs_verification');
    t.equal(worker.active, 1);
    let advanced = 0;
    const advance = (ms: number) => {
      clock.advance(ms);
      advanced += ms;
    };
    t.teardown(() => clock.advance(-advanced));
    advance(9 * 60_000);
    const resent = await app.inject({ method: 'POST', url: `/v1/connections/engine/${runId}/resend`, headers: org.key });
    t.equal(resent.statusCode, 200, resent.body);
    advance(3 * 60_000); // twelve minutes after the pause, three after the resend
    await sweepPausedPages();
    t.equal(worker.active, 1, 'the page outlives the first pause: the resend renewed it');
    const given = await app.inject({ method: 'POST', url: `/v1/connections/engine/${runId}/verification`, headers: org.key, payload: { code: sb.outbox(email).at(-1)!.code } });
    t.equal(given.statusCode, 202, given.body);
    const done = await waitStatus(runId, ['provisioned', 'failed']);
    t.equal(done.status, 'provisioned', JSON.stringify(done));
    await until(() => worker.active === 0, 'the provisioned run closes its page');

    const lateEmail = 'late.bounds@example.com';
    const late = (await app.inject({ method: 'POST', url: '/v1/connections/engine/start', headers: org.key, payload: { server_id: 'acme-payments', user_id: 'late', email: lateEmail } })).json().run_id as string;
    t.equal((await waitStatus(late, ['needs_verification', 'failed'])).status, 'needs_verification');
    t.equal(worker.active, 1);
    advance(10 * 60_000);
    await sweepPausedPages();
    t.equal(worker.active, 0, 'an expired pause releases its browser context');
    const stale = await app.inject({ method: 'POST', url: `/v1/connections/engine/${late}/verification`, headers: org.key, payload: { code: sb.outbox(lateEmail).at(-1)!.code } });
    t.equal(stale.statusCode, 410);
    t.equal(stale.json().error.code, 'run_stale');
  });

  await t.test('a resend that fails on the page fails the run and closes its page at once', async (t) => {
    sb.signup.faults.set('acme-payments', 'no_resend');
    t.teardown(() => void sb.signup.faults.delete('acme-payments'));
    const runId = (await app.inject({ method: 'POST', url: '/v1/connections/engine/start', headers: org.key, payload: { server_id: 'acme-payments', user_id: 'resend', email: 'resend.bounds@example.com' } })).json().run_id as string;
    t.equal((await waitStatus(runId, ['needs_verification', 'failed'])).status, 'needs_verification');
    t.equal(worker.active, 1);
    const r = await app.inject({ method: 'POST', url: `/v1/connections/engine/${runId}/resend`, headers: org.key });
    t.equal(r.statusCode, 200, r.body);
    t.match(r.json(), { status: 'failed', code: 'resume_inputs_unavailable', failed_step_id: 'await_verification' });
    t.equal(worker.active, 0, 'the page of the failed run is closed, not held until the pause expires');
  });

  sb.signup.faults.set('acme-payments', 'hang');
  await t.test('no progress for stallMs on the hung page: failed, drive_stalled at submit_code', async (t) => {
    const done = await hungRun(t, 'stall.bounds@example.com', { deadlineMs: GENEROUS.deadlineMs, stallMs: 300 });
    t.match(done, { status: 'failed', code: 'drive_stalled', failed_step_id: 'submit_code' });
    t.notOk('connection_id' in done);
    t.notOk('verification' in done);
  });

  await t.test('past deadlineMs (stall bound far away): failed, drive_deadline_exceeded at submit_code', async (t) => {
    const done = await hungRun(t, 'deadline.bounds@example.com', { deadlineMs: 300, stallMs: GENEROUS.stallMs });
    t.match(done, { status: 'failed', code: 'drive_deadline_exceeded', failed_step_id: 'submit_code' });
    t.notOk('connection_id' in done);
  });
});
