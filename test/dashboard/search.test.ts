import t from 'tap';
import { findChromium } from '../../src/adapters/browser/chromium.ts';
import { testApp } from '../helpers/app.ts';
import { spendingOrg } from './spending.ts';
import { chromium, listen, signIn } from './browser.ts';
import { checkLook } from './look-checks.ts';

// Search in real Chromium: the box in the shell's header (on every page)
// takes an id of any kind and opens its page (/dashboard/<family>/<id>); an id
// nobody made, or one of another organization, is "nothing found", the same
// words for both. The search page: axe-core clean, no sideways scroll.

if (!(await findChromium())) {
  t.skip('no Chromium found (CHROMIUM_PATH, /usr/bin/chromium or @sparticuz/chromium): the search tests did not run', async () => {});
} else {
  const { app, ledger, sandboxProviders } = await testApp(t, { providers: true });
  const seed = async (name: string) => {
    const { org, post, consumer, mandate } = await spendingOrg(app, name, `buyer-${name.toLowerCase()}`);
    const policy = await post('/v1/policies', { name: `${name} rule`, type: 'deny', tools: ['x402.*'] });
    return { org, consumer, mandate, policy };
  };
  const mine = await seed('Findco');
  const theirs = await seed('Otherco');

  const base = await listen(app);
  const browser = await chromium(t);
  const page = await signIn(await browser.newContext({ locale: 'en-US' }), base, sandboxProviders!.url, 'owner+findco@example.com');

  /** Types `text` in the header's box on the page open now and submits it; the URL the browser lands on. */
  async function find(text: string): Promise<URL> {
    await page.fill('#search-q', text);
    await Promise.all([page.waitForEvent('framenavigated'), page.press('#search-q', 'Enter')]);
    await page.waitForLoadState('domcontentloaded');
    return new URL(page.url());
  }

  t.test('an id of each kind opens its page', async (t) => {
    await page.goto(`${base}/dashboard`);
    t.equal(await page.locator('header form[role="search"] #search-q').count(), 1, 'the box is in the header');
    t.equal((await find(mine.policy.id)).pathname, `/dashboard/policies/${mine.policy.id}`);
    t.match(await page.textContent('h1'), 'Findco rule', 'the policy page itself');
    t.equal((await find(`  ${mine.mandate.id} `)).pathname, `/dashboard/mandates/${mine.mandate.id}`, 'a mandate, spaces trimmed');
    await page.goto(`${base}/dashboard/policies`);
    t.equal((await find(mine.consumer.id)).pathname, `/dashboard/consumers/${mine.consumer.id}`, 'a consumer, from another page');
    await page.goto(`${base}/dashboard`);
    t.equal((await find('buyer-findco')).pathname, '/dashboard/agents/buyer-findco', 'an agent by its handle');
  });

  t.test("an event id (a webhook's x-svc-event-id) opens the audit explorer at the event's entry", async (t) => {
    const eventOf = async (orgId: string) =>
      (await ledger.db.query<{ id: string }>(`SELECT event_id::text AS id FROM es_events WHERE event_type = 'mandate.created' AND metadata->>'org_id' = $1`, [orgId])).rows[0]!.id;
    await ledger.settle();
    await page.goto(`${base}/dashboard`);
    const at = await find(await eventOf(mine.org.orgId));
    t.equal(at.pathname, '/dashboard/audit', 'the audit page');
    const seq = at.hash.replace('#verify-', '');
    t.match(seq, /^\d+$/, 'at an entry of the chain');
    const row = page.locator(`tr:has(#verify-${seq})`);
    t.match(await row.textContent(), 'mandate.created', "the entry of the event's type is listed");
    const other = await eventOf(theirs.org.orgId);
    t.equal((await find(other)).pathname, '/dashboard/search', "another organization's event is nothing found");
  });

  t.test("another organization's id is nothing found, as an id nobody made", async (t) => {
    await page.goto(`${base}/dashboard`);
    for (const id of [theirs.policy.id, theirs.mandate.id, theirs.consumer.id, 'buyer-otherco', 'mdt_AAAAAAAAAAAAAAAA']) {
      const at = await find(id);
      t.equal(at.pathname, '/dashboard/search', id);
      t.equal((await page.textContent('#nothing-found'))!.replace(/\s+/g, ' ').trim().replace(id, 'ID'), 'Nothing found for ID in this organization. Check the id (copy it whole, with its prefix such as tc_, ses_ or mdt_), or switch to the organization that holds it.', `${id}: the same words`);
    }
    await checkLook(t, page, 'search');
    const r = await fetch(`${base}/dashboard/search?q=${theirs.mandate.id}`, { headers: { cookie: (await page.context().cookies()).map((c) => `${c.name}=${c.value}`).join('; ') }, redirect: 'manual' });
    t.equal(r.status, 404, 'answered 404, not a redirect');
  });
}
