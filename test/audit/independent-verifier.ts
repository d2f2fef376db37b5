import { createHash, createHmac, createPublicKey, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';

// An auditor's verifier of an export bundle, written from docs/audit-chain.md
// alone ("Entry", "Hashes", "Merkle tree and checkpoints", "Export bundle",
// "Version 2"): node:crypto and nothing of the service's code. Used by the
// tests to check that the document is enough to verify v1, v2 and switched
// chains. It answers the first problem met walking the chain in order, then
// the checkpoints.

export type Finding = { ok: true; entries: number } | { ok: false; kind: string; sequence_number: number };

const sha = (...parts: (string | Buffer)[]) => createHash('sha256').update(Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : p)))).digest();
const hex = (b: Buffer) => b.toString('hex');

/** RFC 8785 for the JSON values of a bundle (objects, arrays, strings, finite numbers, booleans, null). */
export function jcs(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(jcs).join(',')}]`;
  const keys = Object.keys(v).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${keys.map((k) => `${JSON.stringify(k)}:${jcs((v as Record<string, unknown>)[k])}`).join(',')}}`;
}

function mth(d: Buffer[]): Buffer {
  if (d.length === 0) return sha('');
  if (d.length === 1) return sha(Buffer.from([0]), d[0]!);
  let k = 1;
  while (k * 2 < d.length) k *= 2;
  return sha(Buffer.from([1]), mth(d.slice(0, k)), mth(d.slice(k)));
}

function ed25519Verify(pub: Buffer, message: string, sig: Buffer): boolean {
  const key = createPublicKey({ key: Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), pub]), format: 'der', type: 'spki' });
  return verify(null, Buffer.from(message, 'utf8'), key, sig);
}

/** A checkpoint note's size and root, when signed by the verifier key `<name>+<hex id>+<base64(0x01 || key)>` for `origin`. */
export function openNote(note: string, verifierKey: string, origin: string): { size: number; root: Buffer } | undefined {
  // The key's base64 may itself hold '+': the name and the id end at the first two.
  const [name, idHex] = verifierKey.split('+') as [string, string];
  const keyB64 = verifierKey.slice(name.length + idHex.length + 2);
  const raw = Buffer.from(keyB64, 'base64');
  const pub = raw.subarray(1);
  const at = note.indexOf('\n\n');
  const body = note.slice(0, at + 1);
  const [o, size, root] = body.split('\n');
  if (o !== origin) return undefined;
  for (const line of note.slice(at + 2).split('\n')) {
    const m = /^\u2014 (\S+) (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const sig = Buffer.from(m[2]!, 'base64');
    if (hex(sig.subarray(0, 4)) !== idHex || hex(sha(name, Buffer.from([0x0a, 0x01]), pub).subarray(0, 4)) !== idHex) continue;
    if (ed25519Verify(pub, body, sig.subarray(4))) return { size: Number(size), root: Buffer.from(root!, 'base64') };
  }
  return undefined;
}

type Line = { revision: string; entry?: Record<string, any>; event?: Record<string, any> };

export function verifyBundleDir(dir: string, verifierKey: string): Finding {
  const manifest = JSON.parse(readFileSync(path.join(dir, 'manifest.json'), 'utf8')) as { org_id: string; origin: string; entries: number; tip_hash: string | null };
  const lines = readFileSync(path.join(dir, 'entries.jsonl'), 'utf8').split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as Line);
  const checkpoints = readFileSync(path.join(dir, 'checkpoints.jsonl'), 'utf8').split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as { note: string });
  return verifyLines(manifest, lines, checkpoints, verifierKey);
}

