import { createHash, createPrivateKey, createPublicKey, sign, verify } from 'node:crypto';
import fs from 'node:fs';
import t from 'tap';
import { cosign, cosignerVerifierKey, countCosigners, formatAddCheckpoint, parseAddCheckpoint, parseCosignerKey, splitNote, verifyCosignature } from '../../src/audit/cosignature.ts';
import { keyId, parseVerifierKey, signingKeyFromSeed } from '../../src/audit/note.ts';

// The cosignature and add-checkpoint formats against the C2SP specifications'
// own examples (signed-note, tlog-cosignature, tlog-witness, read from the
// C2SP/C2SP repository), and the frozen cosigned-checkpoint vectors of
// docs/audit-chain.md recomputed with node:crypto alone (not our note code).

const sha256 = (...p: (string | Buffer)[]) => createHash('sha256').update(Buffer.concat(p.map((x) => (typeof x === 'string' ? Buffer.from(x) : x)))).digest();
const pub = (raw: Buffer) => createPublicKey({ key: Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), raw]), format: 'der', type: 'spki' });
const priv = (seed: Buffer) => createPrivateKey({ key: Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed]), format: 'der', type: 'pkcs8' });

t.test('C2SP signed-note example: its verifier key and signature line verify under our key id and parsing', async (t) => {
  // From signed-note.md ("The following verifier key verifies the following signed note").
  const vkey = 'example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k';
  const note = 'This is an example message.\n\n\u2014 example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n';
  const k = parseVerifierKey(vkey);
  t.equal(keyId(k.name, k.publicKey).toString('hex'), '530d903a', 'the key id rule (type 0x01) gives the example id');
  const { body, lines } = splitNote(note);
  const raw = Buffer.from(lines[0]!.split(' ')[2]!, 'base64');
  t.equal(raw.subarray(0, 4).toString('hex'), '530d903a');
  t.ok(verify(null, Buffer.from(body), pub(Buffer.from(k.publicKey)), raw.subarray(4)), 'the example signature verifies over the body we split off');
});

t.test('C2SP tlog-cosignature example: the line has the key id || timestamp || signature layout', async (t) => {
  const line = '\u2014 witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==';
  const raw = Buffer.from(line.split(' ')[2]!, 'base64');
  t.equal(raw.length, 4 + 8 + 64, 'an Ed25519 cosignature is 76 bytes');
  t.equal(Number(raw.readBigUInt64BE(4)), 1679315147, 'the timestamp is the spec example message\'s "time 1679315147"');
  // Our own cosignature of the spec's example checkpoint has the same layout and a message of the spec's form.
  const body = 'example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n';
  const w = signingKeyFromSeed('witness.example.com/w1', Buffer.alloc(32, 3));
  const ours = cosign(body, w, 1679315147);
  const oursRaw = Buffer.from(ours.trim().split(' ')[2]!, 'base64');
  t.equal(oursRaw.length, 76);
  const message = 'cosignature/v1\ntime 1679315147\nexample.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n';
  t.ok(verify(null, Buffer.from(message), pub(Buffer.from(w.publicKey)), oursRaw.subarray(12)), 'the signed message is exactly the spec example message');
  t.same(verifyCosignature(body, [ours], w), { valid: true, timestamp: 1679315147 });
  t.same(verifyCosignature(body.replace('20852163', '20852164'), [ours], w), { valid: false, timestamp: 1679315147 }, 'another body does not verify');
});

