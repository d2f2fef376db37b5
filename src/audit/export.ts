import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import readline from 'node:readline';
import type { EventStore } from '../eventstore/port.ts';
import type { AuditEntry } from './chain.ts';
import { parseCosignerKey, splitNote, verifyCosignature } from './cosignature.ts';
import { parseVerifierKey } from './note.ts';
import { type LinkedEventJson, linkedFromJson, linkedToJson, linkOf, linkedEntryHash } from './link.ts';
import { type ChainItem, chainItems, type Problem, storedCheckpoints, verifyChain, type VerifyReport } from './verifier.ts';

// The export bundle: everything an auditor needs to verify a chain offline.
//   manifest.json      format, org_id, origin, entry count, tip hash
//   entries.jsonl      one {"revision": "<n>", "entry": {...}} per line, in order; after a
//                      switch to version 2, {"revision": "<n>", "event": {...}} (the linked event)
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
    for await (const se of chainItems(store, orgId)) {
      buf += itemLine(se) + '\n';
      count++;
      tip = itemHash(se);
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
  for await (const se of chainItems(store, orgId)) {
    if (count === 0) yield JSON.stringify({ type: 'manifest', format: EXPORT_FORMAT, org_id: orgId, origin: `${origin}/${orgId}`, exported_at: now.toISOString() }) + '\n';
    yield `{"type":"entry",${itemLine(se).slice(1)}\n`;
    count++;
    tip = itemHash(se);
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

/** A bundle line of an entry: a v1 entry, or a v2 linked event. */
function itemLine(se: ChainItem): string {
  return 'linked' in se ? JSON.stringify({ revision: se.revision.toString(), event: linkedToJson(se.linked) }) : JSON.stringify({ revision: se.revision.toString(), entry: se.entry });
}

function itemHash(se: ChainItem): string {
  if (!('linked' in se)) return se.entry.entry_hash;
  const link = linkOf(se.linked);
  return link ? linkedEntryHash(se.linked, link) : '';
}

async function* readEntries(file: string): AsyncGenerator<ChainItem> {
  const rl = readline.createInterface({ input: createReadStream(file), crlfDelay: Infinity });
  for await (const line of rl) {
    if (line.trim() === '') continue;
    const row = JSON.parse(line) as { revision: string; entry?: AuditEntry; event?: LinkedEventJson };
    if (row.event !== undefined) yield { revision: BigInt(row.revision), linked: linkedFromJson(row.event) };
    else yield { revision: BigInt(row.revision), entry: row.entry! };
  }
}

/** An entry's sequence number, event type and payload, whichever its version. */
function itemFacts(se: ChainItem): { sequence_number: number; event_type: string; payload: unknown } {
  if ('linked' in se) return { sequence_number: Number(se.revision) + 1, event_type: se.linked.type, payload: linkOf(se.linked)?.payload_salt === null ? null : se.linked.data };
  return { sequence_number: se.entry.sequence_number, event_type: se.entry.event_type, payload: se.entry.payload };
}

/**
 * Verifies a bundle with no database and no network. `trustedKey` is the
 * verifier key the auditor pinned; without it the bundle's own key is used,
 * which proves internal consistency only.
 */
export type WitnessPolicy = { witnesses: readonly string[]; quorum: number };
export type WitnessReport = { quorum: number; witnesses: string[]; witnessed_size: number | null; cosigners: string[] };

/**
 * The k-of-n witness policy over a bundle: the cosignatures sealed in its
 * entries (`audit.checkpoint_cosigned`) by the policy's witnesses must each be
 * of a checkpoint the bundle holds (same size, same root: else a witness saw
 * another history, `witness_split`), and some checkpoint must carry k valid
 * ones (`quorum_not_met`). Entries up to `witnessed_size` are witnessed.
 */
async function checkWitnesses(entriesFile: string, checkpoints: readonly { note: string }[], policy: WitnessPolicy): Promise<{ report: WitnessReport; problems: Problem[] }> {
  const keys = policy.witnesses.map(parseCosignerKey);
  if (!Number.isInteger(policy.quorum) || policy.quorum < 1 || policy.quorum > keys.length) throw new Error(`a quorum must be between 1 and the ${keys.length} witness keys given`);
  const bySize = new Map<number, { root: string; body: string }>();
  for (const c of checkpoints) {
    const { body } = splitNote(c.note);
    const [, size, root] = body.split('\n');
    bySize.set(Number(size), { root: Buffer.from(root ?? '', 'base64').toString('hex'), body });
  }
  const problems: Problem[] = [];
  const cosigners = new Map<number, Set<string>>();
  for await (const item of readEntries(entriesFile)) {
    const entry = itemFacts(item);
    if (entry.event_type !== 'audit.checkpoint_cosigned' || entry.payload === null) continue;
    const d = entry.payload as { size: number; root_hash: string; cosignature: string };
    const cp = bySize.get(d.size);
    for (const k of keys) {
      const r = cp ? verifyCosignature(cp.body, [d.cosignature], k) : null;
      if (!cp || cp.root !== d.root_hash) {
        if (d.cosignature.startsWith(`\u2014 ${k.name} `)) problems.push({ kind: 'witness_split', sequence_number: entry.sequence_number, detail: `witness ${k.name} cosigned size ${d.size} with root ${d.root_hash}, which no checkpoint of the bundle has` });
        continue;
      }
      if (r?.valid) (cosigners.get(d.size) ?? cosigners.set(d.size, new Set()).get(d.size)!).add(k.name);
    }
  }
  const met = [...cosigners].filter(([, s]) => s.size >= policy.quorum).sort((a, b) => b[0] - a[0])[0];
  if (!met) problems.push({ kind: 'quorum_not_met', sequence_number: 1, detail: `no checkpoint carries ${policy.quorum} valid cosignatures of the ${keys.length} witnesses` });
  return { report: { quorum: policy.quorum, witnesses: keys.map((k) => k.name), witnessed_size: met?.[0] ?? null, cosigners: met ? [...met[1]] : [] }, problems };
}

export async function verifyExport(dir: string, trustedKey?: string, policy?: WitnessPolicy): Promise<VerifyReport & { key_source: 'pinned' | 'bundle'; witness_policy?: WitnessReport }> {
  if ((await fs.stat(dir)).isFile()) {
    // An NDJSON stream from GET /v1/audit-events/export: unpack it beside itself first.
    const unpacked = await fs.mkdtemp(path.join(path.dirname(path.resolve(dir)), '.audit-bundle-'));
    try {
      await bundleFromNdjson(dir, unpacked);
      return await verifyExport(unpacked, trustedKey, policy);
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
  if (policy) {
    const w = await checkWitnesses(path.join(dir, 'entries.jsonl'), checkpoints, policy);
    const chain = await verifyBundleChain(manifest, report, key_source);
    const problems = [...chain.problems, ...w.problems];
    return { ...chain, ok: chain.ok && w.problems.length === 0, problems, first_problem: chain.first_problem ?? w.problems[0] ?? null, first_bad_sequence: chain.first_bad_sequence ?? w.problems[0]?.sequence_number ?? null, witness_policy: w.report };
  }
  return verifyBundleChain(manifest, report, key_source);
}

/** The chain's own report, failed with 'truncated' when the bundle holds less than its manifest lists. */
function verifyBundleChain(manifest: Manifest, report: VerifyReport, key_source: 'pinned' | 'bundle'): VerifyReport & { key_source: 'pinned' | 'bundle' } {
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
