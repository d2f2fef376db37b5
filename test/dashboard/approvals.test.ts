import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import type { BrowserContext } from 'playwright-core';
import { findChromium } from '../../src/adapters/browser/chromium.ts';
import { bootstrapOrg } from '../helpers/app.ts';
import { call, testCluster } from '../helpers/cluster.ts';
import { until } from '../helpers/wait.ts';
import { axeViolations, chromium, scrollsSideways, signIn } from './browser.ts';

// Approvals in real Chromium, on two instances: an agent's spend held by a
// policy appears in two people's queues (one browser on each instance), one
// approves, both pages update by themselves, the agent's call runs once, the
// chain holds the approval with the person as actor, and a second decision on
// a stale page (no JavaScript) is told who decided first. The hold's 403 and
// the approval webhook carry the page's URL. An instance that stops ends the
// pages' streams and their connections at once.

if (!(await findChromium())) {
  t.skip('no Chromium found (CHROMIUM_PATH, /usr/bin/chromium or @sparticuz/chromium): the approvals page tests did not run', async () => {});
} else {
  const cluster = await testCluster(t, { webhookWorker: true, providers: true });
  const { app, ledger } = cluster.first;
  const [one, two] = cluster.urls as [string, string];
  const org = await bootstrapOrg(app, 'Approvers');
  const inject = (method: 'GET' | 'POST', url: string, payload?: Record<string, unknown>, headers: Record<string, string> = org.key) => app.inject({ method, url, headers, ...(payload ? { payload } : {}) });
  const admin = (await inject('POST', '/v1/team/members', { email: 'ada@approvers.example', role: 'admin' }, org.owner)).json();

  /** An agent with a mandate under an approval-required policy, in the organization and project `headers` name: its spends are held. */
  async function heldSpends(headers: Record<string, string>) {
    const post = async (url: string, payload: Record<string, unknown>) => (await app.inject({ method: 'POST', url, headers, payload })).json();
    await post('/v1/agents', { agent_id: 'buyer', principal_ref: 'p' });
    const consumer = await post('/v1/consumers', { display_name: 'Ana' });
    const mandate = await post('/v1/mandates', {
      consumer_id: consumer.id,
      agent_id: 'buyer',
      purpose: 'groceries',
      merchant_allowlist: ['<script>alert(1)</script>'],
      merchant_pin_kind: 'merchant-id',
      cap_minor: '100000',
      per_tx_cap_minor: '100000',
      currency: 'BRL',
      expires_at: Math.floor(Date.now() / 1000) + 86_400,
    });
    const policy = await post('/v1/policies', { name: 'a person decides', type: 'approval-required' });
    const spend = (amount: string) => call(cluster.balancer.url, 'POST', `/v1/consumers/mandates/${mandate.id}/spend`, headers, { amount_minor: amount, currency: 'BRL', merchant: '<script>alert(1)</script>' });
    return { mandate, policy, spend };
  }
  const { mandate, policy, spend } = await heldSpends(org.key);

  const hits: string[] = [];
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      hits.push(body);
      res.end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => receiver.close(() => r())));
  await inject('POST', '/v1/webhook-endpoints', { event: 'approval.requested', name: 'approvals', webhook_url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook` });
  await ledger.settle();

  const browser = await chromium(t);
  const sandbox = cluster.first.sandboxProviders!.url;
  /** A context signed in as `email` through the pages, on instance `base`, its page back on `path`. */
  const person = async (email: string, base: string, opts: { javaScriptEnabled?: boolean } = {}) => {
    const context: BrowserContext = await browser.newContext(opts);
    return { context, page: await signIn(context, base, sandbox, email) };
  };

  t.test('the hold links the approval page: in its 403 and in the approval webhook', async (t) => {
    const held = await spend('300');
    t.equal(held.status, 403);
    t.match(held.body, { reason: 'approval_required', ruleType: 'approval-required', ruleId: policy.id, approval_id: /^apr_/, expires_at: String });
    t.equal(held.body.approval_url, `http://127.0.0.1:8080/dashboard/approvals/${held.body.approval_id}`);
    const hit = JSON.parse(await until(() => hits.find((h) => h.includes(held.body.approval_id)), 'the approval.requested delivery'));
    t.equal(hit.payload.approval_url, held.body.approval_url);
  });

  t.test('two people, two instances: held, both queues show it, one approves, both update, the call runs once', async (t) => {
    // The owner on the first instance, the admin on the second; a session made on one is honoured on the other.
    const { page: a } = await person('owner+approvers@example.com', one);
    const { page: b } = await person('ada@approvers.example', two);
    const { page: late } = await person('ada@approvers.example', one, { javaScriptEnabled: false });
    let dialogs = 0;
    for (const p of [a, b]) p.on('dialog', (d) => void (dialogs++, d.dismiss()));
    await a.goto(`${one}/dashboard/approvals`);
    await b.goto(`${two}/dashboard/approvals`);
    await a.waitForSelector('#live[data-live="connected"]');
    await b.waitForSelector('#live[data-live="connected"]');

    const held = await spend('700');
    t.equal(held.status, 403);
    const id = held.body.approval_id as string;
    const row = `#pending a[data-approval="${id}"]`;
    await a.waitForSelector(row);
    await b.waitForSelector(row);
    t.match(await b.textContent(row), /Spend 7\.00 BRL at <script>alert\(1\)<\/script>/, 'what is asked, as text');

    // A page opened before the decision, without JavaScript: it will post a stale decision.
    await late.goto(`${two}/dashboard/approvals/${id}`);
    t.ok(await late.isVisible('#deny'));

    await a.click(row);
    // Live: its stream connected once htmx wired the regions it refreshes (src/dashboard/assets/live.js).
    await a.waitForSelector('#live[data-live="connected"]');
    t.equal(await a.textContent('#tool'), 'mandate.spend');
    t.same(JSON.parse((await a.textContent('#input')) ?? '{}'), { mandate_id: mandate.id, amount_minor: '700', currency: 'BRL', merchant: '<script>alert(1)</script>', description: null, channel: 'api' }, 'the verbatim input');
    await a.fill('#reason', 'looks right');
    // A live refresh while the person types (another approval's event, the stream's reconnection) keeps what they typed.
    await a.evaluate(() => {
      document.getElementById('approval-live')!.setAttribute('data-before-refresh', '');
      document.body.dispatchEvent(new CustomEvent('approvals-changed'));
    });
    await a.waitForSelector('#approval-live:not([data-before-refresh])');
    t.equal(await a.inputValue('#reason'), 'looks right', 'the reason being typed survives a live refresh');
    await a.click('#approve');
    await a.waitForSelector('#decided');
    t.match(await a.textContent('#notice'), /Approved; the held call ran/);
    t.match(await a.textContent('#decided'), /Approved by owner\+approvers@example\.com .*looks right/);

    // The other person's queue, on the other instance, moved by itself.
    await b.waitForSelector(`#history a[data-approval="${id}"]`);
    t.equal(await b.$(row), null, 'no longer pending');
    t.match(await b.textContent('#notice'), new RegExp(`${id} is now approved`));

    await late.click('#deny');
    t.match(await late.textContent('#notice'), /Already approved by owner\+approvers@example\.com: your decision was not recorded/);
    t.equal(dialogs, 0, 'nothing in the input ran');

    // The agent's answer: the approval carries the executed spend, once.
    const approval = (await inject('GET', `/v1/approvals/${id}`)).json();
    t.match(approval, { status: 'approved', decided_by: org.ownerId, decision_reason: 'looks right', execution_result: { decision: 'approved', amount_minor: '700' } });
    const events = await ledger.store.readStream(`approval-${id}`);
    t.same(events.map((e) => e.type), ['approval.requested', 'approval.approved', 'approval.executed'], 'decided once, executed once');

    // The chain holds the approval with the person as actor.
    await ledger.settle();
    // Either format's entry (docs/audit-chain.md): v1's copy with its envelope, v2's linked event itself.
    type Entry = { event_type: string; envelope: string; payload: Record<string, unknown> } | { format: 2; event: { event_type: string; metadata: { actor: unknown }; data: Record<string, unknown> } };
    const entries = ((await inject('GET', '/v1/audit-events/entries?limit=1000')).json().entries as Entry[]).map((e) =>
      'event' in e ? { type: e.event.event_type, data: e.event.data, actor: e.event.metadata.actor } : { type: e.event_type, data: e.payload, actor: (JSON.parse(e.envelope) as { actor: unknown }).actor },
    );
    const sealed = entries.find((e) => e.type === 'approval.approved' && e.data.approval_id === id);
    t.same(sealed?.actor, { kind: 'user', id: org.ownerId });
  });

  t.test('a member sees the queue but cannot decide, by the page or by URL', async (t) => {
    const member = (await inject('POST', '/v1/team/members', { email: 'mo@approvers.example', role: 'member' }, org.owner)).json();
    const held = await spend('900');
    t.ok(member.user_id);
    const { page: p } = await person('mo@approvers.example', one);
    await p.goto(`${one}/dashboard/approvals/${held.body.approval_id}`);
    t.ok(await p.isVisible('#cannot-decide'));
    const csrf = await p.getAttribute('meta[name="csrf-token"]', 'content');
    const res = await p.request.post(`${one}/dashboard/approvals/${held.body.approval_id}/decide`, { form: { _csrf: csrf!, decision: 'approve', reason: '' }, headers: { origin: one } });
    t.equal(res.status(), 403);
    t.equal((await inject('GET', `/v1/approvals/${held.body.approval_id}`)).json().status, 'pending', 'nothing changed');
  });

  t.test("the stream carries this organization's approvals of this project only, from every instance", async (t) => {
    const others = await heldSpends((await bootstrapOrg(app, 'Others')).key);
    const project = (await inject('POST', '/v1/projects', { name: 'Side', slug: 'side' })).json();
    const side = await heldSpends({ ...org.key, 'x-svc-project': project.id });
    const { context } = await person('owner+approvers@example.com', one);
    const cookie = (await context.cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
    const abort = new AbortController();
    t.teardown(() => abort.abort());
    const res = await fetch(`${two}/dashboard/approvals/events`, { headers: { cookie }, signal: abort.signal });
    t.equal(res.headers.get('content-type'), 'text/event-stream; charset=utf-8');
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = '';
    const nextEvent = async () => {
      for (;;) {
        const m = /event: approval\ndata: (.*)\n\n/.exec(text);
        if (m) {
          text = text.slice(m.index + m[0].length);
          return JSON.parse(m[1]!);
        }
        const { value, done } = await reader.read();
        if (done) throw new Error('the stream ended');
        text += value;
      }
    };
    t.equal((await others.spend('100')).status, 403, "another organization's hold");
    t.equal((await side.spend('100')).status, 403, "another project's hold");
    const mine = await spend('100');
    t.equal(mine.status, 403);
    t.same(await nextEvent(), { id: mine.body.approval_id, status: 'pending', decided_by_email: null }, 'the first event is this project\'s: the others were never sent');
  });

  t.test('the queue grows by cursor: 50 held calls a page, the next page continues after the last, nothing twice', async (t) => {
    const pager = await bootstrapOrg(app, 'Pager');
    const { spend: hold } = await heldSpends(pager.key);
    for (let i = 0; i < 53; i += 10) await Promise.all(Array.from({ length: Math.min(10, 53 - i) }, (_, j) => hold(String(1 + i + j))));
    await ledger.settle();
    const { page: p } = await person('owner+pager@example.com', one);
    await p.goto(`${one}/dashboard/approvals`);
    const first = await p.locator('#pending [data-approval]').evaluateAll((xs) => xs.map((x) => x.getAttribute('data-approval')));
    t.equal(first.length, 50, 'the first page lists 50');
    await p.getByRole('link', { name: 'Next held calls →' }).click();
    await p.waitForURL(/pending_after=/);
    const second = await p.locator('#pending [data-approval]').evaluateAll((xs) => xs.map((x) => x.getAttribute('data-approval')));
    t.equal(second.length, 3, 'the second page lists the other 3');
    t.same(second.filter((id) => first.includes(id)), [], 'no held call on both pages');
    t.equal(await p.getByRole('link', { name: 'Next held calls →' }).count(), 0, 'the last page offers no next page');
    await p.getByRole('link', { name: '← First held calls' }).click();
    await p.waitForURL((u) => !u.search.includes('pending_after'));
    t.equal(await p.locator('#pending [data-approval]').count(), 50, 'back to the first page');
  });

  t.test('axe-core finds nothing on the queue and on one approval; no sideways scrolling at 375 and 1440 px', async (t) => {
    const { page: p } = await person('owner+approvers@example.com', two);
    const held = await spend('1100');
    for (const path of ['/dashboard/approvals', `/dashboard/approvals/${held.body.approval_id}`]) {
      for (const width of [375, 1440]) {
        await p.setViewportSize({ width, height: 900 });
        await p.goto(`${two}${path}`);
        t.notOk(await scrollsSideways(p), `${path} at ${width} px: no sideways scrolling`);
        t.same(await axeViolations(p), [], `${path} at ${width} px: axe-core`);
      }
    }
  });

  t.test('an instance that stops ends a person\'s stream and closes its connection at once (its stop is not held for the keep-alive timeout)', async (t) => {
    const { context } = await person('owner+approvers@example.com', one);
    const cookie = (await context.cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
    const port = Number(new URL(two).port);
    let text = '';
    let closedByServer = false;
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = http.get({ host: '127.0.0.1', port, path: '/dashboard/approvals/events', headers: { cookie }, agent: new http.Agent({ keepAlive: true }) }, resolve);
      req.on('error', reject);
      req.on('socket', (socket) => socket.once('end', () => void (closedByServer = true)));
    });
    res.setEncoding('utf8');
    res.on('data', (c: string) => void (text += c));
    const ended = new Promise<void>((resolve) => res.once('end', resolve));
    await until(() => text.includes(': open'), 'the stream opened');
    const stopping = cluster.stopSecond();
    await ended;
    t.match(text, /retry: 1000\n\n$/, 'the stream ends with the reconnection hint');
    await until(() => closedByServer, 'the server closing the stream\'s connection');
    t.ok(closedByServer, 'the connection is closed by the server, not left for keep-alive');
    await stopping;
  });
}
