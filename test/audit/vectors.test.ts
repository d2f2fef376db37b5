import { readFileSync } from 'node:fs';
import * as ed from '@noble/ed25519';
import { hmac } from '@noble/hashes/hmac.js';
import { sha256 } from '@noble/hashes/sha2.js';
import canonicalize from 'canonicalize';
import t from 'tap';
import { genesisHash, payloadHash, entryHash } from '../../src/audit/chain.ts';
import { rootOf } from '../../src/audit/merkle.ts';
import { openCheckpoint, parseVerifierKey, signCheckpoint, signingKeyFromSeed } from '../../src/audit/note.ts';

// The frozen vectors of docs/audit-chain.md, recomputed by an independent
// implementation written from the document (noble hashes, a naive tree), and
// by the service's own code.

const doc = readFileSync('docs/audit-chain.md', 'utf8');
const json = /<!-- vectors:begin -->\n```json\n([\s\S]*?)\n```\n<!-- vectors:end -->/.exec(doc)?.[1];
const v = JSON.parse(json!) as {
  org_id: string;
  genesis_prev_hash: string;
  payload: Record<string, unknown>;
  payload_salt: string;
  payload_hash: string;
  envelope: Record<string, unknown>;
  envelope_canonical: string;
  entry_hash: string;
  merkle: { leaf_hashes: string[]; roots: Record<string, string> };
  checkpoint: { seed_hex: string; key_name: string; public_key_hex: string; key_id_hex: string; verifier_key: string; note: string };
};
const enc = (s: string) => new TextEncoder().encode(s);
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const cat = (...parts: Uint8Array[]) => Buffer.concat(parts);

