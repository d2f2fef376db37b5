import { spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { orgDecider, orgStream } from '../../commands/org.ts';
import { type AuditEntry, auditStream, checkpointStream, entryHash, payloadHash } from '../../src/audit/chain.ts';
import { exportChain } from '../../src/audit/export.ts';
import { canonicalize } from '../../src/audit/hash.ts';
import { verifierKey } from '../../src/audit/note.ts';
import { Sealer } from '../../src/audit/sealer.ts';
import { verifyOrgChain } from '../../src/audit/verifier.ts';
import { isAuditStream } from '../../src/audit/chain.ts';
import { testLedger } from '../helpers/ledger.ts';
import { nodeArgs } from '../helpers/entry.ts';

// Fault injection against the real Postgres log: every tamper is detected with
// the right kind at the first bad sequence.

const ledger = await testLedger(t, { checkpointEveryEntries: 2, auditFormat: 1 });
const verify = (org: string) => verifyOrgChain(ledger.store, org, ledger.key, ledger.origin);

/** A chain of `n` entries (creating an organization seals three) for a fresh organization, sealed and checkpointed. */
async function chain(org: string, n = 10): Promise<void> {
  const ctx = ledger.ctx(org);
  await ledger.run(orgDecider, orgStream(org), { type: 'create_org', orgId: org, name: `Org ${org}`, defaultProjectId: `prj_${org}`, owner: { userId: `usr_${Math.random().toString(36).slice(2)}`, email: 'owner@example.com', displayName: null } }, ctx);
  await ledger.settle();
  for (let i = 0; i < n - 3; i++) {
    await ledger.run(orgDecider, orgStream(org), { type: 'create_project', projectId: `prj_${org}_${i}`, name: `Project ${i}`, slug: `p-${i}`, environment: 'test', settings: { i } }, ctx);
    await ledger.settle();
  }
  await ledger.readSide.sealer.checkpointAll(true);
}

async function entry(org: string, seq: number): Promise<{ position: string; entry: AuditEntry }> {
  const { rows } = await ledger.db.query<{ position: string; data: AuditEntry }>('SELECT position::text, data FROM es_events WHERE stream_name = $1 AND stream_revision = $2', [auditStream(org), seq - 1]);
  return { position: rows[0]!.position, entry: rows[0]!.data };
}
async function writeEntry(org: string, seq: number, e: AuditEntry) {
  await ledger.db.query('UPDATE es_events SET data = $3::json WHERE stream_name = $1 AND stream_revision = $2', [auditStream(org), seq - 1, JSON.stringify(e)]);
}
/** Recomputes an entry's hashes as a forger holding the salt would. */
function rehash(e: AuditEntry, prevHash: string): AuditEntry {
  const env = JSON.parse(e.envelope) as Record<string, unknown>;
  env.prev_hash = prevHash;
  env.payload_hash = payloadHash(e.payload_salt!, e.payload);
  const text = canonicalize(env);
  return { ...e, prev_hash: prevHash, envelope: text, entry_hash: entryHash(text) };
}
async function checkpointSizes(org: string): Promise<number[]> {
  return (await ledger.store.readStream(checkpointStream(org))).map((e) => (e.data as { size: number }).size);
}

t.test('an untouched chain verifies, with its checkpoints', async (t) => {
  await chain('org_clean');
  const r = await verify('org_clean');
  t.ok(r.ok, JSON.stringify(r.first_problem));
  t.equal(r.tip_sequence, 10);
  t.ok(r.checkpoints_checked >= 3);
});

t.test('payload changed, old hash kept: hash_mismatch at that entry', async (t) => {
  await chain('org_t1');
  const { entry: e } = await entry('org_t1', 4);
  await writeEntry('org_t1', 4, { ...e, payload: { ...e.payload, name: 'forged' } });
  const r = await verify('org_t1');
  t.match(r.first_problem, { kind: 'hash_mismatch', sequence_number: 4 });
});

t.test('payload changed and that entry re-hashed: source_mismatch at that entry', async (t) => {
  await chain('org_t2');
  const { entry: e } = await entry('org_t2', 4);
  await writeEntry('org_t2', 4, rehash({ ...e, payload: { ...e.payload, name: 'forged' } }, e.prev_hash));
  const r = await verify('org_t2');
  t.match(r.first_problem, { kind: 'source_mismatch', sequence_number: 4 });
  t.ok(r.problems.some((p) => p.kind === 'link_mismatch' && p.sequence_number === 5), 'the next link breaks too');
});

t.test('the whole suffix re-chained, sources forged too: caught by the signed checkpoint', async (t) => {
  await chain('org_t3');
  const sizes = await checkpointSizes('org_t3');
  const k = 5;
  let { entry: prev } = await entry('org_t3', k - 1);
  for (let seq = k; seq <= 10; seq++) {
    const { entry: e } = await entry('org_t3', seq);
    const forged = seq === k ? { ...e, payload: { ...e.payload, name: 'forged' } } : e;
    if (seq === k) await ledger.db.query('UPDATE es_events SET data = $2::json WHERE event_id = $1', [e.source.event_id, JSON.stringify(forged.payload)]);
    const next = rehash(forged, prev.entry_hash);
    await writeEntry('org_t3', seq, next);
    prev = next;
  }
  const r = await verify('org_t3');
  const lastGood = Math.max(0, ...sizes.filter((s) => s < k));
  t.match(r.first_problem, { kind: 'root_mismatch', sequence_number: lastGood + 1 });
  t.ok(r.problems.every((p) => p.kind === 'root_mismatch'), 'nothing but the roots gives it away');
});

t.test('a middle entry deleted: sequence_gap', async (t) => {
  await chain('org_t4');
  await ledger.db.query('DELETE FROM es_events WHERE stream_name = $1 AND stream_revision = $2', [auditStream('org_t4'), 5]);
  const r = await verify('org_t4');
  t.match(r.first_problem, { kind: 'sequence_gap', sequence_number: 6 });
});

t.test('two entries swapped: sequence_mismatch', async (t) => {
  await chain('org_t5');
  const a = await entry('org_t5', 3);
  const b = await entry('org_t5', 4);
  await writeEntry('org_t5', 3, b.entry);
  await writeEntry('org_t5', 4, a.entry);
  const r = await verify('org_t5');
  t.match(r.first_problem, { kind: 'sequence_mismatch', sequence_number: 3 });
});

t.test('the tail truncated: truncated, after the last remaining entry', async (t) => {
  await chain('org_t6');
  await ledger.db.query('DELETE FROM es_events WHERE stream_name = $1 AND stream_revision >= 8', [auditStream('org_t6')]);
  const r = await verify('org_t6');
  t.match(r.first_problem, { kind: 'truncated', sequence_number: 9 });
});

t.test('an entry of another organization spliced in: foreign_entry', async (t) => {
  await chain('org_t7');
  await chain('org_t7b');
  const other = await entry('org_t7b', 6);
  await writeEntry('org_t7', 6, other.entry);
  const r = await verify('org_t7');
  t.match(r.first_problem, { kind: 'foreign_entry', sequence_number: 6 });
});

t.test('a source event edited after sealing: source_mismatch', async (t) => {
  await chain('org_t8');
  const { entry: e } = await entry('org_t8', 7);
  await ledger.db.query(`UPDATE es_events SET data = json_build_object('project_id', 'prj_x', 'name', 'edited', 'slug', 'edited', 'environment', 'test', 'is_default', false, 'settings', '{}'::json, 'created_at', '2026-01-01T00:00:00.000Z') WHERE event_id = $1`, [e.source.event_id]);
  const r = await verify('org_t8');
  t.match(r.first_problem, { kind: 'source_mismatch', sequence_number: 7 });
});

t.test('a checkpoint signature byte flipped: signature_invalid', async (t) => {
  await chain('org_t9');
  const [cp] = await ledger.store.readStream(checkpointStream('org_t9'), { maxCount: 1 });
  const d = cp!.data as { note: string; size: number };
  const sigStart = d.note.lastIndexOf(' ') + 1;
  const raw = Buffer.from(d.note.slice(sigStart).trim(), 'base64');
  raw[20] = raw[20]! ^ 0x40;
  const note = d.note.slice(0, sigStart) + raw.toString('base64') + '\n';
  await ledger.db.query('UPDATE es_events SET data = $2::json WHERE event_id = $1', [cp!.id, JSON.stringify({ ...d, note })]);
  const r = await verify('org_t9');
  t.match(r.first_problem, { kind: 'signature_invalid', sequence_number: d.size });
});

t.test('a crash between append and seal never breaks the chain: the sealer catches up, exactly once', async (t) => {
  const sealer = ledger.readSide.sealer;
  await sealer.stop();
  const ctx = ledger.ctx('org_crash');
  await ledger.run(orgDecider, orgStream('org_crash'), { type: 'create_org', orgId: 'org_crash', name: 'Crash', defaultProjectId: 'prj_crash', owner: { userId: `usr_${Math.random().toString(36).slice(2)}`, email: 'owner@example.com', displayName: null } }, ctx);
  for (let i = 0; i < 5; i++) {
    await ledger.run(orgDecider, orgStream('org_crash'), { type: 'create_project', projectId: `prj_crash_${i}`, name: 'P', slug: `c-${i}`, environment: 'test', settings: {} }, ctx);
  }
  // A sealer that appended entries but died before moving its checkpoint:
  const cpPos = (await ledger.db.query<{ position: string }>(`SELECT position FROM checkpoints WHERE name = 'audit-sealer'`)).rows[0]!.position;
  const pending = await ledger.store.readAll({ after: cpPos, maxCount: 10_000 });
  const half = pending.slice(0, Math.ceil(pending.length / 2));
  const dying = new Sealer(ledger.db, ledger.store, { signingKey: ledger.key, origin: ledger.origin });
  await dying.seal(half);
  // A fresh process resumes from the old checkpoint.
  const fresh = new Sealer(ledger.db, ledger.store, { signingKey: ledger.key, origin: ledger.origin }, ledger.readSide.progress);
  await fresh.start();
  t.ok(await ledger.readSide.waitFor(await ledger.store.headPosition(), 10_000), 'caught up');
  const business = (await ledger.store.readAll({ maxCount: 10_000 })).filter((e) => !isAuditStream(e.streamName) && e.metadata.org_id === 'org_crash');
  const entries = await ledger.store.readStream(auditStream('org_crash'));
  t.equal(entries.length, business.length, 'one entry per event, none twice');
  t.same(
    entries.map((e) => (e.data as unknown as AuditEntry).source.event_id),
    business.map((e) => e.id),
    'in log order',
  );
  const r = await verify('org_crash');
  t.ok(r.ok, JSON.stringify(r.first_problem));
  await fresh.stop();
  await sealer.start();
});

t.test('audit export and verify-export (offline CLI): passes clean, fails tampered with the bad sequence', async (t) => {
  await chain('org_exp');
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'audit-export-'));
  t.teardown(() => fs.rm(dir, { recursive: true, force: true }));
  const manifest = await exportChain(ledger.store, 'org_exp', ledger.origin, dir);
  t.equal(manifest.entries, 10);
  const vkey = verifierKey(ledger.key.name, ledger.key.publicKey);
  const cli = (d: string) => spawnSync(process.execPath, [...nodeArgs('src/cli.ts'), 'audit', 'verify-export', d, '--key', vkey], { encoding: 'utf8', env: { ...process.env, DATABASE_URL: 'postgres://nowhere.invalid:1/none' } });
  const ok = cli(dir);
  t.equal(ok.status, 0, ok.stderr);
  t.match(JSON.parse(ok.stdout), { ok: true, entries: 10, key_source: 'pinned' });
  // Tamper a copy: change one payload in entries.jsonl.
  const bad = `${dir}-tampered`;
  await fs.cp(dir, bad, { recursive: true });
  t.teardown(() => fs.rm(bad, { recursive: true, force: true }));
  const lines = (await fs.readFile(path.join(bad, 'entries.jsonl'), 'utf8')).split('\n');
  const row = JSON.parse(lines[6]!) as { revision: string; entry: AuditEntry };
  row.entry.payload = { ...row.entry.payload, name: 'forged' };
  lines[6] = JSON.stringify(row);
  await fs.writeFile(path.join(bad, 'entries.jsonl'), lines.join('\n'));
  const failed = cli(bad);
  t.equal(failed.status, 1);
  t.match(failed.stderr, /first bad sequence 7 \(hash_mismatch/);
  // Cut short: the first five entries verify by themselves, but the manifest lists ten.
  const cut = `${dir}-cut`;
  await fs.cp(dir, cut, { recursive: true });
  t.teardown(() => fs.rm(cut, { recursive: true, force: true }));
  const all = (await fs.readFile(path.join(cut, 'entries.jsonl'), 'utf8')).split('\n').filter((l) => l !== '');
  await fs.writeFile(path.join(cut, 'entries.jsonl'), all.slice(0, 5).join('\n') + '\n');
  const short = cli(cut);
  t.equal(short.status, 1, 'a bundle cut short fails');
  t.match(short.stderr, /first bad sequence 6 \(truncated/);
});

t.test('the CLI fails (exit 1) to verify an organization the log never held, rather than report an empty chain as verified', async (t) => {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'audit-cli-'));
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
  const cli = (org: string) => spawnSync(process.execPath, [...nodeArgs('src/cli.ts'), 'audit', 'verify', '--org', org], { encoding: 'utf8', env: { ...process.env, DATABASE_URL: ledger.url, DATA_DIR: dataDir, SANDBOX_CHAIN: 'off', LOG_LEVEL: 'error' } });
  const absent = cli('org_nosuch');
  t.equal(absent.status, 1, absent.stderr);
  t.match(absent.stderr, /no organization org_nosuch in this log/);
  t.equal(absent.stdout, '', 'no report that could read as a verified chain');
});
