import { randomBytes } from 'node:crypto';
import { z } from 'zod';

// Money sums that can pass 2^53 (a wallet's caps, a counterparty's payments)
// are bigint in memory and bare JSON integers on the wire: never rounded
// through a JS number, never a 500 for a large but valid total.

/**
 * The response schema of an integer of any size: a bigint in the body,
 * `{type: integer}` in the OpenAPI document, written as a bare JSON integer
 * by jsonText (so a client sees exactly the digits Postgres summed).
 */
export const ExactInt = z.bigint().meta({ type: 'integer' });

const DIGITS = /^-?\d+$/;

/**
 * JSON.stringify, except that a bigint is written as a bare integer literal
 * (JSON.stringify throws on one; Node 20 has no JSON.rawJSON). A body without
 * a bigint is JSON.stringify's text unchanged. With one, each bigint is first
 * written as a string holding a marker drawn at random for this call, then
 * every quoted marker is replaced by its digits: a string of the body cannot
 * carry a marker that did not exist when it was made, and the count of
 * replacements must equal the count of bigints, or nothing is answered.
 */
export function jsonText(value: unknown): string {
  try {
    return JSON.stringify(value);
  } catch (err) {
    // A bigint (or a cycle, which the second pass throws again).
    if (!(err instanceof TypeError)) throw err;
  }
  const marker = `\u0000exact-int-${randomBytes(16).toString('hex')}:`;
  let written = 0;
  const text = JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v !== 'bigint') return v;
    written++;
    return marker + v.toString();
  });
  // JSON.stringify writes the NUL of the marker as \u0000; hex, ':' and digits as they are.
  const quoted = JSON.stringify(marker).slice(0, -1);
  let replaced = 0;
  const out = text.split(quoted).map((part, i) => {
    if (i === 0) return part;
    const end = part.indexOf('"');
    const digits = part.slice(0, end);
    if (end < 0 || !DIGITS.test(digits)) throw new Error('jsonText: a marker without its digits');
    replaced++;
    return digits + part.slice(end + 1);
  });
  if (replaced !== written) throw new Error(`jsonText: ${written} bigints but ${replaced} markers`);
  return out.join('');
}
