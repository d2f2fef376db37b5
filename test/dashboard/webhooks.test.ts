import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import t from 'tap';
import { findChromium } from '../../src/adapters/browser/chromium.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { until } from '../helpers/wait.ts';
import { chromium, listen, signIn } from './browser.ts';
import { checkLook } from './look-checks.ts';

// The Webhooks pages in real Chromium, checked through the HTTP API and at a
// loopback receiver: an endpoint made on the page (its secret shown once),
// failing deliveries dead-lettered until the endpoint pauses itself (the page
// says why), resumed, a dead letter redelivered and landing at the receiver,
// the secret rotated and the next delivery verifying with the new one
// (Standard Webhooks, as docs/webhooks.md defines the signature), one
// delivery's request and response, a replay, pause; a member reads only.

if (!(await findChromium())) {
  t.skip('no Chromium found: the webhooks page tests did not run', async () => {});
} else {
  // No retries (a failed attempt is a dead letter) and a pause after 2 dead letters in a row: the walk needs no waiting on schedules.
  const { app, ledger, sandboxProviders } = await testApp(t, { providers: true, webhookWorker: true, webhooks: { scheduleMs: [], deadThreshold: 2 } });
  const org = await bootstrapOrg(app, 'Hookco');
  const api = async (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: Record<string, unknown>, headers: Record<string, string> = org.key) => {
    const r = await app.inject({ method, url, headers, ...(payload ? { payload } : {}) });
    return { status: r.statusCode, body: r.json() };
  };
  const member = (await api('POST', '/v1/team/members', { email: 'mo@hookco.example', role: 'member' }, org.owner)).body;

  let failing = true;
  const hits: { headers: Record<string, string>; body: string; path: string }[] = [];
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      if (req.url !== '/hook') return void res.writeHead(404).end();
      hits.push({ headers: req.headers as Record<string, string>, body, path: req.url });
      if (failing) res.writeHead(500, { 'content-type': 'text/plain' }).end('receiver down');
      else res.writeHead(200, { 'content-type': 'text/plain' }).end('thanks');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => receiver.close(() => r())));
  const hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

  const base = await listen(app);
  const browser = await chromium(t);
  const page = await signIn(await browser.newContext({ locale: 'en-US' }), base, sandboxProviders!.url, 'owner+hookco@example.com');
  const endpointOf = async (id: string) => (await api('GET', `/v1/webhook-endpoints/${id}`)).body;
  const newConsumer = async (name: string) => (await api('POST', '/v1/consumers', { display_name: name })).body as { id: string };
  let endpointId = '';
  let firstSecret = '';

  t.test('create an endpoint on the page: the secret is shown once', async (t) => {
    await page.goto(`${base}/dashboard/webhooks`);
    await checkLook(t, page, 'the webhooks page, empty');
    await page.fill('#endpoint-name', 'orders');
    await page.selectOption('#endpoint-event', 'consumer.created');
    await page.fill('#endpoint-url', hookUrl);
    await page.click('#create-endpoint-submit');
    firstSecret = (await page.textContent('#new-secret'))!.trim();
    t.match(firstSecret, /^whsec_[A-Za-z0-9+/=]{40,}$/);
    endpointId = (await page.getAttribute('a[data-endpoint]', 'data-endpoint'))!;
    const e = await endpointOf(endpointId);
    t.match(e, { name: 'orders', event: 'consumer.created', webhook_url: hookUrl, status: 'active', signing_enabled: true }, 'the API has it');
    await page.goto(`${base}/dashboard/webhooks`);
    t.notOk((await page.content()).includes(firstSecret), 'the secret is not shown again');
  });

  t.test('failures dead-letter, the endpoint pauses itself and the page says why; resumed, a dead letter is redelivered and lands', async (t) => {
    await newConsumer('Ana');
    await newConsumer('Bia');
    await until(async () => (await endpointOf(endpointId)).status === 'error', 'the endpoint paused after 2 dead letters');
    await page.goto(`${base}/dashboard/webhooks/${endpointId}`);
    t.match(await page.textContent('#auto-paused'), /Its last 2 deliveries failed every attempt.*answered 500/s, 'why it paused, in words');
    t.equal(await page.locator('#dead-letters tbody tr').count(), 2, 'two dead letters');
    await page.waitForSelector('#deliveries-chart canvas');
    t.match(await page.textContent('#hours-table'), /2/, 'the failed attempts are counted per hour');
    await checkLook(t, page, 'an auto-paused endpoint');

    failing = false;
    await page.click('#resume');
    await page.waitForSelector('#notice:has-text("Resumed")');
    t.equal((await endpointOf(endpointId)).status, 'active', 'the API reads it active');

    const deadId = (await page.getAttribute('#dead-letters tbody tr:first-child a[data-delivery]', 'data-delivery'))!;
    const dead = (await api('GET', `/v1/webhook-endpoints/${endpointId}/deliveries/${deadId}`)).body;
    const before = hits.length;
    await page.click(`#redeliver-${deadId}`);
    await page.waitForSelector('#notice:has-text("Queued again")');
    const landed = await until(() => hits.slice(before).find((h) => h.headers['x-svc-event-id'] === dead.delivery.event_id), 'the redelivery at the receiver');
    t.equal(JSON.parse(landed.body).id, dead.delivery.event_id, 'the dead letter’s event landed');
    const list = await until(async () => {
      const d = (await api('GET', `/v1/webhook-endpoints/${endpointId}/deliveries`)).body.deliveries as { event_id: string; status: string }[];
      return d.find((x) => x.event_id === dead.delivery.event_id && x.status === 'delivered');
    }, 'the API lists the redelivery delivered');
    t.ok(list);
  });

  t.test('rotate the secret: shown once, and the next delivery verifies with the new one', async (t) => {
    await page.goto(`${base}/dashboard/webhooks/${endpointId}`);
    await page.click('#rotate');
    const secret = (await page.textContent('#new-secret'))!.trim();
    t.match(secret, /^whsec_/);
    t.not(secret, firstSecret);
    await page.goto(`${base}/dashboard/webhooks/${endpointId}`);
    t.notOk((await page.content()).includes(secret), 'not shown again');
    const rotated = (await ledger.store.readStream(`webhook_endpoint-${endpointId}`)).at(-1)!;
    t.equal(rotated.type, 'webhook_endpoint.secret_rotated');
    t.match(rotated.metadata, { actor: { kind: 'user', id: org.ownerId }, project_id: org.projectId }, 'recorded with the person as actor, in the project');
    t.notOk(JSON.stringify([rotated.data, rotated.metadata]).includes(secret.slice(6)), 'the secret is not in the event');
    const before = hits.length;
    const c = await newConsumer('Cid');
    const hit = await until(() => hits.slice(before).find((h) => h.body.includes(c.id)), 'the next delivery');
    const headers = { 'webhook-id': hit.headers['webhook-id']!, 'webhook-timestamp': hit.headers['webhook-timestamp']!, 'webhook-signature': hit.headers['webhook-signature']! };
    t.doesNotThrow(() => new Webhook(secret).verify(hit.body, headers), 'signed with the new secret');
    const onlyNew = headers['webhook-signature'].split(' ').filter((s) => {
      try {
        new Webhook(secret).verify(hit.body, { ...headers, 'webhook-signature': s });
        return true;
      } catch {
        return false;
      }
    });
    t.equal(onlyNew.length, 1, 'one of its signatures is the new secret’s (the old one signs beside it for 24 hours)');
  });

  t.test("a delivery's request and response; replay an event; pause", async (t) => {
    await page.goto(`${base}/dashboard/webhooks/${endpointId}`);
    await page.click('#deliveries tbody tr:first-child a[data-delivery]');
    await page.waitForSelector('#request-body');
    const sent = JSON.parse((await page.textContent('#request-body'))!);
    t.equal(sent.event_type, 'consumer.created', 'the payload as sent');
    t.equal((await page.textContent('#response-status'))!.trim(), '200');
    t.equal((await page.textContent('#response-body'))!.trim(), 'thanks');
    t.match(await page.textContent('#request-headers'), /webhook-signature: v1,/);
    await checkLook(t, page, 'a delivery');

    await page.goto(`${base}/dashboard/webhooks/${endpointId}`);
    const before = hits.length;
    await page.fill('#replay-event', sent.id);
    await page.click('#replay-submit');
    await page.waitForSelector('#notice:has-text("replayed: 1 delivery queued")');
    await until(() => hits.slice(before).find((h) => h.headers['x-svc-event-id'] === sent.id), 'the replay at the receiver');
    await page.fill('#replay-event', '00000000-0000-4000-8000-000000000000');
    await page.click('#replay-submit');
    await page.waitForSelector('#notice.error:has-text("No stored event")');

    await page.click('#pause');
    await page.waitForSelector('#notice:has-text("Paused")');
    t.equal((await endpointOf(endpointId)).status, 'paused', 'the API reads it paused');
    await ledger.settle();
  });

  t.test('the chart reads the per-hour sums the dispatcher keeps: they equal the attempts it recorded, and the page shows them', async (t) => {
    const counted = await ledger.db.query<{ hour: string; delivered: number; failed: number }>(
      `SELECT to_char(date_trunc('hour', a.created_at AT TIME ZONE 'UTC'), 'YYYY-MM-DD"T"HH24') AS hour, count(*) FILTER (WHERE a.delivered)::int AS delivered, count(*) FILTER (WHERE NOT a.delivered)::int AS failed
       FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.trigger_id = $1 GROUP BY 1 ORDER BY 1`,
      [endpointId],
    );
    const kept = await ledger.db.query<{ hour: string; delivered: number; failed: number }>(
      `SELECT to_char(hour AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24') AS hour, delivered, failed FROM webhook_attempts_hourly WHERE trigger_id = $1 ORDER BY webhook_attempts_hourly.hour`,
      [endpointId],
    );
    t.ok(counted.rows.some((r) => r.delivered > 0) && counted.rows.some((r) => r.failed > 0), 'the walk recorded both outcomes');
    t.same(kept.rows, counted.rows, 'per hour, delivered and failed, as counted from the attempts');
    await page.goto(`${base}/dashboard/webhooks/${endpointId}`);
    const last = counted.rows.at(-1)!;
    t.match(await page.textContent('#hours-table'), new RegExp(`${last.delivered}[\\s\\S]*${last.failed}`), 'the page shows the hour’s sums');
  });

  t.test('a member reads, and cannot change', async (t) => {
    t.ok(member.user_id);
    const mo = await signIn(await browser.newContext({ locale: 'en-US' }), base, sandboxProviders!.url, 'mo@hookco.example');
    await mo.goto(`${base}/dashboard/webhooks/${endpointId}`);
    t.ok(await mo.isVisible('#cannot-write'));
    t.equal(await mo.locator('#rotate').count(), 0);
    const status = await mo.evaluate(async (url) => {
      const csrf = document.querySelector('meta[name="csrf-token"]')!.getAttribute('content')!;
      return (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: `_csrf=${encodeURIComponent(csrf)}&status=active` })).status;
    }, `${base}/dashboard/webhooks/${endpointId}/status`);
    t.equal(status, 403, 'refused');
    t.equal((await endpointOf(endpointId)).status, 'paused', 'nothing changed');
  });
}
