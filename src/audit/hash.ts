import { hash } from 'node:crypto';

// Hashing and canonical encoding shared by the sealer and every verifier.
// SHA-256 runs on node:crypto (about 3x @noble/hashes here); a test holds both
// to identical bytes.

export function sha256(...parts: (Uint8Array | string)[]): Buffer {
  // One-shot (no Hash object per call): the sealer and the verifiers hash every
  // entry three or four times.
  if (parts.length === 1) return hash('sha256', parts[0]!, 'buffer');
  if (parts.every((p) => typeof p === 'string')) return hash('sha256', parts.join(''), 'buffer');
  // Bytes (the tree's leaves and nodes): copied into one reused buffer rather than a new one per hash.
  let n = 0;
  for (const p of parts) n += typeof p === 'string' ? Buffer.byteLength(p) : p.length;
  if (scratch.length < n) scratch = Buffer.allocUnsafe(Math.max(n, 2 * scratch.length));
  let at = 0;
  for (const p of parts) at += typeof p === 'string' ? scratch.write(p, at, 'utf8') : (scratch.set(p, at), p.length);
  return hash('sha256', scratch.subarray(0, n), 'buffer');
}

/** Scratch space for sha256 of byte parts (hashing is synchronous: no two calls share it at once). */
let scratch = Buffer.allocUnsafe(256);

/** SHA-256 of UTF-8 text or bytes, as lowercase hex (no Buffer made: the entry hashes are hex). */
export function sha256Hex(data: string | Uint8Array): string {
  return hash('sha256', data, 'hex');
}

/**
 * HMAC-SHA-256 (RFC 2104) from two one-shot hashes: H((K^opad) || H((K^ipad) || m)).
 * A Hmac object per call costs more than its two hashes (its key set-up), and
 * the walk computes one for every entry's payload; a test holds it to
 * @noble/hashes' HMAC for keys and messages of every size class.
 */
export function hmacSha256(key: Uint8Array, ...parts: (Uint8Array | string)[]): Buffer {
  const k = key.length > BLOCK ? hash('sha256', key, 'buffer') : key;
  let n = 0;
  for (const p of parts) n += typeof p === 'string' ? Buffer.byteLength(p) : p.length;
  const inner = Buffer.allocUnsafe(BLOCK + n);
  padKey(inner, k, 0x36);
  let at = BLOCK;
  for (const p of parts) at += typeof p === 'string' ? inner.write(p, at, 'utf8') : (inner.set(p, at), p.length);
  padKey(OUTER, k, 0x5c);
  OUTER.set(hash('sha256', inner, 'buffer'), BLOCK);
  return hash('sha256', OUTER, 'buffer');
}

/** SHA-256's block size in bytes: the HMAC key is padded to it. */
const BLOCK = 64;
/** The outer hash's input, reused (hashing is synchronous). */
const OUTER = Buffer.alloc(BLOCK + 32);

function padKey(into: Buffer, key: Uint8Array, pad: number): void {
  for (let i = 0; i < BLOCK; i++) into[i] = (i < key.length ? key[i]! : 0) ^ pad;
}

/**
 * RFC 8785 (JCS) canonical JSON text: object members sorted by UTF-16 code
 * units, no whitespace, numbers and strings as ECMAScript serializes them. A
 * value with no canonical form (NaN, an infinity, a lone surrogate, a BigInt,
 * a nesting deeper than MAX_DEPTH, a top-level undefined) throws. Written for
 * the sealer and the verifiers, which canonicalize every event twice; the
 * `canonicalize` package is the reference it is tested against
 * (test/audit/jcs.test.ts).
 */
export function canonicalize(value: unknown): string {
  // Text parsed from canonical text (an envelope read back) is already in key
  // order: then the engine's own serializer writes the canonical text, with
  // none of the intermediate strings and key arrays of the general walk.
  if (inKeyOrder(value, 0)) return JSON.stringify(value);
  const text = canon(value, 0);
  if (text === undefined) throw new Error('value has no canonical JSON form');
  return text;
}

/** Deeper than this is refused (a cycle would otherwise recurse until the stack runs out). */
const MAX_DEPTH = 256;
/** Surrogates (which must come in pairs). */
const SURROGATE = /[\uD800-\uDFFF]/;

