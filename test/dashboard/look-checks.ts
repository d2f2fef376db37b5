import type { Page } from 'playwright-core';
import type { Test } from 'tap';
import { axeViolations, scrollsSideways } from './browser.ts';

// The one look's checks on a page already open in Chromium (the dashboard's
// and every page a person meets outside it): axe-core finds no violation, and
// the page does not scroll sideways on a phone (375 px) nor on a desktop
// (1440 px). The page is left at 1440 px. First: the stylesheet applies
// (the page's CSP allows it) and the page is in the shell.

/** The body's background of dashboard.css (--bg-alt): the stylesheet loaded and the page's CSP let it apply. */
const LOOK_BACKGROUND = 'rgb(244, 246, 248)';

export async function checkLook(t: Test, page: Page, what: string): Promise<void> {
  t.equal(await page.evaluate(() => getComputedStyle(document.body).backgroundColor), LOOK_BACKGROUND, `${what}: the dashboard's stylesheet applies`);
  t.equal(await page.locator('header.header .brand').count(), 1, `${what}: the shell's header`);
  for (const width of [375, 1440]) {
    await page.setViewportSize({ width, height: 900 });
    t.notOk(await scrollsSideways(page), `${what}: no horizontal scroll at ${width} px`);
  }
  t.same(await axeViolations(page), [], `${what}: axe-core finds no violation`);
}
