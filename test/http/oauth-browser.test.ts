import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { checkLook } from '../dashboard/look-checks.ts';
import { findChromium, launchChromium } from '../../src/adapters/browser/chromium.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { pkce } from '../helpers/oauth.ts';

// A real headless Chromium on the consent page, over real sockets: the app on
// a loopback port, the client's redirect receiver on another. The client's
// name is a <script> and must show as text; a person pastes a key, submits,
// and the browser lands on the redirect with a code.

const found = await findChromium();
if (!found) {
  t.test('consent in a browser', { skip: 'no Chromium found (CHROMIUM_PATH, /usr/bin/chromium or the @sparticuz/chromium package): the consent page browser test did not run' }, () => {});
} else {
  const { app } = await testApp(t);
  const org = await bootstrapOrg(app, 'Browser');
  await app.listen({ host: '127.0.0.1', port: 0 });
  const appPort = (app.server.address() as AddressInfo).port;

  const landed: string[] = [];
  const receiver = http.createServer((req, res) => {
    landed.push(req.url ?? '');
    res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>client</title><p>done</p>');
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => receiver.close(() => r())));
  const receiverPort = (receiver.address() as AddressInfo).port;

  const evilName = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">Evil IDE';
  const client = (await app.inject({ method: 'POST', url: '/oauth/register', payload: { redirect_uris: ['http://127.0.0.1/callback'], client_name: evilName } })).json();
  const p = await pkce();
  const q = new URLSearchParams({ client_id: client.client_id, redirect_uri: `http://127.0.0.1:${receiverPort}/callback`, response_type: 'code', code_challenge: p.challenge, code_challenge_method: 'S256', state: 'st-42', scope: 'projects:read' });

  const browser = await launchChromium('shell');
  t.teardown(() => browser.close());

  t.test('consent in a browser', async (t) => {
    // A page of its own context: axe-core's Playwright runner needs one (not browser.newPage()).
    const page = await (await browser.newContext({ locale: 'en-US' })).newPage();
    const res = await page.goto(`http://127.0.0.1:${appPort}/oauth/authorize?${q}`);
    t.equal(res?.status(), 200);
    t.equal(res?.headers()['x-frame-options'], 'DENY');
    t.equal(await page.locator('#client-name').textContent(), evilName, 'the client name is rendered as text');
    t.equal(await page.locator('script').count(), 0, 'no script element on the page');
    t.equal(await page.locator('img').count(), 0, 'no injected element');
    t.equal(await page.evaluate(() => (globalThis as unknown as { __pwned?: number }).__pwned), undefined, 'nothing ran');
    t.match(await page.locator('#redirect-host').textContent(), `127.0.0.1:${receiverPort}`);
    t.equal(await page.locator('#service-name').textContent(), 'Agent Ledger', 'the service being granted is named');
    t.equal(await page.locator('#client-unverified').textContent(), 'Unverified application', 'a self-registered client is marked unverified');
    t.equal(await page.locator('#scopes td').first().textContent(), 'Read projects and their settings', 'the scope in words');
    t.match(await page.textContent('#scopes'), /projects:read/, 'its code beside it');
    await checkLook(t, page, 'the consent page');

    // A wrong key: the form again with the error beside the field, not "start again".
    await page.fill('#api_key', `sk_live_${'A'.repeat(32)}`);
    await page.click('button[value="allow"]');
    await page.locator('#api_key-error').waitFor({ timeout: 30_000 });
    t.match(await page.locator('#api_key-error').textContent(), /This API key is not valid/);
    t.equal(await page.locator('#api_key').getAttribute('aria-invalid'), 'true');
    t.match(await page.locator('.error-summary').textContent(), /There is a problem/);
    t.match(await page.title(), /^Error: /);
    t.equal(await page.locator('#client-name').textContent(), evilName, 'the same request, asked again');
    await checkLook(t, page, 'the consent page with an error');

    // The right key: the confirmation names the organization, environment and project, then Allow.
    await page.fill('#api_key', org.testKey);
    await page.click('button[value="allow"]');
    await page.locator('#grant').waitFor({ timeout: 30_000 });
    t.equal(await page.locator('#grant-org').textContent(), 'Browser', 'the organization');
    t.match(await page.locator('#grant-environment').textContent(), /^Test/, 'the environment');
    t.match(await page.locator('#grant-project').textContent(), /every test project/, 'the projects');
    t.equal(await page.locator('button.btn-primary').textContent(), 'Allow', 'Allow is the primary action');
    t.equal(await page.locator('#api_key').count(), 0, 'the key is not on the page again');
    t.notOk((await page.content()).includes(org.testKey), 'nor anywhere in it');
    await checkLook(t, page, 'the confirmation');
    await Promise.all([page.waitForURL((u) => u.port === String(receiverPort), { timeout: 30_000 }), page.click('button[value="allow"]')]);
    const url = new URL(page.url());
    t.equal(url.pathname, '/callback');
    t.match(url.searchParams.get('code'), /^oac_/);
    t.equal(url.searchParams.get('state'), 'st-42');
    t.equal(url.searchParams.get('iss'), 'http://127.0.0.1:8080');
    // Only the redirect counts: a full Chromium also asks the client's origin for /favicon.ico, when it gets to it.
    t.equal(landed.filter((u) => u.startsWith('/callback')).length, 1, 'the client received the redirect once');

    // The code the browser carried is a working one.
    const tok = await app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ grant_type: 'authorization_code', code: url.searchParams.get('code')!, code_verifier: p.verifier, redirect_uri: `http://127.0.0.1:${receiverPort}/callback`, client_id: client.client_id }).toString(),
    });
    t.equal(tok.statusCode, 200);
    t.equal(tok.json().scope, 'projects:read');
    await page.close();
  });
}