/**
 * Whether JSON.stringify writes `v`'s canonical text: plain objects (no
 * toJSON, Object's prototype) whose keys are in sorted order, arrays without
 * holes or undefined, finite numbers, strings without a lone surrogate. For
 * anything else the general walk decides (and throws where RFC 8785 has no
 * form). JCS writes numbers and escapes strings as ECMAScript's JSON does.
 */
function inKeyOrder(v: unknown, depth: number): boolean {
  switch (typeof v) {
    case 'string':
      return !SURROGATE.test(v) || !hasLoneSurrogate(v);
    case 'number':
      return Number.isFinite(v);
    case 'boolean':
      return true;
    case 'object':
      break;
    default:
      return false;
  }
  if (v === null) return true;
  if (depth >= MAX_DEPTH) return false;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) if (!(i in v) || !inKeyOrder(v[i], depth + 1)) return false;
    return true;
  }
  if (Object.getPrototypeOf(v) !== Object.prototype || typeof (v as { toJSON?: unknown }).toJSON === 'function') return false;
  let prev: string | undefined;
  for (const k in v) {
    // Sorted by UTF-16 code units, as `<` compares strings (and as RFC 8785 sorts).
    if ((prev !== undefined && !(prev < k)) || (SURROGATE.test(k) && hasLoneSurrogate(k))) return false;
    if (!inKeyOrder((v as Record<string, unknown>)[k], depth + 1)) return false;
    prev = k;
  }
  return true;
}

/** Characters JSON escapes, and surrogates (which must come in pairs). */
const SPECIAL = /[\u0000-\u001f"\\\uD800-\uDFFF]/;

/** A string's JSON text as RFC 8785 writes it (throws on a lone surrogate). */
export function str(s: string): string {
  if (!SPECIAL.test(s)) return `"${s}"`;
  if (hasLoneSurrogate(s)) throw new Error('Lone surrogate is not allowed');
  return JSON.stringify(s);
}

function canon(v: unknown, depth: number): string | undefined {
  switch (typeof v) {
    case 'string':
      return str(v);
    case 'number':
      if (!Number.isFinite(v)) throw new Error(`${v} is not allowed`);
      return JSON.stringify(v);
    case 'boolean':
      return v ? 'true' : 'false';
    case 'object':
      break;
    default:
      // undefined, functions and symbols have no JSON form; a BigInt throws.
      return JSON.stringify(v);
  }
  if (v === null) return 'null';
  if (depth >= MAX_DEPTH) throw new Error('nesting too deep (or circular)');
  const o = v as { toJSON?: () => unknown } & Record<string, unknown>;
  if (typeof o.toJSON === 'function') return canon(o.toJSON(), depth + 1);
  if (Array.isArray(v)) {
    let out = '[';
    for (let i = 0; i < v.length; i++) {
      const e = v[i];
      if (i > 0) out += ',';
      out += e === undefined || typeof e === 'symbol' || typeof e === 'function' ? 'null' : canon(e, depth + 1);
    }
    return out + ']';
  }
  const keys = sortKeys(Object.keys(o));
  let out = '{';
  let first = true;
  for (const k of keys) {
    const e = o[k];
    if (e === undefined || typeof e === 'symbol' || typeof e === 'function') continue;
    out += (first ? '' : ',') + str(k) + ':' + canon(e, depth + 1);
    first = false;
  }
  return out + '}';
}

/** Keys in UTF-16 code-unit order, in place: an insertion sort for the few keys of most objects (no work array, as Array#sort allocates). */
function sortKeys(keys: string[]): string[] {
  if (keys.length > 16) return keys.sort();
  for (let i = 1; i < keys.length; i++) {
    const k = keys[i]!;
    let j = i - 1;
    while (j >= 0 && keys[j]! > k) {
      keys[j + 1] = keys[j]!;
      j--;
    }
    keys[j + 1] = k;
  }
  return keys;
}

/** Whether a string holds a surrogate that is not half of a pair (no canonical JSON form, not well-formed Unicode). */
export function hasLoneSurrogate(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = s.charCodeAt(i + 1);
      if (!(next >= 0xdc00 && next <= 0xdfff)) return true;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) return true;
  }
  return false;
}
