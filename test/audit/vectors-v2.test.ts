import { readFileSync } from 'node:fs';
import t from 'tap';
import { jcs, openNote, verifyLines } from './independent-verifier.ts';
import { decodeLink, encodeLink, envelopeV2, envelopeV2Text, linkOf, linkedEntryHash, linkedFromJson, payloadHashV2 } from '../../src/audit/link.ts';
import { canonicalize } from '../../src/audit/hash.ts';

// The frozen version 2 vectors of docs/audit-chain.md: recomputed by the
// independent verifier (node:crypto alone, written from the document), and
// by the service's own code.

const doc = readFileSync('docs/audit-chain.md', 'utf8');
const block = /<!-- vectors-v2:begin -->\n```json\n([\s\S]*?)\n```\n<!-- vectors-v2:end -->/.exec(doc)?.[1];
type V2Entry = { sequence_number: number; format: 1 | 2; entry_hash: string; envelope_canonical: string; event?: Record<string, any> };
const v = JSON.parse(block!) as { org_id: string; payload_hash_v2_of_the_v1_payload: string; entries: V2Entry[]; root_3: string; checkpoint_note: string };
const v1 = JSON.parse(/<!-- vectors:begin -->\n```json\n([\s\S]*?)\n```\n<!-- vectors:end -->/.exec(doc)![1]!) as { payload: unknown; payload_salt: string; envelope_canonical: string; checkpoint: { verifier_key: string } };
const origin = `agent-ledger/audit/${v.org_id}`;

/** The vectors as bundle lines: entry 1 is the v1 vector's entry, the others the events. */
function lines() {
  const e1 = JSON.parse(v1.envelope_canonical) as Record<string, any>;
  const entry = { sequence_number: 1, event_type: e1.event_type, happened_at: e1.occurred_at, payload: v1.payload, payload_salt: v1.payload_salt, source: { event_id: e1.event_id }, envelope: v1.envelope_canonical, prev_hash: e1.prev_hash, entry_hash: v.entries[0]!.entry_hash };
  return [{ revision: '0', entry }, ...v.entries.slice(1).map((x, i) => ({ revision: String(i + 1), event: x.event! }))];
}

t.test('independent recomputation from the document', async (t) => {
  const { createHash, createHmac } = await import('node:crypto');
  t.equal(createHmac('sha256', Buffer.from(v1.payload_salt, 'hex')).update(`agent-ledger/audit-payload/v2\n${jcs(v1.payload)}`).digest('hex'), v.payload_hash_v2_of_the_v1_payload, 'the v2 payload tag');
  t.not(v.payload_hash_v2_of_the_v1_payload, JSON.parse(v1.envelope_canonical).payload_hash, 'a v1 commitment is not a v2 one');
  for (const e of v.entries.slice(1)) {
    t.equal(createHash('sha256').update(`agent-ledger/audit-entry/v2\n${e.envelope_canonical}`).digest('hex'), e.entry_hash, `entry_hash ${e.sequence_number}`);
  }
  const found = verifyLines({ org_id: v.org_id, origin, entries: 3, tip_hash: v.entries[2]!.entry_hash }, lines(), [{ note: v.checkpoint_note }], v1.checkpoint.verifier_key);
  t.same(found, { ok: true, entries: 3 }, 'the switched chain verifies, with its signed checkpoint');
  t.same(openNote(v.checkpoint_note, v1.checkpoint.verifier_key, origin)?.root.toString('hex'), v.root_3, 'the note signs the root of the three entries');
});

t.test("the service's own code produces the same values", async (t) => {
  t.equal(payloadHashV2(v1.payload_salt, v1.payload), v.payload_hash_v2_of_the_v1_payload);
  for (const e of v.entries.slice(1)) {
    const ev = linkedFromJson(e.event as never);
    const link = linkOf(ev)!;
    t.equal(canonicalize(envelopeV2(ev, link)), e.envelope_canonical, `envelope ${e.sequence_number}`);
    t.equal(linkedEntryHash(ev, link), e.entry_hash, `entry_hash ${e.sequence_number}`);
  }
});

t.test('the envelope written member by member is the canonical text of the envelope, for every kind of field', async (t) => {
  const link = { sequence_number: 7, prev_hash: 'a'.repeat(64), payload_salt: 'b'.repeat(32), payload_hash: 'c'.repeat(64) };
  const base = { id: '0b6c1c3e-0000-4000-8000-000000000001', type: 'project.created', streamName: 'org-o1', revision: 0n, position: '', recordedAt: '', data: {} };
  const metas: Record<string, unknown>[] = [
    { org_id: 'o1', actor: { kind: 'api_key', id: 'key_1' }, occurred_at: '2026-11-21T12:00:00.000Z' },
    { org_id: 'o1' },
    { org_id: 'o1', actor: { kind: 'user', id: 7 }, occurred_at: 5 },
    { org_id: 'o "quoted" \\ back\nline \u0001 é 😀', actor: { id: 'x\u2028y', kind: 'k' }, occurred_at: null },
    { org_id: 42, actor: { kind: 'user', id: 'u' } },
    { actor: { kind: 'user', id: 'u' } },
  ];
  for (const [i, m] of metas.entries()) {
    const e = { ...base, metadata: m } as never;
    t.equal(envelopeV2Text(e, link), canonicalize(envelopeV2(e, link)), `metadata ${i}`);
  }
  const odd = { ...base, id: undefined, metadata: metas[0] } as never;
  t.equal(envelopeV2Text(odd, link), canonicalize(envelopeV2(odd, link)), 'an event without an id');
  const lone = { ...base, streamName: 'org-\uD800', metadata: metas[0] } as never;
  t.throws(() => envelopeV2Text(lone, link), 'a lone surrogate has no canonical form');
  t.throws(() => canonicalize(envelopeV2(lone, link)), 'nor through canonicalize');
});

t.test('a link decodes from its exact compact form only', async (t) => {
  const h = (c: string) => c.repeat(64);
  const salted = { sequence_number: 12, prev_hash: h('a'), payload_salt: 'b'.repeat(32), payload_hash: h('c') };
  const redacted = { ...salted, sequence_number: 9007199254740991, payload_salt: null };
  t.same(decodeLink(encodeLink(salted)), salted, 'with its salt');
  t.same(decodeLink(encodeLink(redacted)), redacted, 'redacted (no salt), the largest safe sequence number');
  for (const bad of [
    `2:0:${h('a')}::${h('c')}`,
    `2:012:${h('a')}::${h('c')}`,
    `2:12:${h('a')}:${'b'.repeat(31)}:${h('c')}`,
    `2:12:${h('A')}::${h('c')}`,
    `1:12:${h('a')}::${h('c')}`,
    `2:12:${h('a')}::${h('c')}0`,
    `2:9007199254740993:${h('a')}::${h('c')}`,
    `2:12:${h('a')}:${h('c')}`,
    12,
    null,
  ]) t.equal(decodeLink(bad), undefined, `refused: ${String(bad).slice(0, 24)}…`);
});
