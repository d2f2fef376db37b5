import { pooledHex } from '../ids.ts';
import type { CheckedEvent, EventMetadata, RecordedEvent } from '../eventstore/port.ts';
import { checkpointStream } from './chain.ts';
import { decodeLink, LINK_MEMBER, linkedEntryHash, linkEvent, switchStream } from './link.ts';

// The writer's side of the audit chain, version 2 (docs/audit-chain.md,
// "Version 2"; docs/decisions.md, "Issue 57"). Before a batch is appended, each
// append of an organization whose chain has switched gets its links: every
// event's metadata carries `audit_link` (its sequence number, the previous
// entry's hash, its salted payload commitment), computed from the chain's
// head as this process last saw it. The database takes the link only if that
// head is still the chain's (es_append checks it under the log-head lock and
// moves it in the same statement), so two writers can never both take
// sequence n; a writer whose head was stale is told the real one and links
// again, in the same transaction. Nothing of the event is copied.

export type Head = { sequence: number; tip: string };

/** An append as es_append takes it: its events (linked or as given) and its link's guard. */
export type LinkedAppend = {
  stream: string;
  events: CheckedEvent[];
  /** The organization the append's events belong to (its first event's `org_id`). */
  org: string | null;
  /** The first event's sequence number and previous hash, and the last event's entry hash; null when unlinked. */
  first: number | null;
  prev: string | null;
  tip: string | null;
};

/** Each linked event's entry hash, computed once by the writer and kept with its metadata (the sealer builds the tree from it). */
const entryHashes = new WeakMap<object, string>();

/** The entry hash of a linked event: the writer's, else computed from the event. */
export function entryHashOf(e: RecordedEvent): string | undefined {
  const known = entryHashes.get(e.metadata);
  if (known !== undefined) return known;
  const link = decodeLink((e.metadata as Record<string, unknown>)[LINK_MEMBER]);
  return link ? linkedEntryHash(e, link) : undefined;
}

const asRecorded = (stream: string, e: Pick<CheckedEvent, 'id' | 'type' | 'dataValue' | 'metadataValue'>): RecordedEvent => ({
  id: e.id,
  type: e.type,
  streamName: stream,
  revision: -1n,
  position: '',
  data: e.dataValue,
  metadata: e.metadataValue,
  recordedAt: '',
});

/** The same event with its link added to its metadata (text and value; the text is the original's with one member appended). */
function withLink(e: CheckedEvent, link: string, entryHash: string): CheckedEvent {
  const text = e.metadata.trimEnd();
  const body = text.slice(0, -1).trimEnd();
  const metadata = `${body}${body.endsWith('{') ? '' : ','}${JSON.stringify(LINK_MEMBER)}:${JSON.stringify(link)}}`;
  const metadataValue = { ...e.metadataValue, [LINK_MEMBER]: link } as EventMetadata;
  entryHashes.set(metadataValue, entryHash);
  return { ...e, metadata, metadataValue };
}

export class ChainLinker {
  /** The heads of the switched chains this process knows of; an organization absent here is assumed not switched (the database says otherwise if it is). */
  private readonly heads = new Map<string, Head>();

  /** The head of a chain as this process knows it (tests, the sealer). */
  head(org: string): Head | undefined {
    return this.heads.get(org);
  }

  /**
   * The batch's appends, in order, as es_append takes them: each append of a
   * switched chain linked on top of the previous one, skipping the appends
   * `oks` says will be refused (a refused append takes no sequence number).
   * An append already carrying links (the switch) keeps them.
   */
  plan(items: ReadonlyArray<{ stream: string; events: readonly CheckedEvent[] }>, oks?: readonly boolean[]): LinkedAppend[] {
    const working = new Map<string, Head>();
    const headOf = (org: string) => working.get(org) ?? this.heads.get(org);
    return items.map((p, i) => {
      const events = [...p.events];
      const org = typeof events[0]?.metadataValue.org_id === 'string' ? events[0].metadataValue.org_id : null;
      const unlinked: LinkedAppend = { stream: p.stream, events, org, first: null, prev: null, tip: null };
      if (org === null || events.length === 0 || p.stream === checkpointStream(org)) return unlinked;
      const given = decodeLink((events[0]!.metadataValue as Record<string, unknown>)[LINK_MEMBER]);
      if (given) {
        // Linked by its writer (the switch): its guard is its own links.
        const last = events[events.length - 1]!;
        const tip = entryHashOf(asRecorded(p.stream, last))!;
        if (oks?.[i] !== false) working.set(org, { sequence: given.sequence_number + events.length - 1, tip });
        return { ...unlinked, first: given.sequence_number, prev: given.prev_hash, tip };
      }
      const head = headOf(org);
      if (!head || oks?.[i] === false) return unlinked;
      let { sequence, tip } = head;
      const first = sequence + 1;
      const prev = tip;
      const linked = events.map((e) => {
        const { link, entryHash } = linkEvent(asRecorded(p.stream, e), ++sequence, tip, pooledHex(16));
        tip = entryHash;
        return withLink(e, link, entryHash);
      });
      working.set(org, { sequence, tip });
      return { ...unlinked, events: linked, first, prev, tip };
    });
  }

  /** What the database answered of a chain's head (null: the organization's chain has not switched). */
  learn(org: string | null, sequence: string | number | null, tip: string | null): void {
    if (org === null) return;
    if (sequence === null || tip === null) this.heads.delete(org);
    else this.heads.set(org, { sequence: Number(sequence), tip });
  }

  /** The switch's own link: entry `sequence` on top of the last v1 entry (`prev`). */
  /** `stream`: where it is appended (PostgreSQL: `audit_switch-<org>`; EventStoreDB: the chain's own stream, `audit-<org>`). */
  static switchEvent(org: string, sequence: number, prev: string, id: string, occurredAt: string, stream: string = switchStream(org), salt: string = pooledHex(16)): { stream: string; event: { id: string; type: string; data: Record<string, unknown>; metadata: EventMetadata } } {
    const data = { org_id: org, format: 2, from_sequence: sequence };
    const metadata: EventMetadata = { org_id: org, actor: { kind: 'system', id: 'audit-sealer' }, occurred_at: occurredAt, schema_version: 1 } as EventMetadata;
    const { link } = linkEvent({ id, type: 'audit.chain_switched', streamName: stream, revision: -1n, position: '', data, metadata, recordedAt: '' }, sequence, prev, salt);
    return { stream, event: { id, type: 'audit.chain_switched', data, metadata: { ...metadata, [LINK_MEMBER]: link } as EventMetadata } };
  }
}
