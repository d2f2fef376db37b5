// Verifies one audit entry in the browser, trusting nothing the server says
// about it (docs/audit-chain.md is the format):
//   1. the entry: entry_hash = SHA-256("agent-ledger/audit-entry/v1\n" || envelope),
//      the envelope names this sequence number, and the payload recomputes to
//      its salted commitment payload_hash (unless redacted); a version 2 entry
//      is the event itself: its envelope is derived from the event and the link
//      in its metadata, hashed under "agent-ledger/audit-entry/v2\n", and its
//      data recomputes to the link's commitment;
//   2. the inclusion proof: RFC 6962 leaf and node hashing from that
//      entry_hash up to a root;
//   3. the signed checkpoint (C2SP signed note): its origin is this chain's,
//      its size is the proof's, its root is the one the proof reached;
//   4. its Ed25519 signature by the verifier key the person holds (the
//      published one, or one they pinned out of band), with the key id checked.
// SHA-256, HMAC and Ed25519 are WebCrypto's; where a browser lacks Ed25519 in
// WebCrypto, the @noble/ed25519 module the page names is imported instead.
// Plain ESM, no build step. The page wires it: every button with
// data-verify-seq (hidden until this module runs) verifies that entry and
// writes the outcome beside it.

const enc = new TextEncoder();
const ENTRY_PREFIX = 'agent-ledger/audit-entry/v1\n';
const PAYLOAD_PREFIX = 'agent-ledger/audit-payload/v1\n';
const ENTRY_PREFIX_V2 = 'agent-ledger/audit-entry/v2\n';
const PAYLOAD_PREFIX_V2 = 'agent-ledger/audit-payload/v2\n';
/** A version 2 link, `metadata.audit_link`: "2:" sequence ":" prev_hash ":" salt (empty once redacted) ":" payload_hash. */
const LINK = /^2:([1-9][0-9]{0,15}):([0-9a-f]{64}):((?:[0-9a-f]{32})?):([0-9a-f]{64})$/;

const hex = (bytes) => Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, '0')).join('');
const fromHex = (s) => {
  if (typeof s !== 'string' || !/^([0-9a-f]{2})*$/.test(s)) throw new Error('not lowercase hex');
  return Uint8Array.from(s.match(/../g) ?? [], (b) => parseInt(b, 16));
};
const fromBase64 = (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
const concat = (...parts) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
};
const equal = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
const sha256 = async (...parts) => new Uint8Array(await crypto.subtle.digest('SHA-256', concat(...parts)));
async function hmacSha256(key, ...parts) {
  const k = await crypto.subtle.importKey('raw', key, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return new Uint8Array(await crypto.subtle.sign('HMAC', k, concat(...parts)));
}

/** RFC 8785 canonical JSON: keys sorted by UTF-16 code units, ECMAScript number and string forms. */
export function jcs(v) {
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(jcs).join(',')}]`;
  return `{${Object.keys(v)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${jcs(v[k])}`)
    .join(',')}}`;
}

const leafHash = (d) => sha256(Uint8Array.of(0), d);
const nodeHash = (l, r) => sha256(Uint8Array.of(1), l, r);

/** RFC 9162 §2.1.3.2: the root an inclusion proof leads to from leaf `index` of a tree of `size`, or null when the proof has the wrong shape. */
export async function rootFromInclusion(index, size, leaf, proof) {
  if (!(index < size)) return null;
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0) return null;
    if (fn % 2 === 1 || fn === sn) {
      r = await nodeHash(p, r);
      while (fn % 2 === 0 && fn !== 0) {
        fn = Math.floor(fn / 2);
        sn = Math.floor(sn / 2);
      }
    } else r = await nodeHash(r, p);
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 ? r : null;
}

/** "<name>+<hex key id>+<base64(0x01 || public key)>", its key id checked. */
export async function parseVerifierKey(vkey) {
  const m = /^([^+\s]+)\+([0-9a-f]{8})\+([A-Za-z0-9+/]+=*)$/.exec(String(vkey).trim());
  if (!m) throw new Error('the verifier key is not <name>+<key id>+<base64 key>');
  const raw = fromBase64(m[3]);
  if (raw.length !== 33 || raw[0] !== 0x01) throw new Error('the verifier key is not an Ed25519 key');
  const publicKey = raw.subarray(1);
  const id = (await sha256(enc.encode(m[1]), Uint8Array.of(0x0a, 0x01), publicKey)).subarray(0, 4);
  if (hex(id) !== m[2]) throw new Error('the verifier key id does not match its key');
  return { name: m[1], id, publicKey };
}

