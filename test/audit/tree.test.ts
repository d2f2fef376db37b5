import { createHash } from 'node:crypto';
import t from 'tap';
import { appendLeaves, consistencyProofFromStore, edgeRoot, inclusionProofFromStore, migrateTree, readTile, rootFromStore, storeNodes, type RightEdge } from '../../src/audit/tree.ts';
import { bootstrapOrg, testApp } from '../helpers/app.ts';
import { testDatabase } from '../helpers/db.ts';

// The stored tree against an independent RFC 6962 / RFC 9162 implementation
// written here from the RFC text (not the service's merkle.ts), and the
// consistency proof between two real signed checkpoints over HTTP.

const H = (...parts: Buffer[]) => createHash('sha256').update(Buffer.concat(parts)).digest();
const leafOf = (d: Buffer) => H(Buffer.from([0]), d);
const nodeOf = (l: Buffer, r: Buffer) => H(Buffer.from([1]), l, r);
/** MTH(D[n]) by the RFC's recursive definition. */
function mth(leaves: Buffer[]): Buffer {
  if (leaves.length === 0) return H();
  if (leaves.length === 1) return leaves[0]!;
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return nodeOf(mth(leaves.slice(0, k)), mth(leaves.slice(k)));
}
/** RFC 9162 §2.1.3.2 inclusion verification. */
function checkInclusion(index: number, size: number, leaf: Buffer, proof: Buffer[], root: Buffer): boolean {
  if (index >= size) return false;
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      r = nodeOf(p, r);
      while (fn % 2 === 0 && fn !== 0) {
        fn >>= 1;
        sn >>= 1;
      }
    } else r = nodeOf(r, p);
    fn >>= 1;
    sn >>= 1;
  }
  return sn === 0 && r.equals(root);
}
/** RFC 9162 §2.1.4.2 consistency verification. */
function checkConsistency(m: number, n: number, first: Buffer, second: Buffer, proof: Buffer[]): boolean {
  if (m === n) return proof.length === 0 && first.equals(second);
  if (proof.length === 0 || m > n || m < 1) return false;
  const path = (m & (m - 1)) === 0 ? [first, ...proof] : [...proof];
  let fn = m - 1;
  let sn = n - 1;
  while (fn % 2 === 1) {
    fn >>= 1;
    sn >>= 1;
  }
  let fr = path[0]!;
  let sr = path[0]!;
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      fr = nodeOf(c, fr);
      sr = nodeOf(c, sr);
      while (fn % 2 === 0 && fn !== 0) {
        fn >>= 1;
        sn >>= 1;
      }
    } else sr = nodeOf(sr, c);
    fn >>= 1;
    sn >>= 1;
  }
  return sn === 0 && fr.equals(first) && sr.equals(second);
}

t.test('stored nodes give proofs an independent verifier accepts, for every size up to 70', async (t) => {
  const { db } = await testDatabase(t);
  await migrateTree(db);
  const leaves = Array.from({ length: 70 }, (_, i) => leafOf(Buffer.from(`entry ${i}`)));
  const edge: RightEdge = new Map();
  // Appended in uneven batches, as the sealer does.
  let size = 0;
  for (const batch of [1, 2, 5, 8, 13, 21, 20]) {
    const nodes = appendLeaves(size, leaves.slice(size, size + batch), edge);
    await storeNodes(db, 'org_t', nodes);
    size += batch;
    t.ok(edgeRoot(edge).equals(mth(leaves.slice(0, size))), `right-edge root at ${size}`);
  }
  let bad = 0;
  for (let n = 1; n <= 70; n++) {
    const root = mth(leaves.slice(0, n));
    if (!(await rootFromStore(db, 'org_t', n)).equals(root)) bad++;
    for (let i = 0; i < n; i += n > 20 ? 7 : 1) if (!checkInclusion(i, n, leaves[i]!, await inclusionProofFromStore(db, 'org_t', i, n), root)) bad++;
    for (let m = 1; m <= n; m += n > 20 ? 5 : 1) if (!checkConsistency(m, n, mth(leaves.slice(0, m)), root, await consistencyProofFromStore(db, 'org_t', m, n))) bad++;
  }
  t.equal(bad, 0, 'every root, inclusion and consistency proof verifies independently');
  const tile = await readTile(db, 'org_t', 0, 0, 64);
  t.same(tile, leaves.slice(0, 64), 'tile 0/0 holds the leaf hashes in order');
  t.equal((await readTile(db, 'org_t', 0, 0)).length, 70, 'a partial tile holds what exists');
  // A frozen vector for tiles and proofs: leaves "entry i", i < 7.
  t.equal(mth(leaves.slice(0, 7)).toString('hex'), (await rootFromStore(db, 'org_t', 7)).toString('hex'));
});

