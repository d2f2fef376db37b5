import type { EventStore, RecordedEvent } from '../eventstore/port.ts';
import { businessEventTypes } from '../../events/index.ts';
import { type AuditEntry, auditStream, isAuditStream, canonicalizeSafe, checkpointStream, entryHash, type Envelope, genesisHash, payloadHash } from './chain.ts';
import { canonicalize } from './hash.ts';
import { CompactRange, leafOfHex } from './merkle.ts';
import { openCheckpoint } from './note.ts';
import { checkLinked, type Prechecked, settleLinked } from './verify-linked.ts';
import { type AheadHelper, type AheadOptions, AheadThread, linkedPosition, precheckedTail } from './verify-ahead.ts';
import { type AuditLink, LINK_MEMBER, linkOf, LINK_RECORD_TYPE, type LinkRecordData, switchStream, SWITCH_EVENT_TYPE, withRecordedLink } from './link.ts';

// The chain verifier. It walks a chain in order, recomputes every hash and
// link, re-canonicalizes the stored envelope text, compares each entry with
// its source event when the log is at hand, and checks Merkle roots against the
// signed checkpoints. It reads from an abstract source, so the same code checks
// the live log and an exported bundle offline.

export type ProblemKind =
  | 'malformed_entry'
  | 'sequence_gap'
  | 'sequence_mismatch'
  | 'canonical_mismatch'
  | 'foreign_entry'
  | 'hash_mismatch'
  | 'link_mismatch'
  | 'format_mismatch'
  | 'source_mismatch'
  | 'signature_invalid'
  | 'root_mismatch'
  | 'truncated'
  | 'witness_split'
  | 'quorum_not_met';

/** For root_mismatch, sequence_number is the first entry the checkpoint can no longer vouch for and checkpoint_size the size signed. */
export type Problem = { kind: ProblemKind; sequence_number: number; detail: string; checkpoint_size?: number; to_sequence?: number };

export type StoredEntry = { revision: bigint; entry: AuditEntry };
/** A v2 entry: the business event itself, carrying its link; `revision` is its sequence number - 1. */
export type LinkedItem = {
  revision: bigint;
  linked: RecordedEvent;
  /** Its link, when the reader already decoded it from the event's metadata (else the walk decodes it). */
  link?: AuditLink;
  /** A link record (EventStoreDB) whose fact is not in the log where it says: what is wrong, and the entry hash it claims (the walk goes on from it). */
  unresolved?: { detail: string; entryHash: string };
};
/** One entry of a chain in order: a v1 entry of `audit-<org>`, or a linked event after the switch. */
export type ChainItem = StoredEntry | LinkedItem;
/**
 * Linked events in log order, each already checked for what it says of itself
 * (src/audit/verify-ahead.ts, perhaps on another thread); the walk places each
 * where its link claims (unless that is behind the next place) and settles it.
 */
export type PrecheckedRun = { run: readonly Prechecked[] };
export type StoredCheckpoint = { note: string };

export type ChainSource = {
  orgId: string;
  entries: AsyncIterable<ChainItem | PrecheckedRun> | Iterable<ChainItem | PrecheckedRun>;
  checkpoints: readonly StoredCheckpoint[];
  /** The key checkpoints must be signed with. */
  key: { name: string; publicKey: Uint8Array };
  /** Expected origin line of checkpoints. */
  origin: string;
  /** The source event of an entry, when the log is at hand (absent offline). */
  lookupSource?: (source: AuditEntry['source']) => Promise<RecordedEvent | undefined>;
  /** Entries at or below this sequence are trusted (already verified): only their hashes feed the tree. */
  watermark?: number;
};

export type VerifyReport = {
  org_id: string;
  ok: boolean;
  entries: number;
  tip_sequence: number;
  tip_hash: string;
  checkpoints_checked: number;
  first_bad_sequence: number | null;
  first_problem: Problem | null;
  problems: Problem[];
};

const MAX_PROBLEMS = 100;

