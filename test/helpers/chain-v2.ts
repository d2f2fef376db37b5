import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { buildEntry, genesisHash } from '../../src/audit/chain.ts';
import { EXPORT_FORMAT } from '../../src/audit/export.ts';
import { linkedEntryHash, linkedToJson, linkEvent, linkOf, SWITCH_EVENT_TYPE, switchStream } from '../../src/audit/link.ts';
import { leafHash, rootOf } from '../../src/audit/merkle.ts';
import { signCheckpoint, signingKeyFromSeed, verifierKey } from '../../src/audit/note.ts';
import type { RecordedEvent } from '../../src/eventstore/port.ts';

// A chain of one organization with `v1` version 1 entries, the switch and
// `v2 - 1` linked events after it, built with the service's own format code,
// as export bundle lines, with signed checkpoints at the sizes asked for.

export const ORG = 'org_v2';
export const ORIGIN = `agent-ledger/audit/${ORG}`;
export const KEY = signingKeyFromSeed('agent-ledger-audit', Buffer.alloc(32, 7));
export const VERIFIER_KEY = verifierKey(KEY.name, KEY.publicKey);

export type Line = { revision: string; entry?: Record<string, any>; event?: Record<string, any> };

const salt = (i: number) => i.toString(16).padStart(32, '0');
const uuid = (i: number) => `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`;

export function businessEvent(i: number, org = ORG): RecordedEvent {
  return {
    id: uuid(i),
    type: 'project.updated',
    streamName: `project-prj_${i % 3}`,
    revision: BigInt(i),
    position: String(i).padStart(20, '0'),
    data: { project_id: `prj_${i % 3}`, name: `name ${i}`, updated_at: `2026-11-22T08:00:${String(i % 60).padStart(2, '0')}.000Z` },
    metadata: { org_id: org, actor: { kind: 'api_key', id: 'key_01' }, occurred_at: `2026-11-22T08:00:${String(i % 60).padStart(2, '0')}.000Z`, schema_version: 1 },
    recordedAt: `2026-11-22T08:00:${String(i % 60).padStart(2, '0')}.004Z`,
  };
}

/** Links `e` at `seq` after `prev` (in place) and answers its entry hash. */
export function link(e: RecordedEvent, seq: number, prev: string): string {
  const { link, entryHash } = linkEvent(e, seq, prev, salt(seq));
  (e.metadata as Record<string, unknown>).audit_link = link;
  return entryHash;
}

export function switchedChain(v1: number, v2: number): Line[] {
  const lines: Line[] = [];
  let prev = genesisHash(ORG);
  for (let s = 1; s <= v1; s++) {
    const entry = buildEntry(businessEvent(s), s, prev, salt(s));
    lines.push({ revision: String(s - 1), entry });
    prev = entry.entry_hash;
  }
  const from = v1 + 1;
  const sw: RecordedEvent = { ...businessEvent(from), type: SWITCH_EVENT_TYPE, streamName: switchStream(ORG), data: { org_id: ORG, format: 2, from_sequence: from } };
  prev = link(sw, from, prev);
  lines.push({ revision: String(from - 1), event: linkedToJson(sw) });
  for (let s = from + 1; s < from + v2; s++) {
    const e = businessEvent(s);
    prev = link(e, s, prev);
    lines.push({ revision: String(s - 1), event: linkedToJson(e) });
  }
  return lines;
}

export function lineHash(l: Line): string {
  if (l.entry) return l.entry.entry_hash as string;
  const e = { id: l.event!.event_id, type: l.event!.event_type, streamName: l.event!.stream, revision: 0n, position: '', recordedAt: l.event!.recorded_at, metadata: l.event!.metadata, data: l.event!.data } as RecordedEvent;
  return linkedEntryHash(e, linkOf(e)!);
}

export function checkpointNote(lines: readonly Line[], size: number): string {
  const root = rootOf(lines.slice(0, size).map((l) => leafHash(Buffer.from(lineHash(l), 'hex'))), size);
  return signCheckpoint({ origin: ORIGIN, size, root }, KEY);
}

/** Writes the bundle directory; the manifest lists `listed` (default: the lines as given). */
export async function writeBundle(lines: readonly Line[], notes: readonly string[], listed: readonly Line[] = lines): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'chain-v2-'));
  await fs.writeFile(path.join(dir, 'entries.jsonl'), lines.map((l) => JSON.stringify(l) + '\n').join(''));
  await fs.writeFile(path.join(dir, 'checkpoints.jsonl'), notes.map((note) => JSON.stringify({ note }) + '\n').join(''));
  await fs.writeFile(path.join(dir, 'keys.json'), JSON.stringify({ verifier_keys: [VERIFIER_KEY] }));
  const manifest = { format: EXPORT_FORMAT, org_id: ORG, origin: ORIGIN, entries: listed.length, tip_hash: listed.length > 0 ? lineHash(listed[listed.length - 1]!) : null, exported_at: '2026-11-22T09:00:00.000Z' };
  await fs.writeFile(path.join(dir, 'manifest.json'), JSON.stringify(manifest));
  return dir;
}
