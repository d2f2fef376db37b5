import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Db } from '../postgres/db.ts';
import { migrate } from '../postgres/schema.ts';

// The vault: secrets (agent private keys, provider tokens) encrypted at rest
// with AES-256-GCM under a master key from the environment (VAULT_MASTER_KEY,
// base64 of 32 bytes) or, for the embedded default, one generated into
// DATA_DIR. Events carry only the reference; no read returns a secret.

export type VaultRef = string;

export class Vault {
  constructor(
    private readonly db: Db,
    private readonly masterKey: Buffer,
  ) {
    if (masterKey.length !== 32) throw new Error('the vault master key is 32 bytes');
  }

  static async open(db: Db, masterKey: Buffer): Promise<Vault> {
    await migrate(db, (tx) => tx.query(`CREATE TABLE IF NOT EXISTS vault_secrets (
      ref text PRIMARY KEY,
      org_id text NOT NULL,
      purpose text NOT NULL,
      iv bytea NOT NULL,
      ciphertext bytea NOT NULL,
      tag bytea NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`));
    return new Vault(db, masterKey);
  }

  async put(orgId: string, purpose: string, secret: Uint8Array): Promise<VaultRef> {
    const ref = `vault_${randomBytes(16).toString('hex')}`;
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.masterKey, iv);
    cipher.setAAD(Buffer.from(`${ref}\n${orgId}\n${purpose}`));
    const ciphertext = Buffer.concat([cipher.update(secret), cipher.final()]);
    await this.db.query('INSERT INTO vault_secrets (ref, org_id, purpose, iv, ciphertext, tag) VALUES ($1, $2, $3, $4, $5, $6)', [ref, orgId, purpose, iv, ciphertext, cipher.getAuthTag()]);
    return ref;
  }

  /** The secret, or undefined when the reference is unknown (or belongs to another organization). */
  async get(orgId: string, ref: VaultRef): Promise<Buffer | undefined> {
    const { rows } = await this.db.query<{ purpose: string; iv: Buffer; ciphertext: Buffer; tag: Buffer }>('SELECT purpose, iv, ciphertext, tag FROM vault_secrets WHERE ref = $1 AND org_id = $2', [ref, orgId]);
    const r = rows[0];
    if (!r) return undefined;
    const decipher = createDecipheriv('aes-256-gcm', this.masterKey, r.iv);
    decipher.setAAD(Buffer.from(`${ref}\n${orgId}\n${r.purpose}`));
    decipher.setAuthTag(r.tag);
    return Buffer.concat([decipher.update(r.ciphertext), decipher.final()]);
  }

  async delete(orgId: string, ref: VaultRef): Promise<void> {
    await this.db.query('DELETE FROM vault_secrets WHERE ref = $1 AND org_id = $2', [ref, orgId]);
  }
}

export async function loadVaultMasterKey(opts: { base64: string | undefined; dataDir: string }): Promise<Buffer> {
  if (opts.base64) {
    const k = Buffer.from(opts.base64, 'base64');
    if (k.length !== 32) throw new Error('VAULT_MASTER_KEY must be base64 of 32 bytes');
    return k;
  }
  const file = path.join(opts.dataDir, 'vault-master-key');
  try {
    return Buffer.from((await fs.readFile(file, 'utf8')).trim(), 'base64');
  } catch {
    await fs.mkdir(opts.dataDir, { recursive: true });
    await fs.writeFile(file, randomBytes(32).toString('base64') + '\n', { mode: 0o600, flag: 'wx' }).catch(() => {});
    return Buffer.from((await fs.readFile(file, 'utf8')).trim(), 'base64');
  }
}
