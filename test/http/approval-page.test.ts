import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { bootstrapOrg, testApp } from '../helpers/app.ts';

// Approvals reach people: `approval.requested` is delivered to the webhook
// endpoints subscribed to it with the link to the approval's page in the
// dashboard (approval_url, as in the hold's 403); the old header-only HTML
// page under /v1 is gone, and the dashboard's page needs a person's session
// (an API key or the platform secret opens nothing there). The page itself,
// in Chromium on two instances: test/dashboard/approvals.test.ts.

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

t.test('approval.requested is delivered to a subscribed endpoint, with the page to decide it', async (t) => {
  const ep = await inject('POST', '/v1/webhook-endpoints', { event: 'approval.requested', name: 'approvals', webhook_url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook` });
  t.equal(ep.statusCode, 201);
  await ledger.settle();
  const held = await inject('POST', `/v1/consumers/mandates/${mandate.id}/spend`, { amount_minor: '500', currency: 'BRL', merchant: '<script>alert(1)</script>' });
  t.equal(held.statusCode, 403);
  const url = `http://127.0.0.1:8080/dashboard/approvals/${held.json().approval_id}`;
  t.equal(held.json().approval_url, url, 'the hold links the page');
  const hit = await until(() => hits.find((h) => h.body.includes(held.json().approval_id)));
  t.equal(hit.headers['x-svc-event'], 'approval.requested');
  t.match(JSON.parse(hit.body), { event_type: 'approval.requested', payload: { approval_id: held.json().approval_id, approval_url: url } });
});

t.test('the old page is gone; the dashboard page needs a session', async (t) => {
  const held = (await inject('POST', `/v1/consumers/mandates/${mandate.id}/spend`, { amount_minor: '700', currency: 'BRL', merchant: '<script>alert(1)</script>' })).json();
  t.equal((await inject('GET', `/v1/approvals/${held.approval_id}/page`, undefined, org.owner)).statusCode, 404, 'no HTML page under /v1');
  for (const headers of [org.key, org.owner, {}]) {
    const res = await inject('GET', `/dashboard/approvals/${held.approval_id}`, undefined, headers);
    t.equal(res.statusCode, 303, 'sent to sign in');
    t.match(res.headers.location, /^\/dashboard\/sign-in/);
    t.notMatch(res.body, held.approval_id, 'nothing of the approval shown');
  }
});
