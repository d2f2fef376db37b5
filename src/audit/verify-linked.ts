import { type AuditLink, linkedEntryHash, linkOf, payloadHashV2, SWITCH_EVENT_TYPE, type SwitchData } from './link.ts';
import type { LinkedItem, Problem, ProblemKind } from './verifier.ts';

// One v2 entry checked (docs/audit-chain.md, "Version 2", "Verifying"): the
// event's link, its payload against the commitment, its link to the previous
// entry, and the switch rule. Answers the entry's hash whatever it found, so
// the walk and the tree go on (a problem is reported once, at its entry).

/** An entry hash no real entry has: the walk continues past an entry that cannot be hashed. */
const UNHASHABLE = '0'.repeat(64);

export function checkLinked(
  orgId: string,
  item: LinkedItem,
  /** The previous entry's hash; undefined when it cannot be known (right after a gap). */
  prevHash: string | undefined,
  /** The switch entry's sequence number, 0 while none was seen. */
  switchedAt: number,
): { problem: Problem | null; entryHash: string; switchAt?: number } {
  const e = item.linked;
  const seq = Number(item.revision) + 1;
  if (item.unresolved) return { problem: bad(seq, 'source_mismatch', item.unresolved.detail), entryHash: item.unresolved.entryHash };
  const link: AuditLink | undefined = item.link ?? (typeof e === 'object' && e !== null && typeof e.metadata === 'object' && e.metadata !== null ? linkOf(e) : undefined);
  if (!link) return { problem: bad(seq, 'malformed_entry', `event ${String(e?.id)} carries no audit link in the compact form`), entryHash: UNHASHABLE };
  let entryHash: string;
  try {
    entryHash = linkedEntryHash(e, link);
  } catch {
    return { problem: bad(seq, 'malformed_entry', 'the event has no canonical envelope'), entryHash: UNHASHABLE };
  }
  if (link.sequence_number !== seq) return { problem: bad(seq, 'sequence_mismatch', `event at chain position ${seq} claims sequence ${link.sequence_number}`), entryHash };
  if (e.metadata.org_id !== orgId) return { problem: bad(seq, 'foreign_entry', `entry belongs to organization ${e.metadata.org_id}`), entryHash };
  let switchAt: number | undefined;
  if (switchedAt === 0) {
    const d = e.data as Partial<SwitchData>;
    if (e.type !== SWITCH_EVENT_TYPE || d.format !== 2 || d.from_sequence !== seq || d.org_id !== orgId) {
      return { problem: bad(seq, 'format_mismatch', `a version 2 entry before the chain's switch entry (${SWITCH_EVENT_TYPE} from this sequence)`), entryHash };
    }
    switchAt = seq;
  } else if (e.type === SWITCH_EVENT_TYPE) {
    return { problem: bad(seq, 'format_mismatch', `a second switch entry (the chain switched at ${switchedAt})`), entryHash };
  }
  let problem: Problem | null = null;
  if (link.payload_salt !== null && !meetsCommitment(link.payload_salt, e.data, link.payload_hash)) problem = bad(seq, 'hash_mismatch', 'payload does not match the committed payload_hash');
  else if (prevHash !== undefined && link.prev_hash !== prevHash) problem = bad(seq, 'link_mismatch', 'prev_hash is not the previous entry_hash');
  return switchAt !== undefined ? { problem, entryHash, switchAt } : { problem, entryHash };
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
