import type { AddressInfo } from 'node:net';
import t from 'tap';
import { checkLook } from '../dashboard/look-checks.ts';
import { findChromium, launchChromium } from '../../src/adapters/browser/chromium.ts';
import { LOGIN_LAYOUT, SANDBOX_MERCHANT_USER } from '../../src/adapters/merchants/sandbox-merchants.ts';
import { returnUrlProblem } from '../../src/usecases/hosted-connect.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { until } from '../helpers/wait.ts';

// Hosted-browser connect on a phone (issue 61, item 2), in real Chromium with
// a 375 px wide mobile viewport and touch: the merchant's page is laid out at
// the viewer's width (one CSS pixel to one, not a desktop page shrunk into an
// image), a tap on a field focuses a real text field (what raises a phone's
// soft keyboard) whose typing reaches the merchant, and after finish the page
// says "Connected — you can close this tab" with the return_url given at
// start. A return_url that is not https (or http on loopback) is refused.

const chromium = await findChromium();
const skip = chromium ? false : 'no Chromium found (findChromium() returned null): hosted connect phone test skipped';

const { app, ledger, sandboxMerchants } = await testApp(t, { merchants: true });
await app.listen({ host: '127.0.0.1', port: 0 });
const origin = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
const org = await bootstrapOrg(app, 'Phone');
const start = (payload: { return_url: string }) => app.inject({ method: 'POST', url: '/v1/cart/merchant-b/connect/start', headers: org.key, payload });

t.test('return_url: https, or http on loopback; anything else is refused with nothing written', async (t) => {
  for (const ok of ['https://shop.example/connected?x=1', 'http://localhost:3000/back', 'http://127.0.0.1:9/x', 'http://[::1]:8080/']) t.equal(returnUrlProblem(ok), undefined, ok);
  const head = await ledger.store.headPosition();
  for (const bad of ['javascript:alert(1)', 'JavaScript:alert(1)', 'data:text/html,<b>x</b>', 'http://shop.example/back', 'https://user:pw@shop.example/', '/relative', 'ftp://shop.example/']) {
    const r = await start({ return_url: bad });
    t.equal(r.statusCode, 400, bad);
    t.match(r.json(), { error: { code: 'invalid_body', message: String, details: { issues: [{ path: ['return_url'] }] } } }, bad);
    t.match(r.json().error.details.issues[0].message, /return_url/, 'the message says what to give');
  }
  t.same((await ledger.store.readAll({ after: head })).filter((e) => e.type.startsWith('hosted_connect')), [], 'nothing written, no context opened');
});

t.test('at 375 px with touch: laid out at the viewer width, a tap raises a real text field, typing logs in, then "Connected" with the way back', { skip }, async (t) => {
  const returnUrl = 'https://shop.example/connected?cart=7';
  const started = await start({ return_url: returnUrl });
  t.equal(started.statusCode, 200, started.body);
  const { session_id: sessionId, live_view_url: liveUrl } = started.json();

  const person = await launchChromium('shell');
  t.teardown(() => person.close());
  const phone = await person.newContext({ viewport: { width: 375, height: 667 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
  const page = await phone.newPage();
  t.equal((await page.goto(`${origin}${new URL(liveUrl).pathname}`))!.status(), 200);

  // The remote page takes the width the image has on this phone: one CSS pixel to one.
  const imageWidth = await page.evaluate(() => Math.round(document.getElementById('screen')!.getBoundingClientRect().width) - 2);
  t.ok(imageWidth > 300 && imageWidth <= 375, `the image spans the phone's width (${imageWidth} px)`);
  const attr = async (name: string) => Number(await page.getAttribute('#screen', name));
  await until(async () => (await attr('data-width')) === imageWidth, `the remote page laid out at ${imageWidth} px`);
  await until(async () => (await page.textContent('#remote-title')) === 'Merchant B — Sign in', 'the login page in the live view');
  t.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'nothing wider than the phone: no sideways scrolling');

  const tap = async (b: { x: number; y: number; w: number; h: number }) => {
    const box = (await page.locator('#screen').boundingBox())!;
    const scale = (box.width - 2) / (await attr('data-width'));
    t.equal(Math.round(scale * 100) / 100, 1, 'shown at its own size');
    await page.touchscreen.tap(box.x + 1 + (b.x + b.w / 2) * scale, box.y + 1 + (b.y + b.h / 2) * scale);
  };
  const flushed = () => until(async () => (await attr('data-sent')) === (await attr('data-done')), 'the live view sent every input');
  const focused = () => page.evaluate(() => ({ id: document.activeElement?.id, tag: document.activeElement?.tagName, type: (document.activeElement as HTMLInputElement | null)?.type }));

  await tap(LOGIN_LAYOUT.username);
  t.same(await focused(), { id: 'type', tag: 'INPUT', type: 'text' }, 'a tap on the page focuses a real text field: the soft keyboard opens');
  await page.keyboard.type(SANDBOX_MERCHANT_USER.username + 'x');
  await page.keyboard.press('Backspace'); // a correction on the phone's keyboard reaches the field too
  await flushed();
  await tap(LOGIN_LAYOUT.password);
  await page.keyboard.type(SANDBOX_MERCHANT_USER.password);
  await page.keyboard.press('Enter');
  await flushed();
  await until(() => sandboxMerchants!.signedIn('merchant-b').includes(SANDBOX_MERCHANT_USER.username), 'the merchant sees the login');
  t.equal(await page.inputValue('#type'), ' ', 'nothing typed stays in our field');

  const done = await app.inject({ method: 'POST', url: '/v1/cart/merchant-b/connect/finish', headers: org.key, payload: { session_id: sessionId } });
  t.equal(done.statusCode, 200, done.body);
  await until(() => page.isVisible('#done'), 'the end state shows');
  t.equal(await page.textContent('#done h1'), 'Connected — you can close this tab');
  t.notOk(await page.isVisible('#screen'), 'the live image is gone');
  t.ok(await page.isVisible('#return'), 'the way back is offered');
  t.equal(await page.getAttribute('#return', 'href'), returnUrl);
  await checkLook(t, page, 'the live view, connected');
});
