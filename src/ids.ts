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

export function newId(prefix: string, length = 16): string {
  return `${prefix}_${randomString(length)}`;
}
