import t from 'tap';
import type { Page } from 'playwright-core';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { until } from '../helpers/wait.ts';
import { axeViolations, chromium, listen, scrollsSideways, signIn } from './browser.ts';

// Team and API keys in a real Chromium: an owner creates a key, sees its
// secret once, uses it on /v1/whoami, revokes it and sees it refused; invites
// a member who signs in with a code and sees only what a member may; an
// admin meets the owner rules in words; every event names the person.

const { app, ledger, sandboxProviders } = await testApp(t, { providers: true });
const org = await bootstrapOrg(app, 'Teamco');
const owner = 'owner+teamco@example.com';
const base = await listen(app);
const sandbox = sandboxProviders!.url;
const browser = await chromium(t);
const ownerPage = await signIn(await browser.newContext(), base, sandbox, owner);

const whoami = (key: string) => fetch(`${base}/v1/whoami`, { headers: { authorization: `Bearer ${key}` } });
/**
 * A form POST from inside the page (its cookie, its origin, its CSRF token), as
 * a person who typed the action's URL would send it; the status of the answer.
 * (A real form, not fetch(): in the bundled single-process Chromium, fetch()
 * may carry another context's cookies.)
 */
async function postFrom(page: Page, path: string, fields: Record<string, string>): Promise<number> {
  const [response] = await Promise.all([
    page.waitForResponse((r) => new URL(r.url()).pathname === path && r.request().method() === 'POST'),
    page.waitForEvent('load'),
    page.evaluate(
      ({ path, fields }) => {
        const f = document.createElement('form');
        f.method = 'post';
        f.action = path;
        const csrf = document.querySelector('meta[name="csrf-token"]')?.getAttribute('content') ?? '';
        for (const [name, value] of Object.entries({ _csrf: csrf, ...fields })) {
          const input = document.createElement('input');
          input.type = 'hidden';
          input.name = name;
          input.value = value;
          f.append(input);
        }
        document.body.append(f);
        setTimeout(() => f.submit(), 0);
      },
      { path, fields },
    ),
  ]);
  return response.status();
}

t.test('a key: created, its secret shown once, used, revoked, refused', async (t) => {
  const page = ownerPage;
  await page.goto(`${base}/dashboard/keys`);
  await page.fill('#key-name', 'checkout agent');
  await page.click('#create-key-submit');
  const secret = (await page.textContent('#new-key-secret'))!.trim();
  t.match(secret, /^sk_test_[A-Za-z0-9]{32}$/);
  const who = await whoami(secret);
  t.equal(who.status, 200);
  const keyId = ((await who.json()) as { api_key_id: string }).api_key_id;
  t.same(await axeViolations(page), [], 'the page with the new secret passes axe');
  // Shown once: the list never has it again.
  await page.goto(`${base}/dashboard/keys`);
  t.equal(await page.locator('#created-key').count(), 0);
  t.notOk((await page.content()).includes(secret), 'the secret is not on the page any more');
  await until(async () => {
    await page.reload();
    return !(await page.locator('#keys tr', { hasText: 'checkout agent' }).innerText()).includes('never');
  }, 'the last use shows');
  await page.click(`#revoke-${keyId}`);
  await page.waitForSelector('#notice:has-text("The key is revoked")');
  t.equal((await whoami(secret)).status, 401, 'a revoked key is refused');
  const revoked = (await ledger.store.readStream(`org-${org.orgId}`)).find((e) => e.type === 'api_key.revoked' && (e.data as { key_id: string }).key_id === keyId)!;
  t.same((revoked.metadata as unknown as { actor: unknown }).actor, { kind: 'user', id: org.ownerId }, 'the person is the actor');
  // The live switch shows live keys (the bootstrap's one), not test ones.
  await page.click('#env-live');
  await page.waitForSelector('#notice:has-text("Showing live data.")');
  t.equal(await page.locator('#keys tbody tr').count(), 1);
  t.match(await page.textContent('#env-banner'), /Live data/);
  await page.click('#env-test');
});

