import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import readline from 'node:readline';
import type { EventStore } from '../eventstore/port.ts';
import type { AuditEntry } from './chain.ts';
import { parseVerifierKey } from './note.ts';
import { type StoredEntry, storedCheckpoints, storedEntries, verifyChain, type VerifyReport } from './verifier.ts';

// The export bundle: everything an auditor needs to verify a chain offline.
//   manifest.json      format, org_id, origin, entry count, tip hash
//   entries.jsonl      one {"revision": "<n>", "entry": {...}} per line, in order
//   checkpoints.jsonl  one signed checkpoint per line: {"size", "root_hash", "note", "verifier_key", "signed_at"}
//   keys.json          {"verifier_keys": [...]}: the signer's published keys

export const EXPORT_FORMAT = 'agent-ledger-audit-export/v1';

export type Manifest = { format: string; org_id: string; origin: string; entries: number; tip_hash: string | null; exported_at: string };

export async function exportChain(store: EventStore, orgId: string, origin: string, dir: string, now = new Date()): Promise<Manifest> {
  await fs.mkdir(dir, { recursive: true });
  const out = await fs.open(path.join(dir, 'entries.jsonl'), 'w');
  let count = 0;
  let tip: string | null = null;
  try {
    let buf = '';
    for await (const se of storedEntries(store, orgId)) {
      buf += JSON.stringify({ revision: se.revision.toString(), entry: se.entry }) + '\n';
      count++;
      tip = se.entry.entry_hash;
      if (buf.length > 1 << 20) {
        await out.write(buf);
        buf = '';
      }
    }
    await out.write(buf);
  } finally {
    await out.close();
  }
  const cps = await storedCheckpoints(store, orgId);
  await fs.writeFile(path.join(dir, 'checkpoints.jsonl'), cps.map((c) => JSON.stringify(c) + '\n').join(''));
  const keys = [...new Set(cps.map((c) => c.verifier_key))];
  await fs.writeFile(path.join(dir, 'keys.json'), JSON.stringify({ verifier_keys: keys }, null, 2) + '\n');
  const manifest: Manifest = { format: EXPORT_FORMAT, org_id: orgId, origin: `${origin}/${orgId}`, entries: count, tip_hash: tip, exported_at: now.toISOString() };
  await fs.writeFile(path.join(dir, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
  return manifest;
}

async function* readEntries(file: string): AsyncGenerator<StoredEntry> {
  const rl = readline.createInterface({ input: createReadStream(file), crlfDelay: Infinity });
  for await (const line of rl) {
    if (line.trim() === '') continue;
    const row = JSON.parse(line) as { revision: string; entry: AuditEntry };
    yield { revision: BigInt(row.revision), entry: row.entry };
  }
}

/**
 * Verifies a bundle with no database and no network. `trustedKey` is the
 * verifier key the auditor pinned; without it the bundle's own key is used,
 * which proves internal consistency only.
 */
export async function verifyExport(dir: string, trustedKey?: string): Promise<VerifyReport & { key_source: 'pinned' | 'bundle' }> {
  const manifest = JSON.parse(await fs.readFile(path.join(dir, 'manifest.json'), 'utf8')) as Manifest;
  if (manifest.format !== EXPORT_FORMAT) throw new Error(`unknown export format ${manifest.format}`);
  const keys = JSON.parse(await fs.readFile(path.join(dir, 'keys.json'), 'utf8')) as { verifier_keys: string[] };
  const vkey = trustedKey ?? keys.verifier_keys[0];
  if (!vkey) throw new Error('no verifier key: pass one, or export a chain with at least one checkpoint');
  const cpText = await fs.readFile(path.join(dir, 'checkpoints.jsonl'), 'utf8');
  const checkpoints = cpText
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as { note: string });
  const report = await verifyChain({
    orgId: manifest.org_id,
    entries: readEntries(path.join(dir, 'entries.jsonl')),
    checkpoints,
    key: parseVerifierKey(vkey),
    origin: manifest.origin,
  });
  return { ...report, key_source: trustedKey ? 'pinned' : 'bundle' };
}
