import type { RecordedEvent } from '../eventstore/port.ts';
import { type AuditLink, linkedEntryHash, linkOf, payloadHashV2, SWITCH_EVENT_TYPE, type SwitchData } from './link.ts';
import { leafHexOfHex } from './merkle.ts';
import type { LinkedItem, Problem, ProblemKind } from './verifier.ts';

// One v2 entry checked (docs/audit-chain.md, "Version 2", "Verifying"): the
// event's link, its payload against the commitment, its link to the previous
// entry, and the switch rule. Answers the entry's hash whatever it found, so
// the walk and the tree go on (a problem is reported once, at its entry).
//
// In two steps: what an event says of itself, whatever its place in the chain
// (`precheckLinked`: decoding its link, hashing its envelope and its payload,
// nearly all of an entry's cost), then what its place asks of it
// (`settleLinked`: its sequence number, the previous entry's hash, the switch
// rule). The first can run on another thread (src/audit/verify-ahead.ts); the
// walk settles every entry in order on its own.

/** An entry hash no real entry has: the walk continues past an entry that cannot be hashed. */
const UNHASHABLE = '0'.repeat(64);
const UNHASHABLE_LEAF = leafHexOfHex(UNHASHABLE);

/** What a linked event says of itself, ready for its place in the walk (plain data: it crosses threads). */
export type Prechecked = {
  /** The sequence number its link claims; undefined when it has no link in the compact form. */
  claimed: number | undefined;
  /** Why it is not an entry at all (no link, no canonical envelope), reported at its place. */
  malformed?: string;
  entryHash: string;
  /** Its leaf hash in the tree, hex (of the entry hash's bytes). */
  leaf: string;
  /** Its link's prev_hash ('' without a link). */
  prevHash: string;
  /** Its organization when it is not the chain's (reported as a foreign entry). */
  foreignOrg?: string;
  /** Whether it is a switch event at all. */
  isSwitch: boolean;
  /** A switch event's from_sequence when its data is a switch of this chain to version 2 (undefined otherwise). */
  switchFrom: number | undefined;
  /** Its payload meets its commitment (true once redacted: nothing is committed to). */
  payloadOk: boolean;
};

export function precheckLinked(orgId: string, e: RecordedEvent, decoded?: AuditLink): Prechecked {
  const link: AuditLink | undefined = decoded ?? (typeof e === 'object' && e !== null ? linkOf(e) : undefined);
  if (!link) return malformed(undefined, `event ${String(e?.id)} carries no audit link in the compact form`);
  let entryHash: string;
  try {
    entryHash = linkedEntryHash(e, link);
  } catch {
    return malformed(link.sequence_number, 'the event has no canonical envelope');
  }
  const isSwitch = e.type === SWITCH_EVENT_TYPE;
  const d = (isSwitch && typeof e.data === 'object' && e.data !== null ? e.data : {}) as Partial<SwitchData>;
  const pre: Prechecked = {
    claimed: link.sequence_number,
    entryHash,
    leaf: leafHexOfHex(entryHash),
    prevHash: link.prev_hash,
    isSwitch,
    switchFrom: isSwitch && d.format === 2 && d.org_id === orgId && typeof d.from_sequence === 'number' ? d.from_sequence : undefined,
    payloadOk: link.payload_salt === null || meetsCommitment(link.payload_salt, e.data, link.payload_hash),
  };
  if (e.metadata.org_id !== orgId) pre.foreignOrg = String(e.metadata.org_id);
  return pre;
}

function malformed(claimed: number | undefined, why: string): Prechecked {
  return { claimed, malformed: why, entryHash: UNHASHABLE, leaf: UNHASHABLE_LEAF, prevHash: '', isSwitch: false, switchFrom: undefined, payloadOk: false };
}

/** The checks an entry's place asks, in the order the walk reports them. */
export function settleLinked(
  pre: Prechecked,
  /** Its sequence number in the walk. */
  seq: number,
  /** The previous entry's hash; undefined when it cannot be known (right after a gap). */
  prevHash: string | undefined,
  /** The switch entry's sequence number, 0 while none was seen. */
  switchedAt: number,
): { problem: Problem | null; entryHash: string; switchAt?: number } {
  const entryHash = pre.entryHash;
  if (pre.malformed !== undefined) return { problem: bad(seq, 'malformed_entry', pre.malformed), entryHash };
  if (pre.claimed !== seq) return { problem: bad(seq, 'sequence_mismatch', `event at chain position ${seq} claims sequence ${pre.claimed}`), entryHash };
  if (pre.foreignOrg !== undefined) return { problem: bad(seq, 'foreign_entry', `entry belongs to organization ${pre.foreignOrg}`), entryHash };
  let switchAt: number | undefined;
  if (switchedAt === 0) {
    if (pre.switchFrom !== seq) return { problem: bad(seq, 'format_mismatch', `a version 2 entry before the chain's switch entry (${SWITCH_EVENT_TYPE} from this sequence)`), entryHash };
    switchAt = seq;
  } else if (pre.isSwitch) {
    return { problem: bad(seq, 'format_mismatch', `a second switch entry (the chain switched at ${switchedAt})`), entryHash };
  }
  let problem: Problem | null = null;
  if (!pre.payloadOk) problem = bad(seq, 'hash_mismatch', 'payload does not match the committed payload_hash');
  else if (prevHash !== undefined && pre.prevHash !== prevHash) problem = bad(seq, 'link_mismatch', 'prev_hash is not the previous entry_hash');
  return switchAt !== undefined ? { problem, entryHash, switchAt } : { problem, entryHash };
}

export function checkLinked(orgId: string, item: LinkedItem, prevHash: string | undefined, switchedAt: number): { problem: Problem | null; entryHash: string; switchAt?: number } {
  const seq = Number(item.revision) + 1;
  if (item.unresolved) return { problem: bad(seq, 'source_mismatch', item.unresolved.detail), entryHash: item.unresolved.entryHash };
  return settleLinked(precheckLinked(orgId, item.linked, item.link), seq, prevHash, switchedAt);
}

function bad(sequence_number: number, kind: ProblemKind, detail: string): Problem {
  return { kind, sequence_number, detail };
}

function meetsCommitment(salt: string, data: unknown, payloadHash: string): boolean {
  try {
    return payloadHashV2(salt, data) === payloadHash;
  } catch {
    return false;
  }
}
