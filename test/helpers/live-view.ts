import type { Page } from 'playwright-core';
import { until } from './wait.ts';

/**
 * Waits until the live view's frames are of the remote page laid out at the
 * width the view asked for (its image's width: the view sends a resize when it
 * opens). Until then a click mapped with the frame's width lands elsewhere on
 * the resized page, as it would for a person clicking at that moment.
 */
export async function remoteLaidOut(page: Page): Promise<void> {
  const wanted = await page.evaluate(() => Math.min(1920, Math.round(document.getElementById('screen')!.getBoundingClientRect().width) - 2));
  await until(async () => Number(await page.getAttribute('#screen', 'data-width')) === wanted, `the remote page laid out at the view's ${wanted} px`);
}

/** Clicks the middle of a box of the remote page (CSS pixels) through the live view's image, as a person does. */
export async function clickThrough(page: Page, b: { x: number; y: number; w: number; h: number }): Promise<void> {
  const box = (await page.locator('#screen').boundingBox())!;
  const scale = box.width / Number(await page.getAttribute('#screen', 'data-width'));
  await page.mouse.click(box.x + (b.x + b.w / 2) * scale, box.y + (b.y + b.h / 2) * scale);
}
