import type { Browser, BrowserContext, Page } from 'playwright-core';
import { AxeBuilder } from '@axe-core/playwright';
import type { Test } from 'tap';
import type { FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import { launchChromium } from '../../src/adapters/browser/chromium.ts';
import { until } from '../helpers/wait.ts';

// What the dashboard's browser tests share: one Chromium per test file (the
// headless shell when it runs here: the same engine for half the CPU; passkeys
// launch a full one), a context per person (never closed before the browser: a
// Chromium run --single-process ends when a context closes), sign-in with the
// code read from the sandbox outbox, an axe check, and the horizontal-scroll
// check at a width.

export async function chromium(t: Test): Promise<Browser> {
  const browser = await launchChromium('shell');
  t.teardown(() => browser.close());
  return browser;
}

export async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

type Outbox = { messages: { to: string; subject: string; text: string; code: string; sent_at: string }[] };

/** The newest sign-in code the sandbox outbox holds for an address, after `count` earlier ones. */
export async function codeFor(sandboxUrl: string, email: string, seen = 0): Promise<{ code: string; link: string }> {
  const box = await until(async () => {
    const r = (await (await fetch(`${sandboxUrl}/_sandbox/outbox?email=${encodeURIComponent(email)}`)).json()) as Outbox;
    const dash = r.messages.filter((m) => m.subject === 'Your dashboard sign-in code');
    return dash.length > seen ? dash : undefined;
  }, `a sign-in code mailed to ${email}`);
  const m = box[0]!;
  return { code: m.code, link: /https?:\/\/\S+/.exec(m.text)![0] };
}

/** Signs a person in through the pages (e-mail, then the code from the outbox); the page ends on the dashboard. */
export async function signIn(context: BrowserContext, base: string, sandboxUrl: string, email: string): Promise<Page> {
  const page = await context.newPage();
  const before = await countCodes(sandboxUrl, email);
  await page.goto(`${base}/dashboard/sign-in`);
  await page.fill('#email', email);
  await page.click('#send-code');
  await page.waitForURL(/\/dashboard\/sign-in\/code/);
  const { code } = await codeFor(sandboxUrl, email, before);
  await page.fill('#code', code);
  await page.click('#sign-in');
  await page.waitForSelector('#notice:has-text("You are signed in.")');
  return page;
}

async function countCodes(sandboxUrl: string, email: string): Promise<number> {
  const r = (await (await fetch(`${sandboxUrl}/_sandbox/outbox?email=${encodeURIComponent(email)}`)).json()) as Outbox;
  return r.messages.filter((m) => m.subject === 'Your dashboard sign-in code').length;
}

/** axe-core's violations on the page as it is (none expected). */
export async function axeViolations(page: Page): Promise<string[]> {
  const r = await new AxeBuilder({ page }).analyze();
  return r.violations.map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`);
}

/** Whether the page scrolls sideways at its current width. */
export async function scrollsSideways(page: Page): Promise<boolean> {
  return page.evaluate(() => document.documentElement.scrollWidth > document.documentElement.clientWidth);
}
