// Waiting on a condition, never on the clock: tests must pass on a busy
// machine, so each wait polls its condition under a generous bound and fails
// with what it waited for.

export const GENEROUS_MS = 60_000;

/** Resolves with the first truthy value of `f`, polled every `everyMs`; throws after `ms`. */
export async function until<T>(f: () => Promise<T | undefined | null | false> | T | undefined | null | false, what = 'a condition', ms = GENEROUS_MS, everyMs = 25): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
