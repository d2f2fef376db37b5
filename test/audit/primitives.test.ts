import { randomBytes } from 'node:crypto';
import * as ed from '@noble/ed25519';
import { hmac } from '@noble/hashes/hmac.js';
import { sha256 as nobleSha256 } from '@noble/hashes/sha2.js';
import t from 'tap';
import { canonicalize, hmacSha256, sha256 } from '../../src/audit/hash.ts';
import { CompactRange, consistencyProof, inclusionProof, leafHash, rootOf, verifyConsistency, verifyInclusion } from '../../src/audit/merkle.ts';
import { ed25519Sign, ed25519Verify, generateSigningKey, openCheckpoint, parseVerifierKey, signCheckpoint, verifierKey } from '../../src/audit/note.ts';

t.test('node:crypto and @noble/hashes give identical bytes', async (t) => {
  for (const n of [0, 1, 55, 56, 64, 300, 4096]) {
    const data = randomBytes(n);
    t.same(new Uint8Array(sha256(data)), nobleSha256(data), `sha256 of ${n} bytes`);
    for (const k of [0, 16, 32, 64, 65, 200]) {
      const key = randomBytes(k);
      t.same(new Uint8Array(hmacSha256(key, data)), hmac(nobleSha256, key, data), `hmac of ${n} bytes, key of ${k}`);
    }
    t.same(new Uint8Array(hmacSha256(randomBytes(0), 'ab', data, 'é')), hmac(nobleSha256, new Uint8Array(0), Buffer.concat([Buffer.from('ab'), data, Buffer.from('é')])), `hmac of parts (${n} bytes between)`);
  }
  t.same(new Uint8Array(sha256('a', 'bc')), nobleSha256(new TextEncoder().encode('abc')), 'parts concatenate');
  const bytes = randomBytes(300);
  t.same(new Uint8Array(sha256(Buffer.from([1]), 'é', bytes, 'z')), nobleSha256(Buffer.concat([Buffer.from([1]), Buffer.from('é'), bytes, Buffer.from('z')])), 'bytes and text parts concatenate, past the reused buffer\'s first size');
  t.same(new Uint8Array(sha256(Buffer.from([1]), bytes.subarray(0, 32), bytes.subarray(32, 64))), nobleSha256(Buffer.concat([Buffer.from([1]), bytes.subarray(0, 64)])), 'a tree node\'s three parts');
});

t.test('node:crypto and @noble/ed25519 give identical Ed25519 signatures and verdicts', async (t) => {
  for (const n of [0, 1, 64, 300]) {
    const key = generateSigningKey('k');
    const message = randomBytes(n);
    const sig = ed25519Sign(message, key.secretKey);
    t.same(new Uint8Array(sig), ed.sign(message, key.secretKey), `signature of ${n} bytes`);
    t.ok(ed25519Verify(sig, message, key.publicKey) && ed.verify(sig, message, key.publicKey), 'both accept it');
    const flipped = Buffer.from(sig);
    flipped[n % 64] = flipped[n % 64]! ^ 1;
    t.notOk(ed25519Verify(flipped, message, key.publicKey), 'a flipped signature byte is refused');
    t.notOk(ed.verify(flipped, message, key.publicKey), 'by both');
    t.notOk(ed25519Verify(sig, message, generateSigningKey('k').publicKey), 'another key is refused');
  }
  t.notOk(ed25519Verify(Buffer.alloc(63), Buffer.alloc(1), generateSigningKey('k').publicKey), 'a short signature is refused');
});

t.test('RFC 8785 canonical JSON', async (t) => {
  t.equal(canonicalize({ b: 1, a: [true, null, 'x'], c: { z: 1e21, y: -0 } }), '{"a":[true,null,"x"],"b":1,"c":{"y":0,"z":1e+21}}');
  t.equal(canonicalize({ '\u20ac': 1, '\r': 2, '1': 3 }), '{"\\r":2,"1":3,"€":1}');
  t.equal(canonicalize('é\u2028'), '"é\u2028"');
});

t.test('Merkle: incremental root equals the recursive one; proofs verify for every size', async (t) => {
  const leaves = Array.from({ length: 33 }, (_, i) => leafHash(Buffer.from([i])));
  const range = new CompactRange();
  t.same(range.root(), sha256(), 'empty tree is SHA-256 of nothing');
  for (let n = 1; n <= leaves.length; n++) {
    range.append(leaves[n - 1]!);
    const root = rootOf(leaves, n);
    if (!range.root().equals(root)) t.fail(`compact root differs at ${n}`);
    for (let i = 0; i < n; i++) {
      if (!verifyInclusion(i, n, leaves[i]!, inclusionProof(leaves, i, n), root)) t.fail(`inclusion ${i} in ${n}`);
    }
    for (let m = 1; m <= n; m++) {
      if (!verifyConsistency(m, n, rootOf(leaves, m), root, consistencyProof(leaves, m, n))) t.fail(`consistency ${m} -> ${n}`);
    }
  }
  const root = rootOf(leaves, 20);
  t.notOk(verifyInclusion(3, 20, leaves[4]!, inclusionProof(leaves, 3, 20), root), 'a wrong leaf fails');
  t.notOk(verifyConsistency(7, 20, rootOf(leaves, 6), root, consistencyProof(leaves, 7, 20)), 'a wrong old root fails');
  const forked = [...leaves.slice(0, 20)];
  forked[2] = leafHash(Buffer.from('fork'));
  t.notOk(verifyConsistency(7, 20, rootOf(leaves, 7), rootOf(forked, 20), consistencyProof(forked, 7, 20)), 'a rewritten history fails');
});

t.test('signed checkpoints: sign, open, reject a flipped byte or another key', async (t) => {
  const key = generateSigningKey('test-key');
  const note = signCheckpoint({ origin: 'agent-ledger/audit/org_1', size: 5, root: sha256('r') }, key);
  t.match(note, /^agent-ledger\/audit\/org_1\n5\n[A-Za-z0-9+/=]{44}\n\n\u2014 test-key [A-Za-z0-9+/=]+\n$/);
  const opened = openCheckpoint(note, key);
  t.ok(opened.signatureValid);
  t.equal(opened.checkpoint.size, 5);
  const vkey = verifierKey(key.name, key.publicKey);
  t.same(parseVerifierKey(vkey).publicKey, key.publicKey);
  for (let i = 0; i < 200; i++) {
    const k = generateSigningKey('k');
    if (!Buffer.from(parseVerifierKey(verifierKey(k.name, k.publicKey)).publicKey).equals(Buffer.from(k.publicKey))) t.fail('verifier key round trip');
  }
  const sigStart = note.lastIndexOf(' ') + 1;
  const raw = Buffer.from(note.slice(sigStart).trim(), 'base64');
  raw[10] = raw[10]! ^ 1;
  const flipped = note.slice(0, sigStart) + raw.toString('base64') + '\n';
  t.notOk(openCheckpoint(flipped, key).signatureValid, 'flipped signature byte');
  t.notOk(openCheckpoint(note.replace('\n5\n', '\n6\n'), key).signatureValid, 'edited size');
  t.notOk(openCheckpoint(note, generateSigningKey('test-key')).signatureValid, 'another key of the same name');
  t.throws(() => openCheckpoint('garbage', key));
});
