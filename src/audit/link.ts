import type { EventMetadata, RecordedEvent } from '../eventstore/port.ts';
import { canonicalize, hmacSha256, sha256Hex, str } from './hash.ts';
import { type AuditEntry, occurredAt, TAG } from './chain.ts';

// The audit chain, version 2 (docs/audit-chain.md, "Version 2", is the
// normative text). A v2 entry is the business event itself: the event carries
// its link in its metadata (`audit_link`, one compact string written in the
// same append as the event), and its envelope is derived from the event's own
// fields and that link. Nothing of the event is copied.
//
//   audit_link = "2:" sequence_number ":" prev_hash ":" payload_salt ":" payload_hash
//
// (decimal sequence number, lowercase hex hashes; the salt is empty once the
// payload is redacted).

export const ENTRY_PREFIX_V2 = `${TAG}/audit-entry/v2\n`;
export const PAYLOAD_PREFIX_V2 = `${TAG}/audit-payload/v2\n`;
/** The metadata member carrying a v2 link. */
export const LINK_MEMBER = 'audit_link';
/** The event that switches a chain to v2: itself the first v2 entry. */
export const SWITCH_EVENT_TYPE = 'audit.chain_switched';
export const switchStream = (orgId: string) => `audit_switch-${orgId}`;
/** A fact's link written beside it (EventStoreDB): the next event of `audit-<org>`, naming the fact. */
export const LINK_RECORD_TYPE = 'audit.fact_linked';

/** Whether an event of `audit-<org>` is a version 2 entry written there (EventStoreDB: the switch, or a link record). */
export const isV2InChainStream = (e: { type: string }) => e.type === SWITCH_EVENT_TYPE || e.type === LINK_RECORD_TYPE;

/** The data of a link record (events/audit.ts AuditFactLinked). */
export type LinkRecordData = { event_id: string; stream: string; revision: string; position: string; event_type: string; happened_at: string; link: string; entry_hash: string };

export type AuditLink = {
  sequence_number: number;
  prev_hash: string;
  /** Hex salt; null once the payload is redacted. */
  payload_salt: string | null;
  payload_hash: string;
};

export type EnvelopeV2 = {
  v: 2;
  org_id: string;
  sequence_number: number;
  prev_hash: string;
  event_id: string;
  event_type: string;
  stream: string;
  /** `metadata.occurred_at` (the writer's clock), null when absent: a store's own recording time is never hashed in v2. */
  occurred_at: string | null;
  actor: { kind: string; id: string };
  payload_hash: string;
};

/** The data of the switch event (SWITCH_EVENT_TYPE). */
export type SwitchData = { org_id: string; format: 2; from_sequence: number };

const HEX64 = /^[0-9a-f]{64}$/;
const HEX32 = /^[0-9a-f]{32}$/;
const LINK = /^2:[1-9][0-9]{0,15}:[0-9a-f]{64}:(?:[0-9a-f]{32})?:[0-9a-f]{64}$/;

export function encodeLink(l: AuditLink): string {
  if (!Number.isSafeInteger(l.sequence_number) || l.sequence_number < 1) throw new Error(`audit link: bad sequence number ${l.sequence_number}`);
  if (!HEX64.test(l.prev_hash) || !HEX64.test(l.payload_hash) || (l.payload_salt !== null && !HEX32.test(l.payload_salt))) throw new Error('audit link: hashes are 64 and the salt 32 lowercase hex characters');
  return `2:${l.sequence_number}:${l.prev_hash}:${l.payload_salt ?? ''}:${l.payload_hash}`;
}

/** The link of a metadata value, or undefined when it has none or it is not in the exact compact form. */
export function decodeLink(value: unknown): AuditLink | undefined {
  if (typeof value !== 'string' || !LINK.test(value)) return undefined;
  // In the exact form: the sequence number up to the second colon, then fixed widths from each end.
  const c = value.indexOf(':', 2);
  const seq = Number(value.slice(2, c));
  if (!Number.isSafeInteger(seq)) return undefined;
  const prevEnd = c + 65;
  const hashAt = value.length - 64;
  return { sequence_number: seq, prev_hash: value.slice(c + 1, prevEnd), payload_salt: hashAt - 1 === prevEnd + 1 ? null : value.slice(prevEnd + 1, hashAt - 1), payload_hash: value.slice(hashAt) };
}

/** An event's link; undefined when its metadata has none in the compact form (or no metadata at all). */
export const linkOf = (e: Pick<RecordedEvent, 'metadata'>): AuditLink | undefined => decodeLink((e.metadata as Record<string, unknown> | undefined)?.[LINK_MEMBER]);

export function payloadHashV2(saltHex: string, payload: unknown): string {
  return hmacSha256(Buffer.from(saltHex, 'hex'), PAYLOAD_PREFIX_V2, canonicalize(payload)).toString('hex');
}

export function entryHashV2(envelopeText: string): string {
  return sha256Hex(ENTRY_PREFIX_V2 + envelopeText);
}

function actorOf(metadata: EventMetadata): { kind: string; id: string } {
  const a = metadata.actor as { kind?: unknown; id?: unknown } | undefined;
  return typeof a?.kind === 'string' && typeof a.id === 'string' ? { kind: a.kind, id: a.id } : { kind: 'system', id: 'unknown' };
}

