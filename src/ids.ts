import { randomBytes } from 'node:crypto';

// Resource ids: a prefix and 16 characters of a URL-safe alphabet (spec: `prj_`
// followed by 16 characters). 16 characters of 62 carry ~95 bits.

const ALPHABET = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';

/** `length` random characters of [A-Za-z0-9], without modulo bias. */
export function randomString(length: number): string {
  let s = '';
  while (s.length < length) {
    for (const b of randomBytes(length * 2)) {
      if (b < 248 && s.length < length) s += ALPHABET[b % 62]; // 248 = 4 * 62
    }
  }
  return s;
}

// Resource ids are not secrets (keys and tokens use randomString): they draw
// from a pool of random bytes refilled a few kilobytes at a time, rather than
// asking the system for 32 bytes per id.
const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let offset = 0;

/** Where `n` unused bytes of the pool start (refilled when fewer remain). */
function take(n: number): number {
  if (pool.length - offset < n) {
    pool = randomBytes(Math.max(POOL_BYTES, n));
    offset = 0;
  }
  offset += n;
  return offset - n;
}

export function newId(prefix: string, length = 16): string {
  let s = '';
  while (s.length < length) {
    const b = pool[take(1)]!;
    if (b < 248) s += ALPHABET[b % 62]; // 248 = 4 * 62
  }
  return `${prefix}_${s}`;
}

/** `n` random bytes as hex from the same pool (salts: unpredictable, never a credential). */
export function pooledHex(n: number): string {
  const at = take(n);
  return pool.toString('hex', at, at + n);
}