async function ed25519Verify(publicKey, signature, message, nobleUrl) {
  try {
    const key = await crypto.subtle.importKey('raw', publicKey, { name: 'Ed25519' }, false, ['verify']);
    return await crypto.subtle.verify({ name: 'Ed25519' }, key, signature, message);
  } catch (err) {
    if (!nobleUrl || (err && err.name !== 'NotSupportedError' && err.name !== 'DataError')) throw err;
    const ed = await import(nobleUrl);
    return ed.verifyAsync(signature, message, publicKey);
  }
}

/** The checkpoint's body lines and the signature lines after the blank line. */
function openNote(note) {
  const sep = note.indexOf('\n\n');
  if (sep < 0) throw new Error('the checkpoint has no signature block');
  const body = note.slice(0, sep + 1);
  const lines = body.split('\n');
  if (lines.length !== 4 || lines[3] !== '' || !/^\d+$/.test(lines[1])) throw new Error('the checkpoint body is not origin, size, root');
  return { body, origin: lines[0], size: Number(lines[1]), root: fromBase64(lines[2]), signatures: note.slice(sep + 2).split('\n').filter(Boolean) };
}

async function getJson(url) {
  const res = await fetch(url, { headers: { accept: 'application/json' }, credentials: 'same-origin' });
  const body = await res.json().catch(() => null);
  if (!res.ok) throw new Error(body?.error?.message ?? `the server answered ${res.status}`);
  return body;
}

/** A version 1 entry (its envelope text, hashes and payload copied from the event): its hash and what it says, or the problem. */
async function copiedEntry(entry, seq) {
  const envelope = JSON.parse(entry.envelope);
  const entryHash = await sha256(enc.encode(ENTRY_PREFIX), enc.encode(entry.envelope));
  if (hex(entryHash) !== entry.entry_hash) return { problem: 'the entry hash does not recompute from its envelope' };
  if (envelope.sequence_number !== seq || entry.sequence_number !== seq) return { problem: `the envelope is not entry ${seq}` };
  if (jcs(envelope) !== entry.envelope) return { problem: 'the envelope is not canonical JSON' };
  if (entry.payload === null || entry.payload_salt === null) return { entryHash, eventType: envelope.event_type, payloadChecked: false };
  const commit = await hmacSha256(fromHex(entry.payload_salt), enc.encode(PAYLOAD_PREFIX), enc.encode(jcs(entry.payload)));
  if (hex(commit) !== envelope.payload_hash) return { problem: 'the payload does not match its commitment in the envelope' };
  return { entryHash, eventType: envelope.event_type, payloadChecked: true };
}

/** A version 2 entry (the event itself, carrying its link): its envelope is derived from the event's own fields and the link. */
async function linkedEntry(event, seq) {
  const m = LINK.exec(typeof event?.metadata?.audit_link === 'string' ? event.metadata.audit_link : '');
  if (!m) return { problem: 'the event carries no audit link in the compact form' };
  const [, sequence, prevHash, salt, payloadHash] = m;
  if (Number(sequence) !== seq) return { problem: `the event's link is for entry ${sequence}, not ${seq}` };
  const a = event.metadata.actor;
  const envelope = {
    v: 2,
    org_id: event.metadata.org_id,
    sequence_number: seq,
    prev_hash: prevHash,
    event_id: event.event_id,
    event_type: event.event_type,
    stream: event.stream,
    occurred_at: typeof event.metadata.occurred_at === 'string' ? event.metadata.occurred_at : null,
    actor: a && typeof a.kind === 'string' && typeof a.id === 'string' ? { kind: a.kind, id: a.id } : { kind: 'system', id: 'unknown' },
    payload_hash: payloadHash,
  };
  const entryHash = await sha256(enc.encode(ENTRY_PREFIX_V2), enc.encode(jcs(envelope)));
  if (salt === '') return { entryHash, eventType: event.event_type, payloadChecked: false };
  const commit = await hmacSha256(fromHex(salt), enc.encode(PAYLOAD_PREFIX_V2), enc.encode(jcs(event.data)));
  if (hex(commit) !== payloadHash) return { problem: 'the payload does not match its commitment in the link' };
  return { entryHash, eventType: event.event_type, payloadChecked: true };
}

/**
 * Verifies entry `seq` (either format, docs/audit-chain.md); answers { ok, steps: [{ step, ok, detail }] }, the
 * first failing step last. `entryUrl` answers { entry }, `proofUrl` the
 * inclusion proof with its checkpoint note.
 */
