import { sha256, sha256Hex } from './hash.ts';

// RFC 6962 / RFC 9162 Merkle tree over entry hashes: leaf = SHA-256(0x00 || d),
// node = SHA-256(0x01 || left || right), split at the largest power of two
// below n. Inclusion and consistency proofs with their verifiers.

const LEAF = Buffer.from([0]);
const NODE = Buffer.from([1]);

export const leafHash = (data: Uint8Array): Buffer => sha256(LEAF, data);
/** The leaf hash of an entry whose hash is given as hex (the verifier's walk). */
export function leafOfHex(entryHashHex: string): Buffer {
  return sha256(leafInput(entryHashHex));
}

/** The same leaf hash as hex (computed where an entry is prechecked, perhaps on another thread). */
export function leafHexOfHex(entryHashHex: string): string {
  return sha256Hex(leafInput(entryHashHex));
}

function leafInput(entryHashHex: string): Buffer {
  // An entry hash's 32 bytes go through one reused buffer (hashing is synchronous); anything else through its own.
  const b = entryHashHex.length === 64 ? LEAF_INPUT : Buffer.allocUnsafe(1 + (entryHashHex.length >> 1));
  b[0] = 0;
  const n = b.write(entryHashHex, 1, 'hex');
  return n === 32 ? b : b.subarray(0, 1 + n);
}

const LEAF_INPUT = Buffer.alloc(33);
export const nodeHash = (l: Uint8Array, r: Uint8Array): Buffer => sha256(NODE, l, r);
export const EMPTY_ROOT = sha256();

function split(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** Root of leaf hashes [lo, hi). */
function subtree(leaves: readonly Buffer[], lo: number, hi: number): Buffer {
  const n = hi - lo;
  if (n === 0) return EMPTY_ROOT;
  if (n === 1) return leaves[lo]!;
  const k = split(n);
  return nodeHash(subtree(leaves, lo, lo + k), subtree(leaves, lo + k, hi));
}

/** Root over the first `size` leaf hashes (already leaf-hashed). */
export function rootOf(leafHashes: readonly Buffer[], size = leafHashes.length): Buffer {
  return subtree(leafHashes, 0, size);
}

/** Incremental root: a stack of perfect subtrees, O(log n) per append. */
export class CompactRange {
  private stack: { size: number; hash: Buffer }[] = [];
  size = 0;
  append(leaf: Buffer): void {
    let node = { size: 1, hash: leaf };
    while (this.stack.length > 0 && this.stack[this.stack.length - 1]!.size === node.size) {
      const left = this.stack.pop()!;
      node = { size: left.size * 2, hash: nodeHash(left.hash, node.hash) };
    }
    this.stack.push(node);
    this.size++;
  }
  /** The perfect subtrees, left to right: what a monitor stores to resume. */
  toJSON(): { size: number; hash: string }[] {
    return this.stack.map((n) => ({ size: n.size, hash: n.hash.toString('hex') }));
  }
  static fromJSON(nodes: readonly { size: number; hash: string }[]): CompactRange {
    const r = new CompactRange();
    for (const n of nodes) {
      if (!Number.isSafeInteger(n.size) || n.size < 1 || !Number.isInteger(Math.log2(n.size)) || !/^[0-9a-f]{64}$/.test(n.hash)) throw new Error('not a compact range');
      const top = r.stack[r.stack.length - 1];
      if (top && top.size <= n.size) throw new Error('compact range sizes must decrease');
      r.stack.push({ size: n.size, hash: Buffer.from(n.hash, 'hex') });
      r.size += n.size;
    }
    return r;
  }
  root(): Buffer {
    if (this.stack.length === 0) return EMPTY_ROOT;
    let acc = this.stack[this.stack.length - 1]!.hash;
    for (let i = this.stack.length - 2; i >= 0; i--) acc = nodeHash(this.stack[i]!.hash, acc);
    return acc;
  }
}

/** RFC 6962 PATH(m, D[n]): inclusion proof of leaf `index` in a tree of `size`. */
export function inclusionProof(leafHashes: readonly Buffer[], index: number, size = leafHashes.length): Buffer[] {
  const path = (m: number, lo: number, hi: number): Buffer[] => {
    const n = hi - lo;
    if (n <= 1) return [];
    const k = split(n);
    return m < k ? [...path(m, lo, lo + k), subtree(leafHashes, lo + k, hi)] : [...path(m - k, lo + k, hi), subtree(leafHashes, lo, lo + k)];
  };
  if (index < 0 || index >= size) throw new Error('index out of range');
  return path(index, 0, size);
}

/** RFC 9162 §2.1.3.2 verification of an inclusion proof. */
export function verifyInclusion(index: number, size: number, leaf: Buffer, proof: readonly Buffer[], root: Buffer): boolean {
  if (index >= size) return false;
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of proof) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      r = nodeHash(p, r);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn >>= 1;
          sn >>= 1;
        }
      }
    } else {
      r = nodeHash(r, p);
    }
    fn >>= 1;
    sn >>= 1;
  }
  return sn === 0 && r.equals(root);
}

/** RFC 6962 PROOF(m, D[n]): consistency proof from size m to size n. */
export function consistencyProof(leafHashes: readonly Buffer[], m: number, n = leafHashes.length): Buffer[] {
  const sub = (m: number, lo: number, hi: number, complete: boolean): Buffer[] => {
    const size = hi - lo;
    if (m === size) return complete ? [] : [subtree(leafHashes, lo, hi)];
    const k = split(size);
    return m <= k ? [...sub(m, lo, lo + k, complete), subtree(leafHashes, lo + k, hi)] : [...sub(m - k, lo + k, hi, false), subtree(leafHashes, lo, lo + k)];
  };
  if (m < 1 || m > n) return [];
  return sub(m, 0, n, true);
}

/** RFC 9162 §2.1.4.2 verification of a consistency proof. */
export function verifyConsistency(m: number, n: number, oldRoot: Buffer, newRoot: Buffer, proof: readonly Buffer[]): boolean {
  if (m === n) return proof.length === 0 && oldRoot.equals(newRoot);
  if (m === 0) return proof.length === 0;
  if (m > n || proof.length === 0) return false;
  let path = [...proof];
  if ((m & (m - 1)) === 0) path = [oldRoot, ...path];
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
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn >>= 1;
          sn >>= 1;
        }
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn >>= 1;
    sn >>= 1;
  }
  return sn === 0 && fr.equals(oldRoot) && sr.equals(newRoot);
}
