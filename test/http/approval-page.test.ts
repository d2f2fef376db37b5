import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { findChromium, launchChromium } from '../../src/adapters/browser/chromium.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';

// Approvals reach people: `approval.requested` is delivered to the webhook
// endpoints subscribed to it, and the approval's page (human session) shows
// the held input and decides, in a real headless Chromium.

const { app, ledger } = await testApp(t, { webhookWorker: true });
const org = await bootstrapOrg(app, 'Approvers');
const inject = (method: 'GET' | 'POST', url: string, payload?: Record<string, unknown>, headers: Record<string, string> = org.key) =>
  app.inject({ method, url, headers, ...(payload ? { payload } : {}) });

await inject('POST', '/v1/agents', { agent_id: 'buyer', principal_ref: 'p' });
const consumer = (await inject('POST', '/v1/consumers', { display_name: 'Ana' })).json();
const mandate = (
  await inject('POST', '/v1/mandates', {
    consumer_id: consumer.id,
    agent_id: 'buyer',
    purpose: 'groceries',
    merchant_allowlist: ['<script>alert(1)</script>'],
    merchant_pin_kind: 'merchant-id',
    cap_minor: '100000',
    per_tx_cap_minor: '100000',
    currency: 'BRL',
    expires_at: Math.floor(Date.now() / 1000) + 86_400,
  })
).json();
await inject('POST', '/v1/policies', { name: 'a person decides', type: 'approval-required' });

const hits: { headers: http.IncomingHttpHeaders; body: string }[] = [];
const receiver = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    hits.push({ headers: req.headers, body });
    res.end();
  });
});
await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
t.teardown(() => new Promise<void>((r) => receiver.close(() => r())));

async function until<T>(f: () => Promise<T | undefined> | T | undefined, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 25));
  }
}

t.test('approval.requested is delivered to a subscribed endpoint', async (t) => {
  const ep = await inject('POST', '/v1/webhook-endpoints', { event: 'approval.requested', name: 'approvals', webhook_url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook` });
  t.equal(ep.statusCode, 201);
  await ledger.settle();
  const held = await inject('POST', `/v1/consumers/mandates/${mandate.id}/spend`, { amount_minor: '500', currency: 'BRL', merchant: '<script>alert(1)</script>' });
  t.equal(held.statusCode, 403);
  const hit = await until(() => hits.find((h) => h.body.includes(held.json().approval_id)));
  t.equal(hit.headers['x-svc-event'], 'approval.requested');
});

const chromium = await findChromium();
t.test('the page shows the held input as text and decides', chromium ? {} : { skip: 'no Chromium found (CHROMIUM_PATH, /usr/bin/chromium or @sparticuz/chromium): the approval page browser test did not run' }, async (t) => {
  const held = (await inject('POST', `/v1/consumers/mandates/${mandate.id}/spend`, { amount_minor: '700', currency: 'BRL', merchant: '<script>alert(1)</script>' })).json();
  t.equal((await inject('GET', `/v1/approvals/${held.approval_id}/page`)).json().error.code, 'human_session_required', 'an API key cannot open it');
  const address = await app.listen({ port: 0, host: '127.0.0.1' });
  const browser = await launchChromium();
  t.teardown(() => browser.close());
  const context = await browser.newContext({ extraHTTPHeaders: { authorization: org.owner.authorization!, 'x-svc-user': org.owner['x-svc-user']! } });
  const page = await context.newPage();
  let dialogs = 0;
  page.on('dialog', (d) => {
    dialogs++;
    void d.dismiss();
  });
  const res = await page.goto(`${address}/v1/approvals/${held.approval_id}/page`);
  t.equal(res?.status(), 200);
  t.equal(await page.textContent('#tool'), 'mandate.spend');
  const input = JSON.parse((await page.textContent('#input')) ?? '{}');
  t.same(input, { mandate_id: mandate.id, amount_minor: '700', currency: 'BRL', merchant: '<script>alert(1)</script>', description: null, channel: 'api' }, 'the verbatim input, rendered as text');
  t.equal(dialogs, 0, 'nothing in the input ran');
  await page.fill('input[name=reason]', 'looks right');
  const [answer] = await Promise.all([page.waitForNavigation(), page.click('#approve')]);
  t.equal(answer?.status(), 200);
  const decided = JSON.parse((await page.textContent('body')) ?? '{}');
  t.match(decided, { id: held.approval_id, status: 'approved', decision_reason: 'looks right', execution_result: { decision: 'approved', amount_minor: '700' } });
  await page.goto(`${address}/v1/approvals/${held.approval_id}/page`);
  t.match(await page.textContent('#decided'), /Already approved/);
});
