import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { type SigningKey, signingKeyFromSeed } from './note.ts';

// The checkpoint signing key: AUDIT_SIGNING_KEY (base64 of a 32-byte Ed25519
// seed) when set; otherwise, for the embedded default, a key generated once
// into DATA_DIR (mode 0600) and reused across restarts.

export const AUDIT_KEY_NAME = 'agent-ledger-audit';

export async function loadAuditSigningKey(opts: { seedBase64: string | undefined; dataDir: string; name?: string; fileName?: string }): Promise<SigningKey> {
  const name = opts.name ?? AUDIT_KEY_NAME;
  if (opts.seedBase64) {
    const seed = Buffer.from(opts.seedBase64, 'base64');
    if (seed.length !== 32) throw new Error('AUDIT_SIGNING_KEY must be base64 of 32 bytes');
    return signingKeyFromSeed(name, seed);
  }
  const file = path.join(opts.dataDir, opts.fileName ?? 'audit-signing-key');
  try {
    return signingKeyFromSeed(name, Buffer.from((await fs.readFile(file, 'utf8')).trim(), 'base64'));
  } catch {
    await fs.mkdir(opts.dataDir, { recursive: true });
    const seed = randomBytes(32);
    await fs.writeFile(file, seed.toString('base64') + '\n', { mode: 0o600, flag: 'wx' }).catch(async () => {
      // Another process wrote it first: use theirs.
    });
    return signingKeyFromSeed(name, Buffer.from((await fs.readFile(file, 'utf8')).trim(), 'base64'));
  }
}
