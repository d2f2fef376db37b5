import { sha256 } from './hash.ts';
import { ed25519Sign, ed25519Verify, type SigningKey } from './note.ts';

// C2SP tlog-cosignature (Ed25519, signature type 0x04) and the request body of
// C2SP tlog-witness add-checkpoint. A cosignature is a signed-note signature
// line over the checkpoint body:
//   — <witness name> base64(key id || u64 big-endian timestamp || Ed25519 signature)
// signing "cosignature/v1\ntime <timestamp>\n" || the checkpoint body, with
//   key id = SHA-256(<name> || "\n" || 0x04 || public key)[:4].
// docs/audit-chain.md holds frozen vectors; test/audit/cosignature.test.ts the
// spec's own examples.

export const COSIGNATURE_TYPE = 0x04;

export type CosignerKey = { name: string; publicKey: Uint8Array };

export function cosignerKeyId(name: string, publicKey: Uint8Array): Buffer {
  return sha256(name, Buffer.from([0x0a, COSIGNATURE_TYPE]), publicKey).subarray(0, 4);
}

/** The witness's verifier key "<name>+<hex key id>+<base64(0x04 || public key)>". */
export function cosignerVerifierKey(name: string, publicKey: Uint8Array): string {
  return `${name}+${cosignerKeyId(name, publicKey).toString('hex')}+${Buffer.concat([Buffer.from([COSIGNATURE_TYPE]), publicKey]).toString('base64')}`;
}

export function parseCosignerKey(vkey: string): CosignerKey {
  const m = /^([^+\s]+)\+([0-9a-f]{8})\+([A-Za-z0-9+/]+=*)$/.exec(vkey.trim());
  const [, name, id, key] = m ?? [];
  const raw = Buffer.from(key ?? '', 'base64');
  if (!name || !id || raw.length !== 33 || raw[0] !== COSIGNATURE_TYPE) throw new Error('malformed witness verifier key (want name+id+base64(0x04 || Ed25519 key))');
  const publicKey = raw.subarray(1);
  if (cosignerKeyId(name, publicKey).toString('hex') !== id) throw new Error('witness verifier key id does not match its key');
  return { name, publicKey };
}

/** The message an Ed25519 v1 cosignature signs. */
export function cosignedMessage(body: string, timestamp: number): Buffer {
  return Buffer.from(`cosignature/v1\ntime ${timestamp}\n${body}`, 'utf8');
}

/** One cosignature line (ending in a newline) over a checkpoint body, at `timestamp` (POSIX seconds, > 0). */
export function cosign(body: string, key: SigningKey, timestamp: number): string {
  if (!Number.isSafeInteger(timestamp) || timestamp <= 0) throw new Error('a cosignature timestamp is a positive POSIX time');
  const ts = Buffer.alloc(8);
  ts.writeBigUInt64BE(BigInt(timestamp));
  const sig = ed25519Sign(cosignedMessage(body, timestamp), key.secretKey);
  return `\u2014 ${key.name} ${Buffer.concat([cosignerKeyId(key.name, key.publicKey), ts, sig]).toString('base64')}\n`;
}

/** The body (up to and including the blank line's preceding newline) and the signature lines of a note. */
export function splitNote(note: string): { body: string; lines: string[] } {
  const sep = note.indexOf('\n\n');
  if (sep < 0) throw new Error('note has no signature block');
  return { body: note.slice(0, sep + 1), lines: note.slice(sep + 2).split('\n').filter((l) => l !== '') };
}

/**
 * Checks the cosignatures of `key` among a note's signature lines: `null` when
 * none names it (name and key id), else whether one verifies and its timestamp.
 */
export function verifyCosignature(body: string, lines: readonly string[], key: CosignerKey): { valid: boolean; timestamp: number } | null {
  const id = cosignerKeyId(key.name, key.publicKey);
  let found: { valid: boolean; timestamp: number } | null = null;
  for (const line of lines) {
    const m = /^\u2014 (\S+) (\S+)$/.exec(line.replace(/\n$/, ''));
    if (!m || m[1] !== key.name) continue;
    const raw = Buffer.from(m[2]!, 'base64');
    if (raw.length !== 4 + 8 + 64 || !raw.subarray(0, 4).equals(id)) continue;
    const ts = raw.readBigUInt64BE(4);
    if (ts === 0n || ts > BigInt(Number.MAX_SAFE_INTEGER)) {
      found ??= { valid: false, timestamp: 0 };
      continue;
    }
    const timestamp = Number(ts);
    const valid = ed25519Verify(raw.subarray(12), cosignedMessage(body, timestamp), key.publicKey);
    if (valid) return { valid, timestamp };
    found = { valid, timestamp };
  }
  return found;
}

/** Counts the policy's witnesses whose cosignature on `note` verifies. */
export function countCosigners(note: string, witnesses: readonly CosignerKey[]): { valid: string[]; invalid: string[] } {
  const { body, lines } = splitNote(note);
  const valid: string[] = [];
  const invalid: string[] = [];
  for (const w of witnesses) {
    const r = verifyCosignature(body, lines, w);
    if (r?.valid) valid.push(w.name);
    else if (r) invalid.push(w.name);
  }
  return { valid, invalid };
}

export type AddCheckpoint = { oldSize: number; proof: Buffer[]; note: string };

/** The add-checkpoint request body: "old <n>\n", proof hashes in base64 one a line, a blank line, the checkpoint. */
export function formatAddCheckpoint(oldSize: number, proof: readonly Uint8Array[], note: string): string {
  return `old ${oldSize}\n${proof.map((p) => Buffer.from(p).toString('base64') + '\n').join('')}\n${note}`;
}

export function parseAddCheckpoint(text: string): AddCheckpoint {
  const sep = text.indexOf('\n\n');
  if (sep < 0) throw new Error('no blank line before the checkpoint');
  const head = text.slice(0, sep).split('\n');
  const m = /^old (0|[1-9]\d{0,15})$/.exec(head[0] ?? '');
  if (!m || !Number.isSafeInteger(Number(m[1]))) throw new Error('the first line is not "old <size>"');
  const proof: Buffer[] = [];
  for (const line of head.slice(1)) {
    if (!/^[A-Za-z0-9+/]{43}=$/.test(line)) throw new Error('a proof line is not a base64 hash');
    proof.push(Buffer.from(line, 'base64'));
  }
  if (proof.length > 63) throw new Error('more than 63 proof lines');
  return { oldSize: Number(m[1]), proof, note: text.slice(sep + 2) };
}