t.test('an invited member signs in and sees only what a member may', async (t) => {
  await ownerPage.goto(`${base}/dashboard/team`);
  await ownerPage.fill('#invite-email', 'Bia@Example.com');
  await ownerPage.click('#invite-submit');
  await ownerPage.waitForSelector('#notice:has-text("bia@example.com is invited as member")');
  t.match(await ownerPage.textContent('#members'), 'bia@example.com');
  const added = (await ledger.store.readStream(`org-${org.orgId}`)).find((e) => e.type === 'user.added' && (e.data as { email: string }).email === 'bia@example.com')!;
  t.same((added.metadata as unknown as { actor: unknown }).actor, { kind: 'user', id: org.ownerId });

  const bia = await signIn(await browser.newContext(), base, sandbox, 'bia@example.com');
  await bia.goto(`${base}/dashboard/team`);
  t.equal(await bia.locator('#team-read-only').count(), 1, 'a read-only team page');
  t.equal(await bia.locator('#invite').count(), 0, 'no invite form');
  const keys = await bia.goto(`${base}/dashboard/keys`);
  t.equal(keys!.status(), 403, 'a member is refused the keys page');
  t.match(await bia.textContent('#role-refused'), 'needs the admin role');
  // By URL: an admin action answers 403 and changes nothing.
  const before = (await ledger.store.readStream(`org-${org.orgId}`)).length;
  t.equal(await postFrom(bia, '/dashboard/team/invite', { email: 'mallory@example.com', role: 'admin' }), 403);
  t.equal(await postFrom(bia, '/dashboard/keys', { name: 'mine', scopes: '*' }), 403);
  t.equal(await postFrom(bia, `/dashboard/team/${org.ownerId}/remove`, {}), 403);
  t.match(await bia.textContent('#role-refused'), 'needs the admin role', 'refused for the role, not the token');
  t.equal((await ledger.store.readStream(`org-${org.orgId}`)).length, before, 'nothing was written');
});

t.test('the owner rules, in words: an admin cannot make an owner; the last owner stays', async (t) => {
  await ownerPage.goto(`${base}/dashboard/team`);
  await ownerPage.fill('#invite-email', 'carl@example.com');
  await ownerPage.selectOption('#invite-role', 'admin');
  await ownerPage.click('#invite-submit');
  await ownerPage.waitForSelector('#notice:has-text("carl@example.com is invited as admin")');
  const carl = await signIn(await browser.newContext(), base, sandbox, 'carl@example.com');
  await carl.goto(`${base}/dashboard/team`);
  const biaId = await ownerPage.evaluate(() => [...document.querySelectorAll('#members tr')].find((r) => r.textContent?.includes('bia@'))?.querySelector('select')?.id.replace('role-', ''));
  t.match(biaId, /^usr_/);
  t.equal(await carl.locator(`#role-${biaId} option[value="owner"]`).count(), 0, 'an admin is not offered owner');
  t.equal(await postFrom(carl, `/dashboard/team/${biaId}/role`, { role: 'owner' }), 303);
  t.match(await carl.textContent('#notice'), 'Only an owner can make someone an owner');
  t.same(await axeViolations(carl), [], 'the team page with a refusal passes axe');
  // Carl, an admin, makes Bia an admin, and sets her a project override.
  await carl.selectOption(`#role-${biaId}`, 'admin');
  await carl.click(`#change-role-${biaId}`);
  await carl.waitForSelector('#notice:has-text("The role is now Admin.")');
  await carl.selectOption(`#project-role-${biaId}`, 'member');
  await carl.click(`#set-project-role-${biaId}`);
  await carl.waitForSelector('#notice:has-text("The role in this project is now Member.")');
  t.match(await carl.locator('#members tr', { hasText: 'bia@' }).innerText(), /override/);
  // The last owner cannot step down.
  await ownerPage.goto(`${base}/dashboard/team`);
  await ownerPage.selectOption(`#role-${org.ownerId}`, 'member');
  await ownerPage.click(`#change-role-${org.ownerId}`);
  await ownerPage.waitForSelector('#notice:has-text("at least one owner")');
  // Removing Bia: her session opens nothing any more.
  await ownerPage.click(`#remove-${biaId}`);
  await ownerPage.waitForSelector('#notice:has-text("The member was removed")');
  const kinds = (await ledger.store.readStream(`org-${org.orgId}`)).map((e) => e.type);
  t.ok(kinds.includes('user.role_changed') && kinds.includes('user.removed'));
});

t.test('Team and API keys at 375 and 1440 px: axe, no sideways scroll, keyboard', async (t) => {
  for (const width of [375, 1440]) {
    await ownerPage.setViewportSize({ width, height: 800 });
    for (const path of ['/dashboard/team', '/dashboard/keys', '/dashboard/account']) {
      await ownerPage.goto(`${base}${path}`);
      t.same(await axeViolations(ownerPage), [], `${path} at ${width}`);
      t.notOk(await scrollsSideways(ownerPage), `${path} at ${width}`);
    }
  }
  // By keyboard: the skip link is the first stop and leads to the main content.
  await ownerPage.goto(`${base}/dashboard/keys`);
  await ownerPage.keyboard.press('Tab');
  t.equal(await ownerPage.evaluate(() => document.activeElement?.textContent), 'Skip to main content');
  await ownerPage.keyboard.press('Enter');
  t.equal(await ownerPage.evaluate(() => document.activeElement?.id), 'main');
  // Typing a key's name and pressing Enter creates it.
  await ownerPage.focus('#key-name');
  await ownerPage.keyboard.type('keyboard key');
  await ownerPage.keyboard.press('Enter');
  await ownerPage.waitForSelector('#new-key-secret');
});