t.test('a consistency proof between two real checkpoints verifies; a forked history fails it', async (t) => {
  const { app, ledger } = await testApp(t);
  const org = await bootstrapOrg(app, 'Tree');
  const get = (url: string) => app.inject({ method: 'GET', url, headers: org.key });
  await ledger.readSide.sealer.checkpointAll(true);
  for (let i = 0; i < 9; i++) await app.inject({ method: 'POST', url: '/v1/agents', headers: org.key, payload: { agent_id: `a${i}`, principal_ref: 'p' } });
  await ledger.readSide.waitFor(await ledger.store.headPosition(), 30_000);
  await ledger.readSide.sealer.checkpointAll(true);
  await ledger.readSide.waitFor(await ledger.store.headPosition(), 30_000);
  const cps = (await get('/v1/audit-events/checkpoints')).json().checkpoints as { size: number; root_hash: string }[];
  t.ok(cps.length >= 2, 'two checkpoints signed');
  const [a, b] = [cps[0]!, cps[cps.length - 1]!];
  const r = await get(`/v1/audit-events/checkpoints/consistency?from=${a.size}&to=${b.size}`);
  t.equal(r.statusCode, 200);
  const body = r.json();
  const proof = (body.proof as string[]).map((h) => Buffer.from(h, 'hex'));
  t.ok(checkConsistency(a.size, b.size, Buffer.from(a.root_hash, 'hex'), Buffer.from(b.root_hash, 'hex'), proof), 'the independent verifier accepts');

  // The same proof against a forked history: entry 1 rewritten below the old checkpoint.
  const entries = (await get('/v1/audit-events?limit=200')).json().events as { sequence_number: number; entry_hash: string }[];
  const leaves = entries.sort((x, y) => x.sequence_number - y.sequence_number).map((e) => leafOf(Buffer.from(e.entry_hash, 'hex')));
  t.ok(mth(leaves.slice(0, b.size)).equals(Buffer.from(b.root_hash, 'hex')), 'the entries reproduce the signed root');
  const forked = [leafOf(Buffer.from('rewritten')), ...leaves.slice(1)];
  t.notOk(checkConsistency(a.size, b.size, mth(forked.slice(0, a.size)), Buffer.from(b.root_hash, 'hex'), proof), 'a rewritten old entry fails the proof');
  t.notOk(checkConsistency(a.size, b.size, Buffer.from(a.root_hash, 'hex'), mth(forked.slice(0, b.size)), proof), 'a forked new root fails the proof');

  t.equal((await get(`/v1/audit-events/checkpoints/consistency?from=${b.size}&to=${a.size}`)).statusCode, 400, 'from after to');
  t.equal((await get(`/v1/audit-events/checkpoints/consistency?from=${a.size}&to=${b.size + 1000}`)).statusCode, 404, 'not a checkpoint');

  // Inclusion proof of entry 2 against the latest checkpoint, independently.
  const p = (await get('/v1/audit-events/2/proof')).json();
  t.ok(checkInclusion(1, p.tree_size, leaves[1]!, (p.proof as string[]).map((h) => Buffer.from(h, 'hex')), Buffer.from(p.root_hash, 'hex')), 'inclusion verifies');

  // What a monitor follows: the latest checkpoint and the tile of leaf hashes.
  const latest = (await get('/v1/audit-events/checkpoint')).json();
  t.equal(latest.size, b.size);
  const tile = await get(`/v1/audit-events/tile/0/0?width=${b.size}`);
  t.equal(tile.headers['content-type'], 'application/octet-stream');
  const hashes = Array.from({ length: b.size }, (_, i) => tile.rawPayload.subarray(i * 32, i * 32 + 32));
  t.ok(mth(hashes).equals(Buffer.from(latest.root_hash, 'hex')), 'the tile reproduces the signed root without our database');
  const other = await bootstrapOrg(app, 'Other');
  t.equal((await app.inject({ method: 'GET', url: `/v1/audit-events/tile/0/0?width=${b.size}`, headers: other.key })).statusCode, 404, "another organization's tile is absent");
});

t.test('the sealer resumes from its stored state, not a replay of the chain', async (t) => {
  const { app, ledger } = await testApp(t);
  const org = await bootstrapOrg(app, 'Resume');
  for (let i = 0; i < 5; i++) await app.inject({ method: 'POST', url: '/v1/agents', headers: org.key, payload: { agent_id: `r${i}`, principal_ref: 'p' } });
  await ledger.readSide.waitFor(await ledger.store.headPosition(), 30_000);
  const state = (await ledger.db.query<{ sequence: string; right_edge: Record<string, string> }>('SELECT sequence::text, right_edge FROM audit_chain_state WHERE org_id = $1', [org.orgId])).rows[0]!;
  t.ok(Number(state.sequence) > 5, 'the state row follows the tip');
  t.ok(Object.keys(state.right_edge).length <= Math.ceil(Math.log2(Number(state.sequence) + 1)), 'the right edge has one hash per set bit of the size');
  // Restart the sealer: it seals the next event after the stored tip, once.
  await ledger.readSide.sealer.stop();
  await ledger.readSide.sealer.start();
  await app.inject({ method: 'POST', url: '/v1/agents', headers: org.key, payload: { agent_id: 'after', principal_ref: 'p' } });
  await ledger.readSide.waitFor(await ledger.store.headPosition(), 30_000);
  const report = await ledger.readSide.verifier.verifyOrg(org.orgId);
  t.ok(report.ok, 'the chain verifies after the restart');
  t.ok(report.tip_sequence > Number(state.sequence), 'the event after the restart is sealed on the stored tip');
});
