import t from 'tap';
import type { Page } from 'playwright-core';
import { findChromium } from '../../src/adapters/browser/chromium.ts';
import { LOGIN_LAYOUT, SANDBOX_MERCHANT_USER } from '../../src/adapters/merchants/sandbox-merchants.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { until } from '../helpers/wait.ts';
import { chromium, listen, signIn } from './browser.ts';
import { checkLook } from './look-checks.ts';
import { clickThrough, remoteLaidOut } from '../helpers/live-view.ts';

// The Connections and Sessions pages in real Chromium, checked through the
// HTTP API: a connection verified with its provider and revoked; a hosted
// connect started from the page and finished after logging in through its
// live view; a session's tool call appearing live on its page, with its
// payment view; a member reads and cannot change.

if (!(await findChromium())) {
  t.skip('no Chromium found: the connections page tests did not run', async () => {});
} else {
  const { app, sandboxProviders, sandboxMerchants, ledger } = await testApp(t, { providers: true, merchants: true });
  const sb = sandboxProviders!;
  const org = await bootstrapOrg(app, 'Linkco');
  const api = async (method: 'GET' | 'POST', url: string, payload?: Record<string, unknown>, headers: Record<string, string> = org.key) => {
    const r = await app.inject({ method, url, headers, ...(payload ? { payload } : {}) });
    return { status: r.statusCode, body: r.json() };
  };
  const acme = (await api('POST', '/v1/connections', { server_id: 'acme-payments', secret: sb.issueCredential('acme-payments') })).body;
  const session = (await api('POST', '/v1/sessions', { servers: ['acme-payments', 'clima'], user_id: 'u1' })).body;
  await api('POST', '/v1/team/members', { email: 'mo@linkco.example', role: 'member' }, org.owner);
  await ledger.settle();

  const base = await listen(app);
  const browser = await chromium(t);
  const context = await browser.newContext({ locale: 'en-US', viewport: { width: 1400, height: 1100 } });
  const page = await signIn(context, base, sb.url, 'owner+linkco@example.com');
  let current = '';

  t.test('verify a connection with its provider, then revoke it', async (t) => {
    await page.goto(`${base}/dashboard/connections`);
    await checkLook(t, page, 'the connections page');
    await page.click(`a[data-connection="${acme.id}"]`);
    await page.click('#verify');
    await page.waitForSelector('#notice:has-text("Verified: acme-payments accepted the stored credential")');
    await checkLook(t, page, 'a connection');
    await page.click('#revoke');
    await page.waitForSelector('#notice:has-text("Revoked")');
    const got = (await api('GET', `/v1/connections/${acme.id}`)).body;
    t.equal(got.status, 'revoked', 'the API reads it revoked');
    const revoked = (await ledger.store.readStream(`connection-${acme.id}`)).at(-1)!;
    t.match(revoked.metadata, { actor: { kind: 'user', id: org.ownerId }, project_id: org.projectId }, 'recorded with the person as actor');
  });

  t.test('a hosted connect started on the page, finished after logging in through the live view', async (t) => {
    await page.goto(`${base}/dashboard/connections`);
    await page.click('#start-merchant-a');
    await page.waitForSelector('#hosted-started');
    const live = new URL((await page.getAttribute('#live-view-link', 'href'))!);
    t.match(live.pathname, /^\/connect\/live\/[A-Za-z0-9_-]{43}$/);
    const view: Page = await context.newPage();
    await view.goto(`${base}${live.pathname}`);
    await until(async () => (await view.textContent('#remote-title')) === 'Merchant A — Sign in', 'the live view shows the login page');
    const attr = async (name: string) => Number(await view.getAttribute('#screen', name));
    await remoteLaidOut(view);
    const clickRemote = (b: { x: number; y: number; w: number; h: number }) => clickThrough(view, b);
    const flushed = () => until(async () => (await attr('data-sent')) === (await attr('data-done')), 'the live view sent every input');

    // Finishing before logging in is refused, in words.
    await page.click('#finish');
    await page.waitForSelector('#notice.error:has-text("You have not logged in yet")');

    await clickRemote(LOGIN_LAYOUT.username);
    await view.keyboard.type(SANDBOX_MERCHANT_USER.username);
    await flushed();
    await clickRemote(LOGIN_LAYOUT.password);
    await view.keyboard.type(SANDBOX_MERCHANT_USER.password);
    await view.keyboard.press('Enter');
    await flushed();
    await until(() => sandboxMerchants!.signedIn('merchant-a').includes(SANDBOX_MERCHANT_USER.username), 'the merchant sees the login');
    await until(async () => (await view.textContent('#remote-title')) === 'Merchant A — Your account', 'the live view shows the account page');

    // Back on the dashboard: the panel is still there after the early refusal; finish.
    await page.bringToFront();
    await page.click('#finish');
    await page.waitForSelector('#notice:has-text("Connected: your Merchant A login is stored.")');
    const id = (await page.textContent('#connection-id'))!.trim();
    const got = (await api('GET', `/v1/connections/${id}`)).body;
    t.match(got, { server_id: 'merchant-a', auth_type: 'browser_session', status: 'connected', metadata: { source: 'hosted_browser' } }, 'the API has the connection');
    await until(async () => !(await view.isHidden('#done')), 'the live view says it is connected');
  });

  t.test("a session's tool call appears live, with its payment view", async (t) => {
    // The connection revoked above is replaced through the API: the session's calls use it.
    const again = await api('POST', '/v1/connections', { server_id: 'acme-payments', secret: sb.issueCredential('acme-payments') });
    t.equal(again.status, 201);
    current = again.body.id;
    await page.goto(`${base}/dashboard/sessions`);
    await checkLook(t, page, 'the sessions page');
    await page.click(`a[data-session="${session.id}"]`);
    await page.waitForSelector('#live[data-live="connected"]');
    const call = (await api('POST', `/v1/sessions/${session.id}/execute`, { tool: 'acme-payments/create_charge', input: { amount_minor: 900, currency: 'BRL' } })).body;
    t.ok(call.tool_call_id, JSON.stringify(call));
    await page.waitForSelector(`#calls a[data-call="${call.tool_call_id}"]`);
    t.match(await page.textContent('#notice'), new RegExp(`Tool call ${call.tool_call_id}`), 'the notice says what changed');
    await checkLook(t, page, 'a session');
    await page.click(`#calls a[data-call="${call.tool_call_id}"]`);
    await page.waitForSelector('#payment-view');
    const status = (await api('GET', `/v1/tool-calls/${call.tool_call_id}/payment-status`)).body;
    t.equal((await page.textContent('#payment-status'))!.trim(), status.payment_status, 'the payment view as the API has it');
    t.equal((await page.textContent('#verification-status'))!.trim(), 'This call started no verification.');
    await checkLook(t, page, 'a tool call');
    await page.goto(`${base}/dashboard/tool-calls`);
    t.equal(await page.locator(`#calls a[data-call="${call.tool_call_id}"]`).count(), 1, 'in the project’s calls');
  });

  t.test('a member reads, and cannot change', async (t) => {
    const mo = await signIn(await browser.newContext({ locale: 'en-US' }), base, sb.url, 'mo@linkco.example');
    await mo.goto(`${base}/dashboard/connections/${current}`);
    t.equal(await mo.locator('#revoke').count(), 0, 'no revoke button');
    await mo.goto(`${base}/dashboard/connections`);
    t.ok(await mo.isVisible('#cannot-write'));
    const status = await mo.evaluate(async (url) => {
      const csrf = document.querySelector('meta[name="csrf-token"]')!.getAttribute('content')!;
      return (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: `_csrf=${encodeURIComponent(csrf)}` })).status;
    }, `${base}/dashboard/connections/${current}/revoke`);
    t.equal(status, 403, 'refused');
    await ledger.settle();
    t.equal((await api('GET', `/v1/connections/${current}`)).body.status, 'connected', 'nothing changed');
  });
}