/** Whether `data` hashes, under the salt, to the committed payload_hash (false when it has no canonical form). */
function meetsCommitment(salt: string | null, data: unknown, committed: string): boolean {
  if (typeof salt !== 'string') return false;
  try {
    return payloadHash(salt, data) === committed;
  } catch {
    return false;
  }
}

/** Whether two parsed JSON values are the same value (key order aside): then their canonical (RFC 8785) texts are equal. */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameJson(a[i], b[i])) return false;
    return true;
  }
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  for (const k of ka) if (!Object.hasOwn(b, k) || !sameJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])) return false;
  return true;
}

export function checkEntry(orgId: string, se: StoredEntry, prevHash: string): Problem | null {
  return checkParsed(orgId, se, prevHash).problem;
}

/** checkEntry, answering the parsed envelope too when the entry is sound (so the source check need not parse it again). */
export function checkParsed(orgId: string, se: StoredEntry, prevHash: string): { problem: Problem | null; env?: Envelope } {
  const problem = (p: Problem) => ({ problem: p });
  const e = se.entry;
  const seq = Number(se.revision) + 1;
  const bad = (kind: ProblemKind, detail: string): Problem => ({ kind, sequence_number: seq, detail });
  if (typeof e !== 'object' || e === null || typeof e.envelope !== 'string' || typeof e.entry_hash !== 'string' || typeof e.sequence_number !== 'number') {
    return problem(bad('malformed_entry', 'entry lacks its envelope, hash or sequence number'));
  }
  if (e.sequence_number !== seq) return problem(bad('sequence_mismatch', `entry at revision ${se.revision} claims sequence ${e.sequence_number}`));
  let env: Envelope;
  try {
    env = JSON.parse(e.envelope) as Envelope;
  } catch {
    return problem(bad('canonical_mismatch', 'envelope text is not JSON'));
  }
  if (canonicalizeSafe(env) !== e.envelope) return problem(bad('canonical_mismatch', 'envelope text is not in canonical (RFC 8785) form'));
  if (env.org_id !== orgId) return problem(bad('foreign_entry', `entry belongs to organization ${env.org_id}`));
  if (entryHash(e.envelope) !== e.entry_hash) return problem(bad('hash_mismatch', 'entry_hash does not match the envelope'));
  if (env.sequence_number !== seq || env.prev_hash !== e.prev_hash || env.event_type !== e.event_type || env.event_id !== e.source?.event_id || env.occurred_at !== e.happened_at) {
    return problem(bad('hash_mismatch', 'entry fields differ from the hashed envelope'));
  }
  if (e.payload !== null) {
    if (typeof e.payload_salt !== 'string' || payloadHash(e.payload_salt, e.payload) !== env.payload_hash) {
      return problem(bad('hash_mismatch', 'payload does not match the committed payload_hash'));
    }
  }
  if (e.prev_hash !== prevHash) return problem(bad('link_mismatch', 'prev_hash is not the previous entry_hash'));
  return { problem: null, env };
}

/** A sound entry (checkEntry found no problem) against its source event in the log. */
export async function checkSource(se: StoredEntry, lookup: NonNullable<ChainSource['lookupSource']>, parsed?: Envelope): Promise<Problem | null> {
  const e = se.entry;
  const seq = Number(se.revision) + 1;
  const env = parsed ?? (JSON.parse(e.envelope) as Envelope);
  const src = await lookup(e.source);
  const bad = (detail: string): Problem => ({ kind: 'source_mismatch', sequence_number: seq, detail });
  if (!src) return bad(`source event ${e.source.stream}@${e.source.revision} is missing`);
  if (src.id !== env.event_id) return bad('source event id differs');
  if (src.type !== env.event_type) return bad('source event type differs');
  if (src.metadata.org_id !== env.org_id) return bad('source event belongs to another organization');
  if (src.recordedAt !== env.recorded_at) return bad('source event recorded_at differs');
  const occurred = typeof src.metadata.occurred_at === 'string' ? src.metadata.occurred_at : src.recordedAt;
  if (occurred !== env.occurred_at) return bad('source event occurred_at differs');
  // The sealed payload was checked against payload_hash (checkEntry); the source
  // must meet the same commitment. The same JSON value has the same canonical
  // form, so a source equal to the sealed payload meets it without hashing.
  if (e.payload !== null && !sameJson(src.data, e.payload) && !meetsCommitment(e.payload_salt, src.data, env.payload_hash)) return bad('source event data differs from the sealed payload');
  return null;
}

