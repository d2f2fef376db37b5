import { randomString } from '../ids.ts';

// The shapes of OAuth secrets. Each names its grant (`ogr_<16>`) so the server
// finds the grant without a lookup by secret, then compares the SHA-256 of the
// whole secret in constant time. 43 characters of 62 carry ~256 bits.

const SECRET_CHARS = 43;
export type SecretKind = 'code' | 'access' | 'refresh';
const PREFIX: Record<SecretKind, string> = { code: 'oac', access: 'oat', refresh: 'ort' };
const PATTERN: Record<SecretKind, RegExp> = {
  code: /^oac_([A-Za-z0-9]{16})_[A-Za-z0-9]{43}$/,
  access: /^oat_([A-Za-z0-9]{16})_[A-Za-z0-9]{43}$/,
  refresh: /^ort_([A-Za-z0-9]{16})_[A-Za-z0-9]{43}$/,
};

export const newGrantId = () => `ogr_${randomString(16)}`;

export function mintSecret(kind: SecretKind, grantId: string): string {
  return `${PREFIX[kind]}_${grantId.slice(4)}_${randomString(SECRET_CHARS)}`;
}

/** The grant a well-formed secret names, or null. */
export function grantOf(kind: SecretKind, secret: string): string | null {
  const m = PATTERN[kind].exec(secret);
  return m ? `ogr_${m[1]}` : null;
}

export const ACCESS_TOKEN_PATTERN = PATTERN.access;
