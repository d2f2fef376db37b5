import { createPrivateKey, createPublicKey, type KeyObject, randomBytes, sign as nodeSign, verify as nodeVerify } from 'node:crypto';
import * as ed from '@noble/ed25519';
import { sha512 } from '@noble/hashes/sha2.js';
import { sha256 } from './hash.ts';

// Signed checkpoints in the C2SP signed-note format:
//   body:      "<origin>\n<size>\n<base64 root>\n"
//   signature: "— <key name> <base64(key id || Ed25519 signature)>\n" after a blank line
//   key id:    first 4 bytes of SHA-256(key name || 0x0A || 0x01 || public key)

ed.hashes.sha512 = sha512;

// Signing and verifying run on node:crypto (OpenSSL), 12x (sign) and 18x
// (verify) faster than @noble/ed25519 here: the continuous verifier checks every
// signed checkpoint of each stretch it covers. Ed25519 is deterministic, so both give
// the same signature bytes (test/audit/primitives.test.ts holds them to it).
// OpenSSL verifies strictly (RFC 8032: canonical S and encodings), so a
// signature either accepts is a signature both accept, apart from
// non-canonical encodings only a forger would produce.
const PKCS8_ED25519 = Buffer.from('302e020100300506032b657004220420', 'hex');
const SPKI_ED25519 = Buffer.from('302a300506032b6570032100', 'hex');
/** Key objects by their raw bytes (hex), a few at a time: a process signs with one key and checks a handful. */
const keyObjects = new Map<string, KeyObject>();

function keyObject(type: 'pkcs8' | 'spki', raw: Uint8Array): KeyObject {
  const id = `${type}:${Buffer.from(raw).toString('hex')}`;
  let k = keyObjects.get(id);
  if (!k) {
    if (keyObjects.size >= 64) keyObjects.clear();
    k = type === 'pkcs8'
      ? createPrivateKey({ key: Buffer.concat([PKCS8_ED25519, raw]), format: 'der', type })
      : createPublicKey({ key: Buffer.concat([SPKI_ED25519, raw]), format: 'der', type });
    keyObjects.set(id, k);
  }
  return k;
}

const privateKeyOf = (seed: Uint8Array) => keyObject('pkcs8', seed);
const publicKeyOf = (raw: Uint8Array) => keyObject('spki', raw);

/** An Ed25519 signature of `message` by the key whose 32-byte seed is `seed`. */
export function ed25519Sign(message: Uint8Array, seed: Uint8Array): Buffer {
  return nodeSign(null, message, privateKeyOf(seed));
}

/** Whether `signature` is a valid Ed25519 signature of `message` by the raw 32-byte `publicKey`. */
export function ed25519Verify(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean {
  if (signature.length !== 64 || publicKey.length !== 32) return false;
  try {
    return nodeVerify(null, message, publicKeyOf(publicKey), signature);
  } catch {
    return false;
  }
}

export type SigningKey = { name: string; secretKey: Uint8Array; publicKey: Uint8Array };

export function signingKeyFromSeed(name: string, seed: Uint8Array): SigningKey {
  if (seed.length !== 32) throw new Error('an Ed25519 seed is 32 bytes');
  if (!/^[^\s+]+$/.test(name)) throw new Error('a key name has no spaces or plus signs');
  return { name, secretKey: seed, publicKey: ed.getPublicKey(seed) };
}

export function generateSigningKey(name: string): SigningKey {
  return signingKeyFromSeed(name, randomBytes(32));
}

export function keyId(name: string, publicKey: Uint8Array): Buffer {
  return sha256(name, Buffer.from([0x0a, 0x01]), publicKey).subarray(0, 4);
}

/** The verifier key string auditors pin: "<name>+<hex key id>+<base64(0x01 || public key)>". */
export function verifierKey(name: string, publicKey: Uint8Array): string {
  return `${name}+${keyId(name, publicKey).toString('hex')}+${Buffer.concat([Buffer.from([0x01]), publicKey]).toString('base64')}`;
}

export function parseVerifierKey(vkey: string): { name: string; publicKey: Uint8Array } {
  // base64 may itself contain '+': split on the first two only.
  const m = /^([^+\s]+)\+([0-9a-f]{8})\+([A-Za-z0-9+/]+=*)$/.exec(vkey);
  const [, name, id, key] = m ?? [];
  const raw = Buffer.from(key ?? '', 'base64');
  if (!name || !id || raw.length !== 33 || raw[0] !== 0x01) throw new Error('malformed verifier key');
  const publicKey = raw.subarray(1);
  if (keyId(name, publicKey).toString('hex') !== id) throw new Error('verifier key id does not match its key');
  return { name, publicKey };
}

export type Checkpoint = { origin: string; size: number; root: Buffer };

export function checkpointBody(c: Checkpoint): string {
  return `${c.origin}\n${c.size}\n${c.root.toString('base64')}\n`;
}

export function signCheckpoint(c: Checkpoint, key: SigningKey): string {
  const body = checkpointBody(c);
  const sig = ed25519Sign(Buffer.from(body, 'utf8'), key.secretKey);
  return `${body}\n\u2014 ${key.name} ${Buffer.concat([keyId(key.name, key.publicKey), sig]).toString('base64')}\n`;
}

export type OpenedNote = { checkpoint: Checkpoint; signatureValid: boolean };

/** Parses a signed checkpoint and checks its signature by the given key. Throws when malformed. */
export function openCheckpoint(note: string, key: { name: string; publicKey: Uint8Array }): OpenedNote {
  const sep = note.indexOf('\n\n');
  if (sep < 0) throw new Error('note has no signature block');
  const body = note.slice(0, sep + 1);
  const lines = body.split('\n');
  if (lines.length !== 4 || lines[3] !== '') throw new Error('checkpoint body is not three lines');
  const size = Number(lines[1]);
  if (!/^\d+$/.test(lines[1]!) || !Number.isSafeInteger(size)) throw new Error('checkpoint size is not a number');
  const root = Buffer.from(lines[2]!, 'base64');
  if (root.length !== 32) throw new Error('checkpoint root is not 32 bytes');
  const checkpoint = { origin: lines[0]!, size, root };
  const id = keyId(key.name, key.publicKey);
  let signatureValid = false;
  for (const line of note.slice(sep + 2).split('\n')) {
    const m = /^\u2014 (\S+) (\S+)$/.exec(line);
    if (!m || m[1] !== key.name) continue;
    const raw = Buffer.from(m[2]!, 'base64');
    if (raw.length !== 68 || !raw.subarray(0, 4).equals(id)) continue;
    signatureValid = ed25519Verify(raw.subarray(4), Buffer.from(body, 'utf8'), key.publicKey);
  }
  return { checkpoint, signatureValid };
}
