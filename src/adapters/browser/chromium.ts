import fs from 'node:fs';
import type { Browser } from 'playwright-core';

// One way to start a headless Chromium for every feature that drives a browser
// (OAuth consent tests, the API reference page test, the browser worker).
// Order: CHROMIUM_PATH, Debian's /usr/bin/chromium, then the Chromium that
// ships inside the @sparticuz/chromium npm package (no download at install).

const DEBIAN_CHROMIUM = '/usr/bin/chromium';
const BASE_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];

let loaded: Promise<typeof import('playwright-core')> | undefined;

/** playwright-core, loaded on first use (~0.5 s of CPU that a process which never drives a browser does not pay). */
export const playwright = (): Promise<typeof import('playwright-core')> => (loaded ??= import('playwright-core'));

let resolved: Promise<{ executablePath: string; args: string[] } | null> | undefined;

/** Where a usable Chromium is, or null with no throw when there is none. */
export function findChromium(): Promise<{ executablePath: string; args: string[] } | null> {
  resolved ??= (async () => {
    const fromEnv = process.env.CHROMIUM_PATH;
    if (fromEnv && fs.existsSync(fromEnv)) return { executablePath: fromEnv, args: BASE_ARGS };
    if (fs.existsSync(DEBIAN_CHROMIUM)) return { executablePath: DEBIAN_CHROMIUM, args: BASE_ARGS };
    try {
      const mod = (await import('@sparticuz/chromium')).default;
      const executablePath = await mod.executablePath();
      return { executablePath, args: [...mod.args.filter((a: string) => !a.startsWith('--headless')), ...BASE_ARGS] };
    } catch {
      return null;
    }
  })();
  return resolved;
}

let shell: Promise<{ executablePath: string; args: string[] } | null> | undefined;

/**
 * The headless shell inside the @sparticuz/chromium npm package (Chromium's
 * headless-only build), with the common flags above and none of the package's
 * own (--single-process and the like); null when the package cannot give it.
 * No WebAuthn virtual authenticator. What a test drives as a person's browser
 * (test/dashboard/browser.ts): it renders the same pages for about half the
 * CPU of a full Chromium (docs/decisions.md, "Issue 60: the suite").
 */
export function findHeadlessShell(): Promise<{ executablePath: string; args: string[] } | null> {
  shell ??= (async () => {
    try {
      const mod = (await import('@sparticuz/chromium')).default;
      return { executablePath: await mod.executablePath(), args: BASE_ARGS };
    } catch {
      return null;
    }
  })();
  return shell;
}

/**
 * Launches headless Chromium: the one findChromium finds, or with 'shell' the
 * headless shell when it runs here (else the same). Throws
 * `Error('chromium_unavailable')` when none is found.
 */
export async function launchChromium(kind: 'default' | 'shell' = 'default'): Promise<Browser> {
  const found = (kind === 'shell' ? await findHeadlessShell() : null) ?? (await findChromium());
  if (!found) throw new Error('chromium_unavailable');
  return (await playwright()).chromium.launch({ executablePath: found.executablePath, args: [...new Set(found.args)], headless: true });
}
