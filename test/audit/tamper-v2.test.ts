import fs from 'node:fs/promises';
import t, { type Test } from 'tap';
import { verifyExport } from '../../src/audit/export.ts';
import { verifyBundleDir } from './independent-verifier.ts';
import { checkpointNote, type Line, link, switchedChain, VERIFIER_KEY, writeBundle } from '../helpers/chain-v2.ts';

// The v2 twins of test/audit/tamper.test.ts, on a chain of 4 v1 entries, the
// switch (entry 5) and 5 linked events (6..10), with signed checkpoints at 3
// (before the switch) and 10. Each case is verified offline twice: by
// `verify-export` (ours) and by the independent verifier written from
// docs/audit-chain.md alone; both must agree.

const V1 = 4;
const V2 = 6;
const fresh = () => switchedChain(V1, V2);
const clone = (lines: Line[]) => JSON.parse(JSON.stringify(lines)) as Line[];

async function both(t: Test, lines: Line[], opts: { notes?: string[]; listed?: Line[] } = {}) {
  const original = fresh();
  const notes = opts.notes ?? [checkpointNote(original, 3), checkpointNote(original, V1 + V2)];
  const dir = await writeBundle(lines, notes, opts.listed ?? lines);
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  return { ours: await verifyExport(dir, VERIFIER_KEY), theirs: verifyBundleDir(dir, VERIFIER_KEY) };
}

t.test('an untouched switched chain verifies: v1 entries, the switch, v2 entries, both checkpoints', async (t) => {
  const { ours, theirs } = await both(t, fresh());
  t.equal(ours.ok, true, JSON.stringify(ours.problems));
  t.equal(ours.entries, V1 + V2);
  t.equal(ours.checkpoints_checked, 2);
  t.same(theirs, { ok: true, entries: V1 + V2 });
});

t.test('a changed payload, link kept: hash_mismatch at that entry', async (t) => {
  const lines = clone(fresh());
  lines[6]!.event!.data.name = 'forged';
  const { ours, theirs } = await both(t, lines);
  t.match(ours.first_problem, { kind: 'hash_mismatch', sequence_number: 7 });
  t.match(theirs, { ok: false, kind: 'hash_mismatch', sequence_number: 7 });
});

t.test('a removed event: sequence_gap where it was', async (t) => {
  const lines = clone(fresh());
  lines.splice(6, 1);
  const { ours, theirs } = await both(t, lines);
  t.match(ours.first_problem, { kind: 'sequence_gap', sequence_number: 7 });
  t.match(theirs, { ok: false, kind: 'sequence_gap', sequence_number: 7 });
});

t.test('a reordered pair (the events swapped, chain positions kept): sequence_mismatch', async (t) => {
  const lines = clone(fresh());
  [lines[6]!.event, lines[7]!.event] = [lines[7]!.event, lines[6]!.event];
  const { ours, theirs } = await both(t, lines);
  t.match(ours.first_problem, { kind: 'sequence_mismatch', sequence_number: 7 });
  t.match(theirs, { ok: false, kind: 'sequence_mismatch', sequence_number: 7 });
});

t.test('a forged link (prev_hash replaced): link_mismatch', async (t) => {
  const lines = clone(fresh());
  const m = lines[7]!.event!.metadata;
  m.audit_link = (m.audit_link as string).replace(/^(2:\d+:)[0-9a-f]{64}/, `$1${'ab'.repeat(32)}`);
  const { ours, theirs } = await both(t, lines);
  t.match(ours.first_problem, { kind: 'link_mismatch', sequence_number: 8 });
  t.match(theirs, { ok: false, kind: 'link_mismatch', sequence_number: 8 });
});

t.test('a payload changed and the whole suffix re-linked: caught by the signed checkpoint (root_mismatch)', async (t) => {
  const lines = clone(fresh());
  // Re-link from entry 7 on with the forged payload: every link and payload holds, only the signed root differs.
  lines[6]!.event!.data.name = 'forged';
  let prev = '';
  for (let i = 6; i < lines.length; i++) {
    const ev = lines[i]!.event!;
    const e = { id: ev.event_id, type: ev.event_type, streamName: ev.stream, revision: 0n, position: '', recordedAt: ev.recorded_at, metadata: ev.metadata, data: ev.data };
    if (i === 6) prev = (/^2:\d+:([0-9a-f]{64})/.exec(ev.metadata.audit_link as string)![1])!;
    prev = link(e as never, i + 1, prev);
  }
  const { ours, theirs } = await both(t, lines);
  t.match(ours.first_problem, { kind: 'root_mismatch', checkpoint_size: V1 + V2 });
  t.match(theirs, { ok: false, kind: 'root_mismatch' });
});

t.test('a truncated chain: truncated against the signed size and the manifest', async (t) => {
  const lines = fresh().slice(0, 8);
  const { ours, theirs } = await both(t, lines);
  t.equal(ours.ok, false);
  t.ok(ours.problems.some((p) => p.kind === 'truncated'), 'the checkpoint at 10 is past the end');
  t.match(theirs, { ok: false, kind: 'truncated' });
});

t.test('a v1 entry after the switch, or a v2 entry without one: format_mismatch', async (t) => {
  const lines = clone(fresh());
  const v1Tail = switchedChain(V1 + 2, 1).slice(V1 + 1, V1 + 2); // a v1 entry at sequence 6
  lines[5] = v1Tail[0]!;
  const a = await both(t, lines);
  t.match(a.ours.first_problem, { kind: 'format_mismatch', sequence_number: 6 });
  t.match(a.theirs, { ok: false, kind: 'format_mismatch', sequence_number: 6 });
  const noSwitch = clone(fresh());
  noSwitch[4]!.event!.event_type = 'project.updated';
  const b = await both(t, noSwitch);
  t.match(b.ours.first_problem, { kind: 'format_mismatch', sequence_number: 5 });
  t.match(b.theirs, { ok: false, kind: 'format_mismatch', sequence_number: 5 });
});

t.test('an event of another organization with a link: foreign_entry', async (t) => {
  const lines = clone(fresh());
  lines[8]!.event!.metadata.org_id = 'org_other';
  const { ours, theirs } = await both(t, lines);
  t.match(ours.first_problem, { kind: 'foreign_entry', sequence_number: 9 });
  t.match(theirs, { ok: false, kind: 'foreign_entry', sequence_number: 9 });
});

t.test('an event written without its link after the switch: malformed_entry', async (t) => {
  const lines = clone(fresh());
  delete lines[8]!.event!.metadata.audit_link;
  const { ours, theirs } = await both(t, lines);
  t.match(ours.first_problem, { kind: 'malformed_entry', sequence_number: 9 });
  t.match(theirs, { ok: false, kind: 'malformed_entry', sequence_number: 9 });
});