export async function verifyChain(source: ChainSource): Promise<VerifyReport> {
  const problems: Problem[] = [];
  const add = (p: Problem | null) => {
    if (p && problems.length < MAX_PROBLEMS) problems.push(p);
  };
  const watermark = source.watermark ?? 0;
  let expectedRevision = 0n;
  let prevHash = genesisHash(source.orgId);
  let count = 0;
  let tip = 0;
  const range = new CompactRange();
  // Open and sort checkpoints first, so roots are compared while the tree grows.
  const opened: { size: number; root: Buffer }[] = [];
  for (const cp of source.checkpoints) {
    try {
      const o = openCheckpoint(cp.note, source.key);
      if (!o.signatureValid) {
        add({ kind: 'signature_invalid', sequence_number: o.checkpoint.size, detail: `checkpoint at size ${o.checkpoint.size} is not validly signed by ${source.key.name}` });
        continue;
      }
      if (o.checkpoint.origin !== source.origin) {
        add({ kind: 'signature_invalid', sequence_number: o.checkpoint.size, detail: `checkpoint origin ${o.checkpoint.origin} is not ${source.origin}` });
        continue;
      }
      opened.push({ size: o.checkpoint.size, root: o.checkpoint.root });
    } catch (err) {
      add({ kind: 'signature_invalid', sequence_number: 0, detail: `unreadable checkpoint: ${(err as Error).message}` });
    }
  }
  opened.sort((a, b) => a.size - b.size);
  let nextCp = 0;
  let lastGoodCheckpoint = 0;
  // Past a gap neither the next link nor any later root can be recomputed: the
  // stretch is unverifiable (reported as the gap), not a second break.
  let gapSeen = false;
  let linkUnverifiable = false;
  /** The sequence number of the switch entry, once seen (0: a version 1 chain so far). */
  let switchedAt = 0;
  const checkRoots = () => {
    if (gapSeen) return;
    while (nextCp < opened.length && opened[nextCp]!.size === range.size) {
      const cp = opened[nextCp++]!;
      if (range.root().equals(cp.root)) lastGoodCheckpoint = cp.size;
      else add({ kind: 'root_mismatch', sequence_number: lastGoodCheckpoint + 1, checkpoint_size: cp.size, detail: `chain root at size ${cp.size} differs from the signed checkpoint (entries after ${lastGoodCheckpoint} were rewritten)` });
    }
  };
  checkRoots();

  /** Every entry's first check: its place. A place past the expected one is a gap (reported once, and what follows is unverifiable). */
  const place = (revision: bigint): number => {
    count++;
    const seq = Number(revision) + 1;
    if (revision !== expectedRevision) {
      add({ kind: 'sequence_gap', sequence_number: Number(expectedRevision) + 1, to_sequence: seq - 1, detail: `entries ${Number(expectedRevision) + 1}..${seq - 1} are missing` });
      expectedRevision = revision;
      gapSeen = true;
      linkUnverifiable = true;
    }
    return seq;
  };
  /** Version 2: the event is the entry (docs/audit-chain.md, "Version 2"), whole or prechecked. */
  const linked = (revision: bigint, item: LinkedItem | undefined, pre: Prechecked | undefined) => {
    const seq = place(revision);
    const known = linkUnverifiable ? undefined : prevHash;
    const checked = pre ? settleLinked(pre, seq, known, switchedAt) : checkLinked(source.orgId, item!, known, switchedAt);
    linkUnverifiable = false;
    if (seq > watermark) add(checked.problem);
    if (switchedAt === 0 && checked.switchAt !== undefined) switchedAt = checked.switchAt;
    prevHash = checked.entryHash;
    range.append(pre ? Buffer.from(pre.leaf, 'hex') : leafOfHex(checked.entryHash));
    checkRoots();
    expectedRevision++;
    tip = seq;
  };

  for await (const se of source.entries) {
    if ('run' in se) {
      // Each in the place its link claims, unless that is behind the next place (the walk's own rule for a linked event).
      for (const pre of se.run) linked(linkedPosition(pre.claimed, expectedRevision), undefined, pre);
      continue;
    }
    if ('linked' in se) {
      linked(se.revision, se, undefined);
      continue;
    }
    const seq = place(se.revision);
    if (switchedAt > 0 && seq > watermark) add({ kind: 'format_mismatch', sequence_number: seq, detail: `a version 1 entry after the chain switched to version 2 at ${switchedAt}` });
    const entryHashHex = typeof se.entry?.entry_hash === 'string' ? se.entry.entry_hash : '';
    if (seq > watermark) {
      const { problem, env } = checkParsed(source.orgId, se, linkUnverifiable ? (se.entry?.prev_hash ?? prevHash) : prevHash);
      linkUnverifiable = false;
      add(problem);
      if (!problem && source.lookupSource) add(await checkSource(se, source.lookupSource, env));
    }
    prevHash = entryHashHex;
    range.append(leafOfHex(entryHashHex));
    checkRoots();
    expectedRevision++;
    tip = seq;
  }
  for (; nextCp < opened.length; nextCp++) {
    const cp = opened[nextCp]!;
    if (gapSeen && cp.size <= tip) continue;
    add({ kind: 'truncated', sequence_number: tip + 1, detail: `a checkpoint was signed at size ${cp.size} but the chain ends at ${tip}` });
  }
  // A root mismatch only bounds the break to (last good checkpoint, size]; an
  // entry-level problem within that bound pinpoints it and comes first.
  const rank = (p: Problem) => p.checkpoint_size ?? p.sequence_number;
  problems.sort((a, b) => rank(a) - rank(b) || Number(a.kind === 'root_mismatch') - Number(b.kind === 'root_mismatch') || a.sequence_number - b.sequence_number);
  const first = problems[0] ?? null;
  return {
    org_id: source.orgId,
    ok: problems.length === 0,
    entries: count,
    tip_sequence: tip,
    tip_hash: prevHash,
    checkpoints_checked: opened.length,
    first_bad_sequence: first ? first.sequence_number : null,
    first_problem: first,
    problems,
  };
}