t.test('C2SP tlog-witness example request body parses, and ours formats the same way', async (t) => {
  const example = [
    'old 20852014',
    'PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=',
    'jrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=',
    '5+pKlUdi2LeF/BcMHBn+Ku6yhPGNCswZZD1X/6QgPd8=',
    '/6WVhPs2CwSsb5rYBH5cjHV/wSmA79abXAwhXw3Kj/0=',
    '',
    'example.com/behind-the-sofa',
    '20852163',
    'CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=',
    '',
    '\u2014 example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=',
    '\u2014 example.com/behind-the-sofa opLqBQsREYCgu6xQkYQwJr9fo45a62DN9EdmHXnZdXNqlcVGlCum2Wks+49/V6267UEjw6QUXTS5Rovnzv++qbSzm9Q=',
    '',
  ].join('\n');
  const req = parseAddCheckpoint(example);
  t.equal(req.oldSize, 20852014);
  t.equal(req.proof.length, 4);
  t.ok(req.note.startsWith('example.com/behind-the-sofa\n20852163\n'));
  t.equal(formatAddCheckpoint(req.oldSize, req.proof, req.note), example, 'formatting the parsed request gives the example back byte for byte');
  t.throws(() => parseAddCheckpoint('old 01\n\nx'), 'a leading zero is refused');
  t.throws(() => parseAddCheckpoint(`old 1\n${'AAAA'.repeat(10)}A=\n\nx`), 'a proof line that is not a hash is refused');
});

t.test('frozen cosigned-checkpoint vectors (docs/audit-chain.md) recompute with node:crypto alone', async (t) => {
  const doc = fs.readFileSync(new URL('../../docs/audit-chain.md', import.meta.url), 'utf8');
  const m = /<!-- cosign-vectors:begin -->\n```json\n([\s\S]*?)\n```\n<!-- cosign-vectors:end -->/.exec(doc);
  t.ok(m, 'the vectors block is in the doc');
  const v = JSON.parse(m![1]!).cosigned_checkpoint as {
    timestamp: number;
    signed_message: string;
    witnesses: Record<string, { seed_hex: string; public_key_hex: string; key_id_hex: string; verifier_key: string; cosignature: string }>;
    note: string;
  };
  const logNote = v.note.split('\u2014 witness.example/')[0]!;
  const body = logNote.slice(0, logNote.indexOf('\n\n') + 1);
  t.equal(v.signed_message, `cosignature/v1\ntime ${v.timestamp}\n${body}`);
  let expectNote = logNote;
  for (const [name, w] of Object.entries(v.witnesses)) {
    const seed = Buffer.from(w.seed_hex, 'hex');
    const pk = createPublicKey(priv(seed)).export({ format: 'der', type: 'spki' }).subarray(-32);
    t.equal(pk.toString('hex'), w.public_key_hex, `${name}: public key`);
    const id = sha256(name, Buffer.from([0x0a, 0x04]), pk).subarray(0, 4);
    t.equal(id.toString('hex'), w.key_id_hex, `${name}: key id`);
    t.equal(w.verifier_key, `${name}+${id.toString('hex')}+${Buffer.concat([Buffer.from([4]), pk]).toString('base64')}`, `${name}: verifier key`);
    const ts = Buffer.alloc(8);
    ts.writeBigUInt64BE(BigInt(v.timestamp));
    const sig = sign(null, Buffer.from(v.signed_message), priv(seed));
    const line = `\u2014 ${name} ${Buffer.concat([id, ts, sig]).toString('base64')}\n`;
    t.equal(line, w.cosignature, `${name}: the cosignature line`);
    // And ours agrees.
    t.equal(cosign(body, signingKeyFromSeed(name, seed), v.timestamp), w.cosignature);
    t.equal(cosignerVerifierKey(name, pk), w.verifier_key);
    expectNote += line;
  }
  t.equal(v.note, expectNote, 'the cosigned note is the log note followed by the cosignature lines');
  const keys = Object.values(v.witnesses).map((w) => parseCosignerKey(w.verifier_key));
  t.same(countCosigners(v.note, keys), { valid: ['witness.example/w1', 'witness.example/w2'], invalid: [] });
  const tampered = v.note.replace('\n8\n', '\n9\n');
  t.same(countCosigners(tampered, keys).valid, [], 'no cosignature survives a changed size');
  t.throws(() => parseCosignerKey(Object.values(v.witnesses)[0]!.verifier_key.replace('+BBOY', '+ABOY')), 'a type other than 0x04 is refused');
});
