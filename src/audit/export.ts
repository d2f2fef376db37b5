import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import readline from 'node:readline';
import type { EventStore } from '../eventstore/port.ts';
import type { AuditEntry } from './chain.ts';
import { parseVerifierKey } from './note.ts';
import { type Problem, type StoredEntry, storedCheckpoints, storedEntries, verifyChain, type VerifyReport } from './verifier.ts';

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

/**
 * The same bundle as one NDJSON stream (for HTTP): a manifest line, one line per
 * entry, one per checkpoint, and the keys. `ledger audit verify-export` reads it too.
 */
export async function* bundleLines(store: EventStore, orgId: string, origin: string, now = new Date()): AsyncGenerator<string> {
  let count = 0;
  let tip: string | null = null;
  for await (const se of storedEntries(store, orgId)) {
    if (count === 0) yield JSON.stringify({ type: 'manifest', format: EXPORT_FORMAT, org_id: orgId, origin: `${origin}/${orgId}`, exported_at: now.toISOString() }) + '\n';
    yield JSON.stringify({ type: 'entry', revision: se.revision.toString(), entry: se.entry }) + '\n';
    count++;
    tip = se.entry.entry_hash;
  }
  if (count === 0) yield JSON.stringify({ type: 'manifest', format: EXPORT_FORMAT, org_id: orgId, origin: `${origin}/${orgId}`, exported_at: now.toISOString() }) + '\n';
  const cps = await storedCheckpoints(store, orgId);
  for (const c of cps) yield JSON.stringify({ type: 'checkpoint', ...c }) + '\n';
  yield JSON.stringify({ type: 'keys', verifier_keys: [...new Set(cps.map((c) => c.verifier_key))], entries: count, tip_hash: tip }) + '\n';
}

/** Writes an NDJSON bundle (from the HTTP export) out as a bundle directory. */
export async function bundleFromNdjson(file: string, dir: string): Promise<void> {
  await fs.mkdir(dir, { recursive: true });
  const entries = await fs.open(path.join(dir, 'entries.jsonl'), 'w');
  const cps: string[] = [];
  let manifest: Record<string, unknown> | undefined;
  let keys: { verifier_keys: string[]; entries: number; tip_hash: string | null } | undefined;
  try {
    const rl = readline.createInterface({ input: createReadStream(file), crlfDelay: Infinity });
    for await (const line of rl) {
      if (line.trim() === '') continue;
      const { type, ...rest } = JSON.parse(line) as { type: string } & Record<string, unknown>;
      if (type === 'manifest') manifest = rest;
      else if (type === 'entry') await entries.write(JSON.stringify(rest) + '\n');
      else if (type === 'checkpoint') cps.push(JSON.stringify(rest) + '\n');
      else if (type === 'keys') keys = rest as typeof keys;
    }
  } finally {
    await entries.close();
  }
  if (!manifest || !keys) throw new Error('not an export stream: manifest or keys line missing');
  await fs.writeFile(path.join(dir, 'checkpoints.jsonl'), cps.join(''));
  await fs.writeFile(path.join(dir, 'keys.json'), JSON.stringify({ verifier_keys: keys.verifier_keys }, null, 2) + '\n');
  await fs.writeFile(path.join(dir, 'manifest.json'), JSON.stringify({ ...manifest, entries: keys.entries, tip_hash: keys.tip_hash }, null, 2) + '\n');
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
  if ((await fs.stat(dir)).isFile()) {
    // An NDJSON stream from GET /v1/audit-events/export: unpack it beside itself first.
    const unpacked = await fs.mkdtemp(path.join(path.dirname(path.resolve(dir)), '.audit-bundle-'));
    try {
      await bundleFromNdjson(dir, unpacked);
      return await verifyExport(unpacked, trustedKey);
    } finally {
      await fs.rm(unpacked, { recursive: true, force: true });
    }
  }
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
  const key_source = trustedKey ? ('pinned' as const) : ('bundle' as const);
  // The bundle must hold the chain its manifest lists: a chain cut short verifies by itself.
  if (report.entries !== manifest.entries || (manifest.entries > 0 && report.tip_hash !== manifest.tip_hash)) {
    const p: Problem = {
      kind: 'truncated',
      sequence_number: Math.min(report.entries, manifest.entries) + 1,
      detail: `the manifest lists ${manifest.entries} entries ending at ${manifest.tip_hash}; the bundle holds ${report.entries} ending at ${report.tip_hash || 'none'}`,
    };
    return { ...report, ok: false, first_bad_sequence: report.first_bad_sequence ?? p.sequence_number, first_problem: report.first_problem ?? p, problems: [...report.problems, p], key_source };
  }
  return { ...report, key_source };
}
