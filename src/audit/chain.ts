import { pooledHex } from '../ids.ts';
import type { RecordedEvent } from '../eventstore/port.ts';
import { canonicalize, hmacSha256, sha256 } from './hash.ts';

// The audit chain's entry format (docs/audit-chain.md is the normative text).
//
// One chain per organization, in the stream `audit-<org_id>`, one entry per
// business event. entry_hash = hex(SHA-256("agent-ledger/audit-entry/v1\n" ||
// JCS(envelope))). The payload is committed through a salted HMAC so it can
// later be redacted without breaking the chain.

export const TAG = 'agent-ledger';
export const ENTRY_PREFIX = `${TAG}/audit-entry/v1\n`;
export const PAYLOAD_PREFIX = `${TAG}/audit-payload/v1\n`;
export const GENESIS_PREFIX = `${TAG}/audit-genesis/v1\n`;
const ENTRY_ID_PREFIX = `${TAG}/audit-entry-id/v1\n`;

export const ENTRY_EVENT_TYPE = 'audit.entry_sealed';
export const CHECKPOINT_EVENT_TYPE = 'audit.checkpoint_signed';

export const auditStream = (orgId: string) => `audit-${orgId}`;
export const checkpointStream = (orgId: string) => `audit_checkpoint-${orgId}`;
/** Streams the sealer writes; never sealed themselves. */
export const isAuditStream = (stream: string) => stream.startsWith('audit-') || stream.startsWith('audit_checkpoint-');

export type Envelope = {
  v: 1;
  org_id: string;
  sequence_number: number;
  prev_hash: string;
  event_id: string;
  event_type: string;
  occurred_at: string;
  recorded_at: string;
  actor: { kind: string; id: string };
  payload_hash: string;
};

export type AuditEntry = {
  sequence_number: number;
  event_type: string;
  happened_at: string;
  payload: Record<string, unknown> | null;
  /** Hex salt of payload_hash; null once the payload is redacted. */
  payload_salt: string | null;
  source: { event_id: string; stream: string; revision: string; position: string };
  /** The exact canonical text that was hashed. */
  envelope: string;
  prev_hash: string;
  entry_hash: string;
};

/** Canonical text, or a marker no real text equals when the value has no canonical form. */
export function canonicalizeSafe(value: unknown): string {
  try {
    return canonicalize(value);
  } catch {
    return '\u0000not-canonicalizable';
  }
}

export function genesisHash(orgId: string): string {
  return sha256(GENESIS_PREFIX, orgId).toString('hex');
}

export function payloadHash(saltHex: string, payload: unknown): string {
  return hmacSha256(Buffer.from(saltHex, 'hex'), PAYLOAD_PREFIX, canonicalize(payload)).toString('hex');
}

export function entryHash(envelopeText: string): string {
  return sha256(ENTRY_PREFIX, envelopeText).toString('hex');
}

/** A UUID derived from the source event id: a restarted sealer cannot seal the same event twice. */
export function derivedUuid(kind: string, id: string): string {
  const b = sha256(ENTRY_ID_PREFIX, kind, '\n', id).subarray(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x80; // version 8: custom
  b[8] = (b[8]! & 0x3f) | 0x80; // RFC 4122 variant
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function actorOf(e: RecordedEvent): { kind: string; id: string } {
  const a = e.metadata.actor as { kind?: unknown; id?: unknown } | undefined;
  return typeof a?.kind === 'string' && typeof a.id === 'string' ? { kind: a.kind, id: a.id } : { kind: 'system', id: 'unknown' };
}

export function occurredAt(e: RecordedEvent): string {
  return typeof e.metadata.occurred_at === 'string' ? e.metadata.occurred_at : e.recordedAt;
}

export function buildEntry(source: RecordedEvent, sequence: number, prevHash: string, saltHex: string = pooledHex(16)): AuditEntry {
  const payload = source.data;
  const envelope: Envelope = {
    v: 1,
    org_id: source.metadata.org_id,
    sequence_number: sequence,
    prev_hash: prevHash,
    event_id: source.id,
    event_type: source.type,
    occurred_at: occurredAt(source),
    recorded_at: source.recordedAt,
    actor: actorOf(source),
    payload_hash: payloadHash(saltHex, payload),
  };
  const text = canonicalize(envelope);
  return {
    sequence_number: sequence,
    event_type: source.type,
    happened_at: envelope.occurred_at,
    payload,
    payload_salt: saltHex,
    source: { event_id: source.id, stream: source.streamName, revision: source.revision.toString(), position: source.position },
    envelope: text,
    prev_hash: prevHash,
    entry_hash: entryHash(text),
  };
}