/**
 * The whole chain of an organization in order: the events of `audit-<org>`
 * (its v1 entries; on EventStoreDB also the switch and the link records, each
 * read as the fact it links), then on PostgreSQL, once it switched (the switch
 * event in `audit_switch-<org>`), the switch and the organization's linked
 * events in log order (docs/audit-chain.md, "Version 2").
 */
export function chainItems(store: EventStore, orgId: string): AsyncGenerator<ChainItem> {
  return items(store, orgId, { prechecked: false }) as AsyncGenerator<ChainItem>;
}

/**
 * The chain's items. For a walk (`prechecked`), the linked tail on the
 * PostgreSQL log comes in prechecked runs, a stretch of the log at a time,
 * with a helper thread's when given one (src/audit/verify-ahead.ts); readers
 * that need the events themselves (the export, the windows) get each event.
 */
async function* items(store: EventStore, orgId: string, opts: { prechecked: boolean; helper?: AheadThread; ahead?: AheadOptions }): AsyncGenerator<ChainItem | PrecheckedRun> {
  let handedOn = false;
  try {
    let revision = 0n;
    const facts = factsOfRecords(store);
    for await (const e of store.iterateStream(auditStream(orgId))) {
      yield await chainItemOf(e, facts);
      revision = e.revision + 1n;
    }
    const [sw] = await store.readStream(switchStream(orgId), { maxCount: 1 });
    if (!sw) return;
    const swLink = linkOf(sw);
    yield { revision: (revision = linkedPosition(swLink?.sequence_number, revision)), linked: sw, link: swLink };
    revision++;
    if (opts.prechecked && store.kind === 'postgres') {
      handedOn = true;
      yield* precheckedTail(store, orgId, sw.position, opts.helper, opts.ahead);
      return;
    }
    for await (const e of store.iterateAll({ after: sw.position })) {
      // Every business event of the organization after the switch is an entry: one without its link is reported (malformed_entry).
      if (e.metadata?.org_id !== orgId || isAuditStream(e.streamName)) continue;
      const link = linkOf(e);
      yield { revision: (revision = linkedPosition(link?.sequence_number, revision)), linked: e, link };
      revision++;
    }
  } finally {
    // A helper the walk never handed the tail to has nothing to do.
    if (!handedOn) await opts.helper?.stop(false);
  }
}