/** The envelope a linked event is hashed as: its own fields and its link. */
export function envelopeV2(e: RecordedEvent, link: AuditLink): EnvelopeV2 {
  return {
    v: 2,
    org_id: e.metadata.org_id,
    sequence_number: link.sequence_number,
    prev_hash: link.prev_hash,
    event_id: e.id,
    event_type: e.type,
    stream: e.streamName,
    occurred_at: typeof e.metadata.occurred_at === 'string' ? e.metadata.occurred_at : null,
    actor: actorOf(e.metadata),
    payload_hash: link.payload_hash,
  };
}

/**
 * The canonical text of `envelopeV2(e, link)`: written member by member in
 * RFC 8785's order when every member is a string or a safe integer (what the
 * walk hashes for each entry); anything else (a malformed event) goes through
 * `canonicalize`, which decides its form or throws. A test holds the two to
 * the same bytes.
 */
export function envelopeV2Text(e: RecordedEvent, link: AuditLink): string {
  const m = e.metadata;
  const occurred = typeof m?.occurred_at === 'string' ? m.occurred_at : null;
  const a = m?.actor as { kind?: unknown; id?: unknown } | undefined;
  if (
    typeof m?.org_id !== 'string' ||
    typeof e.id !== 'string' ||
    typeof e.type !== 'string' ||
    typeof e.streamName !== 'string' ||
    typeof link.prev_hash !== 'string' ||
    typeof link.payload_hash !== 'string' ||
    !Number.isSafeInteger(link.sequence_number)
  ) {
    return canonicalize(envelopeV2(e, link));
  }
  const actor = typeof a?.kind === 'string' && typeof a.id === 'string' ? `{"id":${str(a.id)},"kind":${str(a.kind)}}` : '{"id":"unknown","kind":"system"}';
  return `{"actor":${actor},"event_id":${str(e.id)},"event_type":${str(e.type)},"occurred_at":${occurred === null ? 'null' : str(occurred)},"org_id":${str(m.org_id)},"payload_hash":${str(link.payload_hash)},"prev_hash":${str(link.prev_hash)},"sequence_number":${link.sequence_number},"stream":${str(e.streamName)},"v":2}`;
}

/** The entry_hash of a linked event (its leaf input in the tree is the 32 raw bytes). */
export function linkedEntryHash(e: RecordedEvent, link: AuditLink): string {
  return entryHashV2(envelopeV2Text(e, link));
}

/**
 * The link a writer puts in an event's metadata before the append: the event
 * as it will be appended (id, type, stream, metadata, data: all known before
 * the append on either store), its sequence number and the previous entry's
 * hash. Answers the link and the new entry's hash (the next prev_hash).
 */
export function linkEvent(e: RecordedEvent, sequence: number, prevHash: string, saltHex: string): { link: string; entryHash: string } {
  const link: AuditLink = { sequence_number: sequence, prev_hash: prevHash, payload_salt: saltHex, payload_hash: payloadHashV2(saltHex, e.data) };
  return { link: encodeLink(link), entryHash: linkedEntryHash(e, link) };
}

/** The entry GET /v1/audit-events and the read model serve for a linked event (the spec's fields; same shape as a v1 entry). */
export function linkedEntry(e: RecordedEvent, link: AuditLink): Pick<AuditEntry, 'sequence_number' | 'event_type' | 'happened_at' | 'payload' | 'prev_hash' | 'entry_hash'> {
  return {
    sequence_number: link.sequence_number,
    event_type: e.type,
    happened_at: occurredAt(e),
    payload: link.payload_salt === null ? null : e.data,
    prev_hash: link.prev_hash,
    entry_hash: linkedEntryHash(e, link),
  };
}

/** A linked event as the export bundle writes it (docs/audit-chain.md, "In the export bundle"). */
export type LinkedEventJson = { event_id: string; event_type: string; stream: string; recorded_at: string; metadata: EventMetadata; data: RecordedEvent['data'] };

export function linkedToJson(e: RecordedEvent): LinkedEventJson {
  return { event_id: e.id, event_type: e.type, stream: e.streamName, recorded_at: e.recordedAt, metadata: e.metadata, data: e.data };
}

/** The event of a bundle line; its log revision and position are not part of the entry. */
export function linkedFromJson(j: LinkedEventJson): RecordedEvent {
  return { id: j?.event_id, type: j?.event_type, streamName: j?.stream, revision: -1n, position: '', recordedAt: j?.recorded_at, metadata: j?.metadata, data: j?.data };
}

/** A link record for a fact (EventStoreDB's version 2: the sealer links facts in the chain's own stream). */
export function linkRecordFor(e: RecordedEvent, sequence: number, prevHash: string, saltHex: string): { data: LinkRecordData; entryHash: string } {
  const { link, entryHash } = linkEvent(e, sequence, prevHash, saltHex);
  return { data: { event_id: e.id, stream: e.streamName, revision: e.revision.toString(), position: e.position, event_type: e.type, happened_at: occurredAt(e), link, entry_hash: entryHash }, entryHash };
}

/** The entry a link record makes of its fact: the fact with the record's link in its metadata, as PostgreSQL stores a linked fact. */
export function withRecordedLink(fact: RecordedEvent, record: Pick<LinkRecordData, 'link'>): RecordedEvent {
  return { ...fact, metadata: { ...fact.metadata, [LINK_MEMBER]: record.link } as EventMetadata };
}
