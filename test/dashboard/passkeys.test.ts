import fs from 'node:fs';
import t from 'tap';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { chromium as playwright } from 'playwright-core';
import { findChromium } from '../../src/adapters/browser/chromium.ts';
import { axeViolations, listen, signIn } from './browser.ts';

// Passkeys in a real Chromium with its virtual authenticator: a signed-in
// person registers one, signs out, signs in with it, and removes it; each
// step is an event of the person. WebAuthn needs a domain for the relying
// party (an IP address is none), so this service's public address is
// http://localhost and the browser opens the test server by that name.

// The Chromium bundled in @sparticuz/chromium ends its process when the virtual
// authenticator's ceremony starts; a full Chromium (Debian's, which .ci/run
// installs, or CHROMIUM_PATH) runs it.
const fullChromium = Boolean(process.env.CHROMIUM_PATH && fs.existsSync(process.env.CHROMIUM_PATH)) || fs.existsSync('/usr/bin/chromium');
if (!fullChromium) {
  console.log('# SKIPPED: passkeys need a full Chromium (apt-get install chromium, or CHROMIUM_PATH); the bundled one cannot run the virtual authenticator');
  t.pass('skipped: no full Chromium');
  process.exit(0);
}

const { app, ledger, sandboxProviders } = await testApp(t, { providers: true, app: { baseUrl: 'http://localhost:8080' } });
const org = await bootstrapOrg(app, 'Passco');
const base = (await listen(app)).replace('127.0.0.1', 'localhost');
// Its own launch of the same Chromium without --single-process: in a single
// process the virtual authenticator's ceremony ends the browser.
const found = (await findChromium())!;
const browser = await playwright.launch({ executablePath: found.executablePath, args: [...new Set(found.args)].filter((a) => a !== '--single-process'), headless: true });
t.teardown(() => browser.close());
const context = await browser.newContext({ locale: 'en-US' });
const page = await signIn(context, base, sandboxProviders!.url, 'owner+passco@example.com');
const cdp = await context.newCDPSession(page);
await cdp.send('WebAuthn.enable');
await cdp.send('WebAuthn.addVirtualAuthenticator', { options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true } });
const personEvents = async () => (await ledger.store.readStream(`person-${org.ownerId}`)).map((e) => ({ type: e.type, data: e.data as Record<string, unknown> }));

t.test('register a passkey, sign out, sign in with it, remove it', async (t) => {
  await page.goto(`${base}/dashboard/account`);
  await page.fill('#passkey-name', 'test laptop');
  await page.click('#add-passkey');
  await page.waitForSelector('#notice:has-text("is added")');
  t.match(await page.textContent('#passkeys'), 'test laptop');
  t.same(await axeViolations(page), [], 'the account page with a passkey passes axe');
  const added = (await personEvents()).find((e) => e.type === 'user.passkey_added')!;
  t.match(added.data, { user_id: org.ownerId, name: 'test laptop', credential_id: /.+/, public_key: /.+/ });

  await page.click('#sign-out');
  await page.waitForSelector('#notice:has-text("You are signed out.")');
  await page.click('#passkey-sign-in');
  await page.waitForSelector('#notice:has-text("You are signed in.")');
  t.match(await page.textContent('#welcome'), 'owner+passco@example.com');
  const signIns = (await personEvents()).filter((e) => e.type === 'user.signed_in');
  t.match(signIns.at(-1)!.data, { method: 'passkey', passkey_id: added.data.passkey_id });
  t.ok((await personEvents()).some((e) => e.type === 'user.signed_out'), 'the sign-out is an event');

  await page.goto(`${base}/dashboard/account`);
  await page.click(`#remove-passkey-${added.data.passkey_id as string}`);
  await page.waitForSelector('#notice:has-text("The passkey is removed")');
  t.equal(await page.locator('#passkeys').count(), 0);
  t.ok((await personEvents()).some((e) => e.type === 'user.passkey_removed'));
  // A removed passkey signs nobody in.
  await page.click('#sign-out');
  await page.waitForSelector('#notice:has-text("You are signed out.")');
  await page.click('#passkey-sign-in');
  await page.waitForSelector('#notice:has-text("does not sign anyone in")');
});
