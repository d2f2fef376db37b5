// Pix value formats (Banco Central do Brasil): key types and their canonical
// forms, CPF/CNPJ check digits, txid, end-to-end id, amounts. Pure functions,
// shared by the deciders, the routes and the sandbox PSP.

export const KEY_TYPES = ['EVP', 'CPF', 'CNPJ', 'EMAIL', 'PHONE'] as const;
export type KeyType = (typeof KEY_TYPES)[number];

/** CPF: 11 digits, two mod-11 check digits; all-equal digits are invalid. */
export function isValidCpf(raw: string): boolean {
  const d = raw.replace(/[.\-\s]/g, '');
  if (!/^\d{11}$/.test(d) || /^(\d)\1{10}$/.test(d)) return false;
  const digit = (len: number) => {
    let sum = 0;
    for (let i = 0; i < len; i++) sum += Number(d[i]) * (len + 1 - i);
    const r = (sum * 10) % 11;
    return r === 10 ? 0 : r;
  };
  return digit(9) === Number(d[9]) && digit(10) === Number(d[10]);
}

/** CNPJ: 14 digits, two mod-11 check digits with weights 5..2,9..2 and 6..2,9..2. */
export function isValidCnpj(raw: string): boolean {
  const d = raw.replace(/[./\-\s]/g, '');
  if (!/^\d{14}$/.test(d) || /^(\d)\1{13}$/.test(d)) return false;
  const digit = (len: number) => {
    const weights = len === 12 ? [5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2] : [6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2];
    let sum = 0;
    for (let i = 0; i < len; i++) sum += Number(d[i]) * weights[i]!;
    const r = sum % 11;
    return r < 2 ? 0 : 11 - r;
  };
  return digit(12) === Number(d[12]) && digit(13) === Number(d[13]);
}

const EVP = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
// DICT: e-mail at most 77 characters; a conservative local@domain.tld.
const EMAIL = /^[a-z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+$/;
// Brazilian phone in E.164: +55, two-digit area code (11..99), 8 or 9 digits.
const PHONE = /^\+55[1-9][0-9]9?[0-9]{8}$/;

export type KeyCheck = { ok: true; key: string } | { ok: false; reason: string };

/**
 * The canonical form of a key of a type, or why it is not one. CPF and CNPJ
 * accept their punctuated forms and become digits; e-mail is lowercased; an
 * EVP is lowercased; a phone must already be E.164 (`+55...`).
 */
export function canonicalKey(type: KeyType, raw: string): KeyCheck {
  const v = raw.trim();
  switch (type) {
    case 'CPF': {
      const d = v.replace(/[.\-]/g, '');
      if (!/^\d{11}$/.test(d)) return { ok: false, reason: 'a CPF key is 11 digits' };
      return isValidCpf(d) ? { ok: true, key: d } : { ok: false, reason: 'the CPF check digits do not match' };
    }
    case 'CNPJ': {
      const d = v.replace(/[./\-]/g, '');
      if (!/^\d{14}$/.test(d)) return { ok: false, reason: 'a CNPJ key is 14 digits' };
      return isValidCnpj(d) ? { ok: true, key: d } : { ok: false, reason: 'the CNPJ check digits do not match' };
    }
    case 'EMAIL': {
      const e = v.toLowerCase();
      if (e.length > 77) return { ok: false, reason: 'an e-mail key is at most 77 characters' };
      return EMAIL.test(e) ? { ok: true, key: e } : { ok: false, reason: 'not an e-mail address' };
    }
    case 'PHONE':
      return PHONE.test(v) ? { ok: true, key: v } : { ok: false, reason: 'a phone key is +55, a two-digit area code and 8 or 9 digits (E.164)' };
    case 'EVP': {
      const u = v.toLowerCase();
      return EVP.test(u) ? { ok: true, key: u } : { ok: false, reason: 'an EVP key is a random (version 4) UUID' };
    }
  }
}

/** The type of a key in its canonical form (how the DICT tells them apart). */
export function keyTypeOf(key: string): KeyType | null {
  if (EVP.test(key)) return 'EVP';
  if (/^\d{11}$/.test(key)) return 'CPF';
  if (/^\d{14}$/.test(key)) return 'CNPJ';
  if (key.startsWith('+')) return 'PHONE';
  if (key.includes('@')) return 'EMAIL';
  return null;
}

/** Canonical form of a key of unknown type (DELETE takes a bare key). */
export function canonicalAnyKey(raw: string): string {
  const v = raw.trim();
  const guesses: KeyType[] = ['EVP', 'CPF', 'CNPJ', 'PHONE', 'EMAIL'];
  for (const t of guesses) {
    const c = canonicalKey(t, v);
    if (c.ok) return c.key;
  }
  return v;
}

export const documentType = (doc: string): 'CPF' | 'CNPJ' | null => (isValidCpf(doc) ? 'CPF' : isValidCnpj(doc) ? 'CNPJ' : null);
export const documentDigits = (doc: string) => doc.replace(/[./\-\s]/g, '');

/** `cob` txid: 26 to 35 letters and digits. */
export const TXID = /^[A-Za-z0-9]{26,35}$/;
/** End-to-end id: `E` + ISPB (8 digits) + yyyyMMddHHmm + 11 alphanumerics. */
export const E2E_ID = /^E\d{8}\d{12}[A-Za-z0-9]{11}$/;

/** BRL minor units to the Pix API's decimal string ("12.34"), and back. */
export function minorToValor(minor: bigint): string {
  const neg = minor < 0n;
  const a = neg ? -minor : minor;
  return `${neg ? '-' : ''}${a / 100n}.${String(a % 100n).padStart(2, '0')}`;
}
export function valorToMinor(valor: string): bigint | null {
  const m = /^(\d{1,15})\.(\d{2})$/.exec(valor);
  return m ? BigInt(m[1]!) * 100n + BigInt(m[2]!) : null;
}

/** An account number shown as four mask characters then its last two digits. */
export const maskAccount = (account: string) => `****${account.slice(-2)}`;