/** The facts link records name, found in log order (the records follow the log) or where they are. */
export function factsOfRecords(store: EventStore): (d: LinkRecordData) => Promise<RecordedEvent | undefined> {
  const cursor = logCursor(store, businessEventTypes);
  return (d) => cursor({ event_id: d.event_id, stream: d.stream, revision: d.revision, position: d.position });
}

/**
 * One event of a chain's stream as an entry of the walk: a v1 entry; the
 * switch (on EventStoreDB it is in the chain's stream); a link record as the
 * fact it links (docs/audit-chain.md, "Version 2 on EventStoreDB").
 */
export async function chainItemOf(e: RecordedEvent, facts: (d: LinkRecordData) => Promise<RecordedEvent | undefined>): Promise<ChainItem> {
  if (e.type === SWITCH_EVENT_TYPE) return { revision: e.revision, linked: e };
  if (e.type !== LINK_RECORD_TYPE) return { revision: e.revision, entry: e.data as unknown as AuditEntry };
  const d = e.data as unknown as LinkRecordData;
  const fact = typeof d?.position === 'string' && typeof d.stream === 'string' ? await facts(d) : undefined;
  if (fact && fact.id === d.event_id) return { revision: e.revision, linked: withRecordedLink(fact, d) };
  const stub: RecordedEvent = { id: String(d?.event_id), type: String(d?.event_type), streamName: String(d?.stream), revision: -1n, position: String(d?.position), data: null as never, metadata: { org_id: e.metadata.org_id, [LINK_MEMBER]: d?.link } as RecordedEvent['metadata'], recordedAt: '' };
  return { revision: e.revision, linked: stub, unresolved: { detail: `the fact it links (${String(d?.event_id)} at ${String(d?.stream)}@${String(d?.revision)}) is not in the log there`, entryHash: typeof d?.entry_hash === 'string' ? d.entry_hash : '0'.repeat(64) } };
}

/**
 * A linked event's place in the walk: the next one, unless its link claims a
 * later sequence number. Then the entries between are missing from the log (a
 * removed event, or the last v1 entries before the switch) and the walk reports
 * them as the gap they are, as a v1 stream's missing revisions, instead of every
 * later entry as out of place. A claim behind the walk stays where it is found
 * (reported there: sequence_mismatch).
 */
export async function storedCheckpoints(store: EventStore, orgId: string): Promise<{ note: string; verifier_key: string; size: number; root_hash: string; signed_at: string }[]> {
  const out = [];
  let from = 0n;
  for (;;) {
    const page = await store.readStream(checkpointStream(orgId), { fromRevision: from, maxCount: 5000 });
    for (const e of page) out.push(e.data as unknown as { note: string; verifier_key: string; size: number; root_hash: string; signed_at: string });
    if (page.length < 5000) return out;
    from = page[page.length - 1]!.revision + 1n;
  }
}

type CheckpointEvent = Awaited<ReturnType<typeof storedCheckpoints>>[number];

/** Checkpoints are read from the end of their stream this many at a time. */
const CHECKPOINT_PAGE = 256;

/**
 * The signed checkpoints whose size falls in [from, to], at a cost that does
 * not grow with the chain's history when the stretch is recent: the
 * checkpoint stream is read backwards, page by page, and stops after a whole
 * page of checkpoints below `from`. Sizes grow with the stream (a signer
 * signs its chain's current size, after every earlier checkpoint it knows
 * of); two processes signing at once can swap neighbours, never a whole page.
 */
