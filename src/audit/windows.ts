import { businessEventTypes } from '../../events/index.ts';
import { type EventStore, type Position, type RecordedEvent, START } from '../eventstore/port.ts';
import type { Db } from '../postgres/db.ts';
import { type AuditEntry, auditStream, genesisHash } from './chain.ts';
import { leafHash, nodeHash } from './merkle.ts';
import { openCheckpoint } from './note.ts';
import { rootFromStore } from './tree.ts';
import { chainItemOf, checkParsed, checkpointsBetween, checkSource, type Problem, type StoredEntry } from './verifier.ts';
import { checkLinked } from './verify-linked.ts';
import { linkedEvents, switchSequence } from './linked-range.ts';
import { entryHashOf } from './linker.ts';
import { isV2InChainStream, LINK_RECORD_TYPE, type LinkRecordData, SWITCH_EVENT_TYPE } from './link.ts';

// Verification of one stretch of a chain, [from, to] by sequence number, at a
// cost proportional to the stretch, not to the chain: every entry is
// re-canonicalized, re-hashed, linked to the one before it and compared with
// its source event; every stored tree node wholly inside the stretch is
// recomputed from the entries; every signed checkpoint whose size falls in
// the stretch must be reproduced by the stored tree. A rewritten entry
// therefore shows as a hash or link break, or, when the whole tail and the
// tree's leaves were rewritten with it, as a node or root mismatch against a
// signature the rewriter cannot forge.

export type RangeReport = { from: number; to: number; entries: number; problems: Problem[] };

const PAGE = 2_000;
/** Entries checked between two turns of the event loop. */
const YIELD_EVERY = 200;
/** At most this many events of source types are read to prefetch one page's sources (the rest are looked up one by one). */
const PREFETCH_BUDGET = PAGE * 8;

const SOURCE_TYPES = { eventTypes: businessEventTypes };

const sourceKey = (stream: string, revision: string | bigint) => `${stream}@${revision}`;

/**
 * The source events of a page of entries, in one pass over the log: sources
 * are sealed in log order, so they lie after the previous entry's source and
 * up to this page's last one. The pass stops at a budget (an organization
 * whose events are far apart in a busy shared log); what it did not reach is
 * looked up one by one, so the result is the same either way.
 */
async function prefetchSources(store: EventStore, after: Position, sources: ReadonlyArray<AuditEntry['source']>, budget: number): Promise<Map<string, RecordedEvent>> {
  const found = new Map<string, RecordedEvent>();
  const wanted = new Set<string>();
  let last: Position = START;
  for (const s of sources) {
    if (typeof s?.stream !== 'string' || typeof s.position !== 'string') continue;
    wanted.add(sourceKey(s.stream, s.revision));
    if (s.position > last) last = s.position;
  }
  if (wanted.size === 0) return found;
  try {
    let cursor = after;
    for (let scanned = 0; cursor < last && scanned < budget; ) {
      // Only business events can be sources: the chain's own entries between them are not read again.
      const events = await store.readAll({ after: cursor, maxCount: Math.min(1_000, budget - scanned), filter: SOURCE_TYPES });
      if (events.length === 0) break;
      for (const e of events) {
        if (e.position > last) break;
        const k = sourceKey(e.streamName, e.revision);
        if (wanted.has(k)) found.set(k, e);
      }
      scanned += events.length;
      cursor = events[events.length - 1]!.position;
    }
  } catch {
    // A position the store cannot read (a rewritten entry): every source is looked up alone.
  }
  return found;
}

