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

function pooledByte(): number {
  if (offset >= pool.length) {
    pool = randomBytes(POOL_BYTES);
    offset = 0;
  }
  return pool[offset++]!;
}

export function newId(prefix: string, length = 16): string {
  let s = '';
  while (s.length < length) {
    const b = pooledByte();
    if (b < 248) s += ALPHABET[b % 62]; // 248 = 4 * 62
  }
  return `${prefix}_${s}`;
}

/** `n` random bytes as hex from the same pool (salts: unpredictable, never a credential). */
export function pooledHex(n: number): string {
  if (n > POOL_BYTES) return randomBytes(n).toString('hex');
  if (pool.length - offset < n) {
    pool = randomBytes(POOL_BYTES);
    offset = 0;
  }
  offset += n;
  return pool.toString('hex', offset - n, offset);
}
