import { createHash, createHmac } from 'node:crypto';
import canonicalizeJcs from 'canonicalize';

// Hashing and canonical encoding shared by the sealer and every verifier.
// SHA-256 runs on node:crypto (about 3x @noble/hashes here); a test holds both
// to identical bytes.

export function sha256(...parts: (Uint8Array | string)[]): Buffer {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
}

export function hmacSha256(key: Uint8Array, ...parts: (Uint8Array | string)[]): Buffer {
  const h = createHmac('sha256', key);
  for (const p of parts) h.update(p);
  return h.digest();
}

/** RFC 8785 (JCS) canonical JSON text. */
export function canonicalize(value: unknown): string {
  const text = canonicalizeJcs(value);
  if (text === undefined) throw new Error('value has no canonical JSON form');
  return text;
}