t.test('independent recomputation from the document', async (t) => {
  t.equal(hex(sha256(enc(`agent-ledger/audit-genesis/v1\n${v.org_id}`))), v.genesis_prev_hash, 'genesis');
  t.equal(hex(hmac(sha256, Buffer.from(v.payload_salt, 'hex'), enc(`agent-ledger/audit-payload/v1\n${canonicalize(v.payload)}`))), v.payload_hash, 'payload_hash');
  t.equal(canonicalize(v.envelope), v.envelope_canonical, 'canonical envelope');
  t.equal(hex(sha256(enc(`agent-ledger/audit-entry/v1\n${v.envelope_canonical}`))), v.entry_hash, 'entry_hash');
  const leaves = Array.from({ length: 8 }, (_, i) => sha256(cat(Buffer.from([0]), sha256(enc(`entry-${i}`)))));
  t.same(leaves.map(hex), v.merkle.leaf_hashes, 'leaf hashes');
  const mth = (d: Uint8Array[]): Uint8Array => {
    if (d.length === 0) return sha256(new Uint8Array());
    if (d.length === 1) return d[0]!;
    let k = 1;
    while (k * 2 < d.length) k *= 2;
    return sha256(cat(Buffer.from([1]), mth(d.slice(0, k)), mth(d.slice(k))));
  };
  for (let n = 0; n <= 8; n++) t.equal(hex(mth(leaves.slice(0, n))), v.merkle.roots[n], `root of ${n}`);
  t.equal(v.merkle.roots[0], 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855', 'empty root is SHA-256 of nothing');
  // The note: body, key id, signature.
  const c = v.checkpoint;
  const [body, sigLine] = c.note.split('\n\n') as [string, string];
  t.equal(body, `agent-ledger/audit/org_example\n8\n${Buffer.from(v.merkle.roots[8]!, 'hex').toString('base64')}`);
  const pub = Buffer.from(c.public_key_hex, 'hex');
  t.equal(hex(sha256(cat(enc(c.key_name), Buffer.from([0x0a, 0x01]), pub)).slice(0, 4)), c.key_id_hex, 'key id');
  const m = /^\u2014 (\S+) (\S+)\n$/.exec(sigLine)!;
  t.equal(m[1], c.key_name);
  const raw = Buffer.from(m[2]!, 'base64');
  t.equal(hex(raw.subarray(0, 4)), c.key_id_hex);
  t.ok(ed.verify(raw.subarray(4), enc(body + '\n'), pub), 'signature verifies');
});

t.test("the service's own code produces the same values", async (t) => {
  t.equal(genesisHash(v.org_id), v.genesis_prev_hash);
  t.equal(payloadHash(v.payload_salt, v.payload), v.payload_hash);
  t.equal(entryHash(v.envelope_canonical), v.entry_hash);
  const leaves = v.merkle.leaf_hashes.map((h) => Buffer.from(h, 'hex'));
  for (let n = 0; n <= 8; n++) t.equal(rootOf(leaves, n).toString('hex'), v.merkle.roots[n]);
  const key = signingKeyFromSeed(v.checkpoint.key_name, Buffer.from(v.checkpoint.seed_hex, 'hex'));
  t.equal(signCheckpoint({ origin: 'agent-ledger/audit/org_example', size: 8, root: Buffer.from(v.merkle.roots[8]!, 'hex') }, key), v.checkpoint.note);
  t.ok(openCheckpoint(v.checkpoint.note, parseVerifierKey(v.checkpoint.verifier_key)).signatureValid);
});

t.test('tree vectors: stored nodes, tiles, inclusion and consistency proofs', async (t) => {
  const { appendLeaves, consistencyRanges, inclusionRanges, pieces } = await import('../../src/audit/tree.ts');
  const { nodeHash } = await import('../../src/audit/merkle.ts');
  const block = /<!-- tree-vectors:begin -->\n```json\n([\s\S]*?)\n```\n<!-- tree-vectors:end -->/.exec(doc)?.[1];
  const tv = (JSON.parse(block!) as { tree_vectors: Record<string, unknown> }).tree_vectors as {
    nodes: Record<string, string>;
    tile_0_0_width_8: string;
    inclusion_5_in_8: string[];
    inclusion_2_in_7: string[];
    consistency_3_to_8: string[];
    consistency_4_to_7: string[];
  };
  // Independently: a naive tree with noble's SHA-256, straight from RFC 6962.
  const leaves = v.merkle.leaf_hashes.map((h) => Buffer.from(h, 'hex'));
  const node = (l: Uint8Array, r: Uint8Array) => sha256(cat(Buffer.from([1]), l, r));
  const mth = (d: Uint8Array[]): Uint8Array => {
    if (d.length === 1) return d[0]!;
    let k = 1;
    while (k * 2 < d.length) k *= 2;
    return node(mth(d.slice(0, k)), mth(d.slice(k)));
  };
  for (const [key, h] of Object.entries(tv.nodes)) {
    const [level, index] = key.split('/').map(Number) as [number, number];
    t.equal(hex(mth(leaves.slice(index * 2 ** level, (index + 1) * 2 ** level))), h, `node ${key}`);
  }
  t.equal(Buffer.concat(leaves).toString('base64'), tv.tile_0_0_width_8, 'tile 0/0 is the leaf hashes, concatenated');
  const path = (m: number, d: Uint8Array[]): Uint8Array[] => {
    if (d.length <= 1) return [];
    let k = 1;
    while (k * 2 < d.length) k *= 2;
    return m < k ? [...path(m, d.slice(0, k)), mth(d.slice(k))] : [...path(m - k, d.slice(k)), mth(d.slice(0, k))];
  };
  const sub = (m: number, d: Uint8Array[], b: boolean): Uint8Array[] => {
    if (m === d.length) return b ? [] : [mth(d)];
    let k = 1;
    while (k * 2 < d.length) k *= 2;
    return m <= k ? [...sub(m, d.slice(0, k), b), mth(d.slice(k))] : [...sub(m - k, d.slice(k), false), mth(d.slice(0, k))];
  };
  t.same(path(5, leaves).map(hex), tv.inclusion_5_in_8, 'PATH(5, D[8])');
  t.same(path(2, leaves.slice(0, 7)).map(hex), tv.inclusion_2_in_7, 'PATH(2, D[7])');
  t.same(sub(3, leaves, true).map(hex), tv.consistency_3_to_8, 'PROOF(3, D[8])');
  t.same(sub(4, leaves.slice(0, 7), true).map(hex), tv.consistency_4_to_7, 'PROOF(4, D[7])');

  // The service's stored-tree form: nodes from appendLeaves, proofs composed from perfect pieces.
  const stored = new Map(appendLeaves(0, leaves, new Map()).map((n) => [`${n.level}/${n.index}`, n.hash]));
  for (const [key, h] of Object.entries(tv.nodes)) t.equal(stored.get(key)?.toString('hex'), h, `stored node ${key}`);
  const compose = (ranges: [number, number][]) =>
    ranges.map(([lo, hi]) => {
      const hs = pieces(lo, hi).map(([l, i]) => stored.get(`${l}/${i}`)!);
      let acc = hs[hs.length - 1]!;
      for (let i = hs.length - 2; i >= 0; i--) acc = nodeHash(hs[i]!, acc);
      return acc.toString('hex');
    });
  t.same(compose(inclusionRanges(5, 8)), tv.inclusion_5_in_8, 'stored: inclusion 5 in 8');
  t.same(compose(inclusionRanges(2, 7)), tv.inclusion_2_in_7, 'stored: inclusion 2 in 7');
  t.same(compose(consistencyRanges(3, 8)), tv.consistency_3_to_8, 'stored: consistency 3 → 8');
  t.same(compose(consistencyRanges(4, 7)), tv.consistency_4_to_7, 'stored: consistency 4 → 7');
});