export async function checkpointsBetween(store: EventStore, orgId: string, from: number, to: number): Promise<CheckpointEvent[]> {
  const out: CheckpointEvent[] = [];
  let before: bigint | undefined;
  for (;;) {
    const page = await store.readStream(checkpointStream(orgId), { direction: 'backwards', maxCount: CHECKPOINT_PAGE, ...(before !== undefined ? { fromRevision: before } : {}) });
    let older = 0;
    for (const e of page) {
      const cp = e.data as unknown as CheckpointEvent;
      // A size that is not a number is checked by the stretch that asks for everything.
      if (typeof cp?.size !== 'number') {
        out.push(cp);
        continue;
      }
      if (cp.size < from) older++;
      else if (cp.size <= to) out.push(cp);
    }
    if (page.length < CHECKPOINT_PAGE || older === page.length) break;
    const last = page[page.length - 1]!.revision;
    if (last === 0n) break;
    before = last - 1n;
  }
  return out.reverse();
}

/**
 * Source events for entries in sealing order. The sealer seals in log order,
 * so a forward cursor over the log's business events finds each source in
 * sequence; anything out of order (a tampered entry) is looked up directly.
 */
export function logCursor(store: EventStore, eventTypes: readonly string[]): NonNullable<ChainSource['lookupSource']> {
  let events: AsyncIterator<RecordedEvent> | undefined;
  /** The first event of the log not before the last source asked for (undefined once the log is read). */
  let cur: RecordedEvent | undefined;
  const advance = async () => {
    const r = await events!.next();
    cur = r.done ? undefined : r.value;
  };
  const direct = async (s: AuditEntry['source']) => {
    const rev = BigInt(s.revision);
    return (await store.readStream(s.stream, { fromRevision: rev, maxCount: 1 })).find((e) => e.revision === rev);
  };
  return async (s) => {
    if (typeof s?.position !== 'string' || typeof s.stream !== 'string') return undefined;
    if (!events) {
      events = store.iterateAll({ filter: { eventTypes } })[Symbol.asyncIterator]();
      await advance();
    }
    // A source behind the cursor (entries out of log order: tampered) is read where it is.
    if (cur !== undefined && s.position < cur.position) return direct(s);
    while (cur !== undefined && cur.position < s.position) await advance();
    return cur !== undefined && cur.position === s.position && cur.streamName === s.stream ? cur : direct(s);
  };
}

/** Verifies an organization's chain in the live log against its source events. */
/** Passes the entries through, telling `onEntry` how many went by (a progress display). */
async function* counted(items: AsyncIterable<ChainItem | PrecheckedRun>, onEntry: (n: number) => void): AsyncIterable<ChainItem | PrecheckedRun> {
  let n = 0;
  for await (const item of items) {
    if ('run' in item) for (let i = 0; i < item.run.length; i++) onEntry(++n);
    else onEntry(++n);
    yield item;
  }
}

export async function verifyOrgChain(
  store: EventStore,
  orgId: string,
  key: { name: string; publicKey: Uint8Array },
  origin: string,
  onEntry?: (n: number) => void,
  /** `helper`: a second thread for the linked tail on the PostgreSQL log (the command line's walk; the service's verifier keeps to its one). */
  opts: AheadOptions & { helper?: AheadHelper } = {},
): Promise<VerifyReport> {
  const { helper, ...ahead } = opts;
  // Started first: it loads while the checkpoints and the chain's first part are read.
  const thread = helper && store.kind === 'postgres' ? AheadThread.start(helper, orgId) : undefined;
  let checkpoints: Awaited<ReturnType<typeof storedCheckpoints>>;
  try {
    checkpoints = await storedCheckpoints(store, orgId);
  } catch (err) {
    await thread?.stop(false);
    throw err;
  }
  return verifyChain({
    orgId,
    entries: onEntry ? counted(items(store, orgId, { prechecked: true, helper: thread, ahead }), onEntry) : items(store, orgId, { prechecked: true, helper: thread, ahead }),
    checkpoints,
    key,
    origin: `${origin}/${orgId}`,
    lookupSource: logCursor(store, businessEventTypes),
  });
}