export async function verifyRange(
  store: EventStore,
  db: Db,
  orgId: string,
  from: number,
  to: number,
  key: { name: string; publicKey: Uint8Array },
  origin: string,
  opts: { prefetchBudget?: number } = {},
): Promise<RangeReport> {
  const problems: Problem[] = [];
  const add = (p: Problem | null) => {
    if (p && problems.length < 100) problems.push(p);
  };
  let prevHash = genesisHash(orgId);
  let prevSource: Position = START;
  if (from > 1) {
    const [prev] = await store.readStream(auditStream(orgId), { fromRevision: BigInt(from - 2), maxCount: 1 });
    if (prev?.type === SWITCH_EVENT_TYPE) prevHash = entryHashOf(prev) ?? prevHash;
    else {
      const entry = prev?.data as unknown as (AuditEntry & Partial<LinkRecordData>) | undefined;
      prevHash = entry?.entry_hash ?? prevHash;
      const position = entry?.source?.position ?? entry?.position;
      if (typeof position === 'string') prevSource = position;
    }
  }
  let prefetched = new Map<string, RecordedEvent>();
  const lookup = async (s: AuditEntry['source']) => {
    if (typeof s?.stream !== 'string') return undefined;
    const hit = prefetched.get(sourceKey(s.stream, s.revision));
    if (hit) return hit;
    const rev = BigInt(s.revision);
    return (await store.readStream(s.stream, { fromRevision: rev, maxCount: 1 })).find((e) => e.revision === rev);
  };
  const leaves: Buffer[] = [];
  let count = 0;
  let expected = BigInt(from - 1);
  // Version 2: from the switch on, the entries are the organization's linked events (read below).
  const switchedAt = await switchSequence(store, orgId);
  /** An entry walked: its problem (if any), its hash as the next link's and the tree's leaf. */
  const taken = async (problem: Problem | null, entryHash: string) => {
    add(problem);
    prevHash = entryHash;
    leaves.push(leafHash(Buffer.from(entryHash, 'hex')));
    expected++;
    count++;
    // A page is ~100 ms of hashing: let waiting requests run between slices of it.
    if (count % YIELD_EVERY === 0) await new Promise((r) => setImmediate(r));
  };
  /** EventStoreDB: the switch seen in this stretch (its sequence), -1 once a link record shows the chain switched before it, 0 before either. */
  let switchedBeside = 0;
  const v1To = switchedAt > 0 ? Math.min(to, switchedAt - 1) : to;
  for (let rev = BigInt(from - 1); rev <= BigInt(v1To - 1); ) {
    const page = await store.readStream(auditStream(orgId), { fromRevision: rev, maxCount: Math.min(PAGE, v1To - Number(rev)) });
    if (page.length === 0) break;
    // A link record (EventStoreDB's version 2) names its fact as a v1 entry names its source.
    const sources = page.map((e) => (e.type === LINK_RECORD_TYPE ? recordSource(e.data as unknown as LinkRecordData) : (e.data as unknown as AuditEntry).source));
    prefetched = await prefetchSources(store, prevSource, sources, opts.prefetchBudget ?? PREFETCH_BUDGET);
    for (const s of sources) if (typeof s?.position === 'string' && s.position > prevSource) prevSource = s.position;
    for (const e of page) {
      if (e.revision !== expected) {
        add({ kind: 'sequence_gap', sequence_number: Number(expected) + 1, to_sequence: Number(e.revision), detail: `entries ${Number(expected) + 1}..${Number(e.revision)} are missing` });
        expected = e.revision;
      }
      if (isV2InChainStream(e)) {
        // Version 2 in the chain's own stream (EventStoreDB): the switch, then each fact's link record.
        const item = await chainItemOf(e, (d) => lookup(recordSource(d)));
        if (!('linked' in item)) continue;
        const checked = checkLinked(orgId, item, prevHash, e.type === SWITCH_EVENT_TYPE ? 0 : (switchedBeside ||= -1));
        if (checked.switchAt !== undefined) switchedBeside = checked.switchAt;
        await taken(checked.problem, checked.entryHash);
        continue;
      }
      const se: StoredEntry = { revision: e.revision, entry: e.data as unknown as AuditEntry };
      const { problem: p, env } = checkParsed(orgId, se, prevHash);
      add(p);
      await taken(p ? null : await checkSource(se, lookup, env), typeof se.entry?.entry_hash === 'string' ? se.entry.entry_hash : '');
    }
    rev = page[page.length - 1]!.revision + 1n;
  }
  if (switchedAt > 0 && to >= switchedAt && count === Math.max(0, v1To - from + 1)) {
    const start = Math.max(from, switchedAt);
    if (start > from) expected = BigInt(start - 1);
    // The entry before the stretch gives the first link to check (a v1 entry's hash was taken above).
    const linked = await linkedEvents(store, db, orgId, start === from && from > switchedAt ? from - 1 : start, to);
    if (start === from && from > switchedAt) {
      const before = linked.get(from - 1);
      prevHash = before ? entryHashOf(before)! : prevHash;
    }
    for (let seq = start; seq <= to; seq++) {
      const e = linked.get(seq);
      if (!e) break;
      if (Number(expected) + 1 !== seq) {
        add({ kind: 'sequence_gap', sequence_number: Number(expected) + 1, to_sequence: seq - 1, detail: `entries ${Number(expected) + 1}..${seq - 1} are missing` });
        expected = BigInt(seq - 1);
      }
      const checked = checkLinked(orgId, { revision: BigInt(seq - 1), linked: e }, prevHash, seq === switchedAt ? 0 : switchedAt);
      await taken(checked.problem, checked.entryHash);
    }
  }
  if (count < to - from + 1) add({ kind: 'truncated', sequence_number: from + count, detail: `the chain ends at ${from + count - 1}, before ${to}` });

  // Stored nodes wholly inside the stretch, recomputed from its entries. On
  // each level they are consecutive: kept as the first index and the hashes.
  const computed: { level: number; lo: number; hashes: Buffer[] }[] = [];
  let level = leaves.map((h, i) => ({ idx: from - 1 + i, hash: h }));
  for (let l = 0; level.length > 0; l++) {
    computed.push({ level: l, lo: level[0]!.idx, hashes: level.map((n) => n.hash) });
    const next: { idx: number; hash: Buffer }[] = [];
    for (let i = 0; i + 1 < level.length; i++) {
      const a = level[i]!;
      const b = level[i + 1]!;
      if (a.idx % 2 === 0 && b.idx === a.idx + 1) {
        next.push({ idx: a.idx / 2, hash: nodeHash(a.hash, b.hash) });
        i++;
      }
    }
    level = next;
  }
  if (computed.length > 0) {
    // One range of the primary key per level, read in one statement (a join on
    // the keys left to the planner hashed a scan of every node of the chain,
    // a cost that grew with history). OFFSET 0 keeps each range its own scan.
    const { rows } = await db.query<{ level: number; idx: string; hash: Buffer }>(
      `SELECT k.l AS level, t.idx::text AS idx, t.hash FROM unnest($2::smallint[], $3::bigint[], $4::bigint[]) AS k(l, lo, hi)
         CROSS JOIN LATERAL (SELECT n.idx, n.hash FROM audit_tree_nodes n WHERE n.org_id = $1 AND n.level = k.l AND n.idx BETWEEN k.lo AND k.hi OFFSET 0) t`,
      [orgId, computed.map((c) => c.level), computed.map((c) => c.lo), computed.map((c) => c.lo + c.hashes.length - 1)],
    );
    for (const r of rows) {
      const lv = computed[r.level];
      const c = lv?.hashes[Number(r.idx) - lv.lo];
      if (c && !r.hash.equals(c)) {
        const idx = Number(r.idx);
        add({ kind: 'root_mismatch', sequence_number: idx * 2 ** r.level + 1, detail: `stored tree node ${r.level}/${idx} differs from the entries it covers` });
      }
    }
  }

  // Signed checkpoints in the stretch, reproduced by the stored tree.
  for (const cp of await checkpointsBetween(store, orgId, from, to)) {
    try {
      const o = openCheckpoint(cp.note, key);
      if (!o.signatureValid || o.checkpoint.origin !== `${origin}/${orgId}`) {
        add({ kind: 'signature_invalid', sequence_number: cp.size, detail: `checkpoint at size ${cp.size} is not validly signed for ${origin}/${orgId}` });
        continue;
      }
      if (!(await rootFromStore(db, orgId, cp.size)).equals(o.checkpoint.root)) {
        add({ kind: 'root_mismatch', sequence_number: cp.size, checkpoint_size: cp.size, detail: `the tree at size ${cp.size} differs from the signed checkpoint` });
      }
    } catch (err) {
      add({ kind: 'root_mismatch', sequence_number: cp.size, checkpoint_size: cp.size, detail: `checkpoint at size ${cp.size} cannot be checked: ${(err as Error).message}` });
    }
  }
  problems.sort((a, b) => a.sequence_number - b.sequence_number);
  return { from, to, entries: count, problems };
}

/** The fact a link record names, as a v1 entry names its source. */
const recordSource = (d: LinkRecordData): AuditEntry['source'] => ({ event_id: d?.event_id, stream: d?.stream, revision: d?.revision, position: d?.position });
