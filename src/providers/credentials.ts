import { createPrivateKey, X509Certificate } from 'node:crypto';
import { Rejection } from '../eventstore/handler.ts';
import type { Credential } from '../adapters/providers/http-provider.ts';
import { KEY_AUTH_TYPES, type ProviderDef } from './catalog.ts';

// Checks a pasted credential against the provider's declared fields, before
// anything is stored: its shape (one string, or an object whose keys are
// exactly the declared names), and for certificates and ES256 keys, that the
// PEM parses and the parts belong together. The result is what the vault
// stores and, for a certificate, its public metadata.

/** Largest single secret value (a PEM chain fits). */
export const SECRET_VALUE_MAX_CHARS = 16_384;

export type CertMetadata = { issuer: string; subject: string; valid_from: string; valid_to: string; fingerprint_sha256: string; serial_number: string };

export type CheckedCredential = { credential: Credential; certMetadata: CertMetadata | Record<string, never>; expiresAt: string | null };

const shape = (message: string) => new Rejection('invalid_secret_shape', message);

export function checkCredential(p: ProviderDef, secret: unknown): CheckedCredential {
  if (!KEY_AUTH_TYPES.includes(p.auth_type)) throw new Rejection('not_api_key_server', `${p.id} uses ${p.auth_type}; its connections are not registered with a pasted secret`, { auth_type: p.auth_type });
  const names = p.fields.map((f) => f.name);
  if (p.auth_type === 'path_secret' && names.length === 0) throw new Rejection('catalog_row_invalid', `the catalog row of ${p.id} declares no path-secret refs`);
  if (p.auth_type === 'api_key') {
    if (typeof secret !== 'string') throw shape(`${p.id} takes one secret as a string`);
    if (secret.trim() === '' || secret.length > 4_096 || /[\r\n]/.test(secret)) throw shape('the secret must be 1 to 4096 characters on one line');
    return { credential: secret, certMetadata: {}, expiresAt: null };
  }
  if (typeof secret !== 'object' || secret === null || Array.isArray(secret)) throw shape(`${p.id} takes an object of named secrets: ${names.join(', ')}`);
  const given = Object.keys(secret).sort();
  if (given.join() !== [...names].sort().join()) {
    throw new Rejection(p.auth_type === 'path_secret' ? 'path_secret_keys_mismatch' : 'keys_mismatch', `the secret's keys must be exactly: ${names.join(', ')}`, { expected: names, received: given.slice(0, 20).map((k) => k.slice(0, 64)) });
  }
  const cred: Record<string, string> = {};
  for (const n of names) {
    const v = (secret as Record<string, unknown>)[n];
    if (typeof v !== 'string' || v.trim() === '' || v.length > SECRET_VALUE_MAX_CHARS) throw shape(`${n} must be a non-empty string of at most ${SECRET_VALUE_MAX_CHARS} characters`);
    if (p.fields.find((f) => f.name === n)!.header_name !== null && /[\r\n]/.test(v)) throw shape(`${n} is sent in a header and must be one line`);
    cred[n] = v;
  }
  if (p.auth_type === 'cert') {
    let cert: X509Certificate;
    try {
      cert = new X509Certificate(cred.certificate!);
    } catch {
      throw new Rejection('credential_invalid', 'certificate is not a PEM X.509 certificate');
    }
    let key;
    try {
      key = createPrivateKey(cred.private_key!);
    } catch {
      throw new Rejection('credential_invalid', 'private_key is not a PEM private key');
    }
    if (!cert.checkPrivateKey(key)) throw new Rejection('credential_invalid', 'private_key does not belong to the certificate');
    const validTo = new Date(cert.validTo).toISOString();
    return {
      credential: cred,
      certMetadata: { issuer: cert.issuer, subject: cert.subject, valid_from: new Date(cert.validFrom).toISOString(), valid_to: validTo, fingerprint_sha256: cert.fingerprint256, serial_number: cert.serialNumber },
      expiresAt: validTo,
    };
  }
  if (p.auth_type === 'jwt_ecdsa') {
    try {
      const k = createPrivateKey(cred.private_key!);
      if (k.asymmetricKeyType !== 'ec' || k.asymmetricKeyDetails?.namedCurve !== 'prime256v1') throw new Error('curve');
    } catch {
      throw new Rejection('credential_invalid', 'private_key must be a PEM EC P-256 private key (ES256)');
    }
  }
  return { credential: cred, certMetadata: {}, expiresAt: null };
}

export const encodeCredential = (c: Credential): Buffer => Buffer.from(JSON.stringify(c), 'utf8');
export function decodeCredential(b: Buffer): Credential {
  return JSON.parse(b.toString('utf8')) as Credential;
}