export function verifyLines(manifest: { org_id: string; origin: string; entries: number; tip_hash: string | null }, lines: Line[], checkpoints: { note: string }[], verifierKey: string): Finding {
  const org = manifest.org_id;
  let prev = hex(sha('agent-ledger/audit-genesis/v1\n', org));
  let switched = 0;
  const leaves: Buffer[] = [];
  const fail = (kind: string, seq: number): Finding => ({ ok: false, kind, sequence_number: seq });
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const seq = i + 1;
    if (line.revision !== String(i)) return fail('sequence_gap', seq);
    let entryHash: string;
    if (line.event === undefined) {
      // Version 1.
      const e = line.entry!;
      if (switched) return fail('format_mismatch', seq);
      if (e.sequence_number !== seq) return fail('sequence_mismatch', seq);
      const env = JSON.parse(e.envelope as string) as Record<string, any>;
      if (jcs(env) !== e.envelope) return fail('canonical_mismatch', seq);
      if (env.v !== 1) return fail('format_mismatch', seq);
      if (env.org_id !== org) return fail('foreign_entry', seq);
      entryHash = hex(sha('agent-ledger/audit-entry/v1\n', e.envelope as string));
      if (entryHash !== e.entry_hash || env.sequence_number !== seq || env.prev_hash !== e.prev_hash || env.event_type !== e.event_type || env.event_id !== e.source?.event_id || env.occurred_at !== e.happened_at) return fail('hash_mismatch', seq);
      if (e.payload !== null && hex(createHmac('sha256', Buffer.from(e.payload_salt as string, 'hex')).update(`agent-ledger/audit-payload/v1\n${jcs(e.payload)}`).digest()) !== env.payload_hash) return fail('hash_mismatch', seq);
      if (e.prev_hash !== prev) return fail('link_mismatch', seq);
    } else {
      // Version 2: the event is the entry.
      const ev = line.event;
      const m = /^2:([1-9][0-9]*):([0-9a-f]{64}):((?:[0-9a-f]{32})?):([0-9a-f]{64})$/.exec(typeof ev.metadata?.audit_link === 'string' ? ev.metadata.audit_link : '');
      if (!m) return fail('malformed_entry', seq);
      const [, seqText, prevHash, salt, payloadHash] = m as unknown as [string, string, string, string, string];
      if (Number(seqText) !== seq) return fail('sequence_mismatch', seq);
      if (ev.metadata.org_id !== org) return fail('foreign_entry', seq);
      if (!switched) {
        if (ev.event_type !== 'audit.chain_switched' || ev.data?.format !== 2 || ev.data?.from_sequence !== seq || ev.data?.org_id !== org) return fail('format_mismatch', seq);
        switched = seq;
      } else if (ev.event_type === 'audit.chain_switched') return fail('format_mismatch', seq);
      if (salt !== '' && hex(createHmac('sha256', Buffer.from(salt, 'hex')).update(`agent-ledger/audit-payload/v2\n${jcs(ev.data)}`).digest()) !== payloadHash) return fail('hash_mismatch', seq);
      if (prevHash !== prev) return fail('link_mismatch', seq);
      const a = ev.metadata.actor;
      const envelope = {
        v: 2,
        org_id: ev.metadata.org_id,
        sequence_number: seq,
        prev_hash: prevHash,
        event_id: ev.event_id,
        event_type: ev.event_type,
        stream: ev.stream,
        occurred_at: typeof ev.metadata.occurred_at === 'string' ? ev.metadata.occurred_at : null,
        actor: typeof a?.kind === 'string' && typeof a?.id === 'string' ? { kind: a.kind, id: a.id } : { kind: 'system', id: 'unknown' },
        payload_hash: payloadHash,
      };
      entryHash = hex(sha('agent-ledger/audit-entry/v2\n', jcs(envelope)));
    }
    prev = entryHash;
    leaves.push(Buffer.from(entryHash, 'hex'));
  }
  const opened = checkpoints.map((c) => openNote(c.note, verifierKey, manifest.origin));
  const bad = opened.findIndex((o) => o === undefined);
  if (bad >= 0) return fail('signature_invalid', 0);
  for (const cp of opened.sort((a, b) => a!.size - b!.size)) {
    if (cp!.size > leaves.length) return fail('truncated', leaves.length + 1);
    if (!mth(leaves.slice(0, cp!.size)).equals(cp!.root)) return fail('root_mismatch', cp!.size);
  }
  if (manifest.entries !== leaves.length || (leaves.length > 0 && manifest.tip_hash !== prev)) return fail('truncated', Math.min(leaves.length, manifest.entries) + 1);
  return { ok: true, entries: leaves.length };
}