export async function verifyEntry({ seq, origin, verifierKey, entryUrl, proofUrl, nobleUrl }) {
  const steps = [];
  const pass = (step, detail) => steps.push({ step, ok: true, detail });
  const fail = (step, detail) => {
    steps.push({ step, ok: false, detail });
    return { ok: false, steps };
  };
  try {
    const { entry } = await getJson(entryUrl);
    const checked = entry.format === 2 ? await linkedEntry(entry.event, seq) : await copiedEntry(entry, seq);
    if (checked.problem) return fail('entry', checked.problem);
    const entryHash = checked.entryHash;
    const shown = `entry ${seq} (${checked.eventType}) hashes to ${hex(entryHash).slice(0, 16)}…`;
    pass('entry', checked.payloadChecked ? `${shown}, and its payload matches its commitment` : `${shown}; its payload is redacted, its commitment stays`);

    const p = await getJson(proofUrl);
    if (p.entry_hash !== hex(entryHash) || p.leaf_index !== seq - 1) return fail('proof', 'the proof is for another entry');
    const root = await rootFromInclusion(p.leaf_index, p.tree_size, await leafHash(entryHash), p.proof.map(fromHex));
    if (!root) return fail('proof', 'the inclusion proof has the wrong length for its tree');
    pass('proof', `the inclusion proof (${p.proof.length} hashes) leads to root ${hex(root).slice(0, 16)}… of a tree of ${p.tree_size}`);

    const note = openNote(p.checkpoint);
    if (note.origin !== origin) return fail('checkpoint', `the checkpoint is of ${note.origin}, not of this chain (${origin})`);
    if (note.size !== p.tree_size) return fail('checkpoint', `the checkpoint is for size ${note.size}, the proof for ${p.tree_size}`);
    if (!equal(note.root, root)) return fail('checkpoint', 'the inclusion proof does not lead to the signed root: this entry is not in the signed history');
    pass('checkpoint', `the signed checkpoint's root at size ${note.size} is the one the proof reached`);

    const key = await parseVerifierKey(verifierKey);
    const line = note.signatures.map((l) => /^\u2014 (\S+) (\S+)$/.exec(l)).find((m) => m && m[1] === key.name);
    if (!line) return fail('signature', `the checkpoint carries no signature by ${key.name}`);
    const raw = fromBase64(line[2]);
    if (raw.length !== 68 || !equal(raw.subarray(0, 4), key.id)) return fail('signature', 'the signature names another key id');
    if (!(await ed25519Verify(key.publicKey, raw.subarray(4), enc.encode(note.body), nobleUrl))) return fail('signature', `the Ed25519 signature does not verify with ${key.name}`);
    pass('signature', `signed by ${key.name} (key id ${hex(key.id)}), Ed25519 verified in this browser`);
    return { ok: true, steps };
  } catch (err) {
    return fail(['entry', 'proof', 'checkpoint', 'signature'][steps.length] ?? 'signature', `could not check: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** The page's wiring: a verify button per entry, the outcome written beside it. */
function wire() {
  const root = document.querySelector('[data-verify-origin]');
  if (!root) return;
  // The buttons are useless without this module: they appear with it.
  for (const b of root.querySelectorAll('button[data-verify-seq]')) b.hidden = false;
  const keyInput = document.getElementById('verifier-key');
  const pinned = localStorage.getItem(`verifier-key:${root.dataset.verifyOrigin}`);
  if (keyInput && pinned) keyInput.value = pinned;
  keyInput?.addEventListener('change', () => localStorage.setItem(`verifier-key:${root.dataset.verifyOrigin}`, keyInput.value.trim()));
  root.addEventListener('click', async (ev) => {
    const button = ev.target instanceof Element ? ev.target.closest('button[data-verify-seq]') : null;
    if (!button) return;
    ev.preventDefault();
    const seq = Number(button.dataset.verifySeq);
    const out = document.getElementById(`verify-${seq}`);
    if (!out) return;
    out.textContent = 'Verifying…';
    out.dataset.state = 'running';
    const r = await verifyEntry({
      seq,
      origin: root.dataset.verifyOrigin,
      verifierKey: keyInput?.value ?? root.dataset.verifierKey,
      entryUrl: button.dataset.entryUrl,
      proofUrl: button.dataset.proofUrl,
      nobleUrl: root.dataset.nobleUrl,
    });
    out.dataset.state = r.ok ? 'verified' : 'failed';
    const last = r.steps[r.steps.length - 1];
    out.textContent = r.ok ? `Verified: ${r.steps.map((s) => s.detail).join('; ')}.` : `Verification failed at the ${last.step} step: ${last.detail}.`;
  });
}

if (typeof document !== 'undefined') {
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', wire);
  else wire();
}
